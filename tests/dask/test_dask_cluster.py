"""Kernels over Dask arrays on a dask.distributed cluster of two worker processes: the
kernels travel to the workers pickled (their programs, never a document), each worker
prepares each kernel once, results stay on the workers until gathered, and a worker that
dies in the middle of a computation costs a retry, not a wrong answer."""

from __future__ import annotations

import logging
import os
import pickle
import time

import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hologram as hg
from dask_helpers import held, stdlib_calls
from hologram.testing.contract import assert_close

STDLIB = hg.load_bundle("stdlib")


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """Two worker processes, each with a compile cache of its own that starts empty."""
    cache = tmp_path_factory.mktemp("worker-cache")
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                           silence_logs=logging.ERROR, env={"HOLOGRAM_CACHE_DIR": str(cache)})
    with cluster, Client(cluster) as c:
        yield c


def test_every_stdlib_kernel_runs_on_the_workers(client):
    """Each stdlib kernel once, its array inputs in uneven chunks, against its numpy call."""
    @settings(max_examples=1, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data):
        for name in sorted(STDLIB):
            numpy_args, dask_args = data.draw(stdlib_calls(name, 60))
            want, lazy = STDLIB[name](*numpy_args), STDLIB[name](*dask_args)
            got = client.compute(list(lazy) if isinstance(lazy, tuple) else [lazy], sync=True)
            for g, w in zip(got, want if isinstance(want, tuple) else (want,)):
                held(name, g, w, numpy_args)

    run()


def test_stdlib_kernels_run_on_the_workers(client):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4000, 24)).astype(np.float32)
    v = rng.standard_normal(24).astype(np.float32)
    dx = da.from_array(x, chunks=(500, 24))
    flat = da.from_array(x.reshape(-1), chunks=10_000)
    ones, zeros = np.ones(24, np.float32), np.zeros(24, np.float32)
    softmax, total, normed, mv = client.compute([STDLIB.softmax(flat), STDLIB.sum(flat),
                                                 STDLIB.layernorm(dx, ones, zeros, np.float32(1e-5)),
                                                 STDLIB.matvec(dx, v)], sync=True)
    np.testing.assert_allclose(softmax, STDLIB.softmax(x.reshape(-1)), rtol=1e-5, atol=1e-9)
    assert_close(total, x.sum(dtype=np.float32), ulps=2, reduction_n=x.size, magnitude=np.abs(x).sum())
    np.testing.assert_array_equal(normed, STDLIB.layernorm(x, ones, zeros, np.float32(1e-5)))
    np.testing.assert_array_equal(mv, STDLIB.matvec(x, v))


def test_scans_windows_and_contractions_run_on_the_workers(client):
    """The kinds the stdlib lacks, on the workers: a scan's carries, a convolution's halo,
    a reduction along rows with its axis moved first."""
    def compiled(inputs: str, outputs: str, body: str) -> hg.Kernel:
        return hg.compile(f'[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = {{ {inputs} }}\n'
                          f'outputs = {{ {outputs} }}\nbody = """\n{body}\n"""\n')

    rng = np.random.default_rng(2)
    x, w = rng.uniform(0.5, 1.5, 5000).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    a = rng.standard_normal((300, 200)).astype(np.float32)
    scan = compiled('x = "f32[n]"', 'y = "f32[n]"', "y = cumsum(x)")
    conv = compiled('x = "f32[n]", w = "f32[k]"', 'y = "f32[n - k + 1]"', "y[i] = sum(x[i + d] * w[d], d)")
    rows = compiled('a = "f32[m, n]"', 'y = "f32[m]"', "y = sum(a, axis=1)")
    got = client.compute([scan(da.from_array(x, chunks=700)), conv(da.from_array(x, chunks=(1, 999, 4000)), w),
                          rows(da.from_array(a, chunks=(70, 45)))], sync=True)
    assert_close(got[0], scan(x), ulps=8, reduction_n=x.size, magnitude=np.abs(scan(x)).max())
    np.testing.assert_array_equal(got[1], conv(x, w))
    assert_close(got[2], rows(a), ulps=2, reduction_n=200, magnitude=np.abs(a).sum(axis=1))


def test_a_kernel_compiled_here_is_prepared_once_per_worker(client):
    doc = '[kernel]\nname = "scaled"\nversion = "1.0.0"\ninputs = { x = "f32[n]" }\noutputs = { y = "f32[n]" }\n' \
          'body = "y = x * 3 + 1"\n'
    k = hg.compile(doc)
    x = np.arange(100_000, dtype=np.float32)
    y = client.compute(k(da.from_array(x, chunks=1000)), sync=True)  # 100 tasks over two workers
    np.testing.assert_array_equal(y, x * 3 + 1)

    key = (k._c.encoded[1], k.signature, k.version, None)
    blob = pickle.dumps(k)

    def prepared(key=key, blob=blob) -> bool:
        from hologram.call.kernel import _UNPICKLED

        found = _UNPICKLED.get(key)  # what every task's copy of the kernel unpickled to
        # prepared, and any copy that arrives later is that same object: it is not prepared again
        return found is not None and found._ready is not None and pickle.loads(blob) is found

    assert any(client.run(prepared).values())


def test_a_worker_dying_in_the_middle_is_retried_and_the_answer_is_right(client):
    def slow(block):
        time.sleep(0.02)
        return block

    x = np.random.default_rng(1).standard_normal(200_000).astype(np.float32)
    lazy = STDLIB.softmax(da.from_array(x, chunks=2000).map_blocks(slow, meta=np.array((), np.float32)))
    future = client.compute(lazy)
    time.sleep(0.5)  # some tasks done, some running
    victim = sorted(client.scheduler_info()["workers"])[0]
    try:
        client.run(os._exit, 1, workers=[victim])
    except Exception:  # noqa: BLE001 - the worker's connection breaks as it exits: that is the point
        pass
    np.testing.assert_allclose(future.result(timeout=120), STDLIB.softmax(x), rtol=1e-5, atol=1e-10)
    assert victim not in client.scheduler_info()["workers"]  # it did die (its nanny started another)
