"""Kernels over xarray DataArrays: `xr.apply_ufunc(kernel, ..., dask="allowed")` and
`hologram.xarray.apply`, which maps named dimensions to shape symbols and keeps
coordinates and attributes, lazily for Dask-backed arrays."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import hologram as hg
import hologram.xarray as hgx
from hologram.core.errors import ArgumentError

STDLIB = hg.load_bundle("stdlib")
STATIONS = list("abcdefgh")


def field(lazy: bool = True) -> tuple[np.ndarray, xr.DataArray]:
    x = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
    data = da.from_array(x, chunks=(9, 3)) if lazy else x
    return x, xr.DataArray(data, dims=("time", "station"), name="temperature", attrs={"units": "K"},
                           coords={"time": np.arange(50), "station": STATIONS})


def per_station(values: np.ndarray) -> xr.DataArray:
    return xr.DataArray(values, dims=("station",), coords={"station": STATIONS})


def test_apply_ufunc_takes_a_kernel_on_dask_backed_data_arrays():
    x, arr = field()
    y = xr.apply_ufunc(STDLIB.softmax, arr.isel(station=2), input_core_dims=[["time"]],
                       output_core_dims=[["time"]], dask="allowed")
    assert isinstance(y.data, da.Array)
    np.testing.assert_allclose(y.values, STDLIB.softmax(np.ascontiguousarray(x[:, 2])), rtol=1e-6)


@pytest.mark.parametrize("lazy", [True, False])
def test_apply_maps_dimensions_to_symbols_and_keeps_coordinates_and_attributes(lazy):
    x, arr = field(lazy)
    gamma, beta = np.linspace(1, 2, 8, dtype=np.float32), np.linspace(-1, 1, 8, dtype=np.float32)
    y = hgx.apply(STDLIB.layernorm, arr.T, per_station(gamma), per_station(beta), np.float32(1e-5),
                  dims={"m": "time", "n": "station"})  # transposed: found by name, not by position
    assert y.name == "y" and y.dims == ("time", "station") and y.attrs == {"units": "K"}
    assert isinstance(y.data, da.Array) == lazy
    assert list(y.station.values) == STATIONS and list(y.time.values) == list(range(50))
    np.testing.assert_allclose(y.values, STDLIB.layernorm(x, gamma, beta, np.float32(1e-5)), rtol=1e-5, atol=1e-6)


def test_a_reduction_and_several_outputs():
    x, arr = field()
    total = hgx.apply(STDLIB.sum, arr.isel(station=0), dims={"n": "time"})
    assert total.dims == () and total.name == "total"
    assert abs(float(total) - float(x[:, 0].sum())) < 1e-4
    hist = hgx.apply(STDLIB.class_histogram, xr.DataArray(np.arange(300, dtype=np.uint8), dims=("n",)))
    assert hist.hist.dims == ("hist_dim0",) and int(hist.hist.sum()) == 300


def test_misnamed_and_misaligned_arguments_are_errors():
    x, arr = field()
    with pytest.raises(ArgumentError, match=r"none named 'n' for the shape symbol n of f32\[n\](?s:.*)dims=\{'n'"):
        hgx.apply(STDLIB.softmax, arr.isel(station=0))
    with pytest.raises(ArgumentError, match="dims names 'q', which is no shape symbol"):
        hgx.apply(STDLIB.softmax, arr.isel(station=0), dims={"q": "time"})
    shifted = per_station(np.ones(8, np.float32)).assign_coords(station=list("abcdefgz"))
    with pytest.raises(ValueError, match="exact"):  # xarray's join="exact": no silent intersection
        hgx.apply(STDLIB.layernorm, arr, shifted, shifted, np.float32(1e-5), dims={"m": "time", "n": "station"})
