"""Every generated kernel, as one strategy: `kernels(cfg)`.

The families live in their own modules (hologram.testing.cases: expressions, index
notation, the Atlas, shape symbols as values; hologram.testing.view_cases: numpy's
indexing and loop dimensions); this is the mix `hologram diff-test` and the public
`hologram.testing.kernels` draw from, the established families most often.
"""

from __future__ import annotations

from hypothesis import strategies as st

from hologram.testing import cases
from hologram.testing.cases import KernelCase
from hologram.testing.exprgen import GenConfig
from hologram.testing.view_cases import looped, view_kernels

__all__ = ["kernels"]


@st.composite
def kernels(draw: st.DrawFn, cfg: GenConfig = GenConfig()) -> KernelCase:
    """Any generated kernel: about two in three from hologram.testing.cases, one in six
    over numpy's indexing, one in six called with loop dimensions. (A drawn roll, not
    `st.one_of` with a branch repeated: one_of drops repeats.)"""
    roll = draw(st.integers(0, 5))
    if roll == 4:
        return draw(view_kernels(cfg))
    if roll == 5:
        return draw(looped(cases.kernels(cfg)))
    return draw(cases.kernels(cfg))
