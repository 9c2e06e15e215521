"""The verifier's control-flow rules (rule 4 of verifier.py), which make every verified
program terminate.

No path falls off the end of the stage or of a subroutine; RET only in subroutines and
BarSync only in the stage's main code; calls do not recurse and nest at most
MAX_CALL_DEPTH deep; loops nest or are disjoint, at most MAX_LOOP_DEPTH deep, and no loop
writes its counter (so each runs its count down). Branch directions (BRA forward, LOOP
backward) are instruction rules (instr_rules.py). The work is charged to the stage's
analysis `Meter`, shared with the dataflow analysis that runs next.
"""

from __future__ import annotations

import bisect

from hologram.isa.asm import format_instr
from hologram.isa.program import Instr
from hologram.verify.control import reachable
from hologram.verify.decl_rules import StageScope
from hologram.verify.intervals import Meter

# Limits that keep verification cheap (docs/hasm.md, "Limits"), far above what the DSL
# makes (a loop per dimension, rank <= 32).
MAX_LOOP_DEPTH = 64  # loops nested in one another
MAX_CALL_DEPTH = 64  # calls nested in one another


def check_control(scope: StageScope, meter: Meter) -> None:
    """Rule 4 for the stage of `scope` (VerifyError at the first problem)."""
    body, labels = scope.s.body, scope.labels
    if not body:
        raise scope.fail("fall-off", "the stage body is empty; it must end with EXIT")
    regions = {"the stage entry": reachable(body, labels, 0, meter)}
    calls = {pc: it.target for pc, it in enumerate(body) if isinstance(it, Instr) and it.op == "CALL"}
    for target in dict.fromkeys(calls.values()):
        regions[target] = reachable(body, labels, labels[target], meter)
    for name, pcs in regions.items():
        sub = name != "the stage entry"
        if len(body) in pcs:
            last = len(body) - 1
            raise scope.fail("fall-off", f"control can fall off the end of the stage here (reached from "
                                         f"{'subroutine ' + repr(name) if sub else name})",
                             "end every path with EXIT, RET (in a subroutine) or an unconditional BRA", last)
        for pc in pcs:
            op = getattr(body[pc], "op", None)
            if op == "RET" and not sub:
                raise scope.fail("ret", "RET is reachable from the stage entry without a CALL; RET belongs "
                                        "in a subroutine", "end the main code with EXIT", pc)
            if op == "BarSync" and sub:
                raise scope.fail("barsync", f"BarSync inside subroutine {name!r}: barriers are only allowed "
                                            "in the stage's main code", pc=pc)
    _check_calls(scope, regions, calls)
    _check_loops(scope, _region_writes(body, regions, meter), meter)


def _check_loops(scope: StageScope, writes: dict[str, set[str]], meter: Meter) -> None:
    """No loop writes its counter, loops nest or are disjoint, at most MAX_LOOP_DEPTH
    deep. One pass over the body: a loop opens at its label and closes at its LOOP,
    and at a LOOP every loop opened since its label must have closed; the first
    problem in LOOP order is reported."""
    body, labels = scope.s.body, scope.labels
    loops = [(labels[it.target], pc) for pc, it in enumerate(body) if isinstance(it, Instr) and it.op == "LOOP"]
    closers: dict[int, list[int]] = {}  # label position -> the LOOPs back to it, ascending
    for head, pc in loops:
        closers.setdefault(head, []).append(pc)
    opened: list[int] = []  # labels of the open loops, innermost last
    pending: dict[int, int] = {}  # label position -> its LOOPs not reached yet
    depth = 0  # open loops, one per LOOP
    for pos in sorted(set(closers) | {pc for _, pc in loops}):
        if pos in closers:  # a label: its loops open
            opened.append(pos)
            pending[pos] = len(closers[pos])
            depth += pending[pos]
            continue
        pc, head = pos, labels[body[pos].target]
        _check_counter(scope, head, pc, writes, meter)
        if opened[-1] != head:  # a loop opened inside this one closes after it
            inner = opened[opened.index(head) + 1:]
            pc2 = min(closers[h][bisect.bisect_right(closers[h], pc)] for h in inner)
            raise scope.fail("loop-nesting", f"this loop (from {body[head].name!r}) overlaps the loop closed at "
                                             f"instruction {pc2} without nesting inside it",
                             "loops must nest or be disjoint", pc)
        if depth > MAX_LOOP_DEPTH:
            raise scope.fail("limit", f"this loop is nested {depth} deep; the verifier allows at most "
                                      f"{MAX_LOOP_DEPTH}", "flatten the loop nest or split the stage", pc)
        depth -= 1
        pending[head] -= 1
        if not pending[head]:
            opened.pop()


def _check_counter(scope: StageScope, head: int, pc: int, writes: dict[str, set[str]], meter: Meter) -> None:
    body = scope.s.body
    counter = body[pc].srcs[0].name
    meter.charge(pc - head)  # at most MAX_LOOP_DEPTH times the body in all
    for k in range(head, pc):
        it = body[k]
        if isinstance(it, Instr) and counter in (writes[it.target] if it.op == "CALL" else _writes(it)):
            how = f" by a call to {it.target!r}" if it.op == "CALL" else ""
            raise scope.fail("loop-counter", f"the loop counter %{counter} is written inside its loop, at "
                                             f"instruction {k} (`{format_instr(it, align=False)}`){how}; the "
                                             "loop might not terminate",
                             "count with a register the loop body leaves alone", pc)


def _check_calls(scope: StageScope, regions: dict[str, list[int]], calls: dict[int, str]) -> None:
    """No recursion, and calls nest at most MAX_CALL_DEPTH deep. A depth-first search
    with its own stack: the call graph may be deeper than Python's."""
    callees = {name: [(pc, calls[pc]) for pc in pcs if pc in calls] for name, pcs in regions.items()}
    state: dict[str, int] = {}  # 1: on the DFS stack, 2: done
    height: dict[str, int] = {}  # the longest chain of calls from a region
    for root in regions:
        if root in state:
            continue
        state[root] = 1
        path, todo = [root], [iter(callees[root])]
        while todo:
            for pc, callee in todo[-1]:
                if state.get(callee) == 1:
                    cycle = path[path.index(callee):] + [callee]
                    raise scope.fail("recursion", f"recursive call: {' -> '.join(cycle)}",
                                     "calls may not recurse (directly or indirectly)", pc)
                if callee not in state:
                    state[callee] = 1
                    path.append(callee)
                    todo.append(iter(callees[callee]))
                    break
            else:
                name = path.pop()
                todo.pop()
                state[name] = 2
                height[name] = max((height[c] + 1 for _, c in callees[name]), default=0)
    name = max(regions, key=height.__getitem__)
    if height[name] > MAX_CALL_DEPTH:
        pc, callee = max(callees[name], key=lambda call: height[call[1]])
        raise scope.fail("limit", f"calls nest {height[name]} deep from here "
                                  f"({'subroutine ' + repr(name) if name in calls.values() else name}); the verifier "
                                  f"allows at most {MAX_CALL_DEPTH}", "inline some subroutines", pc)


def _region_writes(body: tuple, regions: dict[str, list[int]], meter: Meter) -> dict[str, set[str]]:
    """Registers each subroutine may write, callees included (the graph is acyclic
    and at most MAX_CALL_DEPTH deep: _check_calls ran)."""
    memo: dict[str, set[str]] = {}

    def writes(name: str) -> set[str]:
        if name not in memo:
            meter.charge(len(regions[name]))
            out: set[str] = set()
            for pc in regions[name]:
                it = body[pc]
                if isinstance(it, Instr):
                    out |= writes(it.target) if it.op == "CALL" else _writes(it)
            memo[name] = out
        return memo[name]

    return {name: writes(name) for name in regions}


def _writes(ins: Instr) -> set[str]:
    if ins.op == "LOOP":
        return {ins.srcs[0].name}
    return {ins.dst.name} if ins.dst is not None else set()
