"""The control flow of a stage body, as the verifier and the ISA passes walk it: the
edges out of an instruction, the instructions reachable from an entry, the registers an
instruction reads, and the step of an induction variable.

Control flow is the ISA's: forward BRA (optionally predicated), backward LOOP, CALL
falling through (its callee is a separate region), EXIT and RET ending a path.
"""

from __future__ import annotations

from typing import Iterator

from hologram.isa.program import Imm, Instr, Label, Reg
from hologram.verify.intervals import Meter


def successors(body: tuple, labels: dict[str, int], pc: int) -> list[tuple[int, str]]:
    """Control-flow edges out of `pc` as (target pc, 'fall' | 'taken'); a CALL falls
    through (its callee is a separate region). `len(body)` means falling off the end."""
    item = body[pc]
    if isinstance(item, Label):
        return [(pc + 1, "fall")]
    op = item.op
    if op in ("EXIT", "RET"):
        return []
    if op == "BRA":
        taken = [(labels[item.target], "taken")]
        return taken if item.pred is None else taken + [(pc + 1, "fall")]
    if op == "LOOP":
        return [(labels[item.target], "taken"), (pc + 1, "fall")]
    return [(pc + 1, "fall")]


def reachable(body: tuple, labels: dict[str, int], entry: int, meter: Meter | None = None) -> list[int]:
    """Program counters reachable from `entry` (CALLs fall through), ascending; may
    include `len(body)` when control can fall off the end."""
    seen, todo = {entry}, [entry]
    while todo:
        if meter is not None:
            meter.charge(1)
        pc = todo.pop()
        if pc < len(body):
            for nxt, _ in successors(body, labels, pc):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
    return sorted(seen)


def induction_step(ins: Instr, reg: str) -> int | None:
    """k when `ins` is `ADD %reg, %reg, k`, `ADD %reg, k, %reg` or `SUB %reg, %reg, k`."""
    if ins.op not in ("ADD", "SUB") or ins.dst != Reg(reg):
        return None
    a, b = ins.srcs
    for x, k in [(a, b)] + ([(b, a)] if ins.op == "ADD" else []):
        if x == Reg(reg) and isinstance(k, Imm) and isinstance(k.value, int) and not isinstance(k.value, bool):
            return k.value if ins.op == "ADD" else -k.value
    return None


def reads(ins: Instr) -> Iterator[str]:
    for o in ins.srcs:
        if isinstance(o, Reg):
            yield o.name
    if ins.addr is not None and ins.addr.index is not None:
        yield ins.addr.index.name
    if ins.pred is not None:
        yield ins.pred.reg.name
