"""A 1 GiB input streamed in bounded memory, in fresh processes: the peak resident set
(VmHWM) grows by the pool and no more (summing the GiB, and writing a quarter of it
through an elementwise kernel to a second memmap), and under an address-space limit that
loading the input whole breaks, an iterable of chunks still streams (docs/streaming.md).
The GiB is a sparse file with four blocks of values, so making it costs no disk time;
reading it costs what any GiB costs. About 4 s on 2 quiet cores, 13 s on busy ones."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hologram as hg

GIB = 1 << 30
BLOCK = 1 << 22  # f32 elements written at a time: 16 MiB
POOL = 32 << 20
WRITTEN = (0, 21, 40, 63)  # the blocks holding values; the rest of the GiB is zeros


def _pattern() -> np.ndarray:
    return (np.arange(BLOCK, dtype=np.int64) % 1000).astype(np.float32) * np.float32(0.25)


@pytest.fixture(scope="module")
def big_file(tmp_path_factory) -> str:
    if "cpu_llvm" not in hg.list_backends():
        pytest.skip("a GiB through the reference interpreter takes hours")
    folder = tmp_path_factory.mktemp("stream")
    if shutil.disk_usage(folder).free < 3 * GIB:
        pytest.skip("needs 3 GiB of free disk")
    path = str(folder / "x.npy")
    header = np.lib.format.open_memmap(path, "w+", np.float32, (GIB // 4,))  # a sparse file: zeros cost no disk
    offset = header.offset
    del header
    with open(path, "r+b") as f:
        for k in WRITTEN:
            f.seek(offset + k * BLOCK * 4)
            f.write(_pattern().tobytes())
    return path


def _child(code: str, **env: str) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HOLOGRAM_BACKEND": "cpu_llvm", **env})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


PRELUDE = """
    import json, resource
    import numpy as np
    import hologram as hg

    def hwm():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    total = hg.load_bundle("stdlib").sum
    scale = hg.compile('[kernel]\\nname = "scale"\\nversion = "1.0.0"\\ninputs = { x = "f32[n]" }\\n'
                       'outputs = { y = "f32[n]" }\\nbody = "y = x * 2 + 1"\\n')
    tiny = np.ones(1000, np.float32)
    hg.stream(total, tiny), hg.stream(scale, tiny, out=np.empty_like(tiny))  # compiled, threads started
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="VmHWM is Linux's")
def test_a_gib_memmap_streams_within_the_pool(big_file, tmp_path):
    out = str(tmp_path / "y.npy")
    found = _child(PRELUDE + f"""
    x = np.load({big_file!r}, mmap_mode="r")
    before = hwm()
    s = hg.stream(total, x, pool_bytes={POOL})
    part = x[:len(x) // 4]  # a quarter: writing a GiB back costs seconds on a slow disk, and proves no more
    y = np.lib.format.open_memmap({out!r}, "w+", np.float32, part.shape)
    hg.stream(scale, part, out=y, pool_bytes={POOL})
    del y
    streamed = hwm()
    np.sum(x)  # numpy reads the mapping: its pages count
    print(json.dumps({{"sum": float(s), "before": before, "streamed": streamed, "numpy": hwm()}}))
    """)
    grew = found["streamed"] - found["before"]
    assert grew < POOL + (48 << 20), found  # the pool, the temporaries, the allocator's slack
    assert found["numpy"] - found["before"] > GIB // 2, found  # the measure sees mapped pages
    exact = float(_pattern().astype(np.float64).sum()) * len(WRITTEN)
    assert abs(found["sum"] - exact) <= exact * 2e-6
    y = np.load(out, mmap_mode="r")
    np.testing.assert_array_equal(y[:BLOCK], _pattern() * 2 + 1)
    np.testing.assert_array_equal(y[BLOCK:2 * BLOCK], np.ones(BLOCK, np.float32))
    np.testing.assert_array_equal(y[-BLOCK:], np.ones(BLOCK, np.float32))


@pytest.mark.skipif(not hasattr(__import__("resource"), "RLIMIT_AS"), reason="no address-space limit here")
def test_chunks_stream_under_a_limit_that_loading_the_file_breaks(big_file):
    found = _child(PRELUDE + f"""
    def size():
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    limit = size() + (512 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        np.fromfile({big_file!r}, np.float32)
        whole = "loaded"
    except MemoryError:
        whole = "MemoryError"

    def chunks():
        with open({big_file!r}, "rb") as f:
            f.seek({np.load(big_file, mmap_mode="r").offset})  # past the .npy header
            while True:
                block = np.fromfile(f, np.float32, {BLOCK})
                if not len(block):
                    return
                yield block
    s = hg.stream(total, chunks(), pool_bytes={POOL})
    print(json.dumps({{"whole": whole, "sum": float(s)}}))
    """)
    assert found["whole"] == "MemoryError"
    exact = float(_pattern().astype(np.float64).sum()) * len(WRITTEN)
    assert abs(found["sum"] - exact) <= exact * 2e-6
