"""Kernels called with Dask arrays (docs/dask.md): the call becomes one Dask graph, split
as the kernel's statements allow. Nothing here imports Dask until such a call."""
