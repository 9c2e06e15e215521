"""The plugin (entry point `builtin_dask`) that lets a kernel take Dask arrays: it claims
an argument that is a Dask collection, and hands the call to hologram.dask.call, which
imports Dask then. Registering it imports nothing of Dask."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from hologram.core.hookspecs import CollectionAdapter, hookimpl
from hologram.dask.protocol import is_dask_collection


def _call(kernel: Any, values: Mapping[str, Any], out: Any, cast: bool, mapped: bool) -> Any:
    from hologram.dask.call import call

    return call(kernel, values, out, cast, mapped)


@hookimpl
def hologram_register_collections(register: Callable[[CollectionAdapter], None]) -> None:
    register(CollectionAdapter("dask", is_dask_collection, _call))
