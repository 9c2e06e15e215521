"""A kernel call while a trace records (hologram.core.trace, docs/tracing.md).

`Kernel` swaps these in for its `__call__` and `map` when a recording starts and back
when it stops, so an untraced call runs exactly the code it runs without tracing. A
traced call is a `call <kernel>` span (which path it took: the fast one, the full one,
`map`); inside it the launch is a `launch <kernel>` span whose args say what ran: the
kernel, its program's sha256, the backend, the shape symbols, and the bytes the launch
reads and writes by the cost model (hologram.passes.work, evaluated at those symbols).
The fast path keeps its backend launcher (on cpu_llvm, the native entry point): the
traced variant of its generated function only wraps the launcher's call in the span.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from hologram.call.fastcall import MISS, Hit, make_fast, program_order
from hologram.core import trace
from hologram.core.lru import LRUCache
from hologram.isa.encoding import program_hash
from hologram.isa.program import Program

# program sha256 -> (bytes read, bytes written, exact) as formulas in the shape symbols
_TRAFFIC: LRUCache[str, tuple[Any, Any, bool]] = LRUCache(64)


def launch_args(name: str, program: Program, backend: str, symbols: Mapping[str, int]) -> dict[str, Any]:
    """What a launch span says of the launch: the kernel, the program's sha256, the
    backend, the symbols, and the bytes it reads and writes (None where a count depends
    on the data; `bytes_exact` False where the counts are upper bounds)."""
    key = program_hash(program)
    traffic = _TRAFFIC.get(key)
    if traffic is None:
        from hologram.passes.work import Formula, stage_traffic  # the cost model, for traced launches only

        with trace.span("cost model", "trace", program=key):  # the tracer's own time: `profile` leaves it out
            read, written, exact = Formula(), Formula(), True
            for stage in program.stages:
                r, w, e = stage_traffic(stage, program)
                read, written, exact = read + r, written + w, exact and e
        traffic = (read, written, exact)
        _TRAFFIC.put(key, traffic)
    values = {k: int(v) for k, v in symbols.items()}
    return {"kernel": name, "program": key, "backend": backend, "symbols": values,
            "bytes_read": _evaluate(traffic[0], values), "bytes_written": _evaluate(traffic[1], values),
            "bytes_exact": traffic[2]}


def _evaluate(formula: Any, symbols: Mapping[str, int]) -> int | None:
    try:
        return formula.evaluate(symbols)
    except KeyError:  # a data-dependent trip count: no count before the launch has run
        return None


def traced_launch(name: str, program: Program, backend: Any, executable: Any, buffers: Mapping[str, Any],
                  scalars: Mapping[str, Any], symbols: Mapping[str, int]) -> None:
    """`backend.launch(...)` as a `launch <name>` span (the full path and `map`)."""
    t0 = trace.now()
    try:
        backend.launch(executable, buffers, scalars, symbols)
    finally:
        trace.complete(f"launch {name}", "launch", t0, trace.now(), launch_args(name, program, backend.name, symbols))


def _fast_launch(kernel: Any) -> Callable[..., Any]:
    """`launch(hit, *arguments)`: the hit's run, as a span when it launches (a run that
    declines has launched nothing: the full path then launches, and says so)."""
    name, program, backend = kernel.name, kernel.program, kernel.backend.name
    seen: dict[Hit, dict[str, Any]] = {}  # per remembered shape, its launch's args

    def launch(h: Hit, *args: Any) -> Any:
        t0 = trace.now()
        declined = h.run(*args)
        if declined is None:
            info = seen.get(h)
            if info is None:
                if len(seen) >= 16:
                    seen.clear()
                info = seen[h] = launch_args(name, program, backend, h.symbols)
            trace.complete(f"launch {name}", "launch", t0, trace.now(), info)
        return declined
    return launch


def _traced_fast(kernel: Any) -> Callable[..., Any] | None:
    """The kernel's fast path with its launch traced: the same generated function,
    reading the same remembered calls (`kernel._hit`), calling `_fast_launch`."""
    c = kernel._c
    order = program_order(c.signature, c.program)
    if order is None:
        return None
    backend, _ = kernel._prepare()
    with trace.span("traced fast path", "trace", kernel=kernel.name):
        return make_fast(c.signature, order, c.result, backend.allocate, kernel._hit, launch=_fast_launch(kernel))


def traced_call(plain: Callable[..., Any]) -> Callable[..., Any]:
    """`Kernel.__call__` while a trace records: the call as a span around the fast path
    (its launch traced) or the full path."""
    def __call__(self: Any, /, *args: Any, out: Any = None, cast: bool = False, **kwargs: Any) -> Any:
        rec = trace.recorder
        if rec is None:  # the recording stopped on another thread
            return plain(self, *args, out=out, cast=cast, **kwargs)
        t0 = trace.now()
        path = "full"
        try:
            fast = self._traced
            if fast is None and self._fast is not None:
                fast = self._traced = _traced_fast(self)
            if fast is not None:
                result = fast(args, kwargs, out, cast)
                if result is not MISS:
                    path = "fast"
                    return result
            return self._call(args, out, cast, kwargs)
        finally:
            rec.add(f"call {self.name}", "call", t0, trace.now(), {"kernel": self.name, "path": path})
    __call__.__doc__ = plain.__doc__
    return __call__


def traced_map(plain: Callable[..., Any]) -> Callable[..., Any]:
    """`Kernel.map` while a trace records: the call as a span."""
    def map(self: Any, /, *args: Any, out: Any = None, cast: bool = False, **kwargs: Any) -> Any:  # noqa: A001
        with trace.span(f"call {self.name}", "call", kernel=self.name, path="map"):
            return plain(self, *args, out=out, cast=cast, **kwargs)
    map.__doc__ = plain.__doc__
    return map
