"""The README demo: compile every standard-library kernel, run it, check it against numpy.

    python examples/demo.py [--backend NAME] [--seed N]

Each kernel in kernels/ is compiled from its TOML source, called on the default backend
(or --backend) with generated inputs, and compared with a numpy implementation written
here, independently of the kernel's source, under the accuracy contract of docs/dsl.md:
exact for elementwise arithmetic and integers, a few ULP for transcendentals, a bound
growing with log2(n) for reductions. Prints one table row per kernel and exits non-zero
if any kernel fails to compile, run, or match.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Callable

import attrs
import numpy as np
from rich.console import Console
from rich.table import Table

import hologram as hg
from hologram.core import atlas
from hologram.core.errors import HologramError

KERNELS = Path(__file__).resolve().parent.parent / "kernels"
F32, F64 = np.float32, np.float64
EPS = float(np.finfo(F32).eps)

Arrays = tuple[np.ndarray | float, ...]


@attrs.frozen
class Case:
    """How to exercise one kernel: its inputs, numpy's answer, and the error allowed.

    `tolerance(args, expected)` gives the allowed absolute error per element (0: exact);
    `reference` is computed in float64 where the contract is a bound, so the bound is
    measured against the true value rather than numpy's own rounding."""

    inputs: Callable[[np.random.Generator], Arrays]
    reference: Callable[..., np.ndarray | tuple[np.ndarray, ...]]
    tolerance: Callable[[Arrays, np.ndarray], np.ndarray | float] = lambda args, expected: 0.0


def vec(rng: np.random.Generator, n: int = 256, scale: float = 10.0) -> np.ndarray:
    return (rng.standard_normal(n) * scale).astype(F32)


def ulps(k: float) -> Callable[[Arrays, np.ndarray], np.ndarray]:
    return lambda args, expected: k * np.spacing(np.abs(expected).astype(F32)).astype(F64)


def summed(n_of: Callable[[Arrays], int], magnitude: Callable[[Arrays], np.ndarray | float]):
    """eps * (log2(n) + 2) * sum|terms|: the reduction contract."""
    return lambda args, expected: EPS * (math.log2(max(n_of(args), 1)) + 2) * magnitude(args) + EPS * np.abs(expected)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(F64) - x.max())
    return e / e.sum()


def layernorm(x, gamma, beta, eps):
    x = x.astype(F64)
    d = x - x.mean(axis=1, keepdims=True)
    return d / np.sqrt((d * d).mean(axis=1, keepdims=True) + eps) * gamma + beta


def class_histogram(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    classes = atlas.BYTE_CLASS_TABLE[data]
    return (np.bincount(classes, minlength=96).astype(np.int64),
            np.bincount(atlas.MIRROR_TABLE[classes], minlength=96).astype(np.int64))


CASES: dict[str, Case] = {
    "vadd": Case(lambda r: (vec(r), vec(r)), np.add),
    "vsub": Case(lambda r: (vec(r), vec(r)), np.subtract),
    "vmul": Case(lambda r: (vec(r), vec(r)), np.multiply),
    "vdiv": Case(lambda r: (vec(r), vec(r)), np.true_divide),
    "axpy": Case(lambda r: (F32(2.5), vec(r), vec(r)), lambda a, x, y: a * x + y),
    "relu": Case(lambda r: (vec(r),), lambda x: np.maximum(x, F32(0))),
    "sigmoid": Case(lambda r: (vec(r),), lambda x: (1 / (1 + np.exp(-x.astype(F64)))).astype(F32), ulps(4)),
    "tanh": Case(lambda r: (vec(r, scale=2),), lambda x: np.tanh(x.astype(F64)).astype(F32), ulps(4)),
    "sum": Case(lambda r: (vec(r, 1000),), lambda x: np.sum(x, dtype=F64),
                summed(lambda a: a[0].size, lambda a: np.abs(a[0]).sum(dtype=F64))),
    "mean": Case(lambda r: (vec(r, 1000),), lambda x: np.mean(x, dtype=F64),
                 summed(lambda a: a[0].size, lambda a: np.abs(a[0]).mean(dtype=F64))),
    "max": Case(lambda r: (vec(r, 1000),), np.max),
    "argmax": Case(lambda r: (vec(r, 1000),), np.argmax),
    "dot": Case(lambda r: (vec(r), vec(r)), lambda x, y: np.dot(x.astype(F64), y),
                summed(lambda a: a[0].size, lambda a: np.abs(a[0].astype(F64) * a[1]).sum())),
    "softmax": Case(lambda r: (vec(r),), softmax, lambda args, e: (16 + 4 * math.log2(e.size)) * EPS * e),
    "gemm": Case(lambda r: (F32(0.5), vec(r, 16 * 16).reshape(16, 16), vec(r, 16 * 16).reshape(16, 16)),
                 lambda alpha, a, b: alpha * (a.astype(F64) @ b),
                 summed(lambda a: a[1].shape[1], lambda a: abs(a[0]) * (np.abs(a[1]).astype(F64) @ np.abs(a[2])))),
    "matvec": Case(lambda r: (vec(r, 32 * 64).reshape(32, 64), vec(r, 64)),
                   lambda a, x: a.astype(F64) @ x,
                   summed(lambda a: a[1].size, lambda a: np.abs(a[0]).astype(F64) @ np.abs(a[1]))),
    "stencil3": Case(lambda r: (vec(r),), lambda x: F32(0.25) * x[:-2] + F32(0.5) * x[1:-1] + F32(0.25) * x[2:]),
    "layernorm": Case(lambda r: (vec(r, 8 * 64).reshape(8, 64), vec(r, 64, 1), vec(r, 64, 1), F32(1e-5)),
                      layernorm, lambda args, e: 64 * EPS * (np.abs(e) + 1)),
    "class_histogram": Case(lambda r: (r.integers(0, 256, 4096, dtype=np.uint8),), class_histogram),
}


@attrs.frozen
class Row:
    kernel: str
    shapes: str
    backend: str
    error: str
    ok: bool
    status: str
    seconds: float


def shape_text(args: Arrays) -> str:
    return ", ".join("()" if np.ndim(a) == 0 else "×".join(map(str, np.shape(a))) for a in args)


def compare(actual, expected, tolerance) -> tuple[float, bool]:
    """Largest absolute error, and whether every element is within tolerance (NaN and
    infinities must match exactly)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        return math.inf, False
    a, e = actual.astype(F64), expected.astype(F64)
    special = ~np.isfinite(e)
    if not np.array_equal(a[special], e[special], equal_nan=True):
        return math.inf, False
    err = np.abs(a - e)[~special]
    worst = float(err.max()) if err.size else 0.0
    return worst, bool((err <= np.broadcast_to(tolerance, e.shape)[~special]).all())


def run_case(path: Path, backend: str | None, rng: np.random.Generator) -> Row:
    name = path.stem
    try:
        kernel = hg.compile_file(path)
        if backend is not None:
            kernel = kernel.on(backend)
        case = CASES.get(name)
        if case is None:
            return Row(name, "", "", "", False, "no numpy reference", 0.0)
        args = case.inputs(rng)
        start = time.perf_counter()
        got = kernel(*args)
        seconds = time.perf_counter() - start
        expected = case.reference(*args)
        got, expected = (got, expected) if isinstance(expected, tuple) else ((got,), (expected,))
        checks = [compare(g, e, case.tolerance(args, np.asarray(e))) for g, e in zip(got, expected)]
        worst = max(err for err, _ in checks)
        ok = all(passed for _, passed in checks) and len(got) == len(expected)
        return Row(name, shape_text(args), kernel.backend.name, f"{worst:.3g}", ok, "ok" if ok else "MISMATCH", seconds)
    except HologramError as exc:
        return Row(name, "", backend or "", "", False, f"{type(exc).__name__}: {exc.message}", 0.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", help="run on this backend instead of the default")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated inputs")
    opts = parser.parse_args(argv)
    rng = np.random.default_rng(opts.seed)

    table = Table(title="Hologram standard library vs numpy")
    for col, justify in (("kernel", "left"), ("shapes", "left"), ("backend", "left"),
                         ("max error", "right"), ("status", "left"), ("time", "right")):
        table.add_column(col, justify=justify)
    rows = [run_case(p, opts.backend, rng) for p in sorted(KERNELS.glob("*.toml"))]
    for r in rows:
        status = f"[green]{r.status}[/]" if r.ok else f"[bold red]{r.status}[/]"
        table.add_row(r.kernel, r.shapes, r.backend, r.error, status, f"{r.seconds * 1e3:.1f} ms" if r.ok else "")
    console = Console()
    console.print(table)
    failed = [r.kernel for r in rows if not r.ok]
    if failed:
        console.print(f"[bold red]{len(failed)} of {len(rows)} kernels failed:[/] {', '.join(failed)}")
        return 1
    console.print(f"[green]all {len(rows)} kernels match numpy[/]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
