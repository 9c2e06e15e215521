"""Long reductions into few outputs, split into slices (hologram/lower/split.py): which
statements split, the program they become, and their values on both backends against
numpy at the lengths around a slice (none, one short of one, exactly one, slices and a
tail), for every kind and the dtypes whose accumulation differs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import hologram as hg
from hologram.lower.split import SLICE
from hologram.registry.lookups import get_backend
from hologram.testing.contract import assert_close

BACKENDS = ("interp", "cpu_llvm")


def source(body: str, x: str = "f32[n, m]", out: str = "f32[m]", extra: str = "") -> str:
    return f'''[kernel]
name = "k"
version = "1.0.0"
inputs  = {{ x = "{x}"{extra} }}
outputs = {{ y = "{out}" }}
body = "{body}"
'''


def temps(text: str) -> dict[str, tuple]:
    return {t.name: t.shape for t in hg.compile(text, backend="interp").program.temps}


def test_a_long_axis_splits_into_slices_and_a_tail():
    shapes = temps(source("y = x.sum(axis=0)"))
    assert [str(d) for d in shapes["y_part"]] == [f"n//{SLICE}", "m"]


@pytest.mark.parametrize("body, out, x", [
    ("y[i] = sum(x[i, j], j) + sum(x[j, i], j)", "f32[m]", "f32[m, m]"),  # two reductions in one statement
    ("y = x.argmax(axis=0)", "i64[m]", "f32[n, m]"),  # argmax: a partial would need its index
    ("y = x.sum()", "f32", "f32[n, m]"),  # 0-d: every element is a lane already
    ("y[i] = sum(x[i, d], d in range(3))", "f32[n]", "f32[n, m]"),  # a constant window
    ("y = x.sum(axis=1)", "f32[n]", "f32[n, m]"),  # along rows: each lane reads a contiguous run
])
def test_what_does_not_split(body, out, x):
    assert not any(name.endswith("_part") for name in temps(source(body, x=x, out=out)))


def test_the_tiled_contraction_is_left_to_contract_py():
    gemm = source("y[i, j] = sum(x[i, p] * w[p, j], p)", x="f32[m, k]", out="f32[m, n]", extra=', w = "f32[k, n]"')
    assert not any(name.endswith("_part") for name in temps(gemm))


def _rows(n: int, m: int, dtype: str, rng: np.random.Generator) -> np.ndarray:
    if dtype.startswith("f"):
        return rng.uniform(-1, 1, (n, m)).astype(dtype)
    return rng.integers(-50, 50, (n, m)).astype(dtype)


def close(got: np.ndarray, want: np.ndarray, n: int, magnitude: np.ndarray) -> None:
    """Within the contract of a reduction of `n` terms (exact for integers)."""
    if got.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want)
    else:
        assert_close(got, want.astype(got.dtype), reduction_n=max(n, 1), magnitude=magnitude.astype(got.dtype))


NUMPY = {"f16": "float16", "f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64"}

# lengths: none, short of one slice, one, one and a tail, two and a tail
LENGTHS = (0, SLICE - 1, SLICE, SLICE + 1, 2 * SLICE + 37)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("kind, dtype", [("sum", "f32"), ("sum", "f64"), ("sum", "f16"), ("sum", "i32"),
                                         ("max", "f32"), ("min", "i64"), ("prod", "f32"), ("mean", "f64")])
def test_split_reductions_match_numpy(backend, n, kind, dtype):
    if backend == "interp" and n > SLICE + 1:
        n = SLICE + 1  # one lane at a time: slices and a tail, at a size the interpreter runs quickly
    rng = np.random.default_rng(n)
    x = _rows(n, 3, NUMPY[dtype], rng)
    if kind == "prod":
        x = (1 + x / 64).astype(x.dtype)  # stays finite over 8k factors
    if n == 0 and kind in ("max", "min"):  # no identity: refused, as numpy refuses it
        with pytest.raises(hg.errors.EmptyReductionError):
            hg.compile(source(f"y = x.{kind}(axis=0)", x=f"{dtype}[n, m]", out=f"{dtype}[m]")).on(backend)(x)
        return
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the mean of nothing: NaN, with numpy's warning
        want = getattr(np, kind)(x, axis=0)
    if kind == "mean" and dtype != "f64":
        want = want.astype(x.dtype)
    out = {np.dtype(v): k for k, v in NUMPY.items()}[want.dtype]
    text = source(f"y = x.{kind}(axis=0)", x=f"{dtype}[n, m]", out=f"{out}[m]")
    got = hg.compile(text).on(backend)(x)
    assert got.dtype == want.dtype
    close(got, want, n, np.abs(x.astype(np.float64)).sum(axis=0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_outputs_per_slice_and_one(backend):
    n = SLICE + 5 if backend == "interp" else 3 * SLICE + 5
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (2, n, 3)).astype(np.float32)
    v = rng.uniform(-1, 1, n).astype(np.float32)
    along = hg.compile(source("y[a, b] = sum(x[a, i, b] * v[i], i)", x="f32[z, n, m]", out="f32[z, m]",
                              extra=', v = "f32[n]"')).on(backend)
    wide = x.astype(np.float64)
    close(along(x, v), np.einsum("aib,i->ab", wide, v).astype(np.float32), n,
          np.einsum("aib,i->ab", np.abs(wide), np.abs(v)))
    columns = hg.compile(source("y = x.sum(axis=0)", x="f32[n, m]", out="f32[m]")).on(backend)
    close(columns(x[0]), wide[0].sum(axis=0).astype(np.float32), n, np.abs(wide[0]).sum(axis=0))


def test_the_result_does_not_depend_on_the_thread_count():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((9 * SLICE + 11, 16)).astype(np.float32)
    v = rng.standard_normal(len(x)).astype(np.float32)
    k = hg.compile(source("y = x.T @ v", x="f32[n, m]", out="f32[m]", extra=', v = "f32[n]"')).on("cpu_llvm")
    backend = get_backend("cpu_llvm")
    threads = backend.num_threads
    try:
        results = []
        for count in (1, 2, 3):
            backend.num_threads = count
            results.append(k(x, v))
    finally:
        backend.num_threads = threads
    assert all(np.array_equal(r, results[0]) for r in results)
    wide = x.astype(np.float64)
    close(results[0], (wide.T @ v).astype(np.float32), len(x), np.abs(wide).T @ np.abs(v))
