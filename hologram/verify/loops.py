"""The loops of a stage, as the dataflow analysis needs them: what code writes, and the
induction variables of counted loops.

The analysis widens at a loop head only the registers the loop writes (`loop_writes`),
so a bound that comes from before the loop survives it; what an instruction writes
includes what the subroutines it calls write (`writes`), which needs each subroutine's
region (`region`). An induction variable (`inductions`) is a register a counted loop
steps by a constant once per iteration: its value at the head follows from the loop
counter's exactly, so widening does not lose it. The call graph is acyclic and loops
nest: the verifier's control-flow rules (control_rules.py) checked both first.

Every scan is charged to the analysis' `Meter`.
"""

from __future__ import annotations

import bisect
import collections

from hologram.core.types import DType
from hologram.isa.program import Instr
from hologram.verify.control import induction_step, reachable
from hologram.verify.intervals import Meter


class StageLoops:
    """The loops of `body` (with its `labels` and register `types`), scanned once, and
    what its code writes, computed on demand and kept."""

    def __init__(self, body: tuple, labels: dict[str, int], types: dict[str, DType], meter: Meter):
        self.body, self.labels, self.types, self.meter = body, labels, types, meter
        self.loops = [(labels[it.target], pc) for pc, it in enumerate(body)
                      if isinstance(it, Instr) and it.op == "LOOP"]  # (head, LOOP pc), by pc
        self.heads = {head for head, _ in self.loops}
        self.ends = {head: end for head, end in self.loops}  # the last LOOP to each head
        self.regions: dict[int, list[int]] = {}
        self.callee_writes: dict[int, set[str]] = {}
        self.loop_written: dict[int, set[str]] = {}
        self.inductions = self._inductions()

    def region(self, entry: int) -> list[int]:
        """The instructions reachable from `entry` (calls fall through), ascending."""
        if entry not in self.regions:
            self.regions[entry] = [pc for pc in reachable(self.body, self.labels, entry, self.meter)
                                   if pc < len(self.body)]
        return self.regions[entry]

    def writes(self, pc: int) -> set[str]:
        """Registers instruction `pc` may write, through calls too."""
        it = self.body[pc]
        if not isinstance(it, Instr):
            return set()
        if it.op == "LOOP":
            return {it.srcs[0].name}
        if it.op == "CALL":
            entry = self.labels[it.target]
            if entry not in self.callee_writes:
                self.meter.charge(len(self.region(entry)))
                self.callee_writes[entry] = set().union(*(self.writes(q) for q in self.region(entry)))
            return self.callee_writes[entry]
        return {it.dst.name} if it.dst is not None else set()

    def loop_writes(self, head: int) -> set[str]:
        """Registers written anywhere in the loops that jump back to `head` (from the head
        to the last LOOP targeting it; only LOOP jumps backwards)."""
        if head not in self.loop_written:
            end = self.ends.get(head, head)
            self.meter.charge(end - head)
            self.loop_written[head] = set().union(*(self.writes(pc) for pc in range(head, end + 1)))
        return self.loop_written[head]

    def _inductions(self) -> dict[int, tuple[str, dict[str, int]]]:
        """Loop head -> (counter, {register: step}) for the i64 registers a counted loop
        steps by a constant exactly once per iteration: at head arrival j, such a register
        is `v0 + step*j` and the counter `c0 - j`, so `v = v0 + step*(c0 - c)`. Requires
        one LOOP to the head, no entry into the loop but through the head, and the one
        write to the register on every path around, outside inner loops and callees."""
        loops = self.loops
        heads = collections.Counter(head for head, _ in loops)
        # every BRA as (its target's position, its pc), by target: the ones into a loop
        branches = sorted((self.labels[it.target], pc) for pc, it in enumerate(self.body)
                          if isinstance(it, Instr) and it.op == "BRA")
        targets = [t for t, _ in branches]
        ends = [end for _, end in loops]
        out: dict[int, tuple[str, dict[str, int]]] = {}
        for head, end in loops:
            into = branches[bisect.bisect_right(targets, head):bisect.bisect_left(targets, end)]
            inner = loops[bisect.bisect_right(ends, head):bisect.bisect_left(ends, end)]  # closed inside
            self.meter.charge(1 + len(into) + len(inner) + end - head)
            if heads[head] > 1 or any(not head <= pc < end for _, pc in into):
                continue
            writes: dict[str, list[int]] = {}
            for pc in range(head, end):
                for r in self.writes(pc):
                    writes.setdefault(r, []).append(pc)
            steps: dict[str, int] = {}
            for r, pcs in writes.items():
                step = induction_step(self.body[pcs[0]], r) if len(pcs) == 1 else None
                w = pcs[0]
                if step is None or self.types.get(r) is not DType.I64:
                    continue
                self.meter.charge(len(inner) + w - head)
                if any(h2 <= w <= e2 for h2, e2 in inner if head < h2) or any(
                        self._jumps(pc, w + 1, end) for pc in range(head, w)):
                    continue
                steps[r] = step
            if steps:
                out[head] = (self.body[end].srcs[0].name, steps)
        return out

    def _jumps(self, pc: int, lo: int, hi: int) -> bool:
        """Does the branch at `pc` target a label in [lo, hi)?"""
        it = self.body[pc]
        return isinstance(it, Instr) and it.op == "BRA" and lo <= self.labels[it.target] < hi
