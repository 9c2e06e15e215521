"""`hologram.to_device`: an array moved into a backend's memory, to chain kernels there.

A kernel whose inputs are device arrays of its backend reads them where they are and
returns device arrays (hologram.call.kernel); `.numpy()` (or any numpy function) reads one
back. docs/api.md, "Device arrays".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hologram.backend.binding import host_array
from hologram.backend.device import DeviceArray
from hologram.registry.lookups import get_backend

__all__ = ["to_device"]


def to_device(x: Any, backend: str | None = None) -> DeviceArray:
    """`x` (a numpy array, or anything `np.asarray` takes, of a hologram dtype) copied
    into the memory of `backend` (a name; None: the default backend, as a kernel's), as
    one of its device arrays. A device array of that backend is returned as it is; one
    of another backend is read back and copied over. A backend without device arrays
    (`interp`, `cpu_llvm`) refuses with an ArgumentError saying so."""
    target = get_backend(backend)
    if isinstance(x, DeviceArray):
        if x.backend.name == target.name:
            return x
        x = x.numpy()
    elif not isinstance(x, np.ndarray):
        adopted = target.adopt(x, "to_device(): x")
        if adopted is not None:
            return adopted
    return target.to_device(host_array("to_device(): x", x))
