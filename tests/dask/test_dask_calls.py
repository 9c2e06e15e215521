"""Kernels called with Dask arrays (hologram.dask, docs/dask.md): lazy results, the
arguments checked as a numpy call checks them, the split each kind of kernel gets, and
every answer held to the kernel's numpy call, for random chunkings."""

from __future__ import annotations

import pickle
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
from dask.array.core import PerformanceWarning
from hypothesis import given, settings, strategies as st

import hologram as hg
from dask_helpers import held, stdlib_calls
from hologram.core.errors import ArgumentError
from hologram.testing import check_case
from hologram.testing.contract import assert_close
from hologram.testing.dask_cases import chunked
from hologram.testing.exprgen import GenConfig
from hologram.testing.generated import kernels

BACKENDS = [b for b in hg.list_backends() if b in ("interp", "cpu_llvm")]
STDLIB = hg.load_bundle("stdlib")


def kernel(inputs: str, outputs: str, body: str, backend: str = "cpu_llvm") -> hg.Kernel:
    doc = f'[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = {{ {inputs} }}\noutputs = {{ {outputs} }}\n' \
          f'body = """\n{body}\n"""\n'
    return hg.compile(doc).on(backend)


def computed(result):
    return dask.compute(*(result if isinstance(result, tuple) else (result,)), scheduler="threads")


# ------------------------------------------------------------------ the standard library
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(STDLIB))
@settings(max_examples=8)
@given(data=st.data())
def test_every_stdlib_kernel_gives_its_numpy_answer_for_random_chunkings(backend, name, data):
    numpy_args, dask_args = data.draw(stdlib_calls(name, 120 if backend == "cpu_llvm" else 40))
    k = STDLIB[name].on(backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)  # every stdlib kernel splits along every axis
        lazy = k(*dask_args)
    want = k(*numpy_args)
    for got, w in zip(computed(lazy), want if isinstance(want, tuple) else (want,)):
        held(name, got, w, numpy_args)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=40)
@given(case=chunked(kernels(GenConfig())))
def test_generated_kernels_called_with_dask_arrays_meet_the_contract(backend, case):
    check_case(case, backend)


# ------------------------------------------------------------------ laziness, graphs
def test_nothing_is_computed_until_asked_and_a_multi_stage_kernel_is_one_graph():
    calls = []

    def block(b):
        calls.append(1)
        return b

    x = da.from_array(np.arange(1000, dtype=np.float32) / 100, chunks=100).map_blocks(block, meta=np.array((), np.float32))
    y = STDLIB.softmax(x)
    assert isinstance(y, da.Array) and y.chunks == x.chunks and y.dtype == np.float32
    assert calls == []  # building the graph ran nothing
    np.testing.assert_allclose(y.compute(), STDLIB.softmax(np.arange(1000, dtype=np.float32) / 100), rtol=1e-6)
    # one graph: each input block is made once, for both passes (the online max-and-sum,
    # then the division), never brought to the client in between
    assert len(calls) == 10


def test_a_given_chunking_gives_the_same_bits_every_time():
    x = da.from_array(np.random.default_rng(1).standard_normal(100_003).astype(np.float32), chunks=997)
    first = STDLIB.sum(x).compute(scheduler="threads")
    for _ in range(3):
        assert STDLIB.sum(x).compute(scheduler="threads").tobytes() == first.tobytes()


def test_tokens_name_what_is_computed():
    x = da.ones(1000, chunks=100, dtype=np.float32)
    a, b = STDLIB.axpy(np.float32(2), x, x), STDLIB.axpy(np.float32(2), x, x)
    assert a.name == b.name  # the same kernel on the same arrays: Dask shares the work
    assert STDLIB.axpy(np.float32(3), x, x).name != a.name
    assert STDLIB.axpy.on("interp")(np.float32(2), x, x).name != a.name
    copy = pickle.loads(pickle.dumps(STDLIB.axpy))
    assert dask.base.tokenize(copy) == dask.base.tokenize(STDLIB.axpy)


def test_several_outputs_are_a_namedtuple_of_dask_arrays():
    k = kernel('x = "f32[n]"', 'y = "f32[n]", s = "f32"', "y = x * 2\ns = sum(x)")
    x = np.arange(10, dtype=np.float32)
    out = k(da.from_array(x, chunks=3))
    assert type(out).__name__ == "k" and isinstance(out.y, da.Array) and out.s.shape == ()
    y, s = computed(out)
    np.testing.assert_array_equal(y, x * 2)
    assert s == 45


def test_many_chunks_reduce_as_a_tree_and_empty_chunks_are_nothing():
    x = np.random.default_rng(2).standard_normal(1000).astype(np.float32)
    chunks = (0, 1, 0, *([9] * 111))
    got = STDLIB.max(da.from_array(x, chunks=(chunks,))).compute()
    assert got == x.max()
    assert STDLIB.argmax(da.from_array(x, chunks=(chunks,))).compute() == np.argmax(x)


# ------------------------------------------------------------------ the split, by kind
def test_a_reduction_along_rows_and_a_contraction_split_their_reduced_axis():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((60, 50)).astype(np.float32), rng.standard_normal((50, 40)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)  # nothing is read whole
        c = STDLIB.gemm(np.float32(1), da.from_array(a, chunks=(20, 7)), da.from_array(b, chunks=(7, 15)))
        rows = kernel('x = "f32[m, n]"', 'y = "f32[m]"', "y = sum(x, axis=1)")(da.from_array(a, chunks=(7, 9)))
    assert c.chunks == ((20, 20, 20), (15, 15, 10))
    assert_close(c.compute(), a @ b, ulps=2, reduction_n=50, magnitude=np.abs(a) @ np.abs(b))
    assert_close(rows.compute(), a.sum(axis=1), ulps=2, reduction_n=50, magnitude=np.abs(a).sum(axis=1))


@pytest.mark.parametrize("body, dims", [("y = cumsum(x)", 1), ("y = x + cumsum(cumsum(x))", 1),
                                        ("y = cumsum(x, axis=0)", 2), ("y = cumprod(x * 0.1 + 0.95, axis=1)", 2)])
def test_scans_carry_across_chunks(body, dims):
    """A scan along a split axis: each chunk's scan plus the carry of the chunks before
    it (their totals computed for all chunks at once, the carries chained)."""
    shape = (997,) if dims == 1 else (53, 41)
    inputs = 'x = "f32[n]"' if dims == 1 else 'x = "f32[m, n]"'
    k = kernel(inputs, 'y = "f32[n]"' if dims == 1 else 'y = "f32[m, n]"', body)
    x = np.random.default_rng(4).uniform(0.5, 1.5, shape).astype(np.float32)
    chunks = ((0, 300, 1, 0, 696),) if dims == 1 else (7, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)
        y = k(da.from_array(x, chunks=chunks))
    whole = k(x)
    assert_close(y.compute(scheduler="threads"), whole, ulps=8, reduction_n=max(shape), magnitude=np.abs(whole).max())


@pytest.mark.parametrize("chunks", [(100,), (3,), ((1, 0, 2, 997),), ((996, 1, 1, 1, 1),)])
def test_windows_read_a_halo_around_each_block(chunks):
    """A stencil or a convolution along a split axis: each block widened by the rows its
    outputs read (the offsets' range at the call's sizes), its own rows kept."""
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal(1000).astype(np.float32), rng.standard_normal(7).astype(np.float32)
    conv = kernel('x = "f32[n]", w = "f32[k]"', 'y = "f32[n - k + 1]"', "y[i] = sum(x[i + d] * w[d], d)")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)
        y = conv(da.from_array(x, chunks=chunks), w)
        s = STDLIB.stencil3(da.from_array(x, chunks=chunks))
    assert sum(y.chunks[0]) == 994 and len(y.chunks[0]) == len(da.from_array(x, chunks=chunks).chunks[0])
    np.testing.assert_array_equal(y.compute(), conv(x, w))  # the same program on the same rows: the same bits
    np.testing.assert_array_equal(s.compute(), STDLIB.stencil3(x))


def test_a_2d_stencil_widens_its_blocks_along_both_axes():
    a = np.random.default_rng(6).standard_normal((60, 70)).astype(np.float32)
    laplace = kernel('x = "f32[m, n]"', 'y = "f32[m - 2, n - 2]"',
                     "y[i, j] = x[i + 1, j + 1] * 4 - x[i, j + 1] - x[i + 2, j + 1] - x[i + 1, j] - x[i + 1, j + 2]")
    for chunks in [(7, 9), (1, 70), ((30, 0, 30), (69, 1))]:
        np.testing.assert_array_equal(laplace(da.from_array(a, chunks=chunks)).compute(), laplace(a))


def test_an_axis_a_kernel_needs_whole_is_joined_with_a_warning_naming_the_statement():
    k = kernel('x = "f32[n]"', 'y = "f32[n]"', "y = x[::-1] * 2")
    x = np.arange(100, dtype=np.float32)
    with pytest.warns(PerformanceWarning, match=r"k: n is read whole: `y = x\[::-1\] \* 2` \(<string>:7:1\) reads "
                                                r"across n, .*that axis is joined into one chunk"):
        y = k(da.from_array(x, chunks=10))
    assert y.chunks == ((100,),)
    np.testing.assert_array_equal(y.compute(), x[::-1] * 2)


# ------------------------------------------------------------------ arguments
def test_arguments_are_checked_as_a_numpy_call_checks_them():
    x = da.ones(10, chunks=5, dtype=np.float64)
    with pytest.raises(ArgumentError, match=r"argument 'x' must have dtype f32 \(float32\), got float64"):
        STDLIB.relu(x)
    np.testing.assert_array_equal(STDLIB.relu(x, cast=True).compute(), np.ones(10, np.float32))
    with pytest.raises(ArgumentError, match="must have rank 1"):
        STDLIB.relu(da.ones((2, 2), dtype=np.float32))
    with pytest.raises(ArgumentError, match="shape mismatch for symbol 'n'"):
        STDLIB.vadd(da.ones(3, dtype=np.float32), da.ones(4, dtype=np.float32))
    with pytest.raises(ArgumentError, match="unexpected argument 'z'"):
        STDLIB.relu(z=x)


def test_out_is_refused_with_a_hint():
    x = da.ones(10, chunks=5, dtype=np.float32)
    for out in (da.zeros(10, dtype=np.float32), np.zeros(10, np.float32)):
        with pytest.raises(ArgumentError, match=r"(?s)out= cannot be given .*hint: .*da.store"):
            STDLIB.relu(x, out=out)
    with pytest.raises(ArgumentError, match="out= cannot be given"):
        STDLIB.relu(np.ones(10, np.float32), out=da.zeros(10, dtype=np.float32))


def test_scalars_may_be_numbers_numpy_scalars_or_0d_dask_arrays():
    x = np.arange(10, dtype=np.float32)
    dx = da.from_array(x, chunks=4)
    for alpha in (2, 2.0, np.float32(2), da.from_array(np.float32(2))):
        np.testing.assert_array_equal(STDLIB.axpy(alpha, dx, dx).compute(), 3 * x)
    with pytest.raises(ArgumentError, match=r"argument 'alpha' must be a number \(f32\), got a Dask array"):
        STDLIB.axpy(dx, dx, dx)


def test_other_dask_collections_are_refused_with_a_hint():
    bag = dask.delayed(np.ones)(3)
    with pytest.raises(ArgumentError, match="argument 'x' is a Delayed; a kernel takes Dask arrays"):
        STDLIB.relu(bag)


def test_map_splits_the_loop_dimensions_as_they_are_chunked():
    """`kernel.map` over Dask arrays: loop dimensions broadcast as numpy's (one of size 1,
    one missing), split as chunked, and so are the kernel's blockwise symbols; a core
    axis the kernel reads whole is joined, warned."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((40, 7, 30)).astype(np.float32)
    a, w = rng.standard_normal((40, 1, 30)).astype(np.float32), rng.standard_normal(30).astype(np.float32)
    y = STDLIB.softmax.map(da.from_array(x, chunks=(9, 3, 30)))
    assert y.chunks == ((9, 9, 9, 9, 4), (3, 3, 1), (30,))
    np.testing.assert_array_equal(y.compute(), STDLIB.softmax.map(x))
    z = STDLIB.vadd.map(da.from_array(x, chunks=(9, 3, 10)), da.from_array(a, chunks=(9, 1, 30)))
    np.testing.assert_array_equal(z.compute(), STDLIB.vadd.map(x, a))
    np.testing.assert_array_equal(STDLIB.vadd.map(da.from_array(x, chunks=5), w).compute(), STDLIB.vadd.map(x, w))
    with pytest.warns(PerformanceWarning, match="sum: n is read whole: a call through map"):
        total = STDLIB.sum.map(da.from_array(x, chunks=(9, 3, 10)))
    assert total.chunks == ((9, 9, 9, 9, 4), (3, 3, 1))
    np.testing.assert_array_equal(total.compute(), STDLIB.sum.map(x))
    k = kernel('x = "f32[n]"', 'y = "f32[n]", s = "f32"', "y = x * 2\ns = sum(x)")
    both = k.map(da.from_array(x, chunks=(9, 3, 30)))
    np.testing.assert_array_equal(both.y.compute(), x * 2)
    np.testing.assert_array_equal(both.s.compute(), k.map(x).s)
    with pytest.raises(ArgumentError, match=r"loop dimensions of the arguments do not broadcast"):
        STDLIB.vadd.map(da.from_array(x), da.from_array(x[:3]))
