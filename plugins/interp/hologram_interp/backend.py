"""`InterpBackend`: the reference backend, registered under the name `interp`.

It prepares a program by verifying it (a program from anywhere is untrusted) and
decoding it into closures, cached by a content key of the program in a thread-safe LRU
of `CACHE_SIZE` entries; it launches by binding the caller's arrays, scalars and shape
symbols and running the machine.
"""

from __future__ import annotations

import hashlib
import math
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from hologram.core import trace
from hologram.core.errors import ArgumentError
from hologram.core.lru import LRUCache
from hologram.core.types import DType
from hologram.isa.program import BufferParam, Program
from hologram.runtime.args import complete_symbols, plain_array, symbol_value, zeroed_temporary
from hologram.verify.verifier import verify

# decode and machine (~3 ms to import) wait for the first program this backend
# prepares: a process whose kernels run elsewhere never imports them
if TYPE_CHECKING:
    from .decode import Executable

CACHE_SIZE = 256  # prepared programs kept (an LRU; `clear_cache()` empties it)


def program_key(program: Program) -> str:
    """A content key: identical programs, and only those, share it. The repr spells
    every field exactly (-0.0 apart from 0.0, 1 apart from True and 1.0)."""
    return hashlib.sha256(repr(program).encode()).hexdigest()


class InterpBackend:
    """Executes Atlas ISA programs one lane at a time. Slow, small, and the reference."""

    name = "interp"
    priority = 10

    def __init__(self, cache_size: int = CACHE_SIZE) -> None:
        # program key -> Executable; shared by every thread that prepares or launches
        self._cache: LRUCache[str, Executable] = LRUCache(cache_size)

    def __repr__(self) -> str:
        return "InterpBackend()"

    def clear_cache(self) -> None:
        """Forget every prepared program (`hologram.clear_cache()` calls this)."""
        self._cache.clear()

    def available(self) -> bool:
        return True

    def allocate(self, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
        return np.zeros(shape, dtype=dtype.np if isinstance(dtype, DType) else dtype)

    def prepare(self, program: Program) -> Executable:
        if not isinstance(program, Program):
            raise ArgumentError(f"prepare expects a hologram.isa.program.Program, got {type(program).__name__}")
        key = program_key(program)
        with trace.span("interp prepare", "prepare", program=key) as info:
            exe = self._cache.get(key)
            if info is not None:
                info["cache"] = "miss" if exe is None else "memory"
            if exe is None:
                from .decode import decode_program

                with trace.span("verify", "prepare"):
                    verify(program)
                with trace.span("decode", "prepare"):
                    exe = decode_program(program, key)
                self._cache.put(key, exe)
        return exe

    def launch(self, executable: Any, buffers: Mapping[str, np.ndarray],
               scalars: Mapping[str, Any], symbols: Mapping[str, int]) -> None:
        from .decode import Executable
        from .machine import run

        exe = executable if isinstance(executable, Executable) else self.prepare(executable)
        symbols = complete_symbols(exe.program.symbols, symbols)
        mem, consts = bind(exe, buffers, scalars, symbols)
        run(exe, mem, consts, symbols)


def bind(exe: Executable, buffers: Mapping[str, np.ndarray], scalars: Mapping[str, Any],
         symbols: Mapping[str, int]) -> tuple[dict[str, np.ndarray], dict[tuple[str, str], np.generic]]:
    """Flat views of the caller's buffers plus zeroed temporaries, and the launch constants."""
    from hologram.isa.opcodes import const, convert

    from .decode import const_key

    program = exe.program
    symbols = complete_symbols(program.symbols, symbols)
    consts: dict[tuple[str, str], np.generic] = {}
    for s in program.symbols:  # an integer in the range the verifier assumed (the launch contract)
        consts[const_key(s)] = np.int64(symbol_value(s, symbols.get(s)))
    written = frozenset().union(*(st.writes for st in exe.stages))
    params = [p for p in program.params if isinstance(p, BufferParam)]
    unknown = set(buffers) - {p.name for p in params}
    if unknown:
        raise ArgumentError(f"program '{program.name}' has no buffer parameter(s) {', '.join(sorted(unknown))}")
    mem: dict[str, np.ndarray] = {}
    for p in params:
        arr = buffers.get(p.name)
        size = _size(p, symbols)
        if not isinstance(arr, np.ndarray):
            raise ArgumentError(f"buffer '{p.name}': expected a numpy array of {p.dtype}, got {type(arr).__name__}")
        if type(arr) is not np.ndarray:  # np.matrix would stay 2-D through reshape(-1)
            arr = plain_array(f"buffer '{p.name}'", arr)
        if arr.dtype != p.dtype.np:
            raise ArgumentError(f"buffer '{p.name}': expected dtype {p.dtype}, got {arr.dtype}")
        if not arr.flags.c_contiguous:
            raise ArgumentError(f"buffer '{p.name}' must be C-contiguous")
        if arr.size != size:
            raise ArgumentError(f"buffer '{p.name}': expected {size} elements, got {arr.size} (shape {arr.shape})")
        if p.name in written and not arr.flags.writeable:
            raise ArgumentError(f"buffer '{p.name}' is written by the program but the array is read-only")
        mem[p.name] = arr.reshape(-1)  # a view: C-contiguous
    for t in program.temps:
        mem[t.name] = zeroed_temporary(t.name, t.dtype, _size(t, symbols))
    for name, p in program.scalars().items():
        if name not in scalars:
            raise ArgumentError(f"scalar parameter '{name}' ({p.dtype}) is missing")
        v = scalars[name]
        if isinstance(v, np.generic):
            consts[const_key(name)] = v if v.dtype == p.dtype.np else convert(v, p.dtype)
        elif isinstance(v, (bool, int, float)):
            consts[const_key(name)] = const(v, p.dtype)
        else:
            raise ArgumentError(f"scalar parameter '{name}': expected a number of type {p.dtype}, got {v!r}")
    return mem, consts


def _size(p: BufferParam, symbols: Mapping[str, int]) -> int:
    try:
        dims = [d.evaluate(symbols) for d in p.shape]
    except KeyError as e:
        raise ArgumentError(f"buffer '{p.name}': shape symbol '{e.args[0]}' is not bound") from None
    if any(d < 0 for d in dims):
        raise ArgumentError(f"buffer '{p.name}': shape {dims} has a negative dimension")
    return math.prod(dims)
