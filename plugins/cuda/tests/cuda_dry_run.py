"""The dry-run driver the cuda tests launch through without a device (test_launch.py,
test_cuda_arrays.py; the `dry_run_device` fixture in conftest.py installs it).

Every driver call goes first to cuda-bindings itself, whose argument conversion runs
before it looks for libcuda (a wrong argument type is a TypeError there), then a
simulation on host memory answers it: each `cuMemAlloc` is a bytearray at its own
device address (filled with 0xCD: cuMemAlloc does not zero), copies and memsets act on them, a launch calls
`kernel(name, grid, block, params, driver)`.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from cuda.bindings import driver as REAL_DRIVER

from hologram.registry.lookups import get_backend


class DryRunDriver:
    """`cuda.bindings.driver` as the launch path and the device arrays call it, over
    simulated device memory (`allocations`: device address -> bytes). `calls` lists the
    simulated calls in order; `synchronized` the streams `cuStreamSynchronize` waited on;
    `other_device` the allocations `cuPointerGetAttribute` says belong to device 1."""

    BASE = 0x7F00_0000_0000
    SPAN = 1 << 32  # between two allocations' addresses: an access past one's end hits none

    def __init__(self, kernel=None):
        self.real, self.ok, self.kernel = REAL_DRIVER, REAL_DRIVER.CUresult.CUDA_SUCCESS, kernel
        self.calls: list[str] = []
        self.allocations: dict[int, bytearray] = {}
        self.allocated = 0  # every cuMemAlloc so far, freed or not
        self.synchronized: list[int] = []
        self.other_device: set[int] = set()
        self.names: dict[int, str] = {}

    def __getattr__(self, name):
        from cuda.pathfinder import DynamicLibNotFoundError

        real, simulate = getattr(self.real, name), getattr(self, "sim_" + name, None)
        if simulate is None:  # a type or a constant (CUresult, CU_LAUNCH_PARAM_*): the binding's own
            return real

        def forward(*args):
            with pytest.raises(DynamicLibNotFoundError):
                real(*args)
            self.calls.append(name)
            return simulate(*args)

        forward.__name__ = name
        return forward

    def count(self, *names: str) -> int:
        return sum(self.calls.count(n) for n in names)

    def find(self, address: int, n: int) -> tuple[int, bytearray] | None:
        """The allocation (its address, its bytes) holding `n` bytes at `address`, or None."""
        address = int(address)
        for base, memory in self.allocations.items():
            if base <= address and address + n <= base + len(memory):
                return base, memory
        return None

    def at(self, address: int, n: int) -> tuple[bytearray, slice]:
        found = self.find(address, n)
        assert found is not None, f"an access of {n} bytes at {int(address):#x} outside every live allocation"
        base, memory = found
        start = int(address) - base
        return memory, slice(start, start + n)

    def array(self, address: int, n: int, dtype) -> np.ndarray:
        """A view of `n` elements at device `address`."""
        memory, where = self.at(address, n * np.dtype(dtype).itemsize)
        return np.frombuffer(memory, dtype, n, where.start)

    def sim_cuModuleLoadData(self, image):
        return self.ok, self.real.CUmodule(1)

    def sim_cuModuleGetFunction(self, module, name):
        self.names[len(self.names) + 1] = name.decode()
        return self.ok, self.real.CUfunction(len(self.names))

    def sim_cuMemAlloc(self, n):
        base = self.BASE + self.allocated * self.SPAN
        self.allocations[base] = bytearray(b"\xcd" * int(n))  # as uninitialised memory: not zeros
        self.allocated += 1
        return self.ok, self.real.CUdeviceptr(base)

    def sim_cuMemFree(self, base):
        assert int(base) in self.allocations, f"cuMemFree of {int(base):#x}, which is not a live allocation"
        del self.allocations[int(base)]
        return (self.ok,)

    def sim_cuMemcpyHtoDAsync(self, dst, src, n, stream):
        memory, where = self.at(dst, n)
        memory[where] = ctypes.string_at(src, n)
        return (self.ok,)

    def sim_cuMemcpyDtoHAsync(self, dst, src, n, stream):
        memory, where = self.at(src, n)
        ctypes.memmove(dst, bytes(memory[where]), n)
        return (self.ok,)

    def sim_cuMemcpyDtoDAsync(self, dst, src, n, stream):
        source, frm = self.at(src, n)
        target, to = self.at(dst, n)
        target[to] = bytes(source[frm])
        return (self.ok,)

    def sim_cuMemsetD8Async(self, dst, value, n, stream):
        memory, where = self.at(dst, n)
        memory[where] = bytes([value]) * n
        return (self.ok,)

    def sim_cuPointerGetAttribute(self, attribute, pointer):
        assert attribute == self.real.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
        found = self.find(pointer, 1)
        if found is None:
            return self.real.CUresult.CUDA_ERROR_INVALID_VALUE, None
        return self.ok, 1 if found[0] in self.other_device else 0

    def sim_cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        words = (ctypes.c_uint64 * 5).from_address(extra)
        assert params == 0 and (words[0], words[2], words[4]) == (1, 2, 0)  # BUFFER_POINTER, BUFFER_SIZE, END
        size = ctypes.c_size_t.from_address(words[3]).value
        self.kernel(self.names[int(f)], (gx, gy, gz), (bx, by, bz), ctypes.string_at(words[1], size), self)
        return (self.ok,)

    def sim_cuCtxSetCurrent(self, context):
        return (self.ok,)

    def sim_cuStreamSynchronize(self, stream):
        self.synchronized.append(int(stream))
        return (self.ok,)

    def sim_cuEventCreate(self, flags):
        return self.ok, self.real.CUevent(len(self.calls))

    def sim_cuEventRecord(self, event, stream):
        return (self.ok,)

    sim_cuEventDestroy = sim_cuEventSynchronize = lambda self, event: (self.ok,)

    def sim_cuEventElapsedTime(self, start, end):
        return self.ok, 1.0  # milliseconds


def interpreted(exe):
    """A dry-run kernel that runs the whole program on the interpreter, on the device
    memory the packed parameters point at, when its first stage is launched (and records
    every launch): what the launch path moved in, where, and what it moves back are then
    those of a real run, every stage kernel standing in for its share of the program."""
    from hologram.backend import convert_value

    interp, layout = get_backend("interp"), exe.arguments
    launches = []

    def kernel(name, blocks, block, params, dev):
        launches.append((name, blocks, block))
        if len(launches) > 1:
            return
        record = np.frombuffer(params, layout.struct)[0]
        values = tuple(int(record[f"s.{s}"]) for s in layout.symbols)
        sizes = exe.binding.sizes(values)
        buffers = {slot.name: dev.array(record[f"b.{slot.name}"], size, slot.np)
                   for slot, size in zip(exe.binding.params, sizes)}
        scalars = {slot.name: convert_value(record[f"p.{slot.name}"].item(), slot.np)
                   for slot in exe.binding.scalars}
        interp.launch(interp.prepare(exe.program), buffers, scalars, dict(zip(layout.symbols, values)))

    return kernel, launches


def install(monkeypatch):
    """The cuda backend as if an sm_90 device were here, every driver call the returned
    DryRunDriver's, each launch's kernels run on the interpreter (`interpreted`)."""
    import cuda.bindings

    from hologram_cuda import backend as backend_module
    from hologram_cuda import driver as driver_module

    dry = DryRunDriver()
    fake = driver_module.Device(None, REAL_DRIVER.CUcontext(1), REAL_DRIVER.CUstream(0), "dry run", (9, 0), 1,
                                1 << 30, 1e12)
    monkeypatch.setattr(driver_module, "device_status", lambda: driver_module.usable((9, 0), "dry run"))
    monkeypatch.setattr(driver_module, "device", lambda: fake)
    monkeypatch.setattr(driver_module.Device, "make_current", lambda self: None)
    monkeypatch.setattr(cuda.bindings, "driver", dry)
    original = backend_module.CudaBackend._module_on_device

    def module_on_device(self, prepared, gpu, driver):
        dry.kernel, _ = interpreted(prepared)
        self._loaded.clear()  # the module is "loaded" for each launch, its kernel the program's
        return original(self, prepared, gpu, dry)

    monkeypatch.setattr(backend_module.CudaBackend, "_module_on_device", module_on_device)
    return dry
