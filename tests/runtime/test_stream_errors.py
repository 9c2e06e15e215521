"""What `hologram.stream` refuses, and how it says so: a kernel it cannot stream names the
statement (and the document line of the access), a bad argument names the argument."""

from __future__ import annotations

import numpy as np
import pytest

import hologram as hg
from hologram.core.errors import ArgumentError, StreamError


def kernel(inputs: str, outputs: str, body: str) -> hg.Kernel:
    doc = f'[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = {{ {inputs} }}\noutputs = {{ {outputs} }}\n' \
          f'body = """\n{body}\n"""\n'
    return hg.compile(doc, file="k.toml").on("interp")


X = np.arange(10, dtype=np.float32)


@pytest.mark.parametrize("inputs, outputs, body, message, line", [
    ('x = "f32[n]"', 'y = "f32[n]"', "y[i] = x[i] + x[(i + 1) % n]",
     "reads x[(i + 1) % n], another row of 'x' than the one being computed (x[i, ...])", 7),
    ('x = "f32[n]"', 'y = "f32[n - 2]"', "y[i] = x[i] + x[i + 2]", "output 'y' has shape [n - 2]", None),
    ('x = "f32[n]", b = "i64[n]"', 'h = "f32[n]"', "h[b[i]] += x[i]", "scatters into 'h', a streamed array", 7),
    ('x = "f32[n]"', 'y = "f32"', "y = x[0]", "reads x[0] outside a pass over the rows of 'x'", 7),
    ('a = "f32[n, n]"', 'y = "f32"', "y = sum(a)", "input 'a' has shape [n, n]", None),
    ('x = "f32[n]"', 'y = "f32[n]"', "y[i] = sum(x[j] * (j < i), j)", "whose value depends on the row (i)", 7),
])
def test_what_stops_a_kernel_is_named(inputs, outputs, body, message, line):
    k = kernel(inputs, outputs, body)
    args = [np.zeros((10, 10), np.float32)] if "n, n" in inputs else [X, np.zeros(10, np.int64)][:inputs.count("=")]
    with pytest.raises(StreamError) as info:
        hg.stream(k, *args, out=np.empty(10, np.float32))
    text = str(info.value)
    assert text.startswith("k.toml" if line else "stream(k)") and message in text, text
    if line:
        assert info.value.span.line == line and info.value.span.file == "k.toml"


@pytest.mark.parametrize("inputs, outputs, body, message, col", [
    ('x = "f32[n]"', 's = "f32"', "s = (x[1:] - x[:-1]) @ (x[1:] - x[:-1])",
     "`x[1:] - x[:-1]` has shape [max(n - 1, 0)]", 6),
    ('a = "f32[n, k]"', 'y = "f32[k, k]"', "y = (a * 2).T @ (a * 2)", "`(a * 2).T` has shape [k, n]", 5),
    ('x = "f32[n]"', 'y = "f32[n]"', "y = x + (x * 2)[::-1]", "`y = x + (x * 2)[::-1]` reads", 1),
    ('x = "f32[n]"', 's = "f32"', "s = sum(x) + (x * 2)[0]", "`s = sum(x) + (x * 2)[0]` reads", 1),
])
def test_a_statement_is_named_as_the_document_writes_it(inputs, outputs, body, message, col):
    """Never by a compiler temporary (`matmul_arg0`, `cumsum0`, a hoisted `s_sum`) or
    the IR's text: the document's own words, at their line and column."""
    k = kernel(inputs, outputs, body)
    args = [np.ones((10, 3), np.float32)] if "n, k" in inputs else [X]
    with pytest.raises(StreamError) as info:
        hg.stream(k, *args, out=np.empty(10, np.float32) if outputs.endswith('[n]"') else None)
    text = str(info.value)
    assert message in text and not any(w in text for w in ("matmul_arg", "cumsum0", "s_sum", ":f32")), text
    assert (info.value.span.line, info.value.span.col) == (7, col), text


def test_out_is_required_for_outputs_with_a_row_per_row():
    k = kernel('x = "f32[n]"', 'y = "f32[n]", s = "f32"', "y = x * 2\ns = sum(x)")
    with pytest.raises(ArgumentError, match="output 'y' .* has a row per row of the input: pass out="):
        hg.stream(k, X)
    with pytest.raises(ArgumentError, match=r"out 'y' must be a writeable C-contiguous array of f32 .* and shape "
                                            r"\(10,\), got float32 \(9,\)"):
        hg.stream(k, X, out=(np.empty(9, np.float32), None))
    with pytest.raises(ArgumentError, match="out= must hold 2 arrays or None"):
        hg.stream(k, X, out=np.empty(10, np.float32))
    y = np.empty(10, np.float32)
    with pytest.raises(ArgumentError, match="share memory"):
        hg.stream(k, X, out=(y, y[:1].reshape(())))
    with pytest.raises(ArgumentError, match="every output has a row per item streamed: pass out="):
        hg.stream(k, np.zeros((3, 4), np.float32))


def test_a_shifted_overlap_of_an_output_and_an_input_is_refused():
    k = kernel('x = "f32[n]"', 'y = "f32[n]"', "y = x * 2")
    buf = np.zeros(11, np.float32)
    with pytest.raises(StreamError, match="out 'y' overlaps input 'x' without being it"):
        hg.stream(k, buf[1:], out=buf[:-1])
    hg.stream(k, buf[1:], out=buf[1:])  # in place is fine


def test_bad_arguments():
    k = kernel('x = "f32[n]", s = "f32"', 'y = "f32[n]"', "y = x * s")
    y = np.empty(10, np.float32)
    with pytest.raises(ArgumentError, match="expects a Kernel"):
        hg.stream("k", X)
    with pytest.raises(ArgumentError, match="pool_bytes must be a positive integer"):
        hg.stream(k, X, 1.0, out=y, pool_bytes=0)
    with pytest.raises(ArgumentError, match="(?s)cannot hold one row .* hint: pass pool_bytes of at least"):
        hg.stream(k, X, 1.0, out=y, pool_bytes=8)
    with pytest.raises(ArgumentError, match="streamed argument 'x' must be a C-contiguous array of f32.*float64"):
        hg.stream(k, X.astype(np.float64), 1.0, out=y)
    with pytest.raises(ArgumentError, match=r"x\[i:i \+ k\]\.astype\(np\.float32\)"):
        hg.stream(k, X.astype(np.float64), 1.0, out=y, cast=True)
    with pytest.raises(ArgumentError, match="chunk 1 of argument 'x' must have dtype f32"):
        hg.stream(k, [X[:5], X[5:].astype(np.float64)], 1.0, out=y)
    with pytest.raises(ArgumentError, match="chunk 0 of argument 'x' must be a numpy array of rows, got float"):
        hg.stream(k, [1.0, 2.0], 1.0, out=y)
    with pytest.raises(ArgumentError, match="is an iterable with no chunks"):
        hg.stream(k, [], 1.0, out=y)
    with pytest.raises(ArgumentError, match="along='m' is not a shape symbol of the kernel"):
        hg.stream(k, X, 1.0, out=y, along="m")
    with pytest.raises(ArgumentError, match="missing input 's'"):
        hg.stream(k, X, out=y)


def test_cast_chunks_to_integers_refuse_what_the_dtype_cannot_hold():
    """Chunks convert as a call's arguments do (docs/api.md, cast=True): a NaN for an
    integer input is an error naming the chunk and the element, not INT_MIN."""
    k = kernel('x = "i32[n]"', 's = "i64"', "s = sum(i64(x))")
    assert hg.stream(k, [np.array([1.5, 2.5]), [3, 4.9]], cast=True) == 10
    with pytest.raises(ArgumentError) as info:
        hg.stream(k, [np.array([1.5, 2.5]), np.array([3.0, np.nan])], cast=True)
    assert info.value.message == "stream(k): chunk 1 of argument 'x': x[1] = nan cannot be converted to i32"
    with pytest.raises(ArgumentError, match="chunk 0 of argument 'x' cannot be converted to i32: got values of dtype <U1"):
        hg.stream(k, [np.array(["1"])], cast=True)


def test_a_pool_too_small_is_refused_naming_the_pool_every_pass_needs():
    """softmax's first pass streams x alone (2 buffers), its second x and y (3 of each):
    the hint is the second's least pool, and the error comes before any pass runs."""
    k = kernel('x = "f32[n]"', 'y = "f32[n]"', "y = exp(x - max(x)) / sum(exp(x - max(x)))")
    first_pass = hg.stream(kernel('x = "f32[n]"', 's = "f32"', "s = max(x)"), X, pool_bytes=140)
    assert first_pass == X.max()  # 140 bytes run a pass over x alone
    y = np.full(10, 7, np.float32)
    with pytest.raises(ArgumentError, match="cannot hold one row") as info:
        hg.stream(k, X, out=y, pool_bytes=8)
    assert (y == 7).all()
    least = int(info.value.hint.rsplit(" ", 1)[1])
    assert least > 140
    hg.stream(k, X, out=y, pool_bytes=least)
    np.testing.assert_allclose(y, np.exp(X - X.max()) / np.exp(X - X.max()).sum(), rtol=1e-6)


def test_iterables_that_disagree_or_end_early():
    k = kernel('x = "f32[n]", z = "f32[n]"', 'y = "f32[n]"', "y = x + z")
    with pytest.raises(ArgumentError, match="different numbers of rows"):
        hg.stream(k, [X[:4], X[4:]], [X[:4], X[4:9]], out=np.empty(10, np.float32))
    with pytest.raises(ArgumentError, match="'z' has more rows than the other inputs"):
        hg.stream(k, X, [X, X[:1]], out=np.empty(10, np.float32))
    with pytest.raises(ArgumentError, match="the inputs had 10 rows, but out 'y' has 12"):
        hg.stream(k, [X], [X], out=np.empty(12, np.float32))
    softmax = kernel('x = "f32[n]"', 'y = "f32[n]"', "y = exp(x - max(x)) / sum(exp(x - max(x)))")
    with pytest.raises(ArgumentError, match="is an iterator, which can be read once, and this kernel reads its "
                                            "input more than once"):
        hg.stream(softmax, iter([X]), out=np.empty(10, np.float32))
    uses_size = kernel('x = "f32[n]"', 'y = "f32[n]"', "y = x / len(x)")
    with pytest.raises(StreamError, match="uses the size n as a value before reading its input"):
        hg.stream(uses_size, [X], out=np.empty(10, np.float32))
    with pytest.raises(ArgumentError, match="argument 'x' .* has no row per element of m"):
        hg.stream(kernel('a = "f32[m]", x = "f32[n]"', 'y = "f32[m]"', "y = a * sum(x)"), X, [X],
                  out=np.empty(10, np.float32))


def test_a_kernel_without_its_ir_streams_over_loop_dimensions_only(tmp_path):
    import pickle

    from hologram.compiler.driver import Compiled

    std = hg.load_bundle("stdlib").on("interp")
    c = std.sum._c
    bare = hg.Kernel(Compiled.stored(c.program, c.signature, c.version, c.summary, c.pipeline_name, c.reductions),
                     "interp")
    with pytest.raises(StreamError, match="reads the kernel's IR, and this kernel does not carry one") as info:
        hg.stream(bare, X)
    assert "loop dimensions" in info.value.hint
    out = np.empty(3, np.float32)
    hg.stream(bare, np.ones((3, 4), np.float32), out=out)
    assert out.tolist() == [4, 4, 4]
    assert pickle.loads(pickle.dumps(std.sum)) is not None
