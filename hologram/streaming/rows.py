"""`hologram.stream` along a shape symbol: a kernel's plan (hologram.streaming.plan)
run step by step, pass kernels over chunks of rows, small kernels in between, the
reductions' states carried across chunks (hologram.streaming.reduce)."""

from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np

from hologram.call.args import bind_symbols, check_array, check_reductions, complete_symbols, concrete_shape, convert_scalar
from hologram.call.kernel import Kernel
from hologram.call.loops import Core
from hologram.compiler.signature import Param, Signature
from hologram.core.dims import derive, derived_closure, is_derived
from hologram.core.errors import ArgumentError, StreamError
from hologram.streaming.args import Arg, chunk_array, chunk_rows, least_pool, refuse_overlaps, slot_limit, temp_bytes
from hologram.streaming.io import IterSource, Pool, Sink, Source, pool_size, run_chunks, sink_for, source_for
from hologram.streaming.mapped import InPlace, in_place_reads


def stream_rows(kernel: Kernel, given: dict[str, Arg], out: Any, budget: int, cast: bool, along: str | None) -> Any:
    return _Rows(kernel, given, out, budget, cast, along).run()


# ------------------------------------------------------------------------- the plans
# Each compiled kernel's plans, by (symbol, backend): the plan and its steps' kernels.
_PLANS: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


def plan_of(kernel: Kernel, symbol: str) -> tuple[Any, tuple[Kernel, ...]]:
    """The plan for streaming `kernel` along `symbol` and a Kernel per step (cached per
    compiled kernel; a step that is the kernel itself is the kernel)."""
    cache = _PLANS.setdefault(kernel._c, {})
    key = (symbol, kernel._backend_name)
    found = cache.get(key)
    if found is None:
        found = cache[key] = plan_kernels(kernel, source_ir(kernel), symbol)
    return found


def plan_kernels(kernel: Kernel, kir: Any, symbol: str) -> tuple[Any, tuple[Kernel, ...]]:
    """The plan for streaming `kir` (the kernel's IR, or that IR rewritten to compute the
    same: hologram.dask reorders its dimensions) along `symbol`, and its steps compiled
    as the kernel is, for its backend (uncached; a direct step of `kir` unchanged from
    the kernel's own IR is the kernel)."""
    from hologram.streaming.kernels import plan

    p = plan(kir, symbol)
    pipeline = _pipeline(kernel._c)
    own = p.direct and kir is kernel._c.source_ir
    return p, tuple(kernel if own else _compile_step(s.kir, pipeline, kernel._backend_name) for s in p.steps)


def source_ir(kernel: Kernel):
    """The kernel's IR as the front end built it: kept when compiled from a document,
    decoded from its encoding for a kernel from a bundle or a pickle (never its source
    translated again: the front end is not needed to stream)."""
    c = kernel._c
    kir = c.source_ir
    if kir is None:
        raise StreamError(f"stream({c.signature.name}): streaming along a shape symbol reads the kernel's IR, and "
                          f"this kernel does not carry one",
                          hint="give inputs loop dimensions instead (stream over rows of items), which needs no IR")
    return kir


def _pipeline(c: Any) -> Any:
    if c.pipeline is not None:
        return c.pipeline
    from hologram.passes.api import PIPELINES
    from hologram.registry.pipelines import resolve

    return resolve(c.pipeline_name if c.pipeline_name in PIPELINES else None)


def _compile_step(kir: Any, pipeline: Any, backend: str | None) -> Kernel:
    from hologram.compiler.driver import compile_ir

    return Kernel(compile_ir(kir, pipeline), backend)


def stream_symbol(sig: Signature, along: str | None) -> str:
    """The shape symbol to stream along: `along`, else the first dimension of the first
    array input whose first dimension is a symbol."""
    if along is not None:
        if along not in sig.symbols:
            from hologram.core.errors import did_you_mean

            raise ArgumentError(f"stream({sig.name}): along={along!r} is not a shape symbol of the kernel"
                                f"{did_you_mean(str(along), sig.symbols)}",
                                hint=f"its symbols: {', '.join(sig.symbols) or 'none'}")
        return along
    for p in sig.inputs:
        first = p.shape[0] if p.kind == "array" and p.shape else None
        if first is not None and first.const == 0 and len(first.terms) == 1 and first.terms[0][1] == 1:
            return first.terms[0][0]
    raise StreamError(f"stream({sig.name}): no input's first dimension is a shape symbol to stream along",
                      hint="inputs with loop dimensions stream over them instead")


def symbol_value(symbol: str, symbols: dict[str, int]) -> int:
    """A shape symbol's value for the whole call (a derived one computed from its name)."""
    if not is_derived(symbol):
        return symbols[symbol]
    return derive(derived_closure([symbol]), symbols)[symbol]


class _Rows:
    """One call streamed along a shape symbol: the plan's steps in order."""

    def __init__(self, kernel: Kernel, given: dict[str, Arg], out: Any, budget: int, cast: bool, along: str | None):
        self.kernel, self.given, self.budget, self.cast = kernel, given, budget, cast
        self.c = kernel._c
        self.sig: Signature = self.c.signature
        self.name = self.sig.name
        self.symbol = stream_symbol(self.sig, along)
        self.plan, self.kernels = plan_of(kernel, self.symbol)
        self.sources: dict[str, Source] = {}
        self.sinks: dict[str, Sink] = {}
        self.fixed: dict[str, Any] = {}
        self.out = out
        self.small: dict[str, np.ndarray] = {}
        self._reads_in_place: list[InPlace | None] = []  # found at the first memmap (`_in_place`)
        try:
            self._inputs()
            self.symbols = self._bind()
            known = [s.rows for s in self.sources.values() if s.rows is not None]
            self.total: int | None = self.symbols[self.symbol] if known else None  # iterables must match arrays
            if self.total is not None:
                check_reductions(self.name, self.c.reductions, complete_symbols(self.c.program.symbols, self.symbols))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Give back the descriptors the sources and sinks hold."""
        for s in (*self.sources.values(), *self.sinks.values()):
            s.close()
        self.sources, self.sinks = {}, {}

    def where(self) -> str:
        return f"stream({self.name})"

    def _inputs(self) -> None:
        streamed = set(self.plan.streamed)
        for p in self.sig.inputs:
            a = self.given[p.name]
            if p.name in streamed:
                self.sources[p.name] = self._source(p, a)
            elif a.kind == "iter":
                raise ArgumentError(f"{self.where()}: argument {p.name!r} ({p.type}) has no row per element of "
                                    f"{self.symbol}, so it is read whole: pass an array, not chunks")
            elif p.kind == "scalar":
                self.fixed[p.name] = convert_scalar(self.name, p, a.value, self.cast)
            else:
                self.fixed[p.name] = check_array(self.name, p, a.value, self.cast)

    def _source(self, p: Param, a: Arg) -> Source:
        if a.kind == "iter":
            if a.first.ndim != len(p.shape):
                raise ArgumentError(f"{self.where()}: the chunks of {p.name!r} must have rank {len(p.shape)} "
                                    f"({p.type}), got shape {a.first.shape}")
            first = a.first

            def convert(chunk: Any, number: int) -> np.ndarray:
                return chunk_array(self.name, p, chunk, number, self.cast, first)

            return IterSource(p.name, self.name, a.value, a.iterator, first, convert)
        if a.kind == "value" and self.cast:
            return source_for(self.name, p.name, check_array(self.name, p, a.value, True))
        if a.kind != "array":
            raise ArgumentError(f"{self.where()}: argument {p.name!r} must be an array ({p.type}) or an iterable "
                                f"of arrays of rows, got {type(a.value).__name__}")
        x = a.value
        if x.ndim != len(p.shape):
            raise ArgumentError(f"{self.where()}: argument {p.name!r} must have rank {len(p.shape)} ({p.type}), "
                                f"got shape {x.shape}")
        if x.dtype != p.dtype.np or not x.flags.c_contiguous:
            problem = f"dtype {x.dtype}" if x.dtype != p.dtype.np else "a strided view"
            raise ArgumentError(f"{self.where()}: streamed argument {p.name!r} must be a C-contiguous array of "
                                f"{p.type}, got {problem}",
                                hint="stream never converts a streamed input whole (that would read it into memory); "
                                     "give an iterable of converted chunks: "
                                     f"(x[i:i + k].astype(np.{p.dtype.np.name}) for i in range(0, len(x), k))")
        return source_for(self.name, p.name, x, self._in_place())

    def _in_place(self) -> InPlace | None:
        """How memmaps are read in place by the steps' kernels (prepared now), or None."""
        if not self._reads_in_place:
            self._reads_in_place.append(in_place_reads(self.kernels, self.budget))
        return self._reads_in_place[0]

    def _bind(self) -> dict[str, int]:
        rows = {s.rows for s in self.sources.values() if s.rows is not None}
        lead = min(rows) if rows else 1
        shapes: dict[str, Any] = {}
        for p in self.sig.inputs:
            if p.name in self.sources:
                s = self.sources[p.name]
                shapes[p.name] = Core((s.rows if s.rows is not None else lead, *s.row_shape))
            elif p.kind == "array":
                shapes[p.name] = self.fixed[p.name]
        return bind_symbols(self.name, self.sig.inputs, shapes, self.sig.symbols)

    # ------------------------------------------------------------------ outputs
    def _outputs(self) -> dict[str, np.ndarray]:
        """The outputs given as out=, checked: the row outputs' sinks (in `self.sinks`)
        and the other outputs' arrays, returned."""
        sig, plan = self.sig, self.plan
        outs = self._given_outs() if isinstance(self.out, (tuple, list, np.ndarray, type(None))) else None
        if outs is None or len(outs) != len(sig.outputs):
            raise ArgumentError(f"{self.where()}: out= must hold {len(sig.outputs)} arrays or None "
                                f"({', '.join(sig.output_names)})")
        taken: list[tuple[str, np.ndarray]] = []
        for p, a in zip(sig.outputs, outs):
            rows = p.name in plan.row_outputs
            if a is None:
                if rows:
                    raise ArgumentError(f"{self.where()}: output {p.name!r} ({p.type}) has a row per row of the "
                                        "input: pass out= to say where it goes",
                                        hint="an np.memmap for data larger than memory, e.g. "
                                             "np.lib.format.open_memmap(path, mode='w+', dtype=..., shape=...)")
                continue
            if not isinstance(a, np.ndarray):
                raise ArgumentError(f"{self.where()}: out {p.name!r} must be a numpy array of {p.type}, got "
                                    f"{type(a).__name__}")
            bound = dict(self.symbols)
            if self.total is None and rows:  # rows still unknown: out= says how many there must be
                bound[self.symbol] = len(a) if a.ndim else 0
            want = concrete_shape(self.name, p, complete_symbols(self.c.program.symbols, bound))
            if a.dtype != p.dtype.np or a.shape != want or not a.flags.c_contiguous or not a.flags.writeable:
                raise ArgumentError(f"{self.where()}: out {p.name!r} must be a writeable C-contiguous array of "
                                    f"{p.dtype} ({p.dtype.np}) and shape {want}, got {a.dtype} {a.shape}"
                                    + ("" if a.flags.writeable else " (read-only)"))
            taken.append((p.name, a))
        refuse_overlaps(self.where(), [], [], taken)
        # small outputs are written after every pass, so they may overlap any input
        refuse_overlaps(self.where(), [(n, s.extent) for n, s in self.sources.items()],
                        [(n, a) for n, a in self.fixed.items() if isinstance(a, np.ndarray)],
                        [(n, a) for n, a in taken if n in plan.row_outputs])
        small = {}
        for name, a in taken:
            if name in plan.row_outputs:
                self.sinks[name] = sink_for(self.name, name, a)
            else:
                small[name] = a
        return small

    # ------------------------------------------------------------------ running
    def run(self) -> Any:
        pool: Pool | None = None
        try:
            small_out = self._outputs()
            sinks = self.sinks
            self._check_pool(sinks)
            for step, k in zip(self.plan.steps, self.kernels):
                if step.kind == "small":
                    self._small(step, k)
                    continue
                pool = self._pass(step, k, sinks, pool)
        finally:
            self.close()
        results = []
        for p, a in zip(self.sig.outputs, self._given_outs()):
            if p.name in sinks:
                results.append(a)
            elif p.name in small_out:
                np.copyto(small_out[p.name], self.small[p.name])
                results.append(a)
            else:
                results.append(self.small[p.name])
        if self.c.result is not None:
            return self.c.result(*results)
        return results[0] if results else None

    def _given_outs(self) -> tuple:
        outs = self.out
        if outs is None:
            return (None,) * len(self.sig.outputs)
        return (outs,) if isinstance(outs, np.ndarray) else tuple(outs)

    def _value(self, role: str, source: str, start: int) -> Any:
        if role in ("input", "scalar"):
            return self.fixed[source]
        if role == "small":
            v = self.small[source]
            return v[()] if v.ndim == 0 else v
        if role == "offset":
            return np.int64(start)
        if role == "symbol":
            if self.total is None and self.symbol in (source, *_bases(source)):
                raise StreamError(f"{self.where()}: the kernel uses the size {source} as a value before reading "
                                  "its input, and an iterable's size is unknown until then",
                                  hint="pass the input as an array (an np.memmap) instead of chunks")
            return np.int64(symbol_value(source, self.symbols))
        if role == "stream":  # a small step binding another symbol from a streamed input's shape
            s = self.sources[source]
            return np.empty((0, *s.row_shape), s.dtype)
        raise AssertionError(role)

    def _small(self, step: Any, k: Kernel) -> None:
        args = [self._value(role, src, 0) for _, role, src in step.params]
        result = k(*args)
        results = (result,) if len(step.outputs) == 1 else tuple(result)
        for (_, _, target), r in zip(step.outputs, results):
            self.small[target] = np.asarray(r)

    def _layout(self, step: Any, k: Kernel, all_sinks: dict[str, Sink]) -> tuple:
        """A pass's sources, sinks, their (name, dtype, row shape), its slot count and
        its temporaries' bytes for a number of rows."""
        sources = [self.sources[src] for _, role, src in step.params if role == "stream"]
        sinks = [all_sinks[t] for _, role, t in step.outputs if role == "row"]
        parts = [(s.name, s.dtype, s.row_shape) for s in (*sources, *sinks)]
        return sources, sinks, parts, 3 if sinks else 2, temp_bytes(k.program, self.symbols, self.symbol)

    def _check_pool(self, sinks: dict[str, Sink]) -> None:
        """Refuse a pool too small for one row of some pass before any pass runs (so no
        output is half written), naming the least pool that runs them all."""
        layouts = [self._layout(step, k, sinks)[2:] for step, k in zip(self.plan.steps, self.kernels)
                   if step.kind != "small"]
        worst = max(layouts, key=lambda lay: least_pool(lay[1], lay[0], lay[2]), default=None)
        if worst is not None and least_pool(worst[1], worst[0], worst[2]) > self.budget:
            chunk_rows(self.budget, worst[1], worst[0], worst[2], self.where())  # raises, with the hint

    def _pass(self, step: Any, k: Kernel, all_sinks: dict[str, Sink], pool: Pool | None) -> Pool:
        from hologram.streaming.reduce import CARRIES, reducer

        sources, sinks, parts, slots, temps = self._layout(step, k, all_sinks)
        constant = {name: self._value(role, src, 0) for name, role, src in step.params
                    if role not in ("stream", "offset", "carry")}
        partial_decls = {d.name: d for d in step.kir.outputs}
        shapes = {name: concrete_shape(self.name, Param(name, d.dtype, d.shape, "output"), self.symbols)
                  for name, role, _ in step.outputs if role == "partial" for d in [partial_decls[name]]}
        partials = {name: np.empty(shape, partial_decls[name].dtype.np) for name, shape in shapes.items()}
        reducers = []
        for red in step.reductions:
            scale = math.prod(d.evaluate(complete_symbols(self.c.program.symbols, self.symbols)) for d in red.scale)
            reducers.append((red, reducer(red, shapes[red.partials[0]], scale)))
        chunk = chunk_rows(self.budget, slots, parts, temps, self.where(), slot_limit((*sources, *sinks)))
        rows = chunk if self.total is None else max(min(chunk, self.total), 1)
        pooled = [(s.name, s.dtype, s.row_shape) for s in (*sources, *sinks) if s.pooled]
        need = pool_size(slots, rows, pooled)
        if pool is None or pool.nbytes < need:
            pool = Pool(max(need, pool.nbytes if pool else 0))
        order = [(name, role, src) for name, role, src in step.params]
        out_order = [(name, role, t) for name, role, t in step.outputs]

        carries = {red.target: r for red, r in reducers if red.kind in CARRIES}

        def compute(start: int, n: int, inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> None:
            args = [inputs[src] if role == "stream" else np.int64(start) if role == "offset"
                    else _item(carries[src].carry()) if role == "carry" else constant[name]
                    for name, role, src in order]
            k(*args, out=tuple(outputs[t] if role == "row" else partials[name] for name, role, t in out_order))
            for red, r in reducers:
                r.combine([partials[p] for p in red.partials], start)

        seen = run_chunks(sources, sinks, chunk, self.total, pool.slots(slots, rows, pooled), compute)
        if self.total is None:
            self._learn_total(seen, all_sinks)
        elif seen != self.total:
            names = ", ".join(s.name for s in sources)
            raise ArgumentError(f"{self.where()}: {names} gave {seen} rows in pass {step.index}, {self.total} before")
        for red, r in reducers:
            if not r.seen:  # no rows: the reductions without an identity are refused, as numpy refuses them
                check_reductions(self.name, self.c.reductions, complete_symbols(self.c.program.symbols, self.symbols))
            self.small.update(r.finalize())
        return pool

    def _learn_total(self, rows: int, sinks: dict[str, Sink]) -> None:
        """After the first pass over iterables: the number of rows, now known."""
        self.total = rows
        self.symbols[self.symbol] = rows
        for name, sink in sinks.items():
            if sink.rows != rows:
                raise ArgumentError(f"{self.where()}: the inputs had {rows} rows, but out {name!r} has {sink.rows}")
        check_reductions(self.name, self.c.reductions, complete_symbols(self.c.program.symbols, self.symbols))


def _item(a: np.ndarray) -> Any:
    """A 0-d array as the scalar a kernel's scalar parameter takes; any other as it is."""
    return a[()] if a.ndim == 0 else a


def _bases(symbol: str) -> set[str]:
    from hologram.core.types import Affine
    from hologram.streaming.plan import base_symbols

    return base_symbols(Affine.of(symbol))


