"""`hologram profile` (cli/main.py): where a kernel's time goes, from the spans a trace records.

`record` traces compiling a kernel, preparing it on its backend and calling it on
generated inputs (as `hologram run` makes them) a few times into preallocated outputs;
`summarize` and `render` make two tables of those spans: the
compile phases (translate, parse, analyze, each pass, lower, verify, the backend's
prepare: a cache hit, or codegen, LLVM's optimizer and emission, linking) and the launch
stages (the call's own Python, the launch, each stage, the chunks of the calling
thread), each with its self time (its span minus the spans inside it) and its share,
then the worker threads' chunks, which run beside the calling thread.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Callable, Iterable, Mapping

import attrs

from hologram.core import trace
from hologram.core.errors import ArgumentError

COMPILE = ("compile", "prepare", "bundle")  # span categories of the first table; the rest are launches
OWN = ("trace", "profile")  # the tracer's and this command's own spans: in no table, nor in their parents' times


@attrs.frozen
class Row:
    label: str
    count: int
    self_ns: int


@attrs.frozen
class Profile:
    """The spans of one profile run, summed by row: `compile` and `launch` on the calling
    thread (self times), `workers` the chunks other threads ran (busy time per thread)."""

    compile: tuple[Row, ...]
    launch: tuple[Row, ...]
    workers: tuple[Row, ...]
    stage_ns: int  # the calling thread's time inside stage spans, what the workers ran beside


def _label(e: Mapping[str, Any]) -> str:
    args = e.get("args") or {}
    if e.get("cat") == "call":
        return f"{e['name']} ({args.get('path', '?')} path)"
    if e.get("cat") == "prepare" and "cache" in args:
        return f"{e['name']} (cache: {args['cache']})"
    if e.get("cat") == "compile" and "cache" in args:
        return f"{e['name']} (cache: {args['cache']})"
    return e["name"]


def self_times(events: Iterable[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], int]]:
    """Each X event with its self time in ns: its duration minus its children's (the
    spans of its thread that start and end inside it)."""
    by_thread: dict[Any, list[tuple[int, int, Mapping[str, Any]]]] = {}
    for e in events:
        if e.get("ph") == "X":
            t0 = round(e["ts"] * 1000)
            by_thread.setdefault(e["tid"], []).append((t0, t0 + round(e["dur"] * 1000), e))
    out = []
    for spans in by_thread.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack: list[list] = []  # [end, event, children's ns]
        done = []
        for t0, t1, e in spans:
            while stack and stack[-1][0] <= t0:
                done.append(stack.pop())
            if stack:
                stack[-1][2] += t1 - t0
            stack.append([t1, e, 0, t1 - t0])
        done += stack
        out += [(e, dur - inner) for _, e, inner, dur in done]
    return out


def summarize(events: list[Mapping[str, Any]], caller: int) -> Profile:
    """The rows of the tables: spans of thread `caller` (the OS thread id) by label, in
    order of first appearance; chunks of other threads by thread."""
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    rows: dict[str, dict[str, list[int]]] = {"compile": {}, "launch": {}, "workers": {}}
    stage_ns = 0
    timed = sorted(self_times(events), key=lambda p: p[0]["ts"])
    for e, own in timed:
        if e.get("cat") in OWN:
            continue
        if e["tid"] != caller:
            if e.get("cat") == "chunk":
                r = rows["workers"].setdefault(names.get(e["tid"], str(e["tid"])), [0, 0])
                r[0] += 1
                r[1] += round(e["dur"] * 1000)
            continue
        if e.get("cat") == "stage":
            stage_ns += round(e["dur"] * 1000)
        section = "compile" if e.get("cat") in COMPILE else "launch"
        r = rows[section].setdefault(_label(e), [0, 0])
        r[0] += 1
        r[1] += own
    made = {k: tuple(Row(label, n, ns) for label, (n, ns) in v.items()) for k, v in rows.items()}
    return Profile(made["compile"], made["launch"], made["workers"], stage_ns)


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.3f}"


def render(profile: Profile, calls: int, title: str) -> list[Any]:
    """The tables, as rich renderables."""
    from rich.table import Table
    from rich.text import Text

    out: list[Any] = [Text(title)]
    total = sum(r.self_ns for r in profile.compile)
    t = Table(title=f"compile and prepare: {_ms(total)} ms", title_justify="left")
    for col, just in (("phase", "left"), ("spans", "right"), ("ms", "right"), ("share", "right")):
        t.add_column(col, justify=just)
    for r in profile.compile:
        t.add_row(Text(r.label), str(r.count), _ms(r.self_ns), f"{100 * r.self_ns / total:.1f}%" if total else "-")
    out.append(t)
    total = sum(r.self_ns for r in profile.launch)
    per = f" ({total / max(calls, 1) / 1000:.2f} µs per call)" if calls else ""
    t = Table(title=f"launches: {calls} calls, {_ms(total)} ms{per}", title_justify="left")
    for col, just in (("stage", "left"), ("spans", "right"), ("ms", "right"), ("µs per span", "right"),
                      ("share", "right")):
        t.add_column(col, justify=just)
    for r in profile.launch:
        t.add_row(Text(r.label), str(r.count), _ms(r.self_ns), f"{r.self_ns / r.count / 1000:.2f}",
                  f"{100 * r.self_ns / total:.1f}%" if total else "-")
    out.append(t)
    if profile.workers:
        t = Table(title="worker threads (chunks run beside the calling thread's stages)", title_justify="left")
        for col, just in (("thread", "left"), ("chunks", "right"), ("busy ms", "right"),
                          ("of the stages' time", "right")):
            t.add_column(col, justify=just)
        for r in profile.workers:
            share = f"{100 * r.self_ns / profile.stage_ns:.1f}%" if profile.stage_ns else "-"
            t.add_row(Text(r.label), str(r.count), _ms(r.self_ns), share)
        out.append(t)
    return out


# ------------------------------------------------------------------------- recording
@attrs.frozen
class Run:
    kernel: Any
    symbols: dict[str, int]
    events: list[dict]


def record(compile: Callable[[], Any], inputs: Callable[[Any], tuple[dict[str, Any], dict[str, int]]], calls: int,
           cast: bool, path: str | None = None, cold: bool = False) -> Run:
    """Trace `compile()` (the kernel), `inputs(kernel)` (its arguments and symbols) and
    `calls` calls, the first allocating the outputs, the others writing into them. With
    `cold`, the backend's disk cache is a temporary folder, so native code is compiled
    afresh. When HOLOGRAM_TRACE already records the process, the spans are its (and
    stay in it); else the trace is this run's, written to `path` if given."""
    if calls < 1:
        raise ArgumentError(f"--calls must be at least 1, got {calls}")
    saved = os.environ.get("HOLOGRAM_CACHE_DIR")
    temporary = tempfile.TemporaryDirectory(prefix="hologram-profile-") if cold else None
    if temporary is not None:
        os.environ["HOLOGRAM_CACHE_DIR"] = temporary.name  # read by the backend at each prepare
    mine = not trace.active()
    if mine:
        trace.start(path)
    origin = trace.now()
    try:
        kernel = compile()
        with trace.span("generate inputs", "profile"):
            args, symbols = inputs(kernel)
        result = kernel(**args, cast=cast)
        outs = tuple(result) if len(kernel.signature.outputs) > 1 else (result,)
        for _ in range(calls - 1):
            kernel(**args, cast=cast, out=outs)
    finally:
        events = trace.stop() if mine else _since(trace.events(), origin)
        if temporary is not None:
            if saved is None:
                os.environ.pop("HOLOGRAM_CACHE_DIR", None)
            else:
                os.environ["HOLOGRAM_CACHE_DIR"] = saved
            temporary.cleanup()
    return Run(kernel, symbols, events)


def _since(events: list[dict], origin: int) -> list[dict]:
    """The events of a recording that started before `origin` (a `trace.now()`) from then on."""
    rec = trace.recorder
    start = (origin - rec.origin) / 1000 if rec is not None else 0
    return [e for e in events if e.get("ph") != "X" or e["ts"] >= start]


def caller_thread() -> int:
    """The OS id of this thread, as the trace names it."""
    import threading

    return threading.get_native_id()
