#!/usr/bin/env python
"""`make gpu-check`: the GPU backends on a machine with an NVIDIA GPU, in one table.

    python benchmarks/gpu_check.py [--examples N] [--difftest-examples N] [--dry-run]

1. the conformance kit on cuda and wgpu (`run_conformance`, against the interpreter);
2. `hologram diff-test --backends interp,cuda,wgpu` (bounded: --difftest-examples, a
   timeout);
3. the GPU benchmarks (gpu_bench.py, which bench.py runs too): axpy and the fused
   expression sqrt(x*x + y*y) * exp(-z) at 1e8 f32 elements (device time per launch on
   device-resident buffers, as GB/s and as a fraction of the memory's peak bandwidth,
   read from the device attributes; and the whole call with its numpy transfers),
   softmax rows, gemm 4096² f32 (against CuPy's cuBLAS when cupy is importable), and
   the launch overhead of a one-element call, numpy in/out and on device arrays; every
   result checked against numpy's;
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
import subprocess
import sys
import time
from typing import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # gpu_bench, also when a test loads this file by its path
import gpu_bench  # noqa: E402 - the GPU benchmarks bench.py runs too
from gpu_bench import CudaTimer  # noqa: E402

ROOT = os.path.dirname(HERE)
DIFFTEST_TIMEOUT = 150  # seconds
DEVICE_TESTS_TIMEOUT = 120


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
# gpu_bench.py measures; these put its figures side by side, a wrong result a failure.
def _cells(table: Table, backends: dict[str, bool], title: str,
           measure: Callable[[str], gpu_bench.Figure]) -> dict[str, gpu_bench.Figure | None]:
    figures = {name: measure(name) if on else None for name, on in backends.items()}
    for name, figure in figures.items():
        if figure is not None and not figure.ok:
            table.fail(f"{title} on {name}: wrong result")
    return figures


def _add(table: Table, title: str, figures: dict[str, gpu_bench.Figure | None], note: str = "") -> None:
    cells = {name: "-" if f is None else f.cell if f.ok else f"FAILED: {f.cell}" for name, f in figures.items()}
    table.add(title, cells["cuda"], cells["wgpu"], note)


def streaming(table: Table, backends: dict[str, bool], timer: CudaTimer | None, n: int) -> None:
    """axpy and the fused expression: device GB/s (cuda), whole calls with transfers (both)."""
    peak = timer.gpu.peak_bandwidth if timer is not None else None
    axpy_args, fused_args, want = gpu_bench.streaming_inputs(n)
    for (title, (kernel, arrays)), args in zip(gpu_bench.streaming_kernels().items(), (axpy_args, fused_args)):
        figures = _cells(table, backends, title, lambda name: gpu_bench.streaming(
            name, kernel, arrays, args, want[title], timer, peak if name == "cuda" else None))
        _add(table, f"{title}, {n:.0e} f32", figures)


def softmax_rows(table: Table, backends: dict[str, bool], rows: int, cols: int) -> None:
    title = f"softmax rows {rows}x{cols} f32"
    _add(table, title, _cells(table, backends, title, lambda name: gpu_bench.softmax_rows(name, rows, cols)))


def gemm(table: Table, backends: dict[str, bool], timer: CudaTimer | None, size: int) -> None:
    title = f"gemm {size}x{size} f32"
    a, b, want = gpu_bench.gemm_inputs(size)
    figures = _cells(table, backends, title, lambda name: gpu_bench.gemm(name, a, b, want, timer))
    cuda = figures["cuda"]
    note = "" if cuda is None or timer is None else gpu_bench.cublas_note(a, b, cuda.seconds)
    _add(table, title, figures, note)


def launch_overhead(table: Table, backends: dict[str, bool]) -> None:
    for title, resident in (("launch overhead (vadd, n=1, numpy in/out)", False),
                            ("launch overhead (vadd, n=1, device arrays)", True)):
        _add(table, title, _cells(table, backends, title, lambda name: gpu_bench.launch_overhead(name, resident)))


# ---------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=20, help="generated examples of the conformance kit")
    parser.add_argument("--difftest-examples", type=int, default=60, help="examples of diff-test per kind")
    parser.add_argument("--dry-run", action="store_true",
                        help="without a CUDA device: the wgpu columns at small sizes, cuda left out")
    args = parser.parse_args(argv)
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")  # Mesa's probe for a display, quieted (docs/gpu.md)

    why = gpu_bench.gpu_status()
    if why["cuda"] is not None and not args.dry_run:
        print(f"gpu-check: cuda is not available here: {why['cuda']}", file=sys.stderr)
        return 2
    backends = {"cuda": why["cuda"] is None and not args.dry_run, "wgpu": why["wgpu"] is None}
    table = Table()
    t0 = time.perf_counter()
    print(f"cuda: {gpu_bench.device_of('cuda').description}" if backends["cuda"]
          else f"cuda left out: {why['cuda'] or '--dry-run'}")
    if not backends["wgpu"]:  # a note, not a failure: the GPU machine may have no Vulkan driver; cuda is what is checked
        table.add("wgpu", "-", f"not available: {why['wgpu']}")
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
