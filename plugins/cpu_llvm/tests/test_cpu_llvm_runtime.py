"""The cpu_llvm runtime (hologram_cpu_llvm.runtime): launching, argument checks, aliasing,
reduction partials, error slots and geometry; then end to end through the real code generator.

Most tests drive the runtime with the hand-written modules of runtime_cases.py (codegen
substituted), so a runtime failure here is never a code generator bug; the "end to end"
section goes through the real code generator and the public API.
"""

from __future__ import annotations

import numpy as np
import pytest

import hologram as hg
from hologram.core.errors import ArgumentError, ExecutionError
from hologram.backend import Backend
from hologram.testing import assert_close
from hologram_cpu_llvm import CpuLlvmBackend, abi, runtime as rt

from runtime_cases import AXPY, CHK, FSUM, REV, SIG, SUM, TOTALS, Entry, HandWritten


# -------------------------------------------------------------------------- launching
def test_stage_runs_and_scalars_are_passed(rev):
    program, b = rev
    exe = b.prepare(program)
    x = np.arange(1000, dtype=np.float32)
    z = np.zeros_like(x)
    b.launch(exe, {"x": x, "z": z}, {"a": np.float32(2.0)}, {"n": 1000})
    np.testing.assert_array_equal(z, x[::-1] * 2)
    b.launch(exe, {"x": x, "z": z}, {"a": 3}, {"n": 1000})  # a Python number is converted
    np.testing.assert_array_equal(z, x[::-1] * 3)


def test_empty_domain_runs_nothing(rev):
    program, b = rev
    z = np.zeros(0, np.float32)
    b.launch(b.prepare(program), {"x": z.copy(), "z": z}, {"a": 1.0}, {"n": 0})


def test_aliased_input_is_copied_first(rev):
    program, b = rev
    x = np.arange(1001, dtype=np.float32)
    expected = x[::-1] * 2
    b.launch(b.prepare(program), {"x": x, "z": x}, {"a": 2.0}, {"n": 1001})  # in place
    np.testing.assert_array_equal(x, expected)
    buf = np.arange(20, dtype=np.float32)
    lo, hi = buf[:10], buf[5:15]  # partial overlap
    expected = hi[::-1].copy()
    b.launch(b.prepare(program), {"x": hi, "z": lo}, {"a": 1.0}, {"n": 10})
    np.testing.assert_array_equal(lo, expected)


def test_two_written_buffers_may_not_overlap(fake_backend):
    program = SUM.program()
    b, _ = fake_backend(SUM)
    x = np.arange(10, dtype=np.int64)
    out = np.zeros(1, np.int64)
    with pytest.raises(ArgumentError, match="overlap in memory"):
        b.launch(b.prepare(program), {"x": x, "s": out, "m": out}, {}, {"n": 10})


def test_argument_checks(rev):
    program, b = rev
    exe = b.prepare(program)
    x, z = np.ones(8, np.float32), np.zeros(8, np.float32)
    cases = [
        ({"x": x.astype(np.float64), "z": z}, {"a": 1.0}, {"n": 8}, "expected dtype f|float32"),
        ({"x": x, "z": z}, {"a": 1.0}, {"n": 9}, "expected 9 elements"),
        ({"x": x[::2], "z": z[::2]}, {"a": 1.0}, {"n": 4}, "C-contiguous"),
        ({"x": x, "z": z}, {}, {"n": 8}, "scalar parameter 'a'"),
        ({"x": x, "z": z}, {"a": "one"}, {"n": 8}, "scalar parameter 'a'"),
        ({"x": x, "z": z}, {"a": 1.0}, {"n": 8.0}, "shape symbol 'n'"),
        ({"x": x, "z": z}, {"a": 1.0}, {"n": 2**64}, "outside the range a launch may bind a symbol to: 0 to 2"),
        ({"x": x}, {"a": 1.0}, {"n": 8}, "needs buffer"),
        ({"x": x, "z": z, "w": z}, {"a": 1.0}, {"n": 8}, "no buffer parameter"),
        ({"x": x, "z": [0.0] * 8}, {"a": 1.0}, {"n": 8}, "numpy array"),
    ]
    for bufs, scalars, syms, message in cases:
        with pytest.raises(ArgumentError, match=message):
            b.launch(exe, bufs, scalars, syms)
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ArgumentError, match="read-only"):
        b.launch(exe, {"x": x, "z": ro}, {"a": 1.0}, {"n": 8})


def test_geometry_is_memoized_and_refuses_impossible_domains(fake_backend):
    cube = HandWritten("""
.program cube
.symbols n
.param in x: f32[n]
.stage s domain [n, n, n] block [4, 4, 4]
EXIT
""", f"define void @cube_s{SIG} {{\n  ret void\n}}\n", (Entry("cube_s", 0),))
    b, _ = fake_backend(cube)
    exe = b.prepare(cube.program())
    g = exe.geometry((5,))
    assert exe.geometry((5,)) is g and g.grids == ((8, 125),) and g.sizes == (5,) and g.nbytes == (20,)
    with pytest.raises(ExecutionError, match="more than 2\\*\\*63"):
        exe.geometry((2**22,))
    with pytest.raises(ArgumentError, match="negative dimension"):
        exe.geometry((-1,))
    b.launch(exe, {"x": np.zeros(5, np.float32)}, {}, {"n": 5})


# ------------------------------------------------------------------------- reductions
@pytest.mark.parametrize("n", [1, 300, rt.INLINE_COST * 3 + 5])
def test_reductions_combine_partials(fake_backend, n):
    program = SUM.program()
    x = np.random.default_rng(n).integers(-2**62, 2**62, n, dtype=np.int64)
    results = []
    for t in (1, 2, 3):
        b, _ = fake_backend(SUM, threads=t)
        s, m = np.full(1, 99, np.int64), np.zeros(1, np.int64)
        b.launch(b.prepare(program), {"x": x, "s": s, "m": m}, {}, {"n": n})
        results.append((s[0], m[0]))
    with np.errstate(over="ignore"):
        expected = (np.add.reduce(x), x.max())  # wrapping, as the ISA's integer ADD
    assert results == [expected] * 3  # the init reset s; integers agree bit for bit


def test_float_reduction_thread_counts_agree_within_contract(fake_backend):
    program = FSUM.program()
    n = rt.INLINE_COST * 2 + 3
    x = np.random.default_rng(1).standard_normal(n)
    sums = []
    for t in (1, 2):
        b, _ = fake_backend(FSUM, threads=t)
        s = np.zeros(1)
        b.launch(b.prepare(program), {"x": x, "s": s}, {}, {"n": n})
        sums.append(s)
    assert_close(sums[0], np.array([x.sum()]), reduction_n=n, magnitude=np.array([np.abs(x).sum()]))
    assert_close(sums[1], sums[0], reduction_n=n, magnitude=np.array([np.abs(x).sum()]))


def test_identities_leave_memory_bit_exact():
    assert np.signbit(np.float32(-0.0) + np.float32(rt.identity("add", np.dtype(np.float32))))
    for dt in (np.int8, np.uint64, np.float16, np.float64):
        d = np.dtype(dt)
        for kind, ufunc in (("add", np.add), ("mul", np.multiply), ("min", np.minimum), ("max", np.maximum)):
            probe = np.array([0, 1, 7], dt)
            np.testing.assert_array_equal(ufunc(probe, np.array(rt.identity(kind, d), dt)), probe)


# ----------------------------------------------------------------------------- errors
def test_error_slot_becomes_execution_error(fake_backend):
    program = CHK.program()
    for t in (1, 2):
        b, _ = fake_backend(CHK, threads=t)
        n = 40000 if t == 2 else 10
        x, y = np.ones(n, np.float32), np.zeros(n, np.float32)
        with pytest.raises(ExecutionError, match=rf"stage 's': instruction 2 `LDG.f32.chk %v, \[x \+ %j\]`: index "
                                                 rf"{n} is out of bounds for global buffer 'x' of {n} elements"):
            b.launch(b.prepare(program), {"x": x, "y": y}, {}, {"n": n})


def test_execution_error_wording_per_code(fake_backend):
    program = CHK.program()
    b, _ = fake_backend(CHK)
    exe = b.prepare(program)
    arrays = [np.zeros(4, np.float32)] * 2
    assert "is not an Atlas class (0..95)" in str(rt.execution_error(exe, (abi.ERR_CLASS, 0, 2, 200), arrays))
    assert "different barriers (instructions 2, 4)" in str(rt.execution_error(exe, (abi.ERR_BARRIER, 0, 4, 2), arrays))
    assert "PoolFree of handle 3" in str(rt.execution_error(exe, (abi.ERR_POOL_FREE, 0, 2, 3), arrays))
    assert "error 99" in str(rt.execution_error(exe, (99, 5, 77, 1), arrays))  # never crashes on garbage


# ------------------------------------------------------------------------ the backend
def test_backend_protocol_and_registration():
    b = CpuLlvmBackend(cache_dir=False)
    assert isinstance(b, Backend) and b.name == "cpu_llvm" and b.priority == 100 and b.available()
    a = b.allocate((2, 3), np.dtype(np.float32))
    assert a.shape == (2, 3) and not a.any()
    with pytest.raises(ArgumentError):
        b.prepare("not a program")


# ----------------------------------------------- end to end: real codegen, public API
def test_public_api_runs_on_cpu_llvm():
    k = hg.compile(AXPY, format="toml").on("cpu_llvm")
    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    np.testing.assert_array_equal(k(np.float32(2.5), x), np.float32(2.5) * x + np.float32(1))
    y = np.empty_like(x)
    k(np.float32(2.5), x, out=(y,))
    np.testing.assert_array_equal(y, np.float32(2.5) * x + np.float32(1))
    assert k.backend.name == "cpu_llvm"


def test_real_reductions_agree_across_thread_counts(tmp_path):
    program = hg.compile(TOTALS, format="toml").program
    n = rt.INLINE_COST * 3 + 11
    rng = np.random.default_rng(7)
    x = rng.integers(-2**40, 2**40, n, dtype=np.int64)
    f = rng.standard_normal(n)
    out = {}
    for t in (1, 2):
        b = CpuLlvmBackend(num_threads=t, cache_dir=tmp_path)
        bufs = {"x": x, "f": f, "s": np.zeros((), np.int64), "m": np.zeros((), np.int64), "t": np.zeros(())}
        b.launch(b.prepare(program), bufs, {}, {"n": n})
        out[t] = bufs
    for t in (1, 2):
        assert out[t]["s"] == x.sum() and out[t]["m"] == x.max()
    mag = np.array(np.abs(f).sum())
    assert_close(out[2]["t"], out[1]["t"], reduction_n=n, magnitude=mag)
    assert_close(out[1]["t"], np.array(f.sum()), reduction_n=n, magnitude=mag)


def test_real_codegen_reports_errors_and_survives_aliasing(tmp_path):
    b = CpuLlvmBackend(num_threads=2, cache_dir=tmp_path)
    n = 40000
    with pytest.raises(ExecutionError, match=rf"instruction 2 `LDG.f32.chk %v, \[x \+ %j\]`: index {n} is out of "
                                             rf"bounds for global buffer 'x' of {n} elements"):
        b.launch(b.prepare(CHK.program()), {"x": np.ones(n, np.float32), "y": np.zeros(n, np.float32)},
                 {}, {"n": n})
    x = np.arange(n + 1, dtype=np.float32)
    expected = x[::-1] * 2
    b.launch(b.prepare(REV.program()), {"x": x, "z": x}, {"a": 2.0}, {"n": n + 1})
    np.testing.assert_array_equal(x, expected)
    x = np.arange(n, dtype=np.int64)
    s, m = np.zeros(1, np.int64), np.zeros(1, np.int64)
    b.launch(b.prepare(SUM.program()), {"x": x, "s": s, "m": m}, {}, {"n": n})
    assert (s[0], m[0]) == (x.sum(), n - 1)
