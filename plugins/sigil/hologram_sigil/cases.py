"""Random circuits and the answers the accuracy contract allows for them (needs hypothesis).

    circuits()            random circuits over a few classes, dense in what canonicalizes
    buffers(width)        float32[96, width] class buffers, edge values included
    expected(node, x)     the numpy model run on `hologram.testing.bounds.Val` rows: the
                          buffer a backend may answer, within the contract
    difftest_cases(cfg)   TOML kernels with a `circuit` key, with their inputs and expected
                          buffer: what this plugin adds to `hologram diff-test`

Imported only by tests and by the diff-test harness (the translator's `cases`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from hologram.testing import KernelCase, Val, bounds
from hologram_sigil.api import kernel_source
from hologram_sigil.circuit import CLASSES, MERGE_BINARY, MERGE_UNARY, REDUCTIONS, SPLIT_BINARY, WIDTH, Gen, Node, Par, Seq
from hologram_sigil.model import Algebra, run_rows

VAL = Algebra(apply=lambda op, rows: bounds.apply(op, rows),
              reduce=lambda kind, row: bounds.reduce(kind, row),
              fill=lambda scalar, width: scalar.broadcast_to((width,)))

EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -3e38, 3e38, 1.0, -1.0], np.float32)


def expected(node: Node, buffer: np.ndarray) -> Val:
    """What a backend may answer for `node` on `buffer`: the model, on Val rows."""
    width = buffer.shape[1]
    rows = run_rows(node, [Val.exact(buffer[k].copy()) for k in range(CLASSES)], VAL, width)
    return Val.settled(*(np.stack([getattr(r, f) for r in rows]) for f in ("v", "err", "ulps", "fuzzy")))


# ---------------------------------------------------------------------------- circuits
@st.composite
def circuits(draw: st.DrawFn, max_steps: int = 10, parallel: bool = True) -> Node:
    """A random circuit over 2 to 6 classes (so generators meet), of up to `max_steps`
    steps, a step sometimes a parallel block; repeats, inverses and quote/evaluate pairs
    are drawn often, so canonicalization has work to do."""
    pool = draw(st.lists(st.integers(0, CLASSES - 1), min_size=2, max_size=6, unique=True))
    quoted: set[int] = set()
    steps: list[Node] = []
    for _ in range(draw(st.integers(1, max_steps))):
        if parallel and len(pool) >= 2 and draw(st.integers(0, 5)) == 0:
            steps.append(draw(_block(pool, quoted)))
        elif steps and isinstance(steps[-1], Gen) and draw(st.integers(0, 3)) == 0:
            steps.append(_echo(steps[-1], quoted))  # a repeat, or the undoing of the last step
        else:
            steps.append(draw(_generator(pool, pool, quoted)))
    return steps[0] if len(steps) == 1 else Seq(tuple(steps))


def _echo(g: Gen, quoted: set[int]) -> Gen:
    if g.kind == "quote":
        return Gen("evaluate", "", g.classes)
    if g.kind == "copy":
        return Gen("copy", "", g.classes[::-1]) if g.classes[0] != g.classes[1] else g
    if g.kind == "swap":
        return Gen("swap", "", g.classes[::-1])
    return g


@st.composite
def _block(draw: st.DrawFn, pool: list[int], quoted: set[int]) -> Par:
    """Branches writing disjoint parts of the pool (each reads anything)."""
    targets = list(pool)
    draw(st.randoms(use_true_random=False)).shuffle(targets)
    cut = draw(st.integers(1, len(targets) - 1))
    branches = []
    before = set(quoted)
    for part in (targets[:cut], targets[cut:]):
        mine = set(before)
        n = draw(st.integers(1, 3))
        gens = tuple(draw(_generator(pool, part, mine)) for _ in range(n))
        quoted |= mine
        branches.append(gens[0] if n == 1 else Seq(gens))
    return Par(tuple(branches))


@st.composite
def _generator(draw: st.DrawFn, pool: list[int], targets: list[int], quoted: set[int]) -> Gen:
    """One generator reading from `pool` and writing only classes of `targets` (or their
    quote slots); `evaluate` only of a slot in `quoted`, which `quote` fills."""
    kinds = ["merge", "merge", "merge", "split", "reduce", "mark", "copy", "swap", "quote"]
    if quoted & set(targets):
        kinds.append("evaluate")
    kind = draw(st.sampled_from(kinds))
    src = st.sampled_from(pool)
    dst = draw(st.sampled_from(targets))
    if kind == "mark":
        return Gen("mark", "", (dst,))
    if kind == "quote":
        quoted.add(dst)
        return Gen("quote", "", (dst,))
    if kind == "evaluate":
        return Gen("evaluate", "", (draw(st.sampled_from(sorted(quoted & set(targets)))),))
    if kind == "copy":
        return Gen("copy", "", (draw(src), dst))
    if kind == "swap":
        if len(targets) < 2:
            return Gen("mark", "", (dst,))
        a, b = draw(st.lists(st.sampled_from(targets), min_size=2, max_size=2, unique=True))
        return Gen("swap", "", (a, b))
    if kind == "reduce":
        return Gen("reduce", draw(st.sampled_from(REDUCTIONS)), (draw(src), dst))
    if kind == "split":
        return Gen("split", draw(st.sampled_from(sorted(SPLIT_BINARY))), (dst, draw(src), draw(src)))
    variant = draw(st.sampled_from(sorted({**MERGE_BINARY, **MERGE_UNARY})))
    sources = (draw(src),) if variant in MERGE_UNARY else (draw(src), draw(src))
    return Gen("merge", variant, (dst, *sources))


# ----------------------------------------------------------------------------- values
@st.composite
def buffers(draw: st.DrawFn, width: int = WIDTH) -> np.ndarray:
    """A float32[96, width] buffer: normal values at a drawn scale, a drawn sprinkling of
    edge values (zeros of both signs, infinities, NaN, subnormals, the largest floats)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.sampled_from([0.5, 2.0, 8.0, 60.0]))
    x = (rng.standard_normal((CLASSES, width)) * scale).astype(np.float32)
    if draw(st.booleans()):
        count = draw(st.integers(1, 8))
        rows = rng.integers(0, CLASSES, count)
        cols = rng.integers(0, width, count)
        x[rows, cols] = rng.choice(EDGES, count)
    return x


# ---------------------------------------------------------------------------- diff-test
def difftest_cases(cfg: Any = None) -> st.SearchStrategy[KernelCase]:
    """Circuit kernels as `hologram diff-test` draws them: a TOML document with a
    `circuit` key, a class buffer, and the buffer the contract allows."""
    return st.builds(_case, circuits(), buffers())


def _case(node: Node, x: np.ndarray) -> KernelCase:
    return KernelCase(kernel_source(node, name="circuit"), (("x", x),), (("y", expected(node, x)),))
