"""The generators run directly on numpy arrays: the meaning a compiled circuit is held to.

`run(circuit, buffer)` applies the circuit to a float32 class buffer (96 rows) and
returns the new buffer. Each generator is the numpy operation docs/sigil.md gives it,
taken from the DSL's oracle (hologram.core.semantics), row by row: nothing here shares
code with the kernel that lower.py writes, which is what makes the comparison a test.

The arithmetic is a parameter (`Algebra`): with `NUMPY` a row is an array; the tests
run the same model on `hologram.testing.bounds.Val` rows, which carry the answers the
accuracy contract allows a backend (hologram_sigil.cases).
"""

from __future__ import annotations

from typing import Any, Callable

import attrs
import numpy as np

from hologram.translator import semantics
from hologram_sigil.circuit import CLASSES, Gen, Node, Par, Seq, writes

Row = Any  # an array of one class's elements, or what the algebra uses instead


@attrs.frozen
class Algebra:
    """How rows are computed: `apply(op, rows)` an elementwise operation named as in
    hologram.core.semantics.ORACLE, `reduce(kind, row)` a reduction to a scalar,
    `fill(scalar, width)` a row of `width` copies of it."""

    apply: Callable[[str, list[Row]], Row]
    reduce: Callable[[str, Row], Row]
    fill: Callable[[Row, int], Row]


NUMPY = Algebra(apply=lambda op, rows: semantics.ORACLE[op](*rows),
                reduce=lambda kind, row: semantics.reduce(kind, row),
                fill=lambda scalar, width: np.full(width, scalar, np.float32))


def run(node: Node, buffer: np.ndarray) -> np.ndarray:
    """The class buffer after `node`, computed with numpy (`buffer` is not changed)."""
    buffer = np.asarray(buffer)
    if buffer.dtype != np.float32 or buffer.ndim != 2 or buffer.shape[0] != CLASSES:
        raise ValueError(f"a class buffer is float32[{CLASSES}, width], got {buffer.dtype}{list(buffer.shape)}")
    rows = run_rows(node, [buffer[k].copy() for k in range(CLASSES)], NUMPY, buffer.shape[1])
    return np.stack(rows).astype(np.float32, copy=False)


def run_rows(node: Node, rows: list[Row], algebra: Algebra, width: int) -> list[Row]:
    """The 96 rows after `node`, from `rows`, in `algebra`."""
    state = {k: row for k, row in enumerate(rows)}
    _run(node, state, algebra, width)
    return [state[k] for k in range(CLASSES)]


def _run(node: Node, state: dict[int, Row], algebra: Algebra, width: int) -> None:
    """Apply `node` to `state` (class k at key k, its quote slot at 96 + k), in place."""
    if isinstance(node, Seq):
        for step in node.steps:
            _run(step, state, algebra, width)
    elif isinstance(node, Par):
        before = dict(state)
        for branch in node.branches:  # each branch sees the state before the block
            mine = dict(before)
            _run(branch, mine, algebra, width)
            state.update({r: mine[r] for r in writes(branch)})
    else:
        _generator(node, state, algebra, width)


def _generator(g: Gen, state: dict[int, Row], algebra: Algebra, width: int) -> None:
    c = g.classes
    if g.kind == "copy":
        state[c[1]] = state[c[0]]
    elif g.kind == "swap":
        state[c[0]], state[c[1]] = state[c[1]], state[c[0]]
    elif g.kind == "quote":
        state[CLASSES + c[0]] = state[c[0]]
    elif g.kind == "evaluate":
        state[c[0]] = state[CLASSES + c[0]]
    elif g.kind == "mark":
        state[c[0]] = algebra.apply("neg", [state[c[0]]])
    elif g.kind == "reduce":
        state[c[1]] = algebra.fill(algebra.reduce(g.variant, state[c[0]]), width)
    else:  # merge, split
        state[c[0]] = algebra.apply(g.op, [state[k] for k in c[1:]])
