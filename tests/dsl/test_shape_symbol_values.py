"""Shape symbols used as values are weak Python ints, as `len(x)` is in numpy (NEP 50).

`y = x - s / n` over `x: f32[n]`, `s: f32` must be numpy's `x - s / len(x)`: f32
throughout, bitwise, on every backend (it used to be computed in f64 and differed by an
ulp in ~3% of the elements). These tests pin the rule of docs/dsl.md ("Shape symbols as
values", decision 21): the typing in the IR, bitwise agreement with numpy for every dtype
on both backends, the cases where numpy raises and the DSL defines an answer (a symbol
that does not fit an integer operand wraps), arithmetic on symbols alone (weak, Python's
rules), and the generator drawing symbols as weak values.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from hypothesis import given

import hologram as hg
from dsl_helpers import NP, TYPES, compile_ir, last
from hologram.core.errors import CompileError
from hologram.core.semantics import ORACLE
from hologram.core.types import DType
from hologram.testing import assert_close, bounds
from hologram.testing.cases import symbol_kernels
from hologram.testing.exprgen import Env, Node, evaluate, infer, symbol, weak_result
from hologram.testing.run import check_case

BACKENDS = ("interp", "cpu_llvm")


def _table(decls: dict[str, str]) -> str:
    return "{ " + ", ".join(f'{k} = "{v}"' for k, v in decls.items()) + " }"


@functools.lru_cache(maxsize=None)
def _compiled(body: str, inputs: tuple, outputs: tuple):
    text = (f'[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = {_table(dict(inputs))}\n'
            f'outputs = {_table(dict(outputs))}\nbody = """\n{body}\n"""\n')
    return hg.compile(text)


def run(backend: str, body: str, inputs: dict[str, str], outputs: dict[str, str], *args) -> tuple[np.ndarray, ...]:
    res = _compiled(body, tuple(inputs.items()), tuple(outputs.items())).on(backend)(*args)
    return tuple(res) if isinstance(res, (tuple, list)) else (res,)


def same(actual, expected) -> None:
    """Bitwise equal (NaN matches NaN, zeros by sign), same dtype and shape."""
    assert_close(np.asarray(actual), np.asarray(expected))


def values(dtype: np.dtype, n: int, seed: int = 0) -> np.ndarray:
    """`n` values of `dtype` spread over its range (floats: mixed magnitudes and signs,
    zeros of both signs, an inf and a NaN when there is room)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(n) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(dtype)
    specials = np.array([0.0, -0.0, np.inf, np.nan, 1.0, -3.0], dtype)[:n]
    x[:len(specials)] = specials
    return x


# ----------------------------------------------------------------------- the reported case
def test_reported_case_is_f32_in_the_ir():
    ir = last("y = x - s / n", {"x": "f32[n]", "s": "f32"}, {"y": "f32[n]"})
    assert ir == "y[i0] = sub(x[i0], div($s, f32(n)):f32):f32"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["f16", "f32", "f64"])
def test_x_minus_s_over_n_is_bitwise_numpy(backend, dtype):
    # numpy: x - s / len(x), len() a Python int (weak): no element may differ
    dt = NP[dtype]
    for n in (1000, 4099):
        rng = np.random.default_rng(n)
        x = (rng.standard_normal(n) * 3).astype(dt)
        s = dt.type(rng.standard_normal() * 1000)
        (y,) = run(backend, "y = x - s / n", {"x": f"{dtype}[n]", "s": dtype}, {"y": f"{dtype}[n]"}, x, s)
        same(y, x - s / len(x))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["f16", "f32"])
def test_mean_written_with_n_is_numpy(backend, dtype):
    # the docs' own example `avg = sum(x) / n`: numpy's x.sum() / len(x) stays in x's dtype
    dt = NP[dtype]
    x = np.array([1.0, 2.0, 4.0, 8.0, 0.5, 0.25, 3.0], dt)  # sums exactly: any order gives numpy's sum
    kir = compile_ir("avg = sum(x) / n", {"x": f"{dtype}[n]"}, {"avg": dtype})
    assert "f64" not in str(kir.body[-1])
    (avg,) = run(backend, "avg = sum(x) / n", {"x": f"{dtype}[n]"}, {"avg": dtype}, x)
    same(avg, np.asarray(np.sum(x)) / len(x))


# ----------------------------------------------------------------------- typing in the IR
TYPING = [
    # a symbol meets a typed operand: it takes that operand's type, as len(x) does
    ("y = x * n", {"x": "f16[n]"}, {"y": "f16[n]"}, "y[i0] = mul(x[i0], f16(n)):f16"),
    ("y = n - x", {"x": "i8[n]"}, {"y": "i8[n]"}, "y[i0] = sub(i8(n), x[i0]):i8"),
    ("y = x + n", {"x": "u64[n]"}, {"y": "u64[n]"}, "y[i0] = add(x[i0], u64(n)):u64"),
    ("y = x // n", {"x": "u16[n]"}, {"y": "u16[n]"}, "y[i0] = floordiv(x[i0], u16(n)):u16"),
    ("y = x + n", {"x": "bool[n]"}, {"y": "i64[n]"}, "y[i0] = add(i64(x[i0]), n):i64"),
    ("y = x / n", {"x": "i32[n]"}, {"y": "f64[n]"}, "y[i0] = div(f64(x[i0]), f64(n)):f64"),
    ("y = x / n", {"x": "f32[n]"}, {"y": "f32[n]"}, "y[i0] = div(x[i0], f32(n)):f32"),
    # comparisons with integers are exact (numpy 2 compares Python ints exactly)
    ("y = x < n", {"x": "i8[n]"}, {"y": "bool[n]"}, "y[i0] = cmplt(i64(x[i0]), n):bool"),
    ("y = x < n", {"x": "f32[n]"}, {"y": "bool[n]"}, "y[i0] = cmplt(x[i0], f32(n)):bool"),
    # where() takes numpy's np.where(c, len(x), x) type
    ("y = where(x > 0, x, n)", {"x": "f32[n]"}, {"y": "f32[n]"},
     "y[i0] = where(cmpgt(x[i0], 0.0:f32):bool, x[i0], f32(n)):f32"),
    # symbols alone: weak, Python's rules (int // int is int, int / int is a weak float)
    ("y = x * (n // 2)", {"x": "f32[n]"}, {"y": "f32[n]"}, "y[i0] = mul(x[i0], f32(floordiv(n, 2:i64):i64)):f32"),
    ("y = x * (1 / n)", {"x": "f16[n]"}, {"y": "f16[n]"}, "y[i0] = mul(x[i0], f16(div(1.0:f64, f64(n)):f64)):f16"),
    ("y = x - n * m", {"x": "f32[n]", "z": "f32[m]"}, {"y": "f32[n]"}, "y[i0] = sub(x[i0], f32(mul(n, m):i64)):f32"),
    # a function of a symbol is typed (np.sqrt(len(x)) is float64), as of a literal
    ("y = x * sqrt(n)", {"x": "f32[n]"}, {"y": "f64[n]"}, "y[i0] = mul(f64(x[i0]), sqrt(f64(n)):f64):f64"),
    # index variables stay strong i64, like np.arange
    ("y[i] = i * x[i]", {"x": "f32[n]"}, {"y": "f32[n]"}, "y[i] = f32(mul(f64(i), f64(x[i])):f64)"),
    # a bare symbol takes the output's type; a temporary holds it as i64 (np.asarray(len(x)))
    ("y = n", {"x": "f32[n]"}, {"y": "f16"}, "y = f16(n)"),
    ("y = n", {"x": "f32[n]"}, {"y": "u8"}, "y = u8(n)"),
]


@pytest.mark.parametrize("body, ins, outs, ir", TYPING, ids=[t[0] + " " + str(t[1]) for t in TYPING])
def test_typing(body, ins, outs, ir):
    assert last(body, ins, outs) == ir


def test_a_temporary_holds_a_symbol_as_i64():
    kir = compile_ir("t = n\ny = x * t", {"x": "f32[n]"}, {"y": "f64[n]"})
    assert kir.decl("t").dtype is DType.I64


def test_symbol_only_comparisons_and_functions_are_typed():
    kir = compile_ir("b = n > m\nr = relu(n)\ny = where(b, x, f32(r))", {"x": "f32[n]", "z": "f32[m]"}, {"y": "f32[n]"})
    assert kir.decl("b").dtype is DType.BOOL and kir.decl("r").dtype is DType.I64


@pytest.mark.parametrize("body, message", [
    ("y = x * n ** -1", "non-negative integer exponent"),
    ("y = sum(x, axis=n)", "axis must be an integer literal"),
    ("y = x * (n and true)", "needs bool operands"),
    ("y = x & n", "f32 and an int shape symbol"),
    ("y = x * (n + 18446744073709551615)", "does not fit in i64"),
])
def test_errors(body, message):
    with pytest.raises(CompileError, match=message):
        compile_ir(body, {"x": "f32[n]"}, {"y": "f32[n]"})


def test_a_bool_output_refuses_a_symbol():
    with pytest.raises(CompileError, match="cannot assign an int shape symbol to output 'y' of type bool"):
        compile_ir("y = n", {"x": "f32[n]"}, {"y": "bool"})


# ----------------------------------------------------------------------- numpy, every dtype
COMPARE = ("<", "==", ">=")
ARITH = ("+", "-", "*", "/", "//", "%")
SELECT = ("maximum", "minimum", "where")
BITWISE = ("&", "|", "^", ">>")


def _ops(dtype: str) -> list[str]:
    kind = NP[dtype].kind
    if kind == "b":
        return ["+", "*", *COMPARE, "maximum", "where", "&", "|"]
    return [*ARITH, *COMPARE, *SELECT, *(BITWISE if kind in "iu" else ())]


def _body(op: str, reverse: bool) -> str:
    a, b = ("n", "x") if reverse else ("x", "n")
    if op == "where":
        return "y = where(x > x, x, n)" if not reverse else "y = where(x == x, n, x)"
    if op in ("maximum", "minimum"):
        return f"y = {op}({a}, {b})"
    return f"y = {a} {op} {b}"


def _expected(op: str, reverse: bool, x: np.ndarray, n: int) -> np.ndarray:
    """numpy with `n` a Python int (weak), through the oracle (which defines integer
    division by zero and shift masking); where `n` does not fit an integer `x`, numpy
    raises and the DSL wraps `n` into x's type (docs/dsl.md decision 21), except in
    comparisons, which are exact in both."""
    if op == "where":
        return np.where(x == x, n, x) if reverse else np.where(x > x, x, n)
    try:
        return ORACLE[op](*((n, x) if reverse else (x, n)))
    except OverflowError:
        n = int(np.asarray(n).astype(x.dtype))
        return ORACLE[op](*((n, x) if reverse else (x, n)))


CASES = [(d, op, rev) for d in TYPES for op in _ops(d) for rev in (False, True)
         if not (rev and op in (">>",))]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype, op, reverse", CASES, ids=[f"{d}-{'n' + op + 'x' if r else 'x' + op + 'n'}" for d, op, r in CASES])
def test_every_dtype_and_operator_is_numpy(backend, dtype, op, reverse):
    # n = 7 fits every type; n = 300 does not fit i8/u8, where the DSL wraps (numpy raises)
    for n in (7, 300):
        x = values(NP[dtype], n, seed=n)
        expected = _expected(op, reverse, x, n)
        body = _body(op, reverse)
        (y,) = run(backend, body, {"x": f"{dtype}[n]"}, {"y": f"{DType.from_numpy(expected.dtype)}[n]"}, x)
        same(y, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_comparisons_are_exact_where_the_symbol_does_not_fit(backend):
    x = np.arange(300, dtype=np.int64).astype(np.int8)  # wraps: every value of i8 appears
    (lt, ge) = run(backend, "lt = x < n\nge = x >= n", {"x": "i8[n]"}, {"lt": "bool[n]", "ge": "bool[n]"}, x)
    same(lt, np.ones(300, bool))  # numpy 2: x < 300 is exact
    same(ge, np.zeros(300, bool))
    u = np.full(300, 2**64 - 1, np.uint64)
    (gt,) = run(backend, "gt = u > n", {"u": "u64[n]"}, {"gt": "bool[n]"}, u)
    same(gt, u > 300)


@pytest.mark.parametrize("backend", BACKENDS)
def test_wrapping_where_numpy_raises(backend):
    x = np.zeros(300, np.uint8)
    (y, c) = run(backend, "y = x + n\nc = clip(x, 0, n)", {"x": "u8[n]"}, {"y": "u8[n]", "c": "u8[n]"}, x)
    same(y, np.full(300, 300 % 256, np.uint8))
    same(c, np.zeros(300, np.uint8))  # hi wraps to 44; max(0, 0) = 0 stays below it
    with pytest.raises(OverflowError):
        x + len(x)  # what numpy does instead


@pytest.mark.parametrize("backend", BACKENDS)
def test_f16_overflowing_symbol_is_inf_as_in_numpy(backend):
    x = np.ones(70000, np.float16)
    (y, lt) = run(backend, "y = x * n\nlt = x < n", {"x": "f16[n]"}, {"y": "f16[n]", "lt": "bool[n]"}, x)
    with np.errstate(over="ignore"):
        same(y, x * len(x))
        same(lt, x < len(x))
    assert np.isinf(y).all()


# ----------------------------------------------------------------------- symbols alone
SYMBOL_ONLY = [
    # body over x: f32[n], z: f32[m]; numpy with n, m Python ints
    ("y = x * (n / m)", lambda x, z, n, m: x * (n / m)),
    ("y = x - (n / m)", lambda x, z, n, m: x - (n / m)),
    ("y = x * (n // m)", lambda x, z, n, m: x * (n // m)),
    ("y = x + n % m", lambda x, z, n, m: x + n % m),
    ("y = x + n * m", lambda x, z, n, m: x + n * m),
    ("y = x + (n - 2 * m)", lambda x, z, n, m: x + (n - 2 * m)),
    ("y = x + -n", lambda x, z, n, m: x + -n),
    ("y = x * n ** 2", lambda x, z, n, m: x * n ** 2),
    ("y = x * (n + 0.5)", lambda x, z, n, m: x * (n + 0.5)),
    ("y = x * (n / 3)", lambda x, z, n, m: x * (n / 3)),
    ("y = x / (pi * n)", lambda x, z, n, m: x / (math.pi * n)),
    ("y = x + (n << 3) + (m & 1)", lambda x, z, n, m: x + (n << 3) + (m & 1)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["f16", "f32", "f64"])
@pytest.mark.parametrize("body, numpy", SYMBOL_ONLY, ids=[s[0] for s in SYMBOL_ONLY])
def test_arithmetic_on_symbols_alone_stays_weak(backend, dtype, body, numpy):
    dt = NP[dtype]
    x, z = values(dt, 11, seed=1), values(dt, 3, seed=2)
    (y,) = run(backend, body, {"x": f"{dtype}[n]", "z": f"{dtype}[m]"}, {"y": f"{dtype}[n]"}, x, z)
    with np.errstate(all="ignore"):
        expected = numpy(x, z, len(x), len(z))
    assert expected.dtype == dt
    same(y, expected)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", TYPES)
def test_bare_symbol_results(backend, dtype):
    outs = {"y": dtype} if dtype != "bool" else {"y": "i64"}
    x = np.zeros(300, np.float32)
    (y,) = run(backend, "y = n", {"x": "f32[n]"}, outs, x)
    want = np.asarray(len(x)).astype(NP[outs["y"]])  # numpy's setitem of a Python int; the DSL wraps where it raises
    same(y, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_symbol_values_in_index_notation_and_reductions(backend):
    x = values(np.float32, 9, seed=3)
    body = "y[i] = x[i] * n - s / m\nt = sum(x * n)"
    (y, t) = run(backend, body, {"x": "f32[n]", "z": "f32[m]", "s": "f32"}, {"y": "f32[n]", "t": "f32"},
                 x, np.zeros(4, np.float32), np.float32(3.0))
    same(y, x * 9 - np.float32(3.0) / 4)
    assert_close(t, np.sum(x * 9), ulps=1, reduction_n=9, magnitude=float(np.abs(x * 9).sum()))


@pytest.mark.parametrize("backend", BACKENDS)
def test_symbol_only_integer_arithmetic_follows_the_integer_rules(backend):
    # n // 0 is 0 (decision 1), a shift amount is masked (decision 3: 70 & 63 = 6), a
    # symbol exponent is an integer power; Python would raise, grow, and give 2**5
    x = np.zeros(5, np.float32)
    (y,) = run(backend, "y = n // 0 + (n << 70) + 2 ** n", {"x": "f32[n]"}, {"y": "i64"}, x)
    same(y, np.int64(0 + (5 << 6) + 2 ** 5))


# ----------------------------------------------------------------------- the generator
def _node(name: str, *args: Node) -> Node:
    dt = infer(name, args)
    assert dt is not None, (name, args)
    return Node(name, dt, max((a.shape for a in args), key=len), args, weak=weak_result(name, args, dt))


@pytest.mark.parametrize("dtype", ["f16", "f32", "f64"])
def test_generator_keeps_x_minus_s_over_n_in_the_float_type(dtype):
    # the generator's oracle held symbols as i64 arrays, agreeing with the old f64 typing
    dt = NP[dtype]
    x, s = Node("input", np.dtype(dt), ("n",), (), "x"), Node("input", np.dtype(dt), (), (), "s")
    node = _node("-", x, _node("/", s, symbol("n")))
    assert node.dtype == dt
    xv, sv = values(dt, 1000, seed=5), dt.type(123.456)
    env = Env({"x": bounds.Val.exact(xv), "s": bounds.Val.exact(np.asarray(sv))}, {"n": 1000})
    same(evaluate(node, env).v, xv - sv / len(xv))


def test_generator_symbol_only_parts_stay_weak_and_wrap_where_numpy_raises():
    x = Node("input", np.dtype(np.int8), ("n",), (), "x")
    n, m = symbol("n"), symbol("m")
    half, ratio = _node("//", n, m), _node("/", n, m)
    assert half.weak and half.dtype == np.int64 and ratio.weak and ratio.dtype == np.float64
    assert not _node("<", n, m).weak  # a comparison is a bool, like a bool array
    env = Env({"x": bounds.Val.exact(np.arange(-3, 3, dtype=np.int8))}, {"n": 300, "m": 7})
    assert evaluate(half, env) == 42 and evaluate(ratio, env) == 300 / 7
    total = _node("+", x, n)
    assert total.dtype == np.int8
    same(evaluate(total, env).v, np.arange(-3, 3, dtype=np.int8) + np.int8(44))  # 300 wraps to 44
    same(evaluate(_node("<", x, n), env).v, np.ones(6, bool))  # exact


@given(symbol_kernels())
def test_generated_symbol_kernels_on_both_backends(case):
    for backend in BACKENDS:
        check_case(case, backend)
