"""Dask's collection protocol, read without importing Dask (the plugin claims arguments
with it at every call that has an argument numpy does not)."""

from __future__ import annotations

from typing import Any


def is_dask_collection(value: Any) -> bool:
    """Whether `value` is a Dask collection (`dask.is_dask_collection`): an array, a
    DataFrame, a delayed value, an xarray object backed by Dask arrays..."""
    return hasattr(type(value), "__dask_graph__") and not isinstance(value, type)
