#!/usr/bin/env python
"""Kernels over Dask arrays on a 2-worker LocalCluster, against the same computation
written with dask + numpy, in one run.

    python benchmarks/dask_bench.py [--n 1e9] [--chunk 2.5e7] [--repeat 3] [--json PATH]

A `LocalCluster` of 2 worker processes, one thread each (`HOLOGRAM_NUM_THREADS=1` in the
workers, so the cluster runs as many threads as this machine has cores, the way Dask
is meant to be sized), no dashboard. The inputs are made on the workers and persisted
first (never timed); each row then times building the graph and `persist()` + `wait()`
of the result, which stays on the workers (gathering a large result to the client costs
seconds of transfer that neither side should be charged for), best of `--repeat` after
one warm-up run each (the workers prepare the kernel then). The inputs a task reads
together are made together (column groups of one random array), so their blocks live on
the same worker, as data loaded together does; no row is charged for moving inputs.

| row | hologram | dask + numpy |
|---|---|---|
| elementwise | stdlib `axpy(2, x, y)` | `2 * x + y` |
| sum | stdlib `sum(x)` | `x.sum()` |
| softmax over rows | `e = exp(x - max(x, axis=1)); y = e / sum(e, axis=1)` over `x: f32[m, 1000]` (keepdims) | `e = exp(x - x.max(1, keepdims)); e / e.sum(1, keepdims)` |
| tall-skinny X.T @ v | `c = x.T @ v` over `x: f32[n, 16]` | `x.T @ v` |
| overhead per chunk | stdlib `relu` over 4096 chunks of 64 elements | `da.maximum(x, 0)` |

`--n` elements per array (f32: `--n 1e9` is 4 GB an array; elementwise holds three).
The ratio is hologram over dask + numpy: below 1.0 hologram is faster.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time

import numpy as np

SOFTMAX_ROWS = '''[kernel]
name = "softmax_rows"
version = "1.0.0"
inputs = { x = "f32[m, n]" }
outputs = { y = "f32[m, n]" }
body = """
top = max(x, axis=1, keepdims=true)
e = exp(x - top)
y = e / sum(e, axis=1, keepdims=true)
"""
'''

XTV = '''[kernel]
name = "xtv"
version = "1.0.0"
inputs = { x = "f32[n, k]", v = "f32[n]" }
outputs = { c = "f32[k]" }
body = "c = x.T @ v"
'''


def best(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=float, default=1e9, help="elements per array (default 1e9)")
    ap.add_argument("--chunk", type=float, default=2.5e7, help="elements per chunk (default 2.5e7: 100 MB)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    n, chunk = int(args.n), int(args.chunk)

    from distributed import Client, LocalCluster

    import hologram as hg

    lib = hg.load_bundle("stdlib")
    softmax_rows, xtv = hg.compile(SOFTMAX_ROWS), hg.compile(XTV)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=logging.ERROR, env={"HOLOGRAM_NUM_THREADS": "1"}) as cluster, \
            Client(cluster) as client:
        rows = _rows(client, lib, softmax_rows, xtv, n, chunk, args.repeat)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"n": n, "chunk": chunk, "rows": rows}, f, indent=2)
    return 0


def _rows(client, lib, softmax_rows, xtv, n: int, chunk: int, repeat: int) -> list[dict]:
    import dask.array as da
    from dask.core import flatten
    from distributed import wait

    print(f"{n:.3g} f32 elements per array, chunks of {chunk:.3g}; 2 worker processes x 1 thread; "
          f"best of {repeat}", flush=True)

    def made(rows, cols, chunk_rows, seed):
        """Arrays made on the workers, persisted: one per column group of one random array
        (so the blocks a task reads together live on the same worker, as for data that
        was loaded together), each block contiguous."""
        parent = da.random.default_rng(seed).random((rows, sum(cols)), dtype=np.float32,
                                                    chunks=(chunk_rows, sum(cols)))
        out, at = [], 0
        for c in cols:
            part = parent[:, at:at + c] if c > 1 else parent[:, at]
            out.append(part.map_blocks(np.ascontiguousarray, meta=np.array((), np.float32)).persist())
            at += c
        wait(out)
        return out

    def forgotten(keys) -> bool:
        def check(dask_scheduler, keys=keys):
            return not any(k in dask_scheduler.tasks for k in keys)
        return client.run_on_scheduler(check)

    def timed(make, repeat=repeat):
        def run():
            y = make().persist()
            wait(y)
            keys = list(flatten(y.__dask_keys__()))
            del y
            while not forgotten(keys):  # the next run computes again, never finds this result held
                time.sleep(0.01)
        return best(run, repeat)

    rows = []

    def row(name: str, ours, theirs) -> None:
        timed(ours, 1), timed(theirs, 1)  # a warm-up: the workers prepare the kernel, touch their memory
        a, b = timed(ours), timed(theirs)
        rows.append({"row": name, "hologram_s": a, "dask_numpy_s": b, "ratio": a / b})
        print(f"{name:<24} hologram {a:8.3f} s   dask+numpy {b:8.3f} s   ratio {a / b:5.2f}", flush=True)

    x, y = made(n, (1, 1), chunk, 1)
    two = np.float32(2)
    row("elementwise axpy", lambda: lib.axpy(two, x, y), lambda: two * x + y)
    row("sum", lambda: lib.sum(x), lambda: x.sum())
    del x, y
    cols = 1000
    (X,) = made(n // cols, (cols,), max(chunk // cols, 1), 2)
    row("softmax over rows", lambda: softmax_rows(X), lambda: _softmax(X))
    del X
    k = 16
    tall, v = made(n // k, (k, 1), max(chunk // k, 1), 3)
    row("tall-skinny X.T @ v", lambda: xtv(tall, v), lambda: tall.T @ v)
    del tall, v
    (small,) = made(4096 * 64, (1,), 64, 4)
    row("per chunk (4096 x 64)", lambda: lib.relu(small), lambda: da.maximum(small, np.float32(0)))
    per = rows[-1]
    print(f"overhead per chunk: hologram {per['hologram_s'] / 4096 * 1e6:.1f} us, "
          f"dask+numpy {per['dask_numpy_s'] / 4096 * 1e6:.1f} us")
    return rows


def _softmax(x):
    import dask.array as da

    e = da.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


if __name__ == "__main__":
    sys.exit(main())
