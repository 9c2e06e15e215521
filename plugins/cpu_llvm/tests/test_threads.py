"""A launch over threads (hologram_cpu_llvm.threads, native_pool): when it is split, the native
pool's chunks, wakeups and fork safety, the Python thread pool, and concurrent launches."""

from __future__ import annotations

import ctypes
import os
import threading
import time

import numpy as np
import pytest

import hologram as hg
from hologram.errors import ExecutionError
from hologram_cpu_llvm import CpuLlvmBackend, abi, native_pool, runtime as rt, threads

from runtime_cases import FSUM, PROLOGUE, SIG, SUM, Entry, HandWritten


# ----------------------------------------------------------------- splitting a launch
def chunks_of(exe, symbols: tuple[int, ...], nthreads: int, stage: int = 0) -> int:
    """The chunk count `run_stage` gives stage `stage` of `exe` at these symbol values."""
    geo = exe.geometry(symbols)
    plan = exe.stages[stage]
    return rt.chunk_count(*geo.grids[stage], nthreads, sum(geo.sizes[r.buffer] for r in plan.reduces))


@pytest.fixture
def parallel_runs(monkeypatch):
    """The chunk count of every parallel run, through whichever pool launches use."""
    seen: list[int] = []
    native, python = threads.NativePool.run, threads.ThreadPool.run

    def spy_native(self, fn, address, bufs, syms, scalars, chunks):
        seen.append(len(chunks))
        return native(self, fn, address, bufs, syms, scalars, chunks)

    def spy_python(self, tasks):
        seen.append(len(tasks))
        return python(self, tasks)
    monkeypatch.setattr(threads.NativePool, "run", spy_native)
    monkeypatch.setattr(threads.ThreadPool, "run", spy_python)
    return seen


def test_large_launch_is_split_across_threads(rev, parallel_runs):
    program, b = rev
    seen = parallel_runs
    n = rt.INLINE_COST * 4 + 77  # a partial last block
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    z = np.zeros_like(x)
    exe = b.prepare(program)
    b.launch(exe, {"x": x, "z": z}, {"a": 1.5}, {"n": n})
    # a few chunks per thread: its cost is many times CHUNK_COST
    assert seen == [rt.CHUNKS_PER_THREAD * 2] == [chunks_of(exe, (n,), 2)]
    np.testing.assert_array_equal(z, x[::-1] * np.float32(1.5))
    small = np.ones(100, np.float32)
    b.launch(b.prepare(program), {"x": small, "z": small.copy()}, {"a": 1.0}, {"n": 100})
    assert seen == [8]  # small launches run inline


def test_few_lanes_with_long_loops_are_split_across_threads(monkeypatch, parallel_runs):
    """Threading is decided by work (lanes x loop iterations per lane), not by lanes:
    512 rows of a matvec are too few lanes to split, 512 x 2048 iterations are not."""
    seen = parallel_runs
    k = hg.compile_file("kernels/matvec.toml").on("cpu_llvm")
    monkeypatch.setattr(k.backend, "num_threads", 2)
    rng = np.random.default_rng(1)
    a, x = rng.random((512, 2048), dtype=np.float32), rng.random(2048, dtype=np.float32)
    np.testing.assert_allclose(k(a, x), a.astype(np.float64) @ x, rtol=1e-6)
    assert len(seen) == 1 and seen[0] >= 2  # split: one chunk per thread or more (runtime.chunk_count)
    k(a[:, :16].copy(), x[:16])  # 512 x 17: inline
    assert len(seen) == 1


# ------------------------------------------------- more chunks than threads, claimed
# y[i] = x[idx[i]] with a checked load: a lane whose index is out of range reports it
GATHER = HandWritten(
    asm="""
.program gather
.symbols n
.param in idx: i64[n]
.param in x: f32[n]
.param out y: f32[n]
.stage s domain [n] block [256]
.reg %i, %j: i64
.reg %v: f32
MOV.i64 %i, %gid.x
LDG.i64 %j, [idx + %i]
LDG.f32.chk %v, [x + %j]
STG.f32 [y + %i], %v
EXIT
""",
    module_ir=f"""
define void @gather_s{SIG} {{
entry:
  %pidx = load ptr, ptr %bufs
  %px0 = getelementptr ptr, ptr %bufs, i64 1
  %x = load ptr, ptr %px0
  %py = getelementptr ptr, ptr %bufs, i64 2
  %y = load ptr, ptr %py
{PROLOGUE}
loop:
  %i = phi i64 [%lo, %entry], [%i1, %ok]
  %pj = getelementptr i64, ptr %pidx, i64 %i
  %j = load i64, ptr %pj
  %in = icmp ult i64 %j, %n
  br i1 %in, label %ok, label %fail
ok:
  %px = getelementptr float, ptr %x, i64 %j
  %v = load float, ptr %px
  %q = getelementptr float, ptr %y, i64 %i
  store float %v, ptr %q
  %i1 = add i64 %i, 1
  %k = icmp slt i64 %i1, %hi
  br i1 %k, label %loop, label %done
fail:
  store i64 {abi.ERR_OOB_GLOBAL}, ptr %err
  %e1 = getelementptr i64, ptr %err, i64 1
  store i64 0, ptr %e1
  %e2 = getelementptr i64, ptr %err, i64 2
  store i64 2, ptr %e2
  %e3 = getelementptr i64, ptr %err, i64 3
  store i64 %j, ptr %e3
  ret void
done:
  ret void
}}
""",
    entries=(Entry("gather_s", 0),),
)


@pytest.fixture(params=["native", "python", "caller"])
def pool_kind(request, monkeypatch):
    """Which way a split launch runs: the native pool, the Python pool (no native pool
    on this platform), or one chunk after another on the caller (the native pool busy
    with another Python thread's launch)."""
    if request.param == "python":
        monkeypatch.setattr(native_pool, "available", lambda: False)
    if request.param != "caller":
        yield request.param
        return
    held = []

    def busy(size):
        pool = real(size)
        if pool is not None and pool not in held:
            pool._busy.acquire()
            held.append(pool)
        return pool
    real = threads.native
    monkeypatch.setattr(threads, "native", busy)
    yield request.param
    for pool in held:
        pool._busy.release()


@pytest.mark.parametrize("nthreads", [2, 3])
def test_more_chunks_than_threads_merge_in_chunk_order(fake_backend, pool_kind, nthreads):
    """A float sum split into more chunks than threads gives, bit for bit and at every
    run, the chunk-ordered merge: each chunk's partial summed from -0.0 lane by lane (the
    stage's order), the partials folded in chunk order, then added to the init. Whichever
    thread claimed which chunk, a chunk run twice or skipped would change the bits."""
    b, _ = fake_backend(FSUM, threads=nthreads)
    exe = b.prepare(FSUM.program())
    n = rt.INLINE_COST * 2 + 3
    rng = np.random.default_rng(nthreads)
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)  # so that the order shows in the bits
    count = chunks_of(exe, (n,), nthreads)
    assert count > nthreads
    nblocks = exe.geometry((n,)).grids[0][0]
    bounds = [min(nblocks * k // count * 256, n) for k in range(count + 1)]
    partials = [np.add.accumulate(np.concatenate([[-0.0], x[lo:hi]]))[-1] for lo, hi in zip(bounds, bounds[1:])]
    total = np.float64(partials[0])
    for p in partials[1:]:
        total = total + p
    want = np.float64(0.0) + total
    two = rt.chunk_count(nblocks, rt.INLINE_COST * 8, nthreads, rt.SMALL_PARTIALS + 1)  # large partials: one per thread
    assert two == nthreads
    for _ in range(5):
        s = np.full(1, 7.0)
        b.launch(exe, {"x": x, "s": s}, {}, {"n": n})
        assert s.tobytes() == want.tobytes(), (pool_kind, s[0], want)


def test_an_error_names_the_first_failing_chunk_in_chunk_order(fake_backend, pool_kind):
    """Lanes in several chunks fail, each with its own index; whichever thread ran which
    chunk, and whichever failed first in time, the error is the first failing chunk's
    in chunk order (and within it, its first failing lane's)."""
    b, _ = fake_backend(GATHER)
    exe = b.prepare(GATHER.program())
    n = rt.INLINE_COST * 2
    count = chunks_of(exe, (n,), 2)
    assert count > 2
    nblocks = exe.geometry((n,)).grids[0][0]
    starts = [nblocks * k // count * 256 for k in range(count)]
    x = np.arange(n, dtype=np.float32)
    for first in (1, count - 2):
        idx = np.arange(n, dtype=np.int64)
        for k in range(first, count):  # chunk k fails at its middle lane, with index n + k
            idx[(starts[k] + starts[k + 1] if k + 1 < count else starts[k] + n) // 2] = n + k
        idx[-1] = n + 10 * count  # the last chunk's last lane fails too
        for _ in range(3):
            with pytest.raises(ExecutionError, match=rf"index {n + first} is out of bounds for global buffer 'x' "
                                                     rf"of {n} elements"):
                b.launch(exe, {"idx": idx, "x": x, "y": np.zeros(n, np.float32)}, {}, {"n": n})
    y = np.zeros(n, np.float32)
    idx = np.arange(n, dtype=np.int64)[::-1].copy()
    b.launch(exe, {"idx": idx, "x": x, "y": y}, {}, {"n": n})
    np.testing.assert_array_equal(y, x[::-1])


# -------------------------------------------------------------------- the native pool
@pytest.mark.parametrize("nthreads", [2, 3, 7])
def test_native_pool_runs_every_chunk_once(rev, parallel_runs, nthreads, tmp_path):
    """Every lane written (a reversed copy into NaNs), and every lane counted exactly once
    (an integer count: a chunk run twice, by a worker and by a caller stealing it, would
    add its lanes twice to its partial). With 7 threads on this 2-core machine most
    chunks are stolen."""
    program, b = rev
    b.num_threads = nthreads
    exe = b.prepare(program)
    counting = CpuLlvmBackend(num_threads=nthreads, cache_dir=tmp_path / "sum")
    summing = counting.prepare(SUM.program())
    for n in (rt.INLINE_COST * 3 + 17, rt.INLINE_COST + 1):
        x = np.random.default_rng(n).random(n, dtype=np.float32)
        z = np.full_like(x, np.nan)
        b.launch(exe, {"x": x, "z": z}, {"a": np.float32(3)}, {"n": n})
        np.testing.assert_array_equal(z, x[::-1] * np.float32(3))
        s, m = np.zeros(1, np.int64), np.zeros(1, np.int64)
        counting.launch(summing, {"x": np.ones(n, np.int64), "s": s, "m": m}, {}, {"n": n})
        assert s[0] == n
    big, small = rt.INLINE_COST * 3 + 17, rt.INLINE_COST + 1
    assert parallel_runs == [chunks_of(exe, (big,), nthreads), chunks_of(summing, (big,), nthreads),
                             chunks_of(exe, (small,), nthreads), chunks_of(summing, (small,), nthreads)]
    assert parallel_runs[0] > nthreads  # more chunks than threads


@pytest.mark.parametrize("nthreads", [2, 5])
def test_traced_launches_record_who_ran_each_chunk_and_when(rev, nthreads):
    """While a trace records, the native pool times each chunk (docs/cpu-llvm.md, "Chunk
    records"): the thread that ran it (the caller, or a worker it woke, or the caller
    again having stolen it) and its start and end on the trace's clock, inside the
    stage's span; the chunks cover the stage's blocks exactly once."""
    from hologram.core import trace

    from trace_helpers import check_events

    program, b = rev
    b.num_threads = nthreads
    exe = b.prepare(program)
    n = rt.INLINE_COST * 4 + 5
    x = np.arange(n, dtype=np.float32)
    z = np.zeros_like(x)
    with trace.recording() as events:
        for _ in range(3):
            b.launch(exe, {"x": x, "z": z}, {"a": np.float32(2)}, {"n": n})
    np.testing.assert_array_equal(z, x[::-1] * 2)
    xs = check_events(events)
    workers = {t.native_id: t.name for t in threading.enumerate()}
    stages = [e for e in xs if e["cat"] == "stage"]
    chunks = [e for e in xs if e["cat"] == "chunk"]
    count = chunks_of(exe, (n,), nthreads)
    assert count > nthreads  # more chunks than threads: each is run once, by whoever claimed it
    assert len(stages) == 3 and len(chunks) == 3 * count
    nblocks = stages[0]["args"]["blocks"]
    for stage in stages:
        assert stage["args"]["chunks"] == count
        mine = sorted((c for c in chunks if stage["ts"] <= c["ts"] <= stage["ts"] + stage["dur"]),
                      key=lambda c: c["args"]["chunk"])
        assert [c["args"]["chunk"] for c in mine] == list(range(count))
        assert [c["args"]["blocks"] for c in mine] == [[nblocks * i // count, nblocks * (i + 1) // count]
                                                       for i in range(count)]
        for c in mine:
            assert c["ts"] + c["dur"] <= stage["ts"] + stage["dur"] + 1e-3
            assert workers[c["tid"]] == "MainThread" or workers[c["tid"]].startswith("hologram-cpu-")
    # untraced, the job carries no buffer and nothing is timed
    b.launch(exe, {"x": x, "z": z}, {"a": np.float32(2)}, {"n": n})


def test_native_pool_wakes_workers_that_went_to_sleep(rev):
    """Between launches further apart than the workers spin, they sleep on their
    condition variable (word 2 of the control block says so); the next launch must wake
    them, every time (word 6 counts wakeups: the caller may have run every chunk itself
    by then, so the result alone would not tell)."""
    program, b = rev
    exe = b.prepare(program)
    n = rt.INLINE_COST * 2
    x = np.arange(n, dtype=np.float32)
    b.launch(exe, {"x": x, "z": np.zeros_like(x)}, {"a": np.float32(2)}, {"n": n})  # the workers exist
    pool = threads.native(2)

    def word(k: int) -> int:
        return ctypes.c_int64.from_address(pool._blocks + 8 * k).value

    def eventually(test) -> bool:
        deadline = time.monotonic() + 5
        while not test() and time.monotonic() < deadline:
            time.sleep(0.0005)
        return test()

    for _ in range(3):
        # asleep once its spin ran out, having seen the last job: `sleeping` alone may be
        # the flag of a worker the previous launch woke that has not run yet, and that
        # launch's wakeup, counted later, would then be taken for this one's
        assert eventually(lambda: word(2) == 1 and word(7) == word(0))
        wakes = word(6)
        z = np.zeros_like(x)
        b.launch(exe, {"x": x, "z": z}, {"a": np.float32(2)}, {"n": n})
        np.testing.assert_array_equal(z, x[::-1] * 2)
        assert eventually(lambda: word(6) == wakes + 1)  # woken by the launch: no wakeup is lost


def test_without_the_native_pool_python_threads_run_the_chunks(rev, monkeypatch):
    program, b = rev
    monkeypatch.setattr(native_pool, "available", lambda: False)
    used = []
    real = threads.ThreadPool.run
    monkeypatch.setattr(threads.ThreadPool, "run", lambda self, tasks: used.append(len(tasks)) or real(self, tasks))
    n = rt.INLINE_COST * 2
    x = np.arange(n, dtype=np.float32)
    z = np.zeros_like(x)
    exe = b.prepare(program)
    b.launch(exe, {"x": x, "z": z}, {"a": np.float32(2)}, {"n": n})
    np.testing.assert_array_equal(z, x[::-1] * 2)
    assert used == [chunks_of(exe, (n,), 2)] and used[0] > 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_parallel_launches_work_after_fork(rev):
    program, b = rev
    exe = b.prepare(program)
    n = rt.INLINE_COST * 2
    x = np.arange(n, dtype=np.float32)
    z = np.zeros_like(x)
    b.launch(exe, {"x": x, "z": z}, {"a": np.float32(2)}, {"n": n})  # the parent's workers exist
    pid = os.fork()
    if pid == 0:  # the child: the workers are gone and must be started again
        ok = False
        try:
            z = np.zeros_like(x)
            b.launch(exe, {"x": x, "z": z}, {"a": np.float32(5)}, {"n": n})
            ok = bool(np.array_equal(z, x[::-1] * 5))
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_concurrent_launches_from_python_threads(rev):
    program, b = rev
    exe = b.prepare(program)
    n = rt.INLINE_COST * 2
    failures = []

    def work(seed):
        x = np.random.default_rng(seed).random(n, dtype=np.float32)
        for _ in range(5):
            z = np.zeros_like(x)
            b.launch(exe, {"x": x, "z": z}, {"a": np.float32(seed)}, {"n": n})
            if not np.array_equal(z, x[::-1] * np.float32(seed)):
                failures.append(seed)
    workers = [threading.Thread(target=work, args=(s,)) for s in range(1, 5)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert failures == []


# ------------------------------------------------------------- the Python thread pool
def test_thread_pool_runs_everything_and_reports_errors():
    pool = threads.ThreadPool(3)
    out = []
    pool.run([lambda i=i: out.append(i) for i in range(10)])
    assert sorted(out) == list(range(10))

    def boom():
        raise ValueError("boom")
    with pytest.raises(ValueError, match="boom"):
        pool.run([lambda: None, boom, lambda: None])
    pool.run([lambda: out.append("after")])  # still usable
    assert out[-1] == "after"
    with pytest.raises(ValueError):
        threads.ThreadPool(0)
