"""The Python translator: a module's @hologram.kernel functions as KernelDefs, with every
position in the .py file (docs/python-kernels.md)."""

from __future__ import annotations

import numpy as np
import pytest

from hologram.compiler.driver import compile_kdef
from hologram.core.errors import CompileError, DocumentError
from hologram.core.types import DType
from hologram.registry.pipelines import resolve
from hologram_python.module import has_kernels, literal
from hologram_python.translate import translate_module
from py_helpers import HEADER, error, one, source, translate, underline


def compiled(kdef):
    return compile_kdef(kdef, resolve("O0"))


def run(kdef, *args, backend="interp"):
    from hologram.call.kernel import Kernel

    return Kernel(compiled(kdef), backend)(*args)


# ----------------------------------------------------------------- signature and body
def test_softmax_translates_to_the_document_a_person_writes():
    k = one('''
        @hg.kernel
        def softmax(x: f32["n"]) -> f32["n"]:
            """Numerically stable softmax."""
            m = x.max()
            e = np.exp(x - m)
            return e / e.sum()
    ''')
    assert (k.name, k.version, k.summary) == ("softmax", "0.0.0", "Numerically stable softmax.")
    assert [(p.name, p.dtype, tuple(map(str, p.shape))) for p in k.inputs] == [("x", DType.F32, ("n",))]
    assert [(p.name, tuple(map(str, p.shape))) for p in k.outputs] == [("out", ("n",))]
    assert k.body == "m = x.max()\ne = np.exp(x - m)\nout = e / e.sum()"
    x = np.linspace(-2, 2, 9, dtype=np.float32)
    e = np.exp(x - x.max())
    np.testing.assert_allclose(run(k, x), e / e.sum(), rtol=1e-6)


@pytest.mark.parametrize("annotation, want", [
    ("f32", "f32"), ('f32["n"]', "f32[n]"), ('f32["m", "n"]', "f32[m, n]"), ('u8[4, "n - 2"]', "u8[4, n - 2]"),
    ('"f64[2*n + 1]"', "f64[2*n + 1]"), ("bool_['n']", "bool[n]"), ("hg.types.i16['k']", "i16[k]"),
    ('f32["n", BINS]', "f32[n, 16]"),
])
def test_annotations_are_type_strings(annotation, want):
    from hologram.core.types import type_str
    from hologram.dsl.schema import parse_type

    k = one(f'''
        BINS = 16
        @hg.kernel
        def f(x: {annotation}) -> f32:
            return 1.0
    ''')
    assert type_str(k.inputs[0].dtype, k.inputs[0].shape) == type_str(*parse_type(want))


def test_every_dtype_of_hologram_types():
    import hologram.types as T

    assert T.DTYPE_NAMES == tuple(str(d) for d in DType)
    for name in T.DTYPE_NAMES:
        k = one(f'''
            @hg.kernel
            def f(x: {name}["n"]) -> {name}["n"]:
                return x
        ''')
        assert k.inputs[0].dtype is DType.parse(name) and k.outputs[0].dtype is DType.parse(name)
    assert repr(T.f32["m", "n"]) == "f32[m, n]" and T.f32["n"] == T.f32["n"] and repr(T.bool_) == "bool"


def test_decorator_options_are_the_documents_keys():
    k = one('''
        VERSION = 3
        @hg.kernel(name="renamed", version="1.2.0-rc.1", reassociate=True, backend="interp", opt="O1")
        def f(x: f32["n"]) -> f32:
            return x.sum()
    ''')
    assert (k.name, k.version, k.reassociate) == ("renamed", "1.2.0-rc.1", True)
    err = error('''
        @hg.kernel(versoin="1.0.0")
        def f(x: f32["n"]) -> f32:
            return x.sum()
    ''', DocumentError)
    assert "no option 'versoin'" in err.message and underline(err) == 'versoin="1.0.0"'
    err = error('''
        V = "1.0"
        @hg.kernel(version=V)
        def f(x: f32["n"]) -> f32:
            return x.sum()
    ''', DocumentError)
    assert "literal" in err.message and underline(err) == "V"
    err = error('''
        @hg.kernel(version="1.0")
        def f(x: f32["n"]) -> f32:
            return x.sum()
    ''', DocumentError)
    assert "invalid version" in err.message and underline(err) == '"1.0"'


def test_only_decorated_functions_are_kernels_nested_ones_too():
    kdefs = translate('''
        def helper(x):
            return x

        def outer():
            @hg.kernel
            def inner(x: f32["n"]) -> f32["n"]:
                return x * 2
            return inner

        @hologram.kernel
        def second(x: f32["n"]) -> f32["n"]:
            return -x
    ''')
    assert [k.name for k in kdefs] == ["inner", "second"]
    assert has_kernels(source("@hg.kernel\ndef f(x: f32) -> f32:\n    return x\n"))
    assert not has_kernels(source("def f(x):\n    return x\n"))
    assert not has_kernels("import taichi as ti\n@ti.kernel\ndef f():\n    pass\n")
    assert translate_module("x = 1\n", "plain.py") == []


# ------------------------------------------------------------------------ positions
def test_an_unknown_name_points_at_the_py_file():
    err = error('''
        SCALE = 3
        @hg.kernel
        def f(x: f32["n"]) -> f32["n"]:
            y = x * SCALE + zz
            return y
    ''', CompileError)
    assert err.span.file == "k.py" and err.span.line == 7 and underline(err) == "zz"
    assert "unknown name 'zz'" in err.message and "   7 |     y = x * SCALE + zz" in str(err)


def test_columns_after_a_folded_constant_count_characters_of_the_py_line():
    err = error('''
        ÉCHELLE = 2.5
        @hg.kernel
        def f(x: f32["n"]) -> f32["n"]:
            return x * ÉCHELLE + (x *
                                  zz)
    ''', CompileError)
    assert (err.span.line, underline(err)) == (8, "zz")
    err = error('''
        ÉCHELLE = 2.5
        @hg.kernel
        def f(x: f32["n"]) -> f32["n"]:
            return x * ÉCHELLE + zz
    ''', CompileError)
    assert underline(err) == "zz"


def test_a_type_error_underlines_the_returned_value():
    err = error('''
        @hg.kernel
        def f(x: f32["n"]) -> i32["n"]:
            return x * 2
    ''', CompileError)
    assert underline(err) == "x * 2" and "i32" in err.message


def test_syntax_the_kernel_language_refuses_points_into_the_py_file():
    err = error('''
        @hg.kernel
        def f(x: f32["n"]) -> f32["n"]:
            y = x if x else x
            return y
    ''', CompileError)
    assert err.span.line == 6 and "where(condition, a, b)" in (err.hint or "")
    err = error('''
        @hg.kernel
        def f(x: f32["n"]) -> f32["n"]:
            return x @@ x
    ''', DocumentError)  # not even Python
    assert err.span.line == 6 and "invalid Python" in err.message


def test_errors_in_the_signature_point_at_the_annotation():
    err = error('''
        @hg.kernel
        def f(x: f32["n", "2 / m"]) -> f32["n"]:
            return x
    ''', DocumentError)
    assert underline(err) == "/"
    err = error('''
        @hg.kernel
        def f(sum: f32["n"]) -> f32["n"]:
            return sum
    ''', DocumentError)
    assert "reserved" in err.message and underline(err) == "sum"
    err = error('''
        @hg.kernel
        def f(x: f32["n"], n: f32["m"]) -> f32["n"]:
            return x
    ''', DocumentError)
    assert "same name as input 'n'" in err.message and underline(err) == "n"
    err = error('''
        @hg.kernel
        def f(x) -> f32["n"]:
            return x
    ''', DocumentError)
    assert "no type" in err.message and underline(err) == "x"
    err = error('''
        @hg.kernel
        def f(x: np.ndarray) -> f32["n"]:
            return x
    ''', DocumentError)
    assert underline(err) == "np.ndarray" and "f32" in err.message
    err = error('''
        @hg.kernel
        def f(x: f33["n"]) -> f32["n"]:
            return x
    ''', DocumentError)
    assert underline(err) == "f33[\"n\"]"
    for params, what in (("*xs: f32", "*args"), ("x: f32 = 1.0", "default"), ("*, x: f32", "keyword-only")):
        err = error(f'''
            @hg.kernel
            def f({params}) -> f32:
                return 1.0
        ''', DocumentError)
        assert what in err.message


@pytest.mark.parametrize("statement, word", [
    ("for i in range(3):\n                y = x", "for"), ("while True:\n                y = x", "while"),
    ("if x.sum() > 0:\n                y = x", "if"), ("with open('f') as g:\n                y = x", "with"),
    ("import math", "import"), ("def g():\n                pass", "def"),
])
def test_statements_a_kernel_has_not_are_refused_with_the_dsls_hint(statement, word):
    err = error(f'''
        @hg.kernel
        def f(x: f32["n"]) -> f32["n"]:
            {statement}
            return x
    ''', CompileError)
    assert f"no {word!r} statements" in err.message and err.span.line == 6
    if word in ("for", "if", "while"):
        from hologram.dsl.parser import STATEMENT_HINTS

        assert err.hint == STATEMENT_HINTS[word]


def test_other_statements_are_refused():
    for statement, words in (("print(x)", "not used"), ("y: f32 = x", "not annotated"), ("a = b = x", "one target"),
                             ("a, b = x, x", "one name"), ("x = x * 2", "rebind"), ("x.y = 1", "assigns a name")):
        err = error(f'''
            @hg.kernel
            def f(x: f32["n"]) -> f32["n"]:
                {statement}
                return x
        ''', CompileError)
        assert words in err.message, (statement, err)


# ------------------------------------------------------------------------ constants
def test_module_constants_are_folded_as_weak_literals():
    k = one('''
        HALF = 0.5
        N = 2 ** 3
        NEG = -N + 1
        ON = True
        BIG = 1e308 * 10
        @hg.kernel
        def f(x: f16["n"]) -> f16["n"]:
            return where(ON, x * HALF + N, x ** NEG) + BIG * 0
    ''')
    assert k.body == "out = where(True, x * 0.5 + 8, x ** (-7)) + inf * 0"
    kir = compiled(k).kir
    assert kir.decl("out").dtype is DType.F16  # a Python float is weak: f16 * 0.5 stays f16 (NEP 50)
    assert [literal(v) for v in (3, -3, 1.5, -0.0, float("nan"), float("-inf"), False)] == \
        ["3", "(-3)", "1.5", "(-0.0)", "nan", "(-inf)", "False"]


def test_a_local_shadows_a_constant_and_non_constants_are_errors_naming_them():
    k = one('''
        m = 100
        @hg.kernel
        def f(x: f32["n"]) -> f32["n"]:
            m = x.max()
            return x - m
    ''')
    assert k.body == "m = x.max()\nout = x - m"
    for setup, what in (('NAME = "x"', "a module-level variable"), ("import os as NAME", "the module 'os'"),
                        ("def NAME(): pass", "a function"), ("NAME = 1\nNAME = 2", "assigned more than once"),
                        ("NAME = [1, 2]", "a module-level variable"), ("from math import pi as NAME", "imported")):
        err = error(setup + '''
@hg.kernel
def f(x: f32["n"]) -> f32["n"]:
    return x * NAME
''', CompileError)
        assert f"'NAME' is {what}" in err.message and underline(err) == "NAME", (setup, err)


# ------------------------------------------------------------------------ outputs
def test_tuple_returns_name_their_outputs():
    k = one('''
        @hg.kernel
        def f(x: f32["n"]) -> tuple[f32, f32["n"], f64]:
            s = x.sum()
            y = x / s
            return s, y, x.max()
    ''')
    assert [p.name for p in k.outputs] == ["s", "y", "out2"]
    assert k.body == "s_ = x.sum()\ny = x / s_\ns = s_\nout2 = x.max()"
    x = np.arange(1, 5, dtype=np.float32)
    got = run(k, x)
    assert got._fields == ("s", "y", "out2")
    np.testing.assert_allclose(got.y, x / x.sum())
    k2 = one('''
        @hg.kernel
        def f(x: f32["n"]) -> (f32["n"], f32["n"]):
            return x, x
    ''')
    assert [p.name for p in k2.outputs] == ["out0", "out1"]


def test_return_mismatches_are_errors():
    cases = [
        ('-> tuple[f32, f32]:\n                return x.sum()', "returns 1 value but its return type declares 2"),
        (':\n                return x', "declares no return type"),
        ('-> f32["n"]:\n                y = x', "declares a return type but returns nothing"),
        ('-> f32["n"]:\n                return', "returns nothing"),
    ]
    for tail, words in cases:
        err = error(f'''
            @hg.kernel
            def f(x: f32["n"]) {tail}
        ''')
        assert words in err.message, (tail, err)
    err = error('''
        @hg.kernel
        def f(x: f32["n"], y: f32["n"]) -> f32["n"]:
            y[:] = x
            return x
    ''', CompileError)
    assert "not both" in err.message


def test_a_returned_local_assigned_twice_is_named_as_written():
    err = error('''
        @hg.kernel
        def f(x: f32["n"]) -> f32["n"]:
            y = x
            y = y + 1
            return y
    ''', CompileError)  # y is renamed y_ in the body (returned and read): the error still says y
    assert err.message == "'y' is assigned twice (first on line 6)" and (err.span.line, underline(err)) == (7, "y")


def test_out_parameters_are_outputs_in_parameter_order():
    k = one('''
        @hg.kernel
        def f(c: f32["n"], x: f32["n"], d: f32["n"], e: f32["n"]):
            e[...] = x + 1
            c[:] = x * 2
            d[i] = x[n - 1 - i]
    ''')
    assert [p.name for p in k.inputs] == ["x"] and [p.name for p in k.outputs] == ["c", "d", "e"]
    assert k.body == "e = x + 1\nc = x * 2\nd[i] = x[n - 1 - i]"
    x = np.arange(4, dtype=np.float32)
    got = run(k, x)
    np.testing.assert_array_equal(got.c, x * 2)
    np.testing.assert_array_equal(got.d, x[::-1])
    np.testing.assert_array_equal(got.e, x + 1)


# ---------------------------------------------------------------------- thread style
@pytest.mark.parametrize("guard", ["idx < n", "idx < len(c)", "idx < c.shape[0]", "n > idx", "0 <= idx < n",
                                   "idx <= n - 1", "idx < c.size", "idx >= 0 and idx < a.shape[-1]"])
def test_the_seeds_thread_style_is_index_notation(guard):
    k = one(f'''
        @hg.kernel
        def vector_add(a: f32["n"], b: f32["n"], c: f32["n"]):
            idx = get_global_id()
            if {guard}:
                c[idx] = a[idx] + b[idx]
    ''')
    assert k.body == "c[idx] = a[idx] + b[idx]" and [p.name for p in k.outputs] == ["c"]
    a, b = np.arange(5, dtype=np.float32), np.ones(5, np.float32)
    np.testing.assert_array_equal(run(k, a, b), a + b)


def test_the_seeds_size_parameter_is_refused_with_the_form_to_write():
    err = error('''
        @hg.kernel
        def vector_add(a: f32["n"], b: f32["n"], c: f32["n"], n: u32):
            idx = get_global_id()
            if idx < n:
                c[idx] = a[idx] + b[idx]
    ''', DocumentError)
    assert "parameter 'n' is a size" in err.message and underline(err) == "n" and err.span.col == 55
    assert "drop the parameter n" in err.hint


def test_thread_style_on_two_axes_with_an_early_exit_and_per_thread_values():
    k = one('''
        @hg.kernel
        def f(alpha: f32, x: f32["m", "n"], out: f32["m", "n"]):
            i, j = get_global_id(0), hg.types.get_global_id(1)
            if i >= m or j >= x.shape[1]:
                return
            t = alpha * x[i, j]
            u = t + 1
            out[i, j] = u * t
    ''')
    assert k.body == "t[i, j] = alpha * x[i, j]\nu[i, j] = t[i, j] + 1\nout[i, j] = u[i, j] * t[i, j]"
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = 2 * x
    np.testing.assert_array_equal(run(k, np.float32(2), x), (t + 1) * t)


def test_thread_style_without_a_guard_runs_over_the_target():
    k = one('''
        @hg.kernel
        def f(a: f32["n"], c: f32["n"]):
            i = get_global_id()
            c[i] = a[i] * 2
    ''')
    assert k.body == "c[i] = a[i] * 2"


def test_a_guard_that_is_not_the_targets_dimension_is_refused():
    err = error('''
        @hg.kernel
        def f(a: f32["m"], c: f32["n"]):
            idx = get_global_id()
            if idx < m:
                c[idx] = a[idx]
    ''', CompileError)
    assert "dimension 0 is n" in err.message and underline(err) == "m"
    err = error('''
        @hg.kernel
        def f(a: f32["n"], c: f32["n"]):
            idx = get_global_id()
            if idx < a.sum():
                c[idx] = a[idx]
    ''', CompileError)
    assert "bounds a thread index by a shape" in err.message
    err = error('''
        @hg.kernel
        def f(a: f32["n"], c: f32["n"]):
            idx = get_global_id()
            if idx < n and a[idx] > 0:
                c[idx] = a[idx]
    ''', CompileError)
    assert "no 'if' statements" in err.message
    err = error('''
        @hg.kernel
        def f(a: f32["n"], c: f32["n"]):
            idx = get_global_id(3)
            c[idx] = a[idx]
    ''', CompileError)
    assert "0, 1 or 2" in err.message


# ------------------------------------------------------------------------- spellings
def test_aliases_of_numpy_and_of_the_types_are_the_kernel_languages_names():
    text = '''import numpy as xp
import hologram as hgl
import hologram.types as T
from numpy import exp as nexp
from hologram.types import f32 as F, get_global_id as gid

@hgl.kernel
def f(x: F["n"], y: T.f64["n"]) -> T.f32["n"]:
    return xp.sqrt(nexp(x)) + y.astype(T.f32)
'''
    (k,) = translate_module(text, "alias.py")
    assert k.body == "out = np.sqrt(exp(x)) + y.astype(f32)"
    assert [p.dtype for p in k.inputs] == [DType.F32, DType.F64]
    err = error('''
        @hg.kernel
        def f(x: f32["n"]) -> f32["n"]:
            return hg.exp(x)
    ''', CompileError)
    assert "'hg' is a module" in err.message


def test_an_async_function_is_refused():
    err = error('''
        @hg.kernel
        async def f(x: f32["n"]) -> f32["n"]:
            return x
    ''', DocumentError)
    assert "not async" in err.message and underline(err) == "f"


def test_the_header_lines_are_counted():
    assert HEADER.count("\n") == 3


def test_backslash_continuations_are_parenthesized_with_exact_columns():
    k = one('''
        K = 2
        @hg.kernel
        def f(x: f32["n"]) -> tuple[f32["n"], f32["n"]]:
            y = x * K + \\
                x * 3
            return y + \\
                1, x
    ''')
    assert k.body == "y = (x * 2 +  \nx * 3)\nout0 = (y +  \n1)\nout1 = x"
    x = np.arange(3, dtype=np.float32)
    got = run(k, x)
    np.testing.assert_array_equal(got.out0, x * 5 + 1)
    err = error('''
        @hg.kernel
        def f(x: f32["n"]) -> f32["n"]:
            return x + \\
                   zz
    ''', CompileError)
    assert (err.span.line, underline(err)) == (7, "zz")


def test_a_kernel_without_outputs_points_at_its_name():
    err = error('''
        @hg.kernel
        def fdef(x: f32["n"], c: f32["n"]):
            i = get_global_id()
            if i < n:
                pass
    ''', DocumentError)
    assert "declares no outputs" in err.message and underline(err) == "fdef"
