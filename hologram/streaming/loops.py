"""`hologram.stream` over loop dimensions: chunks of items through `kernel.map`.

An input with more dimensions than declared (`x` of shape `(rows, n)` for a kernel on
`f32[n]`, or `(a, b, n)`, flattened to `a*b` items) is a batch of items, and each item is
the kernel's whole input: nothing of the kernel needs to be understood to stream it, so
every kernel streams this way, one from a bundle included, without the compiler. A chunk
of items is read into the pool, run by `kernel.map` (one launch of the batched program,
docs/api.md, "Loop dimensions"), and its outputs written back. An input whose loop
dimensions are all 1 (or that has none) is shared by every item, read whole once; one
whose loop dimensions are a broadcast part of the call's is read whole too, and each
chunk gathers its items from it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hologram.call.args import bind_symbols, check_array, check_reductions, complete_symbols, concrete_shape, convert_scalar
from hologram.call.kernel import Kernel
from hologram.call.loops import Core
from hologram.core.errors import ArgumentError
from hologram.streaming.args import (
    SLOT_BYTES, Arg, chunk_array, chunk_rows, loop_rank, refuse_overlaps, slot_limit, temp_bytes,
)
from hologram.streaming.io import IterSource, Pool, Sink, Source, pool_size, run_chunks, sink_for, source_for
from hologram.streaming.mapped import InPlace, in_place_reads


def stream_loops(kernel: Kernel, given: dict[str, Arg], out: Any, budget: int, cast: bool) -> Any:
    opened: list[Source | Sink] = []  # closed however the call ends
    try:
        return _stream_loops(kernel, given, out, budget, cast, opened)
    finally:
        for s in opened:
            s.close()


def _stream_loops(kernel: Kernel, given: dict[str, Arg], out: Any, budget: int, cast: bool,
                  opened: list[Source | Sink]) -> Any:
    c = kernel._c
    sig, name = c.signature, c.signature.name
    where = f"stream({name})"
    ranks = {p.name: loop_rank(p, given[p.name]) for p in sig.inputs}
    loops = {p.name: given[p.name].value.shape[:ranks[p.name]] for p in sig.inputs
             if ranks[p.name] and given[p.name].kind == "array"}
    try:
        shape = np.broadcast_shapes(*loops.values()) if loops else None
    except ValueError:
        listed = ", ".join(f"{n!r} {s}" for n, s in loops.items())
        raise ArgumentError(f"{where}: the loop dimensions of the arguments do not broadcast: {listed}") from None
    count = math.prod(shape) if shape is not None else None
    sources: dict[str, Source] = {}
    reads_in_place: list[InPlace | None] = []  # found at the first streamed array (the kernel prepared then)
    shared: dict[str, Any] = {}
    gathered: dict[str, _Items] = {}
    cores: dict[str, Any] = {}
    for p in sig.inputs:
        a, rank = given[p.name], ranks[p.name]
        if a.kind == "iter":
            if rank != 1:
                raise ArgumentError(f"{where}: the chunks of {p.name!r} must be arrays of items of {p.type}, "
                                    f"each of shape (items, ...) with rank {len(p.shape) + 1}; got shape "
                                    f"{a.first.shape}")
            first = a.first

            def convert(chunk: Any, number: int, p: Any = p, first: np.ndarray = first) -> np.ndarray:
                return chunk_array(name, p, chunk, number, cast, first)

            sources[p.name] = src = IterSource(p.name, name, a.value, a.iterator, first, convert)
            cores[p.name] = Core(src.row_shape)
            continue
        if rank and (1,) * (len(shape) - rank) + loops[p.name] == shape:
            x = a.value
            if x.dtype != p.dtype.np or not x.flags.c_contiguous:
                raise ArgumentError(f"{where}: streamed argument {p.name!r} must be a C-contiguous array of "
                                    f"{p.type} items, got {x.dtype} {'(strided)' if not x.flags.c_contiguous else ''}")
            if not reads_in_place:
                reads_in_place.append(in_place_reads([kernel], budget))
            sources[p.name] = src = source_for(name, p.name, x.reshape((count, *x.shape[rank:])), reads_in_place[0])
            opened.append(src)
            cores[p.name] = Core(src.row_shape)
            continue
        if rank and math.prod(loops[p.name]) != 1:  # a broadcast part of the loop shape: gathered per chunk
            x = check_array(name, p, a.value, cast, rank) if p.kind == "array" else np.ascontiguousarray(a.value)
            gathered[p.name] = _Items(x, rank, shape)
            cores[p.name] = Core(x.shape[rank:])
            continue
        value = a.value
        if p.kind == "scalar":
            shared[p.name] = convert_scalar(name, p, value.reshape(()) if rank else value, cast)
        else:
            shared[p.name] = check_array(name, p, value, cast, rank)
            cores[p.name] = Core(shared[p.name].shape[rank:])
    if count is None and not sources:
        raise ArgumentError(f"{where}: no argument has loop dimensions to stream over")
    symbols = bind_symbols(name, sig.inputs, cores, sig.symbols)
    core = complete_symbols(c.program.symbols, symbols)
    check_reductions(name, c.reductions, core)
    out_cores = [concrete_shape(name, p, core) for p in sig.outputs]
    outs = _outs(where, sig, out, shape, out_cores)
    refuse_overlaps(where, [(n, src.extent) for n, src in sources.items()],
                    [(n, a) for n, a in shared.items() if isinstance(a, np.ndarray)]
                    + [(n, items.flat) for n, items in gathered.items()], outs)
    sinks = [sink_for(name, n, a) for n, a in outs]
    opened.extend(sinks)
    parts = [(s.name, s.dtype, s.row_shape) for s in (*sources.values(), *sinks)]
    # a broadcast argument's items are gathered into a copy per chunk: those keep SLOT_BYTES
    limit = SLOT_BYTES if gathered else slot_limit((*sources.values(), *sinks))
    chunk = chunk_rows(budget, 3, parts, temp_bytes(c.program, core, "", per_item=True), where, limit)
    rows = chunk if count is None else max(min(chunk, count), 1)
    pooled = [(s.name, s.dtype, s.row_shape) for s in (*sources.values(), *sinks) if s.pooled]
    pool = Pool(pool_size(3, rows, pooled))
    order = [p.name for p in sig.inputs]

    def compute(start: int, n: int, inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> None:
        args = [inputs[a] if a in inputs else gathered[a].chunk(start, n) if a in gathered else shared[a]
                for a in order]
        kernel.map(*args, out=tuple(outputs[s.name] for s in sinks))

    seen = run_chunks(list(sources.values()), sinks, chunk, count, pool.slots(3, rows, pooled), compute)
    for s in sinks:
        if s.rows != seen:
            raise ArgumentError(f"{where}: the inputs had {seen} items, but out {s.name!r} has {s.rows}")
    results = _given(out)
    if c.result is not None:
        return c.result(*results)
    return results[0] if results else None


class _Items:
    """An argument whose loop dimensions are a broadcast part of the call's (`(4, 1, n)`
    in a call over `(4, 7)`): it is smaller than the call, read whole, and each chunk of
    the call's items gathers its own items from it (a copy of the chunk's size)."""

    def __init__(self, x: np.ndarray, rank: int, shape: tuple[int, ...]):
        own = (1,) * (len(shape) - rank) + x.shape[:rank]
        self.flat = x.reshape((math.prod(own), *x.shape[rank:]))
        self.own, self.shape = own, shape

    def chunk(self, start: int, n: int) -> np.ndarray:
        coords = np.unravel_index(np.arange(start, start + n, dtype=np.int64), self.shape)
        index = np.ravel_multi_index(tuple(c if d != 1 else np.zeros_like(c) for c, d in zip(coords, self.own)),
                                     self.own)
        return np.ascontiguousarray(self.flat[index])


def _given(out: Any) -> tuple:
    return (out,) if isinstance(out, np.ndarray) else tuple(out)


def _outs(where: str, sig: Any, out: Any, shape: tuple[int, ...] | None, cores: list) -> list[tuple[str, np.ndarray]]:
    """The out= arrays, checked, each as an array of items (its loop dimensions flat)."""
    if out is None:
        raise ArgumentError(f"{where}: every output has a row per item streamed: pass out= to say where they go",
                            hint="an np.memmap for data larger than memory, e.g. "
                                 "np.lib.format.open_memmap(path, mode='w+', dtype=..., shape=...)")
    outs = _given(out) if isinstance(out, (np.ndarray, tuple, list)) else None
    if outs is None or len(outs) != len(sig.outputs):
        raise ArgumentError(f"{where}: out= must hold {len(sig.outputs)} arrays ({', '.join(sig.output_names)})")
    given: list[tuple[str, np.ndarray]] = []
    for p, a, core in zip(sig.outputs, outs, cores):
        if not isinstance(a, np.ndarray):
            raise ArgumentError(f"{where}: out {p.name!r} must be a numpy array, got {type(a).__name__}")
        lead = shape if shape is not None else a.shape[:max(a.ndim - len(core), 0)]
        want = (*lead, *core)
        if a.dtype != p.dtype.np or a.shape != want or not a.flags.c_contiguous or not a.flags.writeable \
                or (shape is None and len(lead) != 1):
            raise ArgumentError(f"{where}: out {p.name!r} must be a writeable C-contiguous array of {p.dtype} "
                                f"({p.dtype.np}) and shape {want if shape is not None else ('items', *core)}, got "
                                f"{a.dtype} {a.shape}")
        given.append((p.name, a.reshape((math.prod(lead), *core))))
    return given
