#!/usr/bin/env python
"""Hologram against numpy, numexpr and numba, side by side in one process.

    python benchmarks/bench.py [--quick] [--only axpy,gemm] [--repeat N] [--results-dir DIR]

Prints a table of median times per library, then the performance targets (benchmarks/README.md,
"Targets") with the measured ratios (met / not met), and writes everything as JSON to
benchmarks/results/<UTC time>.json.
See benchmarks/README.md for what each number means.
"""

from __future__ import annotations

import os
import sys

# OpenBLAS reads these when it loads, and on this kind of machine they slow numpy's gemm,
# the baseline gemm is held to: drop them before numpy is imported.
BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
REMOVED_ENV = {k: os.environ.pop(k) for k in BLAS_ENV if k in os.environ}

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from datetime import datetime, timezone  # noqa: E402
from typing import Any, Callable  # noqa: E402

import attrs  # noqa: E402
import numpy as np  # noqa: E402

import hologram  # noqa: E402
from rich.markup import escape  # noqa: E402
from hologram.registry.lookups import get_backend, list_backends  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_bench  # noqa: E402 - the GPU table's benchmarks, shared with gpu_check.py
from gpu_bench import FUSED  # noqa: E402 - one fused expression for the CPU and the GPU rows

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(os.path.dirname(HERE), "kernels")
INTERP_MAX_ELEMENTS = 50_000  # the reference interpreter runs one lane at a time


def _read(name: str) -> str:
    with open(os.path.join(KERNELS, name), encoding="utf-8") as f:
        return f.read()


BMM = '''[kernel]
name = "bmm"
version = "1.0.0"
inputs  = { a = "f32[z, m, k]", b = "f32[z, k, n]" }
outputs = { c = "f32[z, m, n]" }
body = "c = a @ b"
'''

BLUR = '''[kernel]
name = "blur"
version = "1.0.0"
inputs  = { img = "f32[h, w]" }
outputs = { y = "f32[h - 2, w - 2]" }
body = "y[i, j] = sum(img[i + di, j + dj], di in range(3), dj in range(3)) / 9"
'''

GATHER = '''[kernel]
name = "gather"
version = "1.0.0"
inputs  = { x = "f32[n]", idx = "i64[m]" }
outputs = { y = "f32[m]" }
body = "y[i] = x[idx[i]]"
'''

HISTOGRAM = '''[kernel]
name = "histogram"
version = "1.0.0"
inputs  = { b = "i32[n]" }
outputs = { h = "i64[256]" }
body = "h[b[i]] += 1"
'''

CUMSUM = '''[kernel]
name = "cumsum"
version = "1.0.0"
inputs  = { x = "f32[n]" }
outputs = { y = "f32[n]" }
body = "y = cumsum(x)"
'''

DIFF = '''[kernel]
name = "diff"
version = "1.0.0"
inputs  = { x = "f32[n]" }
outputs = { y = "f32[n - 1]" }
body = "y = x[1:] - x[:-1]"
'''

# a reduction along the long axis into few outputs (hologram/lower/split.py), three ways
XTV = '''[kernel]
name = "xtv"
version = "1.0.0"
inputs  = { x = "f32[n, m]", v = "f32[n]" }
outputs = { c = "f32[m]" }
body = "c = x.T @ v"
'''

SUM_AXIS0 = '''[kernel]
name = "sum_axis0"
version = "1.0.0"
inputs  = { x = "f32[n, m]" }
outputs = { c = "f32[m]" }
body = "c = x.sum(axis=0)"
'''

LOGREG = '''[kernel]
name = "logreg"
version = "1.0.0"
inputs  = { X = "f32[n, d]", w = "f32[d]", t = "f32[n]", lr = "f32" }
outputs = { w_new = "f32[d]" }
body = """
p = sigmoid(X @ w)
g = X.T @ (p - t) / n
w_new = w - lr * g
"""
'''

CONV1D = '''[kernel]
name = "conv1d"
version = "1.0.0"
inputs  = { x = "f32[n]", w = "f32[k]" }
outputs = { y = "f32[n - k + 1]" }
body = "y[i] = sum(x[i + d] * w[d], d)"
'''

SOURCES = {"axpy": _read("axpy.toml"), "fused": FUSED, "sum": _read("sum.toml"), "bmm": BMM, "blur": BLUR,
           "gather": GATHER, "histogram": HISTOGRAM, "cumsum": CUMSUM, "diff": DIFF, "xtv": XTV,
           "sum_axis0": SUM_AXIS0, "logreg": LOGREG, "conv1d": CONV1D,
           "softmax": _read("softmax.toml"), "gemm": _read("gemm.toml"),
           # the same kernel with the opt-in to reassociation: the online max-and-sum
           "softmax_r": _read("softmax.toml").replace('name = "softmax"', 'name = "softmax_r"\nreassociate = true')}


# ------------------------------------------------------------------- optional libraries
def optional(name: str) -> Any:
    """The module, or None when it is not installed (or HOLOGRAM_BENCH_NO names it)."""
    if name in os.environ.get("HOLOGRAM_BENCH_NO", "").split(","):
        return None
    try:
        return __import__(name)
    except ImportError:
        return None


def blas_info() -> dict[str, Any]:
    """Which BLAS numpy's gemm runs on, and the kernel it picked for this CPU."""
    tpc = optional("threadpoolctl")
    if tpc is not None:
        blas = [i for i in tpc.threadpool_info() if i.get("user_api") == "blas"]
        if blas:
            keys = ("internal_api", "version", "architecture", "num_threads", "threading_layer")
            return {k: blas[0].get(k) for k in keys} | {"source": "threadpoolctl"}
    try:
        cfg = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return {"name": cfg.get("name"), "version": cfg.get("version"), "source": "numpy.show_config"}
    except Exception as exc:  # an unusual numpy build: report, do not fail the run
        return {"error": f"{type(exc).__name__}: {exc}"}


# ------------------------------------------------------------------------------ timing
def median_time(fn: Callable[[], Any], repeat: int, min_time: float = 0.02) -> float:
    """Median seconds per call over `repeat` timed batches, after one warm-up call; each
    batch runs enough calls to last about `min_time` (so microsecond calls are timed too)."""
    fn()
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-9)
    number = max(1, min(100_000, int(min_time / once)))
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return statistics.median(times)


@attrs.frozen
class Cell:
    seconds: float | None
    note: str = ""


# ------------------------------------------------------------------------ benchmarks
@attrs.frozen
class Sizes:
    n: int        # elements of the vector benchmarks
    gemm: int     # square gemm side
    launch: int   # elements of the launch-overhead call
    batch: tuple[int, int] = (8, 512)  # batched matmul: batches, square side
    image: int = 2048  # the 3x3 blur's square image side
    indexed: int = 10_000_000  # the gather's, the histogram's and np.diff's elements (issue 14: 1e6-1e7)
    scans: tuple[int, int, int] = (1_000, 1_000_000, 10_000_000)  # the cumsum rows' f32 vectors
    tall: int = 1_000_000  # rows of the tall-skinny f32[tall, 16] matrix (X.T @ v, sum(axis=0), logistic regression)


FULL = Sizes(20_000_000, 1024, 16)
QUICK = Sizes(256, 8, 16, (2, 8), 16, 256, (10, 100, 3000), 300)
# the cumsum rows, by the index of their size in Sizes.scans
SCAN_ROWS = {"cumsum_1k": 0, "cumsum_1m": 1, "cumsum_10m": 2}

# The launch-overhead rows: one 16-element a*x + y (out= given) per way of calling a
# kernel (docs/api.md, "Calling a kernel"), by row title. Every style takes the same fast
# path, so every row should show about the positional call's time; numpy, numexpr and
# numba make their one usual call (numpy's with out=) in each row.
CALL_STYLES = {"launch": "launch overhead, k(a, x, y, out=(o,))",
               "launch_out": "launch overhead, k(a, x, y, out=o)",
               "launch_kw": "launch overhead, k(alpha=a, x=x, y=y, out=(o,))",
               "launch_mixed": "launch overhead, k(a, x, y=y, out=(o,))",
               "launch_cast": "launch overhead, k(a, x, y, out=(o,), cast=True)"}


def saved_memmap(x: np.ndarray) -> str:
    """`x` saved as a .npy file in a folder removed at exit, for the rows over a memmap
    (its pages stay in the page cache: the rows measure a warm cache)."""
    import atexit
    import shutil

    folder = tempfile.mkdtemp(prefix="hologram-bench-")
    atexit.register(shutil.rmtree, folder, True)
    path = os.path.join(folder, "x.npy")
    np.save(path, x)
    return path


def make_data(sizes: Sizes) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    vec = lambda: rng.uniform(-1, 1, sizes.n).astype(np.float32)  # noqa: E731
    g = sizes.gemm
    x = vec()
    return {"a": np.float32(0.5), "x": x, "x_file": saved_memmap(x), "y": vec(), "z": vec(),
            "A": rng.uniform(-1, 1, (g, g)).astype(np.float32), "B": rng.uniform(-1, 1, (g, g)).astype(np.float32),
            "BA": rng.uniform(-1, 1, (sizes.batch[0], sizes.batch[1], sizes.batch[1])).astype(np.float32),
            "BB": rng.uniform(-1, 1, (sizes.batch[0], sizes.batch[1], sizes.batch[1])).astype(np.float32),
            "img": rng.uniform(-1, 1, (sizes.image, sizes.image)).astype(np.float32),
            "gx": rng.uniform(-1, 1, sizes.indexed).astype(np.float32),
            "idx": rng.integers(0, sizes.indexed, sizes.indexed),  # numpy's default integers: int64
            "bins": rng.integers(0, 256, sizes.indexed).astype(np.int32),
            "x16": rng.uniform(-1, 1, sizes.launch).astype(np.float32),
            "y16": rng.uniform(-1, 1, sizes.launch).astype(np.float32),
            "X": rng.uniform(-1, 1, (sizes.tall, 16)).astype(np.float32),
            "v": rng.uniform(-1, 1, sizes.tall).astype(np.float32),
            "t": (rng.uniform(0, 1, sizes.tall) < 0.5).astype(np.float32), "w": rng.uniform(-1, 1, 16).astype(np.float32),
            "w7": rng.uniform(-1, 1, 7).astype(np.float32),
            **{row: rng.uniform(-1, 1, sizes.scans[k]).astype(np.float32) for row, k in SCAN_ROWS.items()}}


def numpy_impls(d: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    a, x, y, z = d["a"], d["x"], d["y"], d["z"]

    def softmax() -> np.ndarray:
        e = np.exp(x - x.max())
        return e / e.sum()

    out16, x16, y16 = np.empty_like(d["x16"]), d["x16"], d["y16"]
    launch = lambda: np.add(np.multiply(a, x16), y16, out=out16)  # noqa: E731 - out=, as hologram's calls
    img = d["img"]
    h, w = img.shape

    def blur() -> np.ndarray:  # the numpy user's 3x3 box blur: nine shifted slices
        return sum(img[a:a + h - 2, b:b + w - 2] for a in range(3) for b in range(3)) / np.float32(9)

    X, t, lr = d["X"], d["t"], np.float32(0.1)

    def logreg() -> np.ndarray:  # one gradient step, as a numpy user writes it
        p = 1 / (1 + np.exp(-(X @ d["w"])))
        return d["w"] - lr * (X.T @ (p - t) / np.float32(len(t)))
    return {"axpy": lambda: a * x + y, "fused": lambda: np.sqrt(x * x + y * y) * np.exp(-z),
            "sum": lambda: x.sum(), "softmax": softmax, "softmax_r": softmax, "gemm": lambda: d["A"] @ d["B"],
            "bmm": lambda: d["BA"] @ d["BB"], "blur": blur, "gather": lambda: d["gx"][d["idx"]],
            "histogram": lambda: np.bincount(d["bins"], minlength=256), "diff": lambda: np.diff(d["gx"]),
            "xtv": lambda: X.T @ d["v"], "sum_axis0": lambda: X.sum(axis=0), "logreg": logreg,
            "conv1d": lambda: np.correlate(d["gx"], d["w7"], mode="valid"),
            **dict.fromkeys(CALL_STYLES, launch), **{row: (lambda v=d[row]: np.cumsum(v)) for row in SCAN_ROWS},
            # a fresh mapping per call, as a user maps a file once to sum it
            "stream_sum": lambda: np.sum(np.load(d["x_file"], mmap_mode="r"))}


def numexpr_impls(ne: Any, d: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    a, x, y, z = d["a"], d["x"], d["y"], d["z"]
    out, out16 = np.empty_like(x), np.empty_like(d["x16"])

    def softmax() -> np.ndarray:
        m = x.max()
        e = ne.evaluate("exp(x - m)", local_dict={"x": x, "m": m}, out=out)
        s = np.float32(ne.evaluate("sum(e)", local_dict={"e": e}))
        return ne.evaluate("e / s", local_dict={"e": e, "s": s}, out=out)

    v = {"a": a, "x": x, "y": y, "z": z}  # numexpr reads names from the caller's frame unless given them
    v16 = {"a": a, "x": d["x16"], "y": d["y16"]}
    return {"axpy": lambda: ne.evaluate("a * x + y", local_dict=v, out=out),
            "fused": lambda: ne.evaluate("sqrt(x*x + y*y) * exp(-z)", local_dict=v, out=out),
            "sum": lambda: ne.evaluate("sum(x)", local_dict=v), "softmax": softmax, "softmax_r": softmax,
            **dict.fromkeys(CALL_STYLES, lambda: ne.evaluate("a * x + y", local_dict=v16, out=out16))}


def numba_functions(numba: Any) -> dict[str, Any]:
    """The njit(parallel=True) versions (compiled on first call)."""
    njit, prange = numba.njit, numba.prange

    @njit(parallel=True)
    def axpy(a, x, y, out):
        for i in prange(x.size):
            out[i] = a * x[i] + y[i]
        return out

    @njit(parallel=True)
    def fused(x, y, z, out):
        for i in prange(x.size):
            out[i] = np.sqrt(x[i] * x[i] + y[i] * y[i]) * np.exp(-z[i])
        return out

    @njit(parallel=True)
    def total(x):
        s = np.float32(0)
        for i in prange(x.size):
            s += x[i]
        return s

    @njit(parallel=True)
    def softmax(x, e):
        m = -np.inf
        for i in prange(x.size):
            m = max(m, x[i])
        for i in prange(x.size):
            e[i] = np.exp(x[i] - m)
        s = np.float32(0)
        for i in prange(x.size):
            s += e[i]
        for i in prange(x.size):
            e[i] = e[i] / s
        return e

    @njit(parallel=True)
    def gemm(a, b, c):
        m, k = a.shape
        n = b.shape[1]
        for i in prange(m):
            c[i, :] = 0
            for p in range(k):
                aip = a[i, p]
                for j in range(n):
                    c[i, j] += aip * b[p, j]
        return c

    @njit(parallel=True)
    def gather(x, idx, out):
        for i in prange(idx.size):
            out[i] = x[idx[i]]
        return out

    @njit  # a parallel loop would race on the bins
    def histogram(b, h):
        h[:] = 0
        for i in range(b.size):
            h[b[i]] += 1
        return h

    @njit(parallel=True)
    def diff(x, out):
        for i in prange(out.size):
            out[i] = x[i + 1] - x[i]
        return out

    @njit
    def cumsum(x, out):  # a running sum is one dependent chain: no prange
        acc = np.float32(0)
        for i in range(x.size):
            acc += x[i]
            out[i] = acc
        return out

    return {"axpy": axpy, "fused": fused, "sum": total, "softmax": softmax, "gemm": gemm, "gather": gather,
            "histogram": histogram, "diff": diff, "cumsum": cumsum}


def numba_impls(fns: dict[str, Any], d: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    a, x, y, z = d["a"], d["x"], d["y"], d["z"]
    out, c, out16 = np.empty_like(x), np.empty_like(d["A"]), np.empty_like(d["x16"])
    gathered, hist, diffed = np.empty_like(d["gx"]), np.empty(256, np.int64), np.empty_like(d["gx"][1:])
    axpy, x16, y16 = fns["axpy"], d["x16"], d["y16"]
    return {"axpy": lambda: fns["axpy"](a, x, y, out), "fused": lambda: fns["fused"](x, y, z, out),
            "sum": lambda: fns["sum"](x), "softmax": lambda: fns["softmax"](x, out),
            "softmax_r": lambda: fns["softmax"](x, out),
            "gemm": lambda: fns["gemm"](d["A"], d["B"], c),
            "gather": lambda: fns["gather"](d["gx"], d["idx"], gathered),
            "histogram": lambda: fns["histogram"](d["bins"], hist),
            "diff": lambda: fns["diff"](d["gx"], diffed),
            **dict.fromkeys(CALL_STYLES, lambda: axpy(a, x16, y16, out16)),
            **{row: (lambda v=d[row], o=np.empty_like(d[row]): fns["cumsum"](v, o)) for row in SCAN_ROWS}}


def hologram_impls(backend: str, d: dict[str, Any], benches: list[str]) -> dict[str, Callable[[], Any] | Cell]:
    """Kernels compiled (and prepared) once, only those `benches` use; outputs preallocated
    and passed with out= (zero-copy), as a user who cares about speed calls them. A
    benchmark whose kernel the backend does not declare is a Cell saying so, with why."""
    wanted = dict.fromkeys(CALL_STYLES, "axpy") | dict.fromkeys(SCAN_ROWS, "cumsum") | {"stream_sum": "sum"}
    k, refused = {}, {}
    for b in benches:
        name = wanted.get(b, b)
        k[name] = hologram.compile(SOURCES[name]).on(backend)
        refused[b] = gpu_bench.refusal(backend, k[name].program)
    a, x, y, z = d["a"], d["x"], d["y"], d["z"]
    out = np.empty_like(x)
    total = np.empty((), np.float32)
    c = np.empty_like(d["A"])
    bc = np.empty_like(d["BA"])
    blurred = np.empty((d["img"].shape[0] - 2, d["img"].shape[1] - 2), np.float32)
    gathered, hist, diffed = np.empty_like(d["gx"]), np.empty(256, np.int64), np.empty_like(d["gx"][1:])
    out16, x16, y16, axpy16 = np.empty_like(d["x16"]), d["x16"], d["y16"], k.get("axpy")
    one = np.float32(1)
    col = np.empty(16, np.float32)
    conv = np.empty(len(d["gx"]) - 6, np.float32)
    lr = np.float32(0.1)
    return {"axpy": lambda: k["axpy"](a, x, y, out=(out,)), "fused": lambda: k["fused"](x, y, z, out=(out,)),
            "sum": lambda: k["sum"](x, out=(total,)), "softmax": lambda: k["softmax"](x, out=(out,)),
            "softmax_r": lambda: k["softmax_r"](x, out=(out,)),
            "gemm": lambda: k["gemm"](one, d["A"], d["B"], out=(c,)),
            "bmm": lambda: k["bmm"](d["BA"], d["BB"], out=(bc,)),
            "blur": lambda: k["blur"](d["img"], out=(blurred,)),
            "gather": lambda: k["gather"](d["gx"], d["idx"], out=(gathered,)),
            "histogram": lambda: k["histogram"](d["bins"], out=(hist,)),
            "diff": lambda: k["diff"](d["gx"], out=(diffed,)),
            "xtv": lambda: k["xtv"](d["X"], d["v"], out=(col,)),
            "sum_axis0": lambda: k["sum_axis0"](d["X"], out=(col,)),
            "logreg": lambda: k["logreg"](d["X"], d["w"], d["t"], lr, out=(col,)),
            "conv1d": lambda: k["conv1d"](d["gx"], d["w7"], out=(conv,)),
            "stream_sum": lambda: hologram.stream(k["sum"], np.load(d["x_file"], mmap_mode="r")),
            # CALL_STYLES, each written out so that only the call differs between rows
            "launch": lambda: axpy16(a, x16, y16, out=(out16,)),
            "launch_out": lambda: axpy16(a, x16, y16, out=out16),
            "launch_kw": lambda: axpy16(alpha=a, x=x16, y=y16, out=(out16,)),
            "launch_mixed": lambda: axpy16(a, x16, y=y16, out=(out16,)),
            "launch_cast": lambda: axpy16(a, x16, y16, out=(out16,), cast=True),
            **{row: (lambda v=d[row], o=np.empty_like(d[row]): k["cumsum"](v, out=(o,)))
               for row in SCAN_ROWS if row in benches}} | {b: Cell(None, why) for b, why in refused.items() if why}


BENCHES = ("axpy", "fused", "sum", "softmax", "softmax_r", "gemm", "bmm", "blur", "gather", "histogram", "diff",
           "xtv", "sum_axis0", "logreg", "conv1d", "stream_sum",
           *SCAN_ROWS, *CALL_STYLES)
TITLES = {"axpy": "a*x + y", "fused": "sqrt(x*x + y*y) * exp(-z)", "sum": "sum(x)", "softmax": "softmax(x)",
          "softmax_r": "softmax(x), reassociate", "gemm": "gemm", "bmm": "a @ b, batched (z x s x s)",
          "blur": "3x3 box blur, ranges (s x s)", "gather": "gather y[i] = x[idx[i]]",
          "histogram": "256-bin histogram h[b[i]] += 1", "diff": "np.diff as x[1:] - x[:-1]",
          "xtv": "x.T @ v, x f32[tall, 16]", "sum_axis0": "x.sum(axis=0), x f32[tall, 16]",
          "logreg": "logistic-regression step, X f32[tall, 16]",
          "conv1d": "1-D convolution, k = 7 (np.correlate)",
          "stream_sum": "hologram.stream sum over a memmap (page cache warm)",
          "cumsum_1k": "cumsum(x), 1e3 f32", "cumsum_1m": "cumsum(x), 1e6 f32", "cumsum_10m": "cumsum(x), 1e7 f32",
          **CALL_STYLES}


def _elements(bench: str, sizes: Sizes) -> int:
    if bench == "bmm":
        return sizes.batch[0] * sizes.batch[1] ** 3
    if bench == "blur":
        return 9 * sizes.image ** 2
    if bench in ("gather", "histogram", "diff", "conv1d"):
        return sizes.indexed
    if bench in SCAN_ROWS:
        return sizes.scans[SCAN_ROWS[bench]]
    if bench in ("xtv", "sum_axis0", "logreg"):
        return sizes.tall * 16
    return sizes.launch if bench in CALL_STYLES else sizes.gemm ** 3 if bench == "gemm" else sizes.n


def _agrees(bench: str, got: Any, want: Any) -> bool:
    """A light sanity check that a timed implementation computes the right thing."""
    reduced = {"sum": np.size(want), "stream_sum": np.size(want), "gemm": np.size(want), "bmm": np.size(want),
               "xtv": 1 << 20, "sum_axis0": 1 << 20, "logreg": 1 << 20}
    return gpu_bench.agrees(got, want, reduced.get(bench, 1))


def measure(bench: str, fn: Callable[[], Any] | Cell | None, want: Any, repeat: int, skip: str = "",
            min_time: float = 0.02) -> Cell:
    if skip:
        return Cell(None, skip)
    if fn is None:
        return Cell(None, "n/a")
    if isinstance(fn, Cell):  # not timed: the backend does not declare the kernel (hologram_impls)
        return fn
    try:
        got = fn()
        note = "" if _agrees(bench, got, want) else "WRONG RESULT"
        return Cell(median_time(fn, repeat, min_time), note)
    except Exception as exc:  # a backend under construction: report, keep going
        return Cell(None, f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:80]}")


# ----------------------------------------------------------- first JIT and warm load
CHILD = r'''
import json, sys, time
import numpy as np
import hologram
from hologram import get_backend
backend, sources = sys.argv[1], json.loads(sys.argv[2])
be = get_backend(backend)
warm = hologram.compile("""[kernel]
name = "warmup"
version = "1.0.0"
inputs = { q = "f64[n]" }
outputs = { r = "f64[n]" }
body = "r = q * 3.0 - 1.0"
""")
be.prepare(warm.program)  # the backend's one-time setup is not any kernel's JIT time
out = {}
for name, src in sources.items():
    t0 = time.perf_counter()
    k = hologram.compile(src)
    t1 = time.perf_counter()
    be.prepare(k.program)
    t2 = time.perf_counter()
    out[name] = {"frontend": t1 - t0, "prepare": t2 - t1}
print(json.dumps(out))
'''


def jit_times(backend: str, cache_dir: str, kernels: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Per kernel, in a fresh process using `cache_dir` as the disk cache: seconds in the
    front end (DSL -> Program) and in the backend's prepare (JIT, or a disk-cache load)."""
    env = dict(os.environ, HOLOGRAM_CACHE_DIR=cache_dir)
    sources = {k: SOURCES[k] for k in kernels}
    proc = subprocess.run([sys.executable, "-c", CHILD, backend, json.dumps(sources)], capture_output=True,
                          text=True, env=env, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def numba_first_call(numba: Any, d: dict[str, Any]) -> dict[str, float]:
    """Seconds of each numba function's first call (its JIT), minus one steady call."""
    fns = numba_functions(numba)
    small = {"x": d["x16"], "y": d["y16"], "z": d["x16"], "a": d["a"], "x16": d["x16"], "y16": d["y16"],
             "A": d["A"][:4, :4].copy(), "B": d["B"][:4, :4].copy(), **dict.fromkeys(SCAN_ROWS, d["x16"]),
             "gx": d["x16"], "idx": np.arange(16), "bins": np.arange(16, dtype=np.int32)}
    out = {}
    for name, call in numba_impls(fns, small).items():
        if name in CALL_STYLES or name in ("softmax_r", "cumsum_1m", "cumsum_10m"):  # functions timed in another row
            continue
        name = "cumsum" if name == "cumsum_1k" else name
        t0 = time.perf_counter()
        call()
        t1 = time.perf_counter()
        call()
        out[name] = (t1 - t0) - (time.perf_counter() - t1)
    return out


# --------------------------------------------------------------------------- targets
@attrs.frozen
class Target:
    text: str
    measured: Callable[[dict], float | None]  # the number the target is about
    unit: str
    ok: Callable[[float], bool]


def _t(results: dict, bench: str, col: str) -> float | None:
    return results["times"].get(bench, {}).get(col, {}).get("seconds")


def _ratio(results: dict, bench: str, other: str) -> float | None:
    h, o = _t(results, bench, "hologram"), _t(results, bench, other)
    return o / h if h and o else None


def _gflops(results: dict, col: str) -> float | None:
    t = _t(results, "gemm", col)
    return 2 * results["sizes"]["gemm"] ** 3 / t / 1e9 if t else None


SIMPLE = ("axpy", "fused", "sum")  # the targets' "simple kernels"; the others are reported per kernel


def _slowest_call(results: dict) -> float | None:
    """µs of the slowest call style on the default backend (None unless all were timed)."""
    times = [_t(results, bench, "hologram") for bench in CALL_STYLES]
    return max(times) * 1e6 if times and all(times) else None


def _worst(results: dict, key: str) -> float | None:
    jit = results.get("jit", {}).get(key)
    vals = [v["prepare"] for name, v in jit.items() if name in SIMPLE] if jit else []
    return max(vals) if vals else None


TARGETS = (
    Target("fused: no slower than numba", lambda r: _ratio(r, "fused", "numba"), "x (numba/hologram)", lambda v: v >= 1),
    Target("fused: >= 2x faster than numexpr", lambda r: _ratio(r, "fused", "numexpr"), "x (numexpr/hologram)",
           lambda v: v >= 2),
    Target("a*x + y: within 10% of numba", lambda r: _ratio(r, "axpy", "numba"), "x (numba/hologram)",
           lambda v: v >= 1 / 1.1),
    Target("sum: no slower than numpy", lambda r: _ratio(r, "sum", "numpy"), "x (numpy/hologram)", lambda v: v >= 1),
    Target("stream sum over a memmap: no slower than np.sum(memmap)", lambda r: _ratio(r, "stream_sum", "numpy"),
           "x (numpy/hologram)", lambda v: v >= 1),
    Target("softmax: >= 2x faster than numpy", lambda r: _ratio(r, "softmax", "numpy"), "x (numpy/hologram)",
           lambda v: v >= 2),
    Target("gemm: >= 0.8 of numpy's GFLOP/s",
           lambda r: (_gflops(r, "hologram") / _gflops(r, "numpy")) if _gflops(r, "hologram") and _gflops(r, "numpy")
           else None, "of numpy's GFLOP/s", lambda v: v >= 0.8),
    Target("batched a @ b: <= 2x numpy's time", lambda r: (1 / _ratio(r, "bmm", "numpy")) if _ratio(r, "bmm", "numpy")
           else None, "x numpy's time", lambda v: v <= 2),
    Target("3x3 blur by ranges: <= 0.5x numpy slicing's time", lambda r: (1 / _ratio(r, "blur", "numpy"))
           if _ratio(r, "blur", "numpy") else None, "x numpy's time", lambda v: v <= 0.5),
    Target("gather x[idx[i]]: <= 1.0x numpy fancy indexing's time", lambda r: (1 / _ratio(r, "gather", "numpy"))
           if _ratio(r, "gather", "numpy") else None, "x numpy's time", lambda v: v <= 1.0),
    Target("256-bin histogram by scatter-add: <= 0.5x np.bincount's time",
           lambda r: (1 / _ratio(r, "histogram", "numpy")) if _ratio(r, "histogram", "numpy") else None,
           "x numpy's time", lambda v: v <= 0.5),
    Target("np.diff by slices: <= 1.0x numpy's time", lambda r: (1 / _ratio(r, "diff", "numpy"))
           if _ratio(r, "diff", "numpy") else None, "x numpy's time", lambda v: v <= 1.0),
    Target("cumsum, 1e6 f32: <= 1.0x numpy's time", lambda r: (1 / _ratio(r, "cumsum_1m", "numpy"))
           if _ratio(r, "cumsum_1m", "numpy") else None, "x numpy's time", lambda v: v <= 1),
    Target("cumsum, 1e7 f32: <= 1.0x numpy's time", lambda r: (1 / _ratio(r, "cumsum_10m", "numpy"))
           if _ratio(r, "cumsum_10m", "numpy") else None, "x numpy's time", lambda v: v <= 1),
    *(Target(f"{title}: <= 1.0x numpy's time", lambda r, b=bench: (1 / _ratio(r, b, "numpy"))
             if _ratio(r, b, "numpy") else None, "x numpy's time", lambda v: v <= 1)
      for bench, title in (("xtv", "x.T @ v, 1e6 x 16"), ("sum_axis0", "sum(axis=0), 1e6 x 16"),
                           ("logreg", "logistic-regression step, 1e6 x 16"))),
    Target("1-D convolution, 1e7, k = 7: <= 0.5x np.correlate's time", lambda r: (1 / _ratio(r, "conv1d", "numpy"))
           if _ratio(r, "conv1d", "numpy") else None, "x numpy's time", lambda v: v <= 0.5),
    Target("launch overhead <= 3 us", lambda r: (_t(r, "launch", "hologram") or 0) * 1e6 or None, "us",
           lambda v: v <= 3),
    Target("launch overhead <= 3 us, every call style (slowest)", _slowest_call, "us", lambda v: v <= 3),
    Target("first JIT <= 50 ms (worst simple kernel)", lambda r: (_worst(r, "cold") or 0) * 1e3 or None, "ms",
           lambda v: v <= 50),
    Target("warm disk-cache load <= 2 ms (worst simple kernel)", lambda r: (_worst(r, "warm") or 0) * 1e3 or None, "ms",
           lambda v: v <= 2),
)


# ------------------------------------------------------------------------------ main
Columns = dict[str, "dict[str, Callable[[], Any]] | None"]


def build_columns(backends: list[str], default: str, d: dict[str, Any], benches: list[str], ne: Any, numba: Any,
                  notes: list[str]) -> Columns:
    """Implementations by column: every hologram backend, numpy, numexpr, numba (None:
    the column is skipped)."""
    columns: Columns = {}
    for b in backends:
        label = column_label(b, default)
        try:
            columns[label] = hologram_impls(b, d, benches)
        except Exception as exc:  # a backend under construction: report, keep going
            notes.append(f"{label}: could not compile the kernels: {type(exc).__name__}: {exc}")
            columns[label] = None
    columns["numpy"] = numpy_impls(d)
    columns["numexpr"] = numexpr_impls(ne, d) if ne else None
    columns["numba"] = numba_impls(numba_functions(numba), d) if numba else None
    return columns


def time_all(console: Any, benches: list[str], columns: Columns, backends: list[str], default: str,
             d: dict[str, Any], sizes: Sizes, repeat: int, quick: bool) -> dict[str, dict[str, dict]]:
    """times[bench][column] = {seconds, note}."""
    with np.errstate(all="ignore"):
        reference = {b: f() for b, f in numpy_impls(d).items()}
    backend_of = {column_label(b, default): b for b in backends}
    times: dict[str, dict[str, dict]] = {}
    with console.status("benchmarking") as status:
        for bench in benches:
            times[bench] = {}
            for col, impls in columns.items():
                status.update(f"{TITLES[bench]}: {col}")
                if not console.is_terminal:  # no spinner in a log: say what is running
                    print(f"bench: {TITLES[bench]}: {col}", file=sys.stderr, flush=True)
                skip = "" if impls is not None else "skipped" if col in ("numexpr", "numba") else "unavailable"
                if backend_of.get(col) == "interp" and _elements(bench, sizes) > INTERP_MAX_ELEMENTS:
                    skip = "too big for interp"
                fn = impls.get(bench) if impls else None
                reps = repeat if bench != "gemm" else max(3, repeat // 2)
                cell = measure(bench, fn, reference[bench], reps, skip, 0.002 if quick else 0.02)
                times[bench][col] = attrs.asdict(cell)
    return times


def time_jit(console: Any, default: str, numba: Any, d: dict[str, Any], quick: bool, notes: list[str]) -> dict:
    """First-JIT and warm-load times of the default backend (fresh processes), and numba's."""
    jit: dict[str, Any] = {}
    with console.status("first-JIT and warm-load times (fresh processes)"):
        with tempfile.TemporaryDirectory(prefix="hologram-bench-cache-") as cache:
            try:
                kernels = ("axpy",) if quick else tuple(SOURCES)
                jit["cold"] = jit_times(default, cache, kernels)
                jit["warm"] = jit_times(default, cache, kernels)
            except Exception as exc:
                notes.append(f"first-JIT / warm-load: {type(exc).__name__}: {exc}")
        if numba:
            jit["numba_first_call"] = numba_first_call(numba, d)
    return jit


def run(args: argparse.Namespace) -> dict:
    from rich.console import Console

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    sizes = QUICK if args.quick else FULL
    repeat = args.repeat or (3 if args.quick else 7)
    benches = [b for b in BENCHES if not args.only or b in args.only]
    backends = list_backends()
    default = get_backend().name
    ne, numba = optional("numexpr"), optional("numba")
    notes = [f"{name} not installed: its column is skipped (pip install {name}, or make bench)"
             for name, mod in (("numexpr", ne), ("numba", numba)) if mod is None]
    if "cpu_llvm" not in backends:
        notes.append(f"cpu_llvm backend not installed or not available: hologram runs on {default} "
                     "(pip install -e plugins/cpu_llvm)")
    d = make_data(sizes)
    columns = build_columns(backends, default, d, benches, ne, numba, notes)
    times = time_all(console, benches, columns, backends, default, d, sizes, repeat, args.quick)
    jit = time_jit(console, default, numba, d, args.quick, notes) if not args.only or "jit" in args.only else {}
    gpu = gpu_bench.time_gpu(console, sizes.n, sizes.gemm, args.quick) if not args.only or "gpu" in args.only else {}
    results = {
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "quick": bool(args.quick), "sizes": attrs.asdict(sizes), "repeat": repeat,
        "default_backend": default, "backends": backends,
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "python": platform.python_version(),
                    "numpy": np.__version__, "numexpr": getattr(ne, "__version__", None),
                    "numba": getattr(numba, "__version__", None), "hologram": hologram.__version__},
        "blas": blas_info(), "removed_env": REMOVED_ENV, "notes": notes, "times": times, "jit": jit, "gpu": gpu,
    }
    judged = not args.quick and default != "interp"
    results["targets"] = [judge(t, results, judged) for t in TARGETS]
    if args.quick:
        notes.append("--quick: sizes far below the targets' (not judged)")
    elif default == "interp":
        notes.append("the targets are for a native backend; on the reference interpreter they are not judged")
    report(console, results)
    return results


def judge(t: Target, results: dict, judged: bool) -> dict:
    v = t.measured(results)
    return {"target": t.text, "value": v, "unit": t.unit, "met": None if v is None or not judged else bool(t.ok(v))}


def column_label(backend: str, default: str) -> str:
    """The default backend is the `hologram` column the targets read; others get their name."""
    return "hologram" if backend == default else f"hologram/{backend}"


def _fmt_time(cell: dict) -> str:
    s = cell.get("seconds")
    if s is None:
        return f"[dim]{escape(cell.get('note') or '-')}[/dim]"
    text = f"{s * 1e6:.2f} µs" if s < 1e-3 else f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.3f} s"
    return text + (f" [bold red]{escape(cell['note'])}[/bold red]" if cell.get("note") else "")


def report(console: Any, results: dict) -> None:
    from rich.table import Table

    times = results["times"]
    cols = list(next(iter(times.values()))) if times else []
    sizes = results["sizes"]
    t = Table(title=f"median times (n = {sizes['n']:,} f32; gemm {sizes['gemm']}²; launch on {sizes['launch']}; "
                    f"gather and histogram on {sizes.get('indexed', 0):,})",
              title_justify="left")
    t.add_column("benchmark")
    for c in cols:
        t.add_column(escape(f"{c} ({results['default_backend']})" if c == "hologram" else c), justify="right")
    for bench, row in times.items():
        t.add_row(escape(TITLES[bench]), *(_fmt_time(row[c]) for c in cols))
    if times:
        console.print(t)
    if results.get("gpu"):
        gpu_bench.report_gpu(console, results["gpu"])

    jit = results.get("jit", {})
    if jit.get("cold"):
        j = Table(title=f"first JIT (fresh cache dir) and warm disk-cache load, backend {results['default_backend']}",
                  title_justify="left")
        for c in ("kernel", "front end", "first JIT (prepare)", "warm load (prepare)", "numba first call"):
            j.add_column(c, justify="right" if c != "kernel" else "left")
        nb = jit.get("numba_first_call", {})
        for name, v in jit["cold"].items():
            warm = jit.get("warm", {}).get(name, {})
            j.add_row(name, f"{v['frontend'] * 1e3:.2f} ms", f"{v['prepare'] * 1e3:.2f} ms",
                      f"{warm['prepare'] * 1e3:.2f} ms" if warm else "-",
                      f"{nb[name] * 1e3:.1f} ms" if name in nb else "-")
        console.print(j)

    tt = Table(title="performance targets (see benchmarks/README.md)", title_justify="left")
    for c in ("target", "measured", "met"):
        tt.add_column(c)
    for row in results["targets"]:
        v = row["value"]
        met = "[dim]n/a[/dim]" if row["met"] is None else "[green]met[/green]" if row["met"] else "[bold red]not met[/bold red]"
        tt.add_row(escape(row["target"]), "-" if v is None else f"{v:.3g} {row['unit']}", met)
    console.print(tt)
    blas = results["blas"]
    console.print(escape(f"numpy BLAS: {', '.join(f'{k}={v}' for k, v in blas.items())}"))
    if results["removed_env"]:
        console.print(f"unset for this run: {', '.join(results['removed_env'])}")
    for n in results["notes"]:
        console.print(escape(f"note: {n}"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Benchmark hologram against numpy, numexpr and numba.")
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test that everything runs")
    p.add_argument("--only", type=lambda s: [x.strip() for x in s.split(",") if x.strip()],
                   help=f"comma-separated subset of {', '.join(BENCHES + ('jit', 'gpu'))}")
    p.add_argument("--repeat", type=int, help="timed batches per measurement (default 7; 3 with --quick)")
    p.add_argument("--results-dir", default=os.path.join(HERE, "results"), help="where the JSON goes")
    p.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = p.parse_args(argv)
    if args.list:
        width = max(map(len, BENCHES))
        rows = [*((b, TITLES[b]) for b in BENCHES), ("jit", "first JIT and warm disk-cache load"),
                ("gpu", "the GPU columns: " + ", ".join(gpu_bench.GPU_ROWS.values()))]
        print("\n".join(f"{b:{width}} {title}" for b, title in rows))
        return 0
    unknown = set(args.only or ()) - set(BENCHES) - {"jit", "gpu"}
    if unknown:
        p.error(f"--only: unknown benchmark(s) {', '.join(sorted(unknown))}; see --list")
    results = run(args)
    os.makedirs(args.results_dir, exist_ok=True)
    path = os.path.join(args.results_dir, datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + ".json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2, default=float)
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
