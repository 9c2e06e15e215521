"""LOOP, and the polls of the cancel flag that let Ctrl-C stop a launch (mixed into
StageEmitter).

`LOOP %c, L` is `c = c - 1, saturating at the type's minimum; if c > 0: goto L`
(docs/isa.md): a counter at the minimum must not wrap to the maximum.

Polls (cancel.py; docs/cpu-llvm.md, "Stopping a launch"): a relaxed load of the flag
byte, and on a set flag a load of err[3] (the launch's CANCELLABLE mark), then
ERR_CANCELLED and a return. Where: after every block, at every back-edge of a loop that
holds another loop or a CALL, and at every POLL_ITERATIONS-th back-edge of an innermost
loop. So between two polls a lane runs at most POLL_ITERATIONS trips of one innermost
loop besides straight-line code: every loop's time is bounded, however deep the nest.

An innermost loop is polled in stretches because a poll in every trip would be a second
exit from the loop, and LLVM vectorizes only loops with one exit and a trip count it can
compute (a row reduction's inner loop is most of a matvec). Its back-edge is taken
without a poll while the counter is above the loop's *limit* (a stack slot), which
stays fixed while the loop runs, so the trip count of that stretch is `c - limit`;
when the counter reaches the limit, a poll, and the limit moves POLL_ITERATIONS lower.
That the stretch is short rests on one invariant, c <= limit + POLL_ITERATIONS at
every instruction: every write of the counter (other than LOOP's own decrement, which
only lowers it) sets the limit from the value written; the limits start at the type's
maximum; and where a lane's registers are restored rather than started at zero (the
barrier layouts, which run lanes by turns), every limit is reset to the maximum.
"""

from __future__ import annotations

from llvmlite import ir

from hologram.backend import DType, Instr, Reg
from hologram.backend.llvm.control import Ctx
from hologram.errors import VerifyError

from .abi import CANCEL_SYMBOL, CANCELLABLE, ERR_CANCELLED
from .codegen_types import I8, I64, at, i64, reg_type

POLL_ITERATIONS = 1024  # trips of an innermost loop between two polls


class LoopLowering:
    """Uses StageEmitter's builder, blocks, items, labels and register slots."""

    def _loops_setup(self) -> None:
        """The cancel flag's declaration, and a limit slot (at the type's maximum) for each
        innermost LOOP: one with no LOOP and no CALL between its label and itself."""
        flag = self.module.globals.get(CANCEL_SYMBOL)
        self.cancel_flag = flag if flag is not None else ir.GlobalVariable(self.module, I8, CANCEL_SYMBOL)
        self.loop_limits: dict[int, tuple[ir.Value, DType]] = {}  # LOOP pc -> its limit slot, the counter's type
        self.limited: dict[str, list[int]] = {}  # counter register -> the LOOPs it counts
        for pc, (_, ins) in enumerate(self.items):
            counter = ins.srcs[0] if ins.op == "LOOP" and ins.srcs else None
            head = self.labels.get(ins.target) if counter is not None else None
            t = self.reg_types.get(counter.name) if isinstance(counter, Reg) else None
            if head is None or head > pc or t is None or not t.is_int:
                continue  # refused when emitted
            if any(i.op in ("LOOP", "CALL") for _, i in self.items[head:pc]):
                continue
            slot = self.alloca(reg_type(t), f"loop.limit.{pc}")
            self.loop_limits[pc] = slot, t
            with self.b.goto_block(self.entry):
                self.b.store(ir.Constant(reg_type(t), int(t.max)), slot)
            self.limited.setdefault(counter.name, []).append(pc)

    def _reset_loop_limits(self) -> None:
        """Every limit back to its type's maximum (a lane whose registers were restored)."""
        for slot, t in self.loop_limits.values():
            self.b.store(ir.Constant(reg_type(t), int(t.max)), slot)

    def _counter_written(self, name: str, value: ir.Value) -> None:
        """The limits of the loops `name` counts, after `value` was written to it."""
        for pc in self.limited.get(name, ()):
            slot, t = self.loop_limits[pc]
            self.b.store(self._limit(value, t), slot)

    def _limit(self, c: ir.Value, t: DType) -> ir.Value:
        """POLL_ITERATIONS below `c`, or 1 when that is lower (no wrap in any type)."""
        b = self.b
        step = ir.Constant(c.type, min(POLL_ITERATIONS, int(t.max)))
        above = (b.icmp_signed if t.is_signed else b.icmp_unsigned)(">", c, step)
        return b.select(above, b.sub(c, step), ir.Constant(c.type, 1))

    def poll_cancel(self, k: int) -> None:
        """Stop here with ERR_CANCELLED if Ctrl-C raised the flag during a cancellable
        launch: one relaxed load and a branch, unless the flag is up."""
        b = self.b
        flag = b.load_atomic(self.cancel_flag, "monotonic", 1, typ=I8)
        raised, go_on = self.new_block("cancel.raised"), self.new_block("cancel.no")
        b.cbranch(b.icmp_unsigned("!=", flag, ir.Constant(I8, 0)), raised, go_on).set_weights([1, 1 << 20])
        b.position_at_end(raised)
        mark = b.load(at(b, self.err, i64(3), I64), typ=I64)
        self.fail(b.icmp_signed("!=", mark, i64(CANCELLABLE)), ERR_CANCELLED, k, i64(0))
        b.branch(go_on)
        b.position_at_end(go_on)

    def _loop(self, ctx: Ctx, pc: int, k: int, ins: Instr) -> None:
        target = self.label(ins.target)
        if target > pc:
            raise VerifyError(f"cpu_llvm: stage '{self.stage.name}': instruction {k}: LOOP must jump backward")
        b, counter = self.b, ins.srcs[0]
        ct = self.type_of(counter)
        if not isinstance(counter, Reg) or not ct.is_int:
            raise VerifyError(f"cpu_llvm: stage '{self.stage.name}': instruction {k}: the LOOP counter must be an "
                              f"integer register")
        ptr, rt = self.reg_ptr[counter.name], reg_type(ct)
        above = b.icmp_signed if ct.is_signed else b.icmp_unsigned
        one = ir.Constant(rt, 1)
        c = b.load(ptr, typ=rt)
        limit = self.loop_limits.get(pc, (None,))[0]
        if limit is not None:  # innermost: back without a poll while above the limit
            fast, slow = self.new_block("loop.fast"), self.new_block("loop.slow")
            b.cbranch(above(">", c, b.load(limit, typ=rt)), fast, slow)
            b.position_at_end(fast)
            b.store(b.sub(c, one, flags=("nsw" if ct.is_signed else "nuw",)), ptr)  # c > limit >= 1
            b.branch(self.block_for(ctx, target))
            b.position_at_end(slow)
        again, leave = self.new_block("loop.again"), self.new_block("loop.leave")
        b.cbranch(above(">", c, one), again, leave)
        b.position_at_end(again)
        self.poll_cancel(k)
        c1 = b.sub(c, one)
        b.store(c1, ptr)
        if limit is not None:
            b.store(self._limit(c1, ct), limit)
        b.branch(self.block_for(ctx, target))
        b.position_at_end(leave)  # c <= 1: the decrement stops at the type's minimum
        lowest = ir.Constant(rt, int(ct.min))
        b.store(b.select(b.icmp_unsigned("==", c, lowest), c, b.sub(c, one)), ptr)
        b.branch(self.block_for(ctx, pc + 1))
