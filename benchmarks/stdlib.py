"""Every standard-library kernel against the numpy code a user would write instead.

    python benchmarks/stdlib.py [--backend NAME] [--n N] [--side S] [--repeat R]

One table: per kernel its argument shapes, the median time of a call with preallocated
outputs on the backend (default: the best available), numpy's time, and numpy / hologram
(above 1: hologram is faster). Each result is checked loosely against numpy's first (the
accuracy contract itself is the test suite's job); a mismatch is flagged next to the time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import median_time  # noqa: E402 - one timing loop for every benchmark

import hologram as hg  # noqa: E402
from hologram.core import atlas  # noqa: E402

KERNELS = Path(__file__).resolve().parent.parent / "kernels"
F32 = np.float32


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def _layernorm(x, gamma, beta, eps):
    mu = x.mean(axis=1, keepdims=True)
    d = x - mu
    return d / np.sqrt((d * d).mean(axis=1, keepdims=True) + eps) * gamma + beta


def _histogram(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    classes = atlas.BYTE_CLASS_TABLE[data]
    return np.bincount(classes, minlength=96), np.bincount(atlas.MIRROR_TABLE[classes], minlength=96)


def cases(n: int, side: int) -> dict[str, tuple[Callable[[np.random.Generator], tuple], Callable[..., Any]]]:
    """kernel -> (its inputs, numpy's implementation)."""
    def vec(r: np.random.Generator, size: int = n) -> np.ndarray:
        return r.standard_normal(size).astype(F32)

    def mat(r: np.random.Generator, rows: int = side, cols: int = side) -> np.ndarray:
        return r.standard_normal((rows, cols)).astype(F32)

    gemm_side = min(side, 1024)
    return {
        "vadd": (lambda r: (vec(r), vec(r)), np.add),
        "vsub": (lambda r: (vec(r), vec(r)), np.subtract),
        "vmul": (lambda r: (vec(r), vec(r)), np.multiply),
        "vdiv": (lambda r: (vec(r), vec(r)), np.true_divide),
        "axpy": (lambda r: (F32(2.5), vec(r), vec(r)), lambda a, x, y: a * x + y),
        "relu": (lambda r: (vec(r),), lambda x: np.maximum(x, F32(0))),
        "sigmoid": (lambda r: (vec(r),), lambda x: 1 / (1 + np.exp(-x))),
        "tanh": (lambda r: (vec(r),), np.tanh),
        "sum": (lambda r: (vec(r),), np.sum),
        "mean": (lambda r: (vec(r),), np.mean),
        "max": (lambda r: (vec(r),), np.max),
        "argmax": (lambda r: (vec(r),), np.argmax),
        "dot": (lambda r: (vec(r), vec(r)), np.dot),
        "softmax": (lambda r: (vec(r),), _softmax),
        "stencil3": (lambda r: (vec(r),), lambda x: F32(0.25) * x[:-2] + F32(0.5) * x[1:-1] + F32(0.25) * x[2:]),
        "matvec": (lambda r: (mat(r), vec(r, side)), np.dot),
        "layernorm": (lambda r: (mat(r), vec(r, side), vec(r, side), F32(1e-5)), _layernorm),
        "gemm": (lambda r: (F32(0.5), mat(r, gemm_side, gemm_side), mat(r, gemm_side, gemm_side)),
                 lambda alpha, a, b: alpha * (a @ b)),
        "class_histogram": (lambda r: (r.integers(0, 256, n, dtype=np.uint8),), _histogram),
    }


def agrees(got: Any, want: Any) -> bool:
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    return len(got) == len(want) and all(
        np.allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-3, atol=1e-3)
        for g, w in zip(got, want))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", help="run on this backend (default: the best available)")
    parser.add_argument("--n", type=int, default=4_000_000, help="vector length (default 4,000,000)")
    parser.add_argument("--side", type=int, default=2048, help="matrix side (default 2048; gemm at most 1024)")
    parser.add_argument("--repeat", type=int, default=7, help="timed batches per measurement (default 7)")
    opts = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    backend = hg.get_backend(opts.backend).name
    table = Table(title=f"standard library: hologram ({backend}) vs numpy, median per call", title_justify="left")
    for col in ("kernel", "shapes", "hologram", "numpy", "numpy / hologram"):
        table.add_column(col, justify="left" if col in ("kernel", "shapes") else "right")
    wrong = []
    for name, (inputs, reference) in cases(opts.n, opts.side).items():
        kernel = hg.compile_file(KERNELS / f"{name}.toml").on(backend)
        args = inputs(rng)
        first = kernel(*args)
        outs = first if isinstance(first, tuple) else (first,)
        outs = tuple(np.empty_like(o) for o in outs)
        ours = median_time(lambda: kernel(*args, out=outs), opts.repeat)
        theirs = median_time(lambda: reference(*args), opts.repeat)
        ok = agrees(first, reference(*args))
        if not ok:
            wrong.append(name)
        shapes = ", ".join("x".join(map(str, np.shape(a))) or "()" for a in args)
        table.add_row(name, shapes, f"{ours * 1e3:.3f} ms" + ("" if ok else " WRONG RESULT"),
                      f"{theirs * 1e3:.3f} ms", f"{theirs / ours:.2f}")
    Console().print(table)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
