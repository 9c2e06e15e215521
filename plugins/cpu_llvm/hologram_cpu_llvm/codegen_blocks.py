"""Per-block accumulators for float sums into one constant element.

A full reduction (`s = sum(x)`) sends every lane's contribution to one element.
Accumulating millions of contributions one by one into the chunk's partial (runtime.py)
errs by up to n * eps * sum|x| (3.8e-4 relative for a 20M-term f32 sum), far beyond the
log2(n) bound of the contract. So each block sums into its own accumulator (`block`,
-0.0 at the block's start; `reassoc`, so the lane loop keeps vector partials of it), and
at the block's end the block total is added into a running sum with Kahan's
compensation (`s`, `c`), beside a plain sum whose non-finite value (inf, NaN) is the
answer whenever it arises, as in the lowering's in-lane sums. The partial arrives
holding the identity (-0.0), so the sums start from it.

Only a buffer no lane scatters into (every contribution to it at a constant element)
gets block accumulators: a scattered contribution may hit the same element. (Min and
max need none: their order does not change the value. A block `maxnum` with a separate
NaN flag was measured no faster than the IEEE `maximum` per element, as x86 needs a
NaN fix-up for both.)
"""

from __future__ import annotations

import math

from llvmlite import ir

from hologram.core.isa import Addr, Instr
from hologram.core.types import DType

from .codegen_memory import REDUCE_COMBINE
from .codegen_types import at, i64, intrinsic, reg_type

_SUMS = ("ReduceAdd", "ResAccum")


class BlockAccumulators:
    """Mixin of the stage emitter: `self.b`, `self.items`, `self.buffers`, `self.sizes`,
    `self.partial_ptr`, `alloca`, `new_block` and `_constant_in_bounds` come from it."""

    def _block_accumulators_entry(self) -> None:
        """The accumulators of this stage, allocated in the entry block."""
        b = self.b
        self.block_sums: dict[tuple[str, int], tuple[ir.Type, ir.Value, ir.Value, ir.Value, ir.Value]] = {}
        reductions = [i for _, i in self.items if i.op in REDUCE_COMBINE and i.addr is not None]
        scattered = {i.addr.buffer for i in reductions if i.addr.index is not None}
        for ins in reductions:
            a = ins.addr
            key = (a.buffer, a.offset)
            if ins.op not in _SUMS or a.buffer in scattered or key in self.block_sums \
                    or ins.dtype not in (DType.F32, DType.F64) or self.buffers[a.buffer].dtype is not ins.dtype:
                continue
            ty = reg_type(ins.dtype)
            ptrs = [self.alloca(ty, f"sum.{a.buffer}.{a.offset}.{part}") for part in ("block", "s", "c", "plain")]
            for ptr, v in zip(ptrs[1:], (-0.0, 0.0, -0.0)):
                b.store(ir.Constant(ty, v), ptr)
            self.block_sums[key] = (ty, *ptrs)

    def _block_accumulators_reset(self) -> None:
        """At a block's start: empty accumulators."""
        b = self.b
        for ty, acc, _, _, _ in self.block_sums.values():
            b.store(ir.Constant(ty, -0.0), acc)

    def _block_accumulate(self, ins: Instr, v: ir.Value) -> bool:
        """Add the contribution `v` of reduction `ins` to its block accumulator; False
        when it has none (it goes to the partial in memory)."""
        if ins.addr is None or ins.addr.index is not None:
            return False
        summed = self.block_sums.get((ins.addr.buffer, ins.addr.offset))
        if summed is None:
            return False
        b, ty, acc = self.b, summed[0], summed[1]
        b.store(b.fadd(b.load(acc, typ=ty), v, flags=("reassoc",)), acc)
        return True

    def _block_accumulators_flush(self) -> None:
        """At a block's end: each accumulator into its running value, and that into the
        partial."""
        b = self.b
        for (name, offset), (ty, acc, s_ptr, c_ptr, plain_ptr) in self.block_sums.items():
            blk, s, c = b.load(acc, typ=ty), b.load(s_ptr, typ=ty), b.load(c_ptr, typ=ty)
            plain = b.fadd(b.load(plain_ptr, typ=ty), blk)
            y = b.fsub(blk, c)
            t = b.fadd(s, y)
            b.store(b.fsub(b.fsub(t, s), y), c_ptr)
            b.store(t, s_ptr)
            b.store(plain, plain_ptr)
            finite = b.fcmp_ordered("<", intrinsic(b, "fabs", ty, [plain]), ir.Constant(ty, math.inf))
            self._store_partial(name, offset, ty, b.select(finite, t, plain))

    def _store_partial(self, name: str, offset: int, ty: ir.Type, value: ir.Value) -> None:
        """Store `value` at element `offset` of `name`'s partial; when the element is
        checked and may be out of range, only if it is not (no lane reached it then: its
        check failed first, and the partial must not be written)."""
        b = self.b
        if name in self.sizes and not self._constant_in_bounds(Addr(name, None, offset), self.buffers[name]):
            store, done = self.new_block("sum.store"), self.new_block("sum.done")
            b.cbranch(b.icmp_unsigned("<", i64(offset), self.sizes[name]), store, done)
            b.position_at_end(store)
            b.store(value, at(b, self.partial_ptr[name], i64(offset), ty))
            b.branch(done)
            b.position_at_end(done)
        else:
            b.store(value, at(b, self.partial_ptr[name], i64(offset), ty))
