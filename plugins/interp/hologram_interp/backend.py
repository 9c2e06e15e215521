"""`InterpBackend`: the reference backend, registered under the name `interp`.

It prepares a program by verifying it (a program from anywhere is untrusted) and
decoding it into closures, cached by the program's hash in a thread-safe LRU of
`CACHE_SIZE` entries; it launches by binding the caller's arrays, scalars and shape
symbols (the SDK's `LaunchBinding`, every check a launch makes) and running the
machine. `observe` runs a launch reporting its memory accesses (observe.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import attrs
import numpy as np

from hologram.backend import (AccessObserver, Backend, DType, LRUCache, LaunchBinding, Program, program_hash, trace,
                              verify)
from hologram.errors import ArgumentError

# decode and machine (~3 ms to import) wait for the first program this backend
# prepares: a process whose kernels run elsewhere never imports them
if TYPE_CHECKING:
    from .decode import Executable

CACHE_SIZE = 256  # prepared programs kept (an LRU; `clear_cache()` empties it)


@attrs.frozen(eq=False)
class Prepared:
    """What `prepare` returns: the decoded program and its launch binding."""

    code: Executable
    binding: LaunchBinding

    @property
    def program(self) -> Program:
        return self.code.program


class InterpBackend(Backend):
    """Executes Atlas ISA programs one lane at a time. Slow, small, and the reference."""

    name = "interp"
    priority = 10
    max_test_elements = 1 << 16  # ~1e5 lanes a second: larger generated cases take seconds each

    def __init__(self, cache_size: int = CACHE_SIZE) -> None:
        # program hash -> Prepared; shared by every thread that prepares or launches
        self._cache: LRUCache[str, Prepared] = LRUCache(cache_size)

    def __repr__(self) -> str:
        return "InterpBackend()"

    def clear_cache(self) -> None:
        """Forget every prepared program (`hologram.clear_cache()` calls this)."""
        self._cache.clear()

    def available(self) -> bool:
        return True

    def allocate(self, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
        return np.zeros(shape, dtype=dtype.np if isinstance(dtype, DType) else dtype)

    def prepare(self, program: Program) -> Prepared:
        if not isinstance(program, Program):
            raise ArgumentError(f"prepare expects a hologram.isa.program.Program, got {type(program).__name__}")
        key = program_hash(program)
        with trace.span("interp prepare", "prepare", program=key) as info:
            prepared = self._cache.get(key)
            if info is not None:
                info["cache"] = "miss" if prepared is None else "memory"
            if prepared is None:
                from .decode import decode_program

                with trace.span("verify", "prepare"):
                    verify(program)
                with trace.span("decode", "prepare"):
                    prepared = Prepared(decode_program(program, key), LaunchBinding.of(program))
                self._cache.put(key, prepared)
        return prepared

    def launch(self, executable: Any, buffers: Mapping[str, np.ndarray],
               scalars: Mapping[str, Any], symbols: Mapping[str, int]) -> None:
        from .machine import run

        prepared = self._prepared(executable)
        mem, consts, symbols = bind(prepared, buffers, scalars, symbols)
        run(prepared.code, mem, consts, symbols)

    def observe(self, executable: Any, buffers: Mapping[str, np.ndarray], scalars: Mapping[str, Any],
                symbols: Mapping[str, int], observer: AccessObserver) -> bool:
        from .observe import run_observed

        prepared = self._prepared(executable)
        mem, consts, symbols = bind(prepared, buffers, scalars, symbols)
        run_observed(prepared.code, mem, consts, symbols, observer)
        return True

    def _prepared(self, executable: Any) -> Prepared:
        """What `prepare` made; decoded stages made elsewhere (tests decode a program
        unverified), bound here; anything else prepared first."""
        from .decode import Executable

        if isinstance(executable, Prepared):
            return executable
        if isinstance(executable, Executable):
            return Prepared(executable, LaunchBinding.of(executable.program))
        return self.prepare(executable)


def bind(prepared: Prepared, buffers: Mapping[str, np.ndarray], scalars: Mapping[str, Any],
         symbols: Mapping[str, int]) -> tuple[dict[str, np.ndarray], dict[tuple[str, str], np.generic],
                                              Mapping[str, int]]:
    """The launch's arguments checked (`LaunchBinding.bind`): flat views of the caller's
    buffers plus zeroed temporaries by name, the launch constants (each shape symbol as
    an i64, each scalar in its dtype, by `const_key`), and every symbol's value."""
    from .decode import const_key

    binding = prepared.binding
    bound = binding.bind(buffers, scalars, symbols)
    mem = {b.name: a.reshape(-1) for b, a in zip(binding.buffers, bound.arrays)}  # views: C-contiguous
    consts: dict[tuple[str, str], np.generic] = {const_key(s): np.int64(v) for s, v in bound.symbols.items()}
    consts.update((const_key(s.name), v) for s, v in zip(binding.scalars, bound.scalars))
    return mem, consts, bound.symbols
