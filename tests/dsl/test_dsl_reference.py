"""Held-out end-to-end tests of docs/dsl.md.

Every construct the DSL reference documents is compiled from a kernel document, run on
the reference interpreter and compared with numpy (or, where the DSL defines an answer
numpy leaves open, with the answer docs/dsl.md records under "Decisions"). The tests are
written from the documentation alone, so they check the implementation against the spec
rather than against itself. Sections follow the document's.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hologram as hg
from hologram.core import atlas as A
from hologram.core.errors import (ArgumentError, CompileError, CompileWarning, DocumentError, EmptyReductionError,
                                  ExecutionError, HologramError)
from hologram.core.types import DType
from hologram.testing import assert_close
from erf_reference import ERF, ERFC

BACKEND = "interp"
F16, F32, F64 = np.float16, np.float32, np.float64
I8, I16, I32, I64 = np.int8, np.int16, np.int32, np.int64
U8, U16, U32, U64 = np.uint8, np.uint16, np.uint32, np.uint64
BOOL = np.bool_
DT = {d.value: d.np for d in DType}


# -- harness -------------------------------------------------------------------------

def _table(decls: dict[str, str]) -> str:
    return "{ " + ", ".join(f'{k} = "{v}"' for k, v in decls.items()) + " }" if decls else "{}"


def source(body: str, inputs: dict[str, str], outputs: dict[str, str], name: str = "k") -> str:
    return (f'[kernel]\nname = "{name}"\nversion = "1.0.0"\ninputs = {_table(inputs)}\n'
            f'outputs = {_table(outputs)}\nbody = """\n{body}\n"""\n')


@functools.lru_cache(maxsize=None)
def compile_text(text: str, fmt: str = "toml"):
    return hg.compile(text, format=fmt)


def kernel(body: str, inputs: dict[str, str], outputs: dict[str, str]):
    return compile_text(source(body, inputs, outputs)).on(BACKEND)


def run(body: str, inputs: dict[str, str], outputs: dict[str, str], *args) -> tuple[np.ndarray, ...]:
    """Compile, call with `args`, and return every output as a tuple."""
    res = kernel(body, inputs, outputs)(*args)
    return tuple(res) if isinstance(res, (tuple, list)) else (res,)


def run1(body, inputs, outputs, *args) -> np.ndarray:
    (out,) = run(body, inputs, outputs, *args)
    return out


def rejects(body, inputs, outputs, cls=CompileError, match=None):
    with pytest.raises(cls, match=match):
        kernel(body, inputs, outputs)


def same(actual, expected, dtype=None) -> None:
    """Exact: bitwise equal (signs of zeros too; NaN matches NaN), same dtype and shape."""
    assert_close(np.asarray(actual), np.asarray(expected, dtype=dtype))


def same_value(actual, expected) -> None:
    """Exact but for the sign of a zero, which `minimum maximum clip relu min max` leave
    unspecified between -0.0 and 0.0 (docs/dsl.md, Decisions)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected)   # treats -0.0 == 0.0, NaN == NaN


def within_ulp(actual, expected, ulps: int = 4) -> None:
    """The transcendental contract: within `ulps` units in the last place."""
    assert_close(np.asarray(actual), np.asarray(expected), ulps=ulps)


def reduced(actual, expected, terms, kind: str = "sum") -> None:
    """The reduction contract: an allowance growing with log2(n), times sum|terms|."""
    terms = np.abs(np.asarray(terms, dtype=F64))
    magnitude = terms.mean() if kind == "mean" else terms.sum()
    assert_close(np.asarray(actual), np.asarray(expected), ulps=1, reduction_n=max(terms.size, 1),
                 magnitude=magnitude)


def floats(dtype, n, lo=None, hi=None):
    """Arrays of `dtype`: every edge value (NaN, ±inf, ±0, subnormals) unless bounded,
    then finite values in [lo, hi]."""
    width = np.dtype(dtype).itemsize * 8
    if lo is None and hi is None:
        return hnp.arrays(dtype, n, elements=st.floats(width=width))
    return hnp.arrays(dtype, n, elements=st.floats(_inward(dtype, lo, 1), _inward(dtype, hi, -1), width=width))


def _inward(dtype, bound: float, direction: int) -> float:
    """`bound` rounded to `dtype` towards the inside of the interval (hypothesis needs
    bounds representable at the element width)."""
    v = dtype(bound)
    if (float(v) - bound) * direction < 0:
        v = np.nextafter(v, dtype(direction * np.inf))
    return float(v)


sizes = st.integers(1, 24)


def pairs(make):
    """Two arrays of one random length, each drawn by `make(n)`."""
    return sizes.flatmap(lambda n: st.tuples(make(n), make(n)))


# -- the kernel document -----------------------------------------------------------------

SCALE = '''[kernel]
name = "scale"
version = "1.2.3"
summary = "scales a vector"
inputs = { alpha = "f64", x = "f64[n]" }
outputs = { y = "f64[n]" }
body = "y = alpha * x"
'''


def test_kernel_table_with_summary_and_scalar_parameter():
    x = np.arange(5.0)
    out = compile_text(SCALE).on(BACKEND)(np.float64(2.5), x)
    same(out, 2.5 * x)


def test_several_kernels_in_one_document():
    text = '''[[kernels]]
name = "vadd"
version = "1.0.0"
inputs  = { x = "f32[n]", y = "f32[n]" }
outputs = { z = "f32[n]" }
body = "z = x + y"

[[kernels]]
name = "vneg"
version = "1.0.0"
inputs  = { x = "f32[n]" }
outputs = { z = "f32[n]" }
body = "z = -x"
'''
    lib = compile_text(text)            # a Library: a mapping of kernels by name
    assert sorted(lib) == ["vadd", "vneg"]
    x, y = np.arange(4, dtype=F32), np.full(4, 0.5, F32)
    same(lib["vadd"].on(BACKEND)(x, y), x + y)
    same(lib.vneg.on(BACKEND)(x), -x)


@pytest.mark.parametrize("fmt, text", [
    ("yaml", "kernel:\n  name: scale\n  version: 1.2.3\n  inputs: {alpha: f64, x: 'f64[n]'}\n"
             "  outputs: {y: 'f64[n]'}\n  body: |\n    y = alpha * x\n"),
    ("json", '{"kernel": {"name": "scale", "version": "1.2.3", "inputs": {"alpha": "f64", '
             '"x": "f64[n]"}, "outputs": {"y": "f64[n]"}, "body": "y = alpha * x"}}'),
    ("json", '{"kernels": [{"name": "scale", "version": "1.2.3", "inputs": {"alpha": "f64", '
             '"x": "f64[n]"}, "outputs": {"y": "f64[n]"}, "body": "y = alpha * x"}]}'),
])
def test_yaml_and_json_documents_share_the_schema(fmt, text):
    x = np.arange(3.0)
    same(compile_text(text, fmt).on(BACKEND)(np.float64(-1.0), x), -x)


@pytest.mark.parametrize("text, match", [
    (SCALE.replace("summary", "summery"), "summary"),            # unknown key, did you mean
    (SCALE.replace('"f64[n]" }\noutputs', '"f64[n" }\noutputs'), None),  # bad type string
    (SCALE.replace('alpha = "f64"', 'alpha = "f31"'), None),     # unknown dtype
    (SCALE.replace('"1.2.3"', '"1.2"'), None),                   # not semver
    (SCALE.replace('"scale"', '"2scale"'), None),                # not an identifier
    (SCALE.replace('body = "y = alpha * x"\n', ""), "body"),     # missing key
])
def test_malformed_documents_are_document_errors(text, match):
    with pytest.raises(DocumentError, match=match):
        compile_text(text)


def test_scalar_output_is_a_0d_array():
    out = run1("total = sum(x)", {"x": "f64[n]"}, {"total": "f64"}, np.array([1.0, 2.0, 4.0]))
    same(out, np.float64(7.0))


def test_affine_dims_bind_symbols_from_arguments():
    x = np.arange(9, dtype=F32)                     # 2*n + 1 = 9 binds n = 4
    same(run1("y[i] = x[2*i + 1]", {"x": "f32[2*n + 1]"}, {"y": "f32[n]"}, x), x[1::2])
    m = np.arange(12, dtype=U8).reshape(4, 3)       # n - 2 = 3 binds n = 5
    same(run1("s = m * 2", {"m": "u8[4, n - 2]"}, {"s": "u8[4, n - 2]"}, m), m * 2)


def test_literal_dims_and_no_inputs():
    same(run1("y[i] = f32(i)", {}, {"y": "f32[4]"}), np.arange(4, dtype=F32))


def test_symbol_bound_twice_differently_is_an_argument_error():
    k = kernel("z = x + y", {"x": "f32[n]", "y": "f32[n]"}, {"z": "f32[n]"})
    with pytest.raises(ArgumentError, match="n"):
        k(np.zeros(3, F32), np.zeros(4, F32))


def test_wrong_argument_dtype_is_an_argument_error_and_a_type_error():
    k = kernel("z = x + y", {"x": "f32[n]", "y": "f32[n]"}, {"z": "f32[n]"})
    with pytest.raises(ArgumentError):
        k(np.zeros(3, F64), np.zeros(3, F32))
    assert issubclass(ArgumentError, TypeError)


def test_symbol_only_in_outputs_is_rejected():
    with pytest.raises((CompileError, DocumentError)):
        kernel("y = 0.0", {"x": "f32[n]"}, {"y": "f32[m]"})


def test_prerelease_versions_are_semver():
    x = np.arange(3.0)
    k = compile_text(SCALE.replace('"1.2.3"', '"0.3.1-rc.1"')).on(BACKEND)
    assert k.version == "0.3.1-rc.1"
    same(k(np.float64(1.0), x), x)


@pytest.mark.parametrize("ins, outs", [
    ({"exp": "f32[n]"}, {"y": "f32[n]"}),            # a function name
    ({"x": "f32[n]"}, {"and": "f32[n]"}),            # a keyword
    ({"f32": "f32[n]"}, {"y": "f32[n]"}),            # a type name
    ({"x": "f32[n]"}, {"x": "f32[n]"}),              # input and output at once
    ({"x": "f32[n]"}, {}),                           # no outputs
])
def test_declared_names_must_be_free_and_outputs_present(ins, outs):
    with pytest.raises(DocumentError):
        kernel("y = 1.0", ins, outs)


def test_reserved_words_cannot_name_temporaries():
    rejects("sum = x * 2.0\ny = sum", {"x": "f32[n]"}, {"y": "f32[n]"})
    rejects("f32 = x * 2.0\ny = f32", {"x": "f32[n]"}, {"y": "f32[n]"})


# -- the body ----------------------------------------------------------------------------

def test_comments_blank_lines_and_continuation_inside_parentheses():
    body = ("# leading comment\n\n"
            "t = x * 2.0   # trailing comment\n"
            "y = where(t > 1.0,\n"
            "          t,\n"
            "          0.0)\n")
    x = np.array([0.25, 0.5, 1.0, -3.0], F32)
    t = x * 2
    same(run1(body, {"x": "f32[n]"}, {"y": "f32[n]"}, x), np.where(t > 1, t, F32(0)))


def test_continuation_inside_brackets():
    x = np.arange(4, dtype=F32)
    same(run1("y[i] = x[n - 1 -\n         i]", {"x": "f32[n]"}, {"y": "f32[n]"}, x), x[::-1])


def test_outputs_in_declared_order_and_readable_after_assignment():
    x = np.array([1, 2, 3], I32)
    y, z = run("y = x * 2\nz = y + 1", {"x": "i32[n]"}, {"y": "i32[n]", "z": "i32[n]"}, x)
    same(y, x * 2)
    same(z, x * 2 + 1)


def test_temporaries_take_the_type_and_shape_of_their_expression():
    x = np.array([-1.5, 0.0, 2.0], F64)
    same(run1("pos = x > 0.0\ny = where(pos, x, -x)", {"x": "f64[n]"}, {"y": "f64[n]"}, x),
         np.where(x > 0, x, -x))


@pytest.mark.parametrize("body", [
    "y = x\ny = x * 2.0",          # assigned twice
    "x = x * 2.0\ny = x",          # assigns an input
    "t = x * 2.0",                 # output never assigned
    "y = t * 2.0\nt = x",          # used before assignment
])
def test_assignment_rules(body):
    rejects(body, {"x": "f32[n]"}, {"y": "f32[n]"})


# -- whole-array statements --------------------------------------------------------------

def test_broadcasting_rows_columns_and_scalars():
    a = np.arange(6, dtype=F32).reshape(2, 3)
    b, r, s = np.array([1, 10, 100], F32), np.array([[1], [2]], F32), F32(0.5)
    same(run1("c = a * b + s", {"a": "f32[m, n]", "b": "f32[n]", "s": "f32"}, {"c": "f32[m, n]"},
              a, b, s), a * b + s)
    same(run1("c = a + r", {"a": "f32[m, n]", "r": "f32[m, 1]"}, {"c": "f32[m, n]"}, a, r), a + r)


def test_different_symbols_do_not_broadcast():
    rejects("z = x + y", {"x": "f32[n]", "y": "f32[k]"}, {"z": "f32[n]"})
    rejects("c = a + b", {"a": "f32[m, n]", "b": "f32[m]"}, {"c": "f32[m, n]"})


# -- index notation ---------------------------------------------------------------------

M = np.arange(12, dtype=F32).reshape(3, 4) - 5
V = np.array([3, -1, 4, 1, -5, 9], F32)
INDEX_CASES = [
    ("y[i] = x[i] * 2", {"x": "f32[n]"}, {"y": "f32[n]"}, (V,), V * 2),
    ("t[j, i] = a[i, j]", {"a": "f32[m, n]"}, {"t": "f32[n, m]"}, (M,), M.T),
    ("y[i] = x[n - 1 - i]", {"x": "f32[n]"}, {"y": "f32[n]"}, (V,), V[::-1]),
    ("y[i] = a[2*i]", {"a": "f32[2*n]"}, {"y": "f32[n]"}, (V,), V[::2]),
    ("y[i] = x[i] + x[i + 1]", {"x": "f32[n]"}, {"y": "f32[n - 1]"}, (V,), V[:-1] + V[1:]),
    ("d[i] = a[i, i]", {"a": "f32[n, n]"}, {"d": "f32[n]"}, (np.ascontiguousarray(M[:, :3]),),
     np.diagonal(M[:, :3])),
    ("o[i, j] = x[i] * y[j]", {"x": "f32[n]", "y": "f32[m]"}, {"o": "f32[n, m]"},
     (V, M[0]), np.outer(V, M[0])),
    ("c[i, j] = sum(a[i, p] * b[p, j], p)", {"a": "f32[m, k]", "b": "f32[k, n]"},
     {"c": "f32[m, n]"}, (M, np.ascontiguousarray(M.T)), np.einsum("ip,pj->ij", M, M.T)),
    ("first = x[0]", {"x": "f32[n]"}, {"first": "f32"}, (V,), V[0]),
    ("t[i, j] = x[i] * y[j]\nz = t", {"x": "f32[n]", "y": "f32[m]"}, {"z": "f32[n, m]"},
     (V, M[0]), np.outer(V, M[0])),
    ("y[i] = x[i] - max(x)", {"x": "f32[n]"}, {"y": "f32[n]"}, (V,), V - np.max(V)),
]


@pytest.mark.parametrize("body, ins, outs, args, expected", INDEX_CASES, ids=[c[0] for c in INDEX_CASES])
def test_index_notation_matches_numpy(body, ins, outs, args, expected):
    same(run1(body, ins, outs, *args), np.asarray(expected, F32))


def test_an_access_out_of_bounds_is_an_execution_error():
    with pytest.warns(CompileWarning, match="declare y: f32\\[n - 1\\]"):
        k = kernel("y[i] = x[i + 1]", {"x": "f32[n]"}, {"y": "f32[n]"})
    with pytest.raises(ExecutionError):
        k(np.zeros(5, F32))


def test_a_negative_constant_index_counts_from_the_end():
    x = np.arange(3, dtype=F32)
    k = kernel("last = x[-1]\nfirst = x[-3]", {"x": "f32[n]"}, {"last": "f32", "first": "f32"})
    assert k(x) == (x[-1], x[-3])
    with pytest.raises(ExecutionError, match="out of bounds"):  # numpy: x[-3] of 2 elements is an IndexError
        k(x[:2])


def test_an_index_with_variables_never_wraps():
    with pytest.raises(ExecutionError), pytest.warns(CompileWarning, match="before its start"):
        kernel("y[i] = x[i - 1]", {"x": "f32[n]"}, {"y": "f32[n]"})(np.zeros(3, F32))


@pytest.mark.parametrize("body, ins", [
    ("t[i] = x[i] + y[i]\nz = sum(t)", {"x": "f32[n]", "y": "f32[m]"}),   # ranges disagree
    ("t[i] = x[2*i]\nz = sum(t)", {"x": "f32[n]", "y": "f32[m]"}),        # no affine range (n/2)
    ("z = sum(x[i] * y[i], i)", {"x": "f32[n]", "y": "f32[m]"}),          # reduction var
    ("t[i] = x[i] - x\nz = sum(t)", {"x": "f32[n]", "y": "f32[m]"}),      # unindexed array
    ("t[i] = x[i] * x[j]\nz = sum(t)", {"x": "f32[n]", "y": "f32[m]"}),   # unbound variable
])
def test_index_errors(body, ins):
    rejects(body, ins, {"z": "f32"})


@pytest.mark.parametrize("body, outs", [
    ("y[i + 1] = x[i]", {"y": "f32[n]"}),      # target indices are plain names
    ("y[0] = x[0]", {"y": "f32[n]"}),
    ("y[i, i] = x[i]", {"y": "f32[n, n]"}),     # distinct
    ("y[i] = x[i]", {"y": "f32[n, n]"}),        # one per dimension
])
def test_target_index_errors(body, outs):
    rejects(body, {"x": "f32[n]"}, outs)


def test_index_variables_are_i64_values():
    x = np.array([1.5, -2.0, 3.25, 8.0], F32)
    same(run1("y[i] = f32(i) * x[i]", {"x": "f32[n]"}, {"y": "f32[n]"}, x), np.arange(4, dtype=F32) * x)
    same(run1("y[i] = i * x[i]", {"x": "f32[n]"}, {"y": "f32[n]"}, x), (np.arange(4) * x).astype(F32))
    same(run1("y[i] = i - 2", {"x": "f32[n]"}, {"y": "i8[n]"}, x), np.arange(4, dtype=I8) - 2)
    rejects("y[i] = i", {"x": "f32[n]"}, {"y": "u8[n]"})   # i64 -> u8 is not same_kind


def test_shape_symbols_are_weak_int_values():
    # n is len(x), a Python int: it takes the other operand's type (NEP 50)
    x = np.array([1.0, 2.0, 4.0, 8.0], F32)
    avg, n, n8, centered = run("avg = sum(x) / n\ncount = n\ncount8 = n\ncentered = x - x[1] / n", {"x": "f32[n]"},
                               {"avg": "f32", "count": "i64", "count8": "u8", "centered": "f32[n]"}, x)
    same(avg, F32(3.75))
    same(n, I64(4))
    same(n8, U8(4))
    same(centered, x - x[1] / len(x))


# -- literals and constants --------------------------------------------------------------

def test_literal_spellings():
    x = np.array([0.0, 1.0, -2.0], F64)
    same(run1("y = x * 1.5 + .5 - 1e-3 + 2.5E+4 + 42", {"x": "f64[n]"}, {"y": "f64[n]"}, x),
         x * 1.5 + .5 - 1e-3 + 2.5E+4 + 42)
    same(run1("y = where(x > 0.0, true, false)", {"x": "f64[n]"}, {"y": "bool[n]"}, x), x > 0)


def test_constants_are_weak_floats():
    x = np.array([1.0, 3.0, -7.5, 1e-3], F32)
    same(run1("y = x * pi + e", {"x": "f32[n]"}, {"y": "f32[n]"}, x), x * np.pi + np.e)
    same(run1("y = x + inf", {"x": "f32[n]"}, {"y": "f32[n]"}, x), x + np.inf)
    same(run1("y = x * nan", {"x": "f32[n]"}, {"y": "f32[n]"}, x), x * np.nan)


def test_literals_are_weak():
    u = np.array([0, 1, 200, 255], U8)
    same(run1("y = x * 2", {"x": "u8[n]"}, {"y": "u8[n]"}, u), u * 2)
    same(run1("y = x - 1", {"x": "u8[n]"}, {"y": "u8[n]"}, u), u - 1)
    h = np.array([1.0, 3.0, 1000.0, -0.33], F16)
    same(run1("y = x * 0.1", {"x": "f16[n]"}, {"y": "f16[n]"}, h), h * 0.1)
    same(run1("y = x + (1 + 2)", {"x": "u8[n]"}, {"y": "u8[n]"}, u), u + 3)
    x = np.linspace(-3, 3, 37, dtype=F32)
    same(run1("y = x * (1 / 3)", {"x": "f32[n]"}, {"y": "f32[n]"}, x), x * (1 / 3))


@pytest.mark.parametrize("body", ["y = x + 300", "y = x + -1", "y = x * 256"])
def test_literals_that_do_not_fit_are_compile_errors(body):
    rejects(body, {"x": "u8[n]"}, {"y": "u8[n]"})


def test_functions_and_casts_of_literals_are_typed():
    x = np.linspace(-3, 3, 101, dtype=F32)
    same(run1("y = x * sqrt(2.0)", {"x": "f32[n]"}, {"y": "f32[n]"}, x),
         (x * np.sqrt(2.0)).astype(F32))
    b = np.array([127, -128, 0], I8)
    same(run1("y = x + f32(2)", {"x": "i8[n]"}, {"y": "f32[n]"}, b), b + F32(2))


def test_declared_names_shadow_constants():
    x = np.array([0.0, 1.0, 2.0], F64)
    same(run1("e = exp(x)\ny = e + 1.0", {"x": "f64[n]"}, {"y": "f64[n]"}, x), np.exp(x) + 1)
    same(run1("y = x * e", {"x": "f64[n]"}, {"y": "f64[n]"}, x), x * np.e)


def test_every_constant_can_be_shadowed():
    x = np.array([1.0, 2.0], F32)
    same(run1("pi = x * 2.0\ny = pi", {"x": "f32[n]"}, {"y": "f32[n]"}, x), x * 2)
    same(run1("y = nan + 1.0", {"nan": "f32[n]"}, {"y": "f32[n]"}, x), x + 1)


def test_literal_only_arithmetic_is_pythons():
    x = np.array([1.0, 3.0], F32)
    same(run1("y = x * 2 ** -1", {"x": "f32[n]"}, {"y": "f32[n]"}, x), x * 2 ** -1)
    i = np.array([3, -4], I32)
    same(run1("y = x ** (1 + 1)", {"x": "i32[n]"}, {"y": "i32[n]"}, i), i ** 2)


@pytest.mark.parametrize("body", ["y = x < 300", "y = x == -1"])
def test_comparisons_with_literals_that_do_not_fit_are_errors(body):
    rejects(body, {"x": "u8[n]"}, {"y": "bool[n]"})


# -- type promotion ---------------------------------------------------------------------

TYPED = [  # a-type, b-type, result type, a values, b values
    ("i8", "u8", "i16", [100, -100, 127], [200, 0, 255]),
    ("i32", "u32", "i64", [2**31 - 1, -2**31, 0], [2**32 - 1, 0, 7]),
    ("i64", "u64", "f64", [2**62, -1, 3], [2**63, 5, 2**53]),
    ("u8", "f16", "f16", [255, 0, 3], [0.5, -1.0, 0.25]),
    ("i16", "f16", "f32", [30000, -3, 1], [0.5, 0.25, 1.0]),
    ("i32", "f32", "f64", [16777217, -5, 1], [0.5, 0.1, 3.0]),
    ("i16", "f32", "f32", [30000, -3, 1], [0.5, 0.1, 3.0]),
    ("bool", "i8", "i8", [True, False, True], [127, -128, 0]),
    ("f16", "f64", "f64", [0.1, 1000, -2], [1e-300, 0.3, 1e300]),
]


@pytest.mark.parametrize("ta, tb, tr, av, bv", TYPED, ids=[f"{a}+{b}" for a, b, *_ in TYPED])
def test_typed_operands_promote_like_numpy(ta, tb, tr, av, bv):
    a, b = np.array(av, DT[ta]), np.array(bv, DT[tb])
    expected = a + b
    assert expected.dtype == DT[tr]
    same(run1("y = a + b", {"a": f"{ta}[n]", "b": f"{tb}[n]"}, {"y": f"{tr}[n]"}, a, b), expected)


def test_promotion_kind_is_visible_through_output_casts():
    rejects("y = a + b", {"a": "i64[n]", "b": "u64[n]"}, {"y": "i64[n]"})   # f64 -> i64
    rejects("y = a / b", {"a": "i32[n]", "b": "i32[n]"}, {"y": "i64[n]"})   # true divide
    rejects("y = a + 1.5", {"a": "i32[n]"}, {"y": "i32[n]"})               # weak float -> f64


def test_weak_literal_table():
    b = np.array([True, False])
    same(run1("y = b + 1", {"b": "bool[n]"}, {"y": "i64[n]"}, b), b + 1)
    same(run1("y = b + 1.5", {"b": "bool[n]"}, {"y": "f64[n]"}, b), b + 1.5)
    same(run1("y = b + true", {"b": "bool[n]"}, {"y": "bool[n]"}, b), b + True)
    i = np.array([7, -3, 100], I32)
    same(run1("y = a + 1.5", {"a": "i32[n]"}, {"y": "f64[n]"}, i), i + 1.5)
    same(run1("y = a / 2", {"a": "i32[n]"}, {"y": "f64[n]"}, i), i / 2)
    same(run1("y = a / b", {"a": "i32[n]", "b": "i32[n]"}, {"y": "f64[n]"}, i, i[::-1].copy()), i / i[::-1])
    h = np.array([0.1, 2049, -7], F16)
    same(run1("y = a + 1", {"a": "f16[n]"}, {"y": "f16[n]"}, h), h + 1)
    same(run1("y = a + 1.5", {"a": "f16[n]"}, {"y": "f16[n]"}, h), h + 1.5)
    f = np.array([1.0, 3.0, -7.0], F32)
    same(run1("y = a / 3", {"a": "f32[n]"}, {"y": "f32[n]"}, f), f / 3)
    same(run1("y = a + true", {"a": "f32[n]"}, {"y": "f32[n]"}, f), f + True)
    k = np.array([127, 0], I8)
    same(run1("y = a + true", {"a": "i8[n]"}, {"y": "i8[n]"}, k), k + True)


# -- operators ---------------------------------------------------------------------------

FLOAT_BINARY = [("x + y", np.add), ("x - y", np.subtract), ("x * y", np.multiply),
                ("x / y", np.true_divide)]


@pytest.mark.parametrize("expr, fn", FLOAT_BINARY, ids=[e for e, _ in FLOAT_BINARY])
@given(xy=pairs(lambda n: floats(F32, n)))
def test_float_arithmetic_is_exact(expr, fn, xy):
    x, y = xy
    with np.errstate(all="ignore"):
        same(run1(f"z = {expr}", {"x": "f32[n]", "y": "f32[n]"}, {"z": "f32[n]"}, x, y), fn(x, y))


CMP = ["==", "!=", "<", "<=", ">", ">="]


@pytest.mark.parametrize("op", CMP)
@given(xy=pairs(lambda n: floats(F64, n)))
def test_comparisons_give_bool_with_ieee_nan(op, xy):
    x, y = xy
    same(run1(f"z = x {op} y", {"x": "f64[n]", "y": "f64[n]"}, {"z": "bool[n]"}, x, y),
         eval(f"x {op} y"))


def _int_oracle(op, x, y):
    bits = x.dtype.itemsize * 8
    with np.errstate(all="ignore"):
        if op in ("//", "%"):
            safe = np.where(y == 0, 1, y).astype(y.dtype)
            r = np.floor_divide(x, safe) if op == "//" else np.remainder(x, safe)
            return np.where(y == 0, 0, r).astype(x.dtype)
        if op in ("<<", ">>"):
            amount = (y.astype(np.uint64) & np.uint64(bits - 1)).astype(x.dtype)
            return np.left_shift(x, amount) if op == "<<" else np.right_shift(x, amount)
        return eval(f"x {op} y")


INT_OPS = ["+", "-", "*", "//", "%", "&", "|", "^", "<<", ">>"]


@pytest.mark.parametrize("t", ["i8", "u8", "i32", "u32", "i64", "u64"])
@pytest.mark.parametrize("op", INT_OPS)
@given(data=st.data())
def test_integer_operators_wrap_mask_and_divide_by_zero_to_zero(t, op, data):
    dt = np.dtype({"i8": I8, "u8": U8, "i32": I32, "u32": U32, "i64": I64, "u64": U64}[t])
    n = data.draw(sizes)
    x = data.draw(hnp.arrays(dt, n))
    y = data.draw(hnp.arrays(dt, n, elements=st.integers(-2, 70) if op in ("<<", ">>") and t[0] == "i"
                             else (st.integers(0, 70) if op in ("<<", ">>") else None)))
    same(run1(f"z = x {op} y", {"x": f"{t}[n]", "y": f"{t}[n]"}, {"z": f"{t}[n]"}, x, y),
         _int_oracle(op, x, y))


def test_integer_floor_division_follows_the_divisor():
    x, y = np.array([-7, 7, -7, 7, 5], I32), np.array([2, -2, -2, 2, 0], I32)
    q, r = run("q = x // y\nr = x % y", {"x": "i32[n]", "y": "i32[n]"}, {"q": "i32[n]", "r": "i32[n]"}, x, y)
    same(q, np.array([-4, -4, 3, 3, 0], I32))
    same(r, np.array([1, -1, -1, 1, 0], I32))


def test_float_floor_division_and_remainder_are_numpys():
    x = np.array([-7.0, 7.0, -7.5, 7.5, 1.0, 1.0, -0.0, 3.0], F64)
    y = np.array([2.0, -2.0, 2.0, 0.5, 0.0, 0.0, 1.0, -1.5], F64)
    q, r = run("q = x // y\nr = x % y", {"x": "f64[n]", "y": "f64[n]"}, {"q": "f64[n]", "r": "f64[n]"}, x, y)
    with np.errstate(all="ignore"):
        same(q, np.floor_divide(x, y))
        same(r, np.remainder(x, y))


def test_shift_amounts_are_masked():
    x, s = np.array([1, -8, 5, 1], I32), np.array([33, 33, 32, -1], I32)
    same(run1("z = x << s", {"x": "i32[n]", "s": "i32[n]"}, {"z": "i32[n]"}, x, s),
         np.array([2, -16, 5, -2**31], I32))
    same(run1("z = x >> s", {"x": "i32[n]", "s": "i32[n]"}, {"z": "i32[n]"}, x, s),
         np.array([0, -4, 5, 0], I32))
    u = np.array([2**31, 2**32 - 1], U32)
    same(run1("z = x >> 31", {"x": "u32[n]"}, {"z": "u32[n]"}, u), np.array([1, 1], U32))


def test_unary_operators():
    i = np.array([-128, -1, 0, 5, 127], I8)
    neg, pos, inv = run("a = -x\nb = +x\nc = ~x", {"x": "i8[n]"}, {"a": "i8[n]", "b": "i8[n]", "c": "i8[n]"}, i)
    same(neg, -i)      # -(-128) wraps to -128
    same(pos, i)
    same(inv, ~i)
    b = np.array([True, False])
    same(run1("y = ~b", {"b": "bool[n]"}, {"y": "bool[n]"}, b), ~b)


def test_logical_operators_are_elementwise_on_bools():
    a, b, c = (np.array(v, BOOL) for v in ([1, 1, 0, 0, 1], [1, 0, 1, 0, 0], [0, 1, 0, 1, 1]))
    same(run1("y = a and b or not c", {"a": "bool[n]", "b": "bool[n]", "c": "bool[n]"}, {"y": "bool[n]"},
              a, b, c), (a & b) | ~c)


def test_not_binds_looser_than_comparison():
    x = np.array([1.0, 2.0], F32)
    same(run1("y = not x < 1.5", {"x": "f32[n]"}, {"y": "bool[n]"}, x), ~(x < 1.5))


def test_bitwise_and_binds_tighter_than_comparison():
    x, y = np.array([1.0, -1.0, 2.0, 0.0]), np.array([1.0, 1.0, -2.0, 0.0])
    same(run1("m = (x > 0.0) & (y > 0.0)", {"x": "f64[n]", "y": "f64[n]"}, {"m": "bool[n]"}, x, y),
         (x > 0) & (y > 0))


def test_power_binds_tighter_than_unary_minus_and_is_right_associative():
    x = np.array([0.5, -1.5, 2.0, 3.0], F64)
    same(run1("y = -x ** 2", {"x": "f64[n]"}, {"y": "f64[n]"}, x), -(x ** 2))
    same(run1("y = 2 + 3 * x ** 2", {"x": "f64[n]"}, {"y": "f64[n]"}, x), 2 + 3 * x ** 2)
    p = np.array([1.5, 2.0, 1.1], F64)
    within_ulp(run1("y = x ** 2 ** x", {"x": "f64[n]"}, {"y": "f64[n]"}, p), p ** (2 ** p))
    within_ulp(run1("y = x ** -1.5", {"x": "f64[n]"}, {"y": "f64[n]"}, p), p ** -1.5)


def test_integer_power_with_literal_exponents():
    i = np.array([-3, 0, 7, 1300, -2**31], I32)
    same(run1("y = x ** 3", {"x": "i32[n]"}, {"y": "i32[n]"}, i), i ** 3)   # wraps
    same(run1("y = x ** 0", {"x": "i32[n]"}, {"y": "i32[n]"}, i), np.ones(5, I32))
    # x ** 0 is 1, but x is computed as numpy computes it: an empty min() raises (a
    # generated case once found the base dropped, and no error)
    with pytest.raises(EmptyReductionError):
        run1("y = i8(min(x)) ** 0", {"x": "i32[n]"}, {"y": "i8[n]"}, i[:0])
    same(run1("y = power(x, 2)", {"x": "i32[n]"}, {"y": "i32[n]"}, i), i ** 2)
    with np.errstate(invalid="ignore"):
        same(run1("y = x ** 0.5", {"x": "i32[n]"}, {"y": "f64[n]"}, i[:3]), i[:3] ** 0.5)


def test_integer_power_with_array_exponents():
    """Wrapping like numpy's; a negative exponent (numpy raises) is the truncated 1 / a**-b."""
    x = np.array([-3, 0, 7, 1300, -2**31, 1, -1, -1, 2, 0, 5, 3], I32)
    k = np.array([3, 0, 2, 9, 1, -1, -7, -4, -1, -3, 2**31 - 1, 40], I32)
    want = np.where(k >= 0, x ** np.maximum(k, 0), np.where(x == 1, 1, np.where(x == -1, (-1) ** (k % 2), 0)))
    same(run1("y = x ** k", {"x": "i32[n]", "k": "i32[n]"}, {"y": "i32[n]"}, x, k), want)
    text = source("y = x ** k", {"x": "i32[n]", "k": "i32[n]"}, {"y": "i32[n]"})
    same(compile_text(text).on("cpu_llvm")(x, k), want)
    u = np.array([3, 0, 255, 2], np.uint8)
    same(run1("y = 2 ** k", {"k": "u8[n]"}, {"y": "u8[n]"}, u), np.uint8(2) ** u)


@pytest.mark.parametrize("body, ins", [
    ("y = x ** -1", {"x": "i32[n]", "k": "i32[n]"}),  # negative literal
])
def test_operator_errors_i32(body, ins):
    rejects(body, ins, {"y": "f64[n]"})


@pytest.mark.parametrize("body", [
    "y = x and x",      # and on floats
    "y = not x",        # not on floats
    "y = x & x",        # bitwise on floats
    "y = ~x",
    "y = x << 1",
    "y = x < x < x",    # chained
])
def test_operator_errors_f32(body):
    rejects(body, {"x": "f32[n]"}, {"y": "f32[n]"})


def test_negating_a_bool_is_an_error():
    rejects("y = -b", {"b": "bool[n]"}, {"y": "bool[n]"})


@given(xy=pairs(lambda n: floats(F64, n, -50, 50)))
def test_float_power_is_numpy_power(xy):
    x, y = xy
    x = np.abs(x)
    with np.errstate(all="ignore"):
        within_ulp(run1("z = x ** y", {"x": "f64[n]", "y": "f64[n]"}, {"z": "f64[n]"}, x, y), np.power(x, y))


# -- functions ---------------------------------------------------------------------------

UNARY = [  # name, numpy definition (evaluated in f64 as the reference), domain
    ("sqrt", np.sqrt, (0, 1e30)), ("rsqrt", lambda v: 1 / np.sqrt(v), (1e-30, 1e30)),
    ("exp", np.exp, (-80, 80)), ("expm1", np.expm1, (-80, 80)), ("exp2", np.exp2, (-120, 120)),
    ("log", np.log, (1e-30, 1e30)), ("log1p", np.log1p, (-0.99, 1e30)),
    ("log2", np.log2, (1e-30, 1e30)), ("log10", np.log10, (1e-30, 1e30)),
    ("sin", np.sin, (-10, 10)), ("cos", np.cos, (-10, 10)), ("tan", np.tan, (-1.5, 1.5)),
    ("arcsin", np.arcsin, (-1, 1)), ("arccos", np.arccos, (-1, 1)), ("arctan", np.arctan, (-1e6, 1e6)),
    ("sinh", np.sinh, (-80, 80)), ("cosh", np.cosh, (-80, 80)), ("tanh", np.tanh, (-20, 20)),
    ("arcsinh", np.arcsinh, (-1e6, 1e6)), ("arccosh", np.arccosh, (1, 1e6)),
    ("arctanh", np.arctanh, (-0.99, 0.99)),
    ("sigmoid", lambda v: 1 / (1 + np.exp(-v)), (-80, 80)),
    ("erf", ERF, (-8, 8)), ("erfc", ERFC, (-8, 28)),
]


@pytest.mark.parametrize("name, ref, dom", UNARY, ids=[u[0] for u in UNARY])
@given(data=st.data())
def test_transcendentals_within_4_ulp(name, ref, dom, data):
    x32 = data.draw(floats(F32, sizes, *dom))
    expected = ref(x32.astype(F64)).astype(F32)
    within_ulp(run1(f"y = {name}(x)", {"x": "f32[n]"}, {"y": "f32[n]"}, x32), expected)
    x64 = x32.astype(F64)
    within_ulp(run1(f"y = {name}(x)", {"x": "f64[n]"}, {"y": "f64[n]"}, x64), ref(x64))


@pytest.mark.parametrize("name, value", [("log", 0.0), ("sqrt", -1.0), ("arccosh", 0.5), ("log", -1.0),
                                         ("exp", np.inf), ("tanh", np.nan), ("exp", -np.inf)])
def test_floating_point_exceptions_give_ieee_values(name, value):
    x = np.array([value], F64)
    with np.errstate(all="ignore"):
        same(run1(f"y = {name}(x)", {"x": "f64[n]"}, {"y": "f64[n]"}, x), getattr(np, name)(x))


INT_TO_FLOAT = [("bool", BOOL, F16), ("i8", I8, F16), ("u8", U8, F16), ("i16", I16, F32),
                ("u16", U16, F32), ("i32", I32, F64), ("u32", U32, F64), ("i64", I64, F64)]


@pytest.mark.parametrize("t, dt, result", INT_TO_FLOAT, ids=[c[0] for c in INT_TO_FLOAT])
def test_integer_inputs_to_float_functions_promote_like_numpy(t, dt, result):
    x = np.array([0, 1, 2, 3] if t != "bool" else [0, 1, 1, 0], dt)
    if t != "bool":
        x = np.concatenate([x, [np.iinfo(dt).max]]).astype(dt)
    expected = np.sqrt(x)
    assert expected.dtype == result
    # an f64 output shows the precision the function was computed in
    same(run1("y = sqrt(x)", {"x": f"{t}[n]"}, {"y": "f64[n]"}, x), expected.astype(F64))
    rejects("y = sqrt(x)", {"x": f"{t}[n]"}, {"y": f"{'i8' if t == 'bool' else t}[n]"})


def test_rounding_functions():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 3.7, -3.7, -0.0, np.inf, np.nan], F32)
    for name in ("floor", "ceil", "trunc", "rint"):
        same(run1(f"y = {name}(x)", {"x": "f32[n]"}, {"y": "f32[n]"}, x), getattr(np, name)(x))
    same(run1("y = round(x)", {"x": "f32[n]"}, {"y": "f32[n]"}, x), np.round(x))
    i = np.array([-7, 0, 9], I32)
    for name in ("floor", "ceil", "trunc", "round"):   # integral stays integral
        same(run1(f"y = {name}(x)", {"x": "i32[n]"}, {"y": "i32[n]"}, i), i)


def test_sign_abs_isnan():
    f = np.array([-2.0, -0.0, 0.0, 3.0, np.nan, -np.inf], F64)
    same(run1("y = sign(x)", {"x": "f64[n]"}, {"y": "f64[n]"}, f), np.sign(f))
    same(run1("y = abs(x)", {"x": "f64[n]"}, {"y": "f64[n]"}, f), np.abs(f))
    same(run1("y = isnan(x)", {"x": "f64[n]"}, {"y": "bool[n]"}, f), np.isnan(f))
    i = np.array([-5, 0, 7, -128], I8)
    same(run1("y = sign(x)", {"x": "i8[n]"}, {"y": "i8[n]"}, i), np.sign(i))
    same(run1("y = abs(x)", {"x": "i8[n]"}, {"y": "i8[n]"}, i), np.abs(i))
    same(run1("y = isnan(x)", {"x": "i8[n]"}, {"y": "bool[n]"}, i), np.zeros(4, BOOL))


BINARY_FUNCS = [("hypot", np.hypot, 1), ("arctan2", np.arctan2, 4), ("fmod", np.fmod, 0),
                ("copysign", np.copysign, 0), ("minimum", np.minimum, 0), ("maximum", np.maximum, 0),
                ("power", np.power, 4)]


@pytest.mark.parametrize("name, ref, ulps", BINARY_FUNCS, ids=[b[0] for b in BINARY_FUNCS])
@given(xy=pairs(lambda n: floats(F32, n)))
def test_binary_functions(name, ref, ulps, xy):
    x, y = xy
    with np.errstate(all="ignore"):
        expected = ref(x.astype(F64), y.astype(F64)).astype(F32) if ulps else ref(x, y)
    out = run1(f"z = {name}(x, y)", {"x": "f32[n]", "y": "f32[n]"}, {"z": "f32[n]"}, x, y)
    if ulps:
        within_ulp(out, expected, max(ulps, 1))
    elif name in ("minimum", "maximum"):
        same_value(out, expected)
    else:
        same(out, expected)


def test_integer_binary_functions():
    a, b = np.array([-7, 7, 5, -128], I8), np.array([2, -2, 0, -1], I8)
    same(run1("z = fmod(a, b)", {"a": "i8[n]", "b": "i8[n]"}, {"z": "i8[n]"}, a, b),
         np.array([-1, 1, 0, 0], I8))
    same(run1("z = minimum(a, b)", {"a": "i8[n]", "b": "u8[n]"}, {"z": "i16[n]"}, a, b.view(U8)),
         np.minimum(a, b.view(U8)))
    x, y = np.array([3, 5], I16), np.array([4, 12], I16)
    same(run1("z = hypot(x, y)", {"x": "i16[n]", "y": "i16[n]"}, {"z": "f32[n]"}, x, y), np.hypot(x, y))


def test_clip_where_relu():
    x = np.array([-2.0, 0.5, 3.0, np.nan, -0.0], F32)
    same_value(run1("y = clip(x, 0.0, 1.0)", {"x": "f32[n]"}, {"y": "f32[n]"}, x), np.clip(x, F32(0), F32(1)))
    same_value(run1("y = clip(x, 3.0, 2.0)", {"x": "f32[n]"}, {"y": "f32[n]"}, x), np.clip(x, F32(3), F32(2)))
    same_value(run1("y = relu(x)", {"x": "f32[n]"}, {"y": "f32[n]"}, x), np.maximum(x, F32(0)))
    same(run1("y = relu(x)", {"x": "i32[n]"}, {"y": "i32[n]"}, np.array([-3, 4], I32)),
         np.array([0, 4], I32))
    c, a, b = np.array([True, False, True]), np.array([1, 2, 3], I8), np.array([0.5, 1.5, 2.5], F32)
    same(run1("y = where(c, a, b)", {"c": "bool[n]", "a": "i8[n]", "b": "f32[n]"}, {"y": "f32[n]"},
              c, a, b), np.where(c, a, b))
    rejects("y = where(x, x, x)", {"x": "f32[n]"}, {"y": "f32[n]"})   # condition must be bool


def test_functions_broadcast_like_ufuncs():
    x = np.array([[0.5, 2.0], [-1.0, 3.0]], F32)
    r = np.array([1.0, 0.25], F32)
    a, b = run("a = minimum(x, 1.5)\nb = arctan2(x, r)", {"x": "f32[m, n]", "r": "f32[n]"},
               {"a": "f32[m, n]", "b": "f32[m, n]"}, x, r)
    same(a, np.minimum(x, F32(1.5)))
    within_ulp(b, np.arctan2(x.astype(F64), r).astype(F32))


def test_minimum_maximum_propagate_nan():
    x, y = np.array([1.0, np.nan, 3.0, np.nan]), np.array([np.nan, 2.0, -1.0, np.nan])
    lo, hi = run("lo = minimum(x, y)\nhi = maximum(x, y)", {"x": "f64[n]", "y": "f64[n]"},
                 {"lo": "f64[n]", "hi": "f64[n]"}, x, y)
    same(lo, np.minimum(x, y))
    same(hi, np.maximum(x, y))


def test_gelu_is_the_erfc_form():
    """x * Phi(x) as 0.5*x * erfc(-x/sqrt(2)), in f64 and rounded once: no cancellation for
    x << 0 (where 1 + erf(x/sqrt(2)) would lose every digit), and not the tanh approximation."""
    x = np.concatenate([np.linspace(-38, 6, 221), [-np.inf, np.inf, np.nan, -0.0]])
    with np.errstate(invalid="ignore"):  # -inf * 0
        ref = 0.5 * x * ERFC(-x / math.sqrt(2))
    out = run1("y = gelu(x)", {"x": "f64[n]"}, {"y": "f64[n]"}, x)
    within_ulp(out, ref)
    assert out[100] < 0 and np.isnan(out[-4]) and out[-3] == np.inf  # gelu(-inf) is -inf * 0
    y = x[:221]
    tanh_form = 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y ** 3)))
    assert np.abs(out[:221] - tanh_form).max() > 1e-5
    x32 = np.linspace(-12, 6, 301).astype(F32)
    same(run1("y = gelu(x)", {"x": "f32[n]"}, {"y": "f32[n]"}, x32),
         (0.5 * x32.astype(F64) * ERFC(-x32.astype(F64) / math.sqrt(2))).astype(F32))


def test_sigmoid_is_evaluated_without_overflow():
    x = np.array([-95.0, -100.0, -200.0, 95.0, -0.0], F32)
    with np.errstate(over="ignore"):
        assert (1 / (1 + np.exp(-x[:2])) == 0).all()   # numpy's float32 formula overflows
    within_ulp(run1("y = sigmoid(x)", {"x": "f32[n]"}, {"y": "f32[n]"}, x),
               (1 / (1 + np.exp(-x.astype(F64)))).astype(F32))


def test_fma_rounds_once():
    a = np.array([1 + 2**-30, 2.0], F64)
    c = np.array([-(1 + 2**-29), 1.0], F64)
    out = run1("y = fma(a, a, c)", {"a": "f64[n]", "c": "f64[n]"}, {"y": "f64[n]"}, a, c)
    exact = [float(Fraction(v) * Fraction(v) + Fraction(w)) for v, w in zip(a, c)]
    same(out, np.array(exact))
    assert out[0] == 2.0**-60 and a[0] * a[0] + c[0] == 0.0
    s = np.array([1 + 2**-12], F32)
    same(run1("y = fma(a, a, c)", {"a": "f32[n]", "c": "f32[n]"}, {"y": "f32[n]"}, s,
              np.array([-(1 + 2**-11)], F32)), np.array([2.0**-24], F32))
    i = np.array([100, -7], I8)
    same(run1("y = fma(a, a, a)", {"a": "i8[n]"}, {"y": "i8[n]"}, i), i * i + i)   # wraps


@pytest.mark.parametrize("body, match", [("y = expp(x)", "exp"), ("y = exp(x, x)", "exp"),
                                         ("y = clip(x, 0.0)", "clip")])
def test_function_errors(body, match):
    rejects(body, {"x": "f32[n]"}, {"y": "f32[n]"}, match=match)


# -- casts -------------------------------------------------------------------------------

def test_float_to_integer_casts_truncate_and_saturate():
    f = np.array([300.0, -1e9, np.nan, np.inf, -np.inf, 3.9, -3.9, 127.5, -128.9], F64)
    same(run1("y = i8(x)", {"x": "f64[n]"}, {"y": "i8[n]"}, f),
         np.array([127, -128, 0, 127, -128, 3, -3, 127, -128], I8))
    same(run1("y = u8(x)", {"x": "f64[n]"}, {"y": "u8[n]"}, f),
         np.array([255, 0, 0, 255, 0, 3, 0, 127, 0], U8))
    same(run1("y = i64(x)", {"x": "f64[n]"}, {"y": "i64[n]"}, np.array([1e30, -1e30, np.nan])),
         np.array([2**63 - 1, -2**63, 0], I64))


def test_integer_and_float_conversions():
    same(run1("y = i8(x)", {"x": "i32[n]"}, {"y": "i8[n]"}, np.array([300, -129, 5], I32)),
         np.array([44, 127, 5], I8))
    same(run1("y = f64(x)", {"x": "i64[n]"}, {"y": "f64[n]"}, np.array([2**53 + 1, -3], I64)),
         np.array([2.0**53, -3.0]))
    same(run1("y = f32(x)", {"x": "i32[n]"}, {"y": "f32[n]"}, np.array([16777217], I32)),
         np.array([16777216.0], F32))
    same(run1("y = f16(x)", {"x": "f64[n]"}, {"y": "f16[n]"}, np.array([1e6, 0.1])),
         np.array([np.inf, 0.1]).astype(F16))
    same(run1("y = bool(x)", {"x": "f64[n]"}, {"y": "bool[n]"}, np.array([0.0, -0.0, np.nan, 2.5])),
         np.array([False, False, True, True]))
    same(run1("y = i32(b) + i32(b)", {"b": "bool[n]"}, {"y": "i32[n]"}, np.array([True, False])),
         np.array([2, 0], I32))


def test_casting_a_literal_converts_from_i64():
    a, b = run("a = i8(300) + x\nb = u8(-1) + x", {"x": "u8[n]"}, {"a": "i16[n]", "b": "u8[n]"},
               np.zeros(2, U8))
    same(a, np.array([44, 44], I16))
    same(b, np.array([255, 255], U8))


# -- reductions --------------------------------------------------------------------------

@given(x=floats(F32, st.integers(1, 40), -100, 100))
def test_full_reductions(x):
    s, p, lo, hi, mu, amin, amax = run(
        "s = sum(x)\np = prod(x / 50.0)\nlo = min(x)\nhi = max(x)\nmu = mean(x)\namin = argmin(x)\namax = argmax(x)",
        {"x": "f32[n]"}, {"s": "f32", "p": "f32", "lo": "f32", "hi": "f32", "mu": "f32", "amin": "i64", "amax": "i64"}, x)
    reduced(s, np.sum(x), x)
    q = x / F32(50)
    np.testing.assert_allclose(p, np.prod(q.astype(F64)), rtol=4 * x.size * np.finfo(F32).eps, atol=1e-30)
    same_value(lo, np.min(x))
    same_value(hi, np.max(x))
    reduced(mu, np.mean(x), x, "mean")
    same(amin, np.argmin(x))
    same(amax, np.argmax(x))


def test_axis_negative_axis_and_keepdims():
    x = (np.arange(24, dtype=F32).reshape(2, 3, 4) - 11) / 4
    a, b, c, d = run("a = sum(x, axis=1)\nb = max(x, axis=-1)\nc = mean(x, axis=0, keepdims=true)\nd = argmax(x, axis=1)",
                     {"x": "f32[p, q, r]"}, {"a": "f32[p, r]", "b": "f32[p, q]", "c": "f32[1, q, r]", "d": "i64[p, r]"}, x)
    same(a, np.sum(x, axis=1))
    same(b, np.max(x, axis=-1))
    same(c, np.mean(x, axis=0, keepdims=True))
    same(d, np.argmax(x, axis=1))
    same(run1("s = x - max(x, axis=1, keepdims=true)", {"x": "f32[m, n]"}, {"s": "f32[m, n]"}, x[0]),
         x[0] - np.max(x[0], axis=1, keepdims=True))


def test_reductions_over_index_variables():
    x = np.array([[3, 9, 1], [4, 1, 9]], F64)
    rowmax, total, k1, k2 = run(
        "rowmax[i] = max(x[i, j], j)\ntotal = sum(x[i, j], i, j)\nk1 = argmax(x[i, j], i, j)\nk2 = argmax(x[i, j], j, i)",
        {"x": "f64[m, n]"}, {"rowmax": "f64[m]", "total": "f64", "k1": "i64", "k2": "i64"}, x)
    same(rowmax, x.max(axis=1))
    same(total, np.sum(x))
    same(k1, np.argmax(x))
    same(k2, np.argmax(x.T))
    y = np.array([1.0, -2.0, 0.5])
    same(run1("d = sum(x[i] * y[i], i)", {"x": "f64[n]", "y": "f64[n]"}, {"d": "f64"}, y, y), np.sum(y * y))
    same(run1("d = max(abs(x - y))", {"x": "f64[n]", "y": "f64[n]"}, {"d": "f64"}, y, y[::-1].copy()),
         np.max(np.abs(y - y[::-1])))


def test_reduction_result_dtypes():
    same(run1("s = sum(x)", {"x": "i8[n]"}, {"s": "i64"}, np.array([100, 100, 100], I8)), I64(300))
    same(run1("s = sum(x)", {"x": "u8[n]"}, {"s": "u64"}, np.array([200, 200], U8)), U64(400))
    same(run1("s = sum(x)", {"x": "bool[n]"}, {"s": "i64"}, np.array([True, True, False])), I64(2))
    same(run1("s = prod(x)", {"x": "i32[n]"}, {"s": "i64"}, np.array([100000, 100000], I32)), I64(10**10))
    same(run1("s = mean(x)", {"x": "i32[n]"}, {"s": "f64"}, np.array([1, 2], I32)), F64(1.5))
    rejects("s = mean(x)", {"x": "i32[n]"}, {"s": "i64"})
    same(run1("s = max(x)", {"x": "u8[n]"}, {"s": "u8"}, np.array([3, 250], U8)), U8(250))


def test_more_reduction_forms():
    x = np.array([[1, 3], [4, 2]], F32)
    k, a = run("k = sum(x, keepdims=true)\na = argmax(x, axis=1, keepdims=true)", {"x": "f32[m, n]"},
               {"k": "f32[1, 1]", "a": "i64[m, 1]"}, x)
    same(k, np.sum(x, keepdims=True))
    same(a, np.argmax(x, axis=1, keepdims=True))
    same(run1("s = sum(x)", {"x": "f16[n]"}, {"s": "f16"}, np.array([1, 2.5], F16)), F16(3.5))
    same(run1("s = mean(x)", {"x": "bool[n]"}, {"s": "f64"}, np.array([True, False, True])),
         np.mean(np.array([True, False, True])))


@pytest.mark.parametrize("body, ins", [("y = sum(x, axis=1)", {"x": "f32[n]"}),       # out of range
                                       ("y = sum(x, axis=n)", {"x": "f32[n]"}),       # not a literal
                                       ("y = sum(x, axis=(0, 1))", {"x": "f32[n, m]"})])  # tuple
def test_axis_errors(body, ins):
    rejects(body, ins, {"y": "f32"})


def test_nan_is_the_extreme_and_argmin_takes_the_first():
    x = np.array([1.0, np.nan, 5.0, np.nan])
    hi, lo, amax, amin = run("hi = max(x)\nlo = min(x)\namax = argmax(x)\namin = argmin(x)", {"x": "f64[n]"},
                             {"hi": "f64", "lo": "f64", "amax": "i64", "amin": "i64"}, x)
    same(hi, np.float64(np.nan))
    same(lo, np.float64(np.nan))
    same(amax, I64(1))
    same(amin, I64(1))
    ties = np.array([2.0, -1.0, 7.0, -1.0, 7.0])
    same(run1("k = argmin(x)", {"x": "f64[n]"}, {"k": "i64"}, ties), I64(1))
    same(run1("k = argmax(x)", {"x": "f64[n]"}, {"k": "i64"}, ties), I64(2))


def test_empty_reductions():
    empty = np.zeros(0, F32)
    s, p, mu = run("s = sum(x)\np = prod(x)\nmu = mean(x)", {"x": "f32[n]"}, {"s": "f32", "p": "f32", "mu": "f32"}, empty)
    same(s, F32(0))
    same(p, F32(1))
    same(mu, F32(np.nan))
    for kind in ("max", "min", "argmax", "argmin"):
        k = kernel(f"y = {kind}(x)", {"x": "f32[n]"}, {"y": "i64" if kind.startswith("arg") else "f32"})
        with pytest.raises(EmptyReductionError, match=rf"{kind}\(\) over an empty extent .*has no identity"):
            k(empty)
    assert issubclass(EmptyReductionError, ValueError)


def test_two_argument_max_is_an_error():
    rejects("z = max(x, y)", {"x": "f32[n]", "y": "f32[n]"}, {"z": "f32[n]"}, match="maximum")


# -- assigning to outputs ----------------------------------------------------------------

def test_same_kind_casts_on_assignment():
    x = np.array([0.1, 1e40, -3.5])
    with np.errstate(over="ignore"):
        same(run1("y = x * 2.0", {"x": "f64[n]"}, {"y": "f32[n]"}, x), (x * 2).astype(F32))
    i = np.array([300, -1, 2**40], I64)
    same(run1("y = x", {"x": "i64[n]"}, {"y": "i8[n]"}, i), i.astype(I8))
    same(run1("y = x", {"x": "i64[n]"}, {"y": "f32[n]"}, i), i.astype(F32))
    same(run1("y = x", {"x": "bool[n]"}, {"y": "f64[n]"}, np.array([True, False])), np.array([1.0, 0.0]))


@pytest.mark.parametrize("ins, outs", [({"x": "f32[n]"}, {"y": "i32[n]"}), ({"x": "i64[n]"}, {"y": "u8[n]"}),
                                       ({"x": "f64[n]"}, {"y": "bool[n]"})])
def test_unsafe_kind_casts_on_assignment_are_errors(ins, outs):
    rejects("y = x", ins, outs)


def test_broadcast_on_assignment():
    y = run1("y = 0.0", {"x": "f32[n]"}, {"y": "f32[n]"}, np.ones(3, F32))
    same(y, np.zeros(3, F32))
    b = np.array([1, 2, 3], I32)
    same(run1("y = b", {"a": "i32[m]", "b": "i32[n]"}, {"y": "i32[m, n]"}, np.zeros(2, I32), b),
         np.broadcast_to(b, (2, 3)))
    rejects("y = x", {"x": "f32[n]", "z": "f32[m]"}, {"y": "f32[m]"})


# -- Atlas functions ---------------------------------------------------------------------

def test_atlas_class_uses_the_low_8_bits():
    b = np.arange(256, dtype=U8)
    same(run1("c = atlas_class(b)", {"b": "u8[n]"}, {"c": "i32[n]"}, b), A.BYTE_CLASS_TABLE.astype(I32))
    w = np.array([-1, 256, 1000, -300, 2**40 + 7], I64)
    same(run1("c = atlas_class(b)", {"b": "i64[n]"}, {"c": "i32[n]"}, w),
         A.BYTE_CLASS_TABLE[w & 0xFF].astype(I32))


def test_class_functions_are_total():
    c = np.arange(-3, 100, dtype=I32)
    ok = (c >= 0) & (c < 96)
    cc = np.where(ok, c, 0)
    m, d, u = run("m = mirror(c)\nd = degree(c)\nu = is_unity(c)", {"c": "i32[n]"},
                  {"m": "i32[n]", "d": "i32[n]", "u": "bool[n]"}, c)
    same(m, np.where(ok, A.MIRROR_TABLE[cc], -1).astype(I32))
    same(d, np.where(ok, A.DEGREE_TABLE[cc], 0).astype(I32))
    same(u, np.isin(c, [0, 48]))
    k = np.arange(-1, 8, dtype=I8)
    nb = run1("nb[a, b] = neighbor(c[a], k[b])", {"c": "i32[n]", "k": "i8[m]"}, {"nb": "i32[n, m]"}, c, k)
    kk = np.clip(k, 0, 5)
    table = A.NEIGHBOR_TABLE[cc[:, None], kk[None, :]]
    valid = ok[:, None] & (k[None, :] >= 0) & (k[None, :] < A.DEGREE_TABLE[cc][:, None])
    same(nb, np.where(valid, table, -1).astype(I32))


def test_bound_map():
    c, p, b = np.array([0, 95, 3], I32), np.array([0, 47, 2], I32), np.array([0, 255, 9], U8)
    same(run1("a = bound_map(c, p, b)", {"c": "i32[n]", "p": "i32[n]", "b": "u8[n]"}, {"a": "i64[n]"}, c, p, b),
         c.astype(I64) * 12288 + p * 256 + b)


def test_resonance_is_a_scatter_add():
    c = np.array([0, 5, 5, 95, 0, 0], I32)
    w = np.array([1.5, 2.0, -1.0, 4.0, 0.25, 0.25], F32)
    counts, weighted = run("counts = resonance(c, 1)\nweighted = resonance(c, w)", {"c": "i32[n]", "w": "f32[n]"},
                           {"counts": "i64[96]", "weighted": "f32[96]"}, c, w)
    same(counts, np.bincount(c, minlength=96).astype(I64))
    same(weighted, np.bincount(c, weights=w, minlength=96).astype(F32))
    u = np.array([200, 100, 7], U8)
    same(run1("h = resonance(c, v)", {"c": "i32[n]", "v": "u8[n]"}, {"h": "u64[96]"}, c[:3], u),
         np.bincount(c[:3], weights=u, minlength=96).astype(U64))


def test_resonance_is_an_ordinary_array_value():
    c = np.array([1, 2, 2], I32)
    same(run1("h = resonance(c, 1) * 2", {"c": "i32[n]"}, {"h": "i64[96]"}, c),
         2 * np.bincount(c, minlength=96).astype(I64))
    b = np.array([True, True, False])
    same(run1("h = resonance(c, b)", {"c": "i32[n]", "b": "bool[n]"}, {"h": "i64[96]"}, c, b),
         np.bincount(c, weights=b, minlength=96).astype(I64))
    rejects("h = atlas_class(x)", {"x": "f32[n]"}, {"h": "i32[n]"})   # integers only


@pytest.mark.parametrize("bad", [96, -1, 1000])
def test_resonance_rejects_classes_outside_the_atlas(bad):
    k = kernel("h = resonance(c, 1)", {"c": "i32[n]"}, {"h": "i64[96]"})
    with pytest.raises(ExecutionError):
        k(np.array([1, bad, 2], I32))


def test_the_documented_class_histogram():
    data = np.frombuffer(b"Hologram compiles kernels ahead of time \x00\xff\x7f", U8)
    hist, mirrored = run("c = atlas_class(data)\nhist = resonance(c, 1)\nmirrored = resonance(mirror(c), 1)",
                         {"data": "u8[n]"}, {"hist": "i64[96]", "mirrored": "i64[96]"}, data)
    classes = A.BYTE_CLASS_TABLE[data]
    same(hist, np.bincount(classes, minlength=96).astype(I64))
    same(mirrored, np.bincount(A.MIRROR_TABLE[classes], minlength=96).astype(I64))


# -- errors ------------------------------------------------------------------------------

BAD = '''[kernel]
name = "bad"
version = "1.0.0"
inputs  = { x = "f32[n]" }
outputs = { y = "f32[n]" }
body = """
t = x * 2.0
y = expp(t)
"""
'''


def test_body_errors_point_at_the_file_line_and_column():
    with pytest.raises(CompileError) as info:
        hg.compile(BAD, format="toml")
    err = info.value
    assert isinstance(err, HologramError)
    assert "expp" in err.message and "exp" in err.message.replace("expp", "")
    assert (err.span.line, err.span.col) == (8, 5)
    assert "y = expp(t)" in str(err) and "^^^^" in str(err)


def test_document_errors_point_at_the_key():
    with pytest.raises(DocumentError) as info:
        hg.compile(SCALE.replace("summary", "summery"), format="toml")
    assert info.value.span is not None and info.value.span.line == 4
    assert "did you mean 'summary'" in str(info.value)
