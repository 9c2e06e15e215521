"""cpu_llvm's native compile (hologram_cpu_llvm.jit, and the backend's prepare and emit): the O3
pipeline, text forms, loaded objects, compile errors, and the optimization level of deep loop nests."""

from __future__ import annotations

import gc

import attrs
import numpy as np
import pytest

import hologram as hg
from hologram.core.errors import ArgumentError, CompileError
from hologram.testing import assert_close
from hologram_cpu_llvm import CpuLlvmBackend, cpu, jit, offload, runtime as rt
from hologram_cpu_llvm.backend import _opt_level
from hologram_cpu_llvm.codegen import compile_program

from repo_paths import KERNELS
from runtime_cases import AXPY, REV, Entry


# ----------------------------------------------------------------- the native compile
def test_host_key_names_the_toolchain_and_cpu():
    key = jit.host().key
    assert "llvmlite" in key and "LLVM" in key and jit.host().cpu in key


def test_o3_pipeline_vectorizes_for_the_host():
    optimized: list[str] = []
    obj = jit.compile_object(compile_program(hg.compile(AXPY, format="toml").program).module_ir, optimized)
    assert obj and "x float>" in optimized[0]  # a vector loop: <4 x float>, <8 x float>, ...


def test_avx512_hosts_get_512_bit_vectors():
    """LLVM tunes its AVX-512 Intel models to prefer 256-bit vectors; jit.TUNING lifts
    that, so the tiled contraction's FMAs are <16 x float> where the CPU has them."""
    gemm = hg.compile_file(KERNELS / "gemm.toml").program
    optimized: list[str] = []
    jit.compile_object(compile_program(gemm).module_ir, optimized)
    widths = {"<16 x float>" in optimized[0], "<8 x float>" in optimized[0]}
    if "avx512f" in jit.host_features():
        assert "@llvm.fma.v16f32" in optimized[0]
    else:
        assert True in widths  # still vectorized, at the width the CPU has


def test_text_forms_show_each_step_of_the_native_compile(tmp_path):
    b = CpuLlvmBackend(cache_dir=tmp_path)
    program = hg.compile(AXPY, format="toml").program
    llvm_ir = b.emit(program, "llvm")
    assert "define void @\"hg_axpy_0_" in llvm_ir and "x float>" not in llvm_ir  # as generated: scalar
    assert "x float>" in b.emit(program, "llvm-opt")  # the O3 pipeline vectorized it
    native = b.emit(program, "native")
    assert "hg_axpy_0_" in native and ("ret" in native or "blr" in native)
    assert not list(tmp_path.iterdir())  # emitting prepares and caches nothing
    with pytest.raises(ArgumentError, match="no text form 'ptx'; expected one of llvm, llvm-opt, native"):
        b.emit(program, "ptx")

    def broken(program):
        raise TypeError("cannot store i64")
    with pytest.raises(CompileError, match="code generator failed"):
        CpuLlvmBackend(cache_dir=False, codegen=broken, codegen_version="x").emit(program, "llvm")


def test_loaded_objects_are_independent():
    # two loads of one object (two programs exporting the same symbol) are two engines
    # with their own copy of the code; dropping one leaves the other callable
    obj = jit.compile_object(REV.module_ir)
    first, second = jit.load_object(obj, ["rev_s"]), jit.load_object(obj, ["rev_s"])
    assert first.addresses["rev_s"] != second.addresses["rev_s"]
    fn = rt.STAGE_FN(second.addresses["rev_s"])
    del first
    gc.collect()
    x = np.arange(3, dtype=np.float32)
    z = np.zeros_like(x)
    bufs = np.array([x.ctypes.data, z.ctypes.data], np.uint64).tobytes()
    fn(0, 1, bufs, np.array([3], np.int64).tobytes(), np.float32(2).tobytes() + bytes(4), None, rt.ErrSlot())
    np.testing.assert_array_equal(z, x[::-1] * 2)
    with pytest.raises(RuntimeError, match="nope"):
        jit.load_object(obj, ["rev_s", "nope"])


# --------------------------------------------------------------------- compile errors
def test_unresolvable_symbols_are_a_compile_error_not_an_abort(fake_backend):
    # A name no library defines: compiler-rt's (__divti3 for an i128 division) resolve in a
    # process that has loaded libgcc_s globally, as Mesa's Vulkan driver does for wgpu.
    needs_a_missing_symbol = REV.module_ir + """
declare i64 @hologram_no_library_defines_this(i64)
define i64 @calls_it(i64 %a) {
  %c = call i64 @hologram_no_library_defines_this(i64 %a)
  ret i64 %c
}
"""
    b, _ = fake_backend(attrs.evolve(REV, module_ir=needs_a_missing_symbol))
    with pytest.raises(CompileError, match="hologram_no_library_defines_this"):
        b.prepare(REV.program())
    broken, _ = fake_backend(attrs.evolve(REV, module_ir="define void @oops(", entries=(Entry("oops", 0),)))
    with pytest.raises(CompileError, match="LLVM rejected"):
        broken.prepare(REV.program())
    assert cpu.undefined_symbols(b"not an object") is None
    with pytest.raises(RuntimeError, match="malformed"):
        cpu.undefined_symbols(b"\x7fELF\x02\x01" + bytes(10))


def test_a_crashing_code_generator_is_a_compile_error(tmp_path):

    def broken(program):
        raise TypeError("cannot store i64")
    b = CpuLlvmBackend(cache_dir=tmp_path, codegen=broken, codegen_version="x")
    with pytest.raises(CompileError, match="code generator failed on program 'rev'.*TypeError: cannot store i64"):
        b.prepare(REV.program())


# -------------------------------------------------------------------- deep loop nests
def test_deep_loop_nests_are_optimized_at_o2_and_stay_right(monkeypatch, tmp_path):
    """A full sum over a rank-10 array runs its stage through 7 nested in-lane LOOPs,
    where LLVM's O3 time grows steeply (rank 16: 9.4 s against 1.4 s at O2); gemm's
    3 LOOPs keep O3."""

    dims = ", ".join(f"d{i}" for i in range(10))
    k = hg.compile(f'[kernel]\nname = "r10"\nversion = "1.0.0"\ninputs = {{ x = "f64[{dims}]" }}\n'
                   'outputs = { r = "f64" }\nbody = "r = sqrt(sum(x * x))"\n', format="toml")
    gemm = hg.compile_file(KERNELS / "gemm.toml")
    assert _opt_level(gemm.program) == jit.OPT_LEVEL
    levels: list[int] = []
    real = jit.optimize
    monkeypatch.setenv(offload.ENV_IN_PROCESS, str(1 << 30))  # in this process, where the patch sees it
    monkeypatch.setattr(jit, "optimize", lambda m, tm, level=jit.OPT_LEVEL: (levels.append(level), real(m, tm, level)))
    CpuLlvmBackend(cache_dir=tmp_path / "cache").prepare(k.program)
    assert levels == [jit.DEEP_NEST_OPT_LEVEL] and jit.DEEP_NEST_OPT_LEVEL < jit.OPT_LEVEL
    x = np.random.default_rng(0).random((2, 3, 1, 2, 2, 1, 3, 2, 1, 2))
    assert_close(k.on("cpu_llvm")(x), np.sqrt(np.sum(x * x)))


def test_very_deep_loop_nests_skip_the_pipeline_and_stay_right(monkeypatch, tmp_path):
    """Elementwise over rank 20 (17 in-lane LOOPs) kept LLVM busy past 30 s at O2 and O1
    alike (document fuzzer, seed 29); past jit.VERY_DEEP_NEST_LOOPS it is compiled at O0."""

    dims = ", ".join(f"r{i}" for i in range(20))
    k = hg.compile(f'[kernel]\nname = "e20"\nversion = "1.0.0"\ninputs = {{ x = "f64[{dims}]", y = "f64[{dims}]" }}\n'
                   f'outputs = {{ a = "f64[{dims}]" }}\nbody = "a = x * 2 + y"\n', format="toml")
    levels: list[int] = []
    real = jit.optimize
    monkeypatch.setenv(offload.ENV_IN_PROCESS, str(1 << 30))  # in this process, where the patch sees it
    monkeypatch.setattr(jit, "optimize", lambda m, tm, level=jit.OPT_LEVEL: (levels.append(level), real(m, tm, level)))
    CpuLlvmBackend(cache_dir=tmp_path / "cache").prepare(k.program)
    assert levels == [jit.VERY_DEEP_NEST_OPT_LEVEL] == [0]
    x = np.random.default_rng(1).random((2, 3) + (1,) * 16 + (2, 2))
    assert_close(k.on("cpu_llvm")(x, x + 1), x * 2 + (x + 1))
    # full reductions through an unoptimized nest of 11 LOOPs
    dims = ", ".join(f"r{i}" for i in range(14))
    r = hg.compile(f'[kernel]\nname = "r14"\nversion = "1.0.0"\ninputs = {{ x = "f32[{dims}]" }}\n'
                   'outputs = { s = "f32", m = "f32" }\nbody = "s = sum(x)\\nm = max(x)"\n',
                   format="toml")
    x = np.random.default_rng(2).random((3, 2, 1, 2, 1, 3, 1, 1, 2, 1, 2, 1, 3, 2)).astype(np.float32)
    got = r.on("cpu_llvm")(x)
    assert_close(got.s, np.sum(x, dtype=np.float64).astype(np.float32), reduction_n=x.size)
    assert got.m == x.max()
