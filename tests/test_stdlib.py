"""The standard library (kernels/*.toml) against numpy on the reference interpreter.

Each kernel gets hypothesis-generated inputs that include the edge values of its dtype
(NaN, ±inf, ±0, subnormals, empty and one-element arrays where the kernel allows them)
and is held to the accuracy contract: exact for elementwise + - * / and comparisons,
4 ULP for transcendentals, a log2(n)-growing bound for reductions. Sizes stay small
because the interpreter runs lane by lane in Python.
"""

from __future__ import annotations

import functools
import importlib.util

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hologram as hg
from hologram.core import atlas as A
from hologram.core.errors import ArgumentError, HologramError
from hologram.testing import assert_close

from repo_paths import EXAMPLES, KERNELS

F32, F64 = np.float32, np.float64
EPS = float(np.finfo(F32).eps)


@functools.cache
def std(name: str):
    return hg.compile_file(KERNELS / f"{name}.toml").on("interp")


def f32s(n, lo=None, hi=None):
    """float32 arrays: every edge value unless bounded (then finite, within [lo, hi])."""
    bounded = lo is not None or hi is not None
    return hnp.arrays(F32, n, elements=st.floats(lo, hi, width=32, allow_nan=not bounded,
                                                 allow_infinity=not bounded))


def vec_pairs(min_size=0, max_size=100, **bounds):
    return st.integers(min_size, max_size).flatmap(lambda n: st.tuples(f32s(n, **bounds), f32s(n, **bounds)))


def exact(actual, expected):
    """Bitwise equal (signs of zeros too; NaN matches NaN), same dtype and shape."""
    assert_close(actual, np.asarray(expected))


def close(actual, reference, *, ulps=0, bound=None, terms=None, n=None):
    """The contract against a float64 `reference`: rounded to actual's dtype, then within
    `ulps`, an absolute `bound`, or the reduction allowance for `n` terms of total
    magnitude `terms` (sum |x_i| per element).

    A product that underflows rounds to the subnormal grid, which no relative bound
    covers, so each of the `n` terms may also be off by one subnormal step."""
    expected = np.asarray(reference, F64).astype(actual.dtype)
    if n is not None:
        bound = (0 if bound is None else bound) + n * float(np.finfo(actual.dtype).smallest_subnormal)
    assert_close(actual, expected, ulps=max(ulps, 1), bound=bound, reduction_n=n,
                 magnitude=None if terms is None else np.asarray(terms, F64))


# -- every file is a kernel, and every kernel is tested here --------------------------------

TESTED = {"vadd", "vsub", "vmul", "vdiv", "axpy", "relu", "sigmoid", "tanh", "sum", "max", "mean",
          "argmax", "dot", "softmax", "gemm", "matvec", "stencil3", "layernorm", "class_histogram"}


def test_every_stdlib_file_compiles_and_is_tested_here():
    names = {p.stem for p in KERNELS.glob("*.toml")}
    assert names == TESTED
    for name in names:
        k = std(name)
        assert k.name == name and k.version.count(".") == 2 and k.summary


# -- elementwise ----------------------------------------------------------------------------

@pytest.mark.parametrize("name, fn", [("vadd", np.add), ("vsub", np.subtract), ("vmul", np.multiply),
                                      ("vdiv", np.true_divide)])
@given(xy=vec_pairs())
def test_elementwise_arithmetic_is_exact(name, fn, xy):
    x, y = xy
    with np.errstate(all="ignore"):
        exact(std(name)(x, y), fn(x, y))


@given(xy=vec_pairs(), alpha=st.floats(width=32))
def test_axpy(xy, alpha):
    x, y = xy
    with np.errstate(all="ignore"):
        exact(std("axpy")(alpha, x, y), F32(alpha) * x + y)


@given(x=f32s(st.integers(0, 100)))
def test_relu_keeps_nan(x):
    y = std("relu")(x)
    assert y.dtype == F32
    np.testing.assert_array_equal(y, np.maximum(x, F32(0)))   # ±0: either sign (Decisions)


@given(x=f32s(st.integers(0, 100)))
def test_sigmoid(x):
    with np.errstate(all="ignore"):
        close(std("sigmoid")(x), 1 / (1 + np.exp(-x.astype(F64))), ulps=4)


@given(x=f32s(st.integers(0, 100)))
def test_tanh(x):
    close(std("tanh")(x), np.tanh(x.astype(F64)), ulps=4)


@given(x=f32s(st.integers(3, 100)))
def test_stencil3(x):
    with np.errstate(all="ignore"):
        exact(std("stencil3")(x), F32(0.25) * x[:-2] + F32(0.5) * x[1:-1] + F32(0.25) * x[2:])


def test_stencil3_of_two_points_is_empty_and_of_one_point_an_argument_error():
    exact(std("stencil3")(np.ones(2, F32)), np.zeros(0, F32))
    with pytest.raises(ArgumentError):
        std("stencil3")(np.ones(1, F32))


# -- reductions -----------------------------------------------------------------------------

@given(x=f32s(st.integers(0, 200), -1e6, 1e6))
def test_sum(x):
    total = std("sum")(x)
    assert total.shape == () and total.dtype == F32
    close(total, np.sum(x, dtype=F64), n=x.size, terms=np.abs(x).sum(dtype=F64))


@given(x=f32s(st.integers(1, 200), -1e6, 1e6))
def test_mean(x):
    close(std("mean")(x), np.mean(x, dtype=F64), n=x.size, terms=np.abs(x).mean(dtype=F64))


@given(x=f32s(st.integers(1, 200)))
def test_max_and_argmax_propagate_nan_and_take_the_first(x):
    largest = std("max")(x)
    assert largest.dtype == F32 and largest.shape == ()
    # equal, NaN too, but for the sign of a zero, which is unspecified (docs/dsl.md, Decisions)
    np.testing.assert_array_equal(largest, np.max(x))
    exact(std("argmax")(x), np.argmax(x))


def test_ties_and_nan_positions():
    x = np.array([1, 7, 3, 7, np.nan, 2, np.nan], F32)
    exact(std("argmax")(x), np.int64(4))
    exact(std("argmax")(x[:4].copy()), np.int64(1))
    exact(std("max")(x[:4].copy()), F32(7))
    assert np.isnan(std("max")(x))


@pytest.mark.parametrize("name", ["max", "argmax"])
def test_max_of_nothing_is_an_error(name):
    with pytest.raises(HologramError, match="max"):
        std(name)(np.zeros(0, F32))


def test_sum_and_mean_of_nothing():
    exact(std("sum")(np.zeros(0, F32)), F32(0))
    assert np.isnan(std("mean")(np.zeros(0, F32)))


@given(xy=vec_pairs(0, 200, lo=-1e3, hi=1e3))
def test_dot(xy):
    x, y = xy
    terms = x.astype(F64) * y
    close(std("dot")(x, y), terms.sum(), n=x.size + 1, terms=np.abs(terms).sum())  # +1: the products round


@given(x=f32s(st.integers(1, 100), -50, 50))
def test_softmax(x):
    # x - max(x) rounds in f32 as the kernel's does; exp magnifies that rounding by |x - m|,
    # which is the input's error, not the kernel's, so the reference starts from it
    ref = np.exp((x - x.max()).astype(F64))
    ref /= ref.sum()
    y = std("softmax")(x)
    assert y.dtype == F32
    close(y, ref, ulps=8, n=x.size, terms=ref)


def test_softmax_of_large_values_does_not_overflow():
    x = np.array([1000, 1000, -1000], F32)
    np.testing.assert_array_equal(std("softmax")(x), np.array([0.5, 0.5, 0], F32))


# -- linear algebra -------------------------------------------------------------------------

def matrices(m, k, n):
    return st.tuples(f32s((m, k), -100, 100), f32s((k, n), -100, 100))


@given(dims=st.tuples(*[st.integers(1, 16)] * 3).flatmap(lambda d: matrices(*d)), alpha=st.floats(-4, 4, width=32))
def test_gemm(dims, alpha):
    a, b = dims
    c = std("gemm")(alpha, a, b)
    ref = F64(F32(alpha)) * (a.astype(F64) @ b)
    close(c, ref, n=a.shape[1] + 2, terms=abs(F32(alpha)) * (np.abs(a).astype(F64) @ np.abs(b)))


@given(m=st.integers(1, 16), n=st.integers(0, 32), data=st.data())
def test_matvec(m, n, data):
    a, x = data.draw(f32s((m, n), -100, 100)), data.draw(f32s(n, -100, 100))
    y = std("matvec")(a, x)
    close(y, a.astype(F64) @ x, n=n + 1, terms=np.abs(a).astype(F64) @ np.abs(x))


quarters = st.integers(-32, 32).map(lambda v: v / 4)


@given(m=st.integers(1, 8), n=st.integers(1, 16), eps=st.sampled_from([1e-5, 1e-3]), data=st.data())
def test_layernorm(m, n, eps, data):
    # quarter-valued inputs keep the row sums exact, so the only rounding left is the
    # contract's (the variance and the normalization), not cancellation in x - mean.
    x = data.draw(hnp.arrays(F32, (m, n), elements=quarters))
    gamma = data.draw(f32s(n, -10, 10))
    beta = data.draw(f32s(n, -10, 10))
    y = std("layernorm")(x, gamma, beta, eps)
    x64 = x.astype(F64)
    d = x64 - x64.mean(axis=1, keepdims=True)
    ref = d / np.sqrt((d * d).mean(axis=1, keepdims=True) + F64(F32(eps))) * gamma + beta
    close(y, ref, ulps=4, bound=64 * EPS * (np.abs(ref) + np.abs(beta) + np.abs(gamma) * 8))


# -- Atlas ----------------------------------------------------------------------------------

@given(data=st.binary(max_size=300))
def test_class_histogram(data):
    b = np.frombuffer(data, np.uint8).copy()
    hist, mirrored = std("class_histogram")(b)
    classes = A.BYTE_CLASS_TABLE[b]
    exact(hist, np.bincount(classes, minlength=96).astype(np.int64))
    exact(mirrored, np.bincount(A.MIRROR_TABLE[classes], minlength=96).astype(np.int64))


def test_class_histogram_of_every_byte():
    hist, mirrored = std("class_histogram")(np.arange(256, dtype=np.uint8))
    assert hist.sum() == 256 and (hist > 0).all()          # every class is reached
    exact(mirrored, hist[A.MIRROR_TABLE])                   # mirror permutes the bins


# -- the README demo ------------------------------------------------------------------------

def _demo():
    spec = importlib.util.spec_from_file_location("hologram_demo", EXAMPLES / "demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_demo_checks_every_kernel_and_passes(capsys):
    assert _demo().main(["--backend", "interp"]) == 0
    out = capsys.readouterr().out
    assert f"all {len(TESTED)} kernels match numpy" in out
    assert all(name in out for name in TESTED)


def test_demo_fails_loudly_on_a_mismatch(capsys, monkeypatch):
    demo = _demo()
    monkeypatch.setitem(demo.CASES, "vadd", attrs.evolve(demo.CASES["vadd"], reference=np.subtract))
    monkeypatch.delitem(demo.CASES, "relu")
    monkeypatch.setenv("COLUMNS", "200")   # one table row per line, whatever the terminal
    assert demo.main(["--backend", "interp"]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH" in out and "no numpy reference" in out
    assert f"2 of {len(TESTED)} kernels failed: relu, vadd" in out


def test_the_standard_library_and_the_examples_compile_without_warnings():
    """No kernel the repository ships draws a CompileWarning (an unused temporary, an
    access out of bounds at every size): a user who copies one starts clean."""
    import warnings

    from hologram.core.errors import CompileWarning

    documents = sorted(KERNELS.glob("*.toml")) + sorted(EXAMPLES.glob("*/kernels/*.toml"))
    assert len(documents) > 19
    hg.clear_cache()  # compiling again, so a warning would be raised again
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        for path in documents:
            hg.compile_file(path)
        if importlib.util.find_spec("hologram_python"):
            hg.compile_file(EXAMPLES / "python_kernels.py")
