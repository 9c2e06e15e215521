"""A kernel call over Dask arrays as one Dask graph: steps over a grid of blocks.

The call's *grid* has an axis per split shape symbol: the blockwise ones
(hologram.dask.blocks), whose blocks are independent, and at most one more, `S`, split
the way `hologram.stream` splits a kernel (hologram.streaming.plan): *passes* over its
chunks, reductions over `S` carried across them, *small* steps in between. A call with
no `S` is one pass, the kernel itself, on every block.

For every position of the blockwise axes (`B`):

- a pass runs its step kernel on every chunk of `S` (`tasks.run_step`): the row outputs'
  blocks and, per reduction, the chunk's partials;
- its reductions are merged as a tree in chunk order (`tasks.leaf`, `tasks.merge`,
  `SPLIT_EVERY` at a time), so a given chunking gives the same bits every time, and
  finalized into the small tensors (`tasks.finalize`); its scans' carries go from
  chunk to chunk (`tasks.advance`);
- a small step runs once on them (`tasks.run_small`).

Later steps read the small tensors of their own `B` position, so nothing is brought to
the client between steps. A window symbol (a stencil's) is blockwise but for its halo:
a block's run reads its rows and the halo's from the blocks around it
(`tasks.window`) and keeps its own rows of each output (`tasks.trim`). The outputs are
Dask arrays over the same graph: row outputs chunked as the grid, small ones chunked
along `B`. Each stage's kernel is a value of the graph (`dask.task_spec.DataNode`), sent
to a worker once; a chunk's run that one task alone reads runs inside that task.
"""

from __future__ import annotations

import bisect
import itertools
import math
from typing import Any, Mapping, Sequence

import attrs
import numpy as np

from hologram.core.types import Affine
from hologram.dask import tasks
from hologram.dask.blocks import shift_of
from hologram.streaming.plan import Reduction
from hologram.streaming.reduce import CARRIES, reducer
from hologram.streaming.rows import symbol_value

SPLIT_EVERY = 8  # states merged per task of a reduction's tree


@attrs.frozen
class Stage:
    """One step of the call: a plan's step (hologram.streaming.plan.Step) with its kernel,
    or the kernel itself as the one pass of a blockwise call."""

    kind: str  # "pass" or "small"
    kernel: Any
    params: tuple[tuple[str, str, str], ...]
    outputs: tuple[tuple[str, str, str], ...]
    reductions: tuple[Reduction, ...] = ()


@attrs.frozen
class Grid:
    """The split symbols (`B` then `S`) and each one's chunks; a blockwise symbol that is
    a window (hologram.dask.blocks.window_reach) reads a halo of rows around each block."""

    symbols: tuple[str, ...]
    chunks: Mapping[str, tuple[int, ...]]
    split: str | None  # S, the last of `symbols`, or None
    halos: Mapping[str, tuple[int, int]] = attrs.field(factory=dict)  # a window's rows (before, after)
    _starts: dict = attrs.field(factory=dict, eq=False, repr=False)  # symbol -> each chunk's first row, cached

    @property
    def blockwise(self) -> tuple[str, ...]:
        return self.symbols[:-1] if self.split is not None else self.symbols

    def positions(self, symbols: Sequence[str]) -> list[tuple[int, ...]]:
        return list(itertools.product(*(range(len(self.chunks[s])) for s in symbols)))

    def starts(self, symbol: str) -> list[int]:
        """Each chunk's first row along `symbol`, and the end."""
        found = self._starts.get(symbol)
        if found is None:
            found = self._starts[symbol] = [0, *itertools.accumulate(self.chunks[symbol])]
        return found

    def start(self, symbol: str, index: int) -> int:
        return self.starts(symbol)[index]

    def overlapping(self, symbol: str, lo: int, hi: int) -> range:
        """The chunks along `symbol` holding rows of [lo, hi)."""
        starts = self.starts(symbol)
        return range(max(bisect.bisect_right(starts, lo) - 1, 0), min(bisect.bisect_left(starts, hi),
                                                                      len(self.chunks[symbol])))

    def window(self, symbol: str, index: int) -> tuple[int, int]:
        """The rows block `index` of a window symbol is computed from: its own and its halo's."""
        start = self.start(symbol, index)
        before, after = self.halos[symbol]
        end = min(self.starts(symbol)[-1], start + self.chunks[symbol][index] + after)
        # at least `after` rows, so an output shorter than the inputs has no negative length
        return max(0, min(start - before, end - after)), end

    def trimmed(self, symbol: str, index: int, shift: int) -> tuple[int, int]:
        """The rows of an output `symbol + shift` long that block `index` holds, from the
        start of its window: the block's own rows (the last block to the output's end)."""
        start, own = self.start(symbol, index), self.chunks[symbol][index]
        end = self.starts(symbol)[-1] + shift
        stop = end if index == len(self.chunks[symbol]) - 1 else min(start + own, end)
        first = min(start, end)
        return first - self.window(symbol, index)[0], max(stop, first) - self.window(symbol, index)[0]


class Builder:
    """The graph of one call (module docstring). `arrays` are the call's array inputs as
    Dask arrays, chunked as the grid along their `labels` (each axis's split symbol, or
    None: one chunk); `items` its 0-d Dask arrays given for scalars, `values` the other
    scalars; `symbols` every shape symbol's value for the whole call; `cast` converts the blocks
    as a numpy call's `cast=True` converts arrays."""

    def __init__(self, work: str, grid: Grid, arrays: Mapping[str, Any], labels: Mapping[str, tuple[str | None, ...]],
                 items: Mapping[str, Any], values: Mapping[str, Any], symbols: Mapping[str, int], cast: bool):
        self.work, self.grid, self.cast = work, grid, cast
        self.arrays, self.labels, self.items, self.values, self.symbols = arrays, labels, items, values, symbols
        self.tasks: dict[Any, Any] = {}
        self.inlined: dict[Any, Any] = {}  # key -> a task run inside its one reader (`place`)
        self.smalls: dict[tuple[int, ...], Any] = {}  # B position -> key of the small tensors so far
        self.rows: dict[str, tuple[int, int]] = {}  # row output -> (its pass's number, its position there)

    def run(self, stages: Sequence[Stage]) -> None:
        for number, stage in enumerate(stages):
            if stage.kind == "pass":
                self.pass_stage(number, stage)
            else:
                self.small_stage(number, stage)

    # ------------------------------------------------------------------ one step
    def feeds(self, stage: Stage, at: Mapping[str, int]) -> tuple[list[tasks.Feed], list[Any]]:
        """How each of the stage kernel's params is fed at grid position `at`, and the
        keys of the blocks it reads."""
        from dask.task_spec import TaskRef

        feeds: list[tasks.Feed] = []
        refs: list[Any] = []
        for _, role, source in stage.params:
            if role in ("stream", "input") or source in self.arrays:  # (a scalar with loop dimensions: an array)
                feeds.append(("block", len(refs)))
                refs.append(TaskRef(self.block(source, at)))
            elif role == "scalar" and source in self.items:
                feeds.append(("item", len(refs)))
                refs.append(TaskRef((self.items[source].name,)))
            elif role == "scalar":
                feeds.append(("value", self.values[source]))
            elif role == "small":
                feeds.append(("small", source))
            elif role == "carry":
                feeds.append(("carry", [red.target for red in stage.reductions if red.kind in CARRIES].index(source)))
            elif role == "offset":
                split = self.grid.split
                feeds.append(("value", np.int64(self.grid.start(split, at[split]))))
            else:  # "symbol": the whole call's size
                feeds.append(("value", np.int64(symbol_value(source, self.symbols))))
        return feeds, refs

    def block(self, name: str, at: Mapping[str, int]) -> Any:
        """The key of input `name`'s block at grid position `at`: widened by its halo
        along window symbols (a task joining the pieces of the blocks around it)."""
        from dask.task_spec import Task, TaskRef

        labels = self.labels[name]
        index = tuple(at.get(s, 0) if s else 0 for s in labels)
        windowed = [(k, s) for k, s in enumerate(labels) if s in self.grid.halos and self.grid.halos[s] != (0, 0)]
        if not windowed:
            return (self.arrays[name].name, *index)
        key = self.key("window", name, *index)
        if key in self.tasks:
            return key
        spans, pieces = [], []
        for k, s in windowed:
            lo, hi = self.grid.window(s, at[s])
            found = []
            for j in self.grid.overlapping(s, lo, hi + 1):
                start = self.grid.start(s, j)
                a, b = max(lo, start), min(hi, start + self.grid.chunks[s][j])
                if a < b or (lo == hi and j == at[s]):
                    found.append((j, a - start, max(a, b) - start))
            spans.append(tuple((a, b) for _, a, b in found))
            pieces.append([j for j, _, _ in found])
        refs = []
        for combo in itertools.product(*pieces):
            block = list(index)
            for (k, _), j in zip(windowed, combo):
                block[k] = j
            refs.append(TaskRef((self.arrays[name].name, *block)))
        self.tasks[key] = Task(key, tasks.window, tuple(k for k, _ in windowed), tuple(spans), *refs)
        return key

    def small_ref(self, b: tuple[int, ...]) -> Any:
        from dask.task_spec import TaskRef

        found = self.smalls.get(b)
        return None if found is None else TaskRef(found)

    def pass_stage(self, number: int, stage: Stage) -> None:
        """A pass on every chunk of every B position. Its reductions are merged as a tree;
        its scans' carries go from chunk to chunk: each chunk's totals come from a run of
        the pass with no carry (all chunks at once), or, when a scan reads another scan
        (`Reduction.chained`), from the chunk's own run with its carry (one after another)."""
        from dask.task_spec import Task, TaskRef

        grid, split = self.grid, self.grid.split
        decls = stage.kernel.signature.outputs
        position = {name: o for o, (name, _, _) in enumerate(stage.outputs)}
        carried = [red for red in stage.reductions if red.kind in CARRIES]
        reduced = [red for red in stage.reductions if red.kind not in CARRIES]
        chained = any(red.chained for red in carried)
        # a chunk's run read by one task only (its one row output's block, or its reductions'
        # leaf) runs inside that task: a task less per chunk, as Dask fuses a blockwise chain
        inline = not carried and (len(stage.outputs) == 1 if not reduced else
                                  all(role != "row" for _, role, _ in stage.outputs))
        for o, (_, role, target) in enumerate(stage.outputs):
            if role == "row":
                self.rows[target] = (number, o)
        for b in grid.positions(grid.blockwise):
            at = dict(zip(grid.blockwise, b))
            shapes = {p.name: self.block_shape(p.shape, at) for p in decls} if stage.reductions else {}
            fresh = [reducer(red, shapes[red.partials[0]]) for red in carried]
            carries: Any = fresh
            leaves = []
            for c in (range(len(grid.chunks[split])) if split is not None else (None,)):
                key = self.key(number, *b, *(() if c is None else (c,)))
                if c is not None:
                    at[split] = c
                feeds, refs = self.feeds(stage, at)
                if c is not None and grid.chunks[split][c] == 0 and stage.reductions:
                    empty = [(self.block_shape(p.shape, at), p.dtype.np.str) if role == "row" else None
                             for p, (_, role, _) in zip(decls, stage.outputs)]
                    self.place(key, inline, tasks.empty_step, empty)
                    totals = key
                else:
                    self.place(key, inline, tasks.run_step, self.kernel(number, stage), feeds, self.cast, self.small_ref(b),
                               carries, *refs)
                    totals = key
                    if carried and not chained:
                        totals = self.key(number, "totals", *b, c)
                        self.tasks[totals] = Task(totals, tasks.run_step, self.kernel(number, stage), feeds, self.cast,
                                                  self.small_ref(b), fresh, *refs)
                if carried:
                    moved = self.key(number, "carry", *b, c)
                    self.tasks[moved] = Task(moved, tasks.advance, carries, TaskRef(totals),
                                             [tuple(position[p] for p in red.partials) for red in carried])
                    carries = TaskRef(moved)
                if reduced:
                    specs = [(red, shapes[red.partials[0]], self.scale(red), tuple(position[p] for p in red.partials))
                             for red in reduced]
                    leaf = self.key(number, "leaf", *b, c)
                    self.tasks[leaf] = Task(leaf, tasks.leaf, specs, 0 if c is None else grid.start(split, c),
                                            self.ref(key))
                    leaves.append(leaf)
            if reduced:
                final = self.key(number, "final", *b)
                self.tasks[final] = Task(final, tasks.finalize, TaskRef(self.tree(number, b, leaves)),
                                         self.small_ref(b))
                self.smalls[b] = final

    def kernel(self, number: int, stage: Stage) -> Any:
        """A reference to the stage's kernel, a value of the graph: a worker receives it
        once, not with every task (a gemm's pickle is 40 KB)."""
        from dask.task_spec import DataNode, TaskRef

        key = self.key("kernel", number)
        if key not in self.tasks:
            self.tasks[key] = DataNode(key, stage.kernel)
        return TaskRef(key)

    def place(self, key: Any, inline: bool, func: Any, *args: Any) -> None:
        """The task `func(*args)` under `key`, or kept to run inside the one task that reads it."""
        from dask.task_spec import Task

        if inline:
            self.inlined[key] = Task(None, func, *args)
        else:
            self.tasks[key] = Task(key, func, *args)

    def ref(self, key: Any) -> Any:
        """What reads `key`'s value: the task itself when it runs inline, else a reference."""
        from dask.task_spec import TaskRef

        found = self.inlined.get(key)
        return found if found is not None else TaskRef(key)

    def tree(self, number: int, b: tuple[int, ...], keys: list[Any]) -> Any:
        """The states of `keys` merged in order, `SPLIT_EVERY` at a time: the root's key."""
        from dask.task_spec import Task, TaskRef

        level = 0
        while len(keys) > 1:
            merged = []
            for i in range(0, len(keys), SPLIT_EVERY):
                key = self.key(number, "merge", *b, level, i // SPLIT_EVERY)
                self.tasks[key] = Task(key, tasks.merge, *(TaskRef(k) for k in keys[i:i + SPLIT_EVERY]))
                merged.append(key)
            keys, level = merged, level + 1
        return keys[0]

    def small_stage(self, number: int, stage: Stage) -> None:
        from dask.task_spec import Task

        targets = [target for _, _, target in stage.outputs]
        for b in self.grid.positions(self.grid.blockwise):
            feeds, refs = self.feeds(stage, dict(zip(self.grid.blockwise, b)))
            key = self.key(number, "small", *b)
            self.tasks[key] = Task(key, tasks.run_small, self.kernel(number, stage), feeds, targets, self.cast,
                                   self.small_ref(b), *refs)
            self.smalls[b] = key

    def key(self, *parts: Any) -> tuple:
        return (self.work, *parts)

    # ------------------------------------------------------------------ shapes
    def block_shape(self, shape: Sequence[Any], at: Mapping[str, int]) -> tuple[int, ...]:
        """A declared shape's extents at grid position `at`: a split symbol's chunk there."""
        out = []
        for d in shape:
            s = plain_symbol(d)
            out.append(self.grid.chunks[s][at[s]] if s is not None and s in at else Affine.of(d).evaluate(self.symbols))
        return tuple(out)

    def scale(self, red: Reduction) -> int:
        return math.prod(d.evaluate(self.symbols) for d in red.scale)

    # ------------------------------------------------------------------ results
    def output(self, name: str, shape: Sequence[Any], dtype: np.dtype, graph: Any) -> Any:
        """The Dask array of output `name` (declared `shape`), over the steps' graph."""
        import dask.array as da
        from dask.highlevelgraph import HighLevelGraph
        from dask.task_spec import Task, TaskRef

        grid = self.grid
        split_dims, shifts = [], {}
        for k, d in enumerate(shape):
            s = plain_symbol(d) or next((w for w in grid.halos if shift_of(Affine.of(d), w, self.symbols) is not None),
                                        None)
            split_dims.append(s if s in grid.symbols else None)
            if s in grid.halos:
                shifts[k] = shift_of(Affine.of(d), s, self.symbols)
        chunks = tuple(self.out_chunks(s, shifts[k]) if k in shifts else grid.chunks[s] if s is not None
                       else (Affine.of(d).evaluate(self.symbols),) for k, (s, d) in enumerate(zip(split_dims, shape)))
        out = f"{name}-{self.work.removeprefix('hologram-')}"
        layer: dict[Any, Any] = {}
        if name in self.rows:
            number, o = self.rows[name]
            for g in grid.positions(grid.symbols):
                at = dict(zip(grid.symbols, g))
                key = (out, *(at[s] if s is not None else 0 for s in split_dims))
                source = self.ref(self.key(number, *g))
                trims = {k: grid.trimmed(split_dims[k], at[split_dims[k]], shift) for k, shift in shifts.items()
                         if grid.halos[split_dims[k]] != (0, 0)}
                if trims:
                    layer[key] = Task(key, tasks.trim, source, o, trims)
                elif isinstance(source, Task) and source.func is tasks.run_step:  # the run itself: no nesting
                    layer[key] = Task(key, tasks.run_output, o, *source.args)
                else:
                    layer[key] = Task(key, tasks.pick, source, o)
        else:
            for b in grid.positions(grid.blockwise):
                at = dict(zip(grid.blockwise, b))
                key = (out, *(at[s] if s is not None else 0 for s in split_dims))
                layer[key] = Task(key, tasks.pick, TaskRef(self.smalls[b]), name)
        layers = {**graph.layers, out: layer}
        dependencies = {**graph.dependencies, out: {self.work}}
        return da.Array(HighLevelGraph(layers, dependencies), out, chunks, dtype=dtype)


    def out_chunks(self, symbol: str, shift: int) -> tuple[int, ...]:
        """An output's chunks along `symbol + shift` (a window's): each block's own rows."""
        return tuple(b - a for a, b in (self.grid.trimmed(symbol, j, shift) for j in range(len(self.grid.chunks[symbol]))))


def plain_symbol(dim: Any) -> str | None:
    """The symbol a dimension is, when it is one plainly (`n`, not `n - 2` nor `4`)."""
    a = Affine.of(dim)
    if a.const == 0 and len(a.terms) == 1 and a.terms[0][1] == 1 and a.terms[0][0].isidentifier():
        return a.terms[0][0]
    return None
