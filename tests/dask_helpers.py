"""Arguments for the standard library's kernels as Dask arrays of drawn chunks, and what
their answers are held to (tests/dask/ imports it)."""

from __future__ import annotations

import dask.array as da
import numpy as np
from hypothesis import strategies as st

import hologram as hg
from hologram.core.types import Affine
from hologram.testing.contract import assert_close
from hologram.testing.dask_cases import chunkings

STDLIB = hg.load_bundle("stdlib")
EXACT = {"axpy", "vadd", "vsub", "vmul", "vdiv", "relu", "sigmoid", "tanh", "max", "argmax", "class_histogram",
         "stencil3"}


@st.composite
def stdlib_calls(draw, name: str, largest: int):
    """Arguments for stdlib kernel `name`: symbols drawn, arrays of normal values (u8
    data for the histogram), each array a Dask array of drawn chunks or left numpy."""
    k = STDLIB[name]
    sizes = {s: draw(st.integers(2, largest)) for s in k.signature.symbols}  # stencil3 needs n >= 2
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    numpy_args, dask_args = [], []
    for p in k.signature.inputs:
        if p.kind == "scalar":
            v = p.dtype.np.type(1e-5 if p.name == "eps" else -1.5)
            numpy_args.append(v)
            dask_args.append(v)
            continue
        shape = tuple(Affine.of(d).evaluate(sizes) for d in p.shape)
        x = rng.integers(0, 256, shape).astype(p.dtype.np) if p.dtype.np.kind == "u" \
            else rng.standard_normal(shape).astype(p.dtype.np)
        numpy_args.append(x)
        dask_args.append(da.from_array(x, chunks=tuple(draw(chunkings(n)) for n in shape))
                         if draw(st.integers(0, 4)) else x)
    return numpy_args, dask_args


def held(name: str, got, want, args) -> None:
    """`got` (from Dask arrays) against `want` (the numpy call): the same bits where the
    split runs the same program on every element, else the reductions' contract."""
    if name in EXACT:
        np.testing.assert_array_equal(got, want)
    elif name in ("sum", "mean", "dot"):
        terms = np.abs(args[0] * args[1]) if name == "dot" else np.abs(args[0])
        magnitude = terms.sum() / (terms.size if name == "mean" else 1)
        assert_close(got, want, ulps=2, reduction_n=terms.size, magnitude=magnitude)
    elif name in ("gemm", "matvec"):
        a, b = (args[1], args[2]) if name == "gemm" else (args[0], args[1])
        scale = abs(args[0]) if name == "gemm" else 1
        assert_close(got, want, ulps=2, reduction_n=a.shape[-1], magnitude=np.abs(a) @ np.abs(b) * scale)
    else:  # softmax, layernorm: a normalizer summed in another order
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
