"""A launch that reports its memory accesses: `InterpBackend.observe` (the SDK's trace
hook, `hologram.backend.AccessObserver`).

Each decoded step of a global or shared memory instruction is wrapped to tell the
observer which lane is about to touch which element, and each BarSync to tell it a lane
passed the barrier; the machine then runs the wrapped stages as it runs any. The
differential fuzzer's race check (hologram.testing.fuzz_trace) is built on it.
"""

from __future__ import annotations

from typing import Callable, Mapping

import attrs
import numpy as np

from hologram.backend import AXES, OPCODES, AccessObserver, Instr

from .decode import BARRIER, Executable, special_key
from .machine import run_stage

_CTAID = tuple(special_key(f"ctaid.{axis}") for axis in AXES)


def access_kind(op: str) -> str | None:
    """'load', 'store' or 'reduce' for an instruction reading or writing global or
    shared memory, from the op table; None for any other."""
    spec = OPCODES.get(op)
    if spec is None or spec.space not in ("global", "shared") or "m" not in spec.form:
        return None
    if spec.form.startswith("d"):
        return "load"
    return "reduce" if spec.group == "reduce" or op == "ResAccum" else "store"


def run_observed(exe: Executable, mem: dict[str, np.ndarray], consts: dict, symbols: Mapping[str, int],
                 observer: AccessObserver) -> None:
    """Run every stage of `exe` as `machine.run` does, reporting to `observer`."""
    with np.errstate(all="ignore"):
        for code, stage in zip(exe.stages, exe.program.stages):
            observer.stage(code.name)
            rank = len(code.domain)
            steps = tuple(_observed(step, stage.body[k] if k < len(stage.body) else None, k, rank, observer)
                          for step, k in zip(code.code, code.body_index + (len(stage.body),)))
            run_stage(attrs.evolve(code, code=steps), mem, consts, symbols)


def _observed(step: Callable, item: object, k: int, rank: int, observer: AccessObserver) -> Callable:
    if not isinstance(item, Instr):
        return step

    def ctaid(lane) -> tuple[int, ...]:
        return tuple(int(lane.regs[key]) for key in _CTAID[:rank])

    if item.op == "BarSync":
        def barrier(lane):
            result = step(lane)
            if result == BARRIER:
                observer.barrier(tuple(lane.gid), ctaid(lane))
            return result
        return barrier
    kind = access_kind(item.op)
    if kind is None or item.addr is None:
        return step
    space = OPCODES[item.op].space
    buffer, index, offset = item.addr.buffer, item.addr.index, item.addr.offset

    def accessed(lane):
        i = offset + (int(lane.regs[index.name]) if index is not None else 0)
        observer.access(tuple(lane.gid), ctaid(lane), kind, space, buffer, i, k)
        return step(lane)
    return accessed
