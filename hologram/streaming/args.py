"""What `hologram.stream` shares between its two ways of streaming: the arguments as
given (arrays, memmaps, iterables of chunks), chunks checked, chunk sizes from the pool's
budget, and outputs that overlap inputs refused (streaming in place allowed)."""

from __future__ import annotations

import math
import numbers
from typing import Any, Iterable, Mapping, Sequence

import attrs
import numpy as np

from hologram.call.args import cast_array, complete_symbols, plain_array
from hologram.call.mapping import Extent, extent
from hologram.compiler.signature import Param
from hologram.core.errors import ArgumentError, StreamError
from hologram.streaming.io import ALIGN, pool_size

DEFAULT_POOL_BYTES = 64 << 20
MAX_CHUNK_ROWS = 1 << 40  # a bound for the search; a pool never holds more rows than this
# The most bytes one chunk's buffers (every streamed input and output) take, unless a
# single row is larger: a chunk the reader just read is then still in cache when the
# kernel reads it. Measured on 1 GiB of f32 in the page cache, pool 64 MiB, best of 3,
# interleaved (2-core Xeon VM, 2 MiB L2 a core; benchmarks/stream.py's kernels), for a
# slot of 1 / 2 / 4 / 8 / 16 / 32 MiB: sum 3.2 / 4.2 / 5.0 / 5.6 / 1.1 / 1.2 GB/s,
# y = 2x + 1 to a second memmap 1.5 / 1.7 / 1.9 / 0.53 / 0.55 / 0.56 GB/s.
SLOT_BYTES = 4 << 20
# The most bytes one chunk's streamed arrays take when none of them goes through the pool
# (arrays in memory, memmaps read in place: hologram.streaming.mapped maps one window per
# chunk then): no copy to keep in cache, so fewer, larger kernel launches. Measured:
# cpu_llvm's `sum` over a warm 2 GiB f32 file mapped whole, one call per 4 / 32 / 128 MiB,
# 6.8 / 9.8 / 12.5 GB/s with two threads and 13.6 / 15.1 / 15.2 with one (2-core VM,
# load average 2.6: a two-thread launch waits for the busier core; docs/streaming.md).
IN_PLACE_BYTES = 32 << 20


@attrs.frozen
class Arg:
    """One argument as given: `kind` is "array" (an ndarray, memmap included), "iter"
    (an iterable of chunks: `first` is its first chunk, taken from `iterator`), or
    "value" (anything else: a scalar, or what cast=True converts)."""

    kind: str
    value: Any
    first: np.ndarray | None = None
    iterator: Any = None


def pool_bytes(value: Any) -> int:
    if value is None:
        return DEFAULT_POOL_BYTES
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ArgumentError(f"stream(): pool_bytes must be a positive integer, got {value!r}")
    return int(value)


def classify(kernel: str, p: Param, value: Any, cast: bool) -> Arg:
    if isinstance(value, np.ndarray):
        if type(value) is not np.ndarray and not isinstance(value, np.memmap):
            plain_array(f"stream({kernel}): argument {p.name!r}", value)  # a masked array is refused
        return Arg("array", value)
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable) or \
            (cast and isinstance(value, (list, tuple)) and all(isinstance(v, numbers.Number) for v in value)):
        return Arg("value", value)  # with cast=True, a list of numbers is an array, as a kernel call takes it
    iterator = iter(value)
    first = next(iterator, None)
    if first is None:
        raise ArgumentError(f"stream({kernel}): argument {p.name!r} is an iterable with no chunks",
                            hint="give at least one array of rows (it may have 0 rows)")
    return Arg("iter", value, chunk_array(kernel, p, first, 0, cast, None), iterator)


def chunk_array(kernel: str, p: Param, chunk: Any, number: int, cast: bool, like: np.ndarray | None) -> np.ndarray:
    """Chunk `number` of input `p` as an array of rows: the declared dtype (converted only
    with cast=True) and, after the first, the first chunk's rank and row shape."""
    where = f"stream({kernel}): chunk {number} of argument {p.name!r}"
    if not isinstance(chunk, np.ndarray):
        if not cast:
            raise ArgumentError(f"{where} must be a numpy array of rows, got {type(chunk).__name__}",
                                hint="pass cast=True to convert chunks")
        try:
            chunk = np.asarray(chunk)
        except Exception as exc:
            raise ArgumentError(f"{where} cannot be converted to an array of rows: {exc}") from None
    chunk = chunk.view(np.ndarray) if type(chunk) is not np.ndarray else chunk
    if chunk.ndim == 0:
        raise ArgumentError(f"{where} must be an array of rows, got a 0-d array")
    want = p.dtype.np
    if chunk.dtype != want:
        if not cast:
            raise ArgumentError(f"{where} must have dtype {p.dtype} ({want}), got {chunk.dtype}",
                                hint="pass cast=True to convert each chunk")
        chunk = cast_array(where, p.name, chunk, p.dtype)
    if like is not None and (chunk.ndim != like.ndim or chunk.shape[1:] != like.shape[1:]):
        raise ArgumentError(f"{where} has shape {chunk.shape}; its rows must have the first chunk's shape "
                            f"{like.shape[1:]}")
    return chunk


def loop_rank(p: Param, a: Arg) -> int:
    if a.kind == "array":
        return max(a.value.ndim - len(p.shape), 0) if p.kind == "array" else a.value.ndim
    if a.kind == "iter":
        return max(a.first.ndim - len(p.shape), 0) if p.kind == "array" else 1
    return 0


# ------------------------------------------------------------------------ chunk sizes
def chunk_rows(budget: int, slots: int, parts: Sequence[tuple[str, np.dtype, tuple[int, ...]]],
               temp_bytes: Any, where: str, slot_bytes: int = SLOT_BYTES) -> int:
    """The most rows a chunk may have: `slots` buffers of every streamed input and output
    (`parts`, each (name, dtype, row shape)) plus the step's temporaries for that many
    rows (`temp_bytes(rows)`) within `budget` bytes, and one slot within `slot_bytes`
    (unless a single row is larger; `slot_limit`). A function of the kernel, the row
    shapes, the budget and whether the pass copies through the pool, so the same pool
    and the same kinds of arguments give the same chunks, and the same bits."""
    def fits(rows: int) -> bool:
        return pool_size(slots, rows, parts) + temp_bytes(rows) <= budget and (
            rows == 1 or pool_size(1, rows, parts) <= slot_bytes)

    if not fits(1):
        need = least_pool(slots, parts, temp_bytes)
        raise ArgumentError(f"{where}: pool_bytes={budget} cannot hold one row of every streamed array: that "
                            f"takes {need} bytes ({slots} buffers of each, {ALIGN}-byte aligned, and the "
                            "kernel's temporaries)", hint=f"pass pool_bytes of at least {need}")
    lo, hi = 1, MAX_CHUNK_ROWS
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def slot_limit(streamed: Iterable[Any]) -> int:
    """`chunk_rows`' bound on one chunk for a pass over these sources and sinks:
    `SLOT_BYTES` when any of them is copied through the pool (`pooled`), else
    `IN_PLACE_BYTES` (arrays in memory and memmaps read in place)."""
    return SLOT_BYTES if any(s.pooled for s in streamed) else IN_PLACE_BYTES


def least_pool(slots: int, parts: Sequence[tuple[str, np.dtype, tuple[int, ...]]], temp_bytes: Any) -> int:
    """The least budget `chunk_rows` accepts: chunks of one row."""
    return pool_size(slots, 1, parts) + temp_bytes(1)


def temp_bytes(program: Any, symbols: Mapping[str, int], symbol: str, per_item: bool = False) -> Any:
    """rows -> the bytes of `program`'s temporaries when `symbol` is `rows` (or, with
    `per_item`, `rows` times one item's temporaries: a batched program's)."""
    from hologram.core.types import Affine

    def size(rows: int) -> int:
        bound = complete_symbols(program.symbols, dict(symbols) if per_item else {**symbols, symbol: rows})
        total = sum(math.prod(Affine.of(d).evaluate(bound) for d in t.shape) * t.dtype.np.itemsize
                    for t in program.temps)
        return total * rows if per_item else total

    return size


def refuse_overlaps(where: str, streamed: Sequence[tuple[str, Extent | None]], whole: Sequence[tuple[str, np.ndarray]],
                    outputs: Sequence[tuple[str, np.ndarray]]) -> None:
    """Refuse outputs written a chunk at a time (`outputs`) whose bytes overlap an
    input's, however the two reach them (one array, two mappings of one file, a file
    read with pread: hologram.call.mapping). A call copies such an input first; a
    stream cannot, its input being larger than memory. Two exceptions hold by
    construction: an output that is exactly a streamed input's bytes (in place: each
    chunk is read before it is written, and a plan writes its outputs in its last pass
    only); nothing else: an input read whole (`whole`) is read by every chunk, and a
    chunk written over it would change what the later chunks read. Two outputs that
    overlap are an ArgumentError, as in a call."""
    given = [(name, extent(a)) for name, a in outputs if a.size]
    for i, (name, e) in enumerate(given):
        for other, f in given[:i]:
            if e.overlaps(f):
                raise ArgumentError(f"{where}: out {other!r} and out {name!r} share memory")
    hint = ("a stream cannot copy its input first as a call does (it does not fit in memory): give out= an array "
            "of its own, or the input itself to stream in place")
    for name, e in given:
        for source, f in streamed:
            if f is not None and f.overlaps(e) and f != e:
                raise StreamError(f"{where}: out {name!r} overlaps input {source!r} without being it"
                                  f"{_in(e, f)}", hint=hint)
        for source, a in whole:
            if a.size and extent(a).overlaps(e):
                raise StreamError(f"{where}: out {name!r} overlaps input {source!r}, which every chunk reads "
                                  f"whole{_in(e, extent(a))}", hint=hint)


def _in(output: Extent, source: Extent) -> str:
    """Where the two meet, when it is a file: which of its bytes each spans."""
    if output.file is None:
        return ""
    return (f" (of {output.path or 'one file'}, out holds bytes {output.start} to {output.end}, the input "
            f"{source.start} to {source.end})")
