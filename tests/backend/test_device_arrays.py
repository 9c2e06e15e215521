"""Device arrays (hologram.backend.device, docs/api.md "Device arrays"): the SDK's
`DeviceArray`, the `Backend` hooks, `hologram.to_device` and the call path, on a fake
backend whose "device memory" is host memory it hides behind its own device arrays and
whose launches are the interpreter's. It counts every copy between that memory and the
caller's, so what the call path moves is measured, not assumed. The real thing, a GPU's
buffers, is plugins/wgpu/tests/test_wgpu_device_arrays.py."""

from __future__ import annotations

import copy
import pickle

import attrs
import numpy as np
import pytest

import hologram
from hologram.backend import Backend, DeviceArray, DType, LaunchBinding, host_array
from hologram.errors import ArgumentError
from hologram.registry.lookups import get_backend

pytestmark = pytest.mark.usefixtures("fresh_plugins")

SCALE = """
[kernel]
name = "scale"
version = "1.0.0"
inputs  = { x = "f32[n]", k = "f32" }
outputs = { y = "f32[n]" }
body = "y = x * k"
"""

VADD = """
[kernel]
name = "vadd"
version = "1.0.0"
inputs  = { x = "f32[n]", y = "f32[n]" }
outputs = { z = "f32[n]" }
body = "z = x + y"
"""

SHIFTED = """
[kernel]
name = "shifted"
version = "1.0.0"
inputs  = { x = "f32[n]" }
outputs = { y = "f32[n]" }
body = "y[i] = x[(i + 1) % n]"
"""


@attrs.frozen(eq=False, repr=False)
class HostDeviceArray(DeviceArray):
    """A device array whose memory is a host array only its backend touches."""

    memory: np.ndarray = attrs.field(default=None)

    def numpy(self) -> np.ndarray:
        self.backend.downloads += 1
        return self.memory.reshape(self.shape).copy()

    def copy(self) -> "HostDeviceArray":
        self.backend.device_copies += 1
        return HostDeviceArray(self.shape, self.dtype, self.backend, self.memory.copy())


class HostDevice(Backend):
    """The interpreter's prepare and launch, with device arrays in memory of its own."""

    priority = -5

    def __init__(self, name: str = "hostdev"):
        self.name = name
        self.uploads = self.downloads = self.device_copies = self.device_allocations = 0

    def available(self) -> bool:
        return True

    def allocate(self, shape, dtype):
        return np.zeros(shape, dtype.np)

    def to_device(self, array: np.ndarray) -> HostDeviceArray:
        self.uploads += 1
        return HostDeviceArray(array.shape, array.dtype, self, array.copy())

    def allocate_device(self, shape, dtype: DType) -> HostDeviceArray:
        self.device_allocations += 1
        return HostDeviceArray(shape, dtype.np, self, np.zeros(shape, dtype.np))

    def adopt(self, value, where):
        if not isinstance(value, LibraryArray):
            return None
        if value.memory.dtype == np.float16:
            raise ArgumentError(f"{where}: this library's f16 arrays are not taken")
        return HostDeviceArray(value.memory.shape, value.memory.dtype, self, value.memory)  # the same memory

    def prepare(self, program):
        return get_backend("interp").prepare(program), LaunchBinding.of(program)

    def launch(self, executable, buffers, scalars, symbols):
        exe, binding = executable
        bound = binding.bind(buffers, scalars, symbols, owner=self)  # the SDK's checks, device arrays included
        memory = {slot.name: a.memory.reshape(a.shape) if isinstance(a, HostDeviceArray) else a
                  for slot, a in zip(binding.params, bound.arrays)}
        get_backend("interp").launch(exe, memory, scalars, symbols)


@attrs.frozen(eq=False)
class LibraryArray:
    """Another library's array in hostdev's memory (as a CuPy array is in cuda's)."""

    memory: np.ndarray


@pytest.fixture
def hostdev(register_plugin) -> HostDevice:
    backend = HostDevice()
    plugin = type("Plugin", (), {"hologram_register_backends": staticmethod(
        hologram.hookimpl(lambda register: register(backend)))})
    register_plugin(plugin, backend.name)
    return backend


def _moved(b: HostDevice) -> tuple[int, int]:
    return b.uploads, b.downloads


def test_a_chain_of_kernels_on_device_arrays_copies_nothing_until_read(hostdev):
    scale, vadd = hologram.compile(SCALE).on("hostdev"), hologram.compile(VADD).on("hostdev")
    x = np.arange(7, dtype=np.float32)
    xd = hologram.to_device(x, backend="hostdev")
    assert _moved(hostdev) == (1, 0)
    y = scale(xd, 3.0)
    z = vadd(y, xd)
    assert isinstance(y, DeviceArray) and isinstance(z, DeviceArray)
    assert (z.shape, z.dtype, z.backend) == ((7,), np.float32, hostdev)
    assert _moved(hostdev) == (1, 0) and hostdev.device_allocations == 2
    assert np.array_equal(z.numpy(), x * 3 + x)
    assert _moved(hostdev) == (1, 1)


def test_numpy_inputs_keep_their_behaviour_on_a_backend_with_device_arrays(hostdev):
    vadd = hologram.compile(VADD).on("hostdev")
    x = np.arange(5, dtype=np.float32)
    for _ in range(2):  # the full path, then the fast path
        z = vadd(x, x)
        assert type(z) is np.ndarray and np.array_equal(z, 2 * x)
    assert (hostdev.uploads, hostdev.downloads, hostdev.device_allocations) == (0, 0, 0)


def test_one_input_on_the_device_puts_the_outputs_there(hostdev):
    vadd = hologram.compile(VADD).on("hostdev")
    x = np.arange(5, dtype=np.float32)
    vadd(x, x)  # a fast path is remembered for these shapes: a device call must not take it
    z = vadd(x, hologram.to_device(x, "hostdev"))
    assert isinstance(z, DeviceArray) and np.array_equal(z.numpy(), 2 * x)


def test_out_takes_a_device_array_and_writes_it_in_place(hostdev):
    vadd = hologram.compile(VADD).on("hostdev")
    x = np.arange(4, dtype=np.float32)
    xd, out = hologram.to_device(x, "hostdev"), hostdev.allocate_device((4,), DType.F32)
    assert vadd(xd, xd, out=out) is out
    assert vadd(x, x, out=(out,)) is out  # numpy inputs, a device output: written on the device too
    assert np.array_equal(out.numpy(), 2 * x)
    with pytest.raises(ArgumentError, match=r"vadd\(\): out 'z' must be a f32 array of shape \(4,\) \(f32\[n\]\), "
                                            r"got a device array of int32 and shape \(4,\)"):
        vadd(xd, xd, out=hostdev.allocate_device((4,), DType.I32))


def test_an_output_aliasing_a_device_input_reads_the_input_as_it_was(hostdev):
    shifted = hologram.compile(SHIFTED).on("hostdev")
    x = np.arange(6, dtype=np.float32)
    xd = hologram.to_device(x, "hostdev")
    assert shifted(xd, out=xd) is xd
    assert hostdev.device_copies == 1  # the input copied on the device, never through the host
    assert np.array_equal(xd.numpy(), np.roll(x, -1))


def test_a_device_array_of_another_backend_is_refused_naming_the_argument(hostdev, register_plugin):
    other = HostDevice("otherdev")
    plugin = type("Plugin", (), {"hologram_register_backends": staticmethod(
        hologram.hookimpl(lambda register: register(other)))})
    register_plugin(plugin, other.name)
    k = hologram.compile(VADD)
    x = np.ones(3, np.float32)
    xd = hologram.to_device(x, "hostdev")
    with pytest.raises(ArgumentError) as e:
        k.on("otherdev")(x, xd)
    assert str(e.value).startswith("vadd(): argument 'y' is a device array of backend 'hostdev', but backend "
                                   "'otherdev' reads only its own")
    assert "kernel.on('hostdev')" in str(e.value)
    with pytest.raises(ArgumentError, match="argument 'x' is a device array of backend 'hostdev', but backend "
                                            "'interp' has no device arrays"):
        k.on("interp")(xd, x)
    with pytest.raises(ArgumentError, match="out 'z' is a device array of backend 'hostdev', but backend "
                                            "'otherdev' reads only its own"):
        k.on("otherdev")(x, x, out=hostdev.allocate_device((3,), DType.F32))
    assert hologram.to_device(xd, "otherdev").backend is other  # moved explicitly: through the host


def test_a_device_array_is_never_converted(hostdev):
    k = hologram.compile(VADD).on("hostdev")
    xd = hologram.to_device(np.ones(3, np.float64), "hostdev")
    with pytest.raises(ArgumentError, match=r"argument 'x' must have dtype f32 \(float32\), got a device array of "
                                            r"float64") as e:
        k(xd, xd, cast=True)
    assert "never converted" in e.value.hint
    with pytest.raises(ArgumentError, match=r"argument 'x' must have rank 1 \(f32\[n\]\), got shape \(1, 3\)"):
        k(hologram.to_device(np.ones((1, 3), np.float32), "hostdev"), np.ones(3, np.float32))


def test_map_runs_over_device_arrays(hostdev):
    vadd = hologram.compile(VADD).on("hostdev")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.arange(4, dtype=np.float32).reshape(1, 4)  # one item, broadcast
    z = vadd.map(hologram.to_device(a, "hostdev"), hologram.to_device(b, "hostdev"))
    assert isinstance(z, DeviceArray) and z.shape == (3, 4)
    assert np.array_equal(z.numpy(), a + b)


def test_to_device_refuses_what_it_cannot_move(hostdev):
    with pytest.raises(ArgumentError, match="backend 'interp' has no device arrays"):
        hologram.to_device(np.ones(3, np.float32), backend="interp")
    with pytest.raises(ArgumentError, match="has dtype complex128, which hologram has no type for"):
        hologram.to_device(np.ones(3, complex), backend="hostdev")
    with pytest.raises(ArgumentError, match="is a masked array"):
        hologram.to_device(np.ma.masked_array([1.0, 2.0], [0, 1]), backend="hostdev")
    strided = np.arange(10, dtype=np.int16)[::2]
    moved = hologram.to_device(strided, backend="hostdev")  # made contiguous: to_device copies anyway
    assert np.array_equal(moved.numpy(), strided)
    assert hologram.to_device(moved, "hostdev") is moved
    assert hologram.to_device([1, 2], "hostdev").dtype == np.int64


def test_a_device_array_reads_back_through_numpy_and_says_what_it_is(hostdev):
    x = np.array([[1, 2, 3], [4, 5, 6]], np.uint8)
    d = hologram.to_device(x, "hostdev")
    assert repr(d) == "DeviceArray(shape=(2, 3), dtype=uint8, backend='hostdev')"
    assert (d.shape, d.size, d.ndim, d.nbytes, d.itemsize, len(d)) == ((2, 3), 6, 2, 6, 1, 2)
    assert np.array_equal(np.asarray(d), x) and int(np.sum(d)) == 21
    assert np.asarray(d, dtype=np.float32).dtype == np.float32
    with pytest.raises(ValueError, match="reading it is a copy"):
        np.asarray(d, copy=False)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        d.shape = (6,)
    assert d != hologram.to_device(x, "hostdev")  # identity: another array of equal contents is another array
    for twin in (copy.copy(d), copy.deepcopy(d)):  # a new array, as for an ndarray, copied on the device
        assert twin is not d and twin.memory is not d.memory and np.array_equal(twin.numpy(), x)
    assert hostdev.device_copies == 2
    with pytest.raises(TypeError, match="does not pickle: its contents are in the backend's memory"):
        pickle.dumps(d)


def test_a_backend_without_device_arrays_says_so():
    interp = get_backend("interp")
    assert not interp.has_device_arrays
    for call in (lambda: interp.to_device(np.ones(2)), lambda: interp.allocate_device((2,), DType.F32)):
        with pytest.raises(ArgumentError, match="backend 'interp' has no device arrays"):
            call()


def test_the_launch_binder_takes_only_its_owners_device_arrays(hostdev):
    program = hologram.compile(VADD, backend="interp").program
    binding = LaunchBinding.of(program)
    x = np.ones(3, np.float32)
    xd = hostdev.to_device(x)
    with pytest.raises(ArgumentError, match="buffer 'x' is a device array of backend 'hostdev', but this backend has "
                                            "no device arrays"):
        binding.bind({"x": xd, "y": x, "z": x.copy()}, {}, {"n": 3})
    assert binding.bind({"x": xd, "y": x, "z": x.copy()}, {}, {"n": 3}, owner=hostdev).arrays[0] is xd
    with pytest.raises(ArgumentError, match="buffer 'x': expected 4 elements, got 3"):
        binding.bind({"x": xd, "y": np.ones(4, np.float32), "z": np.ones(4, np.float32)}, {}, {"n": 4},
                     owner=hostdev)
    with pytest.raises(ArgumentError, match="is already a device array"):
        host_array("to_device(): x", xd)


def test_another_library_s_array_is_adopted_without_a_copy(hostdev):
    """Backend.adopt: the call path asks the kernel's backend about an argument that is
    neither an ndarray nor a device array; the outputs are then on the device."""
    vadd = hologram.compile(VADD).on("hostdev")
    x = np.arange(4, dtype=np.float32)
    foreign = LibraryArray(x.copy())
    z = vadd(foreign, x)
    assert isinstance(z, HostDeviceArray) and np.array_equal(z.memory, 2 * x)
    assert (hostdev.uploads, hostdev.device_allocations) == (0, 1)
    target = hologram.to_device(LibraryArray(np.zeros(4, np.float32)), backend="hostdev")  # adopted, not copied
    assert hostdev.uploads == 0 and vadd(x, x, out=target) is target and np.array_equal(target.memory, 2 * x)
    with pytest.raises(ArgumentError, match=r"vadd\(\): argument 'y': this library's f16 arrays are not taken"):
        vadd(x, LibraryArray(np.zeros(4, np.float16)))


def test_the_launch_binder_adopts_through_its_owner_only(hostdev):
    program = hologram.compile(VADD, backend="interp").program
    binding = LaunchBinding.of(program)
    x = np.ones(3, np.float32)
    foreign = LibraryArray(x.copy())
    assert binding.bind({"x": foreign, "y": x, "z": x.copy()}, {}, {"n": 3}, owner=hostdev).arrays[0].memory \
        is foreign.memory
    with pytest.raises(ArgumentError, match="buffer 'x': expected a numpy array of f32, got LibraryArray"):
        binding.bind({"x": foreign, "y": x, "z": x.copy()}, {}, {"n": 3})


def test_a_backend_adopts_nothing_by_default():
    interp = get_backend("interp")
    foreign = LibraryArray(np.ones(3, np.float32))
    assert interp.adopt(foreign, "k(): argument 'x'") is None
    with pytest.raises(ArgumentError, match="vadd\\(\\): argument 'x' must be a numpy array of f32\\[n\\], got "
                                            "LibraryArray"):
        hologram.compile(VADD).on("interp")(foreign, foreign)
