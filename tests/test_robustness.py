"""Hostile inputs and hostile environments (issue 11, section 7): ndarray subclasses,
cache entries and documents that are not regular files, absurd output shapes, caches
hammered from several threads, caches that must let go of their memory, and thread
counts that would start thousands of OS threads.

Each test here failed before the fix it covers (see the commit that added it)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import warnings

import numpy as np
import pytest

import hologram as hg
from hologram.compile_api import compile as compile_module
from hologram.compiler import driver
from hologram.core.errors import ArgumentError, DocumentError
from hologram.passes import manager

BACKENDS = ("interp", "cpu_llvm")
pytestmark = pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")


@pytest.fixture(autouse=True)
def fresh(fresh_plugins, monkeypatch, tmp_path):
    monkeypatch.setenv("HOLOGRAM_CACHE_DIR", str(tmp_path / "cache"))


def kernel(inputs: str, outputs: str, body: str, name: str = "k") -> hg.Kernel:
    return hg.compile(f'[kernel]\nname = "{name}"\nversion = "1.0.0"\ninputs = {{ {inputs} }}\n'
                      f'outputs = {{ {outputs} }}\nbody = """\n{body}\n"""\n')


@pytest.fixture(scope="module")
def inc2d():
    return kernel('x = "f32[m, n]"', 'y = "f32[m, n]"', "y = x + 1", name="inc2d")


# ------------------------------------------------------------------- ndarray subclasses
class Tagged(np.ndarray):
    """A user's ndarray subclass, as a library might define one."""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cast", [False, True])
def test_masked_arrays_are_refused_identically(backend, cast):
    k = kernel('x = "f32[n]"', 'y = "f32[n]"', "y = x + 1").on(backend)
    masked = np.ma.masked_array(np.ones(4, np.float32), mask=[1, 0, 1, 0])
    for _ in range(2):  # the second time round, the fast path has a call of this shape
        with pytest.raises(ArgumentError, match="argument 'x' is a masked array") as info:
            k(masked, cast=cast)
        assert "filled" in info.value.hint
        with pytest.raises(ArgumentError, match="out 'y' is a masked array"):
            k(np.ones(4, np.float32), out=np.ma.masked_array(np.zeros(4, np.float32)), cast=cast)
        k(np.ones(4, np.float32), cast=cast)


@pytest.mark.parametrize("backend", BACKENDS)
def test_subclass_inputs_are_read_as_plain_arrays(backend, inc2d):
    k = inc2d.on(backend)
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    for x in (np.asmatrix(data), data.copy().view(Tagged)):
        y = k(x)
        assert type(y) is np.ndarray
        np.testing.assert_array_equal(y, data + 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_subclass_outputs_are_written_in_place_and_returned(backend, inc2d):
    k = inc2d.on(backend)
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    for out in (np.asmatrix(np.zeros((2, 3), np.float32)), np.zeros((2, 3), np.float32).view(Tagged)):
        assert k(data, out=out) is out
        np.testing.assert_array_equal(np.asarray(out), data + 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_memmap_arguments_stay_zero_copy(backend, inc2d, tmp_path):
    k = inc2d.on(backend)
    src = np.memmap(tmp_path / "x.f32", dtype=np.float32, mode="w+", shape=(2, 3))
    src[:] = np.arange(6, dtype=np.float32).reshape(2, 3)
    dst = np.memmap(tmp_path / "y.f32", dtype=np.float32, mode="w+", shape=(2, 3))
    assert k(src, out=dst) is dst
    dst.flush()
    on_disk = np.fromfile(tmp_path / "y.f32", dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(on_disk, np.arange(6, dtype=np.float32).reshape(2, 3) + 1)
    # an output aliasing a memmapped input still gives the unaliased result
    assert k(src, out=src) is src
    np.testing.assert_array_equal(np.asarray(src), np.arange(6, dtype=np.float32).reshape(2, 3) + 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_launch_takes_subclasses_and_refuses_masks(backend, inc2d):
    b = hg.get_backend(backend)
    exe = b.prepare(inc2d.program)
    x = np.asmatrix(np.ones((2, 2), np.float32))
    y = np.asmatrix(np.zeros((2, 2), np.float32))
    b.launch(exe, {"x": x, "y": y}, {}, {"m": 2, "n": 2})
    np.testing.assert_array_equal(np.asarray(y), np.full((2, 2), 2, np.float32))
    with pytest.raises(ArgumentError, match="masked"):
        b.launch(exe, {"x": np.ma.masked_array(x), "y": y}, {}, {"m": 2, "n": 2})


# ------------------------------------------------------------ files that are not files
def _finishes(fn, *args):
    """Run fn(*args) on a daemon thread; (finished, result or exception). A call that
    blocks on a FIFO is released by opening the FIFO's other end, so nothing leaks."""
    box: list = []

    def run():
        try:
            box.append(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box.append(exc)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(60)  # generous: the fixed code returns at once; the old one never did
    return not t.is_alive(), (box[0] if box else None)


def _release(fifo):
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


def test_fifo_cache_entry_is_a_miss_not_a_hang(tmp_path):
    from hologram_cpu_llvm.cache import DiskCache

    disk = DiskCache(tmp_path)
    os.mkfifo(disk.path("key"))
    finished, result = _finishes(disk.load, "key")
    _release(disk.path("key"))
    assert finished, "reading a FIFO cache entry hung"
    assert result is None
    assert not disk.path("key").exists()  # the bad entry is gone; the next store replaces it


def test_bad_cache_entries_cost_a_compile_and_are_replaced(tmp_path, inc2d):
    from hologram_cpu_llvm.backend import CpuLlvmBackend

    from hologram.isa.encoding import program_hash

    b = CpuLlvmBackend(num_threads=1, cache_dir=tmp_path)
    path = b.disk.path(b.cache_key(program_hash(inc2d.program)))
    os.mkfifo(path)
    finished, exe = _finishes(b.prepare, inc2d.program)
    _release(path)
    assert finished, "a FIFO cache entry hung prepare"
    assert not isinstance(exe, BaseException) and not exe.from_cache
    assert path.is_file() and not path.is_symlink()  # replaced by a real entry
    warm = CpuLlvmBackend(num_threads=1, cache_dir=tmp_path).prepare(inc2d.program)
    assert warm.from_cache


def test_huge_cache_entry_is_a_miss(tmp_path):
    from hologram_cpu_llvm.cache import DiskCache

    disk = DiskCache(tmp_path)
    with open(disk.path("key"), "wb") as f:
        f.truncate(1 << 40)  # sparse: one terabyte of nothing
    assert disk.load("key") is None
    assert not disk.path("key").exists()


def _in_child_with_little_memory(code: str) -> subprocess.CompletedProcess:
    """Run `code` in a child limited to 2 GiB of address space, so a regression that
    reads /dev/zero fails with MemoryError there instead of eating this machine."""
    prelude = "import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_cache_entry_linked_to_dev_zero_is_a_miss(tmp_path):
    child = _in_child_with_little_memory(f"""
        from pathlib import Path
        from hologram_cpu_llvm.cache import DiskCache
        disk = DiskCache(Path({str(tmp_path)!r}))
        disk.path("key").symlink_to("/dev/zero")
        assert disk.load("key") is None
        assert not disk.path("key").is_symlink()
        print("ok")
    """)
    assert child.stdout.strip() == "ok", child.stderr


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_compile_file_refuses_devices_with_the_file_named(tmp_path):
    link = tmp_path / "k.toml"
    link.symlink_to("/dev/zero")
    child = _in_child_with_little_memory(f"""
        import hologram as hg
        from hologram.core.errors import DocumentError
        try:
            hg.compile_file({str(link)!r})
        except DocumentError as exc:
            print(exc.message)
    """)
    assert child.stdout.strip() == f"cannot read {link}: not a regular file (a character device)", child.stderr


def test_compile_file_refuses_a_fifo_with_the_file_named(tmp_path):
    fifo = tmp_path / "k.toml"
    os.mkfifo(fifo)
    finished, result = _finishes(hg.compile_file, fifo)
    _release(fifo)
    assert finished, "compile_file on a FIFO hung"
    assert isinstance(result, DocumentError)
    assert result.message == f"cannot read {fifo}: not a regular file (a FIFO)"


def test_compile_file_refuses_a_huge_file(tmp_path):
    big = tmp_path / "k.toml"
    with open(big, "wb") as f:
        f.truncate(1 << 40)
    with pytest.raises(DocumentError, match=r"k\.toml: 1099511627776 bytes, more than the 16777216 bytes allowed"):
        hg.compile_file(big)


def test_compile_file_still_reads_documents_as_text(tmp_path):
    path = tmp_path / "k.toml"
    path.write_bytes(b'[kernel]\r\nname = "crlf"\r\nversion = "1.0.0"\r\ninputs = { x = "f32[n]" }\r\n'
                     b'outputs = { y = "f32[n]" }\r\nbody = "y = x * 2"\r\n')
    k = hg.compile_file(path)
    np.testing.assert_array_equal(k.on("interp")(np.ones(3, np.float32)), np.full(3, 2, np.float32))
    (tmp_path / "bad.toml").write_bytes(b"\xff\xfe")
    with pytest.raises(DocumentError, match="not UTF-8 text"):
        hg.compile_file(tmp_path / "bad.toml")


# --------------------------------------------------------------------- absurd shapes
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_output_too_big_to_allocate_is_an_argument_error(backend):
    k = kernel('x = "f32[n]"', 'y = "f32[99999999999999]"', "y = 1.0").on(backend)
    with pytest.raises(ArgumentError) as info:
        k(np.ones(4, np.float32))
    assert info.value.message == ("k(): cannot allocate output 'y' (f32[99999999999999]) of shape "
                                  "(99999999999999,): 399999999999996 bytes (364 TiB), more than this "
                                  "machine can give")


@pytest.mark.parametrize("backend", BACKENDS)
def test_symbol_derived_outputs_beyond_any_array_are_argument_errors(backend):
    k = kernel('x = "f32[n]"', 'y = "f32[n, n, n]"', "y[i, j, l] = x[i] * x[j] * x[l]").on(backend)
    x = np.ones(3_000_000, np.float32)
    with pytest.raises(ArgumentError) as info:
        k(x)
    assert info.value.message == ("k(): cannot allocate output 'y' (f32[n, n, n]) of shape "
                                  "(3000000, 3000000, 3000000) for n = 3000000: 108000000000000000000 bytes "
                                  "(93.7 EiB), more than a numpy array can hold")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_temporary_too_big_to_allocate_is_an_argument_error(backend):
    body = "t[i, j] = x[i] * x[j]\ny = sum(t, axis=1)"  # at O0 `t` stays an n x n temporary
    k = hg.compile(f'[kernel]\nname = "tmp"\nversion = "1.0.0"\ninputs = {{ x = "f32[n]" }}\n'
                   f'outputs = {{ y = "f32[n]" }}\nbody = """\n{body}\n"""\n', opt="O0").on(backend)
    assert [t.name for t in k.program.temps] == ["t"]
    with pytest.raises(ArgumentError) as info:
        k(np.ones(3_000_000, np.float32))
    assert info.value.message == ("cannot allocate temporary buffer 't' (9000000000000 elements of f32): "
                                  "36000000000000 bytes (32.7 TiB), more than this machine can give")


# --------------------------------------------------------------- caches under threads
def _hammer(work, nthreads: int = 8) -> list[BaseException]:
    errors: list[BaseException] = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as CPython allows

    def run(t):
        try:
            work(t)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)
    try:
        workers = [threading.Thread(target=run, args=(t,)) for t in range(nthreads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        sys.setswitchinterval(interval)
    return errors


def test_memory_cache_survives_eight_threads():
    from hologram_cpu_llvm.cache import MemoryCache

    cache = MemoryCache(2)  # three keys for two places: nearly every put evicts

    def work(t):  # before the lock, every run raised KeyError
        for i in range(100_000):
            key = (i * 7 + t) % 3
            if cache.get(key) is None:
                cache.put(key, key)
    assert _hammer(work) == []
    assert len(cache) == 2


def test_interp_prepare_survives_eight_threads():
    from hologram_interp.backend import InterpBackend

    programs = [kernel('x = "f32[n]"', 'y = "f32[n]"', f"y = x + {i}", name=f"p{i}").program for i in range(3)]
    b = InterpBackend(cache_size=2)

    def work(t):  # before the lock: KeyError in 6 runs of 6 (a race, so not a proof)
        for i in range(10_000):
            p = programs[(i * 7 + t) % 3]
            assert b.prepare(p).program is p
    assert _hammer(work) == []


# ---------------------------------------------------------------- what caches keep
def test_clear_cache_empties_every_in_process_cache():
    k = kernel('x = "f32[n]"', 'y = "f32[n]"', "y = x * 3 + 1", name="cached")
    x = np.ones(4, np.float32)
    k.on("interp")(x), k.on("cpu_llvm")(x)
    interp, llvm = hg.get_backend("interp"), hg.get_backend("cpu_llvm")
    assert len(interp._cache) and len(llvm._memory) and len(manager._CACHE)
    assert compile_module.compile_document.cache_info().currsize and driver.compile_program.cache_info().currsize
    hg.clear_cache()
    assert len(interp._cache) == len(llvm._memory) == len(manager._CACHE) == 0
    assert compile_module.compile_document.cache_info().currsize == driver.compile_program.cache_info().currsize == 0


def test_every_in_process_cache_is_bounded():
    from hologram_cpu_llvm.backend import CpuLlvmBackend
    from hologram_interp.backend import InterpBackend

    assert compile_module.compile_document.cache_info().maxsize == compile_module.CACHE_SIZE
    assert driver.compile_program.cache_info().maxsize == driver.CACHE_SIZE
    assert manager._CACHE.size == manager.CACHE_SIZE
    assert InterpBackend()._cache.size > 0
    assert CpuLlvmBackend(cache_dir=False)._memory.size > 0


# ------------------------------------------------------------------- thread counts
def test_an_absurd_thread_count_is_capped_with_a_warning(monkeypatch):
    from hologram_cpu_llvm import threads
    from hologram_cpu_llvm.backend import CpuLlvmBackend

    cap = threads.max_threads()
    assert cap == 4 * (os.cpu_count() or 1)
    monkeypatch.setenv("HOLOGRAM_NUM_THREADS", "100000")
    with pytest.warns(RuntimeWarning, match=f"HOLOGRAM_NUM_THREADS=100000 is more than {cap}"):
        assert threads.thread_count() == cap
    with pytest.warns(RuntimeWarning, match=f"num_threads=100000 is more than {cap}"):
        assert CpuLlvmBackend(num_threads=100000, cache_dir=False).num_threads == cap
    monkeypatch.setenv("HOLOGRAM_NUM_THREADS", str(cap))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert threads.thread_count() == cap


def test_pools_never_exceed_the_cap():
    from hologram_cpu_llvm import threads

    cap = threads.max_threads()
    assert threads.pool(100000).size == cap
    native = threads.native(100000)
    assert native is None or native.size == cap
