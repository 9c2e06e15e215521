"""The runtime API end to end on the interp backend: compile, call, argument checking,
out=, symbol binding, libraries, backends, caching."""

from __future__ import annotations

import numpy as np
import pytest

import hologram as hg
from hologram.call import args as A
from hologram.core.errors import (ArgumentError, DocumentError, EmptyReductionError, HologramError, KernelNotFoundError,
                                  PluginError)
from hologram.core.types import Affine, DType


pytestmark = pytest.mark.usefixtures("fresh_plugins")


def kernel(inputs: str, outputs: str, body: str, name: str = "k") -> hg.Kernel:
    return hg.compile(f'[kernel]\nname = "{name}"\nversion = "1.0.0"\ninputs = {{ {inputs} }}\n'
                      f'outputs = {{ {outputs} }}\nbody = """\n{body}\n"""\n', backend="interp")


@pytest.fixture(scope="module")
def vadd():
    return kernel('x = "f32[n]", y = "f32[n]"', 'z = "f32[n]"', "z = x + y", name="vadd")


@pytest.fixture(scope="module")
def gemm():
    return hg.compile_file("kernels/gemm.toml", backend="interp")


def f32(*values):
    return np.array(values, dtype=np.float32)


def message(exc_info) -> str:
    return exc_info.value.message


# -------------------------------------------------------------------------- compiling
def test_compile_file_runs_and_matches_numpy():
    softmax = hg.compile_file("kernels/softmax.toml")
    x = np.linspace(-3, 3, 11, dtype=np.float32)
    y = softmax(x)
    e = np.exp(x - x.max())
    np.testing.assert_allclose(y, e / e.sum(), rtol=1e-6)
    assert y.dtype == np.float32 and y.shape == (11,)
    assert softmax.name == "softmax" and softmax.version == "1.0.0"
    assert str(softmax.signature) == "softmax(x: f32[n]) -> y: f32[n]"
    assert softmax.kdef.name == "softmax" and softmax.ir.name == "softmax"
    assert softmax.program.symbols == ("n",)


def test_positional_and_keyword_arguments(vadd, gemm):
    x, y = f32(1, 2, 3), f32(10, 20, 30)
    np.testing.assert_array_equal(vadd(x, y), f32(11, 22, 33))
    np.testing.assert_array_equal(vadd(y=y, x=x), f32(11, 22, 33))
    np.testing.assert_array_equal(vadd(x, y=y), f32(11, 22, 33))
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(gemm(2, a, b), 2 * (a @ b))
    np.testing.assert_allclose(gemm(np.float64(0.5), b=b, a=a), 0.5 * (a @ b))
    assert str(gemm.signature) == "gemm(alpha: f32, a: f32[m, k], b: f32[k, n]) -> c: f32[m, n]"


def test_multi_kernel_document_is_a_library():
    doc = '''
[[kernels]]
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
    lib = hg.compile(doc, file="two.toml")
    assert isinstance(lib, hg.Library) and list(lib) == ["vadd", "vneg"] and len(lib) == 2
    assert lib.vneg is lib["vneg"]
    np.testing.assert_array_equal(lib.vneg(f32(1, -2)), f32(-1, 2))
    assert [k.name for k in lib.values()] == ["vadd", "vneg"]
    with pytest.raises(KernelNotFoundError) as e:
        lib.vnge
    assert message(e) == "no kernel named 'vnge'; did you mean 'vneg'?"
    assert isinstance(e.value, AttributeError) and isinstance(e.value, KeyError)
    assert not hasattr(lib, "gemm") and lib.get("gemm") is None and "vadd" in lib
    with pytest.raises(KeyError):
        lib["gemm"]
    assert "vadd" in dir(lib)
    single = hg.compile_all(doc.split("[[kernels]]")[0] + "[[kernels]]" + doc.split("[[kernels]]")[1])
    assert isinstance(single, hg.Library) and list(single) == ["vadd"]
    assert all(k.backend.name == "interp" for k in lib.on("interp").values())


def test_compile_errors_are_hologram_errors(tmp_path):
    with pytest.raises(PluginError) as e:
        hg.compile("", format="tmol")
    assert message(e) == "unknown kernel format 'tmol'; did you mean 'toml'?"
    with pytest.raises(DocumentError) as e:
        hg.compile_file(tmp_path / "missing.toml")
    assert message(e) == f"cannot read {tmp_path / 'missing.toml'}: No such file or directory"
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(DocumentError, match="not UTF-8"):
        hg.compile_file(bad)
    with pytest.raises(DocumentError):
        hg.compile(b"[kernel]")  # bytes, not text
    with pytest.raises(PluginError) as e:
        hg.compile_file("kernels/softmax.toml", backend="intrep")
    assert message(e) == "unknown backend 'intrep'; did you mean 'interp'?"
    with pytest.raises(HologramError):  # a body error from the front end, with a span
        kernel('x = "f32[n]"', 'y = "f32[n]"', "y = expp(x)")


def test_yaml_documents_compile_by_extension(tmp_path):
    path = tmp_path / "neg.yaml"
    path.write_text('kernel:\n  name: neg\n  version: "1.0.0"\n  inputs: {x: "i32[n]"}\n'
                    '  outputs: {y: "i32[n]"}\n  body: "y = -x"\n')
    neg = hg.compile_file(path)
    np.testing.assert_array_equal(neg(np.array([1, -2], np.int32)), [-1, 2])
    assert hg.compile(path.read_text(), format="yaml").name == "neg"


def test_programs_are_cached_by_content(vadd):
    text = ('[kernel]\nname = "vadd"\nversion = "1.0.0"\ninputs = { x = "f32[n]", y = "f32[n]" }\n'
            'outputs = { z = "f32[n]" }\nbody = """\nz = x + y\n"""\n')
    again = hg.compile(text, backend="interp")
    assert again.program is vadd.program  # same document text: the document cache
    other_file = hg.compile(text, file="elsewhere.toml")
    assert other_file.program is vadd.program  # same KernelIR: the program cache
    assert other_file.kdef.span.file == "elsewhere.toml"
    hg.clear_cache()
    assert hg.compile(text).program is not vadd.program
    assert hg.compile(text).program == vadd.program


# ------------------------------------------------------------------- argument binding
def test_argument_count_errors(vadd):
    x = f32(1)
    with pytest.raises(ArgumentError) as e:
        vadd(x, x, x)
    assert message(e) == "vadd() takes 2 inputs (x, y) but 3 were given"
    with pytest.raises(ArgumentError) as e:
        vadd(x)
    assert message(e) == "vadd() missing input 'y'"
    with pytest.raises(ArgumentError) as e:
        vadd()
    assert message(e) == "vadd() missing inputs 'x', 'y'"
    with pytest.raises(ArgumentError) as e:
        vadd(x, yy=x)
    assert message(e) == "vadd() got an unexpected argument 'yy'; did you mean 'y'?"
    with pytest.raises(ArgumentError) as e:
        vadd(x, x, z=x)
    assert message(e) == "vadd() got an unexpected argument 'z'"
    assert e.value.hint == "outputs are returned; pass out= to write into existing arrays"
    with pytest.raises(ArgumentError) as e:
        vadd(x, x=x)
    assert message(e) == "vadd() got multiple values for argument 'x'"
    assert isinstance(e.value, TypeError)  # as Python's own call errors


def test_array_argument_errors(vadd):
    x = f32(1, 2, 3)
    with pytest.raises(ArgumentError) as e:
        vadd([1, 2, 3], x)
    assert message(e) == "vadd(): argument 'x' must be a numpy array of f32[n], got list"
    assert e.value.hint == "pass cast=True to convert it (one explicit copy)"
    with pytest.raises(ArgumentError) as e:
        vadd(x, np.arange(3.0))
    assert message(e) == "vadd(): argument 'y' must have dtype f32 (float32), got float64"
    assert e.value.hint == "pass cast=True to convert it (one explicit copy)"
    with pytest.raises(ArgumentError) as e:
        vadd(x, np.zeros((3, 1), np.float32))
    assert message(e) == "vadd(): argument 'y' must have rank 1 (f32[n]), got shape (3, 1)"
    assert e.value.hint == "to map the kernel over leading dimensions, call vadd.map(...)"
    with pytest.raises(ArgumentError) as e:
        vadd(f32(1, 2, 3, 4, 5, 6)[::2], x)
    assert message(e) == "vadd(): argument 'x' must be C-contiguous, got a strided view of shape (3,)"
    with pytest.raises(ArgumentError) as e:
        vadd(np.array(["a"]), x, cast=True)
    assert message(e) == "vadd(): argument 'x' cannot be converted to f32[n]: got values of dtype <U1"


def test_cast_makes_one_explicit_copy(vadd):
    x64 = np.array([1.5, 2.5, 3.5])
    strided = f32(1, 0, 2, 0, 3, 0)[::2]
    z = vadd(x64, strided, cast=True)
    np.testing.assert_array_equal(z, f32(2.5, 4.5, 6.5))
    assert x64.dtype == np.float64  # the caller's arrays are untouched
    np.testing.assert_array_equal(vadd([1, 2], (3, 4), cast=True), f32(4, 6))


def test_cast_to_integers_refuses_what_the_dtype_cannot_hold():
    """cast=True converts an array to an integer or bool input as it converts a scalar:
    floats truncate toward zero; a NaN, an infinity or a value out of the dtype's range
    is an error naming the element (numpy's astype would give INT_MIN or wrap)."""
    inc = kernel('x = "i32[n]"', 'y = "i32[n]"', "y = x + 1", name="inc")
    np.testing.assert_array_equal(inc(np.array([1.7, -2.7, 2147483646.9]), cast=True), [2, -1, 2147483647])
    for given, words in ((np.nan, "= nan cannot be converted to i32"), (-np.inf, "= -inf cannot be converted to i32"),
                         (2.0 ** 31, "= 2147483648.0 is out of range for i32 (-2147483648 to 2147483647)"),
                         (-2.0 ** 31 - 1, "= -2147483649.0 is out of range for i32")):
        with pytest.raises(ArgumentError) as e:
            inc(np.array([[1.0, given]])[0], cast=True)
        assert message(e).startswith(f"inc(): argument 'x': x[1] {words}"), message(e)
    with pytest.raises(ArgumentError) as e:
        inc(np.array([7, 1 << 40]), cast=True)  # an int64 too wide, never wrapped
    assert message(e).startswith("inc(): argument 'x': x[1] = 1099511627776 is out of range for i32")
    pick = kernel('x = "u8[n, m]", b = "bool[n, m]"', 'y = "u8[n, m]"', "y = where(b, x, 0)", name="pick")
    with pytest.raises(ArgumentError) as e:
        pick(np.array([[1, -1]]), np.ones((1, 2), bool), cast=True)
    assert message(e).startswith("pick(): argument 'x': x[0, 1] = -1 is out of range for u8 (0 to 255)")
    with pytest.raises(ArgumentError) as e:
        pick(np.ones((1, 2), np.uint8), np.array([[0.0, np.nan]]), cast=True)
    assert message(e) == "pick(): argument 'b': b[0, 1] = nan cannot be converted to bool"
    np.testing.assert_array_equal(pick(np.ones((1, 2)), np.array([[0.0, -0.5]]), cast=True), [[0, 1]])
    with pytest.raises(ArgumentError, match=r"inc\(\): argument 'x': x\[0, 0\] = nan cannot be converted to i32"):
        inc.map(np.full((2, 3), np.nan), cast=True)  # loop dimensions convert the same way


def test_cast_converts_object_arrays_of_numbers(vadd):
    """As np.asarray(x, dtype) would; anything not a number is refused by element."""
    from decimal import Decimal
    from fractions import Fraction

    x = np.array([1, 2.5, Fraction(1, 4), Decimal("0.5"), np.float16(2)], dtype=object)
    np.testing.assert_array_equal(vadd(x, np.ones(5, np.float32), cast=True), f32(2, 3.5, 1.25, 1.5, 3))
    np.testing.assert_array_equal(vadd([1, 2**70], [0, 0], cast=True), f32(1, 2.0 ** 70))  # np.asarray: object
    inc = kernel('x = "i32[n]"', 'y = "i32[n]"', "y = x + 1", name="inc")
    np.testing.assert_array_equal(inc(np.array([1, 2.9, True], dtype=object), cast=True), [2, 3, 2])
    for given, words in (([1, None], "x[1] = None is not a real number"), ([1, "2"], "x[1] = '2' is not a real number"),
                         ([1, 1j], "x[1] = 1j is not a real number"), ([1, float("nan")], "x[1] = nan cannot be converted"),
                         ([1, 2**40], "x[1] = 1099511627776 is out of range for i32")):
        with pytest.raises(ArgumentError) as e:
            inc(np.array(given, dtype=object), cast=True)
        assert message(e).startswith(f"inc(): argument 'x': {words}"), message(e)


def test_scalar_arguments(gemm):
    a, b = np.ones((1, 1), np.float32), np.ones((1, 1), np.float32)
    for alpha in (2, 2.0, np.float16(2), np.int8(2), np.array(2.0), True):
        assert gemm(alpha, a, b)[0, 0] == (1.0 if alpha is True else 2.0)
    with pytest.raises(ArgumentError) as e:
        gemm("2", a, b)
    assert message(e) == "gemm(): argument 'alpha' must be a number (f32), got str"
    with pytest.raises(ArgumentError) as e:
        gemm(1j, a, b)
    assert message(e) == "gemm(): argument 'alpha' must be a number (f32), got complex"


@pytest.fixture(scope="module")
def shift():
    return kernel('x = "u8[n]", s = "u8"', 'y = "u8[n]"', "y = x + s", name="shift")


def test_integer_scalars_are_range_checked(shift):
    x = np.array([1, 2], np.uint8)
    np.testing.assert_array_equal(shift(x, 255), [0, 1])  # u8 arithmetic wraps
    np.testing.assert_array_equal(shift(x, np.int64(3)), [4, 5])
    with pytest.raises(ArgumentError) as e:
        shift(x, 256)
    assert message(e) == "shift(): argument 's' = 256 is out of range for u8 (0 to 255)"
    with pytest.raises(ArgumentError) as e:
        shift(x, -1)
    assert message(e) == "shift(): argument 's' = -1 is out of range for u8 (0 to 255)"
    with pytest.raises(ArgumentError) as e:
        shift(x, 2.7)
    assert message(e) == "shift(): argument 's' must be an integer (u8), got float 2.7"
    assert e.value.hint == "pass cast=True to truncate it toward zero"
    np.testing.assert_array_equal(shift(x, 2.7, cast=True), [3, 4])
    with pytest.raises(ArgumentError) as e:
        shift(x, float("nan"), cast=True)
    assert message(e) == "shift(): argument 's' = nan cannot be converted to u8"


# ---------------------------------------------------------------------- shape symbols
def test_symbol_mismatch_names_symbol_sizes_and_arguments(vadd, gemm):
    with pytest.raises(ArgumentError) as e:
        vadd(f32(1, 2, 3), f32(1, 2))
    assert message(e) == ("vadd(): shape mismatch for symbol 'n': n = 3 from argument 'x' dim 0 (n) of size 3, "
                          "but argument 'y' dim 0 (n) has size 2, which needs n = 2")
    a, b = np.ones((2, 3), np.float32), np.ones((4, 5), np.float32)
    with pytest.raises(ArgumentError) as e:
        gemm(1.0, a, b)
    assert message(e) == ("gemm(): shape mismatch for symbol 'k': k = 3 from argument 'a' dim 1 (k) of size 3, "
                          "but argument 'b' dim 0 (k) has size 4, which needs k = 4")


def test_affine_dims_are_solved():
    stencil = hg.compile_file("kernels/stencil3.toml", backend="interp")
    x = np.arange(10, dtype=np.float32) ** 2
    y = stencil(x)
    np.testing.assert_allclose(y, 0.25 * x[:-2] + 0.5 * x[1:-1] + 0.25 * x[2:])
    assert y.shape == (8,)
    with pytest.raises(ArgumentError) as e:
        stencil(f32(1))
    assert message(e) == "stencil3(): output 'y' (f32[n - 2]) would have negative shape (-1,) for n = 1"
    halves = kernel('x = "f32[2*n]", y = "f32[n]"', 'z = "f32[n]"', "z[i] = x[2*i] + y[i]", name="halves")
    np.testing.assert_array_equal(halves(f32(1, 2, 3, 4), f32(10, 20)), f32(11, 23))
    with pytest.raises(ArgumentError) as e:
        halves(f32(1, 2, 3), f32(1))
    assert message(e) == "halves(): argument 'x' dim 0 (2*n) has size 3, which no integer n >= 0 satisfies"
    with pytest.raises(ArgumentError) as e:
        halves(f32(1, 2, 3, 4), f32(1))
    assert message(e) == ("halves(): shape mismatch for symbol 'n': n = 2 from argument 'x' dim 0 (2*n) of size 4, "
                          "but argument 'y' dim 0 (n) has size 1, which needs n = 1")


def test_constant_dims_are_checked():
    rows = kernel('x = "f32[n, 3]"', 'y = "f32[n]"', "y = sum(x, axis=1)", name="rows")
    np.testing.assert_array_equal(rows(np.ones((2, 3), np.float32)), f32(3, 3))
    with pytest.raises(ArgumentError) as e:
        rows(np.ones((2, 4), np.float32))
    assert message(e) == "rows(): argument 'x' dim 1 must be 3 (f32[n, 3]), got size 4"


def test_bind_symbols_unit():
    p = [A.Param("x", DType.F32, (Affine.of("n") + Affine.of("m"),), "array"),
         A.Param("y", DType.F32, (Affine.of("m"),), "array")]
    arrays = {"x": np.zeros(7), "y": np.zeros(3)}
    assert A.bind_symbols("k", p, arrays, ("n", "m")) == {"m": 3, "n": 4}  # needs a second pass
    with pytest.raises(ArgumentError) as e:
        A.bind_symbols("k", p[:1], arrays, ("n", "m"))
    assert message(e) == ("k(): cannot bind shape symbols m, n from argument 'x' dim 0 (m + n); "
                          "each symbol needs a dimension of its own")
    assert A.bind_symbols("k", p[1:], arrays, (), given={"m": 3}) == {"m": 3}
    with pytest.raises(ArgumentError) as e:
        A.bind_symbols("k", p[1:], arrays, (), given={"m": 4})
    assert message(e) == ("k(): shape mismatch for symbol 'm': m = 4 from --bind, "
                          "but argument 'y' dim 0 (m) has size 3, which needs m = 3")
    with pytest.raises(ArgumentError) as e:
        A.bind_symbols("k", p[1:], {"y": np.zeros(3)}, ("m", "q"))
    assert message(e) == "k(): shape symbol 'q' is not bound by any argument's shape"


# ----------------------------------------------------------------------------- outputs
def test_out_is_written_in_place_zero_copy(vadd):
    x, y = f32(1, 2, 3), f32(4, 5, 6)
    z = np.full(3, np.nan, np.float32)
    got = vadd(x, y, out=z)
    assert got is z and np.shares_memory(got, z)
    np.testing.assert_array_equal(z, f32(5, 7, 9))
    got = vadd(x, y, out=(z,))
    assert got is z
    buf = np.zeros(6, np.float32)
    vadd(x, y, out=buf[3:])  # a contiguous view of a larger buffer
    np.testing.assert_array_equal(buf, f32(0, 0, 0, 5, 7, 9))


def test_out_errors(vadd):
    x = f32(1, 2, 3)
    with pytest.raises(ArgumentError) as e:
        vadd(x, x, out=np.zeros(3))
    assert message(e) == "vadd(): out 'z' must have dtype f32 (float32), got float64"
    with pytest.raises(ArgumentError) as e:
        vadd(x, x, out=np.zeros(4, np.float32))
    assert message(e) == "vadd(): out 'z' must have shape (3,) (f32[n]), got (4,)"
    with pytest.raises(ArgumentError) as e:
        vadd(x, x, out=np.zeros(6, np.float32)[::2])
    assert message(e) == "vadd(): out 'z' must be C-contiguous"
    ro = np.zeros(3, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ArgumentError) as e:
        vadd(x, x, out=ro)
    assert message(e) == "vadd(): out 'z' is read-only"
    with pytest.raises(ArgumentError) as e:
        vadd(x, x, out=(ro, ro))
    assert message(e) == "vadd(): out= must hold 1 array (z), got 2"
    with pytest.raises(ArgumentError) as e:
        vadd(x, x, out=[1.0, 2.0, 3.0])
    assert message(e) == "vadd(): out= must hold 1 array (z), got 3"
    with pytest.raises(ArgumentError) as e:
        vadd(x, x, out=(x.tolist(),))
    assert message(e) == "vadd(): out 'z' must be a numpy array of f32[n], got list"


def test_out_aliasing_an_input_gives_the_unaliased_result():
    stencil = hg.compile_file("kernels/stencil3.toml", backend="interp")
    x = np.arange(12, dtype=np.float32) ** 2
    expected = stencil(x)
    stencil(x, out=x[:-2])  # y[i] overwrites x[i] while x[i + 1], x[i + 2] are still needed
    np.testing.assert_array_equal(x[:-2], expected)
    softmax = hg.compile_file("kernels/softmax.toml", backend="interp")
    x = np.linspace(0, 1, 8, dtype=np.float32)
    expected = softmax(x)
    assert softmax(x, out=x) is x
    np.testing.assert_array_equal(x, expected)


@pytest.mark.parametrize("name", ["None", "class", "lambda"])
def test_a_kernel_named_like_a_python_keyword_still_returns_its_outputs(name):
    """Found by the document fuzzer (seed 23): namedtuple refused the kernel's name as
    its type name, so compiling a kernel named "None" with two outputs raised ValueError."""
    k = hg.compile(f'[kernel]\nname = "{name}"\nversion = "1.0.0"\ninputs = {{ x = "f32[n]" }}\n'
                   'outputs = { lo = "f32[n]", hi = "f32[n]" }\nbody = "lo = x - 1\\nhi = x + 1"\n',
                   format="toml", backend="interp")
    x = np.arange(3, dtype=np.float32)
    res = k(x)
    assert res._fields == ("lo", "hi") and type(res).__name__ == "Outputs"
    np.testing.assert_array_equal(res.hi, x + 1)


def test_several_outputs_are_a_namedtuple():
    hist = hg.compile_file("kernels/class_histogram.toml", backend="interp")
    data = np.arange(256, dtype=np.uint8)
    res = hist(data)
    assert isinstance(res, tuple) and res._fields == ("hist", "mirrored")
    assert res.hist.dtype == np.int64 and res.hist.shape == (96,) and res.hist.sum() == 256
    assert res[0] is res.hist
    h, m = np.full(96, -1, np.int64), np.full(96, -1, np.int64)
    got = hist(data, out=(h, m))
    assert got.hist is h and got.mirrored is m
    np.testing.assert_array_equal(h, res.hist)
    np.testing.assert_array_equal(m, res.mirrored)
    with pytest.raises(ArgumentError) as e:
        hist(data, out=(h, h))
    assert message(e) == "class_histogram(): out 'hist' and out 'mirrored' share memory"
    with pytest.raises(ArgumentError) as e:
        hist(data, out=h)
    assert message(e) == "class_histogram(): out= must hold 2 arrays (hist, mirrored), got 1"


def test_none_in_out_allocates_that_output(vadd):
    """As numpy's ufuncs and hologram.stream take it: `out=(None, m)` writes the second
    output into m and allocates the first."""
    hist = hg.compile_file("kernels/class_histogram.toml", backend="interp")
    data = np.arange(256, dtype=np.uint8)
    want = hist(data)
    m = np.full(96, -1, np.int64)
    got = hist(data, out=(None, m))
    assert got.mirrored is m and got.hist.dtype == np.int64 and got.hist.shape == (96,)
    np.testing.assert_array_equal(got.hist, want.hist)
    np.testing.assert_array_equal(m, want.mirrored)
    got = hist(data, out=[None, None])
    np.testing.assert_array_equal(got.mirrored, want.mirrored)
    z = vadd(f32(1, 2), f32(3, 4), out=(None,))
    np.testing.assert_array_equal(z, f32(4, 6))
    with pytest.raises(ArgumentError) as e:
        hist(data, out=(None,))
    assert message(e) == "class_histogram(): out= must hold 2 arrays (hist, mirrored), got 1"
    batch = hist.map(np.arange(512, dtype=np.uint8).reshape(2, 256) % 7, out=(None, np.zeros((2, 96), np.int64)))
    assert batch.hist.shape == (2, 96) and batch.hist.sum() == 512


def test_zero_d_output_and_empty_reductions():
    argmax = hg.compile_file("kernels/argmax.toml", backend="interp")
    i = argmax(f32(1, 5, 2))
    assert isinstance(i, np.ndarray) and i.shape == () and i.dtype == np.int64 and i == 1
    with pytest.raises(EmptyReductionError) as e:
        argmax(f32())
    assert message(e) == "argmax(): argmax() over an empty extent (n = 0) has no identity"
    assert isinstance(e.value, ValueError)  # as numpy's
    total = kernel('x = "f32[n]"', 's = "f32"', "s = sum(x)", name="total")
    assert total(f32()) == 0  # sum has an identity: no error
    largest = kernel('x = "f32[n, m]"', 'y = "f32[n]"', "y = max(x, axis=1)", name="largest")
    assert largest(np.zeros((0, 3), np.float32)).shape == (0,)
    with pytest.raises(EmptyReductionError) as e:
        largest(np.zeros((2, 0), np.float32))
    assert message(e) == "largest(): max() over an empty extent (m = 0) has no identity"
    mean = hg.compile_file("kernels/mean.toml", backend="interp")
    assert np.isnan(mean(f32()))  # numpy's mean of nothing is nan too (with a warning); no error
    prod = kernel('x = "i32[n]"', 'p = "i32"', "p = prod(x)", name="product")
    assert prod(np.zeros(0, np.int32)) == 1


# ---------------------------------------------------------------------------- backends
def test_kernel_on_another_backend_is_cached(vadd):
    on = vadd.on("interp")
    assert isinstance(on, hg.Kernel) and on.backend.name == "interp"
    assert vadd.on("interp") is on
    np.testing.assert_array_equal(on(f32(1), f32(2)), f32(3))
    assert on.program is vadd.program
    with pytest.raises(PluginError) as e:
        vadd.on("interpp")
    assert message(e) == "unknown backend 'interpp'; did you mean 'interp'?"


def test_default_backend_follows_hologram_backend_at_first_call(monkeypatch):
    monkeypatch.setenv("HOLOGRAM_BACKEND", "nope")
    k = hg.compile_file("kernels/relu.toml")  # compiling needs no backend
    with pytest.raises(PluginError) as e:
        k(f32(1))
    assert message(e) == "unknown backend 'nope' (from HOLOGRAM_BACKEND)"
    monkeypatch.setenv("HOLOGRAM_BACKEND", "interp")
    np.testing.assert_array_equal(k(f32(-1, 2)), f32(0, 2))
    assert k.backend.name == "interp"


# ------------------------------------------------------------------------- text forms
def test_emit_every_stage(vadd):
    assert "z" in vadd.emit("ast")
    assert vadd.emit("ir").startswith("kernel vadd 1.0.0")
    asm = vadd.emit("asm")
    assert "vadd" in asm
    from hologram.isa.asm import parse_program
    assert parse_program(asm) == vadd.program
    with pytest.raises(ArgumentError) as e:
        vadd.emit("assembly")
    assert message(e) == "cannot emit 'assembly': the text forms are ast, ir and asm (backend 'interp' adds none)"
    assert repr(vadd) == "<Kernel vadd(x: f32[n], y: f32[n]) -> z: f32[n] on interp>"


def test_public_api_surface():
    assert hg.__version__ == __import__("importlib.metadata").metadata.version("hologram-kernels")
    assert hg.errors.HologramError is HologramError
    assert callable(hg.hookimpl)
    assert set(hg.__all__) >= {"compile", "compile_file", "get_backend", "list_backends", "Kernel", "hookimpl",
                               "errors", "__version__"}


def test_bool_and_half_scalars():
    pick = kernel('flag = "bool", x = "f16[n]"', 'y = "f16[n]"', "y = where(flag, x, -x)", name="pick")
    x = np.array([1, -2], np.float16)
    np.testing.assert_array_equal(pick(True, x), x)
    np.testing.assert_array_equal(pick(0, x), -x)
    np.testing.assert_array_equal(pick(np.bool_(False), x), -x)
    with pytest.raises(ArgumentError) as e:
        pick(2, x)
    assert message(e) == "pick(): argument 'flag' = 2 is out of range for bool (0 to 1)"
    with pytest.raises(ArgumentError) as e:
        pick(0.5, x)
    assert message(e) == "pick(): argument 'flag' must be a bool (bool), got float 0.5"
    np.testing.assert_array_equal(pick(0.5, x, cast=True), x)
    scale = kernel('s = "f16", x = "f16[n]"', 'y = "f16[n]"', "y = s * x", name="scale16")
    assert np.isinf(scale(1e10, x)[0])  # as np.float16(1e10): overflow to inf, not an error
    with pytest.raises(ArgumentError) as e:
        scale(10**400, x)
    assert message(e) == "scale16(): argument 's' = 10000000000000...00000000000000 cannot be converted to f16"
