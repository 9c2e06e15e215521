"""Launchers: a launch for one binding of the shape symbols, its checks made cheap.

`CpuLlvmBackend.launcher(exe, symbols)` returns `run(*buffers, *scalars)`. It accepts
only arrays of exactly the declared dtype and shape under those symbols (C-contiguous,
writeable where written) and numpy scalars of exactly the declared types, and declines
anything else by returning False, having run nothing; so native code never depends on
its caller for sizes. Everything that depends only on the program and the symbols (the
geometry, the packed symbols, the accepted shapes, which stages run inline, which
buffer pairs could overlap and their byte sizes) is computed once, here.

When every stage is small enough to run inline, `run` is a native builtin
(trampoline.py) that checks, reads the data pointers, tests the overlaps and calls the
stages in one call from Python, temporaries included (allocated once per launcher), and
so are `.init`s and reductions into buffers every element of which the stage seeds (or
of an integer type): such a buffer is its own partial, one thread accumulating into it.
Otherwise it is `general`: the same checks and the same launch as runtime.launch, in
Python. A launch that may run long (`Geometry.long`:
a big stage, or loops counting by data, which no geometry bounds) takes `general`,
which puts the Ctrl-C hook back in place at every call (cancel.arm). `Kernel` calls it
on its fast path (hologram.call.fastcall) and takes its full path, with its
messages, on a decline.
"""

from __future__ import annotations

import collections
import struct
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from hologram.backend import Instr, exact_arguments

from . import cancel, trampoline
from .runtime import _PADDING, REDUCE_KINDS, Executable, Geometry, data_ptr, execution_error, run_stage, unalias

Run = Callable[..., None]
# A general launcher keeps one set of temporaries this large or smaller for its next
# launch: the memory a cached launcher may hold between calls.
SPARE_TEMPORARY_BYTES = 64 << 20
_Sized = collections.namedtuple("_Sized", "size")


def make_launcher(exe: Executable, symbols: Mapping[str, int], num_threads: Callable[[], int]) -> Run:
    """`run(*buffers, *scalars)`: the program's buffer params in order, then its scalar
    params in order. It returns False, having run nothing, unless every buffer is an
    exact `ndarray` of the declared dtype and shape (under `symbols`), C-contiguous and
    writeable where written, and every scalar a numpy scalar of the declared type; else
    it launches and returns None. Inputs overlapping a written buffer are copied, and
    two overlapping written buffers refused, exactly as `launch` does. `num_threads` is
    read per call (the backend's attribute may change)."""
    binding = exe.binding
    syms = binding.symbol_values(symbols)
    geo = exe.geometry(syms)  # raises as `launch` would for a negative or huge geometry
    sym_bytes = exe.pack_syms(*syms)
    pack_ptrs = exe.pack_ptrs
    pack_scalars = _scalar_packer(exe)
    nparams = binding.nparams
    accepts, scalar_types = binding.accepts(syms)

    # Temporaries of finished launches, taken by the next one and zeroed then (a fill is
    # cheaper than fresh pages, which fault in as the stages first touch them); list
    # pop/append are atomic, so launches from several threads each get their own set.
    spare: list[list[np.ndarray]] = []
    keep = binding.temps and sum(geo.nbytes[nparams:]) <= SPARE_TEMPORARY_BYTES

    def general(*args: Any) -> bool | None:
        if not exact_arguments(args, accepts, scalar_types):
            return False
        arrays = list(args[:nparams])
        temps = _zeroed(spare.pop()) if spare else binding.temporaries(geo.sizes)
        arrays += temps
        ptrs = [data_ptr(a) for a in arrays]
        if exe.alias_pairs:
            unalias(exe, geo, arrays, ptrs)
        packed = pack_ptrs(*ptrs), sym_bytes, pack_scalars(args[nparams:])
        threads = num_threads()
        if geo.long:
            cancel.arm()
        mark = cancel.begin()
        try:
            for stage, grid in zip(exe.stages, geo.grids):
                run_stage(exe, stage, grid, arrays, packed, threads, mark)
        finally:
            if keep and not spare:
                spare.append(temps)
        return None

    cancel.arm()
    native = None if geo.long else _native_stages(exe, geo)
    if native is None or not trampoline.available():
        return general

    sized = [_Sized(n) for n in geo.sizes]  # what execution_error reads of the arrays

    def on_error(record: bytes) -> None:
        raise execution_error(exe, struct.unpack("<4q", record), sized)

    nbytes = geo.nbytes
    return trampoline.native_launcher(
        accepts, [s.np for s in binding.scalars], syms,
        [(i, j, nbytes[i], nbytes[j]) for i, j in exe.alias_pairs if nbytes[i] and nbytes[j]],
        native, general, on_error, binding.temporaries(geo.sizes) if binding.temps else ())


def _zeroed(arrays: list[np.ndarray]) -> list[np.ndarray]:
    for a in arrays:
        a.fill(0)
    return arrays


def _native_stages(exe: Executable, geo: Geometry) -> list[trampoline.NativeStage] | None:
    """The stages as the native entry point runs them, or None when one cannot be: a
    stage reducing into a float buffer some element of which its `.init`s leave unseeded
    (its buffer is then its own partial, and a float sum onto a value already there
    rounds in another order than the partial's merge; integers are exact in any order),
    or an `.init` outside its buffer (the general path raises that error)."""
    out = []
    for st, (blocks, _) in zip(exe.stages, geo.grids):
        inits = []
        for b, offset, value in st.inits:
            if not 0 <= offset < geo.sizes[b]:
                return None
            raw = value.tobytes()
            inits.append((b, offset * len(raw), len(raw), struct.unpack("<q", raw.ljust(8, b"\0"))[0]))
        seeded = {(b, offset) for b, offset, _ in st.inits}  # inside their buffers (checked above)
        for r in st.reduces:
            if exe.buffers[r.buffer].np.kind == "f" and sum(b == r.buffer for b, _ in seeded) < geo.sizes[r.buffer]:
                return None
        if st.reduces and _reads_or_writes(exe.program.stages[st.index], {exe.buffers[r.buffer].name
                                                                         for r in st.reduces}):
            return None  # its code would reach one memory through two `noalias` pointers
        if blocks or inits:
            out.append(trampoline.NativeStage(st.address, blocks, tuple(inits), tuple(r.buffer for r in st.reduces)))
    return out


def _reads_or_writes(stage: Any, names: set[str]) -> bool:
    """Whether `stage` accesses a buffer of `names` other than by reducing into it."""
    return any(isinstance(i, Instr) and i.addr is not None and i.addr.buffer in names and i.op not in REDUCE_KINDS
               for i in stage.body)


def _scalar_packer(exe: Executable) -> Callable[[Sequence[np.generic]], bytes]:
    """One 8-byte slot per scalar, its native bytes first (as runtime.pack_scalars, for
    values already of the declared dtype)."""
    pads = tuple(_PADDING[s.np.itemsize] for s in exe.binding.scalars)
    if not pads:
        return lambda scalars: b""
    if len(pads) == 1:
        pad, = pads
        return lambda scalars: b"".join((scalars[0], pad))

    def pack(scalars: Sequence[Any]) -> bytes:
        parts = []
        for v, pad in zip(scalars, pads):
            parts.append(v)
            parts.append(pad)
        return b"".join(parts)
    return pack
