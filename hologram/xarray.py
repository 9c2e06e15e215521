"""Kernels over xarray DataArrays: named dimensions mapped to shape symbols.

    import hologram.xarray as hgx

    y = hgx.apply(softmax, temps, dims={"n": "time"})         # softmax(x: f32[n]) along time
    normed = hgx.apply(layernorm, field, gamma, beta, 1e-5, dims={"m": "time", "n": "station"})

Each array input's declared dimensions are found by name: a shape symbol `s` is the
DataArray's dimension `dims.get(s, s)`, in whatever order the DataArray holds them (it
is transposed to the declared order); a dimension that is no plain symbol (`f32[3]`,
`f32[n - 2]`) is the argument's next dimension not named so. The outputs are DataArrays
named after the kernel's outputs, with the same naming (a dimension that is no plain
symbol is `<output>_dim<k>`), the coordinates of the inputs' dimensions they share and
the first input's attributes. Inputs must agree on their shared coordinates (xarray's
`join="exact"`: a mismatch is an error, never a silent intersection). A DataArray backed
by Dask arrays gives a lazy one (hologram.dask), a numpy-backed one an eager one.

This is `xarray.apply_ufunc(kernel, ..., dask="allowed")` with the core dimensions
written for you; calling `apply_ufunc` yourself works as well (docs/dask.md).
"""

from __future__ import annotations

from typing import Any, Mapping

from hologram.call.args import bind_arguments
from hologram.call.kernel import Kernel
from hologram.compiler.signature import Param
from hologram.core.errors import ArgumentError, did_you_mean
from hologram.core.types import Affine

__all__ = ["apply"]


def apply(kernel: Kernel, /, *args: Any, dims: Mapping[str, str] | None = None, cast: bool = False,
          **kwargs: Any) -> Any:
    """`kernel` called with DataArrays (module docstring): a DataArray, or a namedtuple of
    them for a kernel with several outputs. `dims` maps shape symbols to dimension names
    (a symbol not in it names its dimension itself); `cast` as in a call."""
    import xarray as xr

    sig = kernel.signature
    names = dict(dims or {})
    for symbol in names:
        if symbol not in sig.symbols:
            raise ArgumentError(f"hologram.xarray.apply({sig.name}): dims names {symbol!r}, which is no shape symbol "
                                f"of the kernel{did_you_mean(symbol, sig.symbols)}",
                                hint=f"its symbols: {', '.join(sig.symbols) or 'none'}")
    values = bind_arguments(sig, args, kwargs)
    inputs, core = [], []
    for p in sig.inputs:
        v = values[p.name]
        if isinstance(v, xr.DataArray):
            core.append(_input_dims(sig.name, p, v, names))
        elif isinstance(v, xr.Dataset):
            raise ArgumentError(f"hologram.xarray.apply({sig.name}): argument {p.name!r} is a Dataset",
                                hint="pass one of its variables, ds[name]")
        else:
            core.append([])
        inputs.append(v)
    out_dims = [[_output_dim(p, k, names) for k in range(len(p.shape))] for p in sig.outputs]

    def run(*arrays: Any) -> Any:
        return kernel(*arrays, cast=cast)

    result = xr.apply_ufunc(run, *inputs, input_core_dims=core, output_core_dims=out_dims, dask="allowed",
                            keep_attrs=True, join="exact")
    outs = (result,) if len(sig.outputs) == 1 else tuple(result)
    outs = tuple(o.rename(p.name) for o, p in zip(outs, sig.outputs))
    return outs[0] if len(outs) == 1 else kernel._c.result(*outs)


def _symbol(p: Param, k: int) -> str | None:
    a = Affine.of(p.shape[k])
    return a.terms[0][0] if a.const == 0 and len(a.terms) == 1 and a.terms[0][1] == 1 else None


def _input_dims(kernel: str, p: Param, v: Any, names: Mapping[str, str]) -> list[str]:
    """The DataArray's dimensions in `p`'s declared order (module docstring)."""
    where = f"hologram.xarray.apply({kernel}): argument {p.name!r}"
    if v.ndim != len(p.shape):
        raise ArgumentError(f"{where} has dimensions {v.dims}; {p.type} takes {len(p.shape)}")
    named = {k: names.get(s, s) for k in range(len(p.shape)) if (s := _symbol(p, k)) is not None}
    missing = [(k, d) for k, d in named.items() if d not in v.dims]
    if missing:
        k, d = missing[0]
        symbol = _symbol(p, k)
        raise ArgumentError(f"{where} has dimensions {v.dims}, none named {d!r} for the shape symbol {symbol} of "
                            f"{p.type}",
                            hint=f"name it: dims={{{symbol!r}: <one of {', '.join(map(repr, v.dims))}>}}")
    rest = iter(d for d in v.dims if d not in named.values())
    return [named[k] if k in named else next(rest) for k in range(len(p.shape))]


def _output_dim(p: Param, k: int, names: Mapping[str, str]) -> str:
    s = _symbol(p, k)
    return names.get(s, s) if s is not None else f"{p.name}_dim{k}"
