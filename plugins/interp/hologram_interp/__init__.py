"""hologram-backend-interp: the reference interpreter for Atlas ISA programs.

Registered through the `hologram` entry-point group exactly as a third-party backend
would be. Semantics are specified in docs/isa.md; their executable form is the reference
semantics each opcode's entry in `hologram.isa.opcodes` points at, which the interpreter
calls as they are: `decode.py` turns a program into closures, `machine.py` runs them lane by lane,
and `lane.py` holds the state each lane carries (`Lane`, `PoolMem`).
"""

from __future__ import annotations

from typing import Any, Callable

from hologram.backend import LazyBackend, hookimpl

__all__ = ["InterpBackend", "hologram_register_backends"]


@hookimpl
def hologram_register_backends(register: Callable[[object], None]) -> None:
    # by name: the backend's module is imported when a kernel first asks for interp
    register(LazyBackend("interp", "hologram_interp.backend:InterpBackend", priority=10))


def __getattr__(name: str) -> Any:
    if name == "InterpBackend":
        from .backend import InterpBackend

        return InterpBackend
    raise AttributeError(f"module 'hologram_interp' has no attribute {name!r}")
