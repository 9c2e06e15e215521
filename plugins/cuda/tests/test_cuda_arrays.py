"""Device arrays on cuda without a device: `hologram.to_device(x, "cuda")`, kernels
chained on them, outputs allocated on the device, the memory freed when an array is
collected, and other libraries' arrays (`__cuda_array_interface__`: CuPy, PyTorch, numba)
taken without a copy or refused by name — all through the dry-run driver
(cuda_dry_run.py), whose simulated device memory the kernels (the interpreter) read and
write. What the PTX computes on these arrays needs a device: test_device.py."""

from __future__ import annotations

import gc
import os
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import hologram
from hologram.backend import DType
from hologram.errors import ArgumentError, PluginError
from hologram.registry.lookups import get_backend
from hologram_cuda.arrays import CudaArray, _c_contiguous
from hologram_cuda.driver import device_status

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
NO_DRIVER = device_status().reason.startswith("no CUDA driver: DynamicLibNotFoundError")
pytestmark = pytest.mark.skipif(not NO_DRIVER, reason="the dry-run driver stands in for a missing libcuda only; "
                                                      f"here: {device_status().reason}")
COPIES = ("cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync")


def _kernel(name: str):
    return hologram.compile_file(os.path.join(ROOT, "kernels", f"{name}.toml"), backend="cuda")


class ForeignArray:
    """Another library's device array as CuPy exposes it (`__cuda_array_interface__`
    v3), over the dry-run driver's memory; each field can be set to what a test needs."""

    def __init__(self, dry, host: np.ndarray, **fields):
        self.pointer = int(dry.sim_cuMemAlloc(max(host.nbytes, 1))[1])
        memory, where = dry.at(self.pointer, host.nbytes)
        memory[where] = host.tobytes()
        self.dry, self.host_shape, self.host_dtype = dry, host.shape, host.dtype
        self.fields = {"shape": host.shape, "typestr": host.dtype.str, "data": (self.pointer, False), "version": 3,
                       "strides": None, "stream": None, **fields}

    @property
    def __cuda_array_interface__(self):
        return self.fields

    def contents(self) -> np.ndarray:
        return self.dry.array(self.pointer, int(np.prod(self.host_shape)), self.host_dtype).reshape(self.host_shape)


# ---------------------------------------------------------------- own arrays
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int32", "int64", "float16", "float32", "float64"])
def test_to_device_and_back_is_the_same_bytes(dry_run_device, dtype):
    x = (np.arange(-3, 9) % 5).astype(dtype).reshape(3, 4)
    d = hologram.to_device(x, "cuda")
    assert isinstance(d, CudaArray) and (d.shape, d.dtype, d.backend) == ((3, 4), x.dtype, get_backend("cuda"))
    assert d.numpy().tobytes() == x.tobytes() and np.asarray(d).dtype == x.dtype
    assert dry_run_device.count("cuMemcpyHtoDAsync") == 1 and dry_run_device.count("cuMemcpyDtoHAsync") == 2


def test_an_empty_array_and_a_zeroed_allocation(dry_run_device):
    empty = hologram.to_device(np.zeros((0, 4), np.float32), "cuda")
    assert empty.numpy().shape == (0, 4) and dry_run_device.count(*COPIES) == 0
    z = get_backend("cuda").allocate_device((5,), DType.I32)  # cuMemAlloc's memory is garbage (the dry run's too)
    assert z.numpy().tolist() == [0] * 5 and dry_run_device.count("cuMemsetD8Async") == 1


def test_the_interface_is_cai_v3_of_the_allocation(dry_run_device):
    d = hologram.to_device(np.arange(6, dtype=np.float32).reshape(2, 3), "cuda")
    assert d.__cuda_array_interface__ == {"shape": (2, 3), "typestr": "<f4", "data": (d.pointer, False),
                                          "version": 3, "strides": None, "stream": None}
    assert d.pointer in dry_run_device.allocations
    assert repr(d) == f"CudaArray(shape=(2, 3), dtype=float32, backend='cuda', pointer={d.pointer:#x})"


def test_a_collected_array_frees_its_allocation(dry_run_device):
    d = hologram.to_device(np.ones(8, np.float32), "cuda")
    pointer = d.pointer
    copy = d.copy()  # on the device
    assert copy.pointer != pointer and copy.numpy().tolist() == [1.0] * 8
    assert dry_run_device.count("cuMemcpyDtoDAsync") == 1
    del d
    gc.collect()
    assert pointer not in dry_run_device.allocations and copy.pointer in dry_run_device.allocations
    assert dry_run_device.calls[-2:] == ["cuCtxSetCurrent", "cuMemFree"]  # the allocation's context, on any thread


def test_without_a_device_to_device_says_why(cuda):
    if device_status().available:
        pytest.skip("a device is here")
    with pytest.raises(PluginError, match=r"backend 'cuda' cannot run here: no CUDA driver: "):
        cuda.to_device(np.ones(3, np.float32))


# ------------------------------------------------------------- chained kernels
def test_a_chain_of_two_kernels_moves_no_array_between_host_and_device(dry_run_device):
    """vadd then vmul on device arrays: their outputs are allocated on the device, and
    the only copies are the inputs' (to_device), each launch's error word (4 words back)
    and the result read at the end."""
    vadd, vmul = _kernel("vadd"), _kernel("vmul")
    x, y = np.arange(100, dtype=np.float32), np.full(100, 3, np.float32)
    dx, dy = hologram.to_device(x, "cuda"), hologram.to_device(y, "cuda")
    before = len(dry_run_device.calls)
    s = vadd(dx, dy)
    p = vmul(s, dy)
    during = dry_run_device.calls[before:]
    assert isinstance(s, CudaArray) and isinstance(p, CudaArray)
    assert during.count("cuMemcpyHtoDAsync") == 0 and during.count("cuLaunchKernel") == 2
    assert during.count("cuMemcpyDtoHAsync") == 2  # the two launches' error words, 32 bytes each
    np.testing.assert_array_equal(p.numpy(), (x + y) * y)


def test_one_device_input_puts_the_outputs_on_the_device(dry_run_device):
    vadd = _kernel("vadd")
    x = np.arange(10, dtype=np.float32)
    out = vadd(hologram.to_device(x, "cuda"), x)  # the numpy input copied in, the output left on the device
    assert isinstance(out, CudaArray)
    np.testing.assert_array_equal(out.numpy(), 2 * x)
    host = vadd(x, x)
    assert type(host) is np.ndarray and host.tolist() == (2 * x).tolist()


def test_out_may_be_a_device_array(dry_run_device):
    vadd = _kernel("vadd")
    x = np.arange(10, dtype=np.float32)
    target = hologram.to_device(np.zeros(10, np.float32), "cuda")
    assert vadd(x, x, out=target) is target
    np.testing.assert_array_equal(target.numpy(), 2 * x)


# -------------------------------------------------------- other libraries' arrays
def test_a_cuda_array_interface_object_is_taken_without_a_copy(dry_run_device):
    vadd = _kernel("vadd")
    x = np.arange(50, dtype=np.float32)
    fx, fy = ForeignArray(dry_run_device, x), ForeignArray(dry_run_device, 2 * x)
    before = len(dry_run_device.calls)
    z = vadd(fx, fy)
    during = dry_run_device.calls[before:]
    assert during.count("cuMemcpyHtoDAsync") == 0 and during.count("cuMemcpyDtoDAsync") == 0
    assert isinstance(z, CudaArray)
    np.testing.assert_array_equal(z.numpy(), 3 * x)
    # the kernel read the foreign memory itself: change it, and the next call sees it
    fx.contents()[:] = 10
    np.testing.assert_array_equal(vadd(fx, fy).numpy(), 10 + 2 * x)


def test_map_takes_interface_objects_with_loop_dimensions(dry_run_device):
    vadd = _kernel("vadd")
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    z = vadd.map(ForeignArray(dry_run_device, x), ForeignArray(dry_run_device, x))
    assert isinstance(z, CudaArray) and z.shape == (2, 4)
    np.testing.assert_array_equal(z.numpy(), 2 * x)


def test_an_adopted_array_is_an_out_array_written_in_place(dry_run_device):
    vadd = _kernel("vadd")
    x = np.arange(6, dtype=np.float32)
    foreign = ForeignArray(dry_run_device, np.zeros(6, np.float32))
    out = hologram.to_device(foreign, "cuda")  # adopted: the same memory
    assert out.pointer == foreign.pointer and out.keeps is foreign
    vadd(x, x, out=out)
    np.testing.assert_array_equal(foreign.contents(), 2 * x)


def test_explicit_c_strides_are_contiguous(dry_run_device):
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    foreign = ForeignArray(dry_run_device, x, strides=(16, 4))
    np.testing.assert_array_equal(hologram.to_device(foreign, "cuda").numpy(), x)


def test_the_launch_path_takes_an_interface_object_directly(dry_run_device):
    """Backend.launch (below the kernel API) adopts too: LaunchBinding asks its owner."""
    cuda = get_backend("cuda")
    vadd = _kernel("vadd")
    x = np.arange(8, dtype=np.float32)
    z = ForeignArray(dry_run_device, np.zeros(8, np.float32))
    cuda.launch(vadd.program, {"x": x, "y": x, "z": z}, {}, {"n": 8})
    np.testing.assert_array_equal(z.contents(), 2 * x)


def test_the_producer_s_stream_is_synchronized_before_a_launch(dry_run_device):
    vadd = _kernel("vadd")
    x = np.ones(4, np.float32)
    fx = ForeignArray(dry_run_device, x, stream=0x5000)
    fy = ForeignArray(dry_run_device, x, stream=2)  # the per-thread default stream
    vadd(fx, fy)
    assert dry_run_device.synchronized[:2] == [0x5000, 2]


@pytest.mark.parametrize("fields, message", [
    ({"strides": (8,)}, r"vadd\(\): argument 'x' \(ForeignArray, through __cuda_array_interface__\) must be "
                        r"C-contiguous, got strides \(8,\) for shape \(16,\) of 4-byte items"),
    ({"shape": (4, 4), "strides": (4, 16)}, r"argument 'x' .* must be C-contiguous, got strides \(4, 16\)"),
    ({"typestr": "<c8"}, r"argument 'x' .* has typestr '<c8'; expected a little-endian one of bool, float16"),
    ({"typestr": ">f4"}, r"argument 'x' .* has typestr '>f4'; expected a little-endian one of"),
    ({"typestr": "<f8"}, r"vadd\(\): argument 'x' must have dtype f32 \(float32\), got a device array of float64"),
    ({"mask": object()}, r"argument 'x' .* has a mask"),
    ({"stream": 0}, r"argument 'x' .* has stream 0; __cuda_array_interface__ v3 allows None or a stream handle "
                    r"other than 0"),
    ({"strides": 4}, r"argument 'x' .*: malformed interface \(TypeError: .*\)"),
    ({"typestr": "garbage"}, r"argument 'x' .* has typestr 'garbage'; expected"),
    ({"data": None}, r"argument 'x' .*: malformed interface \(TypeError: .*\); expected 'shape', 'typestr' and "
                     r"'data' = \(pointer, readonly\)"),
])
def test_an_interface_the_backend_cannot_take_is_refused_by_name(dry_run_device, fields, message):
    vadd = _kernel("vadd")
    foreign = ForeignArray(dry_run_device, np.zeros(16, np.float32), **fields)
    with pytest.raises(ArgumentError, match=message):
        vadd(foreign, np.zeros(16, np.float32))


def test_host_memory_and_another_device_s_memory_are_refused(dry_run_device):
    vadd = _kernel("vadd")
    host = np.zeros(4, np.float32)
    stray = ForeignArray(dry_run_device, host)
    stray.fields["data"] = (host.ctypes.data, False)  # a host pointer claimed as device memory
    with pytest.raises(ArgumentError, match=r"argument 'x' .*: pointer 0x[0-9a-f]+ is not CUDA memory the driver "
                                            r"knows \(CUDA_ERROR_INVALID_VALUE\)"):
        vadd(stray, host)
    other = ForeignArray(dry_run_device, host)
    dry_run_device.other_device.add(other.pointer)
    with pytest.raises(ArgumentError, match=r"argument 'y' .* is memory of CUDA device 1; the cuda backend runs "
                                            r"on device 0"):
        vadd(host, other)


def test_a_read_only_array_is_an_input_never_an_output(dry_run_device):
    vadd = _kernel("vadd")
    x = np.arange(4, dtype=np.float32)
    frozen = ForeignArray(dry_run_device, x, data=None)
    frozen.fields["data"] = (frozen.pointer, True)
    np.testing.assert_array_equal(vadd(frozen, x).numpy(), 2 * x)  # read: fine
    before = dict(dry_run_device.allocations)
    with pytest.raises(ArgumentError, match=r"buffer 'z' is written by the program but the device array is "
                                            r"read-only \(its __cuda_array_interface__ says so\)"):
        vadd(x, x, out=hologram.to_device(frozen, "cuda"))
    assert dry_run_device.allocations.keys() == before.keys()  # refused before the launch allocated anything
    np.testing.assert_array_equal(frozen.contents(), x)


def test_other_backends_still_refuse_an_interface_object(dry_run_device):
    vadd = _kernel("vadd").on("interp")
    foreign = ForeignArray(dry_run_device, np.zeros(4, np.float32))
    with pytest.raises(ArgumentError, match=re.escape("vadd(): argument 'x' must be a numpy array of f32[n], got "
                                                      "ForeignArray")):
        vadd(foreign, foreign)


@given(st.lists(st.integers(0, 4), min_size=1, max_size=3), st.data())
def test_contiguity_is_numpy_s(shape, data):
    """`_c_contiguous` on an interface's shape and strides says what numpy's flag says of
    the same view (any slicing of any shape, steps included)."""
    base = np.zeros([2 * n + 1 for n in shape], np.int16)
    view = base[tuple(slice(0, n * step, step) for n, step in
                      zip(shape, data.draw(st.lists(st.sampled_from([1, 2]), min_size=len(shape),
                                                    max_size=len(shape)))))]
    assert _c_contiguous(view.shape, view.strides, 2) == view.flags.c_contiguous
