"""What a Dask worker runs for a kernel call: the functions of the graph's tasks.

Each takes plain values (numpy blocks, the step's `Kernel`, reducers) and imports nothing
of Dask, the compiler or the planner: a worker unpickles a kernel as its program's
encoding and prepares it once per process (`Kernel.__reduce__`), so a bundle kernel runs
its native code there and a JIT one compiles there, through the worker's disk cache.

An argument of a step is described by a `Feed`: (`how`, `what`):

| how | the argument |
|---|---|
| `block` | the block of a Dask array, the task's `blocks[what]` (made C-contiguous) |
| `item` | the value of a 0-d Dask array, `blocks[what]` |
| `small` | a small tensor an earlier step computed, `smalls[what]` (0-d: its value) |
| `value` | `what` itself (a scalar, a chunk's first row, a symbol's value) |
| `carry` | a scan's carry into the chunk, from the task's `carries[what]` |
"""

from __future__ import annotations

import copy
import itertools
from typing import Any, Sequence

import numpy as np

from hologram.streaming.reduce import Reducer, reducer

Feed = tuple[str, Any]


class Mapped:
    """A kernel called through `kernel.map` (its arguments' leading loop dimensions), as a
    step's kernel: what a block of a `kernel.map` call over Dask arrays runs."""

    __slots__ = ("kernel",)

    def __init__(self, kernel: Any):
        self.kernel = kernel

    @property
    def signature(self) -> Any:
        return self.kernel.signature

    def __call__(self, *args: Any, cast: bool = False) -> Any:
        return self.kernel.map(*args, cast=cast)

    def __reduce__(self) -> tuple:
        return Mapped, (self.kernel,)

    def __dask_tokenize__(self) -> tuple:
        return ("map", self.kernel.__dask_tokenize__())


def _arguments(feeds: Sequence[Feed], smalls: dict | None, carries: Sequence[Reducer] | None,
               blocks: Sequence[Any]) -> list[Any]:
    args = []
    for how, what in feeds:
        if how == "block":
            args.append(np.ascontiguousarray(blocks[what]))  # a block may be a view of a strided array
        elif how == "item":
            args.append(np.asarray(blocks[what])[()])
        elif how in ("small", "carry"):  # a 0-d one is a scalar parameter's value
            v = np.asarray(smalls[what] if how == "small" else carries[what].carry())  # type: ignore[index]
            args.append(v[()] if v.ndim == 0 else v)
        else:
            args.append(what)
    return args


def run_step(kernel: Any, feeds: Sequence[Feed], cast: bool, smalls: dict | None, carries: Sequence[Reducer] | None,
             *blocks: Any) -> tuple:
    """One step kernel on one block of the grid: its outputs, in declaration order."""
    result = kernel(*_arguments(feeds, smalls, carries, blocks), cast=cast)
    return tuple(result) if len(kernel.signature.outputs) > 1 else (result,)


def run_output(position: int, *args: Any) -> Any:
    """`run_step(*args)`'s output at `position`: a block's task that is the run itself."""
    return run_step(*args)[position]


def empty_step(outputs: Sequence[tuple[tuple[int, ...], str] | None]) -> tuple:
    """A pass over a chunk of no rows: empty row outputs, no partials (so a reduction
    without an identity never sees an empty chunk)."""
    return tuple(None if o is None else np.empty(o[0], np.dtype(o[1])) for o in outputs)


def run_small(kernel: Any, feeds: Sequence[Feed], targets: Sequence[str], cast: bool, smalls: dict | None,
              *blocks: Any) -> dict:
    """A small step: the small tensors so far, with its outputs added under `targets`."""
    out = dict(smalls or {})
    out.update(zip(targets, (np.asarray(r) for r in run_step(kernel, feeds, cast, smalls, None, *blocks))))
    return out


def leaf(reductions: Sequence[tuple[Any, tuple[int, ...], int, tuple[int, ...]]], first_row: int,
         partials: tuple) -> list[Reducer]:
    """The reducers' states after one chunk: `reductions` are (Reduction, target shape,
    scale, positions of its partials among the pass's outputs)."""
    states = []
    for red, shape, scale, at in reductions:
        r = reducer(red, shape, scale)
        parts = [partials[k] for k in at]
        if all(p is not None for p in parts):
            r.combine(parts, first_row)
        states.append(r)
    return states


def advance(carries: list[Reducer], outputs: tuple, at: Sequence[tuple[int, ...]]) -> list[Reducer]:
    """The scans' carries after one more chunk, whose pass gave `outputs` (the totals at
    `at`); the carries before it are left as they were."""
    moved = [copy.copy(r) for r in carries]
    for r, positions in zip(moved, at):
        parts = [outputs[k] for k in positions]
        if all(p is not None for p in parts):
            r.combine(parts, 0)
    return moved


def merge(*groups: list[Reducer]) -> list[Reducer]:
    """Consecutive chunks' states merged, earliest first (the inputs are left as they were)."""
    merged = [copy.copy(r) for r in groups[0]]
    for later in groups[1:]:
        for r, other in zip(merged, later):
            r.absorb(other)
    return merged


def finalize(states: list[Reducer], smalls: dict | None) -> dict:
    """The small tensors so far, with the reductions' values added."""
    out = dict(smalls or {})
    for r in states:
        out.update(r.finalize())
    return out


def window(axes: tuple[int, ...], spans: tuple[tuple[tuple[int, int], ...], ...], *blocks: np.ndarray) -> np.ndarray:
    """A block widened by its halo: the rows `spans[a]` of the blocks around it along
    each of `axes`, joined (`blocks` in row-major order of the pieces)."""
    parts = []
    for block, combo in zip(blocks, itertools.product(*spans)):
        index = [slice(None)] * block.ndim
        for axis, (lo, hi) in zip(axes, combo):
            index[axis] = slice(lo, hi)
        parts.append(block[tuple(index)])
    for a in reversed(range(len(axes))):
        group = len(spans[a])
        parts = [np.concatenate(parts[i:i + group], axis=axes[a]) for i in range(0, len(parts), group)]
    return parts[0]


def trim(values: tuple, position: int, rows: dict[int, tuple[int, int]]) -> np.ndarray:
    """Output `position` of a step run on a widened block: its own rows along each window axis."""
    index = [slice(None)] * values[position].ndim
    for axis, (lo, hi) in rows.items():
        index[axis] = slice(lo, hi)
    return values[position][tuple(index)]


def pick(values: Any, key: Any) -> Any:
    """One output of a step (by position) or one small tensor (by name)."""
    return values[key]
