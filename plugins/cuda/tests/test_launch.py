"""The launch path without a device: the grid, the image chosen by compute capability,
the error word's words, the availability and its reason, and one whole launch
(`launch.run`) against a dry-run driver (cuda_dry_run.py): every driver call goes first
to cuda-bindings itself, whose argument conversion runs before it looks for libcuda (a
wrong argument type is a TypeError there), then a simulation on host memory answers it."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from cuda_dry_run import DryRunDriver

import hologram
from hologram.backend import error_record
from hologram.errors import ExecutionError, PluginError
from hologram.isa.asm import parse_program
from hologram.registry.lookups import get_backend
from hologram_cuda import launch
from hologram_cuda.abi import SUM_THREADS
from hologram_cuda.driver import MIN_CAPABILITY, device_status, peak_bandwidth, usable
from hologram_cuda.launch import choose_image, execution_error, grid
from isa_helpers import OOB

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
NO_DRIVER = device_status().reason.startswith("no CUDA driver: DynamicLibNotFoundError")
needs_no_driver = pytest.mark.skipif(not NO_DRIVER, reason="the dry-run driver stands in for a missing libcuda only; "
                                                           f"here: {device_status().reason}")


# ------------------------------------------------------------------------------ grid
def test_grid_is_ceil_of_domain_over_block_per_axis():
    assert grid("s", (1000,), (256, 1, 1)) == (4, 1, 1)
    assert grid("s", (1024,), (256, 1, 1)) == (4, 1, 1)
    assert grid("s", (7, 5), (3, 2, 1)) == (3, 3, 1)
    assert grid("s", (9, 10, 11), (2, 4, 8)) == (5, 3, 2)
    assert grid("s", (0, 5), (4, 4, 1)) == (0, 2, 1)  # an empty domain: not launched


def test_a_grid_beyond_cuda_limits_is_an_execution_error():
    assert grid("s", (2 ** 31 - 1,), (1, 1, 1)) == (2 ** 31 - 1, 1, 1)
    with pytest.raises(ExecutionError, match=r"stage 'rows': a domain of 65536 lanes on axis y in blocks of 1 needs "
                                             r"65536 blocks; CUDA launches at most 65535 on y"):
        grid("rows", (4, 65536), (4, 1, 1))


# ---------------------------------------------------------------------------- images
PTX = {"sm_80": "ptx for 80", "sm_90": "ptx for 90"}
CUBINS = {"sm_80": b"\x7fELF80", "sm_90": b"\x7fELF90"}


@pytest.mark.parametrize("capability, kind, target", [
    ((8, 0), "cubin", "sm_80"), ((8, 6), "cubin", "sm_80"), ((8, 9), "cubin", "sm_80"),  # same major, newer minor
    ((9, 0), "cubin", "sm_90"),
    ((10, 0), "ptx", "sm_90"), ((12, 0), "ptx", "sm_90"),  # no cubin of that major: the newest PTX, JIT-compiled
])
def test_image_is_the_cubin_of_the_device_major_else_the_newest_ptx(capability, kind, target):
    image = choose_image(PTX, CUBINS, capability)
    assert (image.kind, image.target) == (kind, target)
    assert image.data == (CUBINS[target] if kind == "cubin" else PTX[target].encode() + b"\0")


def test_without_cubins_the_ptx_is_loaded():
    image = choose_image(PTX, {}, (9, 0))
    assert (image.kind, image.target, image.data) == ("ptx", "sm_90", b"ptx for 90\0")


def test_a_device_older_than_every_target_is_refused():
    with pytest.raises(ExecutionError, match=r"compute capability 7\.5 is older than every target built "
                                             r"\(sm_80, sm_90\)"):
        choose_image(PTX, CUBINS, (7, 5))


def test_device_status_needs_sm_80():
    assert MIN_CAPABILITY == (8, 0)
    old = usable((7, 5), "Tesla T4")
    assert not old.available and old.reason == ("no usable CUDA device: Tesla T4 has compute capability 7.5; the "
                                                "cuda backend needs 8.0 or newer (sm_80)")
    h200 = usable((9, 0), "NVIDIA H200")
    assert h200.available and h200.reason == "NVIDIA H200 (compute capability 9.0)"


def test_peak_bandwidth_from_the_device_attributes():
    # an A100 40GB: 1215 MHz HBM2, 5120-bit bus: 1555 GB/s, as NVIDIA states it
    assert peak_bandwidth(1_215_000, 5120) == pytest.approx(1555.2e9)


# ------------------------------------------------------------------------ error word
def test_every_code_the_kernels_write_is_decoded_in_the_interpreter_s_words():
    """The decoding is the SDK's, cpu_llvm's too: a class or pool failure is worded as
    the interpreter words it, not as a bare code."""
    program = parse_program(OOB)
    got = execution_error(program, [error_record.ERR_CLASS, 0, 2, 200], {})
    assert str(got).endswith("instruction 2 `LDG.f32.chk %v, [x + %j]`: 200 is not an Atlas class (0..95)")
    got = execution_error(program, [error_record.ERR_POOL_FREE, 0, 2, 3], {})
    assert str(got).endswith("PoolFree of handle 3, but it is not the most recent allocation")


def _interp_message(program, n: int) -> str:
    interp = get_backend("interp")
    with pytest.raises(ExecutionError) as info:
        interp.launch(interp.prepare(program), {"x": np.zeros(n, np.float32), "y": np.zeros(n, np.float32)}, {},
                      {"n": n})
    return re.sub(r" \(lane gid=\([^)]*\)\)", "", str(info.value))  # the word carries no lane


def test_error_word_is_decoded_in_the_interpreter_s_words():
    program = parse_program(OOB)
    got = execution_error(program, [error_record.ERR_OOB_GLOBAL, 0, 2, 8], {"x": 8, "y": 8})
    assert str(got) == _interp_message(program, 8) == ("stage 's': instruction 2 `LDG.f32.chk %v, [x + %j]`: index 8 "
                                                       "is out of bounds for global buffer 'x' of 8 elements")


def test_an_error_word_naming_no_instruction_is_still_an_execution_error():
    got = execution_error(parse_program(OOB), [9, 3, 40, 1], {})
    assert str(got) == "program 'oob': the device reported error 9 at stage 3, instruction 40 (value 1)"


# ---------------------------------------------------------------------- availability
def test_without_a_usable_device_not_available_and_launch_says_why(cuda):
    status = device_status()
    if status.available:
        pytest.skip(f"a device is here: {status.reason}")
    assert cuda.available() is False
    reason = cuda.unavailable_reason()
    assert reason == status.reason and reason.startswith(("no CUDA driver: ", "no CUDA device: ",
                                                          "no usable CUDA device: "))
    exe = cuda.prepare(hologram.compile_file(os.path.join(ROOT, "kernels", "vadd.toml"), backend="interp").program)
    x = np.ones(8, np.float32)
    with pytest.raises(PluginError, match=r"backend 'cuda' cannot launch program 'vadd': " + re.escape(reason)):
        cuda.launch(exe, {"x": x, "y": x.copy(), "z": np.zeros(8, np.float32)}, {}, {"n": 8})


@needs_no_driver
def test_hologram_plugins_says_there_is_no_cuda_driver():
    out = subprocess.run([sys.executable, "-m", "hologram", "plugins"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "cuda is not available here: no CUDA driver: DynamicLibNotFoundError: " in out.stdout, out.stdout


def test_a_default_backend_never_probes_cuda():
    """cpu_llvm (priority 100) is above cuda (50): picking the default never imports
    cuda-bindings (cuInit is paid only by a process that asks for cuda)."""
    code = ("import sys; from hologram.registry.lookups import get_backend; b = get_backend(); "
            "print(b.name, 'cuda.bindings' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in os.environ.items() if k != "HOLOGRAM_BACKEND"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["cpu_llvm", "False"]


# -------------------------------------------------------------- a dry-run launch
def _dry_run(cuda, program, kernel, buffers, scalars, symbols):
    exe = cuda.prepare(program)
    driver = DryRunDriver(kernel)
    image = choose_image(exe.ptx, exe.cubins, (9, 0))
    loaded = launch.load([k.name for k in exe.kernels], image, driver)
    launch.run(exe, loaded, exe.binding.bind(buffers, scalars, symbols), driver.real.CUstream(0), driver)
    return exe, driver


@needs_no_driver
def test_a_launch_moves_the_arrays_and_runs_each_stage_with_the_packed_arguments(cuda):
    """axpy (z = alpha*x + y) on the dry-run driver: the simulated kernel reads the packed
    parameters as the PTX would (pointers, n, alpha, the error word) and computes on the
    device copies; z comes back, x and y do not."""
    program = hologram.compile_file(os.path.join(ROOT, "kernels", "axpy.toml"), backend="interp").program
    layout = cuda.prepare(program).arguments
    seen = []

    def kernel(name, blocks, block, params, dev):
        record = np.frombuffer(params, layout.struct)[0]
        n, alpha = int(record["s.n"]), record["p.alpha"]
        seen.append((name, blocks, block, n, float(alpha)))
        x, y = dev.array(record["b.x"], n, np.float32), dev.array(record["b.y"], n, np.float32)
        assert not dev.array(record["__err"], 4, np.int64).any()  # zeroed before the launch
        dev.array(record["b.z"], n, np.float32)[:] = alpha * x + y
        y[:] = -1  # a device copy: the caller's y is not written back

    n = 1000
    x, y, z = np.arange(n, dtype=np.float32), np.ones(n, np.float32), np.zeros(n, np.float32)
    exe, driver = _dry_run(cuda, program, kernel, {"x": x, "y": y, "z": z}, {"alpha": 2.0}, {"n": n})
    block = exe.kernels[0].block
    assert seen == [(exe.kernels[0].name, (-(-n // block[0]), 1, 1), block, n, 2.0)]
    np.testing.assert_array_equal(z, 2 * np.arange(n, dtype=np.float32) + 1)
    np.testing.assert_array_equal(y, np.ones(n, np.float32))
    assert driver.calls == ["cuModuleLoadData", "cuModuleGetFunction", "cuMemAlloc", "cuMemcpyHtoDAsync",
                            "cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync", "cuMemsetD8Async", "cuLaunchKernel",
                            "cuMemcpyDtoHAsync", "cuStreamSynchronize", "cuMemcpyDtoHAsync", "cuStreamSynchronize",
                            "cuMemFree"]


@needs_no_driver
def test_a_full_sum_launches_its_stage_then_its_sums_kernel_with_scratch_for_every_block(cuda):
    """The stdlib sum on the dry-run driver, its kernels simulated by their contract
    (docs/gpu.md, "Full float sums"): the stage writes each block's partial (an f32 in
    an 8-byte slot of the scratch memory), the sums kernel, one block of SUM_THREADS
    after it, adds them into the element its `.init` kernel seeded."""
    program = hologram.compile_file(os.path.join(ROOT, "kernels", "sum.toml"), backend="interp").program
    layout = cuda.prepare(program).arguments
    n, block = 5000, 256
    blocks = -(-n // block)
    seen = []

    def kernel(name, grid, threads, params, dev):
        record = np.frombuffer(params, layout.struct)[0]
        kind = name.rsplit("_", 1)[-1]
        seen.append((kind if kind in ("init", "sums") else "stage", grid, threads))
        total = dev.array(record["b.total"], 1, np.float32)
        slots = dev.array(record["__scratch"], blocks, np.float64).view(np.float32)[::2]  # every slot is there
        if kind == "init":
            total[0] = 0
        elif kind == "sums":
            total[0] += slots.sum()
        else:
            x = dev.array(record["b.x"], n, np.float32)
            slots[:] = [x[b * block:(b + 1) * block].sum() for b in range(blocks)]

    x = np.ones(n, np.float32)
    out = np.zeros((), np.float32)
    _dry_run(cuda, program, kernel, {"x": x, "total": out}, {}, {"n": n})
    assert seen == [("init", (1, 1, 1), (1, 1, 1)), ("stage", (blocks, 1, 1), (block, 1, 1)),
                    ("sums", (1, 1, 1), (SUM_THREADS, 1, 1))]
    assert out == n


@needs_no_driver
def test_a_failed_check_raises_the_interpreter_s_error_and_copies_nothing_back(cuda):
    program = parse_program(OOB)
    layout = cuda.prepare(program).arguments

    def kernel(name, blocks, block, params, dev):
        record = np.frombuffer(params, layout.struct)[0]
        dev.array(record["b.y"], 8, np.float32)[:] = 5.0  # what lanes stored before one failed
        dev.array(record["__err"], 4, np.int64)[:] = [error_record.ERR_OOB_GLOBAL, 0, 2, 8]

    y = np.zeros(8, np.float32)
    with pytest.raises(ExecutionError) as info:
        _dry_run(cuda, program, kernel, {"x": np.zeros(8, np.float32), "y": y}, {}, {"n": 8})
    assert str(info.value) == _interp_message(program, 8)
    assert not y.any()


@needs_no_driver
def test_empty_domains_launch_nothing_and_temporaries_are_zeroed(cuda):
    program = parse_program(OOB)
    launched = []
    _, driver = _dry_run(cuda, program, lambda *a: launched.append(a), {"x": np.zeros(0, np.float32),
                                                                        "y": np.zeros(0, np.float32)}, {}, {"n": 0})
    assert launched == [] and "cuLaunchKernel" not in driver.calls
    assert driver.calls.count("cuMemsetD8Async") == 3  # the two empty buffers (one byte each) and the error word


@needs_no_driver
def test_gpu_check_fails_loudly_without_cuda():
    """`make gpu-check` on a machine without a usable device: a non-zero exit, saying why."""
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "gpu_check.py")], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.startswith("gpu-check: cuda is not available here: no CUDA driver: DynamicLibNotFoundError")


@needs_no_driver
def test_the_conformance_kit_passes_through_the_launch_path_on_a_dry_run_device(dry_run_device):
    """Every program of the kit that cuda declares, launched through `CudaBackend.launch`
    (binding, the module, the grid, one allocation, copies in, packed arguments, the error
    word, copies back) on the dry-run driver, gives the interpreter's outputs: the host
    side of a launch is right for every shape, dtype, scalar and stage count the kit has.
    (The kernels are the interpreter's: what the PTX computes needs a device.)"""
    from hologram.testing.conformance import FAILED, run_conformance

    report = run_conformance("cuda", examples=0)
    assert report.ok, report.format()
    ran = [c for c in report.checks if c.status != "not declared"]
    assert len(ran) > 100 and not [c for c in ran if c.status == FAILED]


@needs_no_driver
def test_gpu_check_benchmarks_run_their_cuda_columns_on_a_dry_run_device(dry_run_device):
    """benchmarks/gpu_check.py's cuda columns (device time on device-resident buffers
    through CUDA events, whole calls through the kernel API) at small sizes: the code a
    GPU machine runs, with the results checked against numpy."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", os.path.join(ROOT, "benchmarks", "gpu_check.py"))
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    table, on = gpu_check.Table(), {"cuda": True, "wgpu": False}
    timer = gpu_check.CudaTimer()
    gpu_check.streaming(table, on, timer, 1000)
    gpu_check.gemm(table, on, timer, 16)
    gpu_check.softmax_rows(table, on, 4, 8)
    gpu_check.launch_overhead(table, on)
    assert not table.failed, table.rows
    cells = {item: cuda for item, cuda, _, _ in table.rows}
    # the dry run's events say 1 ms for the timed launches (10 of axpy, 3 of gemm)
    assert cells["axpy, 1e+03 f32"].startswith("device 0.10 ms = 0 GB/s = 0% of peak; call ")
    assert cells["gemm 16x16 f32"] == "device 0.3 ms = 0.00 TFLOP/s"
    assert cells["softmax rows 4x8 f32"].startswith("call ")  # declared since libdevice: EXP
    assert cells["launch overhead (vadd, n=1, numpy in/out)"].endswith(" us per call")


@needs_no_driver
def test_every_device_test_skips_with_the_driver_s_reason():
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                          os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_device.py")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:]
    skips = re.findall(r"^SKIPPED \[(\d+)\] [^:]+:\d+: (.*)$", out.stdout, re.M)
    summary = re.search(r"^(\d+) skipped in ", out.stdout, re.M)  # skipped, and nothing passed or failed
    assert summary and sum(int(n) for n, _ in skips) == int(summary.group(1)) > 10, out.stdout[-2000:]
    assert all(why.startswith("no CUDA driver: DynamicLibNotFoundError: ") for _, why in skips), skips
