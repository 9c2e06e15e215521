"""Device arrays: a backend's arrays that stay in its own memory (a GPU's) between kernels.

A `DeviceArray` is what `Backend.to_device` and `Backend.allocate_device` return and what
a kernel call returns when its inputs are device arrays, so a chain `y = k1(x); z = k2(y)`
moves nothing between host and device until the caller reads a result (`.numpy()`, or
any numpy function through `__array__`). The base class holds what every backend's
arrays share, the shape, the numpy dtype and the owning backend, frozen as a numpy
array's shape is (the contents change when a kernel writes them, the description
never does); a backend subclasses it with its handle on the memory (wgpu: a buffer) and
the two operations only it can do: read the contents back (`numpy`) and copy them on the
device (`copy`). docs/backends.md, "Device arrays"; the user's view is docs/api.md.
"""

from __future__ import annotations

import abc
import math
from typing import Any

import attrs
import numpy as np

__all__ = ["DeviceArray"]


def _numpy_dtype(value: Any) -> np.dtype:
    # a Python function, not `np.dtype` itself: attrs reads a converter's signature, and a
    # builtin's is parsed from its text (tokenize, ~2.5 ms at the import of this module)
    return np.dtype(value)


@attrs.frozen(eq=False, repr=False)
class DeviceArray(abc.ABC):
    """An array in `backend`'s memory: `shape`, `dtype` (numpy's, as a CuPy or numba
    device array has), C-contiguous, zero-initialised when allocated. Equality is
    identity (two device arrays are the same memory or none of it: there are no views)."""

    shape: tuple[int, ...] = attrs.field(converter=lambda s: tuple(int(d) for d in s))
    dtype: np.dtype = attrs.field(converter=_numpy_dtype)
    backend: Any  # the `Backend` that owns it (base.py imports this module, so it is not named here)

    @abc.abstractmethod
    def numpy(self) -> np.ndarray:
        """The contents, copied to a new host array of `shape` and `dtype` (one transfer)."""

    @abc.abstractmethod
    def copy(self) -> "DeviceArray":
        """A new device array of the same backend holding the same contents, copied on
        the device (the call path's copy of an input that an `out=` array aliases)."""

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """numpy's way in (`np.asarray(d)`, `np.sum(d)`, `np.testing`): the contents read
        back, one transfer per use. `copy=False` is refused as numpy refuses it for any
        array it must copy: the data is not in host memory."""
        if copy is False:
            raise ValueError(f"{self!r} lives in the memory of backend {self.backend.name!r}; reading it is a copy "
                             "(call .numpy())")
        host = self.numpy()
        return host if dtype is None else host.astype(dtype, copy=False)

    def __copy__(self) -> "DeviceArray":
        return self.copy()  # as copy.copy of an ndarray is a new array, never a second name for the memory

    def __deepcopy__(self, memo: dict) -> "DeviceArray":
        return self.copy()

    def __reduce__(self) -> Any:
        raise TypeError(f"{self!r} does not pickle: its contents are in the backend's memory, which another "
                        "process cannot reach; pickle d.numpy() and move it back with hologram.to_device")

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d device array")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, backend={self.backend.name!r})"
