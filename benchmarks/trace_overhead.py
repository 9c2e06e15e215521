"""What tracing costs a kernel call: off (against a checkout without tracing) and on.

    python benchmarks/trace_overhead.py [--calls 100000] [--runs 11] [--backend cpu_llvm] [--json FILE]
    PYTHONPATH=/tmp/base:/tmp/base/plugins/cpu_llvm:/tmp/base/plugins/interp \
        python benchmarks/trace_overhead.py        # the same calls on another checkout

Each row is the thread CPU time of one call (`time.thread_time_ns`, which other
processes on a shared machine do not inflate), the minimum over `--runs` runs of
`--calls` calls, minus the same loop around a no-op; the multithreaded row is a wall
time (its chunks run on other threads), the median of its runs. With tracing on, the
events go to memory (`hologram.trace.start()` with no file) and are dropped between runs.
Rows (16-element `axpy`, outputs given; docs/tracing.md, "Overhead"):

- `k(a, x, y, out=(o,))`, `k(a, x, y, out=o)`: the fast path (on cpu_llvm, the native
  launcher);
- `k(a, x, y)`: the fast path, output allocated;
- `sum(x, out=(t,))` on 16 elements: a reduction, the Python launcher;
- `sigmoid(x, out=(y,))` on 2**20 elements: a stage split across the native pool.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

import hologram

KERNELS = Path(__file__).resolve().parent.parent / "kernels"  # the standard library's sources


def cases(backend: str) -> dict[str, tuple[Callable[[], Any], bool]]:
    """name -> (one call, whether it is timed by the wall clock)."""
    axpy, total, sig = (hologram.compile_file(KERNELS / f"{name}.toml").on(backend)
                        for name in ("axpy", "sum", "sigmoid"))
    rng = np.random.default_rng(0)
    a = np.float32(2)
    x, y, o = (rng.uniform(-1, 1, 16).astype(np.float32) for _ in range(3))
    t = np.empty((), np.float32)
    big = rng.uniform(-4, 4, 1 << 20).astype(np.float32)
    bigo = np.empty_like(big)
    return {
        "axpy16 k(a, x, y, out=(o,))": (lambda: axpy(a, x, y, out=(o,)), False),
        "axpy16 k(a, x, y, out=o)": (lambda: axpy(a, x, y, out=o), False),
        "axpy16 k(a, x, y)": (lambda: axpy(a, x, y), False),
        "sum16 k(x, out=(t,))": (lambda: total(x, out=(t,)), False),
        "sigmoid 2^20 k(x, out=(y,)) [wall]": (lambda: sig(big, out=(bigo,)), True),
    }


def per_call(fn: Callable[[], Any], calls: int, runs: int, wall: bool, between: Callable[[], None]) -> float:
    """Nanoseconds per call: min over runs of the thread CPU time (median of wall times)."""
    clock = time.perf_counter_ns if wall else time.thread_time_ns
    calls = max(1, calls // 500) if wall else calls
    nothing = lambda: None  # noqa: E731

    def loop(f: Callable[[], Any]) -> int:
        t0 = clock()
        for _ in range(calls):
            f()
        return clock() - t0

    fn()
    times, empty = [], []
    for _ in range(runs):
        between()
        times.append(loop(fn))
        empty.append(loop(nothing))
    if wall:
        return (statistics.median(times) - statistics.median(empty)) / calls
    return (min(times) - min(empty)) / calls


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=11)
    p.add_argument("--backend", default="cpu_llvm")
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args(argv)
    trace = getattr(hologram, "trace", None) if "trace" in getattr(hologram, "__all__", ()) else None
    results: dict[str, dict[str, float]] = {}
    for name, (fn, wall) in cases(args.backend).items():
        row = results[name] = {"off": per_call(fn, args.calls, args.runs, wall, lambda: None)}
        if trace is not None:
            trace.start()
            try:
                row["on"] = per_call(fn, max(args.calls // 10, 1), args.runs, wall, trace.clear)
            finally:
                trace.stop()
        print(f"{name:38} off {row['off'] / 1000:8.3f} us"
              + (f"   on {row['on'] / 1000:8.3f} us" if "on" in row else ""), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"where": hologram.__file__, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
