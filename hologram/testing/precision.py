"""How closely two backends must agree on a program's buffers, and the comparison.

The ISA pins most results to the bit; approximated instructions (docs/isa.md marks them
≈) may differ by PROGRAM_ULPS from the interpreter, and float reductions, reassociable
operations and the sign of a produced NaN are not pinned at all. `precision` follows
those licences through a program's dataflow; `compare_outputs` holds two runs to it.
Shared by the differential harness and the fuzzers.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Mapping

import numpy as np

from hologram.isa.opcodes import OPCODES
from hologram.isa.program import Addr, Instr, Program, Reg
from hologram.testing.contract import assert_close

EXACT, ULPS, OPEN = 0, 1, 2  # precision levels: bitwise, within PROGRAM_ULPS, not compared
PROGRAM_ULPS = 4  # the interpreter is numpy; a backend's approximations are within 4 ULP of it
APPROX = frozenset(name for name, spec in OPCODES.items() if spec.approx)  # ≈ in docs/isa.md
ORDERED = frozenset({"ReduceAdd", "ReduceMul", "ResAccum"})  # float results depend on the order
REASSOCIABLE = frozenset({"ADD", "SUB", "MUL", "MIN", "MAX", "MAD", "FMA"})


def precision(program: Program) -> dict[str, int]:
    """Per buffer (params and temps): EXACT (backends agree bitwise), ULPS (within
    PROGRAM_ULPS) or OPEN (not compared), by a conservative taint analysis, with the ISA's
    licences: a `.reassoc` operation, or a float ADD/SUB/MUL/MIN/MAX/MAD/FMA of a
    `.reassociate` program, may be evaluated in another order; COPYSIGN may read the
    unspecified sign of a NaN an operation produced. Registers are flow-insensitive, a
    tainted branch predicate or loop counter taints every write of its stage, and an
    access through a tainted index taints the memory it touches; iterated to a fixpoint.
    Assumes the launch is free of races (see fuzz_trace.py)."""
    level: dict[tuple, int] = defaultdict(int)

    def raise_to(key: tuple, lv: int) -> bool:
        if lv > level[key]:
            level[key] = lv
            return True
        return False

    def memory_key(k: int, ins: Instr) -> tuple:
        space = OPCODES[ins.op].space
        return ("buf", ins.addr.buffer) if space == "global" else ("mem", k, space, ins.addr.buffer)

    changed = True
    while changed:
        changed = False
        for k, stage in enumerate(program.stages):
            def reg(op: Any) -> int:
                return level[("reg", k, op.name)] if isinstance(op, Reg) else EXACT
            body = [i for i in stage.body if isinstance(i, Instr)]
            guards = [i.pred.reg for i in body if i.pred is not None] + [i.srcs[0] for i in body if i.op == "LOOP"]
            control = max(map(reg, guards), default=EXACT)
            for ins in body:
                src = max((reg(op) for op in ins.srcs), default=EXACT)
                index = reg(ins.addr.index) if isinstance(ins.addr, Addr) else EXACT
                spec = OPCODES[ins.op]
                floating = ins.dtype is not None and ins.dtype.is_float
                if ins.addr is not None and spec.space in ("global", "shared", "pool") and "m" in spec.form:
                    mem = memory_key(k, ins)
                    if ins.dst is not None:  # a load
                        lv = max(level[mem], OPEN if index or control else EXACT)
                        changed |= raise_to(("reg", k, ins.dst.name), lv)
                    else:  # a store or a reduction
                        lv = src
                        if floating and ins.op in ORDERED:
                            lv = OPEN
                        elif floating and ins.op in ("ReduceMin", "ReduceMax"):
                            lv = max(src, ULPS)  # the order picks the sign of an equal zero
                        changed |= raise_to(mem, OPEN if (index or control) else lv)
                elif ins.dst is not None:
                    if ins.op == "MOV":
                        lv = src
                    elif ins.op in APPROX:
                        lv = ULPS if src == EXACT else OPEN
                    elif floating and (ins.mod == "reassoc" or ins.op == "COPYSIGN"
                                       or (program.reassociate and ins.op in REASSOCIABLE)):
                        lv = OPEN
                    else:
                        lv = EXACT if src == EXACT else OPEN
                    changed |= raise_to(("reg", k, ins.dst.name), OPEN if control else lv)
    return {name: level[("buf", name)] for name in program.buffers()}


def compare_outputs(outputs: Iterable, levels: Mapping[str, int], want: Mapping[str, np.ndarray],
                    got: Mapping[str, np.ndarray], facts: dict[str, int] | None = None) -> list[str]:
    """The failures of `got` against `want` for each output param (name, dtype) both hold,
    at its precision level; `facts` counts the outputs compared and those left open."""
    failures = []
    for p in outputs:
        if p.name not in want or p.name not in got:
            continue
        level = levels.get(p.name, OPEN)
        if facts is not None:
            key = "open" if level == OPEN else "compared"
            facts[key] = facts.get(key, 0) + 1
        if level == OPEN:
            continue
        try:
            assert_close(got[p.name], want[p.name], ulps=PROGRAM_ULPS if level == ULPS and p.dtype.is_float else 0,
                         name=p.name)
        except AssertionError as exc:
            failures.append(str(exc))
    return failures
