"""`hologram profile` (hologram/cli/profile.py): the tables of where a kernel's time went,
built from the spans of a trace, and the trace it can write."""

from __future__ import annotations

import json

import pytest

import hologram
from hologram.cli.profile import self_times, summarize
from hologram.core import trace

from repo_paths import ROOT
from trace_helpers import check_events, named


@pytest.fixture(autouse=True)
def fresh(fresh_plugins, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # rich wraps tables to the terminal width
    if trace.active():
        trace.stop()


@pytest.mark.parametrize("backend", hologram.list_backends())
def test_profile_prints_compile_phases_and_launch_stages(run_cli, backend, tmp_path, monkeypatch):
    # LLVM's phases run here, not in the compile worker this process may have reached
    monkeypatch.setenv("HOLOGRAM_COMPILES_IN_PROCESS", str(1 << 30))
    uncovered = hologram.get_backend(backend).capabilities.uncovered(
        hologram.compile_file(ROOT / "kernels/softmax.toml").program)
    if uncovered is not None:  # a partial backend (wgpu: no transcendentals) is described, not failing
        pytest.skip(f"{backend} does not declare what softmax needs: {uncovered}")
    hologram.clear_cache()  # so the document is compiled here, phase by phase
    out_trace = tmp_path / "p.json"
    code, out, err = run_cli("profile", "kernels/softmax.toml", "--bind", "n=3000", "--calls", "4",
                             "--backend", backend, "--trace", str(out_trace), "--cold")
    assert code == 0, err
    assert out.startswith(f"softmax(x: f32[n]) -> y: f32[n]  [backend {backend}, n = 3000, 4 calls, seed 0]")
    for row in ("compile softmax.toml (cache: miss)", "translate", "parse", "analyze", "ir pass fold", "lower",
                "isa pass regalloc", "verify", f"{backend} prepare (cache: miss)", "call softmax (full path)",
                "call softmax (fast path)", "launch softmax", "stage "):
        assert row in out, row
    if backend == "cpu_llvm":
        assert "llvm optimize" in out and "llvm emit" in out and "codegen" in out
    assert "trace written to" in out
    xs = check_events(json.loads(out_trace.read_text())["traceEvents"])
    assert len(named(xs, "launch softmax")) == 4
    assert not trace.active()


def test_profile_errors_are_the_command_lines(run_cli):
    code, _, err = run_cli("profile", "kernels/softmax.toml", "--calls", "0")
    assert code == 2 and "--calls" in err
    code, _, err = run_cli("profile", "kernels/softmax.toml", "--bind", "m=3")
    assert code == 2 and "no shape symbol 'm'" in err
    code, _, err = run_cli("profile", "kernels/softmax.toml", "--input", "x=[1, 2]")
    assert code == 2 and "needs a .npy file" in err
    assert not trace.active()


def test_profile_inside_a_traced_process_keeps_the_recording(run_cli, tmp_path):
    """HOLOGRAM_TRACE records the whole process: `profile` tabulates its own slice of it
    and leaves the recording running."""
    trace.start(tmp_path / "whole.json")
    try:
        with trace.span("before", "user"):
            pass
        code, out, err = run_cli("profile", "kernels/relu.toml", "--calls", "2")
        assert code == 0, err
        assert "before" not in out and "call relu (fast path)" in out
        assert trace.active()
    finally:
        events = trace.stop()
    assert named(events, "before") and named(events, "launch relu")


def test_self_times_subtract_what_runs_inside():
    def x(name, ts, dur, tid=1):
        return {"name": name, "ph": "X", "ts": ts, "dur": dur, "pid": 1, "tid": tid, "cat": name}
    events = [x("call", 0, 10), x("launch", 1, 8), x("stage", 2, 3), x("stage", 5, 3), x("chunk", 2, 6, tid=2),
              {"name": "thread_name", "ph": "M", "pid": 1, "tid": 2, "args": {"name": "worker"}}]
    own = {e["name"] + str(e["ts"]): ns for e, ns in self_times(events)}
    assert own == {"call0": 2000, "launch1": 2000, "stage2": 3000, "stage5": 3000, "chunk2": 6000}
    p = summarize(events, caller=1)
    assert [(r.label, r.count, r.self_ns) for r in p.launch] == [("call (? path)", 1, 2000), ("launch", 1, 2000),
                                                                 ("stage", 2, 6000)]
    assert [(r.label, r.count, r.self_ns) for r in p.workers] == [("worker", 1, 6000)]
    assert p.stage_ns == 6000
