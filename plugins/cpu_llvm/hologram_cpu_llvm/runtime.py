"""Running prepared programs: the executable, argument binding, stage launch, errors.

A launch is on the hot path of every kernel call, so everything that depends only on the
program is precomputed at prepare time (`Executable`), everything that depends only on
the shape symbols is memoized per symbol tuple (`Geometry`), and what is left per call is
a handful of attribute reads per buffer plus one ctypes call per stage.

The stage function ABI (shared with codegen.py):
    void stage(i64 block_start, i64 block_end, ptr bufs, ptr syms, ptr scalars,
               ptr partials, ptr err)
err points to four i64 `[code, stage index, instruction index, value]`; the instruction
index counts stage body items, labels included (as the verifier's and the interpreter's
messages do). The codes are abi.py's `ERR_*`. err[0] is zero on entry, and err[3] the
launch's cancel mark (`cancel.begin`): CANCELLABLE lets Ctrl-C stop the stage with
ERR_CANCELLED, which `execution_error` turns into KeyboardInterrupt.
"""

from __future__ import annotations

import ctypes
import math
import struct
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from hologram.backend import (Formula, LaunchBinding, Program, Slot, Value, domain_extents, error_record,
                              lane_cost, lead_lane_axes, trace)
from hologram.errors import ArgumentError, ExecutionError

from . import cancel, loader, threads


# Below this cost (lanes times each lane's weighted operations, `lane_cost`: a load or
# an add 1, a transcendental 16) a stage runs on the calling thread. Threads pay from
# about 2.5e5 lanes of a memory-bound `a + b` (6 per lane), 4e5-7e5 of a sum (4), and
# below 7e4 of a tanh (20): one cost serves all three where one count of lanes could
# not (docs/cpu-llvm.md, "Threads", has the measurements).
INLINE_COST = 3 << 19

# A stage that runs on threads is split into chunks of fixed block ranges, which the
# threads claim one at a time (native_pool.py), so a thread that loses its CPU to another
# process holds up one chunk, not a thread's share: up to CHUNKS_PER_THREAD per thread,
# each costing at least CHUNK_COST (~150 µs of `a + b` here, so that a chunk's fixed
# cost, ~1-2 µs of claiming, calling and bookkeeping, stays near 1%: at INLINE_COST / 2
# a 1e6-element sum split into 5 chunks instead of 2 was ~2% slower, and gained nothing
# a preemption of milliseconds would notice), and never fewer than one per thread.
# A reduction stage is split past one chunk per thread only when its partials (a copy
# of every reduced buffer per chunk, filled and merged in Python) hold at most
# SMALL_PARTIALS elements in all: a full sum has 1, a 256-bin histogram 256. The count
# depends on the launch's geometry and the thread count only, never on timing, so a
# float reduction's result is the same at every run with the same thread count
# (docs/decisions.md, "More chunks than threads").
CHUNKS_PER_THREAD = 4
CHUNK_COST = INLINE_COST * 2
SMALL_PARTIALS = 4096

STAGE_FN = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_char_p, ctypes.c_char_p,
                            ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p)
ErrSlot = ctypes.c_int64 * 4

# Reduction opcode -> (kind, merge ufunc). ResAccum is a sum over Atlas classes.
REDUCE_KINDS: dict[str, tuple[str, np.ufunc]] = {
    "ReduceAdd": ("add", np.add), "ResAccum": ("add", np.add), "ReduceMul": ("mul", np.multiply),
    "ReduceMin": ("min", np.minimum), "ReduceMax": ("max", np.maximum),
}


def identity(kind: str, dtype: np.dtype) -> Any:
    """The value a partial starts from: `x (op) identity == x` bit for bit (so -0.0 for a
    float sum: +0.0 would turn a -0.0 already in memory into +0.0)."""
    floating = dtype.kind == "f"
    if kind == "add":
        return -0.0 if floating else 0
    if kind == "mul":
        return 1
    if kind == "min":
        return np.inf if floating else np.iinfo(dtype).max
    return -np.inf if floating else np.iinfo(dtype).min


# ------------------------------------------------------------------------ data pointers
_ARRAY_DATA_OFFSET = object.__basicsize__  # PyArrayObject_fields: PyObject_HEAD, then `char *data`
_read_ptr = ctypes.c_void_p.from_address


def _struct_pointer_works() -> bool:
    probe = np.arange(3, dtype=np.int64)[1:]
    return _read_ptr(id(probe) + _ARRAY_DATA_OFFSET).value == probe.ctypes.data


if _struct_pointer_works():
    def data_ptr(a: np.ndarray) -> int:
        """The address of `a`'s first element, read from numpy's public C struct
        (`PyArray_DATA`): `a.ctypes.data` costs ~1 us, this ~0.2 us. Checked at import."""
        return _read_ptr(id(a) + _ARRAY_DATA_OFFSET).value or 0
else:  # pragma: no cover - a Python/numpy build with another object layout
    def data_ptr(a: np.ndarray) -> int:
        return a.ctypes.data


# ---------------------------------------------------------------------- the executable
class ReduceSlot(Value, eq=False):
    """A buffer a stage reduces into: what its partial results combine with."""

    __slots__ = ("buffer", "ufunc", "identity")
    buffer: int  # index into Executable.buffers
    ufunc: np.ufunc
    identity: Any

    def __init__(self, buffer: int, ufunc: np.ufunc, identity: Any) -> None:
        self._init(buffer=buffer, ufunc=ufunc, identity=identity)


class StagePlan(Value, eq=False):
    """One stage of an Executable: its native function and what a launch does around it."""

    __slots__ = ("name", "index", "fn", "block", "inits", "reduces", "plain", "address")
    name: str
    index: int
    fn: Callable
    block: tuple[int, int, int]
    inits: tuple[tuple[int, int, np.generic], ...]  # (buffer index, offset, value in the buffer's dtype)
    reduces: tuple[ReduceSlot, ...]
    plain: bool  # no inits, no reductions: launching it is just the call
    address: int  # of the native function `fn` calls

    def __init__(self, name: str, index: int, fn: Callable, block: tuple[int, int, int],
                 inits: tuple[tuple[int, int, np.generic], ...], reduces: tuple[ReduceSlot, ...]) -> None:
        self._init(name=name, index=index, fn=fn, block=block, inits=inits, reduces=reduces,
                   plain=not inits and not reduces, address=ctypes.cast(fn, ctypes.c_void_p).value)


class Geometry(Value, eq=False):
    """What the shape symbols fix: element count and byte size of every buffer, and per
    stage the number of blocks and lanes; and whether a launch may run long (a stage's
    cost at INLINE_COST or more, or a loop whose trip count comes from data, which no
    geometry bounds): only such a launch re-arms the Ctrl-C hook (cancel.arm, ~1 µs)."""

    __slots__ = ("sizes", "nbytes", "grids", "long")
    sizes: tuple[int, ...]
    nbytes: tuple[int, ...]
    grids: tuple[tuple[int, int], ...]  # (blocks, cost: lanes times the cost of a lane) per stage
    long: bool

    def __init__(self, sizes: tuple[int, ...], nbytes: tuple[int, ...], grids: tuple[tuple[int, int], ...],
                 long: bool = False) -> None:
        self._init(sizes=sizes, nbytes=nbytes, grids=grids, long=long)


class Executable(Value, eq=False):
    """A prepared program: what `CpuLlvmBackend.prepare` returns. It holds the engine
    that owns the machine code, so the code lives exactly as long as this object."""

    __slots__ = ("program", "key", "stages", "binding", "loaded", "pack_ptrs", "pack_syms", "from_cache",
                 "alias_pairs", "_geometries", "_costs")
    program: Program
    key: str
    stages: tuple[StagePlan, ...]
    binding: LaunchBinding  # the buffers (params in param order, then temps) and scalars, and every launch check
    loaded: loader.Loaded
    pack_ptrs: Callable[..., bytes]  # struct packers of the bufs and syms arrays
    pack_syms: Callable[..., bytes]
    from_cache: bool
    # (written param, other param) pairs that may need an alias check at launch
    alias_pairs: tuple[tuple[int, int], ...]
    _geometries: dict[tuple[int, ...], Geometry]  # by symbol values, the last 64
    # per stage: (lane_cost, the lead lane axis), once known
    _costs: list[tuple[Formula, int | None]]

    def __init__(self, program: Program, key: str, stages: tuple[StagePlan, ...], binding: LaunchBinding,
                 loaded: loader.Loaded, pack_ptrs: Callable[..., bytes], pack_syms: Callable[..., bytes],
                 from_cache: bool = False, alias_pairs: tuple[tuple[int, int], ...] = ()) -> None:
        self._init(program=program, key=key, stages=stages, binding=binding, loaded=loaded, pack_ptrs=pack_ptrs,
                   pack_syms=pack_syms, from_cache=from_cache, alias_pairs=alias_pairs, _geometries={}, _costs=[])

    def __repr__(self) -> str:  # not the loaded code nor the packers
        return f"Executable(program={self.program.name!r}, key={self.key!r}, from_cache={self.from_cache!r})"

    @property
    def buffers(self) -> tuple[Slot, ...]:
        return self.binding.buffers

    @property
    def nparams(self) -> int:
        return self.binding.nparams

    def geometry(self, syms: tuple[int, ...]) -> Geometry:
        g = self._geometries.get(syms)
        if g is None:
            g = self._geometry(syms)
            if len(self._geometries) >= 64:
                self._geometries.clear()
            self._geometries[syms] = g
        return g

    def _geometry(self, syms: tuple[int, ...]) -> Geometry:
        sizes = self.binding.sizes(syms)
        grids = []
        named = dict(zip(self.program.symbols, syms))
        if not self._costs:  # at the first launch, not in prepare: a warm load stays a load
            self._costs[:] = [(lane_cost(s), lead_lane_axes(s)) for s in (self.program.stages[st.index]
                                                                        for st in self.stages)]
        for st, (cost, lead) in zip(self.stages, self._costs):
            ext = domain_extents(self.program.stages[st.index], named)
            lanes = math.prod(ext)
            if lanes >= _I64:  # lane and block ids are i64 in the native code
                raise ExecutionError(f"stage '{st.name}': the domain {ext} has {lanes} lanes, more than 2**63")
            for a in lead:  # one lane per block works (and is run) along these axes
                if ext[a]:
                    lanes = lanes // ext[a] * -(-ext[a] // st.block[a])
            grids.append((math.prod(-(-n // b) for n, b in zip(ext, st.block)), lanes * _per_lane(cost, named)))
        counted_by_data = any(name.startswith("trips.") for cost, _ in self._costs for name in cost.symbols)
        return Geometry(sizes, tuple(n * b.np.itemsize for n, b in zip(sizes, self.buffers)),
                        tuple(grids), counted_by_data or any(cost >= INLINE_COST for _, cost in grids))


# ---------------------------------------------------------------------------- launch
def launch(exe: Executable, buffers: Mapping[str, np.ndarray], scalars: Mapping[str, Any],
           symbols: Mapping[str, int], num_threads: int) -> None:
    """Run every stage of `exe` in order (what `CpuLlvmBackend.launch` does)."""
    binding = exe.binding
    syms = binding.symbol_values(symbols)
    geo = exe.geometry(syms)
    arrays = binding.arrays(buffers, geo.sizes)
    scalar_bytes = pack_scalars(binding.scalar_values(scalars)) if binding.scalars else b""
    if binding.temps:
        arrays += binding.temporaries(geo.sizes)
    ptrs = [data_ptr(a) for a in arrays]
    if exe.alias_pairs:
        unalias(exe, geo, arrays, ptrs)
    packed = bufs, sym_bytes, scalar_bytes = exe.pack_ptrs(*ptrs), exe.pack_syms(*syms), scalar_bytes
    if geo.long:
        cancel.arm()
    mark = cancel.begin()
    short = trace.recorder is None  # a traced launch times every stage in run_stage
    for stage, grid in zip(exe.stages, geo.grids):
        if short and stage.plain and grid[1] < INLINE_COST:  # the common small case, kept short
            if grid[0]:
                err = ErrSlot()
                err[3] = mark  # (ErrSlot(0, 0, 0, mark) costs 0.4 µs more)
                stage.fn(0, grid[0], bufs, sym_bytes, scalar_bytes, None, err)
                if err[0]:
                    raise execution_error(exe, tuple(err), arrays)
        else:
            run_stage(exe, stage, grid, arrays, packed, num_threads, mark)


_I64 = 1 << 63


def _per_lane(cost: Formula, symbols: Mapping[str, int]) -> int:
    """`cost` at these symbol values, a data-dependent trip count taken as 1."""
    unknown = {s: 1 for s in cost.symbols if s.startswith("trips.")}
    return max(cost.evaluate({**symbols, **unknown}), 1)


def unalias(exe: Executable, geo: Geometry, arrays: list[np.ndarray], ptrs: list[int]) -> None:
    """Make the code's `noalias` promise true. An input overlapping a written buffer is
    replaced by a copy (as if it were read in full before anything is written); two
    overlapping buffers that are both written have no meaningful result and are refused."""
    nbytes = geo.nbytes
    for i, j in exe.alias_pairs:
        if nbytes[i] and nbytes[j] and ptrs[j] < ptrs[i] + nbytes[i] and ptrs[i] < ptrs[j] + nbytes[j]:
            if exe.buffers[j].written:
                raise ArgumentError(f"buffers '{exe.buffers[i].name}' and '{exe.buffers[j].name}' overlap in "
                                    f"memory and the program writes both; pass distinct arrays")
            arrays[j] = arrays[j].copy()
            ptrs[j] = data_ptr(arrays[j])


def pack_scalars(values: Sequence[np.generic]) -> bytes:
    """One 8-byte slot per scalar param (`values`, the binding's `scalar_values`), the
    value's native bytes at the slot start. numpy scalars expose their bytes through the
    buffer protocol, which `join` reads directly (10x faster than `tobytes`; and unlike
    struct, NaN payloads survive)."""
    out = []
    for v in values:
        out.append(v)
        out.append(_PADDING[v.itemsize])
    return b"".join(out)


_PADDING = {n: bytes(8 - n) for n in (1, 2, 4, 8)}


def chunk_count(nblocks: int, cost: int, num_threads: int, partial_elements: int = 0) -> int:
    """How many chunks a stage of `nblocks` blocks costing `cost` is split into on
    `num_threads` threads: 1 below INLINE_COST (or on one thread); else one per thread
    (at most one per block) and, where the partials are small (`partial_elements`, the
    reduced buffers' elements in all, at most SMALL_PARTIALS), up to CHUNKS_PER_THREAD
    per thread, each costing at least CHUNK_COST. A function of the launch only: chunk
    boundaries, and so a float reduction's order of combination, never depend on timing."""
    if cost < INLINE_COST or num_threads < 2:
        return 1
    n = min(num_threads, nblocks)
    if partial_elements <= SMALL_PARTIALS:
        n = max(n, min(num_threads * CHUNKS_PER_THREAD, cost // CHUNK_COST, nblocks))
    return n


def run_stage(exe: Executable, stage: StagePlan, grid: tuple[int, int], arrays: list[np.ndarray],
              packed: tuple[bytes, bytes, bytes], num_threads: int, mark: int = 0) -> None:
    """Inits, then the stage's blocks (inline or in `chunk_count` contiguous chunks that
    the threads claim as they go), then the error slots in chunk order, then the
    reduction partials merged in chunk order. `mark` is the launch's cancel mark
    (`cancel.begin`), put in every error slot. While a trace records, the stage is a
    span and each chunk of a split one another, on the thread that ran it (the native
    pool times its chunks: docs/cpu-llvm.md)."""
    rec = trace.recorder
    t0 = trace.now() if rec is not None else 0
    for b, offset, value in stage.inits:
        flat = arrays[b].reshape(-1)
        if not 0 <= offset < flat.size:
            raise ExecutionError(f"stage '{stage.name}': init of '{exe.buffers[b].name}' at offset {offset} is "
                                 f"out of bounds ({flat.size} elements)")
        flat[offset] = value
    nblocks, cost = grid
    if nblocks == 0:
        return
    bufs, syms, scalars = packed
    fn = stage.fn
    if stage.reduces:
        flats = [arrays[r.buffer].reshape(-1) for r in stage.reduces]
        nchunks = chunk_count(nblocks, cost, num_threads, sum(f.size for f in flats))
        partials = [chunk_partials(nchunks, f.size, r.identity, f.dtype) for r, f in zip(stage.reduces, flats)]
        starts = [data_ptr(p) for p in partials]
        rows = [p.strides[0] for p in partials]
        partial_ptrs = [struct.pack(f"<{len(starts)}Q", *[at + k * row for at, row in zip(starts, rows)])
                        for k in range(nchunks)]
    else:
        nchunks = chunk_count(nblocks, cost, num_threads)
        partial_ptrs = [None] * nchunks
    times = None  # per chunk (thread ident, start, end), when traced
    if nchunks == 1:
        slots = ErrSlot()
        slots[3] = mark
        fn(0, nblocks, bufs, syms, scalars, partial_ptrs[0], slots)
    else:
        bounds = [nblocks * i // nchunks for i in range(nchunks + 1)]
        slots = (ctypes.c_int64 * (4 * nchunks))()  # four words per chunk (one object, not one per chunk)
        slots[3::4] = [mark] * nchunks
        at = ctypes.addressof(slots)
        errs = [at + 32 * i for i in range(nchunks)]
        native = threads.native(num_threads)
        if rec is not None:
            times = (ctypes.c_int64 * (3 * nchunks))()
        if native is not None:  # one uninterruptible native call: nothing is freed under a worker
            chunks = [(bounds[i], bounds[i + 1], partial_ptrs[i], errs[i]) for i in range(nchunks)]
            if times is None:
                native.run(fn, stage.address, bufs, syms, scalars, chunks)
            else:
                native.run(fn, stage.address, bufs, syms, scalars, chunks, times)
        else:
            # A task keeps the memory it writes alive: if the caller is interrupted while
            # waiting, workers still running must not write into freed arrays.
            keepalive = (exe, arrays, partials if stage.reduces else None, slots)

            def chunk(i: int) -> Callable[[], None]:
                def run(_: Any = keepalive) -> None:
                    fn(bounds[i], bounds[i + 1], bufs, syms, scalars, partial_ptrs[i], errs[i])
                return run if times is None else threads.timed(run, times, i)
            threads.pool(num_threads).run([chunk(i) for i in range(nchunks)])
    failed = None
    if any(codes := slots[0::4]):  # the first in chunk order, whichever thread ran it and when
        k = 4 * next(i for i, code in enumerate(codes) if code)
        failed = slots[k:k + 4]
    if stage.reduces and failed is None:
        with np.errstate(all="ignore"):  # inf - inf in a float sum is a value, not an error
            for r, flat, p in zip(stage.reduces, flats, partials):
                r.ufunc(flat, merged(r.ufunc, p), out=flat)
    if rec is not None:
        _trace_stage(exe, stage, nblocks, cost, t0, times, bounds if times is not None else None)
    if failed is not None:
        raise execution_error(exe, tuple(failed), arrays)


def chunk_partials(nchunks: int, size: int, identity: Any, dtype: np.dtype) -> np.ndarray:
    """The partials of one reduced buffer of `size` elements: a row per chunk, filled
    with `identity` (one `np.full`), rows at least a cache line apart: a sum's chunks
    would otherwise share one line, and the threads running neighbouring chunks write
    their partials at once."""
    stride = -(-size * dtype.itemsize // 64) * 64 + 64  # bytes; a multiple of every itemsize
    return np.full((nchunks, stride // dtype.itemsize), identity, dtype)[:, :size]


def merged(ufunc: np.ufunc, rows: np.ndarray) -> np.ndarray:
    """`((rows[0] (op) rows[1]) (op) rows[2]) ...`: a stage's partials (a row per chunk)
    combined in chunk order. For a few elements per row `accumulate` along the rows
    computes exactly that fold, one row after another (no pairwise regrouping, unlike
    `reduce`), in one call (~1 µs for 8 rows of one element, where the fold calls the
    ufunc per row); it walks a column at a time, so wider rows are folded row by row."""
    if rows.shape[0] == 1:
        return rows[0]
    if rows.shape[1] <= 16:
        return ufunc.accumulate(rows, axis=0)[-1]
    total = rows[0]
    for p in rows[1:]:
        ufunc(total, p, out=total)
    return total


def _trace_stage(exe: Executable, stage: StagePlan, nblocks: int, cost: int, t0: int, times: Any,
                 bounds: Sequence[int] | None) -> None:
    """The stage's span, and one per chunk from the (thread, start, end) records."""
    chunks = 1 if bounds is None else len(bounds) - 1
    trace.complete(f"stage {stage.name}", "stage", t0, trace.now(),
                   {"kernel": exe.program.name, "stage": stage.name, "blocks": nblocks, "cost": cost,
                    "chunks": chunks})
    if bounds is None:
        return
    lanes = stage.block[0] * stage.block[1] * stage.block[2]
    for i in range(chunks):
        ident, start, end = times[3 * i], times[3 * i + 1], times[3 * i + 2]
        if not end:
            continue  # not timed (a platform without the native clock)
        trace.complete(f"chunk {stage.name}", "chunk", start, end,
                       {"stage": stage.name, "chunk": i, "blocks": [bounds[i], bounds[i + 1]],
                        "lanes": [bounds[i] * lanes, bounds[i + 1] * lanes]}, ident & _U64)


_U64 = (1 << 64) - 1  # a pthread_t read as a signed word, back to Python's thread ident


# ---------------------------------------------------------------------------- errors
def execution_error(exe: Executable, record: tuple[int, ...], arrays: Sequence[np.ndarray]) -> BaseException:
    """The exception for an error record `[code, stage, instruction, value]` (the SDK's
    decoding, error_record.execution_error: the interpreter's words, MemoryError for
    scratch, KeyboardInterrupt for Ctrl-C)."""
    sizes = {b.name: a.size for a, b in zip(arrays, exe.buffers)}
    return error_record.execution_error(exe.program, record, sizes, backend="cpu_llvm", reporter="native code")
