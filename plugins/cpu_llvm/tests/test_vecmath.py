"""The vectorizable math library of the CPU backend (hologram_cpu_llvm.vecmath).

Each function is JIT-compiled inside a loop `void f(ptr x, [ptr y,] ptr out, i64 n)` at
O3 for the host, called over numpy arrays, and held to:
- accuracy against a higher-precision reference (f64: numpy on x87 long double; f32 and
  f16: numpy in f64), in ulp of the result type: f64 <= 4, f32 and f16 <= 1;
- special values (NaN, +-inf, signed zeros, overflow/underflow to inf/0) exactly;
- vectorization: the optimized loop holds vector instructions and calls nothing but
  LLVM intrinsics (no libm).
"""

from __future__ import annotations

import ctypes
import os
import functools
import re

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

from hologram.core.errors import HologramError
from hologram.core.types import DType
from hologram_cpu_llvm.vecmath import BINARY, NAMES, UNARY, emit_math
from hologram_cpu_llvm.vecmath_trig import TRIG_LIMIT

from erf_reference import erf_erfc_ld

LD = np.longdouble
NP = {DType.F16: np.float16, DType.F32: np.float32, DType.F64: np.float64}
LL = {DType.F16: ir.HalfType(), DType.F32: ir.FloatType(), DType.F64: ir.DoubleType()}
BOUND = {DType.F64: 4.0, DType.F32: 1.0, DType.F16: 1.0}  # the documented ulp bounds
FLOATS = [DType.F32, DType.F64]

pytestmark = pytest.mark.skipif(not hasattr(np, "longdouble") or np.finfo(LD).nmant < 63,
                                reason="the f64 reference needs x87 long double")


# ----------------------------------------------------------------------------- harness
@functools.cache
def _tm() -> llvm.TargetMachine:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                        features=llvm.get_host_cpu_features().flatten(), opt=3, jit=True)


def _loop_module(name: str, dtype: DType) -> ir.Module:
    arity = 1 if name in UNARY else 2
    mod = ir.Module(name=f"vecmath_{name}")
    mod.triple = llvm.get_process_triple()
    i64, ptr, t = ir.IntType(64), ir.PointerType(), LL[dtype]
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ptr] * (arity + 1) + [i64]), name="f")
    for a in fn.args[:-1]:
        a.add_attribute("noalias")
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    n = fn.args[-1]
    b.cbranch(b.icmp_signed(">", n, ir.Constant(i64, 0)), loop, done)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    xs = [b.load(b.gep(fn.args[k], [i], source_etype=t), typ=t) for k in range(arity)]
    b.store(emit_math(b, name, xs, dtype), b.gep(fn.args[arity], [i], source_etype=t))
    nxt = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(nxt, loop)
    b.cbranch(b.icmp_signed("<", nxt, n), loop, done)
    b.position_at_end(done)
    b.ret_void()
    return mod


@functools.cache
def compiled(name: str, dtype: DType):
    """(callable over numpy arrays, optimized IR text)."""
    m = llvm.parse_assembly(str(_loop_module(name, dtype)))
    m.verify()
    tm = _tm()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(m, pb)
    text = str(m)
    ee = llvm.create_mcjit_compiler(m, _fresh_tm())
    ee.finalize_object()
    arity = 1 if name in UNARY else 2
    cfn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * (arity + 1), ctypes.c_int64)(ee.get_function_address("f"))

    def call(*args: np.ndarray) -> np.ndarray:
        assert len(args) == arity
        arrays = [np.ascontiguousarray(a) for a in np.broadcast_arrays(*[np.asarray(a, NP[dtype]) for a in args])]
        out = np.empty_like(arrays[0])
        cfn(*[a.ctypes.data for a in arrays], out.ctypes.data, out.size)
        return out

    call.keepalive = (ee, m)
    return call, text


def _fresh_tm() -> llvm.TargetMachine:
    # MCJIT takes ownership of its target machine: never hand it the shared one.
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                        features=llvm.get_host_cpu_features().flatten(), opt=3, jit=True)


# --------------------------------------------------------------------------- reference
def _sigmoid(x):
    t = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + t), t / (1 + t))


REF = {
    "EXP": np.exp, "EXP2": np.exp2, "EXPM1": np.expm1, "LOG": np.log, "LOG2": np.log2,
    "LOG10": np.log10, "LOG1P": np.log1p, "SIN": np.sin, "COS": np.cos, "TAN": np.tan,
    "TANH": np.tanh, "SIGMOID": _sigmoid, "SINH": np.sinh, "COSH": np.cosh,
    "ASINH": np.arcsinh, "ACOSH": np.arccosh, "ATANH": np.arctanh, "ASIN": np.arcsin,
    "ACOS": np.arccos, "ATAN": np.arctan, "ATAN2": np.arctan2, "HYPOT": np.hypot,
    "POW": np.power, "FMOD": np.fmod,
    "ERF": lambda x: erf_erfc_ld(x)[0], "ERFC": lambda x: erf_erfc_ld(x)[1], "CBRT": np.cbrt,
}
TRIG = {"SIN", "COS", "TAN"}


def reference(name: str, dtype: DType, *args: np.ndarray) -> np.ndarray:
    wide = LD if dtype is DType.F64 else np.float64
    with np.errstate(all="ignore"):
        return REF[name](*[a.astype(wide) for a in args])


def check(name: str, dtype: DType, args: tuple[np.ndarray, ...], out: np.ndarray) -> float:
    """Assert special values match the reference exactly; return the max ulp error."""
    t = NP[dtype]
    ref = reference(name, dtype, *args)
    with np.errstate(all="ignore"):
        rt = ref.astype(t)
        both_finite = np.isfinite(rt) & np.isfinite(out)
        same_special = (np.isnan(rt) & np.isnan(out)) | (rt == out)
        bad = ~both_finite & ~same_special
        assert not bad.any(), _report(name, args, out, rt, bad)
        sign = (rt == 0) & (out == 0) & (np.signbit(rt) != np.signbit(out))
        assert not sign.any(), _report(name, args, out, rt, sign)
        ulp = np.spacing(np.abs(rt)).astype(ref.dtype)
        err = np.where(both_finite, np.abs(out.astype(ref.dtype) - ref) / ulp, 0)
    return float(err.max())


def _report(name, args, out, rt, mask) -> str:
    k = np.nonzero(mask)[0][:5]
    return f"{name}: " + "; ".join(f"args {[a[j] for a in args]} -> {out[j]!r}, expected {rt[j]!r}" for j in k)


SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 10.0, -10.0,
           0.1, -0.7, 1e-7, -1e-7, 1e-30, 30.0, 89.0, -89.0, 100.0, -104.0, 710.0, -710.0, -746.0, 1e5,
           -1e5, 1e300, -1e300, 1e-300, 5e-324, -5e-324, 2.0 ** -1022, 1.7976931348623157e308,
           3.4028234663852886e38, 1.401298464324817e-45, 65504.0, 6e-8]


def specials(dtype: DType) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.unique(np.array(SPECIAL, np.float64).astype(NP[dtype]))


def dense(name: str, dtype: DType, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Every exponent (uniform random bit patterns), plus the range where the function
    varies, plus the special values."""
    t = NP[dtype]
    if dtype is DType.F16:
        every = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
        if name in UNARY:
            return (every,)
        x, y = np.meshgrid(every[::37], every[::41])
        return x.ravel(), y.ravel()
    n = 1 << 19 if dtype is DType.F32 else 1 << 17
    ui = np.uint32 if dtype is DType.F32 else np.uint64

    def bits(k):
        return rng.integers(0, np.iinfo(ui).max, k, dtype=ui, endpoint=True).view(t)

    def near(k, lo, hi):
        return rng.uniform(lo, hi, k).astype(t)

    sp = specials(dtype)
    if name in UNARY:
        return (np.concatenate([bits(n), near(n // 2, -10, 10), near(n // 2, -1, 1), sp]),)
    sx, sy = (a.ravel() for a in np.meshgrid(sp, sp))
    u = near(n, -4, 4)
    x = np.concatenate([bits(n), sx, u, np.abs(u), near(n, 0, 2)])
    y = np.concatenate([bits(n), sy, near(n, -30, 30), near(n, -30, 30), near(n, -1000, 1000)])
    return x, y


# ------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("dtype", FLOATS + [DType.F16], ids=lambda d: d.value)
@pytest.mark.parametrize("name", sorted(NAMES))
def test_accuracy_and_specials(name: str, dtype: DType) -> None:
    f, _ = compiled(name, dtype)
    args = dense(name, dtype, np.random.default_rng(sum(map(ord, name + dtype.value))))
    out = f(*args)
    bound = 0.0 if name == "FMOD" else BOUND[dtype]  # fmod is exact
    assert check(name, dtype, args, out) <= bound


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.value)
@pytest.mark.parametrize("name", sorted(NAMES))
def test_vectorizes_without_libm(name: str, dtype: DType) -> None:
    _, text = compiled(name, dtype)
    elem = "double" if dtype is DType.F64 else "float"
    assert re.search(rf"<\d+ x {elem}>", text), f"{name} {dtype.value}: loop not vectorized"
    callees = set(re.findall(r"call [^@]*@([\w.$]+)\(", text))
    assert all(c.startswith("llvm.") for c in callees), f"{name}: calls {callees}"


@pytest.mark.parametrize("name", ["SIN", "COS", "TAN"])
def test_trig_f64_full_range(name: str) -> None:
    # Payne-Hanek beyond TRIG_LIMIT: every binade up to DBL_MAX, int64 extremes, doubles
    # close to multiples of pi/2 (the reduction cancels most there: 5.319372648326541e+255
    # is within 2**-61 of one), and both sides of the limit.
    f, _ = compiled(name, DType.F64)
    rng = np.random.default_rng(11)
    binades = np.ldexp(rng.uniform(1, 2, 1024 - 30), np.arange(30, 1024))
    hard = np.array([5.319372648326541e+255, 2.0 ** 63, -(2.0 ** 63), float(2 ** 63 - 1), 1e22, 1e300,
                     1.7976931348623157e308, TRIG_LIMIT, np.nextafter(TRIG_LIMIT, np.inf), 6381956970095103 * 2.0 ** 797])
    k = np.arange(1, 1 << 12, dtype=np.float64)
    near = np.ldexp(np.pi / 2 * k, 40)
    x = np.concatenate([binades, -binades, hard, -hard, near, np.nextafter(near, 0)])
    assert check(name, DType.F64, (x,), f(x)) <= BOUND[DType.F64]


@pytest.mark.parametrize("name", ["SIN", "COS", "TAN"])
def test_trig_f32_full_range(name: str) -> None:
    # Payne-Hanek for f32: every binade up to FLT_MAX, and the f32 values closest to
    # multiples of pi/2 (where the reduction cancels most).
    f, _ = compiled(name, DType.F32)
    k = np.arange(1, 1 << 16, dtype=np.float64)
    near = (k * np.pi / 2).astype(np.float32)
    binades = np.ldexp(np.float32(1.2345678), np.arange(-20, 128)).astype(np.float32)
    hard = np.array([1.5707963e+00, 2.2335862e+23, 1.0e22, 3.4028235e38, 16777216.0, 8.8e7, 1e10], np.float32)
    x = np.concatenate([near, -near, binades, -binades, hard, np.nextafter(hard, np.float32(0))])
    assert check(name, DType.F32, (x,), f(x)) <= 1


def test_trig_large_arguments_f64() -> None:
    rng = np.random.default_rng(7)
    for name in sorted(TRIG):
        f, _ = compiled(name, DType.F64)
        x = np.ldexp(rng.uniform(1, 2, 1 << 15), rng.integers(0, 30, 1 << 15)) * rng.choice([-1, 1], 1 << 15)
        x = np.concatenate([x, np.pi / 2 * np.arange(1, 20000), [TRIG_LIMIT, -TRIG_LIMIT]])
        assert check(name, DType.F64, (x,), f(x)) <= 4


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.value)
def test_fmod_is_exact_everywhere(dtype: DType) -> None:
    rng = np.random.default_rng(11)
    t, ui = NP[dtype], (np.uint32 if dtype is DType.F32 else np.uint64)
    x, y = (rng.integers(0, np.iinfo(ui).max, 1 << 16, dtype=ui, endpoint=True).view(t) for _ in range(2))
    f, _ = compiled("FMOD", dtype)
    with np.errstate(all="ignore"):
        expected = np.fmod(x, y)
    got = f(x, y)
    assert np.array_equal(got.view(ui), expected.view(ui)) or np.array_equal(got, expected, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(expected)) | np.isnan(expected).any()


def test_pow_c99_special_cases() -> None:
    nan, inf = np.nan, np.inf
    cases = [  # (x, y, expected) straight from C99 F.9.4.4
        (nan, 0.0, 1.0), (nan, -0.0, 1.0), (1.0, nan, 1.0), (-1.0, inf, 1.0), (-1.0, -inf, 1.0),
        (-0.0, -1.0, -inf), (0.0, -1.0, inf), (-0.0, -2.0, inf), (-0.0, 3.0, -0.0), (-0.0, 0.5, 0.0),
        (0.5, -inf, inf), (2.0, -inf, 0.0), (0.5, inf, 0.0), (2.0, inf, inf), (-inf, -3.0, -0.0),
        (-inf, -2.0, 0.0), (-inf, 3.0, -inf), (-inf, 0.5, inf), (inf, -1.0, 0.0), (inf, 2.0, inf),
        (-2.0, 0.5, nan), (-2.0, 3.0, -8.0), (-2.0, 2.0, 4.0), (2.0, 1e10, inf), (2.0, -1e10, 0.0),
        (-2.0, 2.0 ** 60, inf), (-0.5, 2.0 ** 60 + 2.0 ** 8, 0.0), (nan, 1.0, nan), (2.0, nan, nan),
    ]
    for dtype in FLOATS:
        f, _ = compiled("POW", dtype)
        x, y, want = (np.array(c, NP[dtype]) for c in zip(*cases))
        got = f(x, y)
        same = (got == want) & (np.signbit(got) == np.signbit(want)) | np.isnan(got) & np.isnan(want)
        assert same.all(), [(c, g) for c, g, s in zip(cases, got, same) if not s]


def test_signed_zero_and_limits() -> None:
    for dtype in FLOATS:
        t = NP[dtype]
        z = np.array([-0.0, 0.0], t)
        for name in ("SIN", "TAN", "TANH", "SINH", "ASINH", "ATANH", "ASIN", "ATAN", "EXPM1", "LOG1P", "ERF"):
            assert np.array_equal(np.signbit(compiled(name, dtype)[0](z)), [True, False]), name
        atan2 = compiled("ATAN2", dtype)[0]
        got = atan2(np.array([0.0, -0.0, 0.0, -0.0], t), np.array([-0.0, -0.0, 0.0, 0.0], t))
        assert np.array_equal(got, np.array([np.pi, -np.pi, 0.0, -0.0], t))
        assert np.array_equal(np.signbit(got), [False, True, False, True])
        assert compiled("SIGMOID", dtype)[0](np.array([-np.inf, np.inf, -1000.0], t)).tolist() == [0.0, 1.0, 0.0]
        assert compiled("EXPM1", dtype)[0](np.array([-np.inf], t))[0] == -1.0
        assert compiled("ERF", dtype)[0](np.array([-np.inf, np.inf, -6.0], t)).tolist() == [-1.0, 1.0, -1.0]
        assert compiled("ERFC", dtype)[0](np.array([-np.inf, np.inf, 27.5, -0.0], t)).tolist() == [2.0, 0.0, 0.0, 1.0]
        assert np.isinf(compiled("HYPOT", dtype)[0](np.array([np.inf], t), np.array([np.nan], t))[0])


def test_emit_is_straight_line() -> None:
    # Every function, every type, twice into one function (tables and intrinsic
    # declarations are shared): one basic block, and the module verifies.
    mod = ir.Module()
    for dtype, t in LL.items():
        fn = ir.Function(mod, ir.FunctionType(t, [t, t]), name=f"g_{dtype.value}")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        for name in sorted(NAMES) * 2:
            emit_math(b, name, list(fn.args[: 1 if name in UNARY else 2]), dtype)
        assert len(fn.blocks) == 1  # no branches: selects only
        b.ret(fn.args[0])
    llvm.parse_assembly(str(mod)).verify()


def test_bad_requests_are_clear_errors() -> None:
    mod = ir.Module()
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ir.DoubleType(), ir.FloatType()]), name="g")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    d, s = fn.args
    with pytest.raises(HologramError, match="unknown function 'GAMMA'"):
        emit_math(b, "GAMMA", [d], DType.F64)
    with pytest.raises(HologramError, match="takes 2 argument"):
        emit_math(b, "POW", [d], DType.F64)
    with pytest.raises(HologramError, match="expected double for f64"):
        emit_math(b, "EXP", [s], DType.F64)
    with pytest.raises(HologramError, match="float dtype"):
        emit_math(b, "EXP", [d], DType.I32)
    assert set(BINARY) | {"FMOD"} | set(UNARY) == NAMES and len(NAMES) == 27


@pytest.mark.parametrize("dtype", [DType.F16, DType.F32, DType.F64], ids=lambda d: d.value)
def test_agrees_with_the_interpreter(dtype: DType) -> None:
    # The backend contract, checked with the public harness: the opcode's reference
    # semantics (numpy in the kernel's type) versus the emitted code, within 4 ulp.
    from hologram.isa.opcodes import OPCODES
    from hologram.testing import assert_close

    rng = np.random.default_rng(3)
    t = NP[dtype]
    with np.errstate(all="ignore"):  # one conversion, so NaN stays quiet
        x = np.concatenate([rng.uniform(-50, 50, 1500), rng.uniform(-1.5, 1.5, 1500), SPECIAL]).astype(t)
    y = rng.permutation(x)
    if dtype is DType.F64:
        x[np.abs(x) > TRIG_LIMIT] = 1.0  # keeps sin/cos/tan inside the f64 domain
    for name in sorted(NAMES):
        sem = OPCODES[name].semantics(dtype)
        args = (x,) if name in UNARY else (x, y)
        with np.errstate(all="ignore"):
            expected = np.array([sem(*(t(a[i]) for a in args)) for i in range(len(x))], t)
        assert_close(compiled(name, dtype)[0](*args), expected, ulps=0 if name == "FMOD" else 4, name=name)


@pytest.mark.skipif(not os.environ.get("HOLOGRAM_EXHAUSTIVE"), reason="minutes per function; set HOLOGRAM_EXHAUSTIVE=1")
@pytest.mark.parametrize("name", ["SIN", "COS", "TAN", "EXP", "EXPM1", "LOG", "LOG1P", "TANH", "SIGMOID", "ATAN", "ASIN",
                                  "ERF", "ERFC"])
def test_f32_exhaustive(name: str) -> None:
    # All 2**32 f32 inputs (docs/cpu-llvm-accuracy.md, "Exhaustive runs").
    f, _ = compiled(name, DType.F32)
    for start in range(0, 1 << 32, 1 << 24):
        x = np.arange(start, start + (1 << 24), dtype=np.uint32).view(np.float32)
        out = f(x)
        with np.errstate(all="ignore"):
            ref = reference(name, DType.F32, x)
            same = (out.view(np.uint32) == ref.astype(np.float32).view(np.uint32)) | np.isnan(out) & np.isnan(ref)
        if not same.all():
            assert check(name, DType.F32, (x[~same],), out[~same]) <= BOUND[DType.F32]


def test_f32_expm1_polynomial_error() -> None:
    # tanh's f32 path computes expm1(r) = r + r^2 P(r) with P cut at r^7 (degree 9 in
    # all): on the reduced range (a little beyond, for the rounding of n) the first
    # dropped terms stay below 2**-35 of |r|, so y and the quotient stay within 2**-33.
    from hologram_cpu_llvm.vecmath_exp import EXPM1_F32_TAIL
    half = np.log(LD(2)) / 2 * LD(1.001)
    r = np.linspace(-half, half, 200001, dtype=LD)
    r = r[r != 0]
    p = np.zeros_like(r)
    for c in reversed(EXPM1_F32_TAIL):
        p = p * r + LD(c)
    assert np.max(np.abs((r + r * r * p) / np.expm1(r) - 1)) < LD(2.0) ** -34.9


def test_f32_exp_polynomial_error() -> None:
    # The f32 EXP polynomial approximates exp(r) on the reduced range |r| <= ln2/2 (a
    # little beyond, for the rounding of n) to 2**-34 relative, which keeps every f32
    # result within 0.5 + 2**-10 ulp; checked in long double (64-bit significand).
    from hologram_cpu_llvm.vecmath_exp import EXP_F32_POLY
    half = np.log(LD(2)) / 2 * LD(1.001)
    r = np.linspace(-half, half, 200001, dtype=LD)
    p = np.zeros_like(r)
    for c in reversed(EXP_F32_POLY):
        p = p * r + LD(c)
    assert np.max(np.abs(p / np.exp(r) - 1)) < LD(2.0) ** -33.9
