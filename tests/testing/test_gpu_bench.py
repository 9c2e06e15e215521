"""benchmarks/bench.py's GPU columns (benchmarks/gpu_bench.py, shared with gpu_check.py):
every GPU figure checked against numpy, a kernel a backend does not declare a cell saying
so with the reason (not an error, not a failure), on wgpu where it runs (lavapipe in CI)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from hologram.registry.lookups import backends

from repo_paths import ROOT

F64_AXPY = '''[kernel]
name = "axpy"
version = "1.0.0"
inputs  = { alpha = "f64", x = "f64[n]", y = "f64[n]" }
outputs = { z = "f64[n]" }
body = "z = alpha * x + y"
'''


def _wgpu_runs() -> bool:
    wgpu = backends().get("wgpu")
    return wgpu is not None and wgpu.available()


needs_wgpu = pytest.mark.skipif(not _wgpu_runs(), reason="wgpu is not installed or has no adapter here")


@pytest.fixture
def bench(monkeypatch):
    for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # bench drops them when imported: put them back after
        if name in os.environ:
            monkeypatch.setenv(name, os.environ[name])
    monkeypatch.setenv("XDG_RUNTIME_DIR", os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import bench

    return bench


def test_a_wrong_gpu_result_is_flagged_not_timed_as_right(bench):
    """The figures are checked against numpy as bench.py's CPU columns are: a result that
    disagrees is a failed figure saying WRONG RESULT (here numpy's answer is made wrong)."""
    import gpu_bench

    kernel, arrays = gpu_bench.streaming_kernels()["axpy"]
    args, _, want = gpu_bench.streaming_inputs(64)
    right = gpu_bench.streaming("interp", kernel, arrays, args, want["axpy"], None, None)
    wrong = gpu_bench.streaming("interp", kernel, arrays, args, want["axpy"] + 1, None, None)
    assert right.ok and right.cell.startswith("call ")
    assert not wrong.ok and wrong.cell.startswith("WRONG RESULT")


@needs_wgpu
def test_bench_main_table_says_not_declared_with_the_reason(bench, monkeypatch):
    """A kernel wgpu does not declare (f64 arithmetic: WGSL has none) is a cell saying so
    with the backend's reason, not an error."""
    monkeypatch.setitem(bench.SOURCES, "axpy", F64_AXPY)
    d = bench.make_data(bench.QUICK)
    cell = bench.hologram_impls("wgpu", d, ["axpy"])["axpy"]
    assert isinstance(cell, bench.Cell) and cell.seconds is None
    assert cell.note.startswith("not declared (") and "f64" in cell.note
    assert bench.measure("axpy", cell, None, 1) is cell


@needs_wgpu
def test_bench_gpu_columns_on_wgpu(bench):
    """bench.py's GPU table at --quick sizes on wgpu: every row has a wgpu cell; each
    figure that ran agreed with numpy; the streaming rows give GB/s on device arrays
    (no fraction of a peak: WebGPU does not say its bandwidth); the rest say why not."""
    from rich.console import Console

    import gpu_bench

    gpu = gpu_bench.time_gpu(Console(quiet=True), bench.QUICK.n, bench.QUICK.gemm, quick=True)
    device = gpu["devices"]["wgpu"]
    assert device["peak_bandwidth"] is None and "peak bandwidth unknown" in device["description"]
    assert "cuda" in gpu["devices"]  # a column, or why there is none
    assert set(gpu["times"]) == set(gpu_bench.GPU_ROWS)
    cells = {row: by_backend["wgpu"] for row, by_backend in gpu["times"].items()}
    for row, cell in cells.items():
        assert cell["ok"], (row, cell)
        assert cell["seconds"] is not None or cell["cell"].startswith("not declared ("), (row, cell)
    axpy = cells["gpu_axpy"]
    assert axpy["size"] == "n=256" and axpy["cell"].startswith("device arrays ") and " GB/s; call " in axpy["cell"]
    assert "of peak" not in axpy["cell"] and axpy["values"]["gb_per_s"] > 0
    assert cells["gpu_launch_device"]["cell"].endswith(" us per call")


def test_gpu_sizes_are_large_on_a_gpu_and_normal_on_a_software_device(bench):
    import gpu_bench

    gpu = gpu_bench.Device("an H200", 4.8e12, 140 * 2 ** 30 // 8, False)
    lavapipe = gpu_bench.Device("llvmpipe", None, 128 * 2 ** 20, True)
    small = gpu_bench.Device("a small GPU", None, 128 * 2 ** 20, False)  # binds 128 MiB: 1e8 f32 do not fit
    full, quick = (bench.FULL.n, bench.FULL.gemm), (bench.QUICK.n, bench.QUICK.gemm)
    assert gpu_bench.gpu_sizes(gpu, *full, quick=False) == {"n": 10 ** 8, "softmax_rows": (4096, 4096), "gemm": 4096}
    assert gpu_bench.gpu_sizes(lavapipe, *full, quick=False) == {"n": bench.FULL.n, "softmax_rows": (4882, 4096),
                                                                 "gemm": bench.FULL.gemm}
    assert gpu_bench.gpu_sizes(small, *full, quick=False)["n"] == bench.FULL.n
    assert gpu_bench.gpu_sizes(gpu, *quick, quick=True)["n"] == bench.QUICK.n
