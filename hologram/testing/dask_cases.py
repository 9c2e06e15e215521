"""Generated kernels called with Dask arrays, with their oracle.

    chunked(cases)     any generated case called (or mapped) with its array inputs as Dask arrays of
                       drawn chunkings (`KernelCase.dask`, a `DaskSpec`): per axis one
                       chunk, chunks of one element, or uneven cuts, now and then with
                       empty chunks among them; scalars now and then as 0-d Dask arrays.
                       The oracle is the case's own: the accuracy contract holds for any
                       chunking (hologram.dask splits the kernel so).

`run_chunked` is how the harness (hologram.testing.run.check_case) runs such a case: the
call returns Dask arrays, computed on Dask's threaded scheduler. Dask is imported only
there: the test kit works without it, and draws no such case then (`dask_available`).
"""

from __future__ import annotations

import importlib.util
import json
import warnings
from typing import Any, Callable, Mapping

import attrs
import numpy as np
from hypothesis import strategies as st

from hologram.testing.cases import KernelCase

__all__ = ["DaskSpec", "chunked", "chunkings", "run_chunked", "dask_available"]


def dask_available() -> bool:
    return importlib.util.find_spec("dask") is not None


@attrs.frozen
class DaskSpec:
    """How a case's inputs become Dask arrays: `chunks` the chunk sizes of each array
    input's axes (by name; an input not named stays a numpy array), `items` the scalar
    inputs given as 0-d Dask arrays."""

    chunks: tuple[tuple[str, tuple[tuple[int, ...], ...]], ...]
    items: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps({"chunks": {n: [list(c) for c in axes] for n, axes in self.chunks},
                           "items": list(self.items)})

    @staticmethod
    def from_json(text: str) -> "DaskSpec":
        data = json.loads(text)
        return DaskSpec(tuple((n, tuple(tuple(c) for c in axes)) for n, axes in data["chunks"].items()),
                        tuple(data["items"]))


@st.composite
def chunked(draw: Callable, cases: st.SearchStrategy[KernelCase]) -> KernelCase:
    """A case of `cases` called with Dask arrays (module docstring), through `kernel.map`
    when the case maps; a case that streams stays as it is."""
    case = draw(cases)
    if case.stream is not None:
        return case
    chunks = []
    items = []
    for name, value in case.inputs:
        if isinstance(value, np.ndarray) and value.ndim > 0:
            if draw(st.integers(0, 5)) > 0:  # most arrays split; some given as numpy arrays beside them
                chunks.append((name, tuple(draw(chunkings(n)) for n in value.shape)))
        elif draw(st.integers(0, 3)) == 0:
            items.append(name)
    return attrs.evolve(case, dask=DaskSpec(tuple(chunks), tuple(items)))


def chunkings(n: int) -> st.SearchStrategy[tuple[int, ...]]:
    """Chunk sizes summing to `n`: one chunk, chunks of one, or cuts at drawn places, and
    now and then an empty chunk among them."""
    whole = st.just((n,))
    if n <= 1:
        return st.one_of(whole, st.just((0, n)) if n else whole)
    ones = st.just((1,) * n) if n <= 64 else st.nothing()

    @st.composite
    def cuts(draw: Callable) -> tuple[int, ...]:
        points = sorted(set(draw(st.lists(st.integers(1, n - 1), min_size=1, max_size=6))))
        sizes = [b - a for a, b in zip([0, *points], [*points, n])]
        if draw(st.integers(0, 5)) == 0:
            sizes.insert(draw(st.integers(0, len(sizes))), 0)
        return tuple(sizes)

    return st.one_of(whole, ones, cuts())


def run_chunked(kernel: Any, inputs: Mapping[str, Any], spec: DaskSpec, mapped: bool = False) -> dict[str, np.ndarray]:
    """`kernel` called (`mapped`: through `kernel.map`) with Dask arrays as `spec` says,
    its outputs computed on Dask's threaded scheduler."""
    import dask
    import dask.array as da
    from dask.array.core import PerformanceWarning

    chunks = dict(spec.chunks)
    args: dict[str, Any] = {}
    for name, value in inputs.items():
        if name in chunks:
            args[name] = da.from_array(np.asarray(value), chunks=chunks[name])
        elif name in spec.items:
            args[name] = da.from_array(np.asarray(value), chunks=())
        else:
            args[name] = value
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PerformanceWarning)  # an axis read whole: still the right answer
        result = (kernel.map if mapped else kernel)(**args)
    names = [p.name for p in kernel.signature.outputs]
    lazy = (result,) if len(names) == 1 else tuple(result)
    computed = dask.compute(*lazy, scheduler="threads")
    return {name: np.asarray(v) for name, v in zip(names, computed)}
