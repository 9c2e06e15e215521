"""`hologram.stream` and the files behind memmaps (issue 21, section 3): an output that
overlaps an input without being it is refused however the two reach the same bytes (one
mapping, two mappings of one file, a file read with `pread`), and a memmap whose file is
shorter than its mapping, or whose writes fail, is a `StreamError`, never a SIGBUS.

A SIGBUS kills the process that takes it, so every test that could take one runs its
stream in a child process (`_child`) and holds it to exiting cleanly."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hologram as hg
from hologram.core.errors import StreamError

BACKENDS = hg.list_backends()
SMALL = 1 << 12  # bytes: chunks of a few hundred rows at most


def kernel(inputs: str, outputs: str, body: str, backend: str = "interp") -> hg.Kernel:
    doc = f'[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = {{ {inputs} }}\noutputs = {{ {outputs} }}\n' \
          f'body = """\n{body}\n"""\n'
    return hg.compile(doc, file="k.toml").on(backend)


def saved(path, array: np.ndarray) -> str:
    np.save(str(path), array)
    return str(path)


# -------------------------------------------------------------------------- overlap
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_shifted_overlap_through_a_memmaps_file_is_refused(backend, tmp_path):
    """The issue's reproducer: `x[:-1]` in, `x[1:]` out of one r+ memmap (the input is
    read with pread, so no array of it is left to compare), and the reverse; then the
    same bytes through two mappings of the file. The file is left as it was."""
    x = np.arange(5001, dtype=np.float32)
    path = saved(tmp_path / "x.npy", x)
    k = kernel('x = "f32[n]"', 'y = "f32[n]"', "y = x * 2", backend)
    m = np.load(path, mmap_mode="r+")
    for given, out in ((m[:-1], m[1:]), (m[1:], m[:-1])):
        with pytest.raises(StreamError, match="out 'y' overlaps input 'x' without being it") as info:
            hg.stream(k, given, out=out, pool_bytes=SMALL)
        assert "x.npy" in str(info.value) and "in place" in info.value.hint
    other = np.load(path, mmap_mode="r")  # a second mapping: other addresses, the same bytes
    with pytest.raises(StreamError, match="out 'y' overlaps input 'x'"):
        hg.stream(k, other[2:], out=m[:-2], pool_bytes=SMALL)
    np.testing.assert_array_equal(np.load(path), x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_same_bytes_through_two_mappings_stream_in_place(backend, tmp_path):
    x = np.arange(5000, dtype=np.float32)
    path = saved(tmp_path / "x.npy", x)
    k = kernel('x = "f32[n]"', 'y = "f32[n]"', "y = x * 2", backend)
    hg.stream(k, np.load(path, mmap_mode="r"), out=np.load(path, mmap_mode="r+"), pool_bytes=SMALL)
    np.testing.assert_array_equal(np.load(path), x * 2)


def test_an_input_read_whole_may_not_overlap_a_row_output():
    """`g` is read by every chunk; a chunk written over it would change what the later
    chunks read. Refused, as is a loop-dimension stream's shared input."""
    k = kernel('x = "f32[n, d]", g = "f32[d]"', 'y = "f32[n, d]"', "y = x * g")
    buf = np.zeros((50, 4), np.float32)
    with pytest.raises(StreamError, match="out 'y' overlaps input 'g', which every chunk reads"):
        hg.stream(k, np.ones((50, 4), np.float32), buf[0], out=buf, pool_bytes=SMALL)
    items = kernel('x = "f32[d]", g = "f32[d]"', 'y = "f32[d]"', "y = x * g")
    with pytest.raises(StreamError, match="out 'y' overlaps input 'g', which every chunk reads"):
        hg.stream(items, np.ones((50, 4), np.float32), buf[0], out=buf, pool_bytes=SMALL)
    assert not buf.any()


def test_loop_dimensions_refuse_a_shifted_overlap_through_a_file(tmp_path):
    path = saved(tmp_path / "x.npy", np.ones((100, 4), np.float32))
    items = kernel('x = "f32[d]"', 'y = "f32[d]"', "y = x * 2")
    m = np.load(path, mmap_mode="r+")
    with pytest.raises(StreamError, match="out 'y' overlaps input 'x' without being it"):
        hg.stream(items, m[:-1], out=m[1:], pool_bytes=SMALL)
    hg.stream(items, m, out=m, pool_bytes=SMALL)
    assert (np.load(path) == 2).all()


# ------------------------------------------------------------- files that fail
PRELUDE = """
    import os, signal, resource
    import numpy as np
    import hologram as hg
    from hologram.core.errors import StreamError

    def kernel(inputs, outputs, body):
        doc = (f'[kernel]\\nname = "k"\\nversion = "1.0.0"\\ninputs = {{ {inputs} }}\\n'
               f'outputs = {{ {outputs} }}\\nbody = \"\"\"\\n{body}\\n\"\"\"\\n')
        return hg.compile(doc, file="k.toml").on("interp")

    def outcome(run):
        try:
            run()
        except StreamError as e:
            return "StreamError: " + str(e).replace("\\n", " | ")
        return "no error"
"""


def _child(code: str, folder) -> str:
    """The last line `code` printed, run in a fresh process that must exit normally
    (a SIGBUS would end it with -7)."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(PRELUDE) + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=300, cwd=str(folder),
                          env={**os.environ, "HOLOGRAM_BACKEND": "interp"})
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    return done.stdout.strip().splitlines()[-1]


def test_a_memmap_whose_file_was_truncated_is_an_error_not_a_sigbus(tmp_path):
    """The issue's reproducer (np.load, truncate, stream), and a copy-on-write memmap,
    which is read in place: both refused before anything runs."""
    line = _child("""
        np.save("x.npy", np.ones(1 << 16, np.float32))
        m = np.load("x.npy", mmap_mode="r")
        c = np.load("x.npy", mmap_mode="c")
        os.truncate("x.npy", 4096 * 4)
        k = kernel('x = "f32[n]"', 's = "f32"', "s = sum(x)")
        print(" || ".join(outcome(lambda: hg.stream(k, a, pool_bytes=4096)) for a in (m, c)))
    """, tmp_path)
    for result in line.split(" || "):
        assert result.startswith("StreamError: stream(k): input 'x'") and "x.npy" in result, line
        assert "the file ended 245888 bytes early" in result, line


def test_an_input_truncated_while_it_streams_is_an_error(tmp_path):
    """A second input's chunks (a generator, read by the same reader thread) truncate the
    file of the first after its first chunk: named (and reopened by name), or deleted
    before and truncated through a descriptor kept open."""
    line = _child("""
        k = kernel('x = "f32[n]", z = "f32[n]"', 's = "f32"', "s = sum(x + z)")
        n = 1 << 16
        results = []
        for deleted in (False, True):
            np.save("x.npy", np.ones(n, np.float32))
            m = np.load("x.npy", mmap_mode="r")
            fd = os.open("x.npy", os.O_RDWR)
            if deleted:
                os.unlink("x.npy")

            def chunks():
                yield np.zeros(1000, np.float32)
                os.ftruncate(fd, 4096)
                yield np.zeros(n - 1000, np.float32)

            try:
                hg.stream(k, m, chunks(), pool_bytes=4096)
                results.append("no error")
            except StreamError as e:
                results.append(e.message)
            os.close(fd)
        print(" || ".join(results))
    """, tmp_path)
    named, deleted = line.split(" || ")
    for message in (named, deleted):
        assert message.startswith("stream(k): input 'x'") and "bytes early" in message, line


def test_an_output_whose_writes_fail_is_an_error_not_a_sigbus(tmp_path):
    """An output memmap whose file was renamed (so its name no longer reaches it) is
    written through a descriptor: a write past RLIMIT_FSIZE (SIGXFSZ ignored) fails
    with EFBIG, which is an error naming the output. Through the mapping, the same
    writes would have bypassed the limit, and on a full filesystem raised SIGBUS."""
    line = _child("""
        n = 1 << 16
        y = np.lib.format.open_memmap("y.npy", "w+", np.float32, (n,))
        os.rename("y.npy", "moved.npy")
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, resource.RLIM_INFINITY))  # half the file
        k = kernel('x = "f32[n]"', 'y = "f32[n]"', "y = x * 2")
        print(outcome(lambda: hg.stream(k, np.ones(n, np.float32), out=y, pool_bytes=4096)))
    """, tmp_path)
    assert line.startswith("StreamError: stream(k): out 'y'") and "File too large" in line, line


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0 or shutil.which("unshare") is None
                    or shutil.which("mount") is None,
                    reason="mounting a 1 MiB tmpfs in a private mount namespace needs root, unshare and mount")
def test_an_output_on_a_full_filesystem_is_an_error_not_a_sigbus(tmp_path):
    """The issue's third SIGBUS: an output memmap, renamed, on a full tmpfs (mounted in
    the child's own mount namespace, gone when it exits)."""
    folder = tmp_path / "small"
    folder.mkdir()
    code = f"""
        os.chdir({str(folder)!r})
        n = 1 << 20  # 4 MiB of output on a 1 MiB filesystem: the file is sparse until written
        y = np.lib.format.open_memmap("y.npy", "w+", np.float32, (n,))
        os.rename("y.npy", "moved.npy")
        k = kernel('x = "f32[n]"', 'y = "f32[n]"', "y = x * 2")
        print(outcome(lambda: hg.stream(k, np.ones(n, np.float32), out=y, pool_bytes=1 << 16)))
    """
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(PRELUDE) + textwrap.dedent(code))
    done = subprocess.run(["unshare", "-m", "sh", "-c",
                           f"mount -t tmpfs -o size=1m tmpfs {folder} && exec {sys.executable} {script}"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "HOLOGRAM_BACKEND": "interp"})
    if done.returncode > 0 and not done.stdout and any(w in done.stderr for w in ("mount", "unshare")):
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()[-200:]}")  # (a container without the right)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith("StreamError: stream(k): out 'y'") and "No space left on device" in line, line
