"""Held-out acceptance test, part 1: DESIGN.md's examples, the runtime API and documents.

Written from /work/shared/DESIGN.md alone (plus the README's call syntax), as a numpy user
who has read nothing else would: every kernel runs on the reference `interp` backend and is
compared with numpy by heldout_oracle.py. Where the implementation disagrees with the design,
the test stays, marked xfail(strict=True) with the reason.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

import hologram as hg
from hologram.core.errors import HologramError
from heldout_oracle import (BACKEND, GOOD, KERNELS, _doc_with_body, check, check_reduction, compile_error, floats, load, quiet,
                            rng)


# ----------------------------------------------------------- design examples and formats


def test_design_softmax_vector():
    k = load("softmax.toml")
    for n in (1, 7, 200):
        x = floats(np.float32, n, -20, 20, edges=False)
        y = k(x)
        want = np.exp(x.astype(np.float64) - x.max())
        want = (want / want.sum()).astype(np.float32)
        assert y.dtype == np.float32 and y.shape == (n,)
        np.testing.assert_allclose(y, want, rtol=8 * (math.log2(n) + 1) * np.finfo(np.float32).eps, atol=1e-30)


def test_design_softmax_all_equal_and_inf():
    k = load("softmax.toml")
    check(k(np.full(4, 3.0, np.float32)), np.full(4, 0.25, np.float32))
    # max is +inf -> inf - inf = nan, exactly what numpy computes.
    x = np.array([1.0, np.inf, 2.0], np.float32)
    with quiet():
        e = np.exp(x - x.max())
        check(k(x), e / e.sum())


@pytest.mark.parametrize("fmt", ["gemm.toml", "gemm.yaml", "gemm.json"])
def test_gemm_every_format(fmt):
    k = load(fmt)
    r = rng()
    for m, kk, n in [(1, 1, 1), (3, 5, 2), (12, 12, 12)]:
        a = r.standard_normal((m, kk)).astype(np.float32)
        b = r.standard_normal((kk, n)).astype(np.float32)
        c = k(np.float32(1.5), a, b)
        want = (np.float32(1.5) * (a.astype(np.float64) @ b.astype(np.float64))).astype(np.float32)
        terms = 1.5 * np.abs(a)[:, :, None] * np.abs(b)[None, :, :]
        check_reduction(c, want, terms, axis=1)


def test_formats_have_the_same_schema():
    texts = {f: (KERNELS / f"gemm.{f}").read_text() for f in ("toml", "yaml", "json")}
    kernels = {f: hg.compile(t, format=f).on(BACKEND) for f, t in texts.items()}
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    outs = [k(2.0, a, b) for k in kernels.values()]
    for o in outs:
        check(o, np.float32(2.0) * (a @ b))
    assert json.loads(texts["json"])["kernel"]["name"] == "gemm"


def test_multi_kernel_file_is_a_mapping():
    lib = hg.compile_file(str(KERNELS / "rownorm.toml"))
    assert set(lib) == {"softmax_rows", "layernorm"}
    assert lib["layernorm"] is lib.layernorm
    with pytest.raises(HologramError):
        lib["nope"]


@pytest.mark.parametrize("name", ["pair.yaml", "pair.json"])
def test_multi_kernel_yaml_and_json(name):
    lib = hg.compile_file(str(KERNELS / name))
    x = np.array([3.0, 4.0])
    check(lib.square.on(BACKEND)(x), x * x)
    check(lib.norm.on(BACKEND)(x), np.float64(5.0))


# --------------------------------------------------------------------------- runtime API


def test_scalar_inputs_and_outputs():
    lib = hg.compile_file(str(KERNELS / "scalars.toml"))
    x, y = floats(np.float32, 30), floats(np.float32, 30)[::-1].copy()
    check(lib.axpy.on(BACKEND)(np.float32(2.5), x, y), np.float32(2.5) * x + y)
    check(lib.axpy.on(BACKEND)(2.5, x, y), np.float32(2.5) * x + y)  # Python numbers are fine for scalars
    out = lib.scalar_only.on(BACKEND)(2.0, -7)
    check(out.y, np.float64(math.sqrt(2.0) - 7))
    check(out.q, np.int32(-3))
    assert out.y.shape == ()


def test_zero_d_array_for_a_scalar():
    k = load("scalars.toml", "axpy")
    x = np.arange(3, dtype=np.float32)
    check(k(np.array(2, np.float32), x, x), 3 * x)


def test_several_outputs_are_a_named_tuple():
    k = hg.compile_file(str(KERNELS / "scalars.toml"))["minmax"].on(BACKEND)
    x = floats(np.float32, 25, edges=False)
    out = k(x)
    assert out._fields == ("lo", "hi", "span")
    lo, hi, span = out
    check(lo, x.min())
    check(hi, x.max())
    check(span, x.max() - x.min())


def test_keyword_arguments():
    k = load("scalars.toml", "axpy")
    x = np.ones(4, np.float32)
    check(k(alpha=np.float32(2), x=x, y=x), np.full(4, 3, np.float32))


def test_keyword_and_positional_mix():
    k = load("scalars.toml", "axpy")
    x = np.arange(3, dtype=np.float32)
    check(k(np.float32(2), x, y=x), 3 * x)
    with pytest.raises(HologramError):
        k(np.float32(2), x, y=x, w=x)  # unknown keyword
    with pytest.raises(HologramError):
        k(np.float32(2), x, x, y=x)  # given twice


def test_one_kernel_many_shapes():
    k = load("softmax.toml")
    for n in (5, 1, 17, 5, 2):
        x = floats(np.float32, n, -3, 3, edges=False)
        e = np.exp(x.astype(np.float64) - x.max())
        check(k(x), (e / e.sum()).astype(np.float32), ulps=8)


def test_empty_and_length_one_elementwise():
    k = load("promotion.toml", "f32_times_literal")
    check(k(np.zeros(0, np.float32)), np.zeros(0, np.float32))
    check(k(np.array([-0.25], np.float32)), np.array([0.0], np.float32))
    k2 = load("broadcast.toml", "add_row")
    check(k2(np.zeros((0, 3), np.float32), np.ones(3, np.float32)), np.zeros((0, 3), np.float32))


def test_default_backend_runs_too():
    k = hg.compile_file(str(KERNELS / "softmax.toml"))
    x = floats(np.float32, 8, edges=False)
    check(k(x), k.on(BACKEND)(x), ulps=8)  # the default may be another backend: same contract


def test_one_kernel_from_two_threads():
    from concurrent.futures import ThreadPoolExecutor

    k = load("stencils.toml", "stencil3")
    xs = [floats(np.float32, n, edges=False) for n in (3, 9, 40, 17, 5, 60, 4, 33)]
    with ThreadPoolExecutor(2) as pool:
        outs = list(pool.map(k, xs))
    for x, y in zip(xs, outs):
        check(y, x[:-2] + x[1:-1] + x[2:])


def test_out_is_zero_copy():
    k = load("softmax.toml")
    x = floats(np.float32, 10, edges=False)
    y = np.empty(10, np.float32)
    res = k(x, out=(y,))
    ref = k(x)
    check(y, ref)
    if res is not None:
        res = res[0] if isinstance(res, tuple) else res
        assert np.shares_memory(res, y)


def test_out_as_a_bare_array():
    k = load("softmax.toml")
    x, y = np.ones(4, np.float32), np.empty(4, np.float32)
    res = k(x, out=y)
    check(y, np.full(4, 0.25, np.float32))
    assert res is None or np.shares_memory(res, y)


def test_out_with_several_outputs():
    k = load("intops.toml", "divmod_i32")
    a, b = np.arange(1, 9, dtype=np.int32), np.full(8, 3, np.int32)
    q, r = np.empty(8, np.int32), np.empty(8, np.int32)
    k(a, b, out=(q, r))
    check(q, a // b)
    check(r, a % b)


def test_out_in_place_elementwise():
    k = load("promotion.toml", "f32_times_literal")
    x = floats(np.float32, 20, edges=False)
    want = x * 2 + 0.5
    k(x, out=(x,))
    check(x, want)


def test_out_scalar_and_bad_out():
    k = load("reductions.toml", "vec_sum")
    s = np.zeros((), np.float32)
    k(np.ones(5, np.float32), out=(s,))
    check(s, np.float32(5))
    ro = np.zeros((), np.float32)
    ro.flags.writeable = False
    with pytest.raises(HologramError):
        k(np.ones(5, np.float32), out=(ro,))
    with pytest.raises(HologramError):
        load("promotion.toml", "f32_times_literal")(np.ones(4, np.float32), out=(np.empty(8, np.float32)[::2],))
    with pytest.raises(HologramError):  # two outputs, one array
        load("intops.toml", "divmod_i32")(np.ones(2, np.int32), np.ones(2, np.int32), out=(np.empty(2, np.int32),))


def test_out_of_wrong_shape_or_dtype_is_an_error():
    k = load("softmax.toml")
    x = np.ones(4, np.float32)
    for bad in (np.empty(5, np.float32), np.empty(4, np.float64)):
        with pytest.raises(HologramError):
            k(x, out=(bad,))


def test_shape_symbol_mismatch_names_symbol_and_sizes():
    k = load("scalars.toml", "axpy")
    with pytest.raises(HologramError) as ei:
        k(1.0, np.ones(3, np.float32), np.ones(4, np.float32))
    msg = str(ei.value)
    assert "'n'" in msg or " n " in msg or "n=" in msg or "n =" in msg, msg
    assert "3" in msg and "4" in msg, msg


def test_dtype_and_contiguity_errors_and_cast():
    k = load("softmax.toml")
    x64 = np.array([1.0, 2.0, 3.0])
    with pytest.raises(HologramError) as ei:
        k(x64)
    assert "f32" in str(ei.value) or "float32" in str(ei.value)
    strided = np.arange(8, dtype=np.float32)[::2]
    with pytest.raises(HologramError) as ei:
        k(strided)
    assert "contiguous" in str(ei.value).lower()
    with pytest.raises(HologramError):
        k(np.ones((2, 2), np.float32))  # wrong rank
    with pytest.raises(HologramError):
        k()  # missing argument
    with pytest.raises(HologramError):
        k(np.ones(2, np.float32), np.ones(2, np.float32))  # too many
    e = np.exp(x64 - 3)
    check(k(x64, cast=True), (e / e.sum()).astype(np.float32), ulps=4)
    e = np.exp(strided.astype(np.float64) - 6)
    check(k(strided, cast=True), (e / e.sum()).astype(np.float32), ulps=4)
    assert x64.dtype == np.float64  # the caller's array is untouched


@pytest.mark.parametrize("bad", [np.arange(6, dtype=">f4"), np.arange(6, dtype=np.float16),
                                 np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))],
                         ids=["big-endian", "f16", "fortran"])
def test_layout_and_byte_order_need_cast(bad):
    k = load("softmax.toml") if bad.ndim == 1 else load("reductions.toml", "axes")
    with pytest.raises(HologramError):
        k(bad)
    got, want = k(bad, cast=True), k(np.ascontiguousarray(bad, dtype=np.float32))
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        check(g, w)


def test_readonly_inputs_are_fine():
    x = np.arange(6, dtype=np.float32)
    x.flags.writeable = False
    check(load("promotion.toml", "f32_times_literal")(x), x * 2 + 0.5)


def test_lists_are_not_silently_converted():
    k = load("softmax.toml")
    with pytest.raises(HologramError):
        k([1.0, 2.0])


def test_scalar_argument_errors():
    k = load("scalars.toml", "axpy")
    x = np.ones(3, np.float32)
    with pytest.raises(HologramError):
        k(np.ones(2, np.float32), x, x)  # an array where a scalar is declared
    with pytest.raises(HologramError):
        k("two", x, x)
    k2 = load("scalars.toml", "scalar_only")
    with pytest.raises(HologramError):
        k2(1.0, 2**40)  # does not fit i32


# ----------------------------------------------------------------------- document errors


def test_good_document_compiles():
    hg.compile(GOOD, format="toml")


def test_unknown_key_is_an_error_at_its_line():
    err = compile_error(GOOD.replace('version = "1.0.0"', 'version = "1.0.0"\nflavour = "mint"'))
    assert "flavour" in str(err)
    assert err.span is not None and err.span.line == 4


def test_unknown_top_level_table_is_an_error():
    err = compile_error(GOOD + '\n[extras]\nx = 1\n')
    assert "extras" in str(err)


def test_yaml_and_json_unknown_keys_and_positions():
    yaml_doc = "kernel:\n  name: k\n  version: '1.0.0'\n  inputs: {x: 'f32[n]'}\n  outputs: {y: 'f32[n]'}\n" \
               "  body: 'y = x'\n  colour: blue\n"
    err = compile_error(yaml_doc, "yaml")
    assert "colour" in str(err) and err.span is not None and err.span.line == 7
    json_doc = '{\n  "kernel": {\n    "name": "k",\n    "version": "1.0.0",\n    "inputs": {"x": "f32[n]"},\n' \
               '    "outputs": {"y": "f32[n]"},\n    "body": "y = x",\n    "colour": "blue"\n  }\n}\n'
    err = compile_error(json_doc, "json")
    assert "colour" in str(err) and err.span is not None and err.span.line == 8


def test_missing_required_key():
    err = compile_error(GOOD.replace('outputs = { y = "f32[n]" }\n', ""))
    assert "outputs" in str(err)


@pytest.mark.parametrize("bad", ['"f31[n]"', '"f32[n"', '"float32[n]"', '"f32[1.5]"', '7'])
def test_bad_type_is_an_error(bad):
    err = compile_error(GOOD.replace('inputs  = { x = "f32[n]" }', f"inputs  = {{ x = {bad} }}"))
    assert err.span is not None and err.span.line == 4, (bad, err.span)


def test_malformed_documents_are_hologram_errors():
    for text, fmt in [("[kernel\nname=", "toml"), ("kernel: [", "yaml"), ("{", "json"), ("", "toml"),
                      ("[kernel]\nname = 3\n", "toml"), ("[[kernels]]\n", "toml")]:
        compile_error(text, fmt)


def test_missing_file_and_unknown_format():
    with pytest.raises(HologramError):
        hg.compile_file(str(KERNELS / "does_not_exist.toml"))
    with pytest.raises(HologramError):
        hg.compile(GOOD, format="xml")


def test_duplicate_names_are_errors():
    compile_error(GOOD.replace('outputs = { y = "f32[n]" }', 'outputs = { x = "f32[n]" }'))
    two = GOOD.replace("[kernel]", "[[kernels]]")
    compile_error(two + "\n" + two)  # two kernels named k


# -------------------------------------------------------------------- errors in the body


def test_unknown_function_suggests_the_right_one():
    err = compile_error(GOOD.replace("exp(t)", "expp(t)"))
    msg = str(err)
    assert "expp" in msg and "did you mean 'exp'" in msg
    assert err.span.line == 8 and err.span.col == 5
    assert "^^^^" in msg and "y = expp(t)" in msg


def test_unknown_name_in_body_points_at_line_and_column():
    err = compile_error(GOOD.replace("t = x * 2", "t = x * zz"))
    assert err.span.line == 7 and err.span.col == 9, err.span
    assert "zz" in str(err)


def test_syntax_error_in_body_points_into_body():
    err = compile_error(GOOD.replace("y = exp(t)", "y = exp(t))"))
    assert err.span is not None and err.span.line == 8, err.span


def test_single_line_body_error_column_is_in_the_file():
    doc = GOOD.replace('body = """\nt = x * 2\ny = exp(t)\n"""', 'body = "y = sqrtt(x)"')
    err = compile_error(doc)
    assert err.span.line == 6 and err.span.col == 13, err.span  # column counts from the file's line start


def test_error_in_escaped_single_line_body_column():
    doc = GOOD.replace('body = """\nt = x * 2\ny = exp(t)\n"""', 'body = "t = x * 2\\ny = expp(t)"')
    err = compile_error(doc)
    assert err.span.line == 6 and err.span.col == 24, err.span  # the column in the file, past the `\n` escape


def test_error_in_yaml_block_body():
    doc = ("kernel:\n  name: k\n  version: '1.0.0'\n  inputs: {x: 'f32[n]'}\n  outputs: {y: 'f32[n]'}\n"
           "  body: |\n    t = x * 2\n    y = expp(t)\n")
    err = compile_error(doc, "yaml")
    assert err.span.line == 8 and err.span.col == 9, err.span
    assert "did you mean 'exp'" in str(err)


def test_compile_file_errors_name_the_file(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text(GOOD.replace("exp(t)", "expp(t)"))
    with pytest.raises(HologramError) as ei:
        hg.compile_file(str(f))
    assert str(ei.value).startswith(f"{f}:8:5") or "bad.toml:8:5" in str(ei.value), str(ei.value)


def test_error_in_second_kernel_points_at_it():
    two = (GOOD.replace("[kernel]", "[[kernels]]") + "\n"
           + GOOD.replace("[kernel]", "[[kernels]]").replace('"k"', '"k2"').replace("exp(t)", "exq(t)"))
    err = compile_error(two)
    assert err.span.line == 18, err.span


@pytest.mark.parametrize("body,line", [
    ('"y = t * 2\nt = x"', 6),                 # used before it is defined
    ('"x = x * 2\ny = x"', 6),                 # assigning to an input
    ('"y = sum(x, axis=1)"', 6),                # axis out of range for a vector
    ('"y = x\ny = x + 1"', 6),                 # output assigned twice
    ('"y = where(x, x)"', 6),                   # wrong arity
    ('"y = x +"', 6),                           # syntax
])
def test_body_errors_are_compile_errors_with_a_line(body, line):
    doc = GOOD.replace('body = """\nt = x * 2\ny = exp(t)\n"""', f"body = {body}")
    assert doc != GOOD
    err = compile_error(doc)
    assert err.span is not None and err.span.line >= line, err


def test_rebinding_a_temporary_is_python_or_an_error():
    doc = _doc_with_body("t = x * 2\nt = t + 1\no = t")
    try:
        k = hg.compile(doc, format="toml").on(BACKEND)
    except HologramError as err:
        assert err.span is not None and err.span.line == 8, err
        return
    x = np.arange(3, dtype=np.float32)
    check(k(x, np.zeros(3, np.int32)), x * 2 + 1)


def test_output_never_assigned():
    err = compile_error(GOOD.replace('outputs = { y = "f32[n]" }', 'outputs = { y = "f32[n]", w = "f32[n]" }'))
    assert "w" in str(err)


@pytest.mark.parametrize("decl", ["f32[m]", "f32[n + 1]", "f32[3]", "f32", "f32[n, 2]"])
def test_output_shape_disagreeing_with_body(decl):
    doc = GOOD.replace('outputs = { y = "f32[n]" }', f'outputs = {{ y = "{decl}" }}')
    err = compile_error(doc.replace('body = """\nt = x * 2\ny = exp(t)\n"""', 'body = "y = x"'))
    assert "y" in str(err) and err.span is not None


def test_scalar_broadcasts_into_an_output():
    doc = GOOD.replace('outputs = { y = "f32[n]" }', 'outputs = { y = "f32[n, n]" }')
    k = hg.compile(doc.replace('body = """\nt = x * 2\ny = exp(t)\n"""', 'body = "y = sum(x)"'),
                   format="toml").on(BACKEND)
    x = np.arange(3, dtype=np.float32)
    check(k(x), np.full((3, 3), 3.0, np.float32))


DISAGREE = GOOD.replace('inputs  = { x = "f32[n]" }', 'inputs  = { x = "f32[n]", z = "f32[m]" }').replace(
    'body = """\nt = x * 2\ny = exp(t)\n"""', 'body = "y[i] = x[i] + z[i]"')


def test_index_variables_must_agree_short_operand():
    with pytest.raises(HologramError):
        k = hg.compile(DISAGREE, format="toml").on(BACKEND)
        k(np.ones(4, np.float32), np.ones(3, np.float32))


def test_output_target_index_ranges_over_the_target():
    """DESIGN.md: free index variables range over the target's shape (z may be longer)."""
    k = hg.compile(DISAGREE, format="toml").on(BACKEND)
    z = np.arange(4, dtype=np.float32)
    check(k(np.ones(3, np.float32), z), 1 + z[:3])


def test_temporary_index_ranges_must_agree():
    """DESIGN.md: a temporary's index variable ranges over the arrays it indexes, which must agree."""
    doc = DISAGREE.replace('body = "y[i] = x[i] + z[i]"', 'body = """\nt[i] = x[i] + z[i]\ny = t\n"""')
    err = compile_error(doc)
    assert err.span.line == 7 and "'i'" in str(err) and "n" in str(err) and "m" in str(err), err


def test_bitwise_on_floats_is_a_compile_error():
    err = compile_error(GOOD.replace("t = x * 2", "t = x << 2"))
    assert err.span.line == 7


def test_literal_out_of_range_for_dtype_is_an_error():
    """numpy (NEP 50) raises OverflowError for `int8_array + 300`; the DSL must not guess."""
    doc = GOOD.replace('"f32[n]" }\noutputs', '"i8[n]" }\noutputs').replace('y = "f32[n]"', 'y = "i8[n]"')
    err = compile_error(doc.replace('body = """\nt = x * 2\ny = exp(t)\n"""', 'body = "y = x + 300"'))
    assert "300" in str(err)


def test_negative_integer_power_is_an_error():
    """numpy: 'Integers to negative integer powers are not allowed.'"""
    doc = GOOD.replace('"f32[n]" }\noutputs', '"i32[n]" }\noutputs').replace('y = "f32[n]"', 'y = "i32[n]"')
    compile_error(doc.replace('body = """\nt = x * 2\ny = exp(t)\n"""', 'body = "y = x ** -1"'))


# ------------------------------------------------------------- no input crashes anything


TOKENS = ["x", "y", "t", "i", "j", "n", "[", "]", "(", ")", ",", " ", "=", "+", "-", "*", "/", "//", "%", "**",
          "<", "<<", ">>", "&", "|", "^", "~", "==", "and", "not", "1", "2.5", "1e400", "nan", "inf", "pi",
          "sum", "max", "exp", "where", "f32", "i8", "axis=", "\n", '"', "#", "'", "@", "\t", "é", "\\"]


@given(st.lists(st.sampled_from(TOKENS), max_size=14))
def test_fuzzed_bodies_compile_or_raise_hologram_errors(toks):
    body = "o = " + "".join(toks)
    try:
        k = hg.compile(_doc_with_body(body), format="toml")
    except HologramError:
        return
    try:
        k.on(BACKEND)(np.array([1.0, -2.0, np.nan], np.float32), np.array([3, 0, -1], np.int32))
    except HologramError:
        pass


@given(st.text(max_size=60))
def test_fuzzed_documents_raise_only_hologram_errors(text):
    for fmt in ("toml", "yaml", "json"):
        try:
            hg.compile(text, format=fmt)
        except HologramError:
            pass


@given(st.sampled_from(["f32[n]", "i8[n]", "u64[n, m]", "bool", "f16[2*n]", "f64[n - 2]"]),
       st.sampled_from([np.float32, np.int8, np.uint64, np.bool_, np.float16, np.float64, np.complex64, object]),
       st.integers(0, 3))
def test_any_argument_is_accepted_or_a_hologram_error(decl, dtype, n):
    doc = ('[kernel]\nname = "k"\nversion = "1.0.0"\n'
           f'inputs = {{ x = "{decl}" }}\noutputs = {{ y = "{decl}" }}\nbody = "y = x"\n')
    k = hg.compile(doc, format="toml").on(BACKEND)
    arg = np.zeros((n,) * (decl.count(",") + 1) if "[" in decl else (), dtype=dtype)
    for cast in (False, True):
        try:
            k(arg, cast=cast)
        except HologramError:
            pass
