#!/usr/bin/env python
"""gemm against numpy's BLAS, side by side, at the sizes a user meets: GFLOP/s and ratio.

    python benchmarks/gemm.py [--sizes 256,512,1024,2048] [--threads 1] [--dtypes f32,f64] [--repeat 15]

Times `kernels/gemm.toml` on cpu_llvm (`c = alpha * (a @ b)`, alpha = 1, called with
keywords as a user would) and numpy's `a @ b` on the same square operands, and prints
each one's GFLOP/s (2 n³ flops per product) and hologram's share of numpy's. With
`--threads 1` (the default) both run on one thread (`HOLOGRAM_NUM_THREADS`,
`OPENBLAS_NUM_THREADS`, set before either library loads) and each figure is the best
*thread CPU time* of `--repeat` calls: on a shared machine the wall clock mostly
measures the neighbours, while the CPU time a thread spent is what the code costs. With
more threads it is the best wall time. OpenBLAS's tuning variables
(OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE) are dropped, as `make bench` does, so numpy runs
the kernel it picks for this CPU. Large sizes run fewer calls (at most 4 past 1024).

Both types take the register tile over packed panels (docs/lowering.md, "Contractions").
The largest error against an f64 product, relative to the largest output, is printed
with each row so a fast wrong answer shows.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="256,512,1024,2048")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtypes", default="f32,f64")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args(argv)
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        os.environ.pop(var, None)
    os.environ["HOLOGRAM_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    import numpy as np

    import hologram as hg

    clock = time.thread_time if args.threads == 1 else time.perf_counter
    text = (ROOT / "kernels" / "gemm.toml").read_text(encoding="utf-8")

    def best(call, repeat: int) -> float:
        times = []
        for _ in range(repeat):
            t0 = clock()
            call()
            times.append(clock() - t0)
        return min(times)

    print(f"gemm, {args.threads} thread(s), best {'thread CPU' if args.threads == 1 else 'wall'} time")
    print(f"{'dtype':>5} {'n':>5} {'hologram':>11} {'GFLOP/s':>8} {'numpy':>11} {'GFLOP/s':>8} {'ratio':>6} {'error':>8}")
    for name in args.dtypes.split(","):
        dt = {"f32": np.float32, "f64": np.float64}[name]
        kernel = hg.compile(text.replace("f32", name)).on("cpu_llvm")
        for n in map(int, args.sizes.split(",")):
            rng = np.random.default_rng(n)
            a, b = (rng.standard_normal((n, n)).astype(dt) for _ in range(2))
            alpha = dt(1)
            c = kernel(alpha=alpha, a=a, b=b)
            exact = a.astype(np.float64) @ b.astype(np.float64)
            error = float(np.abs(c - exact).max() / np.abs(exact).max())
            repeat = args.repeat if n <= 1024 else min(args.repeat, 4)
            ours = best(lambda: kernel(alpha=alpha, a=a, b=b), repeat)
            theirs = best(lambda: a @ b, repeat)
            flops = 2.0 * n ** 3
            print(f"{name:>5} {n:>5} {ours * 1e3:>8.2f} ms {flops / ours / 1e9:>8.0f} {theirs * 1e3:>8.2f} ms "
                  f"{flops / theirs / 1e9:>8.0f} {theirs / ours:>6.2f} {error:>8.1e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
