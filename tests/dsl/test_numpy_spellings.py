"""numpy's own spellings in kernel bodies (docs/dsl.md, "numpy spellings"): `True` and
`False`, `len(x)`, `x.shape[k]`, `x.ndim` and `x.size` as weak ints, the `np.` prefix,
and the reduction methods (`x.sum(axis=1)`); each on every backend against numpy, and
each spelling that is not accepted refused with a message that says what to write."""

from __future__ import annotations

import numpy as np
import pytest

import hologram as hg
from hologram.core.errors import CompileError

BACKENDS = [b for b in ("interp", "cpu_llvm") if b in hg.list_backends()]
RNG = np.random.default_rng(3)
X = RNG.standard_normal(9).astype(np.float32)
M = RNG.standard_normal((4, 6)).astype(np.float32)
U8 = RNG.integers(0, 256, 9, dtype=np.uint8)


def kernel(body: str, inputs: str = 'x = "f32[n]"', outputs: str = 'y = "f32[n]"') -> hg.Kernel:
    return hg.compile(f'[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = {{ {inputs} }}\noutputs = {{ {outputs} }}\n'
                      f'body = """\n{body}\n"""\n')


CASES = [  # body, inputs, outputs, arguments, numpy's answer
    ("y = x / len(x)", None, None, (X,), X / len(X)),
    ("y = x * x.shape[0] - x.shape[-1]", None, None, (X,), X * X.shape[0] - X.shape[-1]),
    ("y = x + x.ndim", None, None, (X,), X + X.ndim),
    ("y = x / y.shape[0]", None, None, (X,), X / len(X)),  # an output's shape, before it is assigned
    ("y[i] = x[len(x) - 1 - i]", None, None, (X,), X[::-1]),
    ("y[i] = x[x.shape[0] - 1 - i]", None, None, (X,), X[::-1]),
    ("y = where(x > 0, True, False) * x", None, None, (X,), np.where(X > 0, True, False) * X),
    ("y = np.exp(x) + numpy.abs(x)", None, None, (X,), np.exp(X) + np.abs(X)),
    ("y = x - x.max()", None, None, (X,), X - X.max()),
    ("y = np.float32(x.astype(np.float16)) + np.float32(x > 0)", None, None, (X,),
     X.astype(np.float16).astype(np.float32) + np.float32(X > 0)),
    ("y = np.cbrt(x * 8)", None, None, (X,), np.cbrt(X * 8)),  # negative arguments too
    ("y = x - x.mean()", None, None, (X,), X - X.mean()),
    ("y = m / m.size", 'm = "f32[a, b]"', 'y = "f32[a, b]"', (M,), M / M.size),
    # methods, attributes and indices after any value, as numpy chains them
    ("y = x - x[1:].sum() + (x - x.max()).min()", None, None, (X,), X - X[1:].sum() + (X - X.max()).min()),
    ("y = x[::2][1:].max() + x.T.T", None, None, (X,), X[::2][1:].max() + X),
    ("y = (m @ m.T)[1] + m.T[0].sum()", 'm = "f32[a, b]"', 'y = "f32[a]"', (M,), (M @ M.T)[1] + M.T[0].sum()),
    ("y = m[:, 1:].T[-1] * len(m[1:])", 'm = "f32[a, b]"', 'y = "f32[a]"', (M,), M[:, 1:].T[-1] * len(M[1:])),
    ("y = x.astype(np.float16).astype(np.float32) * np.pi", None, None, (X,),
     X.astype(np.float16).astype(np.float32) * np.float32(np.pi)),
    ("y = m - m.sum(axis=1, keepdims=True) / m.shape[1]", 'm = "f32[a, b]"', 'y = "f32[a, b]"', (M,),
     M - M.sum(axis=1, keepdims=True) / M.shape[1]),
    ("y = m.max(axis=0)", 'm = "f32[a, b]"', 'y = "f32[b]"', (M,), M.max(axis=0)),
    ("y = u + len(u)", 'u = "u8[n]"', 'y = "u8[n]"', (U8,), U8 + len(U8)),  # weak: stays u8
    ("y = u < u.size", 'u = "u8[n]"', 'y = "bool[n]"', (U8,), U8 < U8.size),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("body, inputs, outputs, args, expected", CASES, ids=[c[0] for c in CASES])
def test_numpy_spellings_mean_what_numpy_means(backend, body, inputs, outputs, args, expected):
    k = kernel(body, *(v for v in (inputs, outputs) if v is not None)) if outputs else \
        kernel(body, inputs) if inputs else kernel(body)
    got = np.asarray(k.on(backend)(*args))
    assert got.dtype == np.asarray(expected).dtype
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=2e-6)


T = np.array([0, -1.5, np.nan, 2], np.float32)
E = np.zeros(0, np.float32)
B = np.array([[0, 1], [0, 0], [2, 3]], np.float32)
LOGICAL = [  # body, inputs, outputs, arguments, numpy's answer
    ("y = any(x)", 'x = "f32[n]"', 'y = "bool"', (T,), np.any(T)),  # NaN is true, as in numpy
    ("y = all(x)", 'x = "f32[n]"', 'y = "bool"', (T,), np.all(T)),
    ("y = any(x)", 'x = "f32[n]"', 'y = "bool"', (E,), np.any(E)),  # False over nothing
    ("y = all(x)", 'x = "f32[n]"', 'y = "bool"', (E,), np.all(E)),  # True over nothing
    ("y = x.any()", 'x = "f32[n]"', 'y = "bool"', (T,), T.any()),
    ("y = all(x > -2)", 'x = "f32[n]"', 'y = "bool"', (T,), np.all(T > -2)),
    ("y = any(m, axis=1)", 'm = "f32[a, b]"', 'y = "bool[a]"', (B,), np.any(B, axis=1)),
    ("y = m.all(axis=0, keepdims=True)", 'm = "f32[a, b]"', 'y = "bool[1, b]"', (B,), B.all(axis=0, keepdims=True)),
    ("y[i] = any(m[i, j] > 1, j)", 'm = "f32[a, b]"', 'y = "bool[a]"', (B,), np.any(B > 1, axis=1)),
    ("y = where(all(x != 0), x, 0.0)", 'x = "f32[n]"', 'y = "f32[n]"', (T,), np.where(np.all(T != 0), T, 0.0)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("body, inputs, outputs, args, expected", LOGICAL, ids=[f"{c[0]} {len(c[3][0])}" for c in LOGICAL])
def test_any_and_all_are_numpys(backend, body, inputs, outputs, args, expected):
    got = np.asarray(kernel(body, inputs, outputs).on(backend)(*args))
    assert got.dtype == np.asarray(expected).dtype
    np.testing.assert_array_equal(got, expected)


A2 = RNG.standard_normal((5, 7)).astype(np.float32)
B2 = RNG.standard_normal((7, 40)).astype(np.float32)
A3 = RNG.standard_normal((3, 9, 7)).astype(np.float32)
B3 = RNG.standard_normal((3, 7, 40)).astype(np.float32)
V7 = RNG.standard_normal(7).astype(np.float32)
I2 = RNG.integers(-50, 50, (5, 7)).astype(np.int32)
J2 = RNG.integers(-50, 50, (7, 4)).astype(np.int32)
MATMUL = [  # body, inputs, outputs, arguments, numpy's answer
    ("y = a @ b", 'a = "f32[m, k]", b = "f32[k, n]"', 'y = "f32[m, n]"', (A2, B2), A2 @ B2),
    ("y = a @ v", 'a = "f32[m, k]", v = "f32[k]"', 'y = "f32[m]"', (A2, V7), A2 @ V7),
    ("y = v @ b", 'v = "f32[k]", b = "f32[k, n]"', 'y = "f32[n]"', (V7, B2), V7 @ B2),
    ("y = v @ v", 'v = "f32[k]"', 'y = "f32"', (V7,), V7 @ V7),
    ("y = a @ b", 'a = "f32[z, m, k]", b = "f32[z, k, n]"', 'y = "f32[z, m, n]"', (A3, B3), A3 @ B3),
    ("y = a @ b", 'a = "f32[z, m, k]", b = "f32[k, n]"', 'y = "f32[z, m, n]"', (A3, B2), A3 @ B2),
    ("y = (a @ b) * 2 + 1", 'a = "f32[m, k]", b = "f32[k, n]"', 'y = "f32[m, n]"', (A2, B2), (A2 @ B2) * 2 + 1),
    ("y = (a + 1) @ b", 'a = "f32[m, k]", b = "f32[k, n]"', 'y = "f32[m, n]"', (A2, B2), (A2 + 1) @ B2),
    ("t = b.T\ny = a @ t.T", 'a = "f32[m, k]", b = "f32[k, n]"', 'y = "f32[m, n]"', (A2, B2), A2 @ B2),
    ("y = a.T @ a", 'a = "f32[m, k]"', 'y = "f32[k, k]"', (A2,), A2.T @ A2),
    ("y = a.T", 'a = "f32[m, k]"', 'y = "f32[k, m]"', (A2,), A2.T),
    ("y = i @ j", 'i = "i32[m, k]", j = "i32[k, n]"', 'y = "i32[m, n]"', (I2, J2), I2 @ J2),  # numpy keeps i32
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("body, inputs, outputs, args, expected", MATMUL, ids=[f"{c[0]} {c[1]}" for c in MATMUL])
def test_matmul_and_transpose_are_numpys(backend, body, inputs, outputs, args, expected):
    got = np.asarray(kernel(body, inputs, outputs).on(backend)(*args))
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_matmul_takes_the_tiled_contraction_for_every_batch():
    """`a @ b` on f32 matrices is the index-notation contraction the gemm lowering tiles
    (thousands of straight-line instructions, not a loop of 30), batched or not."""
    plain = kernel("y = a @ b", 'a = "f32[m, k]", b = "f32[k, n]"', 'y = "f32[m, n]"')
    gemm = kernel("y[i, j] = sum(a[i, p] * b[p, j], p)", 'a = "f32[m, k]", b = "f32[k, n]"', 'y = "f32[m, n]"')
    batched = kernel("y = a @ b", 'a = "f32[z, m, k]", b = "f32[z, k, n]"', 'y = "f32[z, m, n]"')
    shared = kernel("y = a @ b", 'a = "f32[z, m, k]", b = "f32[k, n]"', 'y = "f32[z, m, n]"')
    loop = kernel("y[q, i, j] = sum(a[q, i, p] * b[q, j, p], p)", 'a = "f32[z, m, k]", b = "f32[z, n, k]"',
                  'y = "f32[z, m, n]"')  # not a matmul layout: rows of b summed 16 at a time (lower/rows.py)
    count = {name: k.stats()["O2"].instructions for name, k in
             (("plain", plain), ("gemm", gemm), ("batched", batched), ("shared", shared), ("loop", loop))}
    assert count["plain"] == count["gemm"] > 1000 and count["batched"] > 1000 and count["shared"] > 1000
    assert count["loop"] < 500  # a block of rows: hundreds of instructions, not the tile's thousands


IMG = RNG.standard_normal((9, 11)).astype(np.float32)
SIG = RNG.standard_normal(20).astype(np.float32)
RANGES = [  # body, inputs, outputs, arguments, numpy's answer
    ("y[i, j] = sum(img[i + di, j + dj], di in range(3), dj in range(3)) / 9", 'img = "f32[h, w]"',
     'y = "f32[h - 2, w - 2]"', (IMG,), sum(IMG[a:a + 7, b:b + 9] for a in range(3) for b in range(3)) / 9),
    ("y[i] = sum(x[i + d], d in range(1, 4))", 'x = "f32[n]"', 'y = "f32[n - 3]"', (SIG,),
     SIG[1:18] + SIG[2:19] + SIG[3:20]),
    ("y[i] = max(x[i + d] * d, d in range(3))", 'x = "f32[n]"', 'y = "f32[n - 2]"', (SIG,),
     np.max([SIG[d:d + 18] * d for d in range(3)], axis=0)),
    ("y = sum(x[d], d in range(n - 2))", 'x = "f32[n]"', 'y = "f32"', (SIG,), SIG[:18].sum()),
    ("y[i] = any(x[i + d] > 1, d in range(2))", 'x = "f32[n]"', 'y = "bool[n - 1]"', (SIG,),
     (SIG[:19] > 1) | (SIG[1:] > 1)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("body, inputs, outputs, args, expected", RANGES, ids=[c[0] for c in RANGES])
def test_explicit_ranges_make_windows_one_line(backend, body, inputs, outputs, args, expected):
    got = np.asarray(kernel(body, inputs, outputs).on(backend)(*args))
    assert got.dtype == np.asarray(expected).dtype and got.shape == np.shape(expected)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_the_spellings_are_the_same_ir_as_the_dsl_forms():
    assert kernel("y = np.exp(x) / len(x)").emit("ir") == kernel("y = exp(x) / n").emit("ir")
    assert kernel("y = x - x.sum()").emit("ir") == kernel("y = x - sum(x)").emit("ir")
    assert kernel("y = where(True, x, 0.0)").emit("ir") == kernel("y = where(true, x, 0.0)").emit("ir")


ERRORS = [  # body, inputs, (line, column), message, hint
    ("y = x + x @ 2.0", None, (1, 9), "an operand of '@' is a scalar", "use '*'"),
    ("y = a @ b", 'a = "f32[m, k]", b = "f32[j, n]"', (1, 5), "'a' has k columns but 'b' has j rows",
     "the same shape symbol"),
    ("y[i] = x[i] @ x[i]", None, (1, 8), "'@' multiplies whole arrays", "sum(a[i, p] * b[p, j], p)"),
    ("y[i] = x.T[i]", None, (1, 8), "'x.T' in index notation: index 'x' itself", "x[j, i]"),
    ("y[i] = x[i] + x.T", None, (1, 15), "in index notation: index 'x' itself", "x[j, i]"),
    ("y = x.exp()", None, (1, 5), "only the reductions", "write exp(x)"),
    ("y = x.astype(np.float99)", None, (1, 14), "takes a type such as np.float32 or f32", "f32"),
    ("y = x.astype(f64, copy=False)", None, (1, 5), "takes one type", None),
    ("y = x + x.sum(0)", None, (1, 15), "keyword arguments only", None),
    ("y = x + len(s)", 'x = "f32[n]", s = "f32"', (1, 9), "len() of 's', which has no dimensions", "scalar"),
    ("y = x + len(x, x)", None, (1, 9), "len() takes one array", None),
    ("y = x * x.shape", None, (1, 9), "'x.shape' is a tuple", "x.shape[0]"),
    ("y = x * x.shape[1]", None, (1, 17), "x.shape[1] does not exist", None),
    ("y = x * x.shape[n]", None, (1, 17), "must be an integer literal", None),
    ("y = x.shap[0] + x", None, (1, 5), "no attribute 'shap'; did you mean 'shape'?", "shape, ndim, size, T"),
    ("y[i] = x[i] * i.shape[0]", None, (1, 15), "'i' is an index variable; it has no shape", None),
    ("y = (x + 1).exp()", None, (1, 5), "'(x + 1).exp()': of numpy's array methods", "write exp((x + 1))"),
    ("len = x\ny = len", None, (1, 1), "'len' is the name of a function", None),
    ("y[i] = sum(x[i + d], d in range(0))", None, (1, 27), "range(0) is empty", None),
    ("y[i] = sum(x[i + d], d in 3)", None, (1, 27), "takes range(stop) or range(start, stop)", "d in range(3)"),
    ("y[i] = sum(x[i + d], d in range(i))", None, (1, 33), "affine in the shape symbols", "range(1, n)"),
    ("y[i] = sum(x[i + d], i in range(2))", None, (1, 22), "'i' is already bound", None),
    ("any = x\ny = any", None, (1, 1), "'any' is the name of a function", None),
    ("y = x + any()", None, (1, 9), "any() takes the array to test", None),
]


@pytest.mark.parametrize("body, inputs, at, message, hint", ERRORS, ids=[e[0] for e in ERRORS])
def test_spellings_that_are_not_accepted_say_what_to_write(body, inputs, at, message, hint):
    with pytest.raises((CompileError, hg.errors.HologramError)) as info:
        kernel(body, inputs) if inputs else kernel(body)
    e = info.value
    assert message in e.message, e.message
    if hint is not None:
        assert e.hint and hint in e.hint, e.hint
    if isinstance(e, CompileError) and e.span is not None:
        assert (e.span.line - 6, e.span.col) == at  # the body starts on the document's 7th line
