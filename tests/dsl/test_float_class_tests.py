"""numpy's `isnan`, `isinf` and `isfinite` in kernel bodies: a bool array equal to
numpy's on every dtype and every backend, at the values where they matter (NaN, ±inf,
±0, subnormals, the largest finite value, an f16 overflow); isinf and isfinite are one
instruction each (ISINF, ISFINITE)."""

from __future__ import annotations

import numpy as np
import pytest

import hologram as hg
from hologram.core.types import DType
from hologram.testing.values import edge_values

BACKENDS = [b for b in ("interp", "cpu_llvm") if b in hg.list_backends()]
TESTS = ("isnan", "isinf", "isfinite")


def kernel(body: str, x: str, y: str = "bool[n]") -> hg.Kernel:
    return hg.compile(f'[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = {{ x = "{x}" }}\n'
                      f'outputs = {{ y = "{y}" }}\nbody = """\n{body}\n"""\n')


def instructions(k: hg.Kernel) -> set[str]:
    return {i.op for s in k.program.stages for i in s.body if hasattr(i, "op")}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", TESTS)
@pytest.mark.parametrize("dtype", ["f16", "f32", "f64", "bool", "i8", "i64", "u64"])
def test_each_is_numpys_on_every_dtype(backend, fn, dtype):
    x = np.array(edge_values(dtype), DType.parse(dtype).np)
    got = kernel(f"y = np.{fn}(x)", f"{dtype}[n]").on(backend)(x)
    assert got.dtype == np.bool_ and got.tolist() == getattr(np, fn)(x).tolist()


@pytest.mark.parametrize("fn, op", [("isinf", "ISINF"), ("isfinite", "ISFINITE")])
def test_isinf_and_isfinite_are_one_instruction(fn, op):
    assert op in instructions(kernel(f"y = {fn}(x)", "f32[n]"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_f16_that_overflows_is_infinite_and_a_subnormal_is_finite(backend):
    x = np.array([100, 255, 256, 300, -1000, 6e-8, -6e-8, 0], np.float16)  # 256**2 is past f16's 65504
    k = kernel("y = isinf(x * x) | (isfinite(x * 0.5) & (x != 0))", "f16[n]")
    with np.errstate(over="ignore"):
        want = np.isinf(x * x) | (np.isfinite(x * np.float16(0.5)) & (x != 0))
    assert k.on(backend)(x).tolist() == want.tolist()


@pytest.mark.parametrize("backend", BACKENDS)
def test_they_compose_as_numpy_does(backend):
    x = np.array([1.5, np.nan, np.inf, -np.inf, -0.0, 1e-310], np.float64)
    k = kernel("y = where(isfinite(x), x, 0.0) + isinf(x) - isinf(-inf)", "f64[n]", "f64[n]")
    want = np.where(np.isfinite(x), x, 0.0) + np.isinf(x) - np.isinf(-np.inf)
    assert k.on(backend)(x).tolist() == want.tolist()
