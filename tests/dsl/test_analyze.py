"""Semantic analysis: the Kernel IR each construct produces, numpy's typing, and every
diagnostic with its position."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsl_helpers import NP, TYPES, compile_ir, compute, last, make_def
from hologram.core.errors import CompileError
from hologram.core.types import Affine, DType
from hologram.dsl.analyze import to_ir
from hologram.dsl.functions import FUNCTIONS
from hologram.dsl.reductions import KINDS
from hologram.ir import Accumulate, Compute, Expr, format_kernel


def error(body: str, inputs=None, outputs=None) -> CompileError:
    with pytest.raises(CompileError) as info:
        compile_ir(body, inputs, outputs)
    return info.value


def temp_dtype(expr: str, **types: str) -> DType:
    """The dtype analysis gives the temporary `t = <expr>` over scalar-shaped arrays."""
    inputs = {k: f"{v}[n]" for k, v in types.items()}
    return compile_ir(f"t = {expr}\ny = f64(t)", inputs, {"y": "f64[n]"}).decl("t").dtype


def numpy_dtype(fn, *arrays):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return DType.from_numpy(np.asarray(fn(*arrays)).dtype)


# ----------------------------------------------------------------------- the kernel
def test_softmax():
    kir = compile_ir("m = max(x)\ne = exp(x - m)\ny = e / sum(e)")
    assert format_kernel(kir) == "\n".join([
        "kernel k 1.0.0",
        "  symbols n",
        "  input x: f32[n]",
        "  output y: f32[n]",
        "  temp m: f32",
        "  temp e: f32[n]",
        "  m = max[r0<n](x[r0]):f32",
        "  e[i0] = exp(sub(x[i0], m[]):f32):f32",
        "  y[i0] = div(e[i0], sum[r1<n](e[r1]):f32):f32",
    ])


def test_gemm():
    kir = compile_ir("c[i, j] = alpha * sum(a[i, p] * b[p, j], p)",
                     {"alpha": "f32", "a": "f32[m, k]", "b": "f32[k, n]"}, {"c": "f32[m, n]"})
    assert kir.symbols == ("m", "k", "n")
    assert [d.kind for d in kir.params] == ["scalar", "input", "input"]
    assert str(kir.body[0]) == "c[i, j] = mul($alpha, sum[p<k](mul(a[i, p], b[p, j]):f32):f32):f32"


def test_params_outputs_and_symbols():
    kir = compile_ir("y = x\nz = 0", {"s": "i32", "x": "f32[n, 2*m + 1]", "w": "u8[m]"},
                     {"y": "f32[n, 2*m + 1]", "z": "i64"})
    assert [(d.name, d.kind) for d in kir.params] == [("s", "scalar"), ("x", "input"), ("w", "input")]
    assert [(d.name, d.kind, d.shape) for d in kir.outputs] == [("y", "output", kir.params[1].shape),
                                                                  ("z", "output", ())]
    assert kir.symbols == ("n", "m")
    assert str(kir.body[1]) == "z = 0:i64"


# ----------------------------------------------------------------------- whole arrays
WHOLE = [
    ("y = x * 2 + pi", {"x": "f32[n]"}, {"y": "f32[n]"},
     "y[i0] = add(mul(x[i0], 2.0:f32):f32, 3.1415927410125732:f32):f32"),
    ("y = x * (1 / 3)", {"x": "f32[n]"}, {"y": "f32[n]"}, "y[i0] = mul(x[i0], 0.3333333432674408:f32):f32"),
    ("c = a * b + s", {"a": "f32[m, n]", "b": "f32[n]", "s": "f32"}, {"c": "f32[m, n]"},
     "c[i0, i1] = add(mul(a[i0, i1], b[i1]):f32, $s):f32"),
    ("c = a + r", {"a": "f32[m, n]", "r": "f32[m, 1]"}, {"c": "f32[m, n]"},
     "c[i0, i1] = add(a[i0, i1], r[i0, 0:i64]):f32"),
    ("c = r + q", {"r": "f32[m, 1]", "q": "f32[1, n]", "a": "f32[m, n]"}, {"c": "f32[m, n]"},
     "c[i0, i1] = add(r[i0, 0:i64], q[0:i64, i1]):f32"),
    ("y = b", {"b": "i32[n]", "a": "i32[m]"}, {"y": "i32[m, n]"}, "y[i0, i1] = b[i1]"),
    ("y = 0.0", {"x": "f32[n]"}, {"y": "f32[n]"}, "y[i0] = 0.0:f32"),
    ("y = x", {"x": "i64[n]"}, {"y": "i8[n]"}, "y[i0] = i8(x[i0])"),
    ("y = x", {"x": "bool[n]"}, {"y": "f64[n]"}, "y[i0] = f64(x[i0])"),
    ("first = x[0]", {"x": "f32[n]"}, {"first": "f32"}, "first = x[0:i64]"),
    ("last = x[n - 1]", {"x": "f32[n]"}, {"last": "f32"}, "last = x[sub(n, 1:i64):i64]"),
    ("y = x / n", {"x": "f32[n]"}, {"y": "f32[n]"}, "y[i0] = div(x[i0], f32(n)):f32"),  # n is weak, as len(x)
    ("y = -x", {"x": "u8[n]"}, {"y": "u8[n]"}, "y[i0] = neg(x[i0]):u8"),
    ("y = +x", {"x": "u8[n]"}, {"y": "u8[n]"}, "y[i0] = x[i0]"),
    ("y = ~b", {"b": "bool[n]"}, {"y": "bool[n]"}, "y[i0] = not(b[i0]):bool"),
    ("y = not b and b or b", {"b": "bool[n]"}, {"y": "bool[n]"},
     "y[i0] = or(and(not(b[i0]):bool, b[i0]):bool, b[i0]):bool"),
]


@pytest.mark.parametrize("body, ins, outs, ir", WHOLE, ids=[w[0] for w in WHOLE])
def test_whole_array_statements(body, ins, outs, ir):
    assert last(body, ins, outs) == ir


def test_shape_mismatch_names_both_shapes():
    e = error("z = x + w", {"x": "f32[n]", "w": "f32[k]"}, {"z": "f32[n]"})
    assert "shapes [n] and [k]" in e.message and (e.span.line, e.span.col, e.span.end_col) == (1, 5, 10)
    e = error("c = a + b", {"a": "f32[m, n]", "b": "f32[m]"}, {"c": "f32[m, n]"})
    assert "[m, n] and [m]" in e.message
    e = error("y = x", {"x": "f32[n]", "z": "f32[m]"}, {"y": "f32[m]"})
    assert "declared f32[m] but the value has shape [n]" in e.message


# ----------------------------------------------------------------------- index notation
INDEXED = [
    ("t[j, i] = a[i, j]", {"a": "f32[m, n]"}, {"t": "f32[n, m]"}, "t[j, i] = a[i, j]"),
    ("y[i] = x[n - 1 - i]", {"x": "f32[n]"}, {"y": "f32[n]"}, "y[i] = x[sub(sub(n, i):i64, 1:i64):i64]"),
    ("y[i] = a[2*i]", {"a": "f32[2*n]"}, {"y": "f32[n]"}, "y[i] = a[mul(2:i64, i):i64]"),
    ("y[i] = a[-i + n]", {"a": "f32[n + 1]"}, {"y": "f32[n]"}, "y[i] = a[sub(n, i):i64]"),
    ("y[i] = a[0 - i]", {"a": "f32[n]"}, {"y": "f32[n]"}, "y[i] = a[neg(i):i64]"),
    ("y[i] = x[i] + x[i + 1]", {"x": "f32[n]"}, {"y": "f32[n - 1]"}, "y[i] = add(x[i], x[add(i, 1:i64):i64]):f32"),
    ("d[i] = a[i, i]", {"a": "f32[n, n]"}, {"d": "f32[n]"}, "d[i] = a[i, i]"),
    ("o[i, j] = x[i] * w[j]", {"x": "f32[n]", "w": "f32[m]"}, {"o": "f32[n, m]"}, "o[i, j] = mul(x[i], w[j]):f32"),
    ("y[i] = f32(i) * x[i]", {"x": "f32[n]"}, {"y": "f32[n]"}, "y[i] = mul(f32(i), x[i]):f32"),
    ("y[i] = i * x[i]", {"x": "f32[n]"}, {"y": "f32[n]"}, "y[i] = f32(mul(f64(i), f64(x[i])):f64)"),
    ("y[i] = x[i] - max(x)", {"x": "f32[n]"}, {"y": "f32[n]"}, "y[i] = sub(x[i], max[r0<n](x[r0]):f32):f32"),
    ("y[i] = s", {"x": "f32[n]", "s": "f32"}, {"y": "f32[n]"}, None),
]


@pytest.mark.parametrize("body, ins, outs, ir", INDEXED, ids=[w[0] for w in INDEXED])
def test_index_notation(body, ins, outs, ir):
    if ir is None:
        assert "'i' of the target is not used" in error(body, ins, outs).message
    else:
        assert last(body, ins, outs) == ir


def test_temporary_ranges_come_from_plain_positions():
    kir = compile_ir("t[i, j] = x[i] * w[j]\nz = t", {"x": "f32[n]", "w": "f32[m]"}, {"z": "f32[n, m]"})
    assert kir.decl("t").shape == (Affine.of("n"), Affine.of("m"))
    kir = compile_ir("t[i] = x[i + 1] + x[i]\ny = sum(t)", {"x": "f32[n]"}, {"y": "f32"})
    assert kir.decl("t").shape == (Affine.of("n"),)


@pytest.mark.parametrize("index, dim, rng", [
    ("i + 1", "n", Affine.of("n") - 1), ("2*i", "2*n", Affine.of("n")), ("2*i + 1", "2*n", Affine.of("n")),
    ("3*i + 2", "3*n + 1", Affine.of("n")), ("i + n", "2*n", Affine.of("n")), ("2*i", "2*n + 1", Affine.of("n") + 1),
])
def test_a_variable_without_plain_uses_takes_the_largest_in_bounds_range(index, dim, rng):
    kir = compile_ir(f"t[i] = x[{index}]\ny = sum(t)", {"x": f"f32[{dim}]"}, {"y": "f32"})
    assert kir.decl("t").shape == (rng,)


@pytest.mark.parametrize("body, ins, line, col, message", [
    ("t[i] = x[i] + w[i]\ny = sum(t)", {"x": "f32[n]", "w": "f32[m]"}, 1, 17,
     r"index variable 'i' has conflicting ranges: n \(dimension 0 of 'x', line 1\) and m \(dimension 0 of 'w'"),
    ("y = sum(x[i] * w[i], i)", {"x": "f32[n]", "w": "f32[m]"}, 1, 18, r"conflicting ranges: n .* and m"),
    ("t[i] = x[i - 1]\ny = sum(t)", {"x": "f32[n]"}, 1, 3, r"cannot infer the range of index variable 'i'"),
    ("t[i] = x[2*i]\ny = sum(t)", {"x": "f32[n]"}, 1, 3, r"cannot infer the range of index variable 'i'"),
    ("y = sum(x[2*k] + w[k + 1], k)", {"x": "f32[2*n]", "w": "f32[n]"}, 1, 20,
     r"conflicting ranges: n \(dimension 0 of 'x', line 1\) and n - 1 \(dimension 0 of 'w'"),
    ("y = sum(f32(i), i)", {"x": "f32[n]"}, 1, 17, r"cannot infer the range of index variable 'i'"),
    ("t[i] = x[i] - x\ny = sum(t)", {"x": "f32[n]"}, 1, 8, r"one value per point; it has shape \[n\]"),
    ("t[i] = x[i] * x[j]\ny = sum(t)", {"x": "f32[n]"}, 1, 17, r"unknown index variable 'j'"),
    ("y = x[i]", {"x": "f32[n]"}, 1, 7, r"unknown index variable 'i'"),
    ("y2[i, i] = a[i, i]\ny = 0.0", {"a": "f32[n, n]"}, 1, 7, r"index variable 'i' is already bound"),
    ("y[x] = x[0]", {"x": "f32[n]"}, 1, 3, r"'x' names an array"),
    ("y[n] = x[0]", {"x": "f32[n]"}, 1, 3, r"'n' is a shape symbol"),
    ("y[i, j] = x[i]", {"x": "f32[n]"}, 1, 1, r"output 'y' has 1 dimension \(f32\[n\]\) but the target names 2"),
    ("y[i] = x[i, i]", {"x": "f32[n]"}, 1, 8, r"'x' has 1 dimension \(f32\[n\]\) but 2 indices are given"),
    ("y[i] = s[i]", {"x": "f32[n]", "s": "f32"}, 1, 8, r"'s' is a scalar parameter; it cannot be indexed"),
    ("m = max(x)\ny[i] = m[i]", {"x": "f32[n]"}, 2, 8, r"'m' is a scalar \(0-dimensional\)"),
    ("y[i] = x[1.5]", {"x": "f32[n]"}, 1, 10, r"array indices must be integers"),
    ("y[i] = x[w[i] * 0.5]", {"x": "f32[n]", "w": "i32[n]"}, 1, 10, r"an index must be an integer; this one is f64"),
    ("y[i] = x[w[i] > 0]", {"x": "f32[n]", "w": "i32[n]"}, 1, 10, r"an index must be an integer; this one is a bool"),
    ("y[i] = x[w]", {"x": "f32[n]", "w": "i32[n]"}, 1, 10, r"'w' is an array \(\[n\]\); an index is one integer"),
    ("y[i] = x[w + 1]", {"x": "f32[n]", "w": "i32[n]"}, 1, 10, r"an index is one integer per point; this one has"),
    ("y[i] = x[i][0]", {"x": "f32[n]"}, 1, 8, r"too many indices for 'x\[i\]': it has 0 dimensions"),
    ("y[i] = i[0]", {"x": "f32[n]"}, 1, 8, r"'i' is an index variable; it cannot be indexed"),
    ("y[i] = x[10**30]", {"x": "f32[n]"}, 1, 10, r"the index 10{30} is too large for i64"),
    ("y[i] = x[i + 100000000000000000000]", {"x": "f32[n]"}, 1, 10, r"too large for i64"),
])
def test_index_errors(body, ins, line, col, message):
    e = error(body, ins, {"y": "f32[n]"} if "y[" in body else {"y": "f32"})
    assert re.search(message, e.message), e.message
    assert (e.span.line, e.span.col) == (line, col)


# ----------------------------------------------------------------------- reductions
REDUCE = [
    ("s = sum(x)", {"x": "f32[n]"}, {"s": "f32"}, "s = sum[r0<n](x[r0]):f32"),
    ("s = sum(a)", {"a": "i8[m, n]"}, {"s": "i64"}, "s = sum[r0<m, r1<n](i64(a[r0, r1])):i64"),
    ("s = prod(x)", {"x": "u8[n]"}, {"s": "u64"}, "s = prod[r0<n](u64(x[r0])):u64"),
    ("s = sum(a, axis=1)", {"a": "f32[m, n]"}, {"s": "f32[m]"}, "s[i0] = sum[r0<n](a[i0, r0]):f32"),
    ("s = sum(a, axis=-2)", {"a": "f32[m, n]"}, {"s": "f32[n]"}, "s[i0] = sum[r0<m](a[r0, i0]):f32"),
    ("s = max(a, axis=1, keepdims=true)", {"a": "f32[m, n]"}, {"s": "f32[m, 1]"},
     "s[i0, i1] = max[r0<n](a[i0, r0]):f32"),
    ("s = a - max(a, axis=1, keepdims=true)", {"a": "f32[m, n]"}, {"s": "f32[m, n]"},
     "s[i0, i1] = sub(a[i0, i1], max[r0<n](a[i0, r0]):f32):f32"),
    ("s = sum(a, keepdims=true)", {"a": "f32[m, n]"}, {"s": "f32[1, 1]"}, "s[i0, i1] = sum[r0<m, r1<n](a[r0, r1]):f32"),
    ("s = mean(x)", {"x": "i32[n]"}, {"s": "f64"}, "s = div(sum[r0<n](f64(x[r0])):f64, f64(n)):f64"),
    ("s = mean(x)", {"x": "f16[n]"}, {"s": "f16"}, "s = f16(div(sum[r0<n](f32(x[r0])):f32, f32(n)):f32)"),
    ("s = mean(a, axis=0)", {"a": "f32[4, n]"}, {"s": "f32[n]"}, "s[i0] = div(sum[r0<4](a[r0, i0]):f32, 4.0:f32):f32"),
    ("s = mean(a)", {"a": "f32[m, n]"}, {"s": "f32"},
     "s = div(sum[r0<m, r1<n](a[r0, r1]):f32, f32(mul(m, n):i64)):f32"),
    ("s = argmax(a)", {"a": "f32[m, n]"}, {"s": "i64"}, "s = argmax[r0<m, r1<n](a[r0, r1]):i64"),
    ("s = argmin(a, axis=1)", {"a": "f32[m, n]"}, {"s": "i64[m]"}, "s[i0] = argmin[r0<n](a[i0, r0]):i64"),
    ("s = min(b)", {"b": "bool[n]"}, {"s": "bool"}, "s = bool(min[r0<n](u8(b[r0])):u8)"),
    ("s = argmax(b)", {"b": "bool[n]"}, {"s": "i64"}, "s = argmax[r0<n](u8(b[r0])):i64"),
    ("s[i] = max(a[i, j], j)", {"a": "f64[m, n]"}, {"s": "f64[m]"}, "s[i] = max[j<n](a[i, j]):f64"),
    ("s = sum(a[i, j], i, j)", {"a": "f64[m, n]"}, {"s": "f64"}, "s = sum[i<m, j<n](a[i, j]):f64"),
    ("s = argmax(a[i, j], j, i)", {"a": "f64[m, n]"}, {"s": "i64"}, "s = argmax[j<n, i<m](a[i, j]):i64"),
    ("s = sum(x[i] * w[i], i)", {"x": "f64[n]", "w": "f64[n]"}, {"s": "f64"}, "s = sum[i<n](mul(x[i], w[i]):f64):f64"),
    ("s = sum(x[p] * w, p)", {"x": "f64[m]", "w": "f64[n]"}, {"s": "f64[n]"}, "s[i0] = sum[p<m](mul(x[p], w[i0]):f64):f64"),
    ("s = sum(sum(a, axis=1))", {"a": "f32[m, n]"}, {"s": "f32"}, "s = sum[r1<m](sum[r0<n](a[r1, r0]):f32):f32"),
    ("s = max(abs(x - w))", {"x": "f64[n]", "w": "f64[n]"}, {"s": "f64"},
     "s = max[r0<n](abs(sub(x[r0], w[r0]):f64):f64):f64"),
    ("s = sum(s0)", {"s0": "f32"}, {"s": "f32"}, "s = $s0"),
    ("s = argmax(s0)", {"s0": "f32"}, {"s": "i64"}, "s = mul(0:i64, i64($s0)):i64"),
    ("s = sum(3)", {"x": "f32[n]"}, {"s": "i64"}, "s = 3:i64"),
    ("s = mean(3)", {"x": "f32[n]"}, {"s": "f64"}, "s = f64(3:i64)"),
]


@pytest.mark.parametrize("body, ins, outs, ir", REDUCE, ids=[r[0] for r in REDUCE])
def test_reductions(body, ins, outs, ir):
    assert last(body, ins, outs) == ir


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("t", TYPES)
def test_reduction_dtypes_are_numpys(kind, t):
    kir = compile_ir(f"s = {kind}(x)", {"x": f"{t}[n]"}, {"s": "f64"} if t != "u64" or kind != "sum" else {"s": "u64"})
    expected = numpy_dtype(getattr(np, kind), np.ones(3, NP[t]))
    assert compute(kir, "s").body.srcs[0].dtype is expected or \
        (compute(kir, "s").body.dtype is expected)


@pytest.mark.filterwarnings("ignore:.*temporary 't' is assigned but never used")  # t only takes the name p
def test_reduction_variables_are_unique_in_the_kernel():
    kir = compile_ir("t[p] = x[p]\nu = sum(x[p], p)\nv = sum(x[p], p) + sum(x)\ny = sum(a, axis=0) + u + v",
                     {"x": "f32[n]", "a": "f32[m, n]"}, {"y": "f32[n]"})
    reduce_vars, outer = [], set()
    for s in kir.body:
        outer.update(s.vars)
        for node in s.body.walk():
            if node.op == "REDUCE":
                reduce_vars += [v for v, _ in node.arg[1]]
    assert len(reduce_vars) == len(set(reduce_vars)) == 4
    assert not set(reduce_vars) & outer
    assert "p" not in reduce_vars  # p is an outer variable elsewhere, so it was renamed


@pytest.mark.parametrize("body, ins, col, message", [
    ("y = sum(x, axis=1)", {"x": "f32[n]"}, 5, r"axis 1 is out of range for an array of 1 dimension \(shape \[n\]\)"),
    ("y = sum(s, axis=0)", {"s": "f32"}, 5, r"axis 0 is out of range for a scalar"),
    ("y = sum(x, axis=1.0)", {"x": "f32[n]"}, 17, r"axis must be an integer literal"),
    ("y = sum(x, axis=n)", {"x": "f32[n]"}, 17, r"axis must be an integer literal"),
    ("y = sum(x, keepdims=1)", {"x": "f32[n]"}, 21, r"keepdims must be true or false"),
    ("y = sum(x, axes=1)", {"x": "f32[n]"}, 12, r"sum\(\) has no keyword argument 'axes'; did you mean 'axis'\?"),
    ("y = sum(x[i], i, axis=0)", {"x": "f32[n]"}, 5, r"takes no axis= or keepdims="),
    ("y = sum(x, 1)", {"x": "f32[n]"}, 12, r"after the first must be index variable names"),
    ("y = sum(x[i], j)", {"x": "f32[n]"}, 11, r"unknown index variable 'i'"),
    ("y = sum(x[i], i, j)", {"x": "f32[n]"}, 18, r"reduces over 'j', which does not appear"),
    ("y = sum(x[i], i, i)", {"x": "f32[n]"}, 18, r"'i' is already bound"),
    ("y = sum(sum(x[i], i), i)", {"x": "f32[n]"}, 19, r"index variable 'i' is already bound"),
    ("y = sum()", {"x": "f32[n]"}, 5, r"sum\(\) takes 1 argument"),
    ("y = max(x, w)", {"x": "f32[n]", "w": "f32[n]"}, 12, r"must be index variable names"),
])
def test_reduction_errors(body, ins, col, message):
    e = error(body, ins, {"y": "f32"})
    assert re.search(message, e.message), e.message
    assert (e.span.line, e.span.col) == (1, col)


def test_two_argument_max_suggests_maximum():
    assert "maximum(a, b)" in error("y = max(x, w)", {"x": "f32[n]", "w": "f32[n]"}).hint
    assert "minimum(a, b)" in error("y = min(x, 0)", {"x": "f32[n]"}).hint


# ----------------------------------------------------------------------- typing (numpy decides)
OPERATORS = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide, "//": np.floor_divide,
             "%": np.remainder, "&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor,
             "<<": np.left_shift, ">>": np.right_shift, "<": np.less, "==": np.equal}


@pytest.mark.parametrize("op", OPERATORS)
def test_binary_operator_dtypes_are_numpys(op):
    for ta in TYPES:
        for tb in TYPES:
            a, b = np.ones(2, NP[ta]), np.ones(2, NP[tb])
            try:
                expected = numpy_dtype(OPERATORS[op], a, b)
            except TypeError:
                with pytest.raises(CompileError):
                    temp_dtype(f"a {op} b", a=ta, b=tb)
                continue
            assert temp_dtype(f"a {op} b", a=ta, b=tb) is expected, (ta, op, tb)


@pytest.mark.parametrize("literal", ["1", "1.5", "true", "-1"])
@pytest.mark.parametrize("op", ["+", "*", "<", "&", "/"])
def test_weak_literal_dtypes_are_numpys(literal, op):
    value = {"true": True}.get(literal) or eval(literal)
    for t in TYPES:
        a = np.ones(2, NP[t])
        try:
            expected = numpy_dtype(OPERATORS[op], a, value)
            if op == "<" and NP[t].kind == "u" and value == -1:
                raise OverflowError("numpy 2 compares exactly; the DSL asks for a wider operand")
        except (TypeError, OverflowError):
            with pytest.raises(CompileError):
                temp_dtype(f"a {op} {literal}", a=t)
            continue
        assert temp_dtype(f"a {op} {literal}", a=t) is expected, (t, op, literal)
        assert temp_dtype(f"{literal} {op} a", a=t) is numpy_dtype(OPERATORS[op], value, a)


UNARY_NUMPY = {"abs": np.abs, "round": np.round, "rsqrt": np.sqrt, "sigmoid": np.exp, "gelu": np.tanh,
               "relu": lambda x: np.maximum(x, 0), "erf": np.exp, "erfc": np.exp}


@pytest.mark.parametrize("name", sorted(n for n, f in FUNCTIONS.items()
                                        if f.kind in ("elementwise", "composite") and len(f.params) == 1))
def test_unary_function_dtypes_are_numpys(name):
    ref = UNARY_NUMPY.get(name) or getattr(np, name)
    for t in TYPES:
        try:
            expected = numpy_dtype(ref, np.ones(2, NP[t]))
        except TypeError:
            with pytest.raises(CompileError):
                temp_dtype(f"{name}(a)", a=t)
            continue
        assert temp_dtype(f"{name}(a)", a=t) is expected, (name, t)


@pytest.mark.parametrize("name", ["arctan2", "hypot", "fmod", "copysign", "minimum", "maximum"])
def test_binary_function_dtypes_are_numpys(name):
    for ta in TYPES:
        for tb in ("i8", "u16", "f32", "bool"):
            try:
                expected = numpy_dtype(getattr(np, name), np.ones(2, NP[ta]), np.ones(2, NP[tb]))
            except TypeError:
                with pytest.raises(CompileError):
                    temp_dtype(f"{name}(a, b)", a=ta, b=tb)
                continue
            assert temp_dtype(f"{name}(a, b)", a=ta, b=tb) is expected, (name, ta, tb)


def test_functions_of_literals_are_typed():
    assert temp_dtype("a * sqrt(2.0)", a="f32") is DType.F64
    assert temp_dtype("a * f32(2)", a="i8") is DType.F32
    assert temp_dtype("a * (2 * pi)", a="f16") is DType.F16
    assert temp_dtype("sqrt(2)", a="f16") is DType.F64


def test_symbols_are_weak_ints_and_index_variables_i64():
    # n is len(x), a Python int: weak (NEP 50); i is np.arange(n), an i64 array
    assert temp_dtype("a * n", a="f32") is DType.F32
    assert temp_dtype("a * n", a="i8") is DType.I8
    assert temp_dtype("a * i64(n)", a="f32") is DType.F64
    assert last("y[i] = i", {"x": "f32[n]"}, {"y": "i8[n]"}) == "y[i] = i8(i)"
    assert "cannot assign a i64 value to output 'y' of type u8" in error("y[i] = i", {"x": "f32[n]"},
                                                                          {"y": "u8[n]"}).message


@pytest.mark.parametrize("src", TYPES)
@pytest.mark.parametrize("dst", TYPES)
def test_output_assignment_is_a_same_kind_cast(src, dst):
    body, ins, outs = "y = x", {"x": f"{src}[n]"}, {"y": f"{dst}[n]"}
    if np.can_cast(NP[src], NP[dst], "same_kind"):
        assert last(body, ins, outs) == ("y[i0] = x[i0]" if src == dst else f"y[i0] = {dst}(x[i0])")
    else:
        e = error(body, ins, outs)
        assert f"cannot assign a {src} value to output 'y' of type {dst}" in e.message
        assert e.hint == f"convert explicitly: y = {dst}(...)"


@pytest.mark.parametrize("literal, dst, ok", [
    ("3", "u8", True), ("300", "u8", False), ("-1", "u8", False), ("1.5", "i32", False), ("1.5", "f16", True),
    ("true", "i8", True), ("3", "bool", False), ("3", "f32", True), ("2**63", "u64", True), ("2**64", "u64", False),
])
def test_literal_assigned_to_an_output(literal, dst, ok):
    if ok:
        assert last(f"y = {literal}", {"x": "f32[n]"}, {"y": dst}).startswith("y = ")
    else:
        error(f"y = {literal}", {"x": "f32[n]"}, {"y": dst})


# ----------------------------------------------------------------------- operators
OPERATOR_IR = [
    ("y = x ** 2", {"x": "i32[n]"}, "i32", "y[i0] = mul(x[i0], x[i0]):i32"),
    ("y = x ** 0", {"x": "i32[n]"}, "i32", "y[i0] = add(mul(x[i0], 0:i32):i32, 1:i32):i32"),  # x still computed
    ("y = x ** 5", {"x": "i32[n]"}, "i32", "y[i0] = mul(x[i0], mul(mul(x[i0], x[i0]):i32, mul(x[i0], x[i0]):i32):i32):i32"),
    ("y = power(x, 3)", {"x": "i8[n]"}, "i8", "y[i0] = mul(x[i0], mul(x[i0], x[i0]):i8):i8"),
    ("y = x ** 0.5", {"x": "f32[n]"}, "f32", "y[i0] = pow(x[i0], 0.5:f32):f32"),
    ("y = x ** w", {"x": "f32[n]", "w": "f32[n]"}, "f32", "y[i0] = pow(x[i0], w[i0]):f32"),
    ("y = x ** 0.5", {"x": "i32[n]"}, "f64", "y[i0] = pow(f64(x[i0]), 0.5:f64):f64"),
    ("y = b + b", {"b": "bool[n]"}, "bool", "y[i0] = or(b[i0], b[i0]):bool"),
    ("y = b * b", {"b": "bool[n]"}, "bool", "y[i0] = and(b[i0], b[i0]):bool"),
    ("y = maximum(b, b)", {"b": "bool[n]"}, "bool", "y[i0] = or(b[i0], b[i0]):bool"),
    ("y = b << b", {"b": "bool[n]"}, "i8", "y[i0] = shl(i8(b[i0]), i8(b[i0])):i8"),
    ("y = u < s", {"u": "u64[n]", "s": "i64[n]"}, "bool",
     "y[i0] = where(cmplt(s[i0], 0:i64):bool, False:bool, cmplt(u[i0], u64(s[i0])):bool):bool"),
    ("y = s >= u", {"u": "u64[n]", "s": "i64[n]"}, "bool",
     "y[i0] = where(cmplt(s[i0], 0:i64):bool, False:bool, cmple(u[i0], u64(s[i0])):bool):bool"),
    ("y = x / w", {"x": "i32[n]", "w": "i32[n]"}, "f64", "y[i0] = div(f64(x[i0]), f64(w[i0])):f64"),
    ("y = x // 2", {"x": "i32[n]"}, "i32", "y[i0] = floordiv(x[i0], 2:i32):i32"),
    ("y = x % 2.0", {"x": "f32[n]"}, "f32", "y[i0] = mod(x[i0], 2.0:f32):f32"),
    ("y = x >> 1", {"x": "u8[n]"}, "u8", "y[i0] = shr(x[i0], 1:u8):u8"),
    ("y = x - 1", {"x": "u8[n]"}, "u8", "y[i0] = sub(x[i0], 1:u8):u8"),
    ("y = 1 - x", {"x": "u8[n]"}, "u8", "y[i0] = sub(1:u8, x[i0]):u8"),
    ("y = x + 0x0F", {"x": "u8[n]"}, "u8", "y[i0] = add(x[i0], 15:u8):u8"),
    ("y = x * 16777217", {"x": "f32[n]"}, "f32", "y[i0] = mul(x[i0], 16777216.0:f32):f32"),
    ("y = x * 100000", {"x": "f16[n]"}, "f16", "y[i0] = mul(x[i0], inf:f16):f16"),
    ("y = x + nan", {"x": "f32[n]"}, "f32", "y[i0] = add(x[i0], nan:f32):f32"),
    ("y = x + (2 ** 3 - 1) // 2", {"x": "i8[n]"}, "i8", "y[i0] = add(x[i0], 3:i8):i8"),
    ("y = x < 2.5", {"x": "i8[n]"}, "bool", "y[i0] = cmplt(f64(x[i0]), 2.5:f64):bool"),
]


@pytest.mark.parametrize("body, ins, out, ir", OPERATOR_IR, ids=[o[0] for o in OPERATOR_IR])
def test_operators(body, ins, out, ir):
    assert last(body, ins, {"y": f"{out}[n]"}) == ir


@pytest.mark.parametrize("body, ins, col, message", [
    ("y = x & 1", {"x": "f32[n]"}, 5, r"operator '&' is not defined for f32 and an int literal"),
    ("y = ~x", {"x": "f32[n]"}, 5, r"operator '~' is not defined for f32"),
    ("y = x << w", {"x": "f32[n]", "w": "i32[n]"}, 5, r"operator '<<' is not defined for f32 and i32"),
    ("y = -b", {"b": "bool[n]"}, 5, r"operator '-' is not defined for bool"),
    ("y = b - b", {"b": "bool[n]"}, 5, r"operator '-' is not defined for bool and bool"),
    ("y = x and x", {"x": "f32[n]"}, 5, r"'and' needs bool operands; got f32"),
    ("y = not x", {"x": "f32[n]"}, 9, r"'not' needs bool operands; got f32"),
    ("y = x ** -1", {"x": "i32[n]"}, 10, r"non-negative integer exponent; got the literal -1"),
    ("y = x + 300", {"x": "u8[n]"}, 9, r"the literal 300 does not fit in u8 \(range 0\.\.255\)"),
    ("y = x + -1", {"x": "u8[n]"}, 9, r"the literal -1 does not fit in u8"),
    ("y = x < 300", {"x": "u8[n]"}, 9, r"the literal 300 does not fit in u8"),
    ("y = x * 2**70", {"x": "i64[n]"}, 9, r"the literal 1180591620717411303424 does not fit in i64"),
    ("y = x + 1 / 0", {"x": "f32[n]"}, 9, r"division by zero in a constant expression"),
    ("y = x + 10 ** 10000", {"x": "f32[n]"}, 9, r"constant expression is too large"),
    ("y = x + (1 << 100000)", {"x": "f32[n]"}, 10, r"constant expression is too large"),
    ("y = x + (-8) ** 0.5", {"x": "f32[n]"}, 9, r"complex result"),
    ("y = x + (1.5 & 1)", {"x": "f32[n]"}, 10, r"cannot evaluate the constant expression"),
    ("y = x + 2.0 ** 5000", {"x": "f32[n]"}, 9, r"cannot evaluate the constant expression"),
    ("t = 18446744073709551616\ny = x", {"x": "f32[n]"}, 5, r"too large for any integer type"),
])
def test_operator_errors(body, ins, col, message):
    e = error(body, ins, {"y": "f32[n]" if "u8" not in str(ins) else "u8[n]"})
    assert re.search(message, e.message), e.message
    assert (e.span.line, e.span.col) == (1, col)


def test_operator_error_hints():
    assert "f64(x) ** y" in error("y = x ** -2", {"x": "i32[n]"}).hint
    assert "i32(x)" in error("y = x & 1", {"x": "f32[n]"}).hint
    assert "not" in error("y = -b", {"b": "bool[n]"}, {"y": "bool[n]"}).hint
    assert "x > 0" in error("y = x and x", {"x": "f32[n]"}).hint


# ----------------------------------------------------------------------- functions
FUNCTION_IR = [
    ("y = sqrt(x)", {"x": "i8[n]"}, "f16", "y[i0] = sqrt(f16(x[i0])):f16"),
    ("y = floor(x)", {"x": "i32[n]"}, "i32", "y[i0] = x[i0]"),
    ("y = round(x)", {"x": "i32[n]"}, "i32", "y[i0] = x[i0]"),
    ("y = round(x)", {"x": "f32[n]"}, "f32", "y[i0] = rint(x[i0]):f32"),
    ("y = round(b)", {"b": "bool[n]"}, "f16", "y[i0] = f16(b[i0])"),
    ("y = rint(x)", {"x": "i8[n]"}, "f16", "y[i0] = rint(f16(x[i0])):f16"),
    ("y = abs(x)", {"x": "u8[n]"}, "u8", "y[i0] = x[i0]"),
    ("y = abs(x)", {"x": "i8[n]"}, "i8", "y[i0] = abs(x[i0]):i8"),
    ("y = isnan(x)", {"x": "i8[n]"}, "bool", "y[i0] = False:bool"),
    ("y = isnan(x)", {"x": "f32[n]"}, "bool", "y[i0] = isnan(x[i0]):bool"),
    ("y = fmod(x, w)", {"x": "u8[n]", "w": "u8[n]"}, "u8", "y[i0] = mod(x[i0], w[i0]):u8"),
    ("y = fmod(x, w)", {"x": "f32[n]", "w": "f32[n]"}, "f32", "y[i0] = fmod(x[i0], w[i0]):f32"),
    ("y = relu(x)", {"x": "f32[n]"}, "f32", "y[i0] = max(x[i0], 0.0:f32):f32"),
    ("y = relu(x)", {"x": "i32[n]"}, "i32", "y[i0] = max(x[i0], 0:i32):i32"),
    ("y = sigmoid(x)", {"x": "f32[n]"}, "f32", "y[i0] = sigmoid(x[i0]):f32"),
    ("y = rsqrt(x)", {"x": "i16[n]"}, "f32", "y[i0] = rsqrt(f32(x[i0])):f32"),
    ("y = clip(x, 0, 1.5)", {"x": "f32[n]"}, "f32", "y[i0] = min(max(x[i0], 0.0:f32):f32, 1.5:f32):f32"),
    ("y = clip(x, lo, hi)", {"x": "i8[n]", "lo": "i8", "hi": "i16"}, "i16",
     "y[i0] = min(i16(max(x[i0], $lo):i8), $hi):i16"),
    ("y = where(c, x, 0)", {"c": "bool[n]", "x": "f32[n]"}, "f32", "y[i0] = where(c[i0], x[i0], 0.0:f32):f32"),
    ("y = where(c, a, x)", {"c": "bool[n]", "a": "i8[n]", "x": "f32[n]"}, "f32",
     "y[i0] = where(c[i0], f32(a[i0]), x[i0]):f32"),
    ("y = where(c, 1, 2.5)", {"c": "bool[n]"}, "f64", "y[i0] = where(c[i0], 1.0:f64, 2.5:f64):f64"),
    ("y = where(true, x, x)", {"x": "f32[n]"}, "f32", "y[i0] = where(True:bool, x[i0], x[i0]):f32"),
    ("y = fma(x, x, 1)", {"x": "f32[n]"}, "f32", "y[i0] = fma(x[i0], x[i0], 1.0:f32):f32"),
    ("y = fma(x, x, x)", {"x": "i8[n]"}, "i8", "y[i0] = add(mul(x[i0], x[i0]):i8, x[i0]):i8"),
    ("y = fma(x, w, 1)", {"x": "f16[n]", "w": "f32[n]"}, "f32", "y[i0] = fma(f32(x[i0]), w[i0], 1.0:f32):f32"),
    ("y = f64(x)", {"x": "f32[n]"}, "f64", "y[i0] = f64(x[i0])"),
    ("y = f32(x)", {"x": "f32[n]"}, "f32", "y[i0] = x[i0]"),
    ("y = bool(x)", {"x": "f32[n]"}, "bool", "y[i0] = bool(x[i0])"),
    ("y = i8(300) + x", {"x": "u8[n]"}, "i16", "y[i0] = add(i16(44:i8), i16(x[i0])):i16"),
    ("y = u8(-1) + x", {"x": "u8[n]"}, "u8", "y[i0] = add(255:u8, x[i0]):u8"),
    ("y = i8(300.0) + x", {"x": "i8[n]"}, "i8", "y[i0] = add(127:i8, x[i0]):i8"),
    ("y = i32(nan) + x", {"x": "i32[n]"}, "i32", "y[i0] = add(0:i32, x[i0]):i32"),
    ("y = u8(-inf) + x", {"x": "u8[n]"}, "u8", "y[i0] = add(0:u8, x[i0]):u8"),
    ("y = bool(2) & x", {"x": "bool[n]"}, "bool", "y[i0] = and(True:bool, x[i0]):bool"),
    ("y = f16(1e6) + x", {"x": "f16[n]"}, "f16", "y[i0] = add(inf:f16, x[i0]):f16"),
]


@pytest.mark.parametrize("body, ins, out, ir", FUNCTION_IR, ids=[f[0] for f in FUNCTION_IR])
def test_functions(body, ins, out, ir):
    assert last(body, ins, {"y": f"{out}[n]"}) == ir


def test_gelu_is_the_erfc_form_in_f64():
    # 0.5*x * erfc(-x / sqrt(2)) in f64, rounded once to the float type np.tanh gives x
    ir = last("y = gelu(x)", {"x": "f32[n]"}, {"y": "f32[n]"})
    assert ir == ("y[i0] = f32(mul(mul(0.5:f64, f64(x[i0])):f64, "
                  "erfc(div(neg(f64(x[i0])):f64, 1.4142135623730951:f64):f64):f64):f64)")
    assert last("y = gelu(x)", {"x": "i8[n]"}, {"y": "f16[n]"}).startswith("y[i0] = f16(mul(mul(0.5:f64, f64(x[i0]))")


def test_fma_integer_fmod_and_mixed_comparisons_keep_float_ops_off_integers():
    kir = compile_ir("a = fmod(x, w)\nb = fma(x, w, x)\nc = x ** 3\ny = f32(a + b + c)",
                     {"x": "i32[n]", "w": "i32[n]"}, {"y": "f32[n]"})
    float_only = {"FMOD", "FMA", "POW", "SQRT", "EXP", "FLOOR", "RINT"}
    for s in kir.body:
        for node in s.body.walk():
            assert not (node.op in float_only and not node.dtype.is_float), str(node)


@pytest.mark.parametrize("body, ins, col, message", [
    ("y = expp(x)", {"x": "f32[n]"}, 5, r"unknown function 'expp'; did you mean 'exp'\?"),
    ("y = exp(x, x)", {"x": "f32[n]"}, 5, r"exp\(\) takes 1 argument \(exp\(x\)\) but 2 were given"),
    ("y = clip(x, 0.0)", {"x": "f32[n]"}, 5, r"clip\(\) takes 3 arguments \(clip\(x, lo, hi\)\) but 2 were given"),
    ("y = round(x, 2)", {"x": "f32[n]"}, 5, r"round\(\) takes 1 argument"),
    ("y = exp(x, axis=1)", {"x": "f32[n]"}, 12, r"exp\(\) has no keyword argument 'axis'"),
    ("y = x(1)", {"x": "f32[n]"}, 5, r"'x' is not a function"),
    ("y = sign(b)", {"b": "bool[n]"}, 5, r"sign\(\) is not defined for bool"),
    ("y = where(x, x, x)", {"x": "f32[n]"}, 11, r"the condition of where\(\) must be bool; got f32"),
    ("y = where(c, x, w)", {"c": "bool[n]", "x": "f32[n]", "w": "f32[m]"}, 5, r"do not broadcast"),
    ("y = f32(x, x)", {"x": "f32[n]"}, 5, r"f32\(\) takes 1 argument"),
])
def test_function_errors(body, ins, col, message):
    e = error(body, ins, {"y": "f32[n]"})
    assert re.search(message, e.message), e.message
    assert (e.span.line, e.span.col) == (1, col)


def test_round_hint_mentions_decimals():
    assert "decimals" in error("y = round(x, 2)").hint


# ----------------------------------------------------------------------- atlas
def test_atlas_functions_read_i64_and_have_fixed_types():
    kir = compile_ir("c = atlas_class(b)\nm = mirror(c)\nd = degree(c)\nk = neighbor(c, 2)\nu = is_unity(c)\n"
                     "a = bound_map(c, 1, b)\ny = f64(m + d + k) + f64(u) + f64(a)",
                     {"b": "u8[n]"}, {"y": "f64[n]"})
    assert [kir.decl(t).dtype for t in "cmdkua"] == [DType.I32] * 4 + [DType.BOOL, DType.I64]
    assert str(kir.body[0]) == "c[i0] = atlas_class(i64(b[i0])):i32"
    assert str(kir.body[3]) == "k[i0] = neighbor(i64(c[i0]), 2:i64):i32"
    assert str(kir.body[5]) == "a[i0] = bound_map(i64(c[i0]), 1:i64, i64(b[i0])):i64"
    assert last("y = mirror(b)", {"b": "bool[n]"}, {"y": "i32[n]"}) == "y[i0] = mirror(i64(b[i0])):i32"


def test_atlas_functions_refuse_floats():
    e = error("y = mirror(x)", {"x": "f32[n]"}, {"y": "i32[n]"})
    assert "mirror() needs integer arguments; got f32" in e.message and e.span.col == 12


def test_resonance_is_an_accumulate():
    kir = compile_ir("c = atlas_class(b)\nh = resonance(c, 1)\nw = resonance(c, v)", {"b": "u8[n]", "v": "f32[n]"},
                     {"h": "i64[96]", "w": "f32[96]"})
    h, w = kir.body[1], kir.body[2]
    assert isinstance(h, Accumulate) and h.target == "h" and h.extents == (Affine.of("n"),)
    assert str(h) == "h[i64(c[i0])] += 1:i64  for i0<n  (resonance)"
    assert str(w) == "w[i64(c[i0])] += v[i0]  for i0<n  (resonance)"
    assert kir.temps == (kir.decl("c"),)


def test_resonance_into_a_temporary_and_inside_expressions():
    kir = compile_ir("r = resonance(c, v)\ny = r + resonance(c, 1) * 2", {"c": "i8[n]", "v": "u8[n]"},
                     {"y": "f64[96]"})
    assert [t.name for t in kir.temps] == ["r", "resonance0"]
    assert kir.decl("r").dtype is DType.U64 and kir.decl("resonance0").dtype is DType.I64
    assert isinstance(kir.body[1], Accumulate) and kir.body[1].target == "resonance0"
    assert str(kir.body[2]) == "y[i0] = add(f64(r[i0]), f64(mul(resonance0[i0], 2:i64):i64)):f64"


def test_resonance_with_a_conversion_goes_through_a_temporary():
    kir = compile_ir("h = resonance(c, v)", {"c": "i32[n]", "v": "f32[n]"}, {"h": "f64[96]"})
    assert isinstance(kir.body[0], Accumulate) and kir.body[0].target == "resonance0"
    assert str(kir.body[1]) == "h[i0] = f64(resonance0[i0])"


def test_resonance_broadcasts_and_accepts_scalars():
    kir = compile_ir("h = resonance(c, w)", {"c": "i32[m, n]", "w": "f64[n]"}, {"h": "f64[96]"})
    acc = kir.body[0]
    assert acc.vars == ("i0", "i1") and acc.extents == (Affine.of("m"), Affine.of("n"))
    assert str(acc.value) == "w[i1]"
    acc = compile_ir("h = resonance(c, 1)", {"c": "i32"}, {"h": "i64[96]"}).body[0]
    assert acc.vars == () and str(acc.key) == "i64($c)"


@pytest.mark.parametrize("body, ins, message", [
    ("h = resonance(v, v)", {"v": "f32[n]"}, r"resonance\(\) needs integer classes; got f32"),
    ("h = resonance(c, v)", {"c": "i32[n]", "v": "f32[m]"}, r"do not broadcast"),
    ("h = resonance(c, v)", {"c": "i32[n]", "v": "f32[n]"}, r"declared f64\[n\] but the value has shape \[96\]"),
    ("h[i] = sum(resonance(c[i], 1))", {"c": "i32[n]"}, r"cannot use index variables"),
    ("h = resonance(c)", {"c": "i32[n]"}, r"takes 2 arguments"),
])
def test_resonance_errors(body, ins, message):
    outs = {"h": "f64[n]"} if "declared" in message or "h[i]" in body else {"h": "f64[96]"}
    assert re.search(message, error(body, ins, outs).message)


# ----------------------------------------------------------------------- names
@pytest.mark.parametrize("body, outs, line, col, message", [
    ("y = xs", None, 1, 5, r"unknown name 'xs'; did you mean 'x'\?"),
    ("y = x * ture", None, 1, 9, r"unknown name 'ture'; did you mean 'true'\?"),
    ("y = t\nt = x", None, 1, 5, r"'t' is used before it is assigned \(on line 2\)"),
    ("y = y + x", None, 1, 5, r"'y' is used before it is assigned"),
    ("y = z\nz = x", {"y": "f32[n]", "z": "f32[n]"}, 1, 5, r"'z' is used before it is assigned"),
    ("x = x + 1\ny = x", None, 1, 1, r"cannot assign to input 'x'; inputs are read-only"),
    ("y = x\ny = x", None, 2, 1, r"'y' is assigned twice \(first on line 1\)"),
    ("n = x\ny = x", None, 1, 1, r"'n' is a shape symbol and cannot be assigned"),
    ("sum = x\ny = x", None, 1, 1, r"'sum' is the name of a function"),
    ("f32 = x\ny = x", None, 1, 1, r"'f32' is the name of a function"),
    ("t = x", None, 1, 1, r"output 'y' is never assigned"),
    ("", None, 1, 1, r"output 'y' is never assigned"),
])
def test_name_errors(body, outs, line, col, message):
    e = error(body, None, outs)
    assert re.search(message, e.message), e.message
    assert (e.span.line, e.span.col) == (line, col)


def test_names_shadow_constants_and_outputs_are_readable():
    assert last("e = exp(x)\ny = e + 1.0") == "y[i0] = add(e[i0], 1.0:f32):f32"
    assert last("y = x * e") == "y[i0] = mul(x[i0], 2.7182817459106445:f32):f32"
    assert last("y = x * 2\nz = y + 1", None, {"y": "f32[n]", "z": "f32[n]"}) == "z[i0] = add(y[i0], 1.0:f32):f32"
    assert last("y[e] = x[e]") == "y[e] = x[e]"  # an index variable may take a constant's name
    assert last("y = -inf + x") == "y[i0] = add(-inf:f32, x[i0]):f32"


def test_declaration_errors():
    e = error("y = x", {"x": "f32[n + m]"}, {"y": "f32[n + m]"})
    assert "shape symbol 'm' of 'x' cannot be bound from the inputs" in e.message
    assert "cannot be bound" in error("y = 0.0", {"x": "f32[n]"}, {"y": "f32[k]"}).message
    assert "both a shape symbol and a parameter" in error("y = x", {"x": "f32[n]", "n": "i64"}).message
    assert compile_ir("y = 0.0", {"x": "f32[2*n - 1]"}, {"y": "f32[n]"}).symbols == ("n",)


# ----------------------------------------------------------------------- robustness
NAMES = ["x", "w", "s", "b", "k", "t", "y", "i", "j", "n", "pi", "zz"]
FUNCS = ["exp", "sum", "max", "where", "clip", "f32", "i8", "mirror", "resonance", "argmax", "round", "fma", "mean"]
BINOPS = ["+", "-", "*", "/", "//", "%", "**", "&", "|", "<<", "<", "==", "and", "or"]


def _expressions():
    leaves = st.one_of(st.sampled_from(NAMES), st.sampled_from(["0", "1", "2.5", "-1", "300", "true", "1e40"]))

    def extend(inner):
        index = st.lists(st.one_of(st.sampled_from(["i", "j", "0", "n - 1", "i + 1"]), inner), min_size=1, max_size=2)
        return st.one_of(
            st.tuples(inner, st.sampled_from(BINOPS), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(st.sampled_from(["-", "not ", "~"]), inner).map("".join),
            st.tuples(st.sampled_from(FUNCS), st.lists(inner, min_size=1, max_size=3),
                      st.sampled_from(["", ", axis=0", ", axis=-1", ", keepdims=true", ", i", ", j"])).map(
                lambda t: f"{t[0]}({', '.join(t[1])}{t[2]})"),
            st.tuples(st.sampled_from(["x", "w", "b", "k"]), index).map(lambda t: f"{t[0]}[{', '.join(t[1])}]"),
        )
    return st.recursive(leaves, extend, max_leaves=8)


TARGETS = st.sampled_from(["y", "t", "y[i]", "t[i]", "y[i, j]", "t[i, j]", "x"])


@given(st.lists(st.tuples(TARGETS, _expressions()), min_size=1, max_size=3))
def test_random_bodies_raise_only_compile_errors(stmts):
    body = "\n".join(f"{t} = {e}" for t, e in stmts)
    ins = {"x": "f32[n]", "w": "i32[n]", "s": "f64", "b": "bool[n]", "k": "u8[m, n]"}
    try:
        kir = to_ir(make_def(body, ins, {"y": "f32[n]"}))
    except CompileError as e:
        assert e.span is not None and e.message
        return
    _check_well_formed(kir)


UNARY_FUNCS = ["exp", "abs", "sqrt", "round", "relu", "sigmoid", "gelu", "f32", "i8", "f64", "floor", "sign",
               "isnan", "rsqrt", "mirror", "atlas_class", "bool", "tanh"]
BINARY_FUNCS = ["maximum", "minimum", "hypot", "fmod", "arctan2", "copysign", "power", "neighbor"]
REDUCTIONS = ["sum", "max", "min", "mean", "argmax", "prod"]


def _whole_array_expressions():
    """Expressions that mostly type-check, over x: f32[n], w: i32[n], b: bool[n], s: f64."""
    leaves = st.sampled_from(["x", "w", "b", "s", "n", "pi", "0", "1", "2", "0.5", "true", "-3"])

    def extend(inner):
        return st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "//", "%", "<", "==", "&", "|", "**"]), inner)
            .map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(st.sampled_from(UNARY_FUNCS), inner).map(lambda t: f"{t[0]}({t[1]})"),
            st.tuples(st.sampled_from(BINARY_FUNCS), inner, inner).map(lambda t: f"{t[0]}({t[1]}, {t[2]})"),
            st.tuples(inner, inner).map(lambda t: f"where({t[0]} > 0, {t[0]}, {t[1]})"),
            st.tuples(inner, inner, inner).map(lambda t: f"clip({t[0]}, {t[1]}, {t[2]})"),
            st.tuples(st.sampled_from(REDUCTIONS), inner, st.sampled_from(["", ", axis=0", ", keepdims=true"]))
            .map(lambda t: f"{t[0]}({t[1]}{t[2]})"),
            st.tuples(st.sampled_from(REDUCTIONS), inner).map(lambda t: f"{t[0]}(x[j] * {t[1]}, j)"),
            inner.map(lambda e: f"-{e}"),
        )
    return st.recursive(leaves, extend, max_leaves=6)


def _index_expressions():
    """Scalar-per-point expressions for `y[i] = ...` over k: u8[m, n] and x: f32[n]."""
    leaves = st.sampled_from(["x[i]", "x[n - 1 - i]", "k[0, i]", "f32(i)", "s", "2", "n", "sum(x)", "max(k)",
                              "sum(k[j, i], j)", "mean(x[p] * x[i], p)", "argmax(k[q, i], q)", "x[i + 1]"])

    def extend(inner):
        return st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "<", "**", "%"]), inner)
            .map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(st.sampled_from(UNARY_FUNCS[:12]), inner).map(lambda t: f"{t[0]}({t[1]})"),
            st.tuples(st.sampled_from(REDUCTIONS), inner).map(lambda t: f"{t[0]}({t[1]} * k[r, i], r)"),
        )
    return st.recursive(leaves, extend, max_leaves=6)


VALID_INPUTS = {"x": "f32[n]", "w": "i32[n]", "b": "bool[n]", "s": "f64", "k": "u8[m, n]"}


@pytest.mark.filterwarnings("ignore:.*temporary .* is assigned but never used")  # t1, t2: drawn, not always read
@given(st.lists(_whole_array_expressions(), min_size=1, max_size=3), _index_expressions())
def test_mostly_valid_bodies_compile_to_well_formed_ir(temps, indexed):
    body = "\n".join(f"t{k} = {e}" for k, e in enumerate(temps)) + f"\nu[i] = {indexed}\ny = f32(t0) + u"
    try:
        kir = to_ir(make_def(body, VALID_INPUTS, {"y": "f32[n]"}))
    except CompileError as e:
        assert e.span is not None and e.message
        return
    _check_well_formed(kir)


def _check_well_formed(kir):
    """Structural invariants the lowering relies on."""
    decls = {d.name: d for d in kir.params + kir.outputs + kir.temps}
    assert set(decls) == {d.name for d in kir.params} | {s.target for s in kir.body}
    for s in kir.body:
        target = decls[s.target]
        if isinstance(s, Compute):
            assert len(s.vars) == len(target.shape)
            assert s.body.free_vars() <= set(s.vars), (str(s), s.body.free_vars())
            assert s.body.dtype is target.dtype
            exprs = [s.body]
        else:
            assert s.value.dtype is target.dtype
            exprs = [s.key, s.value]
        for e in exprs:
            for node in e.walk():
                assert not (node.op == "IDX" and node.arg.startswith("@"))
                if node.op == "LOAD":
                    assert len(node.srcs) == len(decls[node.arg].shape)
                    assert all(i.dtype is DType.I64 for i in node.srcs)
                if node.op == "CONST":
                    d = node.dtype
                    assert d.is_float or d.min <= node.arg <= d.max
                    assert isinstance(node.arg, bool if d.is_bool else float if d.is_float else int)
                if node.op in ("ADD", "SUB", "MUL", "MIN", "MAX", "WHERE") and node.op != "WHERE":
                    assert all(x.dtype is node.dtype for x in node.srcs), str(node)


def test_deep_ir_does_not_crash():
    body = "y = " + " + ".join(f"gelu(x * {k})" for k in range(40))
    kir = compile_ir(body)
    _check_well_formed(kir)
    assert isinstance(kir.body[0].body, Expr)


# ------------------------------------------------------------------ unused temporaries
def test_an_unused_temporary_is_a_warning_naming_its_line_and_name():
    from hologram.core.errors import CompileWarning

    with pytest.warns(CompileWarning) as record:
        kir = compile_ir("t = x * 2\ny = x + 1")
    assert [d.name for d in kir.temps] == ["t"]  # still compiled (the passes drop it)
    (w,) = [r.message for r in record]
    assert (w.span.file, w.span.line, w.span.col) == ("<test>", 1, 1)
    assert w.message == "temporary 't' is assigned but never used: the kernel computes it for nothing"
    assert w.hint == "remove the statement, or use 't'; only outputs are returned"


@pytest.mark.parametrize("body", [
    "t = x * 2\ny = t + 1",                              # read by a later statement
    "t[i] = x[i] * 2\ny[i] = t[i] + t[n - 1 - i]",       # in index notation
    "t = x * 2\ny = sum(t[k] * x[k], k) + x",            # inside a reduction
    "c = x > 0\ny = where(c, x, 0.0)",                   # a mask
    "s = sum(x)\ny = x / s",
])
def test_a_used_temporary_is_no_warning(body):
    from hologram.core.errors import CompileWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        compile_ir(body)
