#!/usr/bin/env python
"""What compiling many distinct kernels costs in resident memory, and what
`hologram.clear_cache()` gives back.

    python benchmarks/compile_memory.py [--kernels 1000] [--backend cpu_llvm]

Compiles and calls N distinct kernels (`y = x * i + 1`, i = 1..N) after one warm-up
kernel, and prints the process's RSS (Linux /proc) before, after, after
`hologram.clear_cache()`, and after glibc's `malloc_trim(0)` (memory freed but not yet
returned to the system is not a leak), plus how many LLVM optimizations ran. Point
HOLOGRAM_CACHE_DIR at an empty directory for a cold run; run it again on the same
directory for a warm one. docs/cpu-llvm.md ("What memory a compile leaves") has the
figures.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import time

import numpy as np

import hologram as hg

TEMPLATE = '''
[kernel]
name = "k{i}"
version = "1.0.0"
inputs = {{ x = "f32[n]" }}
outputs = {{ y = "f32[n]" }}
body = "y = x * {i}.0 + 1.0"
'''


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status (Linux only)")


def trim() -> None:
    """Hand freed heap pages back to the system (glibc), so RSS shows what is still held."""
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", type=int, default=1000)
    parser.add_argument("--backend", default="cpu_llvm")
    args = parser.parse_args()
    x = np.ones(16, np.float32)
    hg.compile(TEMPLATE.format(i=0), backend=args.backend)(x)  # imports, LLVM, pools: the baseline
    gc.collect()
    base = rss_mb()
    start = time.perf_counter()
    for i in range(1, args.kernels + 1):
        hg.compile(TEMPLATE.format(i=i), backend=args.backend)(x)
    seconds = time.perf_counter() - start
    gc.collect()
    after = rss_mb()
    hg.clear_cache()
    gc.collect()
    cleared = rss_mb()
    trim()
    trimmed = rss_mb()
    optimized = ""
    if args.backend == "cpu_llvm":
        from hologram_cpu_llvm import jit
        optimized = (f"; LLVM optimizations: {jit.STATS['optimize']}, {jit.STATS['worker']} of them in the "
                     f"compile worker")
    per = (trimmed - base) * 1024 / args.kernels
    print(f"{args.backend}: {args.kernels} kernels in {seconds:.1f} s{optimized}")
    print(f"RSS {base:.0f} MB -> {after:.0f} MB after the kernels -> {cleared:.0f} MB after clear_cache() "
          f"-> {trimmed:.0f} MB after malloc_trim(0): {per:.0f} KB per kernel kept")


if __name__ == "__main__":
    main()
