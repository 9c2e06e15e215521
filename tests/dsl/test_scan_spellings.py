"""The front end's scans (docs/dsl.md, "Scans"): cumsum and cumprod in every spelling
numpy has (a function, `np.`, a method, with or without `axis=`), numpy's result dtypes,
the IR they become, and a clear message for each form that is refused."""

from __future__ import annotations

import numpy as np
import pytest

from dsl_helpers import TYPES, compile_ir, statements
from hologram.core.errors import CompileError
from hologram.core.types import DType
from hologram.ir import Compute, Scan


def scans(kir) -> list[Scan]:
    return [s for s in kir.body if isinstance(s, Scan)]


@pytest.mark.parametrize("body", ["y = cumsum(x)", "y = np.cumsum(x)", "y = numpy.cumsum(x)", "y = x.cumsum()",
                                  "y = cumsum(x, axis=0)", "y = x.cumsum(axis=-1)"])
def test_every_spelling_of_a_vector_scan_is_one_scan_into_the_output(body):
    (st,) = compile_ir(body).body
    assert isinstance(st, Scan) and st.target == "y" and st.kind == "sum" and st.vars == (st.var,)
    assert str(st) == "y[i0] = cumsum[i0](x[i0])"


def test_cumprod_and_the_text_form():
    assert statements("y = cumprod(x * 2)") == ["y[i0] = cumprod[i0](mul(x[i0], 2.0:f32):f32)"]


@pytest.mark.parametrize("axis, var", [(0, "i0"), (1, "i1"), (-1, "i1"), (-2, "i0")])
def test_an_axis_scans_that_variable_and_keeps_the_shape(axis, var):
    (st,) = compile_ir(f"y = cumsum(m, axis={axis})", {"m": "f32[a, b]"}, {"y": "f32[a, b]"}).body
    assert st.vars == ("i0", "i1") and st.var == var


def test_a_flattened_matrix_is_read_in_row_major_order():
    kir = compile_ir("y = cumsum(m)", {"m": "f32[a, 3]"}, {"y": "f32[3*a]"})
    assert str(kir.body[0]) == "y[i0] = cumsum[i0](m[floordiv(i0, 3:i64):i64, mod(i0, 3:i64):i64])"
    kir = compile_ir("y = cumsum(m)", {"m": "f32[2, 1, n]"}, {"y": "f32[2*n]"})
    assert str(kir.body[0]) == "y[i0] = cumsum[i0](m[floordiv(i0, n):i64, 0:i64, mod(i0, n):i64])"


def test_a_scalar_is_one_element():
    (st,) = compile_ir("y = cumsum(s)", {"s": "i8"}, {"y": "i64[1]"}).body
    assert str(st) == "y[i0] = cumsum[i0](i64($s))"
    (st,) = compile_ir("y = cumprod(3)", {"x": "f32[n]"}, {"y": "i64[1]"}).body  # a literal: numpy's int64
    assert str(st) == "y[i0] = cumprod[i0](3:i64)"


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("fn", ["cumsum", "cumprod"])
def test_result_dtypes_are_numpy_s(dtype, fn):
    kir = compile_ir(f"t = {fn}(x)\ny = f64(t)", {"x": f"{dtype}[n]"}, {"y": "f64[n]"})
    want = getattr(np, fn)(np.zeros(2, DType.parse(dtype).np)).dtype
    assert kir.decl("t").dtype.np == want


def test_a_scan_inside_an_expression_goes_into_a_hidden_temporary_first():
    kir = compile_ir("y = x - cumsum(x) / len(x)")
    scan, comp = kir.body
    assert isinstance(scan, Scan) and scan.target == "cumsum0" and kir.decl("cumsum0").kind == "temp"
    assert isinstance(comp, Compute) and "cumsum0[i0]" in str(comp)


def test_an_output_of_another_dtype_or_shape_takes_the_scan_through_a_temporary():
    kir = compile_ir("y = cumsum(x)", {"x": "f32[n]"}, {"y": "f64[n]"})
    assert [type(s) for s in kir.body] == [Scan, Compute] and str(kir.body[1]) == "y[i0] = f64(cumsum0[i0])"
    kir = compile_ir("y = cumsum(x)", {"x": "f32[1]", "w": "f32[m]"}, {"y": "f32[m, 1]"})  # broadcast
    assert [type(s) for s in kir.body] == [Scan, Compute]


def test_a_temporary_target_gets_the_scan_itself():
    kir = compile_ir("t = cumprod(x)\ny = t + 1")
    assert isinstance(kir.body[0], Scan) and kir.body[0].target == "t" and kir.decl("t").kind == "temp"
    assert [d.name for d in kir.temps] == ["t"]


ERRORS = [  # body, inputs, outputs, (line, column), message, hint
    ("y = cumsum(x, dtype=f64)", None, None, (1, 15), "cumsum() takes no dtype= argument", "cast the argument"),
    ("y = cumsum(x, out=y)", None, None, (1, 15), "takes no out= argument", "assign it"),
    ("y = cumsum(x, 0)", None, None, (1, 15), "takes the axis as a keyword argument, as in cumsum(x, axis=...)",
     None),
    ("y = x.cumprod(0)", None, None, (1, 15), "as in x.cumprod(axis=...)", None),
    ("y = cumsum(x, axis=1)", None, None, (1, 5), "axis 1 is out of range for an array of 1 dimension",
     "axes run from -1 to 0"),
    ("y = cumsum(s, axis=1)", {"s": "f32"}, {"y": "f32[1]"}, (1, 5), "axis 1 is out of range for a scalar", None),
    ("y = cumsum(x, axis=n)", None, None, (1, 20), "axis must be an integer literal", None),
    ("y = cumsum(x, keepdims=true)", None, None, (1, 15), "cumsum() has no keyword argument 'keepdims'", None),
    ("y = cumsum()", None, None, (1, 5), "cumsum() takes 1 argument", None),
    ("y[i] = cumsum(x[i])", None, None, (1, 8), "scans whole arrays; in index notation assign it to a name first",
     None),
    ("t = cumsum(x[k], k)", None, None, (1, 18), "takes the axis as a keyword argument", None),
    ("cumsum = x\ny = cumsum", None, None, (1, 1), "'cumsum' is the name of a function", None),
]


@pytest.mark.parametrize("body, inputs, outputs, at, message, hint", ERRORS, ids=[e[0] for e in ERRORS])
def test_refused_forms_say_why_and_where(body, inputs, outputs, at, message, hint):
    with pytest.raises(CompileError) as info:
        compile_ir(body, inputs, outputs)
    e = info.value
    assert message in e.message, e.message
    if hint is not None:
        assert e.hint and hint in e.hint, e.hint
    assert (e.span.line, e.span.col) == at, e.span


def test_a_scan_of_a_matrix_with_two_symbols_has_a_derived_length():
    """Flattened, an m x n array has m*n elements: a derived dimension, which an output
    may declare; scans chain like any method."""
    kir = compile_ir("y = x.cumsum()", {"x": "f32[m, n]"}, {"y": "f32[m*n]"})
    assert str(kir.outputs[0]) == "output y: f32[m*n]"
    with pytest.raises(CompileError, match=r"the value has shape \[m\*n\]"):
        compile_ir("y = cumsum(x)", {"x": "f32[m, n]"}, {"y": "f32[m]"})
    compile_ir("y = x.cumsum(axis=0).cumsum()", {"x": "f32[m, n]"}, {"y": "f32[m*n]"})
