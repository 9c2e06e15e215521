"""Inputs for running the elementwise standard library on a backend against the
interpreter, bit for bit (tests/ and plugins/*/tests/ import it: a new backend's tests
hold it to the same arguments)."""

from __future__ import annotations

from typing import Any

import numpy as np

ELEMENTWISE_STDLIB = ("vadd", "vsub", "vmul", "vdiv", "axpy", "relu", "stencil3")
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3e38, -1.5], np.float32)


def elementwise_args(kernel: Any, n: int = 1000, seed: int = 7) -> list[Any]:
    """Arguments for `kernel`: scalars -2.5, arrays of `n` normal values with the float
    specials (zeros of both signs, infinities, NaN, a subnormal, a huge value) among them."""
    rng = np.random.default_rng(seed)
    args = []
    for p in kernel.signature.inputs:
        if p.kind == "scalar":
            args.append(p.dtype.np.type(-2.5))
        else:
            data = rng.standard_normal(n).astype(p.dtype.np)
            data[:len(SPECIALS)] = SPECIALS.astype(p.dtype.np)
            args.append(rng.permutation(data))
    return args


def outputs(result: object) -> tuple:
    """A kernel call's outputs as a tuple (one output comes back bare)."""
    return result if isinstance(result, tuple) else (result,)
