"""`hologram.stream`: kernels over chunks of rows through a fixed pool, on every backend,
held to numpy (the contract) and to the kernel called on the whole arrays."""

from __future__ import annotations

import os

import numpy as np
import pytest

import hologram as hg
from hologram.core.errors import EmptyReductionError
from hologram.testing.contract import AccuracyError, assert_close

BACKENDS = hg.list_backends()
SMALL = 1 << 12  # bytes: chunks of a few hundred rows at most


def kernel(inputs: str, outputs: str, body: str, backend: str, **kw) -> hg.Kernel:
    doc = f'[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = {{ {inputs} }}\noutputs = {{ {outputs} }}\n' \
          f'body = """\n{body}\n"""\n'
    return hg.compile(doc, **kw).on(backend)


def sizes(backend: str) -> int:
    return 20_011 if backend == "cpu_llvm" else 1_003  # the interpreter runs one lane at a time


def memmap(path, array: np.ndarray, mode: str = "r") -> np.memmap:
    m = np.lib.format.open_memmap(str(path), "w+", array.dtype, array.shape)
    m[...] = array
    m.flush()
    del m
    return np.load(str(path), mmap_mode=mode)


def chunks(x: np.ndarray, sizes=(1, 7, 300, 0, 64)):
    out, at, k = [], 0, 0
    while at < len(x):
        step = sizes[k % len(sizes)]
        out.append(x[at:at + step])
        at, k = at + step, k + 1
    return out


# ------------------------------------------------------------------ elementwise, rows
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_elementwise_kernel_streams_itself_between_memmaps(backend, tmp_path):
    n = sizes(backend)
    rng = np.random.default_rng(1)
    x = memmap(tmp_path / "x.npy", rng.standard_normal(n).astype(np.float32))
    y = memmap(tmp_path / "y.npy", rng.standard_normal(n).astype(np.float32))
    k = kernel('a = "f32", x = "f32[n]", y = "f32[n]"', 'z = "f32[n]"', "z = a * x + sin(y)", backend)
    out = np.lib.format.open_memmap(str(tmp_path / "z.npy"), "w+", np.float32, (n,))
    assert hg.stream(k, 2.5, x, y, out=out, pool_bytes=SMALL) is out
    del out
    z = np.load(str(tmp_path / "z.npy"))
    np.testing.assert_array_equal(z, k(2.5, np.asarray(x), np.asarray(y)))  # the same program: the same bits


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_row_wise_kernel_streams_along_its_rows(backend, tmp_path):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((sizes(backend) // 8, 8)).astype(np.float32)
    g, b = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    layernorm = hg.load_bundle("stdlib").layernorm.on(backend)
    y = np.empty_like(x)
    hg.stream(layernorm, memmap(tmp_path / "x.npy", x), g, b, 1e-5, out=y, pool_bytes=SMALL)
    np.testing.assert_array_equal(y, layernorm(x, g, b, 1e-5))


@pytest.mark.parametrize("backend", BACKENDS)
def test_loop_dimensions_stream_a_bundles_kernel_through_map(backend, tmp_path):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((sizes(backend) // 10, 10)).astype(np.float32)
    softmax = hg.load_bundle("stdlib").softmax.on(backend)
    y = np.lib.format.open_memmap(str(tmp_path / "y.npy"), "w+", np.float32, x.shape)
    hg.stream(softmax, memmap(tmp_path / "x.npy", x), out=y, pool_bytes=SMALL)
    np.testing.assert_array_equal(np.asarray(y), softmax.map(x))
    # items of (a, b) loop dimensions, an argument broadcast over part of them, a shared one
    axpy = hg.load_bundle("stdlib").axpy.on(backend)
    a = rng.standard_normal((3, 1)).astype(np.float32)
    xs = rng.standard_normal((3, 5, 4)).astype(np.float32)
    ys = rng.standard_normal(4).astype(np.float32)
    z = np.empty((3, 5, 4), np.float32)
    hg.stream(axpy, a, xs, ys, out=z, pool_bytes=400)
    np.testing.assert_array_equal(z, axpy.map(a, xs, ys))


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_variables_and_sizes_as_values_are_the_whole_calls(backend):
    n = sizes(backend)
    x = np.random.default_rng(4).standard_normal(n).astype(np.float32)
    k = kernel('x = "f32[n]"', 'y = "f32[n]"', "y[i] = x[i] * f32(i) + f32(len(x))", backend)
    y = np.empty_like(x)
    hg.stream(k, x, out=y, pool_bytes=SMALL)
    np.testing.assert_array_equal(y, k(x))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(1, 0), (5, 3), (0, 4)])
def test_an_output_sized_by_another_symbol_of_the_streamed_input(backend, shape):
    """`y0 = m` into `i8[n]` streamed along `m`: the step computing it binds `n` from the
    streamed input's rows' shape (a diff-test find: it once had no value for that input)."""
    k = kernel('a0 = "bool[m, n]"', 'y0 = "i8[n]"', "y0 = m", backend)
    a = np.zeros(shape, bool)
    np.testing.assert_array_equal(hg.stream(k, a, along="m"), k(a))


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_streaming(backend, tmp_path):
    x = np.arange(sizes(backend), dtype=np.float64)
    m = memmap(tmp_path / "x.npy", x, mode="r+")
    k = kernel('x = "f64[n]"', 'y = "f64[n]"', "m = max(x)\ny = x / m", backend)
    hg.stream(k, m, out=m, pool_bytes=SMALL)  # the division's pass reads each chunk before writing it
    np.testing.assert_array_equal(np.load(str(tmp_path / "x.npy")), x / x.max())


# ------------------------------------------------------------------------ reductions
REDUCTIONS = ["sum(x)", "mean(x)", "min(x)", "max(x)", "prod(x * 0.001 + 1)", "argmin(x)", "argmax(x)",
              "max(x) + log(sum(exp(x - max(x))))", "mean((x - mean(x)) ** 2)", "any(x > 3)", "all(x > -9)",
              "sum(x * x) / len(x)"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("body", REDUCTIONS)
def test_full_reductions_carry_their_state_across_chunks(backend, body):
    n = sizes(backend)
    x = np.random.default_rng(5).standard_normal(n).astype(np.float32)
    x[n // 3] = 7.5  # the max (and argmax) in a middle chunk
    x[2 * n // 3] = -7.5
    out = "i64" if "arg" in body else "bool" if body[:3] in ("any", "all") else "f32"
    k = kernel('x = "f32[n]"', f's = "{out}"', f"s = {body}", backend)
    whole = k(x)
    for pool in (SMALL, 1 << 16, None):
        got = hg.stream(k, x, pool_bytes=pool)
        assert got.dtype == whole.dtype and got.shape == ()
        if whole.dtype.kind != "f":
            assert got == whole
        else:
            assert_close(got, whole, ulps=8, reduction_n=n, magnitude=np.abs(x).astype(np.float64).sum(),
                         name=body)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_row_output_that_a_reduction_reads_streams(backend, tmp_path):
    """`t` is an output and the sum's argument: the first pass computes it as a
    temporary, the last writes it. Planning this raised KeyError('t') (the first pass
    declared `t` an output it did not write). In place too: the last pass writes `t`."""
    n = sizes(backend)
    x = np.arange(1, n + 1, dtype=np.float32) / n
    k = kernel('x = "f32[n]"', 't = "f32[n]", z = "f32[n]"', "t = x * 2\nz = x / sum(t)", backend)
    want = k(x)
    t, z = np.empty_like(x), np.empty_like(x)
    hg.stream(k, x, out=(t, z), pool_bytes=SMALL)
    np.testing.assert_array_equal(t, want.t)
    assert_close(z, want.z, ulps=8, reduction_n=n)
    m = memmap(tmp_path / "x.npy", x, mode="r+")
    hg.stream(k, m, out=(m, z), pool_bytes=SMALL)
    np.testing.assert_array_equal(np.load(str(tmp_path / "x.npy")), want.t)
    assert_close(z, want.z, ulps=8, reduction_n=n)


def test_a_plan_reads_as_text_and_its_repr_is_one_line():
    """`plan_for(k)` at the prompt: a short repr, and str() the steps in order, each
    with its statements, what feeds it and what it gives."""
    from hologram.streaming.stream import plan_for

    k = kernel('x = "f32[n]"', 'y = "f32[n]"', "m = max(x)\ne = exp(x - m)\ny = e / sum(e)", "interp")
    p = plan_for(k)
    assert repr(p) == "<Plan along n: 2 passes, 2 steps; streams x; writes y a chunk at a time>"
    assert repr(p.steps[0]) == "<Step pass 1 (k_pass1): 2 statements>"
    text = str(p)
    lines = text.splitlines()
    assert lines[0] == "k streamed along n: 2 passes over x; y written a chunk at a time"
    assert lines[1] == "pass 1, per chunk of rows:"
    assert "  reduces across chunks: m, y_sum (online max-and-sum)" in lines
    assert any(line.startswith("pass 2, per chunk of rows, writing y:") for line in lines)
    assert any(line.startswith("    y[i0] = ") for line in lines), text
    assert len(text) < 1000 and "KernelIR(" not in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_softmax_reads_its_input_twice(backend, tmp_path):
    from hologram.streaming.stream import plan_for

    n = sizes(backend)
    x = np.random.default_rng(6).standard_normal(n).astype(np.float32) * 30
    k = kernel('x = "f32[n]"', 'y = "f32[n]"', "m = max(x)\ne = exp(x - m)\ny = e / sum(e)", backend)
    assert plan_for(k).passes == 2
    y = np.empty_like(x)
    hg.stream(k, memmap(tmp_path / "x.npy", x), out=y, pool_bytes=SMALL)
    assert_close(y, k(x), ulps=16, reduction_n=n)
    e = np.exp(x.astype(np.float64) - x.max())
    np.testing.assert_allclose(y, e / e.sum(), rtol=1e-5, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_column_reductions_and_a_2d_argmax(backend):
    x = np.random.default_rng(7).standard_normal((sizes(backend) // 5, 5)).astype(np.float32)
    k = kernel('x = "f32[m, n]"', 'c = "f32[n]", a = "i64", s = "f32[m]"',
               "c = mean(x, axis=0)\na = argmax(x)\ns = sum(x, axis=1)", backend)
    s = np.empty(len(x), np.float32)
    got = hg.stream(k, x, out=(None, None, s), pool_bytes=SMALL)
    whole = k(x)
    assert got.a == whole.a == np.argmax(x) and got.s is s
    np.testing.assert_array_equal(s, whole.s)
    assert_close(got.c, whole.c, ulps=4, reduction_n=len(x), magnitude=np.abs(x).sum(axis=0))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("body", ["y = cumsum(x)", "y = x + cumprod(x * 0.5 + 0.75)", "y = cumsum(cumsum(x))",
                                  "c = cumsum(x)\ny = c / max(c)", "y = cumsum(x - mean(x))"])
def test_a_scan_along_the_rows_carries_into_each_chunk(backend, body):
    """Each chunk's scan continues from every row before it (its carry), in the pass that
    needs it: one read for a scan, two where it feeds a reduction read back or reads one."""
    x = np.random.default_rng(8).uniform(0.5, 1.5, sizes(backend)).astype(np.float32)
    k = kernel('x = "f32[n]"', 'y = "f32[n]"', body, backend)
    y = np.empty_like(x)
    hg.stream(k, x, out=y, pool_bytes=SMALL)
    whole = k(x)
    assert_close(y, whole, ulps=8, reduction_n=len(x), magnitude=np.abs(whole).max())
    assert "carries across chunks" in str(hg.streaming.stream.plan_for(k))


@pytest.mark.parametrize("backend", BACKENDS)
def test_scatter_adds_sum_their_bins_across_chunks(backend):
    n = sizes(backend)
    data = np.random.default_rng(8).integers(0, 256, n).astype(np.uint8)
    hist = hg.load_bundle("stdlib").class_histogram.on(backend)
    got, whole = hg.stream(hist, data, pool_bytes=256), hist(data)
    np.testing.assert_array_equal(got.hist, whole.hist)
    np.testing.assert_array_equal(got.mirrored, whole.mirrored)
    w = np.random.default_rng(9).random(n).astype(np.float32)
    k = kernel('b = "u8[n]", w = "f32[n]"', 'h = "f32[256]"', "h[b[i]] += w[i]", backend)
    assert_close(hg.stream(k, data, w, pool_bytes=SMALL), k(data, w), ulps=4, reduction_n=n,
                 magnitude=np.bincount(data, w, 256).astype(np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_and_infinities_come_out_as_in_memory(backend):
    k = kernel('x = "f32[n]"', 'y = "f32[n]", i = "i64"', "m = max(x)\ny = exp(x - m) / sum(exp(x - m))\n"
                                                         "i = argmax(x)", backend)
    cases = [np.array([1, 2, np.nan, 3, np.nan, 0], np.float32), np.array([-np.inf] * 5 + [1.0], np.float32),
             np.array([1.0, -np.inf, np.inf, 2.0, np.inf], np.float32), np.full(6, -np.inf, np.float32)]
    for x in cases:
        y = np.empty_like(x)
        got = hg.stream(k, x, out=(y, None), pool_bytes=400)  # a chunk of one or two rows
        whole = k(x)
        np.testing.assert_array_equal(y, whole.y)
        assert got.i == whole.i == np.argmax(x)


# ------------------------------------------------------------------------ accuracy
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_f32_sum_of_many_chunks_is_within_the_contract_where_f32_combination_is_not(backend):
    n = 4_001 if backend == "cpu_llvm" else 1_001
    x = np.ones(n, np.float32)
    x[0] = 2.0 ** 25  # above 2**24 every later 1 is lost to an f32 running sum
    k = kernel('x = "f32[n]"', 's = "f32"', "s = sum(x)", backend)
    got = hg.stream(k, x, pool_bytes=smallest_pool(k, x))  # one row per chunk
    exact = np.float32(2.0 ** 25 + n - 1)
    magnitude = np.abs(x).astype(np.float64).sum()
    assert_close(got, exact, reduction_n=n, magnitude=magnitude)
    naive = np.float32(0)
    for v in x:  # the chunks' sums added in f32, in order
        naive = np.float32(naive + v)
    with pytest.raises(AccuracyError):
        assert_close(naive, exact, reduction_n=n, magnitude=magnitude)


def smallest_pool(k: hg.Kernel, *args) -> int:
    """The pool_bytes of one-row chunks: the least `stream` accepts (its error's hint)."""
    from hologram.core.errors import ArgumentError

    with pytest.raises(ArgumentError) as info:
        hg.stream(k, *args, pool_bytes=1)
    return int(info.value.hint.rsplit(" ", 1)[1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_f16_sum_and_mean_of_many_chunks_keep_the_contract(backend):
    n = 6_000  # a sum past 2048
    x = np.random.default_rng(10).random(n).astype(np.float16)
    exact64 = x.astype(np.float64).sum()
    k = kernel('x = "f16[n]"', 's = "f16", m = "f16"', "s = sum(x)\nm = mean(x)", backend)
    for pool in (smallest_pool(k, x), 1000, 1 << 20):
        got = hg.stream(k, x, pool_bytes=pool)
        assert_close(got.s, np.float16(exact64), reduction_n=n, magnitude=exact64)
        assert_close(got.m, np.float16(exact64 / n), ulps=2, reduction_n=n, magnitude=exact64 / n)
    naive = np.float16(0)
    for v in x:  # one-row chunks' sums added in f16: the running sum stalls past 2048
        naive = np.float16(naive + v)
    with pytest.raises(AccuracyError):
        assert_close(naive, np.float16(exact64), reduction_n=n, magnitude=exact64)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_same_pool_gives_the_same_bits(backend):
    n = sizes(backend)
    x = (np.random.default_rng(11).standard_normal(n) * 1000).astype(np.float32)
    k = kernel('x = "f32[n]"', 's = "f32", l = "f32"', "s = sum(x)\nl = max(x) + log(sum(exp(x - max(x))))",
               backend)
    first = hg.stream(k, x, pool_bytes=SMALL)
    for form in (x, chunks(x), iter(chunks(x, (5, 1000)))):  # an iterable is re-cut to the pool's chunks
        again = hg.stream(k, form, pool_bytes=SMALL)
        assert again.s.tobytes() == first.s.tobytes() and again.l.tobytes() == first.l.tobytes()


# ------------------------------------------------------------------------- iterables
@pytest.mark.parametrize("backend", BACKENDS)
def test_iterables_of_chunks(backend):
    n = sizes(backend)
    x = np.random.default_rng(12).standard_normal(n).astype(np.float32)
    sm = kernel('x = "f32[n]"', 'y = "f32[n]"', "m = max(x)\ny = exp(x - m) / sum(exp(x - m))", backend)
    y = np.empty_like(x)
    hg.stream(sm, chunks(x), out=y, pool_bytes=SMALL)  # a list: read once per pass
    assert_close(y, sm(x), ulps=16, reduction_n=n)
    total = kernel('x = "f32[n]"', 's = "f64"', "s = sum(f64(x))", backend)
    gen = (x[i:i + 999] for i in range(0, n, 999))  # a generator: one pass is all it gives
    assert_close(hg.stream(total, gen, pool_bytes=SMALL), total(x), reduction_n=n, magnitude=np.abs(x).sum())
    ints = [list(map(int, c)) for c in np.array_split(np.arange(50), 4)]  # lists converted by cast=True
    assert hg.stream(total, ints, cast=True, pool_bytes=SMALL) == 1225


# --------------------------------------------------------------------------- edges
@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_inputs(backend):
    x = np.zeros(0, np.float32)
    k = kernel('x = "f32[n]"', 's = "f32", m = "f32"', "s = sum(x)\nm = mean(x)", backend)
    got = hg.stream(k, x)
    assert got.s == 0 and np.isnan(got.m)
    with pytest.raises(EmptyReductionError):
        hg.stream(kernel('x = "f32[n]"', 's = "f32"', "s = max(x)", backend), x)
    with pytest.raises(EmptyReductionError):
        hg.stream(kernel('x = "f32[n]"', 's = "f32"', "s = max(x)", backend), [x[:0]])
    y = np.empty(0, np.float32)
    assert hg.stream(kernel('x = "f32[n]"', 'y = "f32[n]"', "y = x + 1", backend), x, out=y) is y


def test_a_memmap_whose_file_is_gone_is_read_through_a_descriptor_of_it(tmp_path, monkeypatch):
    """A deleted file is read with pread through a descriptor the process holds on it
    (the mmap's own); where none can be had, through the mapping."""
    from hologram.streaming import io as stream_io

    x = np.random.default_rng(13).standard_normal(5000).astype(np.float32)
    m = memmap(tmp_path / "x.npy", x)
    os.unlink(tmp_path / "x.npy")  # the name no longer reaches the mapped file
    k = kernel('x = "f32[n]"', 's = "f64"', "s = sum(f64(x))", BACKENDS[0])
    source = stream_io.source_for("k", "x", m)
    source.close()
    assert isinstance(source, stream_io.FileSource if os.path.exists("/proc/self/fd") else stream_io.MappedSource)
    assert_close(hg.stream(k, m, pool_bytes=SMALL), k(x), reduction_n=len(x), magnitude=np.abs(x).sum())
    monkeypatch.setattr(stream_io, "open_file", lambda *args: None)
    assert isinstance(stream_io.source_for("k", "x", m), stream_io.MappedSource)
    assert_close(hg.stream(k, m, pool_bytes=SMALL), k(x), reduction_n=len(x), magnitude=np.abs(x).sum())


def test_an_error_in_a_chunk_stops_the_threads_and_is_raised(tmp_path):
    import threading

    from hologram.core.errors import ExecutionError

    gather = kernel('x = "f32[n]", idx = "i64[n]", t = "f32[k]"', 'y = "f32[n]"', "y[i] = x[i] + t[idx[i]]",
                    BACKENDS[0])
    x = np.ones(3000, np.float32)
    idx = np.zeros(3000, np.int64)
    idx[2500] = 99
    before = threading.active_count()
    with pytest.raises(ExecutionError):
        hg.stream(gather, x, idx, np.ones(4, np.float32), out=np.empty(3000, np.float32), pool_bytes=SMALL)
    assert threading.active_count() == before
