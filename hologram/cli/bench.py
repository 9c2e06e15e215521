"""`hologram bench`: run the benchmark suite (benchmarks/bench.py of the source checkout).

    hologram bench [--quick] [--only NAME,...] [--repeat N] [--results-dir DIR]

The suite runs in a fresh process: it drops OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE from
its environment before importing numpy (they slow numpy's gemm, the baseline gemm is
held to), which this process, having imported numpy already, could not do for itself.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Any

from hologram.core.errors import HologramError


def bench_script() -> str:
    """benchmarks/bench.py next to the package (an editable install or a checkout)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # hologram/cli/bench.py
    path = os.path.join(root, "benchmarks", "bench.py")
    if not os.path.exists(path):
        raise HologramError(f"the benchmark suite is not here ({path}); it lives in the source checkout's "
                            "benchmarks/ directory: run `make bench` there")
    return path


def cmd_bench(args: argparse.Namespace) -> int:
    argv = [sys.executable, bench_script()] + (["--quick"] if args.quick else [])
    if args.only:
        argv += ["--only", args.only]
    if args.repeat:
        argv += ["--repeat", str(args.repeat)]
    if args.results_dir:
        argv += ["--results-dir", args.results_dir]
    return subprocess.run(argv).returncode


def add_bench(sub: Any) -> None:
    p = sub.add_parser("bench", help="benchmark hologram against numpy, numexpr and numba",
                       description="Run benchmarks/bench.py: median times, ratios and the targets they are held "
                       "to; results JSON in benchmarks/results/.")
    p.add_argument("--quick", action="store_true", help="tiny sizes: checks that everything runs")
    p.add_argument("--only", metavar="NAME,...", help="only these benchmarks (see bench.py --list)")
    p.add_argument("--repeat", type=int, metavar="N", help="timed runs per measurement")
    p.add_argument("--results-dir", metavar="DIR", help="where the results JSON goes")
    p.set_defaults(func=cmd_bench)
