"""hologram-backend-cuda: Atlas ISA programs as PTX through llvmlite's NVPTX target,
assembled into cubins with nvJitLink. See docs/gpu.md ("CUDA") and README.md here.
"""

from __future__ import annotations

from typing import Callable

from hologram.backend import hookimpl

from .backend import CudaBackend

__all__ = ["CudaBackend", "hologram_register_backends"]


@hookimpl
def hologram_register_backends(register: Callable[[object], None]) -> None:
    register(CudaBackend())
