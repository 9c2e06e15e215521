"""The two lane layouts of a stage with BarSync (mixed into StageEmitter).

- region loops, when every lane meets the same barriers in the same order (each is in
  straight-line top-level code): one loop over the block's lanes per barrier-separated
  region, the lanes' registers and pools in per-lane arrays, an `alive` flag per lane;
- the state machine otherwise (a barrier in a branch, a loop or a subroutine): rounds
  over the block's live lanes, each lane resuming at its own barrier through a switch,
  and an error when the lanes of a round wait at different barriers (as the interpreter).
"""

from __future__ import annotations

from llvmlite import ir

from hologram.backend.llvm.control import Ctx

from .abi import ERR_BARRIER
from .codegen_types import I8, I32, I64, at, i64

MAX_BLOCKS = 200_000  # inlined (context, pc) pairs: a guard against pathological call trees


class BarrierLayouts:
    """Uses StageEmitter's builder, blocks and lane-storage helpers."""

    # ------------------------------------------------------ barriers: region loops
    def _successors(self, ctx: Ctx, pc: int) -> list[tuple[Ctx, int]]:
        ins = self.items[pc][1]
        op = ins.op
        if op == "EXIT":
            return []
        if op == "RET":
            return [(ctx[:-1], ctx[-1][1])] if ctx else []
        if op == "CALL":
            target = self.label(ins.target)
            return [] if any(e == target for e, _ in ctx) else [(ctx + ((target, pc + 1),), target)]
        if op == "BRA":
            return [(ctx, self.label(ins.target))] + ([(ctx, pc + 1)] if ins.pred is not None else [])
        if op == "LOOP":
            return [(ctx, self.label(ins.target)), (ctx, pc + 1)]
        return [(ctx, pc + 1)]

    def _straight_regions(self) -> list[int] | None:
        """The start pcs of the barrier-separated regions when every lane meets the same
        barriers in the same order: each BarSync is reached only from top-level code
        (not in a subroutine), no forward branch jumps over it and no loop contains it.
        None when some barrier sits inside control flow (the state machine's case)."""
        bars = sorted(pc for pc, (_, ins) in enumerate(self.items) if ins.op == "BarSync")
        for pc, (_, ins) in enumerate(self.items):
            if ins.op in ("BRA", "LOOP"):
                lo, hi = sorted((pc, self.label(ins.target)))
                if any(lo <= bar <= hi and bar != pc for bar in bars):
                    return None
        seen: set[tuple[Ctx, int]] = set()
        todo: list[tuple[Ctx, int]] = [((), 0)]
        while todo:
            ctx, pc = todo.pop()
            if pc >= len(self.items) or (ctx, pc) in seen:
                continue
            if len(seen) >= MAX_BLOCKS:
                return None
            seen.add((ctx, pc))
            if ctx and self.items[pc][1].op == "BarSync":
                return None
            todo.extend(self._successors(ctx, pc))
        return [0] + [bar + 1 for bar in bars if bar + 1 < len(self.items)]

    def _region_loops(self, starts: list[int]) -> None:
        """One loop over the block's lanes per barrier-separated region; registers and
        pools live in per-lane arrays, a lane that ended skips the later regions."""
        b = self.b
        alive = self.alloca(I8, "alive", self.lanes_max)
        lane_var = self.alloca(I64, "lane")
        nlanes = b.mul(b.mul(self.counts[0], self.counts[1]), self.counts[2])
        nx, ny = self.counts[0], self.counts[1]
        for r, start in enumerate([None] + starts):
            head, body, latch, done = (self.new_block(f"region{r}.{x}") for x in ("head", "lane", "latch", "done"))
            b.store(i64(0), lane_var)
            b.branch(head)
            b.position_at_end(head)
            b.cbranch(b.icmp_signed("<", b.load(lane_var), nlanes), body, done)
            b.position_at_end(latch)
            b.store(b.add(b.load(lane_var), i64(1)), lane_var)
            b.branch(head)
            b.position_at_end(body)
            lane = b.load(lane_var)
            flag = at(b, alive, lane, I8)
            self._lane_pointers(lane)
            if start is None:  # every lane of the block starts fresh and alive
                self._reset_lane()
                b.store(ir.Constant(I8, 1), flag)
                b.branch(latch)
            else:
                run = self.new_block(f"region{r}.run")
                b.cbranch(b.icmp_unsigned("!=", b.load(flag, typ=I8), ir.Constant(I8, 0)), run, latch)
                b.position_at_end(run)
                self._specials([b.srem(lane, nx), b.srem(b.sdiv(lane, nx), ny), b.sdiv(lane, b.mul(nx, ny))])
                self._reset_loop_limits()  # this lane's counters were restored, not started at zero
                self.lane_end = self.new_block(f"region{r}.end")
                self.region_next = latch
                self.emit_lane_code(start)
                b.position_at_end(self.lane_end)
                b.store(ir.Constant(I8, 0), flag)
                b.branch(latch)
            b.position_at_end(done)
        self.region_next = None
        b.branch(self.block_latch)

    # ------------------------------------------------------- barrier state machine
    def _state_machine(self) -> None:
        b = self.b
        n = self.lanes_max
        resume = self.alloca(I32, "resume", n)
        seen = self.alloca(I64, "barrier.seen")
        self.barrier_k = self.alloca(I64, "barrier.k")
        lane_var = self.alloca(I64, "lane")
        nlanes = b.mul(b.mul(self.counts[0], self.counts[1]), self.counts[2])
        # Every lane of the block starts fresh: state zeroed, resume point 0.
        b.store(i64(0), lane_var)
        init_head, init_body, round_head = self.new_block("init.head"), self.new_block("init.body"), \
            self.new_block("round.head")
        b.branch(init_head)
        b.position_at_end(init_head)
        lane = b.load(lane_var)
        b.cbranch(b.icmp_signed("<", lane, nlanes), init_body, round_head)
        b.position_at_end(init_body)
        self._lane_pointers(lane)
        self._reset_lane()
        b.store(ir.Constant(I32, 0), at(b, resume, lane, I32))
        b.store(b.add(lane, i64(1)), lane_var)
        b.branch(init_head)
        # A round: every live lane runs to its next barrier or its end.
        b.position_at_end(round_head)
        b.store(i64(-1), seen)
        b.store(i64(0), lane_var)
        rl_head, rl_body, rl_latch, round_end = (self.new_block(x) for x in
                                                 ("round.lane.head", "round.lane", "round.lane.latch", "round.end"))
        b.branch(rl_head)
        b.position_at_end(rl_head)
        lane = b.load(lane_var)
        b.cbranch(b.icmp_signed("<", lane, nlanes), rl_body, round_end)
        b.position_at_end(rl_body)
        lane = b.load(lane_var)
        slot = at(b, resume, lane, I32)
        point = b.load(slot, typ=I32)
        dispatch = self.new_block("dispatch")
        b.cbranch(b.icmp_signed("<", point, ir.Constant(I32, 0)), rl_latch, dispatch)
        b.position_at_end(dispatch)
        self._lane_pointers(lane)
        nx, ny = self.counts[0], self.counts[1]
        tid = [b.srem(lane, nx), b.srem(b.sdiv(lane, nx), ny), b.sdiv(lane, b.mul(nx, ny))]
        self._specials(tid)
        self._reset_loop_limits()  # this lane's counters were restored, not started at zero
        switch_block = b.block
        # Lane end: never resumed again. Suspension: check all waiters share a barrier.
        self.lane_end = self.new_block("lane.end")
        suspend = self.new_block("lane.suspend")
        self.suspend, self.resume_slot = suspend, slot
        self.resume_points: dict[tuple[Ctx, int], int] = {}
        b.position_at_end(self.lane_end)
        b.store(ir.Constant(I32, -1), slot)
        b.branch(rl_latch)
        b.position_at_end(suspend)
        k, s = b.load(self.barrier_k), b.load(seen)
        b.store(k, seen)
        first = b.icmp_signed("==", s, i64(-1))
        ok = b.or_(first, b.icmp_signed("==", s, k))
        bad, good = self.new_block("barrier.mismatch"), rl_latch
        b.cbranch(ok, good, bad)
        b.position_at_end(bad)
        lo = b.select(b.icmp_signed("<", s, k), s, k)
        hi = b.select(b.icmp_signed("<", s, k), k, s)
        for j, v in enumerate((i64(ERR_BARRIER), i64(self.index), lo, hi)):
            b.store(v, at(b, self.err, i64(j), I64))
        b.branch(self.exit)
        b.position_at_end(rl_latch)
        b.store(b.add(b.load(lane_var), i64(1)), lane_var)
        b.branch(rl_head)
        b.position_at_end(round_end)
        b.cbranch(b.icmp_signed("==", b.load(seen), i64(-1)), self.block_latch, round_head)
        # The lane's code, then the dispatch switch over its resume points.
        b.position_at_end(switch_block)
        start = self.new_block("lane.start")
        sw = b.switch(point, rl_latch)
        sw.add_case(ir.Constant(I32, 0), start)
        b.position_at_end(start)
        self.emit_lane_code()
        for (ctx, pc), rid in self.resume_points.items():
            sw.add_case(ir.Constant(I32, rid), self.blocks[(ctx, pc)])
