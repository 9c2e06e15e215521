"""The wgpu backend's arrays on the device, and every copy of an array between host and
device (docs/gpu.md, "How arrays move").

A buffer holds an array's bytes exactly as numpy lays them out (a `bool` one byte, 8/16-bit
integers and `f16` packed as numpy packs them, the shaders reading them two or four to
a word), padded with zeros to whole 8-byte words and to at least one word (WebGPU binds no
buffer of 0 bytes). So a copy either way is the bytes themselves, and every dtype round-
trips bit for bit. `WgpuArray` is such a buffer kept on the device between launches
(`hologram.to_device(x, "wgpu")`, or a kernel's output when its inputs are device arrays).

`transfers` counts the array copies each way (`to_device`, `to_host`, with their bytes)
and the copies made on the device (`on_device`): what a chain of kernels moves is
measured by it, not assumed. A launch's own few words (its launch-info buffer, the
error record it reads back to raise the interpreter's errors) are not array copies and
are not counted.
"""

from __future__ import annotations

import collections
from typing import Any

import attrs
import numpy as np

from hologram.backend import DeviceArray, DType, host_array
from hologram.errors import ArgumentError

from . import device as gpu_device

__all__ = ["WgpuArray", "transfers", "to_device", "allocate_device", "upload", "zeroed_buffer", "download"]

transfers: collections.Counter[str] = collections.Counter()


def padded_bytes(nbytes: int) -> int:
    """A buffer's size for `nbytes` of array: whole 8-byte words, at least one."""
    return max(8, -(-nbytes // 8) * 8)


def _usage() -> Any:
    import wgpu

    return wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST


def too_large(nbytes: int) -> str | None:
    """Why the device cannot hold an array of `nbytes` as one binding (`1,000 bytes;
    this wgpu device binds at most ...`), or None."""
    limit = gpu_device.gpu().max_binding_bytes
    if nbytes <= limit:
        return None
    return f"{nbytes:,} bytes; this wgpu device binds at most {limit:,} bytes per buffer"


def upload(array: np.ndarray) -> Any:
    """A new buffer holding `array`'s bytes (C-contiguous): one copy to the device."""
    data = array.reshape(-1).view(np.uint8)
    size = padded_bytes(data.size)
    if size != data.size:
        data = np.concatenate([data, np.zeros(size - data.size, np.uint8)])
    transfers["to_device"] += 1
    transfers["bytes_to_device"] += array.nbytes
    return gpu_device.gpu().device.create_buffer_with_data(data=data, usage=_usage())


def zeroed_buffer(nbytes: int) -> Any:
    """A new buffer of `nbytes` of array, zeroed by the device (WebGPU zeroes every new
    buffer): nothing copied."""
    return gpu_device.gpu().device.create_buffer(size=padded_bytes(nbytes), usage=_usage())


def download(buffer: Any, into: np.ndarray) -> None:
    """`buffer`'s first `into.nbytes` bytes copied into `into` (C-contiguous, writeable):
    one copy to the host."""
    data = np.frombuffer(gpu_device.gpu().device.queue.read_buffer(buffer), np.uint8)[:into.nbytes]
    into.reshape(-1).view(np.uint8)[:] = data
    transfers["to_host"] += 1
    transfers["bytes_to_host"] += into.nbytes


@attrs.frozen(eq=False, repr=False)
class WgpuArray(DeviceArray):
    """An array in a wgpu buffer of the backend's device (numpy's bytes, padded)."""

    buffer: Any = attrs.field(default=None, kw_only=True)

    def numpy(self) -> np.ndarray:
        host = np.empty(self.shape, self.dtype)
        download(self.buffer, host)
        return host

    def copy(self) -> "WgpuArray":
        gpu = gpu_device.gpu()
        target = zeroed_buffer(self.nbytes)
        encoder = gpu.device.create_command_encoder()
        encoder.copy_buffer_to_buffer(self.buffer, 0, target, 0, padded_bytes(self.nbytes))
        gpu.device.queue.submit([encoder.finish()])
        transfers["on_device"] += 1
        return WgpuArray(self.shape, self.dtype, self.backend, buffer=target)


def to_device(backend: Any, array: Any) -> WgpuArray:
    """`array` copied into a new buffer of `backend`'s device."""
    host = host_array("to_device(): array", array)
    _check_fits(host.nbytes)
    return WgpuArray(host.shape, host.dtype, backend, buffer=upload(host))


def allocate_device(backend: Any, shape: tuple[int, ...], dtype: DType) -> WgpuArray:
    """A new zeroed array of `backend`'s device."""
    array = WgpuArray(shape, dtype.np, backend, buffer=None)  # the description first: its size is checked
    _check_fits(array.nbytes)
    return attrs.evolve(array, buffer=zeroed_buffer(array.nbytes))


def _check_fits(nbytes: int) -> None:
    why = too_large(nbytes)
    if why is not None:
        raise ArgumentError(f"cannot make a device array of {why}",
                            hint="keep it on the host, or split it into arrays the device can bind")
