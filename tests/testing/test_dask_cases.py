"""The test kit's cases called with Dask arrays (hologram.testing.dask_cases): drawn
chunkings cover each axis exactly, a chunked case is its numpy call's answer, and a
reproducer keeps its chunking."""

from __future__ import annotations

import numpy as np
from hypothesis import given, strategies as st

from hologram.testing import check_case
from hologram.testing.cases import KernelCase
from hologram.testing.dask_cases import DaskSpec, chunkings, run_chunked
from hologram.testing.difftest import _kernel_from_files, _write_kernel
from hologram.testing.bounds import Val

SOURCE = '[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = { x = "f32[n]", a = "f32" }\n' \
         'outputs = { s = "f32" }\nbody = "s = sum(x * a)"\n'


@given(n=st.integers(0, 200), data=st.data())
def test_a_drawn_chunking_covers_its_axis(n, data):
    sizes = data.draw(chunkings(n))
    assert sum(sizes) == n and all(s >= 0 for s in sizes) and sizes


def case(spec: DaskSpec) -> KernelCase:
    x = np.arange(10, dtype=np.float32)
    return KernelCase(SOURCE, (("x", x), ("a", np.float32(2))), (("s", Val.exact(np.float32(90))),),
                      dask=spec)


def test_a_chunked_case_runs_and_its_reproducer_keeps_the_chunking(tmp_path):
    spec = DaskSpec((("x", ((3, 0, 7),)),), ("a",))
    assert DaskSpec.from_json(spec.to_json()) == spec
    assert check_case(case(spec), "interp")["s"] == 90
    path = _write_kernel(case(spec), "interp", "O2", "a note", str(tmp_path))
    assert _kernel_from_files(path).dask == spec


def test_mapped_cases_map_over_dask_arrays():
    import hologram as hg

    k = hg.compile(SOURCE).on("interp")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = run_chunked(k, {"x": x, "a": np.float32(1)}, DaskSpec((("x", ((2, 1), (4,))),)), mapped=True)
    np.testing.assert_array_equal(got["s"], x.sum(axis=1))
