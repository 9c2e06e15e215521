"""The held-out suite's oracle: our own reading of DESIGN.md's accuracy contract.

Deliberately independent of `hologram.testing`: exact for integers and for float
`+ - * /` and `sqrt`, a ULP budget for transcendentals, and a reduction bound that grows
with log2(n). Inputs are seeded random values with IEEE and integer edge values mixed in.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

import hologram as hg
from hologram.core.errors import HologramError

# interp by default; HOLOGRAM_HELDOUT_BACKEND=cpu_llvm holds the other backend to the same tests
BACKEND = os.environ.get("HOLOGRAM_HELDOUT_BACKEND", "interp")


KERNELS = Path(__file__).parent / "kernels"
RNG_SEED = 20261122


def load(name: str, kernel: str | None = None):
    """Compile a kernel file and pin it to the reference interpreter."""
    compiled = hg.compile_file(str(KERNELS / name))
    return (compiled[kernel] if kernel else compiled).on(BACKEND)


def rng() -> np.random.Generator:
    return np.random.default_rng(RNG_SEED)


def float_edges(dtype) -> np.ndarray:
    fi = np.finfo(dtype)
    return np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 0.5, -2.5, 3.5,
                     fi.tiny, -fi.tiny, fi.smallest_subnormal, fi.max, -fi.max, fi.eps], dtype=dtype)


def floats(dtype, n: int, lo: float = -10.0, hi: float = 10.0, edges: bool = True) -> np.ndarray:
    """Random floats in [lo, hi) with the IEEE edge values mixed in at random places."""
    r = rng()
    x = r.uniform(lo, hi, n).astype(dtype)
    if edges:
        e = float_edges(dtype)
        x[r.choice(n, size=min(n, len(e)), replace=False)] = e[: min(n, len(e))]
    return x


def ints(dtype, n: int, edges: bool = True) -> np.ndarray:
    """Random integers over the whole range with the extremes mixed in (n >= 8)."""
    ii = np.iinfo(dtype)
    r = rng()
    x = r.integers(ii.min, ii.max, n, dtype=dtype, endpoint=True)
    if edges:
        e = np.array(sorted({ii.min, ii.min + 1, ii.max, ii.max - 1, 0, 1, ii.max // 2, -1 if ii.min else 2}),
                     dtype=np.int64 if ii.min else np.uint64).astype(dtype)
        x[r.choice(n, size=len(e), replace=False)] = e
    return x


def ordered(a: np.ndarray) -> np.ndarray:
    """Map floats to integers whose difference is the ULP distance (+0 and -0 coincide)."""
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    i = a.view(bits).astype(np.int64)
    return np.where(i < 0, -(i & np.int64(np.iinfo(bits).max)), i)


def check(got, want, ulps: int = 0, signed_zero: bool = False) -> None:
    """Exact dtype and shape; exact values for ints/bools; floats within `ulps` ULP."""
    got, want = np.asarray(got), np.asarray(want)
    assert isinstance(got, np.ndarray)
    assert got.dtype == want.dtype, f"dtype {got.dtype}, numpy gives {want.dtype}"
    assert got.shape == want.shape, f"shape {got.shape}, numpy gives {want.shape}"
    if want.dtype.kind != "f":
        bad = got != want
        assert not bad.any(), f"mismatch at {np.argwhere(bad)[:5].tolist()}: got {got[bad][:5]}, want {want[bad][:5]}"
        return
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    assert (nan_g == nan_w).all(), f"NaN pattern differs at {np.argwhere(nan_g != nan_w)[:5].tolist()}"
    g, w = got[~nan_w], want[~nan_w]
    inf = np.isinf(w) | np.isinf(g)
    assert (g[inf] == w[inf]).all(), f"inf mismatch: got {g[inf]}, want {w[inf]}"
    dist = np.abs(ordered(g[~inf]) - ordered(w[~inf]))
    if dist.size:
        k = int(dist.argmax())
        assert dist[k] <= ulps, f"{dist[k]} ULP apart (allowed {ulps}): got {g[~inf][k]!r}, want {w[~inf][k]!r}"
    if signed_zero:
        z = w == 0
        assert (np.signbit(g[z]) == np.signbit(w[z])).all(), "sign of zero differs"


def check_reduction(got, want, terms: np.ndarray, axis=None) -> None:
    """|got - want| <= c * log2(n) * eps * sum(|terms|), the design's reduction bound."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    n = terms.size if axis is None else terms.shape[axis]
    mag = np.sum(np.abs(terms.astype(np.float64)), axis=axis)
    bound = 4 * (math.log2(max(n, 2)) + 1) * np.finfo(want.dtype).eps * mag
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert (err <= bound).all(), f"reduction error {err.max()} > bound {bound.max()}"


def quiet():
    return np.errstate(all="ignore")


def reference(fn, dtype, *args):
    with quiet():
        return np.asarray(fn(*(a.astype(np.float64) for a in args))).astype(dtype)


def elementwise_kernel(expr: str, dtype: str, names=("x",)) -> str:
    ins = ", ".join(f'{v} = "{dtype}[n]"' for v in names)
    return (f'[kernel]\nname = "ew"\nversion = "1.0.0"\ninputs = {{ {ins} }}\n'
            f'outputs = {{ out = "{dtype}[n]" }}\nbody = "out = {expr}"\n')


def safe_div(a, b, op):
    """numpy's answer where b != 0; the design's 0 where b == 0."""
    with quiet():
        return np.where(b == 0, 0, op(a, np.where(b == 0, 1, b))).astype(a.dtype)


def saturate(x: np.ndarray, dtype) -> np.ndarray:
    """The design's float->int cast: truncate, saturate to the range, NaN -> 0."""
    ii = np.iinfo(dtype)
    t = np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=np.inf, neginf=-np.inf))
    out = np.empty(x.shape, dtype)
    for i, v in enumerate(t):
        out[i] = ii.max if v >= float(ii.max) else ii.min if v <= float(ii.min) else int(v)
    return out


DT = {np.dtype(t): n for t, n in [(np.bool_, "bool"), (np.int8, "i8"), (np.int16, "i16"), (np.int32, "i32"),
                                  (np.int64, "i64"), (np.uint8, "u8"), (np.uint16, "u16"), (np.uint32, "u32"),
                                  (np.uint64, "u64"), (np.float16, "f16"), (np.float32, "f32"), (np.float64, "f64")]}


GOOD = """[kernel]
name = "k"
version = "1.0.0"
inputs  = { x = "f32[n]" }
outputs = { y = "f32[n]" }
body = \"\"\"
t = x * 2
y = exp(t)
\"\"\"
"""


def compile_error(text: str, fmt: str = "toml") -> HologramError:
    with pytest.raises(HologramError) as ei:
        hg.compile(text, format=fmt)
    return ei.value


def _doc_with_body(body: str) -> str:
    return ('[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = { x = "f32[n]", y = "i32[n]" }\n'
            f'outputs = {{ o = "f32[n]" }}\nbody = """\n{body}\n"""\n')
