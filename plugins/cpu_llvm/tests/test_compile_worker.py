"""The compile worker (offload.py, compile_worker.py): past the in-process limit, compiles
run in a worker process whose object code is byte for byte what this process makes; a
worker that is killed, retires, crashes on a module, cannot start, or is waited on when
Ctrl-C comes never hangs or crashes the caller."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import warnings

import pytest

import hologram as hg
from hologram.errors import HologramWarning
from hologram_cpu_llvm import CpuLlvmBackend, backend, jit, offload
from hologram_cpu_llvm.compile_worker import CompileRequest

TEMPLATE = ('[kernel]\nname = "k{i}"\nversion = "1.0.0"\ninputs = {{ x = "f32[n]" }}\n'
            'outputs = {{ y = "f32[n]" }}\nbody = "y = x * {i}.0 + 1.0"\n')


def request(i: int, target: str | None = None) -> CompileRequest:
    """The module of the kernel `y = x * i + 1`, with the support code every kernel links."""
    program = hg.compile(TEMPLATE.format(i=i), backend="interp").program
    module_ir = CpuLlvmBackend(cache_dir=False)._generate(program).module_ir
    return CompileRequest(module_ir, jit.OPT_LEVEL, tuple(backend._support()[0]), target)


def in_process(r: CompileRequest) -> bytes:
    if r.target is None:
        return jit.compile_object(r.module_ir, level=r.level, support=r.support)
    return jit.compile_object_for(r.module_ir, jit.target(r.target), level=r.level, support=r.support)


@pytest.fixture
def router(monkeypatch):
    """A router of its own (not the process's) that sends every compile to a worker."""
    monkeypatch.setenv(offload.ENV_IN_PROCESS, "0")
    made = []

    def make(command=None) -> offload.Router:
        made.append(offload.Router(command))
        return made[-1]
    yield make
    for r in made:
        r.stop()


def fake_worker(body: str) -> list[str]:
    """A worker command running `body` with the frame helpers, `key` (this host's) and
    `requests` / `replies` (its pipes) in scope."""
    prelude = textwrap.dedent(f"""
        import sys
        from hologram_cpu_llvm.compile_worker import *
        key = {jit.host().key!r}.encode()
        requests, replies = sys.stdin.buffer, sys.stdout.buffer
    """)
    return [sys.executable, "-c", prelude + textwrap.dedent(body)]


def test_the_worker_makes_the_same_object_code_as_this_process(router):
    r = router()
    for req in (request(1), request(2, target="host"), request(3, target=jit.level_targets()[0])
                if jit.level_targets() else request(3)):
        assert r.compile(req) == in_process(req)
    assert r.in_process == 0 and r.worker_pid() is not None


def test_compiles_past_the_limit_go_to_the_worker(router, monkeypatch):
    monkeypatch.setenv(offload.ENV_IN_PROCESS, "3")
    monkeypatch.setattr(offload, "WORKER_HEAD_START", 1)
    r = router()
    before = jit.STATS["worker"]
    objects = [r.compile(request(0))]
    assert r.worker_pid() is None
    objects.append(r.compile(request(1)))
    assert r.worker_pid() is not None  # started one compile before the limit
    objects.append(r.compile(request(2)))
    assert r.in_process == 3 and jit.STATS["worker"] == before
    objects.append(r.compile(request(3)))
    assert r.in_process == 3 and jit.STATS["worker"] == before + 1
    assert objects == [in_process(request(i)) for i in range(4)]


def test_a_killed_worker_is_replaced(router):
    r = router()
    assert r.compile(request(1)) == in_process(request(1))
    first = r.worker_pid()
    os.kill(first, signal.SIGKILL)
    assert r.compile(request(2)) == in_process(request(2))
    assert r.worker_pid() not in (None, first)


def test_a_worker_retires_after_its_compiles(router, monkeypatch):
    monkeypatch.setattr(offload, "WORKER_COMPILES", 2)
    r = router()
    r.compile(request(1))
    first = r._worker.process
    r.compile(request(2))
    assert first.returncode == 0  # told to exit, and exited
    assert r.worker_pid() not in (None, first.pid)  # its successor, started at once
    assert r.compile(request(3)) == in_process(request(3))


def test_llvm_rejecting_a_module_raises_as_it_does_here(router):
    bad = CompileRequest("define i32 @f() {\n  ret i64 0\n}\n", jit.OPT_LEVEL)
    with pytest.raises(RuntimeError) as here:
        in_process(bad)
    r = router()
    with pytest.raises(RuntimeError) as there:
        r.compile(bad)
    assert str(there.value) == str(here.value)
    assert r.compile(request(1)) == in_process(request(1))  # and the worker still serves


def test_a_module_that_kills_two_workers_is_an_error_not_a_crash(router):
    r = router(fake_worker("""
        write_frame(replies, READY, key)
        read_frame(requests)
        sys.exit(7)  # as LLVM crashing on the module would
    """))
    with pytest.raises(RuntimeError, match="two compile workers in turn died.*exit status 7"):
        r.compile(request(1))
    assert r.refused is None


@pytest.mark.parametrize("body", ["sys.exit(3)", "write_frame(replies, READY, b'llvmlite 0.0; elsewhere')"],
                         ids=["exits", "another-host"])
def test_a_worker_that_cannot_serve_leaves_compiles_here_with_a_warning(router, body):
    r = router(fake_worker(body))
    before = jit.STATS["worker"]
    with pytest.warns(HologramWarning, match="compile worker is not used"):
        assert r.compile(request(1)) == in_process(request(1))
    assert r.refused and jit.STATS["worker"] == before
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once
        assert r.compile(request(2)) == in_process(request(2))


def test_a_failure_inside_the_worker_compiles_here(router):
    r = router(fake_worker("""
        write_frame(replies, READY, key)
        while True:
            read_frame(requests)
            write_frame(replies, FAILED, b"Traceback: a bug")
    """))
    assert r.compile(request(1)) == in_process(request(1))
    assert r.refused is None


def test_an_interrupted_wait_stops_the_worker(router):
    r = router(fake_worker("""
        write_frame(replies, READY, key)
        read_frame(requests)
        sys.stdin.read()  # never answers
    """))

    def interrupt(*_):
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(KeyboardInterrupt):
            r.compile(request(1))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert r.worker_pid() is None


def test_threads_compile_through_one_worker(router):
    r = router()
    requests = [request(i) for i in range(6)]
    results: dict[int, bytes] = {}

    def compile_some(indices):
        for i in indices:
            results[i] = r.compile(requests[i])
    threads = [threading.Thread(target=compile_some, args=(range(k, 6, 3),)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [results[i] for i in range(6)] == [in_process(q) for q in requests]


def test_clear_cache_ends_the_worker_and_kernels_still_compile(tmp_path, monkeypatch, router):
    backend_ = CpuLlvmBackend(num_threads=1, cache_dir=tmp_path)
    monkeypatch.setattr(offload, "ROUTER", router())
    kernel = hg.compile(TEMPLATE.format(i=41), backend="interp").program
    exe = backend_.prepare(kernel)
    process = offload.ROUTER._worker.process
    assert exe is not None and offload.ROUTER.worker_pid() == process.pid
    backend_.clear_cache()
    assert offload.ROUTER.worker_pid() is None and process.returncode == 0
    assert backend_.prepare(hg.compile(TEMPLATE.format(i=42), backend="interp").program) is not None
    assert offload.ROUTER.worker_pid() not in (None, process.pid)  # compiled by a new worker


FORKED = textwrap.dedent("""
    import os, sys
    from hologram_cpu_llvm import offload
    sys.path.insert(0, sys.argv[1])
    from test_compile_worker import in_process, request
    os.environ[offload.ENV_IN_PROCESS] = "0"
    router = offload.Router()
    assert router.compile(request(1)) == in_process(request(1))
    parent_worker = router.worker_pid()
    pid = os.fork()
    if pid == 0:
        ok = router.compile(request(2)) == in_process(request(2)) and router.worker_pid() != parent_worker
        router.stop()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child could not compile on a worker of its own"
    assert router.worker_pid() == parent_worker and router.compile(request(3)) == in_process(request(3))
    router.stop()
    print("ok")
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_starts_its_own_worker_and_leaves_the_parents():
    done = subprocess.run([sys.executable, "-c", FORKED, os.path.dirname(__file__)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
