"""What every trace hologram writes must be (docs/tracing.md): Chrome Trace Event JSON
that Perfetto and chrome://tracing open. Shared by the tracing tests of tests/ and of
the backends."""

from __future__ import annotations

from typing import Any

X_KEYS = ("name", "ph", "ts", "dur", "pid", "tid")


def check_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Check the structure of a trace's events; return its X events.

    - every event is an `X` (complete) or `M` (metadata) event;
    - every X event has name, ph, ts, dur, pid and tid; ts and dur are numbers >= 0;
    - per thread, the X events nest properly: two spans of one thread are disjoint or
      one holds the other (compared in whole nanoseconds, as Perfetto reads them);
    - M events name the process and every thread an X event is on."""
    xs = []
    for e in events:
        assert e.get("ph") in ("X", "M"), e
        if e["ph"] == "X":
            for key in X_KEYS:
                assert key in e, (key, e)
            assert isinstance(e["name"], str) and e["name"]
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
            xs.append(e)
    meta = [e for e in events if e["ph"] == "M"]
    pids = {e["pid"] for e in events}
    assert len(pids) == 1
    assert any(e["name"] == "process_name" and e["args"]["name"] for e in meta)
    named = {e["tid"] for e in meta if e["name"] == "thread_name" and e["args"]["name"]}
    assert {e["tid"] for e in xs} <= named, "every thread with spans is named"
    by_thread: dict[int, list[tuple[int, int, str]]] = {}
    for e in xs:
        t0 = round(e["ts"] * 1000)
        by_thread.setdefault(e["tid"], []).append((t0, t0 + round(e["dur"] * 1000), e["name"]))
    for tid, spans in by_thread.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack: list[tuple[int, int, str]] = []
        for span in spans:
            while stack and stack[-1][1] <= span[0]:
                stack.pop()
            if stack:
                assert span[1] <= stack[-1][1], f"thread {tid}: {span} overlaps {stack[-1]} without nesting in it"
            stack.append(span)
    return xs


def names(xs: list[dict[str, Any]]) -> set[str]:
    return {e["name"] for e in xs}


def named(xs: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    return [e for e in xs if e["name"].startswith(prefix)]
