"""The streamed cases of the test kit (hologram.testing.stream_cases): a drawn `shifted_out`
holds hologram.stream to refusing an out= that overlaps an input one element on (issue 21:
the answer depended on the pool and the order chunks were read and written)."""

from __future__ import annotations

import numpy as np
import pytest

import hologram as hg
from hologram.streaming import loops as stream_loops
from hologram.streaming import rows as stream_rows
from hologram.testing.stream_cases import StreamSpec, run_streamed

DOUBLE = '''
[kernel]
name = "double"
version = "1.0.0"
inputs = { x = "f32[n]" }
outputs = { y = "f32[n]", total = "f32" }
body = """
y = 2 * x + 1
total = sum(x)
"""
'''


@pytest.mark.parametrize("backend", hg.list_backends())
def test_a_shifted_out_is_tried_first_and_refused(backend):
    kernel = hg.compile(DOUBLE, backend=backend)
    x = np.arange(1000, dtype=np.float32)
    out = run_streamed(kernel, {"x": x}, StreamSpec(300, shifted_out=True), [(1000,), ()])
    assert np.array_equal(out["y"], 2 * x + 1) and out["total"] == x.sum()


def test_a_stream_that_accepts_a_shifted_out_fails_the_case(monkeypatch):
    for module in (stream_rows, stream_loops):  # the check issue 21 asked for, taken away
        monkeypatch.setattr(module, "refuse_overlaps", lambda *args: None)
    kernel = hg.compile(DOUBLE)
    with pytest.raises(AssertionError, match="accepted out 'y' overlapping input 'x' one element on"):
        run_streamed(kernel, {"x": np.arange(1000, dtype=np.float32)}, StreamSpec(300, shifted_out=True),
                     [(1000,), ()])



@pytest.mark.parametrize("backend", hg.list_backends())
def test_a_case_streamed_from_a_file_reads_its_memmap(monkeypatch, backend):
    """`from_file`: the streamed input reaches hologram.stream as a read-only memmap of a
    file (in place on cpu_llvm, through `pread` elsewhere), and the result is the case's."""
    seen = []
    real = hg.stream
    monkeypatch.setattr(hg, "stream", lambda k, *args, **kw: seen.extend(args) or real(k, *args, **kw))
    kernel = hg.compile(DOUBLE, backend=backend)
    x = np.arange(5000, dtype=np.float32)
    out = run_streamed(kernel, {"x": x}, StreamSpec(4096, from_file=True), [(5000,), ()])
    assert any(isinstance(a, np.memmap) and a.mode == "r" for a in seen)
    assert np.array_equal(out["y"], 2 * x + 1) and out["total"] == x.sum()
