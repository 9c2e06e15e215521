"""The reference interpreter, opcode by opcode, against numpy.

Each value opcode runs as a one-instruction kernel over many lanes (`run_op`): lane i
loads its operands from input buffers, applies the opcode, stores the result. The
operands are the cross product of each dtype's edge values (NaN, +-inf, -0.0,
subnormals, integer extremes), and the answer is compared with numpy computing the same
thing on whole arrays. `run_op`, `launch` and the numpy oracles here are shared by the
interpreter's other tests; the helpers every backend's tests use are tests/isa_helpers.py.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from hologram.core import atlas
from hologram.core.types import ALL_TYPES, FLOAT_TYPES, INTEGER_TYPES, DType
from hologram.isa.encoding import program_hash
from hologram.isa.opcodes import OPCODES
from hologram.isa.program import Program
from hologram_interp import InterpBackend
from hologram_interp.decode import decode_program
from erf_reference import ERF, ERFC
from isa_helpers import edges, float_samples, op_program, pairs, same, triples, ulp_close

BACKEND = InterpBackend()
I64, F16, F32, F64, BOOL = DType.I64, DType.F16, DType.F32, DType.F64, DType.BOOL
NUM_TYPES = INTEGER_TYPES + FLOAT_TYPES
SIGNED = tuple(t for t in INTEGER_TYPES if t.is_signed)


# ===================================================================== helpers
def run_op(op: str, dtype: DType, *srcs: np.ndarray, out_type: DType | None = None, mod: str | None = None,
           dtype2: DType | None = None) -> np.ndarray:
    """`op` applied lane by lane to the arrays `srcs` (all of one length)."""
    if out_type is None:
        out_type = BOOL if OPCODES[op].result == "bool" else dtype
    n = len(srcs[0])
    prog = op_program(op, dtype, tuple(DType.from_numpy(a.dtype) for a in srcs), out_type, mod=mod, dtype2=dtype2)
    out = BACKEND.allocate((n,), out_type)
    launch(prog, {f"a{k}": a for k, a in enumerate(srcs)} | {"out": out}, {}, {"n": n})
    return out


def launch(program: Program, buffers: dict[str, np.ndarray], scalars: dict, symbols: dict[str, int]) -> None:
    """Decode without the verifier, then launch. These tests pin down the interpreter's
    semantics, also for programs the verifier refuses (inexact immediates, mismatched
    operand types); test_backend.py covers prepare() and the verifier."""
    BACKEND.launch(decode_program(program, program_hash(program)), buffers, scalars, symbols)


def wrapped(values, t: DType) -> np.ndarray:
    """Python ints reduced into the integer type t, two's complement."""
    return np.array([(int(v) - t.min) % (1 << t.bits) + t.min for v in values], dtype=object).astype(t.np)


# ================================================================ arithmetic
def _floor_div(a, b):
    safe = np.where(b == 0, 1, b).astype(a.dtype)
    return np.where(b == 0, 0, np.floor_divide(a, safe)).astype(a.dtype)


def _int_rem(a, b):
    safe = np.where(b == 0, 1, b).astype(a.dtype)
    return np.where(b == 0, 0, np.remainder(a, safe)).astype(a.dtype)


ARITH_ORACLE = {
    "ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "MIN": np.minimum, "MAX": np.maximum,
    "DIV": lambda a, b: np.true_divide(a, b) if a.dtype.kind == "f" else _floor_div(a, b),
    "REM": lambda a, b: np.remainder(a, b) if a.dtype.kind == "f" else _int_rem(a, b),
}


@pytest.mark.parametrize("op", ARITH_ORACLE)
@pytest.mark.parametrize("t", NUM_TYPES, ids=str)
def test_binary_arith(op, t):
    a, b = pairs(t)
    with np.errstate(all="ignore"):
        want = ARITH_ORACLE[op](a, b)
    same(run_op(op, t, a, b), want, a, b)


@pytest.mark.parametrize("t", SIGNED, ids=str)
def test_integer_division_edges(t):
    a = np.array([t.min, t.min, 7, -7, 7, -7, 5, t.min], t.np)
    b = np.array([-1, 0, 2, 2, -2, -2, 0, 1], t.np)
    same(run_op("DIV", t, a, b), np.array([t.min, 0, 3, -4, -4, 3, 0, t.min], t.np))
    same(run_op("REM", t, a, b), np.array([0, 0, 1, 1, -1, -1, 0, 0], t.np))


@pytest.mark.parametrize("t", INTEGER_TYPES, ids=str)
def test_integer_arith_wraps(t):
    a, b = edges(t), edges(t)[::-1].copy()
    same(run_op("ADD", t, a, b), wrapped([int(x) + int(y) for x, y in zip(a, b)], t), a, b)
    same(run_op("SUB", t, a, b), wrapped([int(x) - int(y) for x, y in zip(a, b)], t), a, b)
    same(run_op("MUL", t, a, b), wrapped([int(x) * int(y) for x, y in zip(a, b)], t), a, b)


def test_min_max_propagate_nan_and_zero_sign():
    a = np.array([np.nan, 1.0, -0.0, 0.0, np.inf], np.float32)
    b = np.array([1.0, np.nan, 0.0, -0.0, np.nan], np.float32)
    assert np.isnan(run_op("MIN", F32, a, b)[[0, 1, 4]]).all()
    assert np.isnan(run_op("MAX", F32, a, b)[[0, 1, 4]]).all()
    # Equal operands (+-0): the second one, as numpy's minimum/maximum (docs/isa.md).
    same(run_op("MIN", F32, a, b)[2:4], np.array([0.0, -0.0], np.float32))
    same(run_op("MAX", F32, a, b)[2:4], np.array([0.0, -0.0], np.float32))
    same(np.minimum(a, b)[2:4], np.array([0.0, -0.0], np.float32))


@pytest.mark.parametrize("op, fn", [("ABS", np.absolute), ("NEG", np.negative)])
@pytest.mark.parametrize("t", NUM_TYPES, ids=str)
def test_abs_neg(op, fn, t):
    a = edges(t)
    with np.errstate(all="ignore"):
        same(run_op(op, t, a), fn(a), a)


@pytest.mark.parametrize("t", NUM_TYPES, ids=str)
def test_mad_rounds_twice(t):
    a, b, c = triples(t)
    with np.errstate(all="ignore"):
        want = np.add(np.multiply(a, b), c)
    same(run_op("MAD", t, a, b, c), want, a, b, c)


def fma_oracle(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Correct rounding, computed independently of the interpreter: the exact rational,
    a candidate from Python's correctly rounded float(), then the nearest of the
    candidate and its two neighbours in the target type (ties to an even significand)."""
    t = a.dtype.type
    out = []
    for x, y, z in zip(a, b, c):
        fx, fy, fz = float(x), float(y), float(z)
        if not all(map(math.isfinite, (fx, fy, fz))):
            out.append(t(z) if math.isfinite(fx) and math.isfinite(fy) else t(x) * t(y) + t(z))
            continue
        q = Fraction(fx) * Fraction(fy) + Fraction(fz)
        if q == 0:
            neg = (fx == 0 or fy == 0) and math.copysign(1, fx) * math.copysign(1, fy) < 0 \
                and fz == 0 and math.copysign(1, fz) < 0
            out.append(t(-0.0 if neg else 0.0))
            continue
        try:
            cand = t(float(q))
        except OverflowError:
            cand = t(-math.inf if q < 0 else math.inf)
        best = None
        for v in (np.nextafter(cand, t(-np.inf)), cand, np.nextafter(cand, t(np.inf))):
            if not np.isfinite(v):
                continue
            d = abs(Fraction(float(v)) - q)
            if best is None or d < best[0] or (d == best[0] and int(v.view(f"u{v.itemsize}")) % 2 == 0):
                best = (d, v)
        # Overflow: beyond the largest finite value by at least half an ulp is infinity.
        big = np.finfo(t).max
        limit = Fraction(float(big)) + Fraction(float(big) - float(np.nextafter(big, t(0)))) / 2
        out.append(t(-math.inf if q < 0 else math.inf) if abs(q) >= limit else best[1])
    return np.array(out, dtype=a.dtype)


@pytest.mark.parametrize("t", FLOAT_TYPES, ids=str)
def test_fma_rounds_once(t):
    a, b, c = triples(t)
    with np.errstate(all="ignore"):
        same(run_op("FMA", t, a, b, c), fma_oracle(a, b, c), a, b, c)


def test_fma_f32_avoids_double_rounding():
    # a*b = 1 + 2**-11 + 2**-24 lies exactly halfway between two f32 values; a tiny c
    # decides the rounding. Rounding through f64 loses c and then ties to even (down).
    a = b = np.array([1 + 2.0**-12], np.float32)
    c = np.array([2.0**-80], np.float32)
    want = np.float32(1 + 2.0**-11 + 2.0**-23)
    assert run_op("FMA", F32, a, b, c)[0] == want
    assert run_op("MAD", F32, a, b, c)[0] == np.float32(1 + 2.0**-11)  # two roundings
    assert np.float32(np.float64(a[0]) * np.float64(b[0]) + np.float64(c[0])) != want


def test_fma_f64_exact_and_signed_zero():
    a = np.array([0.1, 1e308, -0.0, 1e308, 2.0**-1074], np.float64)
    b = np.array([10.0, 10.0, 5.0, 2.0, 0.5], np.float64)
    c = np.array([-1.0, -np.inf, -0.0, -1.5e308, 0.0], np.float64)
    got = run_op("FMA", F64, a, b, c)
    assert got[0] == float(Fraction(0.1) * 10 - 1)  # 5.551115123125783e-17, not 0
    assert got[1] == -np.inf  # the product is finite before rounding: no inf - inf
    assert got[2] == 0 and np.signbit(got[2])
    assert got[3] == float(Fraction(1e308) * 2 - Fraction(1.5e308))  # unfused: inf
    assert got[4] == 0.0  # half the smallest subnormal ties to even (zero)


@pytest.mark.parametrize("t", INTEGER_TYPES, ids=str)
def test_integer_fma_is_mad(t):
    a, b, c = triples(t)
    with np.errstate(all="ignore"):
        same(run_op("FMA", t, a, b, c), a * b + c, a, b, c)


# ===================================================================== logic
@pytest.mark.parametrize("op, fn", [("AND", np.bitwise_and), ("OR", np.bitwise_or), ("XOR", np.bitwise_xor)])
@pytest.mark.parametrize("t", INTEGER_TYPES + (BOOL,), ids=str)
def test_bitwise(op, fn, t):
    a, b = pairs(t)
    same(run_op(op, t, a, b), fn(a, b), a, b)


@pytest.mark.parametrize("t", INTEGER_TYPES + (BOOL,), ids=str)
def test_not(t):
    a = edges(t)
    same(run_op("NOT", t, a), np.invert(a), a)


@pytest.mark.parametrize("op, fn", [("SHL", np.left_shift), ("SHR", np.right_shift)])
@pytest.mark.parametrize("t", INTEGER_TYPES, ids=str)
def test_shifts_mask_the_amount(op, fn, t):
    # Amounts at and beyond the width, and negative ones (wrapped into unsigned types).
    a, b = pairs(t, wrapped([0, 1, 3, t.bits - 1, t.bits, t.bits + 1, 2 * t.bits + 3, -1, -t.bits], t))
    with np.errstate(all="ignore"):
        want = fn(a, b & t.np.type(t.bits - 1))
    same(run_op(op, t, a, b), want, a, b)


def test_shr_arithmetic_vs_logical():
    same(run_op("SHR", DType.I8, np.array([-128, -1], np.int8), np.array([7, 9], np.int8)),
         np.array([-1, -1], np.int8))
    same(run_op("SHR", DType.U8, np.array([128, 255], np.uint8), np.array([7, 9], np.uint8)),
         np.array([1, 127], np.uint8))
    same(run_op("SHL", DType.I32, np.array([1, 3], np.int32), np.array([31, 33], np.int32)),
         np.array([-2**31, 6], np.int32))


@pytest.mark.parametrize("mod, fn", [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                                     ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal)])
@pytest.mark.parametrize("t", ALL_TYPES, ids=str)
def test_set(mod, fn, t):
    a, b = pairs(t)
    same(run_op("SET", t, a, b, mod=mod), fn(a, b), a, b)


@pytest.mark.parametrize("t", ALL_TYPES, ids=str)
def test_sel(t):
    a, b = pairs(t)
    p = (np.arange(len(a)) % 3 == 0)
    same(run_op("SEL", t, p, a, b), np.where(p, a, b), p, a, b)


# ============================================================ transcendentals
UNARY_FLOAT = {
    "EXP": np.exp, "LOG": np.log, "LOG2": np.log2, "LOG10": np.log10, "SQRT": np.sqrt,
    "SIN": np.sin, "COS": np.cos, "TAN": np.tan, "TANH": np.tanh,
    "ASIN": np.arcsin, "ACOS": np.arccos, "ATAN": np.arctan, "SINH": np.sinh, "COSH": np.cosh,
    "ASINH": np.arcsinh, "ACOSH": np.arccosh, "ATANH": np.arctanh,
    "EXP2": np.exp2, "EXPM1": np.expm1, "LOG1P": np.log1p, "ERF": ERF, "ERFC": ERFC,
    "FLOOR": np.floor, "CEIL": np.ceil, "TRUNC": np.trunc, "RINT": np.rint,
    "RSQRT": lambda x: x.dtype.type(1) / np.sqrt(x),
    "SIGMOID": lambda x: np.where(x >= 0, 1 / (1 + np.exp(-np.abs(x))),
                                  np.exp(-np.abs(x)) / (1 + np.exp(-np.abs(x)))).astype(x.dtype),
}
EXACT_UNARY = {"SQRT", "FLOOR", "CEIL", "TRUNC", "RINT", "RSQRT"}


@pytest.mark.parametrize("op", UNARY_FLOAT)
@pytest.mark.parametrize("t", FLOAT_TYPES, ids=str)
def test_float_unary(op, t):
    x = float_samples(t)
    with np.errstate(all="ignore"):
        want = UNARY_FLOAT[op](x)
    got = run_op(op, t, x)
    if op in EXACT_UNARY:
        same(got, want, x)
    else:  # numpy's own ufunc in the register dtype: identical, up to a platform's SIMD path
        ulp_close(got, want, 1, x)


@pytest.mark.parametrize("op, fn", [("ISINF", np.isinf), ("ISFINITE", np.isfinite)])
@pytest.mark.parametrize("t", ALL_TYPES, ids=str)
def test_float_class_tests(op, fn, t):
    # numpy's isinf / isfinite on every type: integers and bool are finite, never infinite
    x = float_samples(t) if t.is_float else edges(t)
    same(run_op(op, t, x), fn(x), x)


def test_rint_rounds_half_to_even_and_sigmoid_is_stable():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 3.5], np.float32)
    same(run_op("RINT", F32, x), np.array([0, 2, 2, -0.0, -2, 4], np.float32))
    s = run_op("SIGMOID", F32, np.array([-np.inf, -100, -20, 0, 20, 100, np.inf, np.nan], np.float32))
    assert s[0] == 0 and 0 < s[1] < 1e-40 and s[3] == 0.5 and s[5] == 1 and s[6] == 1 and np.isnan(s[7])
    assert (np.diff(s[:7]) >= 0).all()
    r = run_op("RSQRT", F32, np.array([0.0, -0.0, -1.0, np.inf, 4.0], np.float32))
    same(r, np.array([np.inf, -np.inf, np.nan, 0.0, 0.5], np.float32))


BINARY_FLOAT = {"ATAN2": np.arctan2, "HYPOT": np.hypot, "FMOD": np.fmod, "COPYSIGN": np.copysign, "POW": np.power}


@pytest.mark.parametrize("op", BINARY_FLOAT)
@pytest.mark.parametrize("t", FLOAT_TYPES, ids=str)
def test_float_binary(op, t):
    a, b = pairs(t)
    with np.errstate(all="ignore"):
        want = BINARY_FLOAT[op](a, b)
    got = run_op(op, t, a, b)
    if op in ("FMOD", "COPYSIGN"):
        same(got, want, a, b)
    else:
        ulp_close(got, want, 1, a, b)


# ================================================================ data movement
def cvt_oracle(x: np.ndarray, to: DType) -> np.ndarray:
    if to is BOOL:
        return x != 0
    if to.is_int and x.dtype.kind == "f":
        out = []
        for v in x.tolist():
            out.append(0 if v != v else to.max if v == math.inf else to.min if v == -math.inf
                       else min(max(math.trunc(v), to.min), to.max))
        return np.array(out, dtype=object).astype(to.np)
    with np.errstate(all="ignore"):
        return x.astype(to.np)


@pytest.mark.parametrize("src", ALL_TYPES, ids=str)
@pytest.mark.parametrize("dst", ALL_TYPES, ids=str)
def test_cvt(src, dst):
    x = edges(src)
    if src.is_float:
        more = np.array([2.9, -2.9, 255.5, 256.0, -129.0, 2.0**31, -2.0**31 - 1e3, 2.0**63, 2.0**64, 65519.0, 65520.0])
        with np.errstate(over="ignore"):  # beyond f16: inf, which is an edge value too
            x = np.concatenate([x, more.astype(src.np)])
    same(run_op("CVT", dst, x, dtype2=src), cvt_oracle(x, dst), x)


def test_cvt_saturates_and_nan_is_zero():
    x = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, -0.9, 300.7], np.float32)
    same(run_op("CVT", DType.I32, x, dtype2=F32), np.array([0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, 0, 300], np.int32))
    same(run_op("CVT", DType.U8, x, dtype2=F32), np.array([0, 255, 0, 255, 0, 0, 255], np.uint8))
    same(run_op("CVT", BOOL, x, dtype2=F32), np.array([True] * 7))
    big = np.array([2**63 - 1, -2**63, 2**53 + 1], np.int64)  # int -> float rounds once to nearest
    same(run_op("CVT", F32, big, dtype2=I64), big.astype(np.float32))


@pytest.mark.parametrize("t", ALL_TYPES, ids=str)
def test_mov(t):
    x = edges(t)
    same(run_op("MOV", t, x), x, x)


@pytest.mark.parametrize("t, value, want", [
    (F32, 0.1, np.float32(0.1)), (F32, -0.0, np.float32(-0.0)), (F16, 70000.0, np.float16(np.inf)),
    (DType.U8, 300, np.uint8(44)), (DType.I8, -129, np.int8(127)), (DType.I32, 2.7, np.int32(2)),
    (DType.I32, math.nan, np.int32(0)), (BOOL, 2, np.True_), (BOOL, 0.0, np.False_), (F32, True, np.float32(1)),
    (F32, 2**63 - 1, np.float32(2**63)), (F64, 2**53 + 1, np.float64(2**53)), (DType.U64, -1, np.uint64(2**64 - 1)),
])
def test_mov_imm(t, value, want):
    prog = op_program("MOV_IMM", t, (t,), t, imms={0: value})
    out = BACKEND.allocate((3,), t)
    launch(prog, {"out": out}, {}, {"n": 3})
    same(out, np.full(3, want, dtype=t.np))


# ===================================================================== Atlas
@pytest.mark.parametrize("t", INTEGER_TYPES, ids=str)
def test_atlas_unary(t):
    x = np.array([v for v in range(-3, 300) if t.min <= v <= t.max] + [t.min, t.max], dtype=t.np)
    wrap = lambda vals: np.array(vals, dtype=np.int64).astype(t.np)  # noqa: E731
    same(run_op("ClsGet", t, x), wrap([atlas.BYTE_CLASS[int(v) & 0xFF] for v in x]), x)
    same(run_op("MIRROR", t, x), wrap([atlas.mirror(int(v)) for v in x]), x)
    same(run_op("NbrCount", t, x), wrap([atlas.degree(int(v)) for v in x]), x)
    same(run_op("UnityTest", t, x), np.array([atlas.is_unity(int(v)) for v in x]), x)


@pytest.mark.parametrize("t", [DType.I8, DType.U8, DType.I32, DType.I64], ids=str)
def test_atlas_neighbors_and_bound_map(t):
    c, k = (wrapped(v, t) for v in zip(*itertools.product(range(-1, 97), range(-1, 7))))
    same(run_op("NbrGet", t, c, k), np.array([atlas.neighbor(int(x), int(y)) for x, y in zip(c, k)]).astype(t.np), c, k)
    cls = np.array([0, 1, 95, 50, 95, 3], t.np)
    page = np.array([0, 2, 47, 10, 47, 200 if t.max >= 200 else 100], t.np)
    byte = np.array([0, 3, 255 if t.max >= 255 else 127, 7, 100, 1], t.np)
    want = [atlas.bound_map(int(a), int(b), int(d)) for a, b, d in zip(cls, page, byte)]
    same(run_op("BoundMap", t, cls, page, byte), np.array(want, dtype=np.int64).astype(t.np), cls, page, byte)
