"""Tracing (hologram.core.trace, hologram.call.tracing; docs/tracing.md): the file a
traced process writes, the spans of a compile and of calls on every backend, what a
launch span says, and that an untraced call runs the untraced code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings

import hologram
from hologram.call.kernel import Kernel
from hologram.core import trace
from hologram.core.errors import HologramError
from hologram.isa.encoding import program_hash
from hologram.testing import check_case, kernels as generated_kernels

from repo_paths import KERNELS, ROOT
from trace_helpers import check_events, named, names

BACKENDS = hologram.list_backends()
COMPLETE = [b for b in BACKENDS if hologram.get_backend(b).capabilities.complete]
COMPILE_SPANS = {"translate", "parse", "analyze", "ir passes", "lower", "isa passes", "verify"}

SIGMOID_AND_SUM = '''[kernel]
name = "both"
version = "1.0.0"
inputs = { x = "f32[n]" }
outputs = { y = "f32[n]", s = "f32" }
body = """
y = sigmoid(x)
s = sum(x)
"""
'''


@pytest.fixture(autouse=True)
def no_recording():
    """No recording leaks into or out of a test."""
    if trace.active():
        trace.stop()
    yield
    if trace.active():
        trace.stop()


def test_a_traced_process_writes_a_trace_perfetto_opens(tmp_path):
    """HOLOGRAM_TRACE=FILE: a compile, a full call, fast calls and a launch split across two
    threads, written at exit: valid JSON whose events have the Chrome format's structure,
    every span expected, launches naming the kernel and its program's sha256, chunks
    covering each split stage's blocks."""
    path = tmp_path / "trace.json"
    code = f"""
        import json
        import numpy as np
        import hologram
        from hologram.isa.encoding import program_hash

        k = hologram.compile({SIGMOID_AND_SUM!r}).on({BACKENDS[0]!r})
        x = np.linspace(-3, 3, 1 << 19, dtype=np.float32)
        y, s = k(x)
        for _ in range(3):
            k(x, out=(y, s))
        assert np.allclose(y, 1 / (1 + np.exp(-x)), atol=1e-6)
        print(len(k.program.stages))
        print(json.dumps(program_hash(k.program)))
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env={**os.environ, "HOLOGRAM_TRACE": str(path), "HOLOGRAM_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stderr
    digest = json.loads(done.stdout.strip().splitlines()[-1])
    doc = json.loads(path.read_text())
    assert doc["otherData"]["dropped_spans"] == 0
    xs = check_events(doc["traceEvents"])
    found = names(xs)
    assert COMPILE_SPANS <= found, COMPILE_SPANS - found
    assert {"ir pass fold", "isa pass regalloc", "call both", "launch both", "prepare both"} <= found
    assert any(n.endswith("prepare") for n in found)  # the backend's own span
    calls = named(xs, "call both")
    assert [c["args"]["path"] for c in calls] == ["full", "fast", "fast", "fast"]
    launches = named(xs, "launch both")
    assert len(launches) == 4
    for launch in launches:
        assert launch["args"]["kernel"] == "both" and launch["args"]["program"] == digest
        assert launch["args"]["symbols"] == {"n": 1 << 19}
        assert launch["args"]["bytes_read"] >= 4 << 19  # x, read once by each stage
        assert launch["args"]["bytes_written"] >= (4 << 19) + 4 and launch["args"]["bytes_exact"] is True
        inside = [c for c in calls if c["tid"] == launch["tid"] and c["ts"] <= launch["ts"]
                  and launch["ts"] + launch["dur"] <= c["ts"] + c["dur"]]
        assert len(inside) == 1, "each launch is inside its call"
    stages = [e for e in xs if e.get("cat") == "stage"]
    assert len(stages) == 4 * int(done.stdout.strip().splitlines()[-2])
    if BACKENDS[0] == "cpu_llvm":  # 2^19 lanes: both stages cost enough to split across the two threads
        # (at least one chunk per thread; a few per thread where the stage costs much)
        chunks = [e for e in xs if e.get("cat") == "chunk"]
        assert len(chunks) == sum(stage["args"]["chunks"] for stage in stages)
        for stage in stages:
            count = stage["args"]["chunks"]
            assert count >= 2
            mine = [c for c in chunks if c["args"]["stage"] == stage["args"]["stage"]
                    and stage["ts"] <= c["ts"] and c["ts"] + c["dur"] <= stage["ts"] + stage["dur"] + 1e-3]
            assert sorted(c["args"]["chunk"] for c in mine) == list(range(count))
            blocks = [c["args"]["blocks"] for c in sorted(mine, key=lambda c: c["args"]["chunk"])]
            assert blocks[0][0] == 0 and blocks[-1][1] == stage["args"]["blocks"]
            assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))
        threads = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
        assert {threads[c["tid"]] for c in chunks} <= {"MainThread", "hologram-cpu-1"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_traces_its_calls_and_stages(backend):
    k = hologram.compile(SIGMOID_AND_SUM).on(backend)
    x = np.linspace(-1, 1, 100, dtype=np.float32)
    with trace.recording() as events:
        y, s = k(x)
        k(x, out=(y, s))
    xs = check_events(events)
    assert f"{backend} prepare" in names(xs)
    launches = named(xs, "launch both")
    assert [e["args"]["backend"] for e in launches] == [backend, backend]
    assert {e["args"]["program"] for e in launches} == {program_hash(k.program)}
    stages = [e["args"]["stage"] for e in xs if e.get("cat") == "stage"]
    # the second call may be the native entry point's, which runs the stages itself (its
    # launch span times them: test_a_fast_call_through_the_native_entry_point_is_traced)
    assert stages in ([s.name for s in k.program.stages] * 2, [s.name for s in k.program.stages])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fast_call_through_the_native_entry_point_is_traced(backend):
    """axpy on 16 elements: on cpu_llvm its fast path is the native launcher, which runs
    the stages itself; the launch span times that call."""
    k = hologram.compile_file(KERNELS / "axpy.toml").on(backend)
    a, x, y = np.float32(2), np.ones(16, np.float32), np.arange(16, dtype=np.float32)
    out = k(a, x, y)
    with trace.recording() as events:
        k(a, x, y, out=out)
    xs = check_events(events)
    (call,) = named(xs, "call axpy")
    (launch,) = named(xs, "launch axpy")
    assert call["args"]["path"] == "fast"
    assert launch["args"]["symbols"] == {"n": 16} and launch["args"]["bytes_read"] == 2 * 4 * 16
    assert launch["args"]["bytes_written"] == 4 * 16
    np.testing.assert_array_equal(out, 2 * x + y)


def test_compile_spans_say_what_the_caches_held():
    text = SIGMOID_AND_SUM.replace('"both"', '"cached"')
    hologram.clear_cache()
    with trace.recording() as first:
        hologram.compile(text)
    with trace.recording() as again:
        hologram.compile(text)
    (miss,) = named(check_events(first), "compile <string>")
    (hit,) = named(check_events(again), "compile <string>")
    assert miss["args"]["cache"] == "miss" and hit["args"]["cache"] == "hit"
    assert COMPILE_SPANS <= names(first)
    assert not COMPILE_SPANS & names(again), "a cached document runs no phase"


@pytest.mark.skipif("cpu_llvm" not in BACKENDS, reason="the cpu_llvm backend is not installed")
def test_cpu_llvm_prepare_says_which_cache_held_the_code(tmp_path, monkeypatch):
    """A program compiled (miss: the JIT's phases inside), prepared again (memory), and
    prepared by a fresh backend sharing the disk cache (disk: linked, no codegen). In
    this process: past its first compiles a process sends LLVM's work to the compile
    worker, whose phases it does not see (docs/cpu-llvm.md)."""
    from hologram_cpu_llvm.backend import CpuLlvmBackend

    monkeypatch.setenv("HOLOGRAM_COMPILES_IN_PROCESS", str(1 << 30))

    program = hologram.compile(SIGMOID_AND_SUM.replace('"both"', '"jit"')).program
    verdicts = []
    for backend in (CpuLlvmBackend(cache_dir=tmp_path), None, CpuLlvmBackend(cache_dir=tmp_path)):
        b = backend or b
        with trace.recording() as events:
            b.prepare(program)
        xs = check_events(events)
        (prep,) = named(xs, "cpu_llvm prepare")
        assert prep["args"]["program"] == program_hash(program)
        verdicts.append((prep["args"]["cache"], names(xs) - {"cpu_llvm prepare"}))
    jit = {"disk cache load", "verify", "codegen", "llvm optimize", "llvm emit", "link", "disk cache store"}
    assert verdicts == [("miss", jit), ("memory", set()), ("disk", {"disk cache load"})]


def test_a_bundle_load_is_traced(tmp_path, monkeypatch):
    """Loaded with an empty cache, a program is verified; loaded again, the verdict the
    first load recorded stands for the verifier (hologram.verify.verdicts)."""
    from hologram.bundles.build import build

    monkeypatch.setenv("HOLOGRAM_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "tiny-1.0.0.hgb"
    build([str(KERNELS / "relu.toml")], "tiny", "1.0.0", path, cache_dir=False, jobs=1)
    for first in (True, False):
        with trace.recording() as events:
            lib = hologram.load_bundle(str(path))
            lib.relu(np.ones(8, np.float32))
        xs = check_events(events)
        assert {"load bundle", "open bundle", "decode", "verdict", "call relu", "launch relu"} <= names(xs)
        assert ("verify" in names(xs)) is first
        (load,) = named(xs, "load bundle")
        assert load["args"]["bundle"] == str(path)


def test_map_calls_are_traced():
    k = hologram.compile(SIGMOID_AND_SUM)
    with trace.recording() as events:
        k.map(np.zeros((3, 5), np.float32))
    xs = check_events(events)
    (call,) = named(xs, "call both")
    (launch,) = named(xs, "launch both")
    assert call["args"]["path"] == "map" and launch["args"]["program"] != program_hash(k.program)  # the batched one


def test_untraced_calls_run_the_untraced_code():
    """Zero cost when off: tracing swaps Kernel's methods in and out; off, they are the
    plain ones, and the fast path calls the launcher directly."""
    plain_call, plain_map = Kernel.__call__, Kernel.map
    k = hologram.compile(SIGMOID_AND_SUM.replace('"both"', '"plain"'))
    x = np.zeros(4, np.float32)
    k(x)
    k(x)
    with trace.recording():
        assert Kernel.__call__ is not plain_call and Kernel.map is not plain_map
        k(x)
    assert Kernel.__call__ is plain_call and Kernel.map is plain_map
    assert "LAUNCH" not in k._fast.__code__.co_names and "run" in k._fast.__code__.co_names
    assert "LAUNCH" in k._traced.__code__.co_names


def test_the_recording_api(tmp_path):
    assert not trace.active() and trace.stop() == [] and trace.events() == [] and trace.flush() is None
    path = tmp_path / "t.json"
    trace.start(path)
    try:
        with pytest.raises(HologramError, match="already being recorded"):
            trace.start()
        with trace.span("mine", "user", size=3) as args:
            args["extra"] = 1
        assert trace.flush() == str(path)
        written = json.loads(path.read_text())["traceEvents"]
        (mine,) = named(check_events(written), "mine")
        assert mine["cat"] == "user" and mine["args"] == {"size": 3, "extra": 1}
        trace.clear()
        assert named(trace.events(), "mine") == []
        with pytest.raises(ValueError):
            with trace.span("failing"):
                raise ValueError
    finally:
        events = trace.stop()
    (failing,) = named(check_events(events), "failing")
    assert failing["args"] == {"error": "ValueError"}
    assert named(json.loads(path.read_text())["traceEvents"], "failing")
    with pytest.raises(HologramError, match="does not exist"):
        trace.start(tmp_path / "no" / "such" / "t.json")
    assert not trace.active()


def test_spans_beyond_the_limit_are_counted(monkeypatch):
    monkeypatch.setattr(trace, "MAX_EVENTS", 3)
    with trace.recording() as events:
        for _ in range(5):
            with trace.span("s"):
                pass
        assert trace.recorder.dropped == 2
    assert len(named(events, "s")) == 3


def test_a_child_process_writes_its_own_file(tmp_path):
    """A process that inherits HOLOGRAM_TRACE from a traced parent writes NAME.<pid>.json
    beside it; `{pid}` in the variable names each process's file."""
    code = """
        import os, subprocess, sys
        import hologram
        child = subprocess.run([sys.executable, "-c", "import hologram, os; print(os.getpid())"],
                               capture_output=True, text=True, check=True)
        print(child.stdout.strip())
    """
    path = tmp_path / "t.json"
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "HOLOGRAM_TRACE": str(path)})
    assert done.returncode == 0, done.stderr
    child = done.stdout.strip()
    assert path.exists() and (tmp_path / f"t.{child}.json").exists()
    for p in (path, tmp_path / f"t.{child}.json"):
        check_events(json.loads(p.read_text())["traceEvents"])
    done = subprocess.run([sys.executable, "-c", "import hologram, os; print(os.getpid())"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "HOLOGRAM_TRACE": str(tmp_path / "p{pid}.json")})
    assert (tmp_path / f"p{done.stdout.strip()}.json").exists()


def test_a_bad_trace_path_warns_and_does_not_break_the_import(tmp_path):
    done = subprocess.run([sys.executable, "-c", "import hologram; print(hologram.trace.active())"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOLOGRAM_TRACE": str(tmp_path / "missing" / "t.json")})
    assert done.returncode == 0 and done.stdout.strip() == "False"
    assert "HOLOGRAM_TRACE" in done.stderr and "does not exist" in done.stderr


def test_a_traced_bundle_load_and_call_imports_no_compiler(tmp_path):
    """Tracing keeps the run-time path's promise (tests/test_startup.py): the cost model a
    launch span reads is not the compiler."""
    from hologram.bundles.build import build

    from test_startup import COMPILER, HEAVY

    path = tmp_path / "tiny-1.0.0.hgb"
    build([str(KERNELS / "softmax.toml")], "tiny", "1.0.0", path, cache_dir=False, jobs=1)
    code = f"""
        import json, sys
        import hologram
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r})
        import numpy as np
        y = hologram.load_bundle({str(path)!r}, trust_native=True).softmax(np.ones(10, np.float32))
        assert abs(float(y.sum()) - 1) < 1e-5
        print(json.dumps([heavy, sorted(m for m in sys.modules if m in {COMPILER!r})]))
    """
    out = tmp_path / "t.json"
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOLOGRAM_TRACE": str(out), "HOLOGRAM_CACHE_DIR": str(tmp_path / "c")})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [[], []]
    xs = check_events(json.loads(out.read_text())["traceEvents"])
    assert {"load bundle", "launch softmax"} <= names(xs)


@settings(max_examples=15)
@given(case=generated_kernels())
def test_traced_calls_compute_what_untraced_ones_do(case):
    """Generated kernels of every family, traced on every backend that declares the whole
    ISA: the oracle's answer (check_case), and a well-formed trace with one launch span per
    call, naming the kernel. `HOLOGRAM_TRACE=... hologram diff-test` soaks the same at
    scale, on partial backends (wgpu) too, where it reports what they do not declare."""
    with trace.recording() as events:
        for backend in COMPLETE:
            check_case(case, backend)
    xs = check_events(events)
    if case.error is None:
        launches = [e for e in xs if e["cat"] == "launch"]
        assert len(launches) == len(COMPLETE) and all(e["args"]["kernel"] for e in launches)
