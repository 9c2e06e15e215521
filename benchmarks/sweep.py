#!/usr/bin/env python
"""Every standard-library kernel and the shapes users meet first, from 1e3 to 1e8
elements, against numpy, numexpr and numba, drawn as one figure per kernel.

    python benchmarks/sweep.py [--sizes 1e3,1e4,...] [--only sum,xtv] [--out docs/perf] [--repeat R]

For each kernel and size: the median time of a hologram call with preallocated outputs
(out=, as a user who cares about speed calls it) on the best backend, and of numpy's,
numexpr's and numba's implementation where one is written here (numexpr and numba need
the `bench` extra; a library that is missing is left out of the figures). Each figure
plots hologram's time over each other library's (below 1: hologram is faster) against
the number of elements, log axes, and `docs/perf/README.md` lists them with the table of
ratios. Sizes count the elements of the kernel's largest input: a matrix kernel runs on
a square of that many elements (gemm at most 1024 x 1024), the tall-skinny rows on
`n x 16`. Results are checked loosely against numpy's first, as benchmarks/stdlib.py does.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402 - the timing loop, the tall-skinny sources and the BLAS environment (before numpy)
import stdlib  # noqa: E402 - the standard library's inputs and numpy implementations

import numpy as np  # noqa: E402

import hologram as hg  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SIZES = (1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000)
F32 = np.float32
Impl = Callable[..., Any]


def _numexpr(ne: Any) -> dict[str, Impl]:
    """numexpr's spelling of the kernels it has an expression for."""
    def ev(expr: str, *names: str) -> Impl:
        return lambda *args: ne.evaluate(expr, local_dict=dict(zip(names, args)))
    return {"vadd": ev("a + b", "a", "b"), "vsub": ev("a - b", "a", "b"), "vmul": ev("a * b", "a", "b"),
            "vdiv": ev("a / b", "a", "b"), "axpy": ev("a * x + y", "a", "x", "y"),
            "relu": ev("where(x > 0, x, 0)", "x"), "sigmoid": ev("1 / (1 + exp(-x))", "x"),
            "tanh": ev("tanh(x)", "x"), "sum": ev("sum(x)", "x"), "dot": ev("sum(a * b)", "a", "b")}


def _numba(numba: Any) -> dict[str, Impl]:
    """numba's: the loops a numba user writes (parallel where the loop is)."""
    jit = numba.njit(parallel=True, fastmath=False, cache=False)
    prange = numba.prange

    @jit
    def binary(a, b, op):
        out = np.empty_like(a)
        for i in prange(a.size):
            out[i] = a[i] + b[i] if op == 0 else a[i] - b[i] if op == 1 else a[i] * b[i] if op == 2 else a[i] / b[i]
        return out

    @jit
    def axpy(a, x, y):
        out = np.empty_like(x)
        for i in prange(x.size):
            out[i] = a * x[i] + y[i]
        return out

    @jit
    def relu(x):
        out = np.empty_like(x)
        for i in prange(x.size):
            out[i] = x[i] if x[i] > 0 else F32(0)
        return out

    @jit
    def total(x):
        s = 0.0
        for i in prange(x.size):
            s += x[i]
        return s

    @jit
    def dot(a, b):
        s = 0.0
        for i in prange(a.size):
            s += a[i] * b[i]
        return s

    @jit
    def column_sums(x):
        out = np.zeros(x.shape[1], np.float64)
        for i in range(x.shape[0]):
            for j in range(x.shape[1]):
                out[j] += x[i, j]
        return out.astype(np.float32)

    return {"vadd": lambda a, b: binary(a, b, 0), "vsub": lambda a, b: binary(a, b, 1),
            "vmul": lambda a, b: binary(a, b, 2), "vdiv": lambda a, b: binary(a, b, 3), "axpy": axpy,
            "relu": relu, "sum": total, "dot": dot, "sum_axis0": column_sums}


def _tall(n: int) -> dict[str, tuple[Callable[[np.random.Generator], tuple], Impl, str]]:
    """The issue-25 rows over `x: f32[n // 16, 16]`: kernel -> (inputs, numpy, source)."""
    rows = max(n // 16, 1)

    def x(r):
        return r.uniform(-1, 1, (rows, 16)).astype(F32)

    def logreg(X, w, t, lr):
        p = 1 / (1 + np.exp(-(X @ w)))
        return w - lr * (X.T @ (p - t) / F32(len(t)))

    return {"xtv": (lambda r: (x(r), r.uniform(-1, 1, rows).astype(F32)), lambda a, v: a.T @ v, bench.XTV),
            "sum_axis0": (lambda r: (x(r),), lambda a: a.sum(axis=0), bench.SUM_AXIS0),
            "logreg": (lambda r: (x(r), r.uniform(-1, 1, 16).astype(F32), (r.uniform(0, 1, rows) < 0.5).astype(F32),
                                  F32(0.1)), logreg, bench.LOGREG)}


def _cells(size: int) -> dict[str, tuple[Any, Callable[[], tuple], Impl]]:
    """kernel -> (compiled kernel, its inputs made when asked, numpy) at `size` elements
    (made one kernel at a time: at 1e8 every kernel's inputs together would be ~10 GB)."""
    side = max(int(math.isqrt(size)), 1)
    out = {}
    for name, (inputs, numpy) in stdlib.cases(size, side).items():
        if name == "gemm" and side > 1024:
            continue  # above a 1024 x 1024 product gemm is bench.py's row, not a sweep point
        out[name] = (hg.compile_file(stdlib.KERNELS / f"{name}.toml"),
                     lambda f=inputs: f(np.random.default_rng(size)), numpy)
    for name, (inputs, numpy, source) in _tall(size).items():
        out[name] = (hg.compile(source), lambda f=inputs: f(np.random.default_rng(size)), numpy)
    return out


def measure(sizes: tuple[int, ...], only: set[str] | None, repeat: int) -> dict[str, dict[str, dict[int, float]]]:
    """kernel -> library -> size -> seconds per call."""
    libs: dict[str, dict[str, Impl]] = {}
    ne, numba = bench.optional("numexpr"), bench.optional("numba")
    if ne is not None:
        libs["numexpr"] = _numexpr(ne)
    if numba is not None:
        libs["numba"] = _numba(numba)
    times: dict[str, dict[str, dict[int, float]]] = {}
    for size in sizes:
        for name, (kernel, make, numpy) in _cells(size).items():
            if only and name not in only:
                continue
            args = make()
            first = kernel(*args)
            want = numpy(*args)
            if not stdlib.agrees(first, want):
                print(f"sweep: {name} at {size}: hologram disagrees with numpy", file=sys.stderr)
            outs = tuple(np.empty_like(o) for o in (first if isinstance(first, tuple) else (first,)))
            row = times.setdefault(name, {})
            row.setdefault("hologram", {})[size] = bench.median_time(lambda: kernel(*args, out=outs), repeat)
            row.setdefault("numpy", {})[size] = bench.median_time(lambda: numpy(*args), repeat)
            for lib, impls in libs.items():
                if name in impls:
                    impls[name](*args)  # compiled (numba) or parsed (numexpr) before it is timed
                    row.setdefault(lib, {})[size] = bench.median_time(lambda f=impls[name]: f(*args), repeat)
            print(f"sweep: {name:>15} {size:>11,}: " + "  ".join(
                f"{lib} {t[size] * 1e6:,.1f} us" for lib, t in row.items() if size in t), file=sys.stderr)
    return times


def draw(times: dict[str, dict[str, dict[int, float]]], out: Path) -> list[str]:
    """One figure per kernel (hologram's time over each library's, against size) and the
    index page; returns the figures' file names."""
    out.mkdir(parents=True, exist_ok=True)
    try:
        import matplotlib
    except ImportError:
        print("sweep: matplotlib is not installed (pip install 'hologram-kernels[bench]'): the table only",
              file=sys.stderr)
        return []
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    for kernel, row in times.items():
        fig, ax = plt.subplots(figsize=(5, 3.2))
        for lib, t in row.items():
            if lib == "hologram":
                continue
            sizes = sorted(s for s in t if s in row["hologram"])
            ax.plot(sizes, [row["hologram"][s] / t[s] for s in sizes], marker="o", label=f"vs {lib}")
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("elements")
        ax.set_ylabel("hologram time / other's (< 1: faster)")
        ax.set_title(kernel)
        ax.legend(fontsize=8)
        fig.tight_layout()
        name = f"{kernel}.png"
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        names.append(name)
    return names


def index(times: dict[str, dict[str, dict[int, float]]], figures: list[str], sizes: tuple[int, ...]) -> str:
    """docs/perf/README.md: how the figures were made, the table of ratios, the figures."""
    libs = sorted({lib for row in times.values() for lib in row if lib != "hologram"})
    lines = ["# Performance: hologram against numpy, numexpr and numba, by size", "",
             "Made by `python benchmarks/sweep.py` (the `bench` extra and matplotlib installed) on "
             f"{bench.platform.processor() or bench.platform.machine()}, {os.cpu_count()} cores; "
             "each cell is hologram's median time per call over the other library's (below 1: hologram is "
             "faster). Shared machines are noisy: rerun before drawing conclusions from one cell.", ""]
    for lib in libs:
        lines += [f"## hologram / {lib}", "", "| kernel | " + " | ".join(f"{s:.0e}" for s in sizes) + " |",
                  "|---|" + "---:|" * len(sizes)]
        for kernel, row in times.items():
            if lib in row:
                cells = [f"{row['hologram'][s] / row[lib][s]:.2f}" if s in row[lib] and s in row["hologram"] else "-"
                         for s in sizes]
                lines.append(f"| {kernel} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["## Figures", ""] + [f"![{f[:-4]}]({f})" for f in figures] + [""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(f"{s:.0e}" for s in SIZES),
                        help="comma-separated element counts (default 1e3 to 1e8)")
    parser.add_argument("--only", help="comma-separated kernels (default: all)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "perf"), help="where the figures go")
    parser.add_argument("--repeat", type=int, default=5, help="timed batches per measurement (default 5)")
    opts = parser.parse_args(argv)
    sizes = tuple(int(float(s)) for s in opts.sizes.split(","))
    times = measure(sizes, set(opts.only.split(",")) if opts.only else None, opts.repeat)
    out = Path(opts.out)
    figures = draw(times, out)
    (out / "README.md").write_text(index(times, figures, sizes), encoding="utf-8")
    print(f"sweep: {len(figures)} figures and README.md in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
