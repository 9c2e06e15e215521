"""Kernels written as Python functions (docs/python-kernels.md).

Importing this module compiles every kernel in it: each decorated function is read from
this file's source by the Python translator (hologram-translator-python) and never run.

    python examples/python_kernels.py                 # runs each kernel, checks it against numpy
    hologram translate examples/python_kernels.py     # the same kernels as a TOML document
"""

from __future__ import annotations

import numpy as np

import hologram as hg
from hologram.types import f32, f64, get_global_id, i64

EPS = 1e-5  # module-level constants are folded into the kernels that read them
TAPS = 3
BINS = 8


@hg.kernel(version="1.0.0")
def softmax(x: f32["n"]) -> f32["n"]:
    """Numerically stable softmax of a vector."""
    m = x.max()
    e = np.exp(x - m)
    return e / e.sum()


@hg.kernel(version="1.0.0")
def layernorm(x: f32["m", "n"], gamma: f32["n"], beta: f32["n"]) -> f32["m", "n"]:
    """Each row normalized to mean 0 and variance 1, then scaled and shifted."""
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return (x - mu) / np.sqrt(var + EPS) * gamma + beta


@hg.kernel(version="1.0.0")
def matmul(a: f32["m", "k"], b: f32["k", "n"]) -> f32["m", "n"]:
    return a @ b


@hg.kernel(version="1.0.0")
def moments(x: f64["n"]) -> tuple[f64, f64]:
    """Mean and variance: two outputs, a namedtuple (mu, out1)."""
    mu = x.mean()
    return mu, ((x - mu) ** 2).mean()


@hg.kernel(version="1.0.0")
def vector_add(a: f32["n"], b: f32["n"], c: f32["n"]):
    """The seeds' thread style: c is an out-parameter, idx an index variable."""
    idx = get_global_id()
    if idx < len(c):
        c[idx] = a[idx] + b[idx]


@hg.kernel(version="1.0.0")
def axpy_2d(alpha: f32, x: f32["m", "n"], y: f32["m", "n"], out: f32["m", "n"]):
    """Thread style on two axes, with an early exit."""
    i = get_global_id(0)
    j = get_global_id(1)
    if i >= x.shape[0] or j >= x.shape[1]:
        return
    scaled = alpha * x[i, j]
    out[i, j] = scaled + y[i, j]


@hg.kernel(version="1.0.0")
def box_filter(x: f32["n"], y: f32["n - 2"]):
    """Index notation into an out-parameter: a 3-tap moving average."""
    y[i] = sum(x[i + d], d in range(TAPS)) / TAPS


@hg.kernel(version="1.0.0")
def take(x: f32["n"], idx: i64["k"]) -> f32["k"]:
    """A gather: x[idx], with numpy's negative indices."""
    return x[idx]


@hg.kernel(version="1.0.0")
def histogram(bins: i64["n"], w: f32["n"], h: f32[BINS]):
    """A scatter-add: numpy's np.add.at(h, bins, w) into BINS bins."""
    h[bins[i]] += w[i]


@hg.kernel(version="1.0.0")
def running_diff(x: f32["n"]) -> tuple[f32["n"], f32["n - 1"]]:
    """Slicing and scans: the running sum, and each element minus the one before."""
    return x.cumsum(), x[1:] - x[:-1]


def check() -> None:
    """Each kernel against numpy, on every installed backend."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000).astype(np.float32)
    m = rng.standard_normal((8, 64)).astype(np.float32)
    g, b = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    a2, b2 = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((32, 8)).astype(np.float32)
    idx = rng.integers(-1000, 1000, 50)
    bins = rng.integers(0, BINS, 1000)
    for backend in hg.list_backends():
        e = np.exp(x - x.max())
        np.testing.assert_allclose(softmax.on(backend)(x), e / e.sum(), rtol=1e-5)
        mu, var = m.mean(1, keepdims=True), m.var(1, keepdims=True)
        np.testing.assert_allclose(layernorm.on(backend)(m, g, b), (m - mu) / np.sqrt(var + EPS) * g + b,
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(matmul.on(backend)(a2, b2), a2 @ b2, rtol=1e-5, atol=1e-5)
        got = moments.on(backend)(x.astype(np.float64))
        np.testing.assert_allclose([got.mu, got.out1], [x.astype(np.float64).mean(), x.astype(np.float64).var()])
        np.testing.assert_array_equal(vector_add.on(backend)(x, x), x + x)
        np.testing.assert_allclose(axpy_2d.on(backend)(np.float32(2), m, m), 2 * m + m, rtol=1e-6)
        np.testing.assert_allclose(box_filter.on(backend)(x), (x[:-2] + x[1:-1] + x[2:]) / 3, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(take.on(backend)(x, idx), x[idx])
        want = np.zeros(BINS, np.float32)
        np.add.at(want, bins, x)
        np.testing.assert_allclose(histogram.on(backend)(bins, x), want, rtol=1e-4, atol=1e-4)
        total, diff = running_diff.on(backend)(x)
        np.testing.assert_allclose(total, np.cumsum(x), rtol=1e-4, atol=1e-3)
        np.testing.assert_array_equal(diff, np.diff(x))
        print(f"{backend}: 10 kernels agree with numpy")


if __name__ == "__main__":
    check()
