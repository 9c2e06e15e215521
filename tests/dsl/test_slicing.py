"""numpy's indexing in kernel bodies (docs/dsl.md, "Slicing and indexing"): basic slices
with any literal bounds and steps, integer indices that drop an axis (negative ones
counting from the end), `None`/`np.newaxis`, `...`, and index arrays with numpy's advanced
indexing rules; each on every backend against numpy itself, at every small size (numpy's
clamping makes a slice empty, never negative), and the errors that say what to write."""

from __future__ import annotations

import re

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hologram as hg
from hologram.core.errors import CompileError, DocumentError, ExecutionError

BACKENDS = [b for b in ("interp", "cpu_llvm") if b in hg.list_backends()]
SIZES = (0, 1, 2, 3, 5, 8)


def kernel(body: str, inputs: str, outputs: str) -> hg.Kernel:
    return hg.compile(f'[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = {{ {inputs} }}\noutputs = {{ {outputs} }}\n'
                      f'body = """\n{body}\n"""\n')


def numpy_value(expr: str, **arrays: np.ndarray):
    return eval(expr, {"None": None, "len": len, "np": np}, arrays)  # noqa: S307 - the tests' own text


# A slice, summed with a weight that depends on the position, so order and length both count.
VECTOR = ["x[1:]", "x[:-1]", "x[::2]", "x[1::2]", "x[::-1]", "x[::-2]", "x[-3:]", "x[:3]", "x[2:5]",
          "x[-3:-1]", "x[5:1:-1]", "x[1:-1]", "x[:]", "x[...]", "x[10::-1]", "x[-1::-3]", "x[:-4:-1]",
          "x[3:-3]", "x[-100:100]", "x[4:2]", "x[::7]"]


@pytest.mark.parametrize("expr", VECTOR)
def test_vector_slices_match_numpy_at_every_size(expr):
    k = kernel(f"s = {expr}\nt = sum(s[j] * f32(j + 1), j)\nu = f32(s.size)", 'x = "f32[n]"', 't = "f32", u = "f32"')
    for n in SIZES + (11,):
        x = (np.arange(n) + 1).astype(np.float32) ** 2
        s = numpy_value(expr, x=x)
        for backend in BACKENDS:
            t, u = k.on(backend)(x)
            assert t == np.float32((s * np.arange(1, s.size + 1)).sum()) and u == s.size, (expr, n, backend)


@given(st.integers(-7, 7) | st.none(), st.integers(-7, 7) | st.none(), st.integers(-4, 4).filter(bool) | st.none())
@settings(max_examples=25, deadline=None)
def test_any_literal_slice_matches_numpy(start, stop, step):
    text = ":".join("" if v is None else str(v) for v in (start, stop, step))
    k = kernel(f"s = x[{text}]\nt = sum(s[j] * f32(j + 1), j)\nz = f32(s.size)", 'x = "f32[n]"', 't = "f32", z = "f32"')
    for n in SIZES:
        x = np.arange(1, n + 1, dtype=np.float32)
        s = x[slice(start, stop, step)]
        for backend in BACKENDS:
            t, z = k.on(backend)(x)
            assert (t, z) == (np.float32((s * np.arange(1, s.size + 1)).sum()), s.size), (text, n, backend)


MATRIX = [  # expression over m: f32[a, b] (and idx: i32[k], j2: i64[2, k]), numpy's own meaning
    "m[1:-1, 2:]", "m[:, 0]", "m[0]", "m[-1]", "m[:, -1]", "m[..., -1]", "m[-2, ...]", "m[None, :, 1:]",
    "m[:, None, :]", "m[::-1, ::2]", "m[1:, :-1] - m[:-1, 1:]", "m[1:3, 0:4:2]", "m[m.shape[0] - 1]",
    "m[len(m) - 1, 1]", "m[np.newaxis]",
    # advanced indexing: arrays broadcast; their axes go in place when adjacent, else first
    "m[idx]", "m[:, idx]", "m[idx, 1:]", "m[idx, idx]", "m[idx, 0]", "m[0, idx]", "m[j2, idx]", "m[:, j2]",
    "m[j2]", "m[None, idx]", "m[idx, None]", "m[:, None, idx]",
]


@pytest.mark.parametrize("expr", MATRIX)
def test_matrix_indexing_matches_numpy(expr):
    k = kernel(f"s = {expr}\nt = sum(f64(s) * f64(s))\nz = s.ndim", 'm = "f32[a, b]", idx = "i32[k]", j2 = "i64[2, k]"',
               't = "f64", z = "i64"')
    rng = np.random.default_rng(len(expr))
    for a, b, n in [(1, 1, 1), (3, 5, 4), (6, 4, 7), (2, 3, 0), (4, 4, 2)]:
        m = rng.standard_normal((a, b)).astype(np.float32)
        idx = rng.integers(-min(a, b), min(a, b), n).astype(np.int32)  # negative entries count from the end
        j2 = rng.integers(-min(a, b), min(a, b), (2, n)).astype(np.int64)
        try:
            s = numpy_value(expr, m=m, idx=idx, j2=j2)
        except IndexError:
            continue
        for backend in BACKENDS:
            t, z = k.on(backend)(m, idx, j2)
            np.testing.assert_allclose(t, (s.astype(np.float64) ** 2).sum(), rtol=1e-12, err_msg=f"{expr} {backend}")
            assert z == s.ndim


def test_slices_are_views_fused_into_their_statement():
    """np.diff as slices: one stage, no temporary, the output declared n - 1 (the clamp
    max(n - 1, 0) is n - 1 for every call that gets past the arguments' check)."""
    k = kernel("y = x[1:] - x[:-1]", 'x = "f32[n]"', 'y = "f32[n - 1]"')
    assert len(k.program.stages) == 1 and not k.program.temps
    x = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    for backend in BACKENDS:
        np.testing.assert_array_equal(k.on(backend)(x), np.diff(x))


def test_outputs_may_be_declared_with_floor_division_and_products():
    k = kernel("y = x[::2]\nz = x[1::2]", 'x = "f32[n]"', 'y = "f32[(n + 1) // 2]", z = "f32[n // 2]"')
    assert str(k.signature) == "k(x: f32[n]) -> (y: f32[(n + 1)//2], z: f32[n//2])"
    for n in SIZES:
        x = np.arange(n, dtype=np.float32)
        for backend in BACKENDS:
            y, z = k.on(backend)(x)
            np.testing.assert_array_equal(y, x[::2])
            np.testing.assert_array_equal(z, x[1::2])
    flat = kernel("y[i] = a[i // n, i % n]", 'a = "f32[m, n]"', 'y = "f32[m*n]"')
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for backend in BACKENDS:
        np.testing.assert_array_equal(flat.on(backend)(a), a.reshape(-1))


def test_slices_in_index_notation_and_reductions():
    k = kernel("y[i] = sum(m[i, 1:]) - m[i, -1]\nz = max(m[:, ::2], axis=1)", 'm = "f32[a, b]"',
               'y = "f32[a]", z = "f32[a]"')
    m = np.random.default_rng(1).standard_normal((5, 7)).astype(np.float32)
    for backend in BACKENDS:
        y, z = k.on(backend)(m)
        np.testing.assert_allclose(y, m[:, 1:].sum(axis=1) - m[:, -1], rtol=1e-5)
        np.testing.assert_array_equal(z, m[:, ::2].max(axis=1))


def test_index_arrays_out_of_range_raise_at_run_time():
    k = kernel("y = v[idx]", 'v = "f32[n]", idx = "i32[k]"', 'y = "f32[k]"')
    v = np.arange(5, dtype=np.float32)
    for backend in BACKENDS:
        np.testing.assert_array_equal(k.on(backend)(v, np.array([0, 4, -1, -5], np.int32)), [0, 4, 4, 0])
        for bad in ([5], [-6], [2 ** 31 - 1]):
            with pytest.raises(ExecutionError, match="out of bounds"):
                k.on(backend)(v, np.array(bad, np.int32))
    unsigned = kernel("t = m[:, idx]\ny = t.T", 'm = "f32[a, b]", idx = "u64[k]"', 'y = "f32[k, a]"')
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    for backend in BACKENDS:
        with pytest.raises(ExecutionError, match="out of bounds"):  # 2**64 - 1 is not -1
            unsigned.on(backend)(m, np.array([2 ** 64 - 1], np.uint64))


@pytest.mark.parametrize("body, inputs, message", [
    ("y = m[3]", 'm = "f32[3, 4]"', r"index 3 is out of bounds for axis 0 of 'm' with size 3"),
    ("y = m[-4]", 'm = "f32[3, 4]"', r"index -4 is out of bounds for axis 0 of 'm' with size 3"),
    ("y = m[b]", 'm = "f32[3, 4]", b = "bool[3]"', r"boolean masks"),
    ("y = m[0, 0, 0]", 'm = "f32[3, 4]"', r"'m' has 2 dimensions \(f32\[3, 4\]\) but 3 indices are given"),
    ("y = m[..., ...]", 'm = "f32[3, 4]"', r"a single ellipsis"),
    ("y = m[0, ..., 0, 0]", 'm = "f32[3, 4]"', r"too many indices for 'm': it has 2 dimensions"),
    ("y = x[::0]", 'x = "f32[n]"', r"slice step cannot be zero"),
    ("y = x[::n]", 'x = "f32[n]"', r"a slice's step must be an integer literal"),
    ("y = x[1.5:]", 'x = "f32[n]"', r"a slice bound must be an integer known at launch"),
    ("y = x[idx:]", 'x = "f32[n]", idx = "i32[n]"', r"a slice bound must be an integer known at launch"),
    ("y = x[:n // 0]", 'x = "f32[n]"', r"divides by a positive integer literal"),
    ("y = m[i, j]", 'm = "f32[3, 4]"', r"unknown index variable 'i'"),
])
def test_indexing_errors_say_what_is_expected(body, inputs, message):
    with pytest.raises(CompileError, match=message) as info:
        kernel(body, inputs, 'y = "f32"')
    assert info.value.span is not None and info.value.span.line == 7


def test_input_dimensions_stay_affine():
    with pytest.raises(DocumentError, match=r"dimension 'm\*n' in type 'f32\[m\*n\]' is not affine"):
        kernel("y = 0.0", 'a = "f32[m*n]", b = "f32[m, n]"', 'y = "f32"')
    # a translator that builds definitions itself meets the same rule in the analyzer
    from hologram.core.types import Affine
    from hologram.dsl.analyze import to_ir
    from dsl_helpers import make_def

    kdef = make_def("y = 0.0", {"b": "f32[m, n]"}, {"y": "f32"})
    bad = attrs.evolve(kdef, inputs=(*kdef.inputs, attrs.evolve(kdef.inputs[0], name="a", shape=(Affine.of("m*n"),))))
    with pytest.raises(CompileError, match=r"input 'a' has the dimension m\*n, which is not affine"):
        to_ir(bad)
    with pytest.raises(DocumentError, match=re.escape("divide with '//'")):
        kernel("y = 0.0", 'x = "f32[n]"', 'y = "f32[n/2]"')


def test_shapes_name_their_derived_dimensions_in_messages():
    with pytest.raises(CompileError, match=re.escape("[(n + 1)//2]")):
        kernel("y = x[::2] + x", 'x = "f32[n]"', 'y = "f32[n]"')
