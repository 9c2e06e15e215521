"""On a device: the stdlib kernels, the conformance kit, the error word and both images
(cubin and PTX through the driver's JIT) against the interpreter; device arrays, and
CuPy's through `__cuda_array_interface__` when CuPy is installed. Every test here skips
with the driver's reason (`no CUDA driver: ...`) where there is no usable device;
`make gpu-check` (benchmarks/gpu_check.py) runs them on a machine with one."""

from __future__ import annotations

import glob
import os
import re
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import hologram
from hologram.backend import BufferParam
from hologram.errors import ArgumentError, ExecutionError
from hologram.isa.asm import parse_program
from hologram.testing.difftest_checks import launch_on_copies, launches
from hologram.testing.precision import compare_outputs, precision
from hologram_cuda.driver import device_status
from isa_helpers import OOB

STATUS = device_status()
pytestmark = pytest.mark.skipif(not STATUS.available, reason=STATUS.reason)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# Every stdlib kernel: the declaration covers them all (test_ptx.py assembles each).
STDLIB = sorted(os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(ROOT, "kernels", "*.toml")))


def _program(name: str):
    return hologram.compile_file(os.path.join(ROOT, "kernels", f"{name}.toml"), backend="interp").program


def _same_as_interpreter(cuda, program, case) -> None:
    from hologram.registry.lookups import get_backend

    want, want_err = launch_on_copies(get_backend("interp"), program, case.buffers, case.scalars, case.symbols)
    got, got_err = launch_on_copies(cuda, program, case.buffers, case.scalars, case.symbols)
    assert (got_err is None) == (want_err is None), (want_err, got_err)
    params = [p for p in program.params if isinstance(p, BufferParam)]
    failures = compare_outputs(params, precision(program), want, got)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("name", STDLIB)
def test_stdlib_kernel_matches_the_interpreter(cuda, name):
    program = _program(name)

    @settings(max_examples=15, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=launches(program, max_size=300))
    def check(case):
        _same_as_interpreter(cuda, program, case)

    check()


def test_full_float_sums_keep_the_contract_and_give_the_same_bits_every_launch(cuda):
    """docs/gpu.md, "Reductions": the tree of a full sum (2**24 + 1000 ones: one atomic
    at a time stalls at 16777216) and the fold of many blocks' partials."""
    from hologram.testing import assert_close

    kernel = hologram.compile_file(os.path.join(ROOT, "kernels", "sum.toml")).on("cuda")
    assert np.asarray(kernel(np.ones(2 ** 24 + 1000, np.float32))) == np.float32(2 ** 24 + 1000)
    x = np.random.default_rng(7).random(2 ** 22, dtype=np.float32)
    got = np.asarray(kernel(x))
    assert_close(got, np.asarray(x.sum(dtype=np.float32)), reduction_n=x.size, magnitude=np.asarray(x.sum()))
    assert np.asarray(kernel(x)).tobytes() == got.tobytes()


def test_the_conformance_kit_passes_on_cuda():
    from hologram.testing.conformance import run_conformance

    report = run_conformance("cuda", examples=20)
    assert report.ok, report.format()
    assert {area for area, declared, *_ in report.table() if declared} >= {
        "instructions", "conversions", "memory", "barriers", "control", "stage shapes"}, report.format()


def test_a_failed_check_on_the_device_is_the_interpreter_s_error(cuda):
    from hologram.registry.lookups import get_backend

    program = parse_program(OOB)
    messages = []
    for backend in (get_backend("interp"), cuda):
        y = np.zeros(8, np.float32)
        with pytest.raises(ExecutionError) as info:
            backend.launch(backend.prepare(program), {"x": np.zeros(8, np.float32), "y": y}, {}, {"n": 8})
        messages.append(re.sub(r" \(lane gid=\([^)]*\)\)", "", str(info.value)))
    assert messages[0] == messages[1]
    # the device keeps working after a reported failure (a check ends a lane, it does not trap)
    x = np.arange(8, dtype=np.float32)
    exe = cuda.prepare(_program("vadd"))
    z = np.zeros(8, np.float32)
    cuda.launch(exe, {"x": x, "y": x, "z": z}, {}, {"n": 8})
    np.testing.assert_array_equal(z, 2 * x)


def test_the_cubin_and_the_ptx_image_give_the_same_result(cuda):
    """The module choice: the cubin for the device's major version, and the PTX the
    driver JIT-compiles (what a newer GPU than any cubin loads) both run."""
    from cuda.bindings import driver

    from hologram_cuda import launch
    from hologram_cuda.driver import device

    gpu = device()
    exe = cuda.prepare(_program("axpy"))
    n = 100_003
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    results = []
    for kind in ("cubin", "ptx"):
        image = launch.choose_image(exe.ptx, exe.cubins if kind == "cubin" else {}, gpu.capability)
        assert image.kind == kind or not exe.cubins
        loaded = launch.load([k.name for k in exe.kernels], image, driver)
        z = np.zeros(n, np.float32)
        gpu.make_current()
        launch.run(exe, loaded, exe.binding.bind({"x": x, "y": y, "z": z}, {"alpha": 1.5}, {"n": n}), gpu.stream,
                   driver)
        results.append(z)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], np.float32(1.5) * x + y)  # no contraction: mul, then add


def test_a_launch_of_many_blocks_from_another_thread(cuda):
    exe = cuda.prepare(_program("vadd"))
    n = 10_000_019  # a partial last block
    x = np.arange(n, dtype=np.float32)
    z = np.zeros(n, np.float32)
    errors = []

    def work():
        try:
            cuda.launch(exe, {"x": x, "y": x, "z": z}, {}, {"n": n})
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert not errors, errors
    np.testing.assert_array_equal(z, x + x)


def test_available_and_the_device_found():
    from hologram.registry.lookups import get_backend

    assert get_backend("cuda").available()
    assert get_backend("cuda").unavailable_reason() is None
    assert "compute capability" in STATUS.reason


# ----------------------------------------------------------- device arrays (arrays.py)
def test_a_chain_of_kernels_on_device_arrays(cuda):
    from hologram_cuda.arrays import CudaArray

    vadd = hologram.compile_file(os.path.join(ROOT, "kernels", "vadd.toml"), backend="cuda")
    vmul = hologram.compile_file(os.path.join(ROOT, "kernels", "vmul.toml"), backend="cuda")
    x = np.arange(1_000_003, dtype=np.float32)
    dx = hologram.to_device(x, "cuda")
    s = vadd(dx, dx)
    p = vmul(s, dx)
    assert isinstance(s, CudaArray) and isinstance(p, CudaArray)
    np.testing.assert_array_equal(p.numpy(), (x + x) * x)
    np.testing.assert_array_equal(p.copy().numpy(), (x + x) * x)


def test_collected_device_arrays_give_their_memory_back(cuda):
    """Eight allocations of a quarter of the device's memory each, one alive at a time:
    without the free at collection the fifth would fail."""
    from hologram.backend import DType
    from hologram_cuda.driver import device

    quarter = device().memory_bytes // 4 // 4  # f32 elements
    for _ in range(8):
        d = cuda.allocate_device((quarter,), DType.F32)
        del d


def test_cupy_arrays_in_and_out_without_a_copy(cuda):
    cupy = pytest.importorskip("cupy")
    vadd = hologram.compile_file(os.path.join(ROOT, "kernels", "vadd.toml"), backend="cuda")
    x = cupy.arange(100_000, dtype=cupy.float32)
    z = vadd(x, x)  # adopted: CuPy's memory read in place; the output on the device
    back = cupy.asarray(z)  # CuPy wraps the output through its __cuda_array_interface__: the same memory
    assert back.data.ptr == z.pointer
    cupy.testing.assert_array_equal(back, 2 * x)
    target = cupy.zeros(100_000, cupy.float32)
    vadd(x, x, out=hologram.to_device(target, "cuda"))  # CuPy's array written in place
    cupy.testing.assert_array_equal(target, 2 * x)
    with pytest.raises(ArgumentError, match=r"argument 'x' \(ndarray, through __cuda_array_interface__\) must be "
                                            r"C-contiguous"):
        vadd(x[::2], x[::2])


def test_a_cupy_array_still_being_written_on_its_stream_is_waited_for(cuda):
    cupy = pytest.importorskip("cupy")
    vadd = hologram.compile_file(os.path.join(ROOT, "kernels", "vadd.toml"), backend="cuda")
    with cupy.cuda.Stream(non_blocking=True):
        x = cupy.arange(10_000_000, dtype=cupy.float32) * 3  # queued on that stream
        assert x.__cuda_array_interface__["stream"] not in (None, 0)
        z = vadd(x, x)
    np.testing.assert_array_equal(z.numpy(), np.arange(10_000_000, dtype=np.float32) * np.float32(3) * 2)
