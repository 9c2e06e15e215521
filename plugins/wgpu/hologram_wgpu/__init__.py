"""hologram-backend-wgpu: Atlas ISA programs as WGSL compute shaders through wgpu.

`wgsl.py` writes a stage as a compute shader (`wgsl_exprs.py` has its expressions,
`wgsl_lib.py` the helper functions: 64-bit integers as two words, the ISA's float
rules), `device.py` opens the one device of the process and makes pipelines,
`backend.py` declares what it runs, binds a launch, moves buffers and turns a shader's
error record into the interpreter's ExecutionError. See docs/gpu.md.
"""

from __future__ import annotations

from typing import Any, Callable

from hologram.backend import LazyBackend, hookimpl

__all__ = ["WgpuBackend", "hologram_register_backends"]


@hookimpl
def hologram_register_backends(register: Callable[[object], None]) -> None:
    # by name: the backend's module is imported when a kernel first asks for wgpu
    register(LazyBackend("wgpu", "hologram_wgpu.backend:WgpuBackend", priority=5))


def __getattr__(name: str) -> Any:
    if name == "WgpuBackend":
        from .backend import WgpuBackend

        return WgpuBackend
    raise AttributeError(f"module 'hologram_wgpu' has no attribute {name!r}")
