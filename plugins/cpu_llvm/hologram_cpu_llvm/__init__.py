"""hologram-backend-cpu-llvm: Atlas ISA programs compiled by LLVM, run on a thread pool.

Registered through the `hologram` entry-point group exactly as a third-party backend
would be. `codegen.py` turns a Program into LLVM IR (one function per stage), `jit.py`
compiles and loads it, `cache.py` keeps the object code in memory and on disk,
`runtime.py` binds arguments and launches stages, `threads.py` runs the chunks of a
stage in parallel, `backend.py` ties them together. See docs/cpu-llvm.md.
"""

from __future__ import annotations

from typing import Any, Callable

from hologram.backend import LazyBackend, hookimpl

__all__ = ["CpuLlvmBackend", "hologram_register_backends"]


@hookimpl
def hologram_register_backends(register: Callable[[object], None]) -> None:
    # by name: the backend's module is imported when a kernel first asks for cpu_llvm
    register(LazyBackend("cpu_llvm", "hologram_cpu_llvm.backend:CpuLlvmBackend", priority=100))


def __getattr__(name: str) -> Any:
    if name == "CpuLlvmBackend":
        from .backend import CpuLlvmBackend

        return CpuLlvmBackend
    raise AttributeError(f"module 'hologram_cpu_llvm' has no attribute {name!r}")
