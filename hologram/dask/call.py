"""A kernel called with Dask arrays: the arguments checked as a numpy call checks them,
the split chosen, the graph built (hologram.dask.graph), lazy Dask arrays returned.

How each shape symbol split into chunks is handled (docs/dask.md):

- blockwise in the kernel (hologram.dask.blocks): kept as chunked, block by block (a
  kernel of one output that is blockwise in every split symbol is Dask's own
  `blockwise` layer);
- a window (a stencil, a convolution): kept as chunked, each block widened by its halo;
- else, one of them (the one with the most chunks) as `hologram.stream` splits a kernel,
  with the symbol moved first in every array (hologram.dask.transpose): passes over its
  chunks, reductions across them as trees, scans with carries (hologram.streaming.plan);
- else the axis is joined into one chunk, with a `PerformanceWarning` naming the
  statement that needs it whole.
"""

from __future__ import annotations

import os
import sys
import warnings
import weakref
from typing import Any, Mapping

import attrs
import numpy as np

from hologram.call.args import (bind_symbols, check_array, check_reductions, complete_symbols, concrete_shape,
                                convert_scalar)
from hologram.call.loops import Core
from hologram.core.errors import ArgumentError, StreamError, UnsupportedProgram
from hologram.core.types import Affine
from hologram.dask import tasks
from hologram.dask.blocks import blockwise_symbols, why_not_blockwise, window_reach
from hologram.dask.graph import Builder, Grid, Stage, plain_symbol
from hologram.dask.protocol import is_dask_collection
from hologram.dask.transpose import inverse, lead_with
from hologram.ir import KernelIR, format_statement
from hologram.streaming.plan import site_words


def call(kernel: Any, values: Mapping[str, Any], out: Any, cast: bool, mapped: bool) -> Any:
    """`kernel(**values)` over Dask arrays: lazy Dask arrays (a namedtuple of them for
    several outputs), nothing computed."""
    import dask.array as da

    sig = kernel.signature
    name = sig.name
    if out is not None:
        raise ArgumentError(f"{name}(): out= cannot be given when an argument is a Dask array: the result is a lazy "
                            "Dask array, computed when asked for",
                            hint="compute it into an array with da.store(result, target), or result.compute()")
    arrays: dict[str, Any] = {}
    items: dict[str, Any] = {}
    scalars: dict[str, Any] = {}
    loops: dict[str, int] = {}  # an array input's loop dimensions (kernel.map)
    for p in sig.inputs:
        v = values[p.name]
        where = f"{name}(): argument {p.name!r}"
        dask_array = isinstance(v, da.Array)
        if is_dask_collection(v) and not dask_array:
            raise ArgumentError(f"{where} is a {type(v).__name__}; a kernel takes Dask arrays",
                                hint="pass its .data (a Dask array); for an xarray DataArray, "
                                     "hologram.xarray.apply keeps its dimensions and coordinates")
        if p.kind == "scalar" and mapped and np.ndim(v) > 0:  # a scalar with loop dimensions: mapped over
            loops[p.name] = np.ndim(v)
            v = v if dask_array else da.from_array(np.asarray(v))
            convert_scalar(name, p, np.zeros((), v.dtype)[()], cast)  # the dtype rule of a numpy scalar
            arrays[p.name] = v
            continue
        if p.kind == "scalar":
            if not dask_array:
                scalars[p.name] = convert_scalar(name, p, v, cast)
                continue
            if v.ndim != 0:
                raise ArgumentError(f"{where} must be a number ({p.type}), got a Dask array of shape {v.shape}")
            convert_scalar(name, p, np.zeros((), v.dtype)[()], cast)  # the dtype rule of a numpy scalar
            items[p.name] = v
            continue
        loops[p.name] = max(np.ndim(v) - len(p.shape), 0) if mapped else 0
        if not dask_array:
            a = check_array(name, p, v, cast, loops[p.name])
            arrays[p.name] = da.from_array(a, chunks=a.shape or ())
            continue
        if any(np.isnan(c) for dim in v.chunks for c in dim):
            raise ArgumentError(f"{where} has chunks of unknown size {v.chunks}",
                                hint="call .compute_chunk_sizes() on it first")
        check_array(name, p, np.empty((0,) * v.ndim, v.dtype), cast, loops[p.name])  # rank and dtype, as numpy's
        arrays[p.name] = v
    scalar = {p.name for p in sig.inputs if p.kind == "scalar"}
    core = {n: Core(x.shape[loops[n]:]) for n, x in arrays.items() if n not in scalar}
    symbols = bind_symbols(name, sig.inputs, core, sig.symbols)
    symbols = complete_symbols(kernel.program.symbols, symbols)
    for p in sig.outputs:
        concrete_shape(name, p, symbols)
    check_reductions(name, kernel._c.reductions, symbols)
    labels = {p.name: tuple(plain_symbol(d) for d in p.shape) for p in sig.inputs if p.name in arrays}
    if any(loops.values()):
        loop = _looped(name, arrays, loops, labels)
        split = _mapped_split(kernel, arrays, labels, loop)
        symbols = {**symbols, **loop}
    else:
        split = _split(kernel, arrays, labels, symbols)
    for n, perm in split.perms.items():
        if n in arrays:
            arrays[n] = arrays[n].transpose(perm)
            labels[n] = tuple(labels[n][k] for k in perm)
    arrays = _aligned(arrays, labels, split.symbols)
    grid = Grid(split.symbols, {s: _chunks_of(arrays, labels, s) for s in split.symbols}, split.along, split.halos)
    return _build(kernel, grid, split, arrays, labels, items, scalars, symbols, cast)


def _looped(name: str, arrays: dict[str, Any], loops: Mapping[str, int],
            labels: dict[str, tuple[str | None, ...]]) -> dict[str, int]:
    """A call through `kernel.map`: the loop dimensions broadcast as numpy broadcasts them
    (an argument with fewer is shared, one of size 1 is broadcast), labelled `_loop0`...;
    `arrays` and `labels` updated; returns each loop label's size."""
    import dask.array as da

    try:
        shape = np.broadcast_shapes(*(x.shape[:loops[n]] for n, x in arrays.items()))
    except ValueError:
        found = ", ".join(f"{n!r} {x.shape[:loops[n]]}" for n, x in arrays.items() if loops[n])
        raise ArgumentError(f"{name}.map(): the loop dimensions of the arguments do not broadcast: {found}") from None
    names = tuple(f"_loop{i}" for i in range(len(shape)))
    for n, x in arrays.items():
        rank = loops[n]
        if rank:
            own = shape[len(shape) - rank:]
            if x.shape[:rank] != own:  # (without empty chunks, which Dask's broadcast_to mishandles)
                x = x.rechunk(tuple(tuple(c for c in dim if c) or (0,) for dim in x.chunks))
                arrays[n] = da.broadcast_to(x, own + x.shape[rank:])
            labels[n] = names[len(shape) - rank:] + labels[n]
    return dict(zip(names, shape))


def _mapped_split(kernel: Any, arrays: Mapping[str, Any], labels: Mapping[str, tuple[str | None, ...]],
                  loop: Mapping[str, int]) -> "Split":
    """`kernel.map` over Dask arrays: its loop dimensions split as they are chunked, and
    its blockwise symbols; any other split axis joined (warned)."""
    kir = kernel._c.source_ir
    blockwise = blockwise_symbols(kir) if kir is not None else frozenset()
    kept: set[str] = set()
    joined: set[str] = set()
    for n, x in arrays.items():
        for k, s in enumerate(labels[n]):
            if s not in loop and len(x.chunks[k]) > 1:
                (kept if s in blockwise else joined).add(s or f"axis {k} of {n!r}")
    for s in sorted(joined):
        _warn(kernel, f"{s} is read whole: a call through map splits its loop dimensions and the kernel's "
                      "blockwise symbols only")
    return Split((*loop, *sorted(kept)), None, (kernel_stage(tasks.Mapped(kernel)),))


# ------------------------------------------------------------------------- the split
@attrs.frozen
class Split:
    """How a call is split: the grid's `symbols` (the blockwise ones, the windows, then
    `along`, the one split as a stream, if any), the `stages` run over it, the arrays whose
    axes the stages take reordered (`perms`, hologram.dask.transpose) and each window's
    halo (`halos`, hologram.dask.blocks.window_reach)."""

    symbols: tuple[str, ...]
    along: str | None
    stages: tuple[Stage, ...]
    perms: Mapping[str, tuple[int, ...]] = attrs.field(factory=dict)
    halos: Mapping[str, tuple[int, int]] = attrs.field(factory=dict)  # window symbols' (before, after)


def _split(kernel: Any, arrays: Mapping[str, Any], labels: Mapping[str, tuple[str | None, ...]],
           symbols: Mapping[str, int]) -> Split:
    """The split of a call (module docstring); every split axis the kernel needs whole is
    warned about (`_aligned` joins it)."""
    chunked: dict[str, int] = {}  # symbol -> most chunks of any axis it labels
    for n, x in arrays.items():
        for k, s in enumerate(labels[n]):
            if len(x.chunks[k]) > 1:
                if s is None:
                    dim = next(p for p in kernel.signature.inputs if p.name == n).shape[k]
                    _warn(kernel, f"axis {k} of {n!r} ({dim}) is not a plain shape symbol, so it is read whole")
                else:
                    chunked[s] = max(chunked.get(s, 1), len(x.chunks[k]))
    kir: KernelIR | None = kernel._c.source_ir
    whole = Split((), None, (kernel_stage(kernel),))
    if kir is None:
        for s in chunked:
            _warn(kernel, f"{s} is read whole: the kernel carries no IR to split it by")
        return whole
    blockwise = blockwise_symbols(kir)
    windows = {s: reach for s in chunked if s not in blockwise
               for reach in [window_reach(kir, s, symbols)] if reach is not None}
    found = whole
    for s in sorted((s for s in chunked if s not in blockwise and s not in windows), key=lambda s: -chunked[s]):
        if found.along is not None:
            _warn(kernel, f"{s} is read whole: {_reason(kir, s)} (only {found.along} is split so, a reduction at a "
                          "time)")
            continue
        try:
            found = planned(kernel, kir, s)
        except StreamError as e:
            _warn(kernel, f"{s} is read whole: {_reason(kir, s)}, and split as a stream, {_planner_words(e)}")
    kept = []
    for s in sorted(s for s in chunked if s in blockwise):
        if any(st.kernel is not kernel and s not in blockwise_symbols(st.kernel._c.source_ir)
               for st in found.stages):
            _warn(kernel, f"{s} is read whole: split along {found.along}, a step of the kernel reads all of {s}")
        else:
            kept.append(s)
    if found.along is not None:
        for s in windows:
            _warn(kernel, f"{s} is read whole: it is a window of the kernel, and {found.along} is split as a stream")
        windows = {}
    along = () if found.along is None else (found.along,)
    return attrs.evolve(found, symbols=(*kept, *sorted(windows), *along), halos=windows)


# Each compiled kernel's splits as a stream, by (symbol, backend) (see `planned`)
_PLANS: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


def planned(kernel: Any, kir: KernelIR, symbol: str) -> Split:
    """The kernel split along `symbol` as `hologram.stream` splits it, with `symbol` first
    in every array (hologram.dask.transpose); a StreamError says what stops it."""
    cache = _PLANS.setdefault(kernel._c, {})
    key = (symbol, kernel._backend_name)
    found = cache.get(key)
    if found is None:
        try:
            found = _planned(kernel, kir, symbol)
        except StreamError as e:
            found = e
        cache[key] = found
    if isinstance(found, StreamError):
        raise found
    return found


def _planned(kernel: Any, kir: KernelIR, symbol: str) -> Split:
    from hologram.registry.lookups import get_backend
    from hologram.streaming.rows import plan_kernels

    lead = lead_with(kir, symbol)
    if lead is None:
        raise StreamError(f"stream({kernel.name}): {_reason(kir, symbol)}")
    plan, kernels = plan_kernels(kernel, lead.kir, symbol)
    backend = get_backend(kernel._backend_name)
    for k in kernels:  # a step's partials may need what the backend lacks (f64 sums on wgpu)
        try:
            backend.check_covers(k.program)
        except UnsupportedProgram as e:
            raise StreamError(f"stream({kernel.name}): backend {backend.name!r} cannot run a step of it: "
                              f"{e.message}") from None
    stages = tuple(Stage(step.kind, k, step.params, step.outputs, step.reductions)
                   for step, k in zip(plan.steps, kernels))
    return Split((), symbol, stages, lead.perms)


def kernel_stage(kernel: Any) -> Stage:
    """The kernel itself as the one pass of a blockwise call."""
    sig = kernel.signature
    return Stage("pass", kernel, tuple((p.name, "scalar" if p.kind == "scalar" else "input", p.name)
                                       for p in sig.inputs),
                 tuple((p.name, "row", p.name) for p in sig.outputs))


def _reason(kir: KernelIR, symbol: str) -> str:
    st = why_not_blockwise(kir, symbol)
    if isinstance(st, str):
        decl = next(d for d in (*kir.params, *kir.outputs, *kir.temps) if d.name == st)
        return f"{decl.kind} {st!r} has shape [{', '.join(map(str, decl.shape))}]"
    site = kir.sites[st.site] if getattr(st, "site", None) is not None and st.site < len(kir.sites) else None
    words = site_words(site) if site is not None else format_statement(st).splitlines()[0]
    at = f" ({site})" if site is not None else ""
    return f"`{words}`{at} reads across {symbol}"


def _planner_words(e: StreamError) -> str:
    """The planner's reason, without its `stream(k): ` prefix."""
    return e.message.split("): ", 1)[-1]


def _warn(kernel: Any, message: str) -> None:
    from dask.array.core import PerformanceWarning

    warnings.warn(f"{kernel.signature.name}: {message}; that axis is joined into one chunk (rechunk it so to "
                  "silence this)", PerformanceWarning, stacklevel=_caller_level())


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _caller_level() -> int:
    """The stack level of the first frame outside hologram: the user's call."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


# ------------------------------------------------------------------------- chunks
def _aligned(arrays: Mapping[str, Any], labels: Mapping[str, tuple[str | None, ...]],
             grid: tuple[str, ...]) -> dict[str, Any]:
    """The arrays with every axis not on the grid in one chunk, and the grid's axes
    chunked alike (Dask's unify_chunks)."""
    from dask.array.core import unify_chunks

    pairs: list[Any] = []
    for n, x in arrays.items():
        whole = {k: -1 for k, s in enumerate(labels[n]) if s not in grid and len(x.chunks[k]) > 1}
        pairs += [x.rechunk(whole) if whole else x, tuple(s if s in grid else (n, k)
                                                          for k, s in enumerate(labels[n]))]
    if not pairs:
        return {}
    _, aligned = unify_chunks(*pairs, warn=False)
    return dict(zip(arrays, aligned))


def _chunks_of(arrays: Mapping[str, Any], labels: Mapping[str, tuple[str | None, ...]], symbol: str) -> tuple:
    for n, x in arrays.items():
        if symbol in labels[n]:
            return x.chunks[labels[n].index(symbol)]
    raise AssertionError(symbol)


# ------------------------------------------------------------------------- the graph
def _build(kernel: Any, grid: Grid, split: Split, arrays: Mapping[str, Any],
           labels: Mapping[str, tuple[str | None, ...]], items: Mapping[str, Any], scalars: Mapping[str, Any],
           symbols: Mapping[str, int], cast: bool) -> Any:
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    sig = kernel.signature
    loop = tuple(s for s in grid.symbols if s.startswith("_loop"))  # kernel.map's loop dimensions, first
    token = tokenize(kernel, [s.kernel for s in split.stages], grid.symbols, dict(grid.chunks), grid.split, dict(grid.halos),
                     {n: x.name for n, x in arrays.items()}, {n: x.name for n, x in items.items()},
                     {n: (type(v).__name__, repr(v)) for n, v in scalars.items()}, cast)
    if grid.split is None and not any(grid.halos.values()) and len(sig.outputs) == 1:
        return _blockwise(split.stages[0].kernel, loop, arrays, labels, items, scalars, symbols, cast, token)
    work = f"hologram-{sig.name}-{token}"
    builder = Builder(work, grid, arrays, labels, items, scalars, symbols, cast)
    builder.run(split.stages)
    graph = HighLevelGraph.from_collections(work, builder.tasks, dependencies=[*arrays.values(), *items.values()])
    outs = []
    for p in sig.outputs:
        perm = split.perms.get(p.name)
        shape = (*loop, *(p.shape if perm is None else tuple(p.shape[k] for k in perm)))
        out = builder.output(p.name, shape, p.dtype.np, graph)
        outs.append(out if perm is None else out.transpose(inverse(perm)))
    result = kernel._c.result
    return result(*outs) if result is not None else outs[0] if outs else None


def _blockwise(kernel: Any, loop: tuple[str, ...], arrays: Mapping[str, Any],
               labels: Mapping[str, tuple[str | None, ...]], items: Mapping[str, Any], scalars: Mapping[str, Any],
               symbols: Mapping[str, int], cast: bool, token: str) -> Any:
    """A blockwise kernel of one output as Dask's own `blockwise` layer: built lazily (a
    call over 10,000 chunks costs what one costs), one task per block, and fused by Dask
    with the blockwise operations around it (`lib.relu(x) * 2` is one task per block).
    The kernel is a value of the graph (a `Delayed`), sent to a worker once; `loop` are
    the loop dimensions of a call through `kernel.map`, which `kernel` (a `Mapped`) maps."""
    import dask
    import dask.array as da

    sig = kernel.signature
    feeds: list[Any] = []
    pairs: list[Any] = []
    seen: set[str] = set()
    for p in sig.inputs:
        if p.name in arrays:
            index = tuple(s or f"{p.name}.{k}" for k, s in enumerate(labels[p.name]))
            seen.update(index)
            feeds.append(("block", len(pairs) // 2))
            pairs += [arrays[p.name], index]
        elif p.name in items:
            feeds.append(("item", len(pairs) // 2))
            pairs += [items[p.name], ()]
        else:
            feeds.append(("value", scalars[p.name]))
    out = sig.outputs[0]
    index = (*loop, *(plain_symbol(d) or f"{out.name}.{k}" for k, d in enumerate(out.shape)))
    new_axes = {i: Affine.of(d).evaluate(symbols) for i, d in zip(index, (*loop, *out.shape)) if i not in seen}
    return da.blockwise(tasks.run_output, index, 0, None, dask.delayed(kernel, pure=True), None, feeds, None,
                        cast, None, None, None, None, None, *pairs, new_axes=new_axes, dtype=out.dtype.np,
                        meta=np.empty((0,) * len(out.shape), out.dtype.np), align_arrays=False, concatenate=True,
                        name=f"{out.name}-{sig.name}-{token}")
