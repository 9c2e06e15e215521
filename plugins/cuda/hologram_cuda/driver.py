"""Whether a CUDA driver and device are here: `cuInit` through `cuda-bindings`.

Without the NVIDIA driver, `cuInit` raises (cuda-pathfinder's `DynamicLibNotFoundError`:
libcuda.so is found only by the system's search); with a driver but no device it returns
an error code; either way the backend is unavailable and `device_status` says why.
"""

from __future__ import annotations

import functools

import attrs


@attrs.frozen
class DeviceStatus:
    available: bool
    reason: str  # why not, or the device found


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
    return DeviceStatus(True, f"{count} CUDA device(s)")
