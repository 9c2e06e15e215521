#!/usr/bin/env python
"""Streaming beyond RAM: `hologram.stream` over a float32 memmap on disk (16 GiB by default).

    python benchmarks/stream.py [--gb 16] [--dir DIR] [--keep] [--repeat 3] [--pool-mb 64] [--json PATH]

Makes (once; `--keep` leaves it for the next run, found again in `--dir`) a file of
`--gb` GiB of float32 values (a 64 MiB block of uniform [0, 1) values, repeated), then
times, each run in a fresh child process, `--repeat` times:

| row | what |
|---|---|
| hologram stream sum | `hg.stream(stdlib.sum, x)`, `x = np.load(path, mmap_mode="r")`, pool `--pool-mb` |
| numpy np.sum(memmap) | `np.sum(x)` on the same memmap (numpy reads the mapping) |
| numpy chunked sum | `sum(float(x[i:i + c].sum(dtype=np.float64)) for i in ...)`, c = 16 Mi elements |
| hologram stream y = 2x + 1 | `hg.stream(k, x, out=y)`, `y` a second memmap of the same size |
| numpy chunked y = 2x + 1 | `np.multiply(x[i:j], 2, out=y[i:j]); y[i:j] += 1` per 16 Mi elements |

`--pool-mb` is `pool_bytes`, a bound: a chunk's buffers take at most 4 MiB
(hologram.streaming.args.SLOT_BYTES) when they are copied through the pool, so y = 2x + 1
allocates 12 MiB of it; on cpu_llvm the input is read in place (no pool buffer), `sum`
a 32 MiB window at a time, two windows mapped at most (docs/streaming.md). Neither the hologram nor the numpy rows wait for the output's dirty pages
to reach the disk (no fsync in the timing); the check after reads three values back.

Each child reports its wall time around the call and its peak resident set (VmHWM,
`/proc/self/status`, which counts the mapped pages a process touches, and not the page
cache its file reads go through). The file's cached pages are dropped before each run
of the "cold" rows (`posix_fadvise(DONTNEED)`: the data comes from the disk); the "warm"
rows run right after a cold one, reading what the page cache kept (the machine's RAM
bounds how much of the file that is). The output file is removed between runs.

For scale, the same kernels on a 1 GiB array in memory (best of 5 calls in one process):
hologram's `sum` and `y = 2x + 1` (with `out=`) and numpy's `x.sum()` and `np.multiply`
+ `np.add` with `out=`. Throughput is the input's bytes per second (the elementwise rows
also write as many).

Before making the file, the free space is checked (`df -h` of `--dir`); when it cannot
hold the input and an output, `--gb` is scaled down to what fits, and the run says so.
`--json PATH` writes every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GIB = 1 << 30
BLOCK = 16 << 20  # f32 elements: the repeated 64 MiB block
CHUNK = 16 << 20  # elements per step of the numpy loops

CHILD = r"""
import json, os, sys, time
import numpy as np
import hologram as hg

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0

path, out, which, pool = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
x = np.load(path, mmap_mode="r")
n = len(x)
scale = hg.compile('[kernel]\nname = "scale"\nversion = "1.0.0"\ninputs = { x = "f32[n]" }\n'
                   'outputs = { y = "f32[n]" }\nbody = "y = x * 2 + 1"\n')
total = hg.load_bundle("stdlib").sum
tiny = np.ones(4096, np.float32)
hg.stream(total, tiny), hg.stream(scale, tiny, out=np.empty_like(tiny))  # compiled, cached: not timed
if which.endswith("map"):
    y = np.lib.format.open_memmap(out, "w+", np.float32, (n,))
before = hwm()
t = time.perf_counter()
if which == "hologram-sum":
    result = float(hg.stream(total, x, pool_bytes=pool))
elif which == "numpy-sum":
    result = float(np.sum(x))
elif which == "numpy-chunked-sum":
    result = 0.0
    for i in range(0, n, %(chunk)d):
        result += float(x[i:i + %(chunk)d].sum(dtype=np.float64))
elif which == "hologram-map":
    hg.stream(scale, x, out=y, pool_bytes=pool)
    result = None
elif which == "numpy-chunked-map":
    for i in range(0, n, %(chunk)d):
        np.multiply(x[i:i + %(chunk)d], 2, out=y[i:i + %(chunk)d])
        y[i:i + %(chunk)d] += 1
    result = None
seconds = time.perf_counter() - t
if which.endswith("map"):
    y.flush()
    check = [float(y[0]), float(y[n // 2]), float(y[-1])]
    want = [float(x[0]) * 2 + 1, float(x[n // 2]) * 2 + 1, float(x[-1]) * 2 + 1]
    result = check == want
print(json.dumps({"seconds": seconds, "hwm": hwm(), "before": before, "result": result}))
""" % {"chunk": CHUNK}

IN_MEMORY = r"""
import json, time
import numpy as np
import hologram as hg

x = np.random.default_rng(0).random(%(n)d, dtype=np.float32)
y = np.empty_like(x)
scale = hg.compile('[kernel]\nname = "scale"\nversion = "1.0.0"\ninputs = { x = "f32[n]" }\n'
                   'outputs = { y = "f32[n]" }\nbody = "y = x * 2 + 1"\n')
total = hg.load_bundle("stdlib").sum
def best(f):
    f()
    times = []
    for _ in range(5):
        t = time.perf_counter(); f(); times.append(time.perf_counter() - t)
    return min(times)
print(json.dumps({"hologram sum": best(lambda: total(x)), "numpy sum": best(lambda: x.sum()),
                  "hologram y = 2x + 1": best(lambda: scale(x, out=y)),
                  "numpy y = 2x + 1": best(lambda: (np.multiply(x, 2, out=y), np.add(y, 1, out=y)))}))
"""

ROWS = [("hologram stream sum", "hologram-sum"), ("numpy np.sum(memmap)", "numpy-sum"),
        ("numpy chunked sum", "numpy-chunked-sum"), ("hologram stream y = 2x + 1", "hologram-map"),
        ("numpy chunked y = 2x + 1", "numpy-chunked-map")]


def make_input(path: Path, gib: float) -> int:
    import numpy as np

    n = int(gib * GIB) // 4 // BLOCK * BLOCK
    if path.exists():
        try:
            if len(np.load(path, mmap_mode="r")) == n:
                return n
        except ValueError:
            pass
    header = np.lib.format.open_memmap(str(path), "w+", np.float32, (n,))
    offset = header.offset
    del header
    block = np.random.default_rng(0).random(BLOCK, dtype=np.float32).tobytes()
    t = time.perf_counter()
    with open(path, "r+b") as f:
        f.seek(offset)
        for k in range(n // BLOCK):
            f.write(block)
            if k % 16 == 15:
                print(f"  writing the input: {(k + 1) * BLOCK * 4 / GIB:.0f} / {n * 4 / GIB:.0f} GiB", end="\r",
                      flush=True)
        os.fsync(f.fileno())
    print(f"  wrote {n * 4 / GIB:.1f} GiB in {time.perf_counter() - t:.0f} s" + " " * 20)
    return n


def drop_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def child(path: Path, out: Path, which: str, pool: int) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(out), which, str(pool)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{which} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gb", type=float, default=16.0, help="GiB of float32 input (default 16)")
    ap.add_argument("--dir", default=None, help="where the files go (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the input file for the next run")
    ap.add_argument("--repeat", type=int, default=3, help="runs per row and cache state (default 3)")
    ap.add_argument("--pool-mb", type=int, default=64, help="hologram.stream's pool_bytes, in MiB (default 64)")
    ap.add_argument("--only", default="", help="comma-separated rows to run (hologram-sum, numpy-sum, ...)")
    ap.add_argument("--json", default=None, help="write every figure to this file")
    args = ap.parse_args()
    folder = Path(args.dir or tempfile.mkdtemp(prefix="hologram-stream-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(subprocess.run(["df", "-h", str(folder)], capture_output=True, text=True).stdout.rstrip())
    path, out = folder / "input.npy", folder / "output.npy"
    have = path.stat().st_size if path.exists() else 0
    free = shutil.disk_usage(folder).free + have
    gib = args.gb
    if free < (2 * gib + 1) * GIB:
        gib = max(int(free / GIB - 1) // 2, 1)
        print(f"NOTE: {free / GIB:.0f} GiB free in {folder} cannot hold a {args.gb:g} GiB input and its output: "
              f"scaled down to {gib} GiB")
    n = make_input(path, gib)
    nbytes = n * 4
    pool = args.pool_mb << 20
    only = set(filter(None, args.only.split(",")))
    print(f"input: {nbytes / GIB:.1f} GiB float32 at {path}; pool {args.pool_mb} MiB; {os.cpu_count()} CPUs; "
          f"load average {os.getloadavg()[0]:.1f}; {args.repeat} runs per row")
    results: dict = {"gib": nbytes / GIB, "pool_mb": args.pool_mb, "repeat": args.repeat, "rows": {},
                     "load_before": os.getloadavg()}
    for label, which in ROWS:
        if only and which not in only:
            continue
        for state in ("cold", "warm"):
            runs = []
            for _ in range(args.repeat):
                if state == "cold":
                    drop_cache(path)
                r = child(path, out, which, pool)
                runs.append(r)
                if out.exists():
                    out.unlink()
            secs = [r["seconds"] for r in runs]
            row = {"seconds": secs, "median": statistics.median(secs), "best": min(secs),
                   "gbs_best": nbytes / min(secs) / 1e9, "gbs_median": nbytes / statistics.median(secs) / 1e9,
                   "peak_rss_mb": max(r["hwm"] for r in runs) / 2**20,
                   "rss_growth_mb": max(r["hwm"] - r["before"] for r in runs) / 2**20,
                   "results": [r["result"] for r in runs]}
            results["rows"][f"{label} ({state})"] = row
            print(f"{label + ' (' + state + ')':40s} median {row['median']:7.2f} s  best {row['best']:7.2f} s  "
                  f"{row['gbs_median']:5.2f} GB/s median, {row['gbs_best']:5.2f} best  peak RSS "
                  f"{row['peak_rss_mb']:7.0f} MB (+{row['rss_growth_mb']:.0f})  result {runs[0]['result']}",
                  flush=True)
    size = min(GIB // 4, n)
    done = subprocess.run([sys.executable, "-c", IN_MEMORY % {"n": size}], capture_output=True, text=True)
    if done.returncode == 0:
        mem = json.loads(done.stdout.strip().splitlines()[-1])
        results["in_memory"] = {k: {"seconds": v, "gbs": size * 4 / v / 1e9} for k, v in mem.items()}
        for k, v in mem.items():
            print(f"in memory, {size * 4 / GIB:.0f} GiB: {k:24s} {v * 1e3:8.1f} ms  {size * 4 / v / 1e9:6.2f} GB/s")
    else:
        print(f"in-memory figures failed:\n{done.stderr}")
    results["load_after"] = os.getloadavg()
    print(f"load average after: {results['load_after'][0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    if not args.keep and args.dir is None:
        shutil.rmtree(folder, ignore_errors=True)
    elif not args.keep:
        path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
