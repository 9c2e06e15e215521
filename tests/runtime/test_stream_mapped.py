"""`hologram.stream` reading a memmap's pages in place under the backend's SIGBUS guard
(issue 25, item 6; docs/streaming.md, "Reading mapped pages in place"): the results are
numpy's, the same bits as through `pread` for the same chunks, and a pass read only in
place has chunks of a 32 MiB window; every window mapped (the next one by the reader
thread, ahead) is watched, two at most alive; a file truncated under the kernel is the
error `pread` gives, the process alive; the guard chains every other SIGBUS to the
handler before it (faulthandler's report) and puts that handler back.

A SIGBUS the guard does not take kills the process, so every test that could take one
runs in a child process (`_child`)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hologram as hg
from hologram.streaming.io import FileSource, source_for
from hologram.streaming.mapped import WindowSource, in_place_reads

pytestmark = pytest.mark.skipif("cpu_llvm" not in hg.list_backends() or not sys.platform.startswith("linux"),
                                reason="the fault guard is cpu_llvm's, on Linux")


def kernel(inputs: str, outputs: str, body: str, backend: str = "cpu_llvm") -> hg.Kernel:
    doc = f'[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = {{ {inputs} }}\noutputs = {{ {outputs} }}\n' \
          f'body = """\n{body}\n"""\n'
    return hg.compile(doc, file="k.toml").on(backend)


def test_cpu_llvm_reads_a_memmap_in_place_and_the_interpreter_with_pread(tmp_path):
    np.save(tmp_path / "x.npy", np.ones(1000, np.float32))
    m = np.load(tmp_path / "x.npy", mmap_mode="r")
    total = kernel('x = "f32[n]"', 's = "f32"', "s = sum(x)")
    in_place = in_place_reads([total], 1 << 20)
    assert in_place is not None
    src = source_for("k", "x", m, in_place)
    try:
        assert isinstance(src, WindowSource)
    finally:
        src.close()
    assert in_place_reads([total.on("interp")], 1 << 20) is None
    src = source_for("k", "x", m, None)
    try:
        assert isinstance(src, FileSource)
    finally:
        src.close()


@pytest.mark.parametrize("pool", [4096, 1 << 16, 64 << 20])
def test_results_in_place_are_numpys_and_the_bits_of_pread(tmp_path, pool):
    """Windows of one chunk (pool 4096) to one window for the file; reductions, two
    passes (softmax), a row output to a second memmap, loop dimensions. The file is
    smaller than a pool slot (SLOT_BYTES), so in place and `pread` have the same chunks,
    and the same bits (larger passes read in place have larger chunks: the next tests)."""
    rng = np.random.default_rng(5)
    n = 50_001
    np.save(tmp_path / "x.npy", rng.standard_normal(n).astype(np.float32))
    np.save(tmp_path / "rows.npy", rng.standard_normal((n // 7, 7)).astype(np.float32))
    x = np.load(tmp_path / "x.npy", mmap_mode="r")
    rows = np.load(tmp_path / "rows.npy", mmap_mode="r")
    total = kernel('x = "f32[n]"', 's = "f64"', "s = sum(f64(x))")
    top = kernel('x = "f32[n]"', 'i = "i64"', "i = argmax(x)")
    softmax = kernel('x = "f32[n]"', 'y = "f32[n]"', "m = max(x)\ne = exp(x - m)\ny = e / sum(e)")
    scale = kernel('x = "f32[d]"', 'y = "f32[d]"', "y = x * 2 + 1")
    y = np.lib.format.open_memmap(tmp_path / "y.npy", "w+", np.float32, (n,))
    z = np.lib.format.open_memmap(tmp_path / "z.npy", "w+", np.float32, rows.shape)

    s = hg.stream(total, x, pool_bytes=pool)
    assert s == hg.stream(total.on("interp"), x, pool_bytes=pool)  # the same chunks: the same bits
    np.testing.assert_allclose(s, np.sum(x, dtype=np.float64), rtol=1e-12)
    assert hg.stream(top, x, pool_bytes=pool) == np.argmax(x)
    hg.stream(softmax, x, out=y, pool_bytes=pool)
    e = np.exp(np.asarray(x, np.float64) - np.max(x))
    np.testing.assert_allclose(y, e / e.sum(), rtol=1e-5, atol=1e-12)
    hg.stream(scale, rows, out=z, pool_bytes=pool)
    np.testing.assert_array_equal(z, rows * np.float32(2) + np.float32(1))


def test_in_place_through_one_file_reads_each_chunk_before_writing_it(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(30_000, dtype=np.float32))
    m = np.load(tmp_path / "x.npy", mmap_mode="r+")
    hg.stream(kernel('x = "f32[n]"', 'y = "f32[n]"', "y = x * 2"), m, out=m, pool_bytes=1 << 14)
    np.testing.assert_array_equal(np.load(tmp_path / "x.npy"), np.arange(30_000, dtype=np.float32) * 2)


def _watched() -> list[tuple[int, int]]:
    """The ranges cpu_llvm's SIGBUS guard watches now (start, end)."""
    from hologram_cpu_llvm.abi import GUARD_SLOT_BYTES, GUARD_SLOT_COUNT, GUARD_SLOTS
    from hologram_cpu_llvm.fault_guard import ADDRESS

    import ctypes
    out = []
    for slot in range(GUARD_SLOT_COUNT):
        start, end = (ctypes.c_uint64 * 2).from_address(ADDRESS + GUARD_SLOTS + slot * GUARD_SLOT_BYTES)
        if start:
            out.append((start, end))
    return out


def _mappings_of(path) -> int:
    """How many mappings of the file at `path` this process has (/proc/self/maps)."""
    ino = os.stat(path).st_ino
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if len(line.split()) >= 6 and int(line.split()[4]) == ino)


def test_every_window_is_watched_while_mapped_and_two_at_most_are_alive(tmp_path, monkeypatch):
    """The reader thread maps the next window while the kernel runs on the current one:
    at every chunk's end, each window the source has mapped (the one computed on and
    the one read ahead) lies in a range the guard watches, and the file is mapped at
    most twice besides the caller's own memmap (two windows: the pool's two slots)."""
    n = 8 << 20  # 32 MiB of f32; pool 8 MiB: windows of one chunk of ~4 MiB
    np.save(tmp_path / "x.npy", np.arange(n, dtype=np.float32) % 97)
    x = np.load(tmp_path / "x.npy", mmap_mode="r")
    total = kernel('x = "f32[n]"', 's = "f64"', "s = sum(f64(x))")
    seen, mapped = [], []
    computed, map_window = WindowSource.computed, WindowSource._map

    def mapping(self, start, n):  # in the reader thread
        w = map_window(self, start, n)
        mapped.append(_mappings_of(tmp_path / "x.npy") - 1)
        return w

    def checked(self, start):
        watched = _watched()
        for w in self.windows.values():
            lo = w.rows.ctypes.data
            assert any(a <= lo and lo + w.rows.nbytes <= b for a, b in watched), (start, w.first, watched)
        seen.append((len(self.windows), _mappings_of(tmp_path / "x.npy") - 1))
        return computed(self, start)

    monkeypatch.setattr(WindowSource, "computed", checked)
    monkeypatch.setattr(WindowSource, "_map", mapping)
    s = hg.stream(total, x, pool_bytes=8 << 20)
    assert s == np.sum(np.arange(n, dtype=np.float64) % 97)
    assert len(seen) >= 3, seen  # several windows
    assert max(alive for alive, _ in seen) <= 2 and max(maps for _, maps in seen) <= 2, seen
    assert len(mapped) == len(seen) and max(mapped) <= 2, mapped
    assert _watched() == [] and _mappings_of(tmp_path / "x.npy") == 1  # all unmapped, unwatched after


def test_a_pass_read_in_place_takes_one_launch_per_window_of_32_mib(tmp_path, monkeypatch):
    """Chunks of a pass reading only in place are up to args.IN_PLACE_BYTES (one window
    each), not SLOT_BYTES: a 40 MiB memmap is two windows and two kernel launches; the
    bits are those of the same array in memory (the same chunks), near numpy's f64 sum."""
    from hologram.streaming.args import IN_PLACE_BYTES, SLOT_BYTES

    n = 10 << 20
    data = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    np.save(tmp_path / "x.npy", data)
    x = np.load(tmp_path / "x.npy", mmap_mode="r")
    total = kernel('x = "f32[n]"', 's = "f32"', "s = sum(x)")
    sizes = []
    read = WindowSource.read

    def counted(self, start, n, buf):
        got = read(self, start, n, buf)
        sizes.append(got.nbytes)
        return got

    monkeypatch.setattr(WindowSource, "read", counted)
    s = hg.stream(total, x)
    assert len(sizes) == 2 and SLOT_BYTES < sizes[0] <= IN_PLACE_BYTES, sizes
    assert s.tobytes() == hg.stream(total, data).tobytes()
    np.testing.assert_allclose(s, np.sum(data, dtype=np.float64), rtol=1e-6)


PRELUDE = """
    import ctypes, faulthandler, os, signal, sys
    import numpy as np
    import hologram as hg
    from hologram.core.errors import StreamError

    def kernel(inputs, outputs, body, backend="cpu_llvm"):
        doc = (f'[kernel]\\nname = "k"\\nversion = "1.0.0"\\ninputs = {{ {inputs} }}\\n'
               f'outputs = {{ {outputs} }}\\nbody = \"\"\"\\n{body}\\n\"\"\"\\n')
        return hg.compile(doc, file="k.toml").on(backend)

    def installed():
        from hologram_cpu_llvm.signals import SIGACTION, SigAction
        act = SigAction()
        SIGACTION(signal.SIGBUS, None, ctypes.addressof(act))
        return act.handler or 0
"""


def _child(code: str, folder, expect: int = 0) -> subprocess.CompletedProcess:
    """`code` run in a fresh process, which must exit with `expect` (a SIGBUS is -7)."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(PRELUDE) + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=300, cwd=str(folder))
    assert done.returncode == expect, f"exit {done.returncode}: {done.stderr[-3000:]}"
    return done


TRUNCATE_DURING = """
    k = kernel('x = "f32[n]", z = "f32[n]"', 's = "f32"', "s = sum(x + z)", backend)
    n = 1 << 18
    np.save("x.npy", np.ones(n, np.float32))
    m = np.load("x.npy", mmap_mode="r")
    fd = os.open("x.npy", os.O_RDWR)

    def chunks():  # read by the same reader thread, after x's rows of each chunk
        yield np.zeros(1000, np.float32)
        os.ftruncate(fd, 4096)
        yield np.zeros(n - 1000, np.float32)

    try:
        hg.stream(k, m, chunks(), pool_bytes=POOL)
        print("no error")
    except StreamError as e:
        print(e.message)
"""


def test_a_file_truncated_under_the_kernel_is_the_error_pread_gives(tmp_path):
    """The first window (two chunks of 64 Ki rows) is mapped and watched at the first
    chunk; the truncation comes after, so the kernel's loads from the lost pages fault:
    the guard turns them into the error a short `pread` is, and the process lives on.
    The interpreter, reading with `pread`, reports the same error at the next chunk (its
    first was read before the truncation), so the bytes it counts as missing differ."""
    said = {}
    for backend in ("cpu_llvm", "interp"):
        code = f"backend = {backend!r}\nPOOL = 1 << 20\n" + textwrap.dedent(TRUNCATE_DURING) + \
            "print('handler back:', installed() == 0)\n"
        lines = _child(code, tmp_path).stdout.strip().splitlines()
        said[backend] = lines[-2]
        assert lines[-1] == "handler back: True", lines
    for message in said.values():
        assert message.startswith("stream(k): input 'x' (") and "x.npy): the file ended" in message, said
        assert message.endswith("bytes early while streaming from it"), said


def test_a_file_truncated_between_windows_is_the_same_error(tmp_path):
    """Windows of a few chunks: the truncation lands before some window is mapped (the
    size check refuses it) or under the kernel (the guard): either way the error."""
    code = "backend = 'cpu_llvm'\nPOOL = 4096\n" + textwrap.dedent(TRUNCATE_DURING)
    line = _child(code, tmp_path).stdout.strip().splitlines()[-1]
    assert line.startswith("stream(k): input 'x' (") and line.endswith("bytes early while streaming from it"), line


GUARDED = """
    import mmap
    k = kernel('x = "f32[n]"', 's = "f64"', "s = sum(f64(x))")
    k(np.ones(4, np.float32))  # loaded: the backend has its guard
    guard = k.backend.fault_guard()
    np.ones(1 << 20, np.float32).tofile("x.bin")
    fd = os.open("x.bin", os.O_RDWR)
    window = mmap.mmap(fd, 4 << 20, prot=mmap.PROT_READ)
    rows = np.frombuffer(window, np.float32)
"""


def guarded(body: str) -> str:
    return textwrap.dedent(GUARDED) + textwrap.dedent(body)


def test_the_guard_gives_zeros_for_lost_pages_of_a_watched_range_and_records_it(tmp_path):
    done = _child(guarded("""
        before = installed()
        assert guard.engage()
        watch = guard.watch(rows.ctypes.data, rows.nbytes)
        os.ftruncate(fd, 1 << 20)  # a quarter of the pages are left
        print(k(rows), watch.faulted(), watch.close(), installed() != before)
        guard.disengage()
        print(installed() == before)
    """), tmp_path)
    assert done.stdout.split() == [str(float(1 << 18)), "True", "True", "True", "True"], done.stdout


def test_a_fault_outside_every_watched_range_reaches_faulthandler(tmp_path):
    """faulthandler (installed first) reports a SIGBUS the guard does not own, and the
    process dies of it as it would without the guard."""
    done = _child(guarded("""
        faulthandler.enable()
        assert guard.engage()
        watch = guard.watch(rows.ctypes.data, 4096)  # the first page only
        os.ftruncate(fd, 4096)
        print("touching", flush=True)
        print(float(rows[-1]))
    """), tmp_path, expect=-7)
    assert "touching" in done.stdout
    assert "Fatal Python error: Bus error" in done.stderr, done.stderr


def test_a_sigbus_sent_with_kill_is_not_taken_for_a_fault(tmp_path):
    done = _child(guarded("""
        assert guard.engage()
        watch = guard.watch(rows.ctypes.data, rows.nbytes)
        os.kill(os.getpid(), signal.SIGBUS)
        print("still alive")
    """), tmp_path, expect=-7)
    assert "still alive" not in done.stdout


def test_the_guard_is_not_put_over_a_handler_installed_over_it(tmp_path):
    """faulthandler enabled while the guard is in place chains to it; putting the guard
    in front of faulthandler again would make a cycle, so it is refused (the stream
    then reads with pread) until faulthandler takes itself off."""
    done = _child(guarded("""
        assert guard.engage()
        faulthandler.enable()
        guard.disengage()  # faulthandler stays
        print(guard.engage())
        faulthandler.disable()  # ours is back
        print(guard.engage())
        guard.disengage()
        print(installed() == 0)
        total = kernel('x = "f32[n]"', 's = "f32"', "s = sum(x)")
        np.save("y.npy", np.ones(5000, np.float32))
        faulthandler.enable()
        print(float(hg.stream(total, np.load("y.npy", mmap_mode="r"), pool_bytes=4096)))
    """), tmp_path)
    assert done.stdout.split() == ["False", "True", "True", "5000.0"], done.stdout
