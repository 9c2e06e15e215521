"""Kernels pickle as their program's encoding and interface: they travel to other
processes with no document, bundle file or compiler there, and each process prepares a
kernel once however many copies it receives."""

from __future__ import annotations

import multiprocessing
import pickle

import numpy as np
import pytest
from repo_paths import KERNELS

import hologram as hg
from hologram.bundles.build import build
from hologram.core.errors import HologramError
from hologram.isa.encoding import program_hash

X = np.linspace(-2, 2, 50, dtype=np.float32)


def softmax_sum(kernel) -> tuple[float, int]:
    """In a worker: the kernel's result, and which object ran it."""
    return float(kernel(X).sum()), id(kernel)


def test_a_compiled_kernel_round_trips():
    k = hg.compile_file(KERNELS / "softmax.toml")
    copy = pickle.loads(pickle.dumps(k))
    assert copy is not k and program_hash(copy.program) == program_hash(k.program)
    assert copy.signature == k.signature and copy.version == k.version and copy.summary == k.summary
    np.testing.assert_array_equal(copy(X), k(X))
    assert copy.emit("ir") == k.emit("ir") and copy.stats()["O2"] == k.stats()["O2"]  # the definition travels
    assert pickle.loads(pickle.dumps(k)) is copy  # the same kernel again: the same, prepared object
    assert pickle.loads(pickle.dumps(k.on("interp"))).backend.name == "interp"


def test_a_library_from_a_bundle_round_trips(tmp_path):
    build([KERNELS], "stdlib", "1.0.0", tmp_path / "s.hgb", cache_dir=False, jobs=1)
    lib = hg.load_bundle(tmp_path / "s.hgb")
    copy = pickle.loads(pickle.dumps(lib))
    assert sorted(copy) == sorted(lib)
    (tmp_path / "s.hgb").unlink()  # nothing refers back to the file
    np.testing.assert_array_equal(copy.softmax(X), lib.softmax(X))
    lo, hi = np.float32(2), np.ones(4, np.float32)
    np.testing.assert_array_equal(copy.axpy(lo, hi, hi), np.full(4, 3, np.float32))


def test_a_trusted_bundles_object_code_travels_with_its_kernels(tmp_path):
    """A worker runs the native code the bundle shipped, as the process that loaded it
    does, rather than compiling the program again."""
    jit = pytest.importorskip("hologram_cpu_llvm.jit")
    from hologram_cpu_llvm import cpu

    levels = [t for t in jit.level_targets() if jit.has_features(cpu.X86_64_LEVELS[t])]
    if not levels:
        pytest.skip("no x86-64 level this CPU runs")
    build([KERNELS / "softmax.toml"], "tiny", "1.0.0", tmp_path / "t.hgb", cache_dir=False, jobs=1, native=levels[0])
    lib = hg.load_bundle(tmp_path / "t.hgb", trust_native=True)
    assert lib.softmax._c.native
    hg.clear_cache()  # the copy must be made from the pickle, not found among kernels unpickled before
    copy = pickle.loads(pickle.dumps(lib.softmax))
    assert copy._c.native == {k: tuple(dict(n) for n in v) for k, v in lib.softmax._c.native.items()}
    np.testing.assert_array_equal(copy(X), lib.softmax(X))


def test_a_corrupt_pickle_is_refused():
    hg.clear_cache()  # else a kernel unpickled earlier under this digest is the answer, rightly
    k = hg.compile_file(KERNELS / "vadd.toml")
    func, args = k.__reduce__()
    data = bytearray(args[0])
    data[len(data) // 2] ^= 1
    with pytest.raises(HologramError, match="corrupt"):
        func(bytes(data), *args[1:])


def test_kernels_travel_to_worker_processes():
    k = hg.compile_file(KERNELS / "softmax.toml")
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        results = pool.map(softmax_sum, [k] * 3, chunksize=1)
    assert all(abs(total - 1) < 1e-5 for total, _ in results)
    assert len({who for _, who in results}) == 1  # one worker, one prepared kernel for the three tasks
