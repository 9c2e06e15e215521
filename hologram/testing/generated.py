"""Every generated kernel, as one strategy: `kernels(cfg)`.

The families live in their own modules (hologram.testing.cases: expressions, index
notation, the Atlas, shape symbols as values; view_cases: numpy's indexing and loop
dimensions; gather_cases: gathers and scatter-adds; value_test_cases: isnan, isinf,
isfinite at NaN, ±inf, subnormals and f16 overflows; stream_cases: any of these run
through `hologram.stream`, and softmax / logsumexp that must stream; dask_cases: any of
these called with Dask arrays, where Dask is installed); this is the mix
`hologram diff-test` and the public `hologram.testing.kernels` draw from.
"""

from __future__ import annotations

from hypothesis import strategies as st

from hologram.testing import cases
from hologram.testing.cases import KernelCase
from hologram.testing.dask_cases import chunked, dask_available
from hologram.testing.exprgen import GenConfig
from hologram.testing.gather_cases import gather_kernels, scatter_kernels
from hologram.testing.stream_cases import softmax_kernels, streamed
from hologram.testing.value_test_cases import value_test_kernels
from hologram.testing.view_cases import looped, view_kernels

__all__ = ["kernels"]

DASK = dask_available()  # whether the mix draws kernels called with Dask arrays


@st.composite
def kernels(draw: st.DrawFn, cfg: GenConfig = GenConfig()) -> KernelCase:
    """Any generated kernel: about one in two from hologram.testing.cases, one in fourteen
    each over numpy's indexing, gathers, scatter-adds, loop dimensions, value tests,
    streamed (any of those through `hologram.stream`), softmax / logsumexp streamed and
    (with Dask installed) any of those called with Dask arrays. (A drawn roll, not
    `st.one_of` with a branch repeated: one_of drops repeats.)"""
    roll = draw(st.integers(0, 13 if DASK else 12))
    if roll == 13:
        return draw(chunked(_called(cfg)))
    if roll == 11:
        return draw(streamed(_called(cfg)))
    if roll == 12:
        return draw(softmax_kernels(cfg))
    return draw(_called(cfg, roll))


@st.composite
def _called(draw: st.DrawFn, cfg: GenConfig, roll: int | None = None) -> KernelCase:
    """A kernel that is called (or mapped): rolls 0-5 cases.kernels, 6-10 the others."""
    roll = draw(st.integers(0, 10)) if roll is None else roll
    if roll == 10:
        return draw(value_test_kernels(cfg))
    if roll == 6:
        return draw(view_kernels(cfg))
    if roll == 7:
        return draw(gather_kernels(cfg))
    if roll == 8:
        return draw(scatter_kernels(cfg))
    if roll == 9:
        return draw(looped(cases.kernels(cfg)))
    return draw(cases.kernels(cfg))
