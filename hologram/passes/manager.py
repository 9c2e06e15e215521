"""The pass manager: the order passes run in, and running them.

It is given the passes (hologram.registry.pipelines picks them from the plugin registry
and builds the pipelines `opt=` and `passes=` name); it knows nothing of where they
came from. Ordering and grouping:

- IR passes run before ISA passes; within a level the order is the stable topological
  order of the `before`/`after` constraints, ties broken by registration order. A
  constraint naming a pass that is not in the pipeline is ignored; a cycle is a
  PluginError naming the passes on it.
- A `Pipeline` holds the ordered passes of each level; the named ones (O0, O1, O2,
  custom) are built by hologram.registry.pipelines.

A pipeline's result is cached by content, in a bounded LRU (`CACHE_SIZE` entries) keyed
by (the passes that ran, the input): the `KernelIR` value itself for IR passes (frozen
and structurally hashed), `program_hash(program)` for ISA passes. Passes are pure, so
equal inputs give equal outputs and each runs once per distinct input.
"""

from __future__ import annotations

from typing import Any, Sequence

import attrs

from hologram.core import trace
from hologram.core.errors import CompileError, HologramError, PluginError, VerifyError, did_you_mean
from hologram.core.lru import LRUCache
from hologram.ir import KernelIR
from hologram.isa.builder import compact_sites
from hologram.isa.encoding import program_hash
from hologram.isa.program import Program
from hologram.passes.api import LEVELS, Pass
from hologram.verify.verifier import verify

CACHE_SIZE = 512

__all__ = ["CACHE_SIZE", "Pipeline", "order", "clear_cache"]


# ------------------------------------------------------------------------- the cache
_CACHE: LRUCache[Any, Any] = LRUCache(CACHE_SIZE)


def clear_cache() -> None:
    """Forget every cached pipeline result."""
    _CACHE.clear()


# --------------------------------------------------------------------------- running
def _subject(value: Any) -> str:
    name = getattr(value, "name", None)
    return f"kernel {name!r}" if isinstance(name, str) else "the kernel"


def _apply(p: Pass, value: Any, expected: type) -> Any:
    """One pass on one value; anything wrong is a CompileError naming the pass and kernel."""
    try:
        with trace.span(f"{p.level} pass {p.name}", "compile"):
            out = p.run(value)
    except Exception as exc:
        detail = exc.render() if isinstance(exc, HologramError) else f"{type(exc).__name__}: {exc}"
        raise CompileError(f"{p.level} pass {p.name!r} failed on {_subject(value)}: {detail}") from exc
    if not isinstance(out, expected):
        raise CompileError(f"{p.level} pass {p.name!r} returned {type(out).__name__} for {_subject(value)}; "
                           f"expected {expected.__name__}")
    if _interface(out) != _interface(value):
        # callers bind arguments by the source's signature: a pass may not change it
        raise CompileError(f"{p.level} pass {p.name!r} changed the interface of {_subject(value)} "
                           "(its name, parameters, outputs or shape symbols)")
    return out


def _interface(value: KernelIR | Program) -> tuple:
    if isinstance(value, KernelIR):
        return value.name, value.params, value.outputs, value.symbols
    return value.name, value.params, value.symbols, value.isa_version


def _blame(passes: Sequence[Pass], program: Program, error: VerifyError) -> VerifyError:
    """The verifier rejected the pipeline's result: re-verify after each pass to find the
    first one whose output fails, and name it."""
    try:
        verify(program)
    except VerifyError:
        return error  # the lowering's own output is wrong: no pass to blame
    value = program
    for p in passes:
        value = p.run(value)  # passes are pure: this replays exactly what ran before
        try:
            verify(value)
        except VerifyError as exc:
            blamed = VerifyError(f"isa pass {p.name!r} broke {_subject(program)}: the verifier rejects its "
                                 f"output: {exc.message}", hint=exc.hint or
                                 "run without it (--passes, or opt='O0') and report the bug to the pass's author")
            for attr in ("rule", "stage", "index"):
                setattr(blamed, attr, getattr(exc, attr, None))
            return blamed
    return error


@attrs.frozen(cache_hash=True)  # a key of the runtime's caches, hashed on every compile
class Pipeline:
    """The passes one compilation runs: `ir` on the KernelIR, then (after the lowering)
    `isa` on the Program, each tuple already in run order."""

    name: str
    ir: tuple[Pass, ...] = ()
    isa: tuple[Pass, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """Every pass name, in run order."""
        return tuple(p.name for p in self.ir + self.isa)

    def find(self, name: str) -> Pass:
        """The pass `name` of this pipeline; PluginError (with a suggestion) if it is not in it."""
        for p in self.ir + self.isa:
            if p.name == name:
                return p
        hint = f"its passes: {', '.join(self.names)}" if self.names else f"pipeline {self.name} runs no pass"
        raise PluginError(f"pass {name!r} is not in pipeline {self.name}{did_you_mean(name, self.names)}",
                          hint=hint)

    def _upto(self, passes: tuple[Pass, ...], stop_after: str | None) -> tuple[Pass, ...]:
        if stop_after is None:
            return passes
        found = self.find(stop_after)
        # a pass of the other level leaves this level's passes whole
        return passes[:passes.index(found) + 1] if found in passes else passes

    def run_ir(self, kir: KernelIR, stop_after: str | None = None) -> KernelIR:
        """The IR after the IR passes (only up to `stop_after`, when it names an IR pass;
        all of them when it names an ISA pass)."""
        passes = self._upto(self.ir, stop_after)
        if not passes:
            return kir
        def run() -> KernelIR:
            out = kir
            for p in passes:
                out = _apply(p, out, KernelIR)
            return out
        return _cached("ir passes", ("ir", passes, kir), run)

    def run_isa(self, program: Program, stop_after: str | None = None) -> Program:
        """The verified program after the ISA passes (up to `stop_after`, when it names an
        ISA pass; none of them when it names an IR pass). A VerifyError names the pass
        whose output the verifier rejected."""
        if stop_after is not None and self.find(stop_after).level == "ir":
            return _verify(program)
        passes = self._upto(self.isa, stop_after)
        if not passes:
            return _verify(program)
        try:
            key: Any = ("isa", passes, program_hash(program))
        except HologramError:  # not even encodable: the verifier below says why
            key = None
        def run() -> Program:
            out = program
            for p in passes:
                out = _apply(p, out, Program)
            out = compact_sites(out)  # drop the sites of checks the passes proved away
            try:
                _verify(out)
            except VerifyError as exc:
                raise _blame(passes, program, exc) from None
            return out
        return _cached("isa passes", key, run)


def _cached(what: str, key: Any, run: Any) -> Any:
    """`run()`'s result, from the cache when it holds `key` (None: never cached); traced
    as a span saying which."""
    with trace.span(what, "compile") as info:
        out = None if key is None else _CACHE.get(key)
        if info is not None:
            info["cache"] = "miss" if out is None else "hit"
        if out is None:
            out = run()
            if key is not None:
                _CACHE.put(key, out)
    return out


def _verify(program: Program) -> Program:
    with trace.span("verify", "compile"):
        return verify(program)


# -------------------------------------------------------------------------- ordering
def order(passes: Sequence[Pass]) -> tuple[Pass, ...]:
    """`passes` in run order: IR before ISA, each level in the stable topological order of
    the before/after constraints among them (ties by their order in `passes`)."""
    by_name = {p.name: p for p in passes}
    for p in passes:
        for other, rel in [(n, "before") for n in p.before] + [(n, "after") for n in p.after]:
            q = by_name.get(other)
            if q is None or q.level == p.level:
                continue
            # across levels only "IR before ISA" can hold
            ir_first = (p.level == "ir") == (rel == "before")
            if not ir_first:
                raise PluginError(f"{p.level} pass {p.name!r} asks to run {rel} {q.level} pass {q.name!r}, but "
                                  "every IR pass runs before every ISA pass")
    return tuple(x for level in LEVELS for x in _toposort([p for p in passes if p.level == level]))


def _toposort(passes: list[Pass]) -> list[Pass]:
    """Registration order, except that a pass constrained to run before another is pulled
    forward to just before it: each pass is placed after the passes it must follow (in
    their registration order), so passes no constraint relates keep their order."""
    index = {p.name: i for i, p in enumerate(passes)}
    preds: dict[str, set[str]] = {p.name: set() for p in passes}
    for p in passes:
        preds[p.name].update(q for q in p.after if q in index and q != p.name)
        for q in p.before:
            if q in index and q != p.name:
                preds[q].add(p.name)
    out: list[Pass] = []
    state: dict[str, str] = {}  # "open" while its predecessors are placed, then "done"
    path: list[str] = []

    def place(name: str) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "open":
            cycle = (path[path.index(name):] + [name])[::-1]  # the path runs backwards, through predecessors
            raise PluginError(f"the ordering constraints of passes form a cycle: {' -> '.join(cycle)} "
                              "(each must run before the next)",
                              hint="the before=/after= lists of these passes must allow an order; fix or drop one")
        state[name] = "open"
        path.append(name)
        for q in sorted(preds[name], key=index.__getitem__):
            place(q)
        path.pop()
        state[name] = "done"
        out.append(passes[index[name]])

    for p in passes:
        place(p.name)
    return out
