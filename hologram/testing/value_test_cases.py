"""Generated kernels of the value tests, at the values where they matter.

`value_test_kernels(cfg)` draws one of `exprgen.VALUE_TESTS` (numpy's `isnan`, and every
bool-valued instruction the op table gives a DSL function: `isinf`, `isfinite`) of a
float expression whose input holds the values the tests tell apart: about half of its
elements are edge values (NaN, ±inf, ±0, subnormals, the largest finite value), and the
dtype is f16 half the time, whose range overflows soonest (`x * x`, `x * 1e10` and
`exp(x)` turn finite values into inf; `x / 1e10` turns them subnormal). The test's
result is the output as it is, a mask (`where(isfinite(e), e, 0.0)`, numpy's nan_to_num
idiom) or a number (`e + isinf(e)`). `hologram.testing.generated` mixes these into what
`hologram diff-test` draws.
"""

from __future__ import annotations

from typing import Callable

import attrs
import numpy as np
from hypothesis import strategies as st

from hologram.testing import values
from hologram.testing.cases import KernelCase, Param, _dims, _finish, _leaf, expression_kernels
from hologram.testing.exprgen import VALUE_TESTS, Builder, GenConfig, Node, literal, render

__all__ = ["value_test_kernels", "ARITHMETIC"]

# What the tested expression is built of: operations that keep a float a float and can
# overflow, underflow or make a NaN of ordinary values
ARITHMETIC = frozenset({"+", "-", "*", "/", "**", "neg", "sqrt", "exp", "log", "power"})


@st.composite
def value_test_kernels(draw: Callable, cfg: GenConfig = GenConfig()) -> KernelCase:
    """A kernel `y = <test>(e)` (or the test as a mask or a number) over a float input."""
    tests = [t for t in VALUE_TESTS if t in cfg.ops]
    floats = [d for d in cfg.dtypes if values.as_dtype(d).kind == "f"]
    if not tests or not floats:  # the config rules them out: an ordinary expression kernel
        return draw(expression_kernels(cfg))
    dt = values.as_dtype("f16" if "f16" in floats and draw(st.booleans()) else draw(st.sampled_from(floats)))
    x = Param("x", dt, _dims(("n",)))
    sizes = {"n": draw(st.integers(1, max(cfg.max_n, 1))), "m": 1}
    arithmetic = attrs.evolve(cfg, ops=cfg.ops & ARITHMETIC, reductions=(), scans=(), casts=False)
    e = Builder(draw, arithmetic, [_leaf(x)]).expr(("n",), max(cfg.max_depth - 1, 1))
    if e.dtype.kind != "f":
        e = Node("cast", dt, e.shape, (e,), dt, text="dsl")
    builder = Builder(draw, cfg, [_leaf(x)])
    test = builder.combine(draw(st.sampled_from(tests)), [e])
    form = draw(st.sampled_from(("bool", "mask", "number")))
    if form == "mask":
        node = builder.combine("where", [test, e, literal(0.0)])
    elif form == "number":
        node = builder.combine("+", [e, test])
    else:
        node = test
    y = Param("y", np.dtype(node.dtype), _dims(node.shape))
    return _finish(draw, sizes, [x], [("y", f"y = {render(node)}", node)], [y])
