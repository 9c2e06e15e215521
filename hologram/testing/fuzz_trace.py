"""Which lanes touch which elements: the race check that decides whether two backends'
answers for a fuzzed program may be compared at all.

A verified program is memory-safe, not necessarily deterministic: two lanes of one stage
may store to the same element, or one may load what another stores, and then the answer
depends on the order lanes run in, which the ISA leaves to the backend (the interpreter
runs them one by one, cpu_llvm vectorizes and threads them). The program fuzzer compares
backends only for launches without such races.

`find_race` runs a program on the reference interpreter with every global and shared
memory access recorded (lane, element, load/store/reduce) and returns the first conflict:

- global memory: within one stage, an element stored (or reduced into) by one lane and
  accessed by another; or reduced into and also loaded or stored plainly (the merge
  order of reductions against plain accesses is the backend's);
- shared memory: the same within one block and one barrier epoch (accesses separated by
  a BarSync every lane reached are ordered).

Several lanes reducing into one element is not a race: that is what reductions are for
(their float results are order-dependent, which the precision levels account for).

The recording wraps the interpreter's decoded instructions (`hologram_interp.decode`),
which is a private interface: `tests/testing/test_fuzz.py` checks that a racy and a race-free
program are told apart, so a change there fails loudly instead of weakening the fuzzer.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import attrs
import numpy as np

from hologram.isa.opcodes import OPCODES
from hologram.isa.program import Instr, Program

_LOAD, _STORE, _REDUCE = "load", "store", "reduce"
_KIND = {"LDG": _LOAD, "LDS": _LOAD, "STG": _STORE, "STS": _STORE, "ResAccum": _REDUCE,
         "ReduceAdd": _REDUCE, "ReduceMin": _REDUCE, "ReduceMax": _REDUCE, "ReduceMul": _REDUCE}


class _Race(Exception):
    """Raised from inside the interpreter at the first conflicting access, to stop it."""


class _Element:
    """Who touched one element: the first lane of each kind, and whether others did."""

    __slots__ = ("lanes",)

    def __init__(self) -> None:
        self.lanes: dict[str, Any] = {}  # kind -> a lane key, or `_MANY`


_MANY = object()


class _Recorder:
    def __init__(self, stage_name: str):
        self.stage = stage_name
        self.elements: dict[tuple, _Element] = {}
        self.epochs: dict[int, int] = {}  # id(lane) -> BarSyncs passed
        self.keep: list[Any] = []  # lanes and shared dicts stay alive, so ids are not reused

    def lane_key(self, lane: Any) -> int:
        key = id(lane)
        if key not in self.epochs:
            self.epochs[key] = 0
            self.keep.append(lane)
        return key

    def access(self, lane: Any, kind: str, space: str, buffer: str, index: int, k: int) -> None:
        who = self.lane_key(lane)
        where: tuple = (buffer, index)
        if space == "shared":
            self.keep.append(lane.shared)
            where = ("shared", id(lane.shared), self.epochs[who], buffer, index)
        el = self.elements.get(where)
        if el is None:
            el = self.elements[where] = _Element()
        prev = el.lanes.get(kind)
        el.lanes[kind] = who if prev is None or prev == who else _MANY
        if self._conflict(el):
            gid = tuple(int(g) for g in lane.gid)
            raise _Race(f"stage '{self.stage}': {space} '{buffer}'[{index}] is accessed by several lanes and "
                        f"written by one of them (lane gid={gid} at instruction {k}, a {kind})")

    @staticmethod
    def _conflict(el: _Element) -> bool:
        lanes = el.lanes
        writers = [lanes[k] for k in (_STORE, _REDUCE) if k in lanes]
        if not writers:
            return False
        if _REDUCE in lanes and (_STORE in lanes or _LOAD in lanes):
            return True  # a reduction against a plain access: merge order decides
        if _STORE not in lanes:
            return False  # reductions alone combine
        touching = [lanes[k] for k in (_STORE, _LOAD) if k in lanes]
        return any(t is _MANY for t in touching) or len(set(touching)) > 1

    def barrier(self, lane: Any) -> None:
        self.epochs[self.lane_key(lane)] += 1


def find_race(program: Program, buffers: Mapping[str, np.ndarray], scalars: Mapping[str, Any],
              symbols: Mapping[str, int]) -> str | None:
    """The first race of this launch (see the module docstring), or None when every
    stage ran without one. The launch runs on copies of `buffers`; a HologramError the
    program raises ends the trace there (what ran until then is judged)."""
    from hologram_interp.backend import bind
    from hologram_interp.decode import BARRIER, decode_program
    from hologram_interp.machine import run_stage

    from hologram.core.errors import HologramError

    try:
        exe = decode_program(program, "fuzz-trace")
        mem, consts = bind(exe, {k: np.array(v, copy=True) for k, v in buffers.items()}, scalars, symbols)
    except HologramError:
        return None  # refused before any lane ran
    with np.errstate(all="ignore"):
        for stage_code, stage in zip(exe.stages, program.stages):
            rec = _Recorder(stage.name)
            code = tuple(_traced(step, stage.body[k] if k < len(stage.body) else None, k, rec, BARRIER)
                         for step, k in zip(stage_code.code, stage_code.body_index + (len(stage.body),)))
            try:
                run_stage(attrs.evolve(stage_code, code=code), mem, consts, symbols)
            except _Race as race:
                return str(race)
            except HologramError:
                return None
    return None


def _traced(step: Callable, item: Any, k: int, rec: _Recorder, barrier: int) -> Callable:
    if not isinstance(item, Instr):
        return step
    if item.op == "BarSync":
        def traced_barrier(lane):
            result = step(lane)
            if result == barrier:
                rec.barrier(lane)
            return result
        return traced_barrier
    kind = _KIND.get(item.op)
    if kind is None or item.addr is None:
        return step
    space = OPCODES[item.op].space
    buffer, index, offset = item.addr.buffer, item.addr.index, item.addr.offset

    def traced(lane):
        i = offset + (int(lane.regs[index.name]) if index is not None else 0)
        rec.access(lane, kind, space, buffer, i, k)
        return step(lane)
    return traced
