"""Tracing: timed spans across the compiler and the runtime, written as Chrome Trace
Event JSON (Perfetto, chrome://tracing). docs/tracing.md is the guide.

    HOLOGRAM_TRACE=trace.json python script.py     # the whole process, written at exit
    with hologram.trace.recording("trace.json"):   # or a part of it
        k(x)
    hologram.trace.start(); ...; events = hologram.trace.stop()   # in memory

A span is one complete (`X`) event: a name, a category, the thread, a start and an end
on the monotonic clock (`now`, nanoseconds; native code reads the same clock). Spans
made with `span` nest on their thread by construction; `complete` records one measured
elsewhere (a launch, a chunk a native worker ran). The file has the events in
microseconds since the recording started, and `M` events naming the process and every
thread.

Off, nothing is recorded and nothing is paid on the launch path: `recorder` is None,
the compiler's `span` returns a shared no-op context, and the runtime swaps its traced
call path in only while a recording runs (`on_switch`). This module is imported by
everything that records, so it imports nothing but the standard library's basics.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable, Iterator

__all__ = ["start", "stop", "flush", "clear", "events", "recording", "span", "complete", "cached", "active", "now",
           "MAX_EVENTS"]


def _clock() -> Callable[[], int]:
    """The clock of every span, in ns: CLOCK_MONOTONIC where there is one (native code
    times the thread pool's chunks with it), which is what `time.monotonic_ns` reads on
    Linux."""
    if time.get_clock_info("monotonic").implementation == "clock_gettime(CLOCK_MONOTONIC)":
        return time.monotonic_ns
    if hasattr(time, "clock_gettime_ns") and hasattr(time, "CLOCK_MONOTONIC"):
        import functools

        return functools.partial(time.clock_gettime_ns, time.CLOCK_MONOTONIC)
    return time.monotonic_ns


now = _clock()
MAX_EVENTS = 1_000_000  # spans kept per recording; later ones are counted as dropped (a bounded memory)
ENV = "HOLOGRAM_TRACE"  # where a process traced from start writes
_OWNER = "HOLOGRAM_TRACE_PID"  # the process that started tracing from ENV (its children write beside it)

Event = tuple[str, str, int, int, int, Any]  # name, category, start ns, end ns, thread ident, args


class Recorder:
    """One recording: the spans so far and the threads they ran on."""

    __slots__ = ("path", "origin", "spans", "threads", "dropped")

    def __init__(self, path: str | None):
        self.path = path
        self.origin = now()
        self.spans: list[Event] = []
        self.threads: dict[int, tuple[int, str]] = {}  # ident -> (OS thread id, name)
        self.dropped = 0

    def add(self, name: str, cat: str, t0: int, t1: int, args: Any = None, ident: int | None = None) -> None:
        if ident is None:
            ident = threading.get_ident()
            if ident not in self.threads:
                t = threading.current_thread()
                self.threads[ident] = (t.native_id or ident, t.name)
        if len(self.spans) < MAX_EVENTS:
            self.spans.append((name, cat, t0, t1, ident, args))  # list.append is atomic under the GIL
        else:
            self.dropped += 1


recorder: Recorder | None = None  # the recording in progress; None: tracing is off (read it, never import it)
_switches: list[Callable[[bool], None]] = []
_lock = threading.Lock()
_exit_hook = False


def active() -> bool:
    return recorder is not None


def on_switch(fn: Callable[[bool], None]) -> None:
    """Call `fn(True)` whenever a recording starts and `fn(False)` when it stops (now,
    if one is running): how the runtime swaps its traced paths in and out."""
    _switches.append(fn)
    if recorder is not None:
        fn(True)


class _Span:
    __slots__ = ("rec", "name", "cat", "args", "t0")

    def __init__(self, rec: Recorder, name: str, cat: str, args: dict):
        self.rec, self.name, self.cat, self.args = rec, name, cat, args

    def __enter__(self) -> dict:
        self.t0 = now()
        return self.args  # the body may add to the span's args (a cache verdict, a size)

    def __exit__(self, kind: Any, value: Any, tb: Any) -> None:
        if kind is not None:
            self.args["error"] = kind.__name__
        self.rec.add(self.name, self.cat, self.t0, now(), self.args or None)


class _NoSpan:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


_NO_SPAN = _NoSpan()


def span(name: str, cat: str = "user", **args: Any) -> Any:
    """A context manager timing its body as one span (a no-op when tracing is off). It
    yields the span's args, a dict the body may add to (None when off)."""
    rec = recorder
    return _NO_SPAN if rec is None else _Span(rec, name, cat, args)


def cached(info: dict | None, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)`, a `functools.lru_cache` function, noting in a span's args `info` (if
    any) whether its cache held the answer: `cache` is `hit` or `miss`."""
    if info is None:
        return fn(*args)
    before = fn.cache_info().misses
    try:
        return fn(*args)
    finally:
        info["cache"] = "hit" if fn.cache_info().misses == before else "miss"


def complete(name: str, cat: str, t0: int, t1: int, args: Any = None, thread: int | None = None) -> None:
    """Record a span measured elsewhere (`t0`, `t1` from `now`), on the calling thread or
    on the thread whose `threading.get_ident()` is `thread`."""
    rec = recorder
    if rec is not None:
        rec.add(name, cat, t0, t1, args, thread)


# ------------------------------------------------------------------ recordings
def start(path: str | os.PathLike | None = None) -> None:
    """Start recording; `stop()` (or `flush()`, or the process's exit) writes the spans
    to `path` when one is given. One recording at a time."""
    global recorder, _exit_hook
    target = None if path is None else os.path.abspath(os.fspath(path))
    if target is not None and not os.path.isdir(os.path.dirname(target)):
        from hologram.core.errors import HologramError

        raise HologramError(f"cannot trace to {os.fspath(path)}: the folder {os.path.dirname(target)} does not exist")
    with _lock:
        if recorder is not None:
            from hologram.core.errors import HologramError

            where = recorder.path or "memory"
            raise HologramError(f"a trace is already being recorded (to {where})",
                                hint="hologram.trace.stop() it first (HOLOGRAM_TRACE records the whole process)")
        recorder = Recorder(target)
        if not _exit_hook:
            import atexit

            atexit.register(_at_exit)
            if hasattr(os, "register_at_fork"):
                os.register_at_fork(after_in_child=_after_fork)
            _exit_hook = True
    for fn in _switches:
        fn(True)


def stop() -> list[dict]:
    """Stop recording; write the file if the recording has a path; return the events."""
    global recorder
    with _lock:
        rec, recorder = recorder, None
    if rec is None:
        return []
    for fn in _switches:
        fn(False)
    out = _chrome_events(rec)
    if rec.path is not None:
        _write(rec, out)
    return out


def flush() -> str | None:
    """Write what the recording holds so far to its file (it keeps recording); the path."""
    rec = recorder
    if rec is None or rec.path is None:
        return None
    _write(rec, _chrome_events(rec))
    return rec.path


def clear() -> None:
    """Forget the spans recorded so far (the recording goes on)."""
    rec = recorder
    if rec is not None:
        rec.spans.clear()
        rec.dropped = 0


def events() -> list[dict]:
    """The recording's events so far, as the file would hold them ([] when off)."""
    rec = recorder
    return [] if rec is None else _chrome_events(rec)


class recording:  # noqa: N801 - used as a function: `with hologram.trace.recording(path) as events:`
    """Record the body; at its end the trace is written to `path` (if given) and the
    list the `with` statement bound is filled with its events."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = path
        self.events: list[dict] = []

    def __enter__(self) -> list[dict]:
        start(self.path)
        return self.events

    def __exit__(self, *exc: Any) -> None:
        self.events[:] = stop()


def start_from_environment() -> None:
    """Trace the whole process to `$HOLOGRAM_TRACE` (`import hologram` calls this when it
    is set). `{pid}` in it becomes the process id; a child process that inherits the
    variable without `{pid}` writes `NAME.<pid>.json` beside the parent's file. A path
    that cannot be written is a warning, never an import error."""
    value = os.environ.get(ENV, "").strip()
    if not value or recorder is not None:
        return
    pid = str(os.getpid())
    owner = os.environ.setdefault(_OWNER, pid)
    path = _per_process(value, owner != pid)
    try:
        start(path)
    except Exception as exc:  # noqa: BLE001 - a bad variable must not break `import hologram`
        import warnings

        warnings.warn(f"hologram: {ENV}={value!r} is ignored: {exc}", RuntimeWarning, stacklevel=3)


def _per_process(path: str, child: bool) -> str:
    if "{pid}" in path:
        return path.replace("{pid}", str(os.getpid()))
    if not child:
        return path
    stem, ext = os.path.splitext(path)
    return f"{stem}.{os.getpid()}{ext or '.json'}"


def _after_fork() -> None:
    """A forked child starts its own recording: none of the parent's spans, its own file."""
    global recorder
    rec = recorder
    if rec is not None:
        recorder = Recorder(None if rec.path is None else _per_process(rec.path, True))


def _at_exit() -> None:
    rec = recorder
    if rec is not None and rec.path is not None:
        try:
            _write(rec, _chrome_events(rec))
        except Exception as exc:  # noqa: BLE001 - the process is ending: say so, do not raise
            print(f"hologram: warning: the trace was not written: {exc}", file=sys.stderr)


# ------------------------------------------------------------------ the file
def _threads(rec: Recorder) -> dict[int, tuple[int, str]]:
    """Every thread the spans name: as recorded, else a live thread (a native worker)."""
    found = dict(rec.threads)
    missing = {s[4] for s in rec.spans} - found.keys()
    if missing:
        for t in threading.enumerate():
            if t.ident in missing:
                found[t.ident] = (t.native_id or t.ident, t.name)
        for ident in missing - found.keys():
            found[ident] = (ident & 0x7FFFFFFF, f"thread {ident:#x}")
    return found


def _chrome_events(rec: Recorder) -> list[dict]:
    """M events naming the process and threads, then the X events by thread and time
    (µs since the recording started, to the nanosecond)."""
    pid = os.getpid()
    threads = _threads(rec)
    main = threading.main_thread().ident
    command = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    out: list[dict] = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                        "args": {"name": f"hologram ({command})"}}]
    ordered = sorted(threads.items(), key=lambda kv: (kv[0] != main, kv[1][1]))  # the main thread first
    for k, (ident, (tid, name)) in enumerate(ordered):
        out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": k}})
    origin = rec.origin
    spans = sorted(list(rec.spans), key=lambda s: (threads[s[4]][0], s[2], -s[3]))
    for name, cat, t0, t1, ident, args in spans:
        e = {"name": name, "cat": cat, "ph": "X", "ts": round((t0 - origin) / 1000, 3),
             "dur": round((t1 - t0) / 1000, 3), "pid": pid, "tid": threads[ident][0]}
        if args:
            e["args"] = args
        out.append(e)
    return out


def _write(rec: Recorder, chrome: list[dict]) -> None:
    import json

    meta = {"hologram_trace": 1, "dropped_spans": rec.dropped}
    text = json.dumps({"traceEvents": chrome, "displayTimeUnit": "ms", "otherData": meta},
                      default=str, separators=(",", ":"))
    tmp = f"{rec.path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, rec.path)  # a reader never sees half a file
    except OSError as exc:
        from hologram.core.errors import HologramError

        raise HologramError(f"cannot write the trace to {rec.path}: {exc.strerror or exc}") from None


def iter_spans(chrome: list[dict]) -> Iterator[dict]:
    """The X events of `chrome` (a trace's `traceEvents`)."""
    return (e for e in chrome if e.get("ph") == "X")
