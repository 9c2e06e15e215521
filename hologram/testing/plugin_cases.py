"""Generated kernels written in what plugins add: every translator's `cases`
(hologram.core.hookspecs.Translator), mixed into what `hologram diff-test` draws.

A translator plugin that extends kernel documents (the sigil plugin's `circuit` key) or
brings a format of its own offers a strategy of `KernelCase`s with their expected
outputs; the harness runs them on every backend like its own cases. Without such a
plugin installed, `difftest_kernels` draws what `kernels_with_long_reductions` does, one
in four written as a Python function when the Python translator is installed
(`python_cases.with_python_forms`; a plugin's own cases stay as the plugin wrote them).
"""

from __future__ import annotations

from hypothesis import strategies as st

from hologram.testing.cases import KernelCase
from hologram.testing.exprgen import GenConfig
from hologram.testing.long_cases import kernels_with_long_reductions
from hologram.testing.python_cases import with_python_forms

__all__ = ["PLUGIN_EVERY", "plugin_cases", "difftest_kernels"]

PLUGIN_EVERY = 8  # about one case in eight comes from a plugin, when one offers cases


def plugin_cases(cfg: GenConfig = GenConfig()) -> tuple[st.SearchStrategy[KernelCase], ...]:
    """The case strategies the installed translators offer, by translator name."""
    from hologram.registry.lookups import translators

    return tuple(t.cases(cfg) for _, t in sorted(translators().items()) if t.cases is not None)


@st.composite
def difftest_kernels(draw: st.DrawFn, cfg: GenConfig = GenConfig()) -> KernelCase:
    """What diff-test's `kernels` kind draws: the generated kernels (some as Python
    functions), and about one in PLUGIN_EVERY from a plugin's cases."""
    offers = plugin_cases(cfg)
    if offers and draw(st.integers(0, PLUGIN_EVERY - 1)) == 0:
        return draw(offers[draw(st.integers(0, len(offers) - 1))])
    return draw(with_python_forms(kernels_with_long_reductions(cfg)))
