"""The ISA pass `licm`: compute loop-invariant values once, before the loop.

A LOOP is a do-while: once control reaches its head label, the body runs at least once.
The pass moves an instruction from a loop body to just before the head label (the
*preheader*: every entry into the loop passes there, and nothing passes there without
entering the loop) when all of these hold:

- the loop is entered only by falling into its head: no branch targets the head or
  jumps into the body from outside, no CALL targets a label in it, and the body makes
  no CALL (a callee could write any register);
- every register it reads is not written in the loop (or only by instructions already
  hoisted), and its destination is written by nothing else in the loop;
- its destination is not live at the head (every read inside the loop sees this
  instruction's value of the same iteration);
- after the loop its destination is either dead at every exit, or the instruction runs
  on every iteration before any exit can be taken (then the value after the loop is
  the same invariant one);
- it cannot fault and has no effect but its destination (arithmetic, logic, math,
  moves, conversions, Atlas lookups), *or* it is an `LDG` of a buffer no instruction of
  the stage writes, in the part of the body that every iteration runs before any
  branch. Such a load runs at least once whenever the preheader runs, so hoisting it
  neither adds a fault (a checked load) nor moves it above the zero-trip guard the
  lowering puts before the loop.

Inner loops are treated first, so an instruction can leave a nest level by level.
"""

from __future__ import annotations

import attrs

from hologram.isa.program import Instr, Program, Stage
from hologram.passes.isa_flow import Graph, Liveness, is_pure, labels_of, liveness, per_stage, reads, writes
from hologram.verify.instr_rules import WRITES_GLOBAL as _WRITES_GLOBAL

_MAX_HOISTS = 1000


def _loops(body: tuple) -> list[tuple[int, int]]:
    labels = labels_of(body)
    loops = [(labels[it.target], pc) for pc, it in enumerate(body) if isinstance(it, Instr) and it.op == "LOOP"]
    return sorted(loops, key=lambda hl: hl[1] - hl[0])


def _enterable_only_at_head(body: tuple, head: int, end: int) -> bool:
    labels = labels_of(body)
    heads = [pc for pc, it in enumerate(body) if isinstance(it, Instr) and it.op == "LOOP"
             and labels[it.target] == head]
    if heads != [end]:
        return False
    for pc, it in enumerate(body):
        if not isinstance(it, Instr) or it.op not in ("BRA", "CALL"):
            continue
        inside = head <= pc <= end
        to = labels[it.target]
        if it.op == "CALL" and (inside or head <= to <= end):
            return False
        if it.op == "BRA" and (to == head or (not inside and head < to <= end)):
            return False
    return True


def _hoistable(body: tuple, g: Graph, live: Liveness, head: int, end: int, stored: set[str]) -> list[int]:
    """The pcs of the loop's instructions that may move to the preheader, in an order
    that keeps each before the instructions that read it."""
    exits = {s for pc in range(head, end + 1) for s in g.succ[pc] if not head <= s <= end}
    exit_live = 0
    for s in exits:
        exit_live |= live.inn[s]
    prefix: set[int] = set()
    for pc in range(head + 1, end):
        it = body[pc]
        if isinstance(it, Instr) and it.op in ("BRA", "LOOP", "RET", "EXIT", "CALL"):
            break
        prefix.add(pc)
    counts: dict[str, int] = {}
    for pc in range(head, end + 1):
        if isinstance(body[pc], Instr):
            for r in writes(body[pc]):
                counts[r] = counts.get(r, 0) + 1
    chosen: list[int] = []
    changed = True
    while changed:
        changed = False
        for pc in range(head + 1, end):
            it = body[pc]
            if pc in chosen or not isinstance(it, Instr) or it.dst is None:
                continue
            d = it.dst.name
            load = it.op == "LDG" and it.addr.buffer not in stored and pc in prefix
            if not (is_pure(it) or load):
                continue
            if counts.get(d) != 1 or live.live_in(head, d) or any(counts.get(r, 0) for r in reads(it)):
                continue
            if exit_live & live.mask([d]) and pc not in prefix:
                continue
            chosen.append(pc)
            counts[d] = 0
            changed = True
    return chosen


def _rewrite_stage(program: Program, stage: Stage) -> Stage:
    body = stage.body
    stored = {it.addr.buffer for it in body if isinstance(it, Instr) and it.op in _WRITES_GLOBAL}
    for _ in range(_MAX_HOISTS):
        g = Graph.of(body)
        live = liveness(body, g)
        for head, end in _loops(body):
            if not _enterable_only_at_head(body, head, end):
                continue
            moved = _hoistable(body, g, live, head, end, stored)
            if moved:
                rest = [it for pc, it in enumerate(body) if pc not in set(moved)]
                at = head - sum(pc < head for pc in moved)
                body = tuple(rest[:at] + [body[pc] for pc in moved] + rest[at:])
                break
        else:
            break
    return stage if body == stage.body else attrs.evolve(stage, body=body)


def run(program: Program) -> Program:
    return per_stage(program, _rewrite_stage)
