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

f16 contributions accumulate in f32, where each is exact (one f16 running sum stops
growing at 2048 when its terms are below 1), and the chunk's partial, an f16 element,
is stored from the f32 running sum, so each chunk rounds once. (The lowering never
emits an f16 sum: it sums f16 terms in an f32 temp, WIDE_CROSS_LANE of
hologram/lower/plan.py, so this is for hand-written programs.)

Only a buffer no lane scatters into (every contribution to it at a constant element)
gets block accumulators: a scattered contribution may hit the same element, and is
added to the partial in memory, in the buffer's type. (Min and
max need none: their order does not change the value. A block `maxnum` with a separate
NaN flag was measured no faster than the IEEE `maximum` per element, as x86 needs a
NaN fix-up for both.)
"""

from __future__ import annotations

import math

import attrs
from llvmlite import ir

from hologram.core.types import DType
from hologram.isa.program import Addr, Instr

from .codegen_memory import REDUCE_COMBINE
from .codegen_types import at, convert, i64, intrinsic, reg_type

_SUMS = ("ReduceAdd", "ResAccum")
# The type a block sums contributions of each float type in.
_ACCUMULATOR = {DType.F16: DType.F32, DType.F32: DType.F32, DType.F64: DType.F64}


@attrs.frozen(eq=False)
class _BlockSum:
    """The stack slots of one element's block sum: the block's total, the running
    compensated sum `s` with its compensation `c`, and the plain running sum, all of type
    `acc` (`_ACCUMULATOR[term]`)."""

    term: DType
    acc: DType
    block: ir.Value
    s: ir.Value
    c: ir.Value
    plain: ir.Value


class BlockAccumulators:
    """Mixin of the stage emitter: `self.b`, `self.items`, `self.buffers`, `self.sizes`,
    `self.partial_ptr`, `alloca`, `new_block` and `_constant_in_bounds` come from it."""

    def _block_accumulators_entry(self) -> None:
        """The accumulators of this stage, allocated in the entry block."""
        b = self.b
        self.block_sums: dict[tuple[str, int], _BlockSum] = {}
        reductions = [i for _, i in self.items if i.op in REDUCE_COMBINE and i.addr is not None]
        scattered = {i.addr.buffer for i in reductions if i.addr.index is not None}
        for ins in reductions:
            a = ins.addr
            key = (a.buffer, a.offset)
            if ins.op not in _SUMS or a.buffer in scattered or key in self.block_sums \
                    or ins.dtype not in _ACCUMULATOR or self.buffers[a.buffer].dtype is not ins.dtype:
                continue
            acc = _ACCUMULATOR[ins.dtype]
            ty = reg_type(acc)
            ptrs = [self.alloca(ty, f"sum.{a.buffer}.{a.offset}.{part}") for part in ("block", "s", "c", "plain")]
            for ptr, v in zip(ptrs[1:], (-0.0, 0.0, -0.0)):
                b.store(ir.Constant(ty, v), ptr)
            self.block_sums[key] = _BlockSum(ins.dtype, acc, *ptrs)

    def _block_accumulators_reset(self) -> None:
        """At a block's start: empty accumulators."""
        b = self.b
        for summed in self.block_sums.values():
            b.store(ir.Constant(reg_type(summed.acc), -0.0), summed.block)

    def _block_accumulate(self, ins: Instr, v: ir.Value) -> bool:
        """Add the contribution `v` of reduction `ins` to its block accumulator; False
        when it has none (it goes to the partial in memory)."""
        if ins.addr is None or ins.addr.index is not None:
            return False
        summed = self.block_sums.get((ins.addr.buffer, ins.addr.offset))
        if summed is None:
            return False
        b, ty = self.b, reg_type(summed.acc)
        term = convert(b, v, summed.term, summed.acc)
        b.store(b.fadd(b.load(summed.block, typ=ty), term, flags=("reassoc",)), summed.block)
        return True

    def _block_accumulators_flush(self) -> None:
        """At a block's end: each accumulator into its running value, and that into the
        partial."""
        b = self.b
        for (name, offset), summed in self.block_sums.items():
            ty = reg_type(summed.acc)
            blk, s, c = (b.load(ptr, typ=ty) for ptr in (summed.block, summed.s, summed.c))
            plain = b.fadd(b.load(summed.plain, typ=ty), blk)
            y = b.fsub(blk, c)
            t = b.fadd(s, y)
            b.store(b.fsub(b.fsub(t, s), y), summed.c)
            b.store(t, summed.s)
            b.store(plain, summed.plain)
            finite = b.fcmp_ordered("<", intrinsic(b, "fabs", ty, [plain]), ir.Constant(ty, math.inf))
            total = convert(b, b.select(finite, t, plain), summed.acc, summed.term)
            self._store_partial(name, offset, reg_type(summed.term), total)

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
