#!/usr/bin/env python
"""`make gpu-check`: the GPU backends on a machine with an NVIDIA GPU, in one table.

    python benchmarks/gpu_check.py [--examples N] [--difftest-examples N] [--dry-run]

1. the conformance kit on cuda and wgpu (`run_conformance`, against the interpreter);
2. `hologram diff-test --backends interp,cuda,wgpu` (bounded: --difftest-examples, a
   timeout);
3. the GPU benchmarks: axpy and a fused expression at 1e8 f32 elements (device time per
   launch on device-resident buffers, as GB/s and as a fraction of the memory's peak
   bandwidth, read from the device attributes; and the whole call with its numpy
   transfers), softmax rows, gemm 4096² f32 (against CuPy's cuBLAS when cupy is
   importable), and the launch overhead of a one-element call;
4. the cuda device tests (plugins/cuda/tests/test_device.py).

It prints one table and exits non-zero when cuda is not available (saying why), when any
check fails, or when a step runs out of its time (wgpu not available is a note: the
machine may have no Vulkan driver); the whole stays under 5 minutes on an
H100/H200-class machine. `--dry-run` runs what a machine without a CUDA device can run
(the wgpu columns, on whatever adapter wgpu finds, at small sizes) and leaves the cuda
columns out; it exits 0 when those pass.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

import numpy as np

import hologram
from hologram.backend import BufferParam
from hologram.errors import UnsupportedProgram
from hologram.registry.lookups import backends as registered, get_backend, unavailable_reason

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KERNELS = os.path.join(ROOT, "kernels")
DIFFTEST_TIMEOUT = 150  # seconds
DEVICE_TESTS_TIMEOUT = 120

FUSED = '''[kernel]
name = "fused_gpu"
version = "1.0.0"
inputs  = { x = "f32[n]", y = "f32[n]", z = "f32[n]" }
outputs = { w = "f32[n]" }
body = "w = sqrt(x*x + y*y) * z"
'''
# bench.py's fused expression has exp(-z); neither GPU backend declares exp yet (docs/gpu.md)

SOFTMAX_ROWS = '''[kernel]
name = "softmax_rows"
version = "1.0.0"
inputs  = { x = "f32[r, c]" }
outputs = { y = "f32[r, c]" }
body = """
m[i] = max(x[i, j], j)
e[i, j] = exp(x[i, j] - m[i])
y[i, j] = e[i, j] / sum(e[i, k], k)
"""
'''


class Table:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str]] = []
        self.failed: list[str] = []

    def add(self, item: str, cuda: str, wgpu: str, note: str = "") -> None:
        self.rows.append((item, cuda, wgpu, note))
        print(f"  {item}: cuda {cuda} | wgpu {wgpu} {note}".rstrip(), flush=True)

    def fail(self, what: str) -> str:
        self.failed.append(what)
        return "FAILED"

    def print(self) -> None:
        head = ("check", "cuda", "wgpu", "note")
        rows = [head, *self.rows]
        widths = [max(len(r[k]) for r in rows) for k in range(3)]
        print()
        for r in rows:
            print(("  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3]).rstrip())
        if self.failed:
            print(f"\nFAILED: {', '.join(self.failed)}")


# --------------------------------------------------------------------- correctness
def conformance(table: Table, backends: dict[str, bool], examples: int) -> None:
    from hologram.testing.conformance import run_conformance

    cells = {}
    for name, on in backends.items():
        if not on:
            cells[name] = "-"
            continue
        report = run_conformance(name, examples=examples)
        passed = sum(row[2] for row in report.table())
        missing = sum(row[4] for row in report.table())
        cells[name] = f"{passed} passed, {len(report.failures)} failed, {missing} not declared"
        if not report.ok:
            print(report.format())
            cells[name] = table.fail(f"conformance on {name}") + f" ({cells[name]})"
    table.add("conformance kit", cells["cuda"], cells["wgpu"], f"{examples} generated examples")


def difftest(table: Table, backends: dict[str, bool], examples: int) -> None:
    names = ["interp", *(b for b, on in backends.items() if on)]
    cmd = [sys.executable, "-m", "hologram", "diff-test", "--backends", ",".join(names), "--examples",
           str(examples), "--seed", "0", "--out", os.path.join(ROOT, "difftest-failures")]
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=DIFFTEST_TIMEOUT)
        ok, tail = out.returncode == 0, (out.stdout + out.stderr).strip().splitlines()[-3:]
    except subprocess.TimeoutExpired:
        ok, tail = False, [f"timed out after {DIFFTEST_TIMEOUT} s"]
    verdict = f"passed ({time.perf_counter() - t0:.0f} s)" if ok else table.fail("diff-test")
    if not ok:
        print("\n".join(tail))
    table.add(f"diff-test --backends {','.join(names)}", verdict if backends["cuda"] else "-",
              verdict if backends["wgpu"] else "-", f"{examples} examples, seed 0")


def device_tests(table: Table) -> None:
    # the conformance kit ran above (its row): not twice; the CuPy tests only where CuPy is
    # installed (pip install cupy-cuda12x), as a skip here is a failure
    have_cupy = importlib.util.find_spec("cupy") is not None
    deselect = "not conformance_kit" + ("" if have_cupy else " and not cupy")
    cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-k", deselect,
           os.path.join(ROOT, "plugins", "cuda", "tests", "test_device.py")]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=DEVICE_TESTS_TIMEOUT,
                             env=os.environ | {"HYPOTHESIS_PROFILE": "ci"})
        summary = (out.stdout.strip().splitlines() or ["?"])[-1]
        ok = out.returncode == 0 and "skipped" not in summary
    except subprocess.TimeoutExpired:
        ok, summary, out = False, f"timed out after {DEVICE_TESTS_TIMEOUT} s", None
    if not ok and out is not None:
        print(out.stdout[-4000:])
    summary += "" if have_cupy else " (CuPy not installed: its tests not run)"
    table.add("cuda device tests", summary if ok else table.fail("cuda device tests") + f" ({summary})", "-")


# ---------------------------------------------------------------------- benchmarks
def median_seconds(fn: Callable[[], Any], repeat: int = 5) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


class CudaTimer:
    """Device time per launch of a prepared program on device-resident buffers: the
    arguments uploaded once, `repeat` launches between two CUDA events."""

    def __init__(self) -> None:
        from cuda.bindings import driver

        from hologram_cuda.driver import call, device

        self.driver, self.call, self.gpu = driver, call, device()
        self.backend = get_backend("cuda")

    def seconds(self, program: Any, buffers: dict, scalars: dict, symbols: dict, repeat: int = 10) -> float:
        from hologram_cuda import launch

        d, call, gpu = self.driver, self.call, self.gpu
        exe = self.backend.prepare(program)
        gpu.make_current()
        loaded = self.backend._module_on_device(exe, gpu, d)
        bound = exe.binding.bind(buffers, scalars, symbols)
        on = launch.upload(exe, bound, gpu.stream, d)
        start, end = (call(d.cuEventCreate, d.CUevent_flags.CU_EVENT_DEFAULT.value) for _ in range(2))
        launch.launch_stages(exe, loaded, on, gpu.stream, d)  # warm-up
        call(d.cuEventRecord, start, gpu.stream)
        for _ in range(repeat):
            launch.launch_stages(exe, loaded, on, gpu.stream, d)
        call(d.cuEventRecord, end, gpu.stream)
        call(d.cuEventSynchronize, end)
        ms = call(d.cuEventElapsedTime, start, end)
        launch.finish(exe, bound, on, gpu.stream, d)
        for e in (start, end):
            call(d.cuEventDestroy, e)
        return ms / 1e3 / repeat


def _refusal(backend: str, program: Any) -> str | None:
    """What `backend`'s declaration leaves out of `program`, in its words; None if nothing."""
    try:
        get_backend(backend).check_covers(program)
    except UnsupportedProgram as e:
        return str(e).splitlines()[0].split(f"{program.name!r}: ", 1)[-1]
    return None


def _skip(backend: str, on: bool, program: Any) -> str:
    """A cell's text when `backend` does not run `program` here ("-", or "not declared"
    with the reason), else ""."""
    if not on:
        return "-"
    why = _refusal(backend, program)
    return f"not declared ({why})" if why else ""


def streaming(table: Table, backends: dict[str, bool], timer: CudaTimer | None, n: int) -> None:
    """axpy and the fused expression: device GB/s (cuda), whole calls with transfers (both)."""
    rng = np.random.default_rng(0)
    x, y, z = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    cases = {"axpy": (hologram.compile_file(os.path.join(KERNELS, "axpy.toml")), (np.float32(2), x, y), 3),
             "fused sqrt(x*x+y*y)*z": (hologram.compile(FUSED), (x, y, z), 4)}
    for title, (kernel, args, arrays) in cases.items():
        program, nbytes = kernel.program, arrays * 4 * n
        want = (2 * x + y) if title == "axpy" else np.sqrt(x * x + y * y) * z
        cells = {}
        for name, on in backends.items():
            skip = _skip(name, on, program)
            if skip:
                cells[name] = skip
                continue
            k = kernel.on(name)
            out = np.empty(n, np.float32)
            total = median_seconds(lambda: k(*args, out=(out,)), repeat=3)
            if not np.allclose(out, want, rtol=1e-6, atol=1e-6, equal_nan=True):
                cells[name] = table.fail(f"{title} on {name}: wrong result")
                continue
            cell = f"call {total * 1e3:.1f} ms"
            if name == "cuda" and timer is not None:
                names = [p.name for p in program.params if isinstance(p, BufferParam)]
                scalars = {p.name: args[0] for p in program.params if not isinstance(p, BufferParam)}
                bufs = dict(zip(names, [a for a in args if isinstance(a, np.ndarray)] + [out]))
                t = timer.seconds(program, bufs, scalars, {"n": n})
                rate = nbytes / t
                cell = (f"device {t * 1e3:.2f} ms = {rate / 1e9:.0f} GB/s = "
                        f"{rate / timer.gpu.peak_bandwidth:.0%} of peak; " + cell)
            cells[name] = cell
        table.add(f"{title}, {n:.0e} f32", cells["cuda"], cells["wgpu"])


def softmax_rows(table: Table, backends: dict[str, bool], rows: int, cols: int) -> None:
    kernel = hologram.compile(SOFTMAX_ROWS)
    x = np.random.default_rng(1).standard_normal((rows, cols), dtype=np.float32)
    cells = {}
    for name, on in backends.items():
        cells[name] = _skip(name, on, kernel.program)
        if not cells[name]:
            k = kernel.on(name)
            cells[name] = f"call {median_seconds(lambda: k(x)) * 1e3:.1f} ms"
    table.add(f"softmax rows {rows}x{cols} f32", cells["cuda"], cells["wgpu"])


def gemm(table: Table, backends: dict[str, bool], timer: CudaTimer | None, size: int) -> None:
    kernel = hologram.compile_file(os.path.join(KERNELS, "gemm.toml"))
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((size, size), dtype=np.float32) for _ in range(2))
    flops = 2 * size ** 3
    cells, note = {}, "cupy not importable: no cuBLAS column"
    for name, on in backends.items():
        cells[name] = _skip(name, on, kernel.program)
        if cells[name]:
            continue
        c = np.empty((size, size), np.float32)
        if name == "cuda" and timer is not None:
            t = timer.seconds(kernel.program, {"a": a, "b": b, "c": c}, {"alpha": np.float32(1)},
                              {"m": size, "k": size, "n": size}, repeat=3)
            cells[name] = f"device {t * 1e3:.1f} ms = {flops / t / 1e12:.2f} TFLOP/s"
            try:
                import cupy

                ga, gb = cupy.asarray(a), cupy.asarray(b)
                cupy.matmul(ga, gb)
                s, e = cupy.cuda.Event(), cupy.cuda.Event()
                s.record()
                for _ in range(3):
                    cupy.matmul(ga, gb)
                e.record()
                e.synchronize()
                ref = cupy.cuda.get_elapsed_time(s, e) / 1e3 / 3
                note = f"CuPy/cuBLAS {ref * 1e3:.1f} ms = {flops / ref / 1e12:.2f} TFLOP/s; hologram at {ref / t:.0%}"
            except ImportError:
                pass
        else:
            k = kernel.on(name)
            cells[name] = f"call {median_seconds(lambda: k(np.float32(1), a, b, out=(c,)), repeat=1) * 1e3:.0f} ms"
    table.add(f"gemm {size}x{size} f32", cells["cuda"], cells["wgpu"], note)


def launch_overhead(table: Table, backends: dict[str, bool]) -> None:
    kernel = hologram.compile_file(os.path.join(KERNELS, "vadd.toml"))
    x = np.ones(1, np.float32)
    cells = {}
    for name, on in backends.items():
        cells[name] = _skip(name, on, kernel.program)
        if cells[name]:
            continue
        k, out = kernel.on(name), np.empty(1, np.float32)
        calls = 200
        t = median_seconds(lambda: [k(x, x, out=(out,)) for _ in range(calls)], repeat=3) / calls
        cells[name] = f"{t * 1e6:.0f} us per call"
    table.add("launch overhead (vadd, n=1, numpy in/out)", cells["cuda"], cells["wgpu"])


# ---------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=20, help="generated examples of the conformance kit")
    parser.add_argument("--difftest-examples", type=int, default=60, help="examples of diff-test per kind")
    parser.add_argument("--dry-run", action="store_true",
                        help="without a CUDA device: the wgpu columns at small sizes, cuda left out")
    args = parser.parse_args(argv)
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")  # Mesa's probe for a display, quieted (docs/gpu.md)

    table_of = registered()
    cuda = table_of.get("cuda")
    cuda_why = ("hologram-backend-cuda is not installed (pip install -e plugins/cuda)" if cuda is None
                else None if cuda.available() else unavailable_reason(cuda))
    if cuda_why is not None and not args.dry_run:
        print(f"gpu-check: cuda is not available here: {cuda_why}", file=sys.stderr)
        return 2
    wgpu = table_of.get("wgpu")
    wgpu_on = wgpu is not None and wgpu.available()
    backends = {"cuda": cuda_why is None and not args.dry_run, "wgpu": wgpu_on}
    table = Table()
    t0 = time.perf_counter()
    if backends["cuda"]:
        from hologram_cuda.driver import device

        gpu = device()
        print(f"cuda: {gpu.name}, compute capability {gpu.capability[0]}.{gpu.capability[1]}, "
              f"{gpu.memory_bytes / 2 ** 30:.0f} GiB, peak {gpu.peak_bandwidth / 1e9:.0f} GB/s")
    else:
        print(f"cuda left out: {cuda_why or '--dry-run'}")
    if not wgpu_on:  # a note, not a failure: the GPU machine may have no Vulkan driver; cuda is what is checked
        table.add("wgpu", "-", f"not available: {unavailable_reason(wgpu) if wgpu else 'not installed'}")
    conformance(table, backends, args.examples)
    difftest(table, backends, args.difftest_examples)
    if backends["cuda"]:
        device_tests(table)
    timer = CudaTimer() if backends["cuda"] else None
    big = not args.dry_run
    streaming(table, backends, timer, 10 ** 8 if big else 10 ** 5)
    softmax_rows(table, backends, *((4096, 4096) if big else (64, 256)))
    gemm(table, backends, timer, 4096 if big else 128)
    launch_overhead(table, backends)
    table.print()
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return 1 if table.failed else 0


if __name__ == "__main__":
    sys.exit(main())
