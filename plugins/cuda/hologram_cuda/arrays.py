"""The cuda backend's arrays on the device (docs/gpu.md, CUDA, "How arrays move").

A `CudaArray` is a C-contiguous array in the device's global memory: either its own
`cuMemAlloc` allocation (`hologram.to_device(x, "cuda")`, or a kernel's output when its
inputs are on the device), freed when the array is collected, or memory another library
owns, adopted without a copy from any object exposing `__cuda_array_interface__` (CuPy,
PyTorch, numba device arrays; `adopt`), which the array keeps alive. A launch packs a
device array's pointer as it is: nothing is copied in or out.

Every operation here runs on the device's one stream and synchronizes it before
returning, as each launch does when it reads the error word back (launch.py): so when a
call returns, its device arrays hold their contents, and `__cuda_array_interface__`
says `stream: None` (a consumer need not synchronize with anything). An adopted array's
producer stream, when its interface names one, is synchronized at adoption (the
producer's pending writes land before a kernel reads them).

`driver` is `cuda.bindings.driver`, looked up at each call: tests replace it with a
dry-run driver over simulated device memory (tests/cuda_dry_run.py).
"""

from __future__ import annotations

import weakref
from typing import Any

import attrs
import numpy as np

from hologram.backend import DeviceArray, DType, host_array
from hologram.errors import ArgumentError

from .driver import call
from .targets import DTYPES

__all__ = ["CudaArray", "to_device", "allocate_device", "adopt", "CAI_VERSION"]

CAI_VERSION = 3
NUMPY_DTYPES = frozenset(np.dtype(t.np) for t in DTYPES)  # what an adopted array may hold


def _driver() -> Any:
    from cuda.bindings import driver

    return driver


class Allocation:
    """One `cuMemAlloc` allocation in `context` (current), freed (`cuMemFree`) when this
    object is collected. The finalizer does not run at interpreter exit: the driver
    releases a process's memory with its context, and by then cuda-bindings may be half
    torn down."""

    __slots__ = ("pointer", "__weakref__")

    def __init__(self, nbytes: int, context: Any) -> None:
        driver = _driver()
        self.pointer = int(call(driver.cuMemAlloc, max(nbytes, 1)))  # a 0-byte allocation is an error
        finalizer = weakref.finalize(self, _free, driver, context, self.pointer)
        finalizer.atexit = False


def _free(driver: Any, context: Any, pointer: int) -> None:
    """The finalizer: a collection runs on whichever thread allocated last, whose current
    context may be none or another library's, so the allocation's own is made current
    (directly: `driver.device()` takes a lock the collecting thread may hold)."""
    try:
        driver.cuCtxSetCurrent(context)
        driver.cuMemFree(pointer)
    except Exception:  # noqa: BLE001 - a finalizer has no caller to tell; the context may already be gone
        pass


@attrs.frozen(eq=False, repr=False)
class CudaArray(DeviceArray):
    """An array in the device's global memory at `pointer`, C-contiguous. `keeps` is what
    keeps the memory alive: its own `Allocation`, or the foreign object it was adopted
    from. `readonly` as that object's interface said (a kernel may not write it)."""

    pointer: int = attrs.field(default=0, kw_only=True)
    keeps: Any = attrs.field(default=None, kw_only=True)
    readonly: bool = attrs.field(default=False, kw_only=True)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """CAI version 3: strides None (C-contiguous), `stream` None: the contents are
        complete when the call that wrote them returns (module docstring)."""
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.pointer, self.readonly),
                "version": CAI_VERSION, "strides": None, "stream": None}

    def numpy(self) -> np.ndarray:
        host = np.empty(self.shape, self.dtype)
        if host.nbytes:
            driver, stream = _driver(), _stream()
            call(driver.cuMemcpyDtoHAsync, host.ctypes.data, self.pointer, host.nbytes, stream)
            call(driver.cuStreamSynchronize, stream)
        return host

    def copy(self) -> "CudaArray":
        target = _allocated(self.backend, self.shape, self.dtype)
        if self.nbytes:
            driver, stream = _driver(), _stream()
            call(driver.cuMemcpyDtoDAsync, target.pointer, self.pointer, self.nbytes, stream)
            call(driver.cuStreamSynchronize, stream)
        return target

    def __repr__(self) -> str:
        return (f"CudaArray(shape={self.shape}, dtype={self.dtype}, backend={self.backend.name!r}, "
                f"pointer={self.pointer:#x})")


def _device() -> Any:
    """The device (driver.Device), its context made current on this thread."""
    from .driver import device

    gpu = device()
    gpu.make_current()
    return gpu


def _stream() -> Any:
    return _device().stream


def _allocated(backend: Any, shape: tuple[int, ...], dtype: np.dtype) -> CudaArray:
    context = _device().context  # current first: cuMemAlloc allocates in it
    array = CudaArray(shape, dtype, backend)
    allocation = Allocation(array.nbytes, context)
    return attrs.evolve(array, pointer=allocation.pointer, keeps=allocation)


def to_device(backend: Any, array: Any) -> CudaArray:
    """`array` copied into a new allocation (one copy to the device)."""
    host = host_array("to_device(): array", array)
    target = _allocated(backend, host.shape, host.dtype)
    if host.nbytes:
        driver, stream = _driver(), _stream()
        call(driver.cuMemcpyHtoDAsync, target.pointer, host.ctypes.data, host.nbytes, stream)
        call(driver.cuStreamSynchronize, stream)  # `host` may be freed once this returns
    return target


def allocate_device(backend: Any, shape: tuple[int, ...], dtype: DType) -> CudaArray:
    """A new zeroed allocation (cuMemAlloc does not zero: cuMemsetD8)."""
    target = _allocated(backend, shape, dtype.np)
    driver, stream = _driver(), _stream()
    call(driver.cuMemsetD8Async, target.pointer, 0, max(target.nbytes, 1), stream)
    call(driver.cuStreamSynchronize, stream)
    return target


def adopt(backend: Any, value: Any, where: str) -> CudaArray | None:
    """`value` as a CudaArray over its own memory (no copy) when it exposes
    `__cuda_array_interface__`, else None; `where` names the argument in the
    ArgumentError for an interface this backend cannot take as it is (strided, masked, a
    dtype it has no name for, memory of another device, or a malformed interface)."""
    try:
        interface = value.__cuda_array_interface__
    except AttributeError:
        return None
    what = f"{where} ({type(value).__name__}, through __cuda_array_interface__)"
    if not isinstance(interface, dict):
        raise ArgumentError(f"{what}: the interface is a {type(interface).__name__}, expected a dict")
    try:
        shape = tuple(int(d) for d in interface["shape"])
        typestr = interface["typestr"]
        pointer, readonly = interface["data"]
        pointer = int(pointer)
        strides = interface.get("strides")
        strides = None if strides is None else tuple(int(n) for n in strides)
    except (KeyError, TypeError, ValueError) as e:
        raise ArgumentError(f"{what}: malformed interface ({type(e).__name__}: {e}); expected 'shape', 'typestr' "
                            "and 'data' = (pointer, readonly)") from None
    dtype = _dtype(what, typestr)
    if strides is not None and not _c_contiguous(shape, strides, dtype.itemsize):
        raise ArgumentError(f"{what} must be C-contiguous, got strides {strides} for shape {shape} of "
                            f"{dtype.itemsize}-byte items",
                            hint="pass a contiguous copy (cupy.ascontiguousarray(x), x.contiguous() in PyTorch)")
    if interface.get("mask") is not None:
        raise ArgumentError(f"{what} has a mask; masked device arrays are not taken")
    array = CudaArray(shape, dtype, backend, pointer=pointer, keeps=value, readonly=bool(readonly))
    _stream()  # the device's context current (a PluginError saying why when there is none)
    if array.nbytes:
        _check_device_memory(what, pointer)
    _wait_for_producer(what, interface.get("stream"))
    return array


def _dtype(what: str, typestr: Any) -> np.dtype:
    try:
        dtype = np.dtype(typestr)
    except (TypeError, ValueError):
        dtype = None
    if dtype is None or dtype not in NUMPY_DTYPES or dtype.byteorder == ">":
        names = ", ".join(sorted(str(d) for d in NUMPY_DTYPES))
        raise ArgumentError(f"{what} has typestr {typestr!r}; expected a little-endian one of {names}")
    return dtype.newbyteorder("=")


def _c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    """numpy's rule: each axis of more than one element steps by the product of the later
    axes' extents; an empty array is contiguous whatever its strides."""
    if len(strides) != len(shape):
        return False
    if 0 in shape:
        return True
    step = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != step:
            return False
        step *= extent
    return True


def _check_device_memory(what: str, pointer: int) -> None:
    """The pointer is memory of the backend's device (not host memory, not another GPU's)."""
    from .driver import DEVICE_ORDINAL

    driver = _driver()
    err, ordinal = driver.cuPointerGetAttribute(
        driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, pointer)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise ArgumentError(f"{what}: pointer {pointer:#x} is not CUDA memory the driver knows "
                            f"({getattr(err, 'name', err)})")
    if int(ordinal) != DEVICE_ORDINAL:
        raise ArgumentError(f"{what} is memory of CUDA device {int(ordinal)}; the cuda backend runs on device "
                            f"{DEVICE_ORDINAL}")


def _wait_for_producer(what: str, stream: Any) -> None:
    """CAI v3: a `stream` the producer may still be writing the array on is synchronized
    (None: nothing pending; 1 and 2: the legacy and per-thread default streams)."""
    if stream is None:
        return
    if isinstance(stream, bool) or not isinstance(stream, int) or stream == 0:
        raise ArgumentError(f"{what} has stream {stream!r}; __cuda_array_interface__ v3 allows None or a stream "
                            "handle other than 0")
    driver = _driver()
    call(driver.cuStreamSynchronize, driver.CUstream(stream))  # 1 and 2 are the driver's own handles for them
