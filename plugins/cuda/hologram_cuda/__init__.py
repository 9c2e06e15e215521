"""hologram-backend-cuda: Atlas ISA programs as PTX through llvmlite's NVPTX target,
assembled into cubins with nvJitLink. See docs/gpu.md ("CUDA") and README.md here.
"""

from __future__ import annotations

from typing import Any, Callable

from hologram.backend import LazyBackend, hookimpl

__all__ = ["CudaBackend", "hologram_register_backends"]


@hookimpl
def hologram_register_backends(register: Callable[[object], None]) -> None:
    # by name: the backend's module is imported when a kernel first asks for cuda
    register(LazyBackend("cuda", "hologram_cuda.backend:CudaBackend", priority=50))


def __getattr__(name: str) -> Any:
    if name == "CudaBackend":
        from .backend import CudaBackend

        return CudaBackend
    raise AttributeError(f"module 'hologram_cuda' has no attribute {name!r}")
