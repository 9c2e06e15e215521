"""The CUDA driver through `cuda-bindings`: whether a driver and a usable device are here
(`device_status`), and the process's device (`device`): its primary context, one stream,
and what the launch path and the benchmarks read of it.

Without the NVIDIA driver, `cuInit` raises (cuda-pathfinder's `DynamicLibNotFoundError`:
libcuda.so is found only by the system's search); with a driver but no device it returns
an error code; a device older than compute capability 8.0 (`sm_80`, the lowest target the
backend builds for) cannot run the PTX. In each case the backend is unavailable and
`device_status().reason` says why. The device is CUDA device 0.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable

import attrs

from hologram.errors import ExecutionError, PluginError

# The lowest target the backend builds for (targets.py): an older GPU cannot run its PTX.
MIN_CAPABILITY = (8, 0)
DEVICE_ORDINAL = 0


class DriverError(ExecutionError):
    """A driver call that failed: the call, the driver's error name and its words."""


@attrs.frozen
class DeviceStatus:
    available: bool
    reason: str  # why not, or the device found
    capability: tuple[int, int] | None = None


def usable(capability: tuple[int, int], name: str) -> DeviceStatus:
    """The status of a device of `capability` named `name`: usable from `MIN_CAPABILITY` on."""
    cc = f"{capability[0]}.{capability[1]}"
    if capability < MIN_CAPABILITY:
        return DeviceStatus(False, f"no usable CUDA device: {name} has compute capability {cc}; the cuda backend "
                                   f"needs {MIN_CAPABILITY[0]}.{MIN_CAPABILITY[1]} or newer (sm_80)", capability)
    return DeviceStatus(True, f"{name} (compute capability {cc})", capability)


@functools.cache
def device_status() -> DeviceStatus:
    """Probed once per process (cuInit is idempotent, and a driver does not come and go)."""
    try:
        from cuda.bindings import driver
    except ImportError as e:
        return DeviceStatus(False, f"no CUDA driver: cuda-bindings is not installed ({e}); "
                                   f"pip install cuda-bindings")
    try:
        (err,) = driver.cuInit(0)
    except Exception as e:  # DynamicLibNotFoundError: no libcuda.so
        return DeviceStatus(False, f"no CUDA driver: {type(e).__name__}: {e}")
    if err != driver.CUresult.CUDA_SUCCESS:
        return DeviceStatus(False, f"no CUDA driver: cuInit failed with {err.name}")
    err, count = driver.cuDeviceGetCount()
    if err != driver.CUresult.CUDA_SUCCESS or count == 0:
        return DeviceStatus(False, f"no CUDA device: cuDeviceGetCount gave {count} ({err.name})")
    try:
        handle = call(driver.cuDeviceGet, DEVICE_ORDINAL)
        return usable(_capability(driver, handle), _name(driver, handle))
    except DriverError as e:
        return DeviceStatus(False, f"no CUDA device: {e}")


def call(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)`, a cuda-bindings driver call, checked: its value (None, one value, or a
    tuple of them) when it returns CUDA_SUCCESS, else a `DriverError` naming the call."""
    from cuda.bindings import driver

    result = fn(*args)
    err, values = result[0], result[1:]
    if err != driver.CUresult.CUDA_SUCCESS:
        raise DriverError(f"cuda: {fn.__name__} failed: {error_words(err)}")
    return None if not values else values[0] if len(values) == 1 else values


def error_words(err: Any) -> str:
    """`CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)`."""
    from cuda.bindings import driver

    name = getattr(err, "name", str(err))
    got, text = driver.cuGetErrorString(err)
    if got != driver.CUresult.CUDA_SUCCESS or not text:
        return name
    return f"{name} ({text.decode(errors='replace') if isinstance(text, bytes) else text})"


def _capability(driver: Any, handle: Any) -> tuple[int, int]:
    attr = driver.CUdevice_attribute
    return (call(driver.cuDeviceGetAttribute, attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle),
            call(driver.cuDeviceGetAttribute, attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, handle))


def _name(driver: Any, handle: Any) -> str:
    raw = call(driver.cuDeviceGetName, 256, handle)
    return raw.split(b"\0", 1)[0].decode(errors="replace") if isinstance(raw, bytes) else str(raw)


@attrs.frozen(eq=False)
class Device:
    """The process's device: its handle, primary context and stream, and what the launch
    path and the benchmarks read of it."""

    handle: Any
    context: Any
    stream: Any
    name: str
    capability: tuple[int, int]
    multiprocessors: int
    memory_bytes: int
    # bytes per second the memory can move: 2 (double data rate) x clock x bus width
    peak_bandwidth: float

    def make_current(self) -> None:
        """Bind the context to the calling thread (a launch may come from any thread)."""
        from cuda.bindings import driver

        call(driver.cuCtxSetCurrent, self.context)


_lock = threading.Lock()
_device: Device | None = None


def device() -> Device:
    """The process's device, opened once: a PluginError saying why when there is none."""
    global _device
    with _lock:
        if _device is None:
            status = device_status()
            if not status.available:
                raise PluginError(f"backend 'cuda' cannot run here: {status.reason}")
            _device = _open(status.capability)
        return _device


def _open(capability: tuple[int, int]) -> Device:
    from cuda.bindings import driver

    attr = driver.CUdevice_attribute
    handle = call(driver.cuDeviceGet, DEVICE_ORDINAL)
    context = call(driver.cuDevicePrimaryCtxRetain, handle)
    call(driver.cuCtxSetCurrent, context)
    stream = call(driver.cuStreamCreate, driver.CUstream_flags.CU_STREAM_NON_BLOCKING.value)

    def attribute(a: Any) -> int:
        return int(call(driver.cuDeviceGetAttribute, a, handle))

    clock_khz = attribute(attr.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)
    bus_bits = attribute(attr.CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)
    return Device(handle, context, stream, _name(driver, handle), capability,
                  attribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
                  int(call(driver.cuDeviceTotalMem, handle)), peak_bandwidth(clock_khz, bus_bits))


def peak_bandwidth(memory_clock_khz: int, bus_width_bits: int) -> float:
    """The device memory's peak bandwidth in bytes per second, from the device attributes
    (the clock in kHz, the bus in bits; DDR moves two words a cycle)."""
    return 2.0 * memory_clock_khz * 1e3 * bus_width_bits / 8
