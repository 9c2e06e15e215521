"""The front end's IR, run: to_ir -> lower -> the reference interpreter, against numpy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dsl_helpers import make_def
from hologram.core import atlas
from hologram.core.errors import CompileError, CompileWarning, ExecutionError, HologramError
from hologram.core.types import DType
from hologram.dsl.analyze import to_ir
from hologram.lower.stages import lower
from hologram.testing import assert_close
from hologram_interp import InterpBackend

BACKEND = InterpBackend()
F16, F32, F64, I8, I32, I64, U8, U64 = np.float16, np.float32, np.float64, np.int8, np.int32, np.int64, np.uint8, np.uint64


def run(body: str, inputs: dict[str, tuple[str, object]], outputs: dict[str, str]) -> dict[str, np.ndarray]:
    """Compile `body`, bind shape symbols from the inputs, run on the interpreter."""
    kdef = make_def(body, {k: t for k, (t, _) in inputs.items()}, outputs)
    kir = to_ir(kdef)
    symbols: dict[str, int] = {}
    for p in kdef.inputs:
        arr = np.asarray(inputs[p.name][1])
        for d, size in zip(p.shape, arr.shape):
            if len(d.terms) == 1:
                (s, c), = d.terms
                symbols[s] = (size - d.const) // c
    buffers = {p.name: np.ascontiguousarray(inputs[p.name][1], p.dtype.np) for p in kdef.inputs if p.shape}
    scalars = {p.name: p.dtype.np.type(inputs[p.name][1]) for p in kdef.inputs if not p.shape}
    outs = {p.name: np.zeros(tuple(d.evaluate(symbols) for d in p.shape), p.dtype.np) for p in kdef.outputs}
    BACKEND.launch(BACKEND.prepare(lower(kir)), {**buffers, **outs}, scalars, symbols)
    return outs


def run1(body, inputs, outputs):
    (out,) = run(body, inputs, outputs).values()
    return out


RNG = np.random.default_rng(7)
X = RNG.standard_normal(9).astype(F32)
A = RNG.standard_normal((3, 4)).astype(F32)
B = RNG.standard_normal((4, 5)).astype(F32)


def test_softmax():
    y = run1("m = max(x)\ne = exp(x - m)\ny = e / sum(e)", {"x": ("f32[n]", X)}, {"y": "f32[n]"})
    e = np.exp(X - X.max())
    assert_close(y, e / e.sum(), ulps=8)


def test_gemm():
    c = run1("c[i, j] = alpha * sum(a[i, p] * b[p, j], p)",
             {"alpha": ("f32", 0.5), "a": ("f32[m, k]", A), "b": ("f32[k, n]", B)}, {"c": "f32[m, n]"})
    expected = F32(0.5) * (A @ B)
    assert_close(c, expected, reduction_n=4, magnitude=0.5 * (np.abs(A) @ np.abs(B)))


@pytest.mark.parametrize("body, outs, expected", [
    ("y[i] = x[i] + x[i + 1]", {"y": "f32[n - 1]"}, X[:-1] + X[1:]),
    ("y[i] = x[n - 1 - i]", {"y": "f32[n]"}, X[::-1]),
    ("y[i] = f32(i) * x[i]", {"y": "f32[n]"}, np.arange(9, dtype=F32) * X),
    ("y[i] = i * x[i]", {"y": "f32[n]"}, (np.arange(9) * X).astype(F32)),
    ("y = x / n", {"y": "f32[n]"}, X / len(X)),  # n is weak, as len(X): f32 throughout
    ("y = x * 2 + pi", {"y": "f32[n]"}, X * 2 + np.pi),
    ("y = clip(x, -0.5, 0.5) + relu(x) + where(x > 0, x, 0.25)", {"y": "f32[n]"},
     np.clip(X, -0.5, 0.5) + np.maximum(X, 0) + np.where(X > 0, X, 0.25)),
    ("y = fma(x, x, -x)", {"y": "f32[n]"}, (X.astype(F64) * X - X).astype(F32)),
    ("y = i8(x * 100)", {"y": "i8[n]"}, np.clip(np.trunc(X * 100), -128, 127).astype(I8)),
    ("y = x - max(x)", {"y": "f32[n]"}, X - X.max()),
    ("y = argmax(x) + argmin(x)", {"y": "i64"}, np.argmax(X) + np.argmin(X)),
])
def test_vectors(body, outs, expected):
    dtype = DType.parse(next(iter(outs.values())).partition("[")[0]).np
    assert_close(run1(body, {"x": ("f32[n]", X)}, outs), np.asarray(expected, dtype))


def test_matrices_axes_keepdims_and_broadcasting():
    out = run("s = a - max(a, axis=1, keepdims=true)\nt[j, i] = a[i, j]\nmu = mean(a, axis=0)\n"
              "k = argmax(a[i, j], j, i)\nr = a + c\no[i, j] = v[i] * w[j]",
              {"a": ("f32[m, n]", A), "c": ("f32[m, 1]", A[:, :1].copy()), "v": ("f32[p]", X[:3]),
               "w": ("f32[q]", X[3:7])},
              {"s": "f32[m, n]", "t": "f32[n, m]", "mu": "f32[n]", "k": "i64", "r": "f32[m, n]", "o": "f32[p, q]"})
    assert_close(out["s"], A - A.max(axis=1, keepdims=True))
    assert_close(out["t"], A.T.copy())
    assert_close(out["mu"], A.mean(axis=0), reduction_n=3, magnitude=np.abs(A).mean(axis=0))
    assert out["k"] == np.argmax(A.T)
    assert_close(out["r"], A + A[:, :1])
    assert_close(out["o"], np.outer(X[:3], X[3:7]))


def test_integer_semantics():
    a = np.array([-7, 7, 5, -128, 127, 0], I8)
    b = np.array([2, -2, 0, -1, 3, 5], I8)
    out = run("p = a ** 3\nf = fmod(a, b)\nq = a // b\nr = a % b\ns = a << 9\nu = abs(a)",
              {"a": ("i8[n]", a), "b": ("i8[n]", b)},
              {"p": "i8[n]", "f": "i8[n]", "q": "i8[n]", "r": "i8[n]", "s": "i8[n]", "u": "i8[n]"})
    with np.errstate(all="ignore"):
        assert_close(out["p"], a ** 3)
        assert_close(out["f"], np.fmod(a, b))
        assert_close(out["q"], np.where(b == 0, 0, a // np.where(b == 0, 1, b)).astype(I8))
        assert_close(out["r"], np.where(b == 0, 0, a % np.where(b == 0, 1, b)).astype(I8))
    assert_close(out["s"], (a << 1).astype(I8))  # the shift amount is masked to the bit width
    assert_close(out["u"], np.abs(a))


def test_mixed_signedness_comparison_is_exact():
    u = np.array([0, 5, 2**63, 2**64 - 1], U64)
    s = np.array([-1, 5, 2**62, -(2**63)], I64)
    out = run("lt = u < s\nge = s >= u", {"u": ("u64[n]", u), "s": ("i64[n]", s)}, {"lt": "bool[n]", "ge": "bool[n]"})
    assert_close(out["lt"], u < s)
    assert_close(out["ge"], s >= u)


def test_reduction_dtypes_and_bools():
    b = np.array([True, False, True, True])
    i = np.array([100, 100, 100, -7], I8)
    h = np.array([0.5, 0.25, 1000.0, 3.0], F16)
    out = run("s = sum(b)\nlo = min(b)\nhi = argmax(b)\nt = sum(i)\nmu = mean(i)\nmh = mean(h)\npr = prod(i)",
              {"b": ("bool[n]", b), "i": ("i8[n]", i), "h": ("f16[n]", h)},
              {"s": "i64", "lo": "bool", "hi": "i64", "t": "i64", "mu": "f64", "mh": "f16", "pr": "i64"})
    assert out["s"] == 3 and out["lo"] == False and out["hi"] == 0  # noqa: E712
    assert out["t"] == 293 and out["mu"] == np.mean(i) and out["pr"] == np.prod(i)
    assert_close(out["mh"], np.mean(h), ulps=1)


def test_atlas_and_resonance():
    data = np.arange(256, dtype=U8)
    vals = RNG.standard_normal(256).astype(F32)
    out = run("c = atlas_class(d)\nh = resonance(c, 1)\nw = resonance(c, v)\nm = mirror(c)\n"
              "z = sum(resonance(mirror(c), 1)) + sum(resonance(c, v) * 0.0)",
              {"d": ("u8[n]", data), "v": ("f32[n]", vals)},
              {"c": "i32[n]", "h": "i64[96]", "w": "f64[96]", "m": "i32[n]", "z": "f64"})
    classes = atlas.BYTE_CLASS_TABLE[data]
    assert_close(out["c"], classes.astype(I32))
    assert_close(out["h"], np.bincount(classes, minlength=96).astype(I64))
    assert_close(out["w"].astype(F32), np.bincount(classes, weights=vals, minlength=96).astype(F32),
                 reduction_n=256, magnitude=np.bincount(classes, weights=np.abs(vals), minlength=96))
    assert_close(out["m"], atlas.MIRROR_TABLE[classes].astype(I32))
    assert out["z"] == 256.0


def test_out_of_range_access_is_a_runtime_error_naming_the_line():
    with pytest.raises(ExecutionError, match=r"^<test>:1:8: error: stage .* out of bounds") as info, \
            pytest.warns(CompileWarning, match="indexed past its end"):
        run1("y[i] = x[i + 1]", {"x": ("f32[n]", X)}, {"y": "f32[n]"})
    assert "   1 | y[i] = x[i + 1]\n     |        ^^^^^^^^" in str(info.value)


# ----------------------------------------------------------------------- differential
# Random expressions whose every operation is exact in IEEE arithmetic: the DSL text,
# evaluated by numpy as Python source, must give bit-identical results.
NUMPY_NAMES = {"minimum": np.minimum, "maximum": np.maximum, "abs": np.abs, "where": np.where,
               "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "sqrt": np.sqrt, "fmod": np.fmod,
               "f64": lambda v: np.asarray(v, F64), "f32": lambda v: np.asarray(v, F32),
               "i32": lambda v: np.asarray(v).astype(I32), "copysign": np.copysign, "pi": np.pi}


def _exact_expressions(leaves, ops, unary, binary):
    def extend(inner):
        return st.one_of(
            st.tuples(inner, st.sampled_from(ops), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(st.sampled_from(unary), inner).map(lambda t: f"{t[0]}({t[1]})"),
            st.tuples(st.sampled_from(binary), inner, inner).map(lambda t: f"{t[0]}({t[1]}, {t[2]})"),
            st.tuples(inner, inner, inner).map(lambda t: f"where({t[0]} < {t[1]}, {t[1]}, {t[2]})"),
        )
    return st.recursive(st.sampled_from(leaves), extend, max_leaves=6)


FLOAT_EXPR = _exact_expressions(["x", "y", "s", "1", "0.5", "-2", "pi"], ["+", "-", "*", "/"],
                                ["abs", "floor", "ceil", "trunc", "sqrt", "-"],
                                ["minimum", "maximum", "copysign", "fmod"])
INT_EXPR = _exact_expressions(["a", "c", "3", "-1", "7"], ["+", "-", "*", "//", "%", "&", "|", "^"],
                              ["abs", "-", "~"], ["minimum", "maximum"])


def _differential(expr: str, env: dict[str, np.ndarray], types: dict[str, str]) -> None:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            expected = np.asarray(eval(expr, {"__builtins__": {}}, {**NUMPY_NAMES, **env}))
        except (ArithmeticError, TypeError, ValueError):
            return  # numpy refuses (an overflowing literal, a float bitwise op): not a kernel
    if expected.dtype.kind not in "biuf" or expected.shape not in ((), env["x" if "x" in env else "a"].shape):
        return
    out_type = str(DType.from_numpy(expected.dtype))
    shape = "[n]" if expected.shape else ""
    inputs = {k: (types[k], v) for k, v in env.items()}
    try:
        got = run1(f"out = {expr}", inputs, {"out": out_type + shape})
    except CompileError as e:
        # the DSL refuses what numpy only does at run time: an integer ** with an
        # array exponent, or an int literal that meets a too-narrow type
        assert "**" in expr or "does not fit" in e.message, (expr, e.message)
        return
    with np.errstate(all="ignore"):
        expected = expected.astype(got.dtype)  # a 0-d result of numpy's scalar rules
    assert_close(got, expected, name=expr)


@given(FLOAT_EXPR, hnp.arrays(F64, 5, elements=st.floats(-1e6, 1e6, allow_subnormal=False)),
       hnp.arrays(F32, 5, elements=st.floats(width=32, allow_subnormal=False)),
       st.floats(-10, 10, width=32, allow_subnormal=False))
def test_exact_float_expressions_match_numpy_bit_for_bit(expr, x, y, s):
    _differential(expr, {"x": x, "y": y, "s": np.float32(s)},
                  {"x": "f64[n]", "y": "f32[n]", "s": "f32"})


@given(INT_EXPR, hnp.arrays(I32, 5), hnp.arrays(I8, 5))
def test_integer_expressions_match_numpy(expr, a, c):
    _differential(expr, {"a": a, "c": c}, {"a": "i32[n]", "c": "i8[n]"})


def test_errors_are_hologram_errors():
    with pytest.raises(HologramError):
        run1("y = x + 300", {"x": ("u8[n]", np.zeros(3, U8))}, {"y": "u8[n]"})
