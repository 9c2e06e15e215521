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

Only a buffer no lane scatters into gets block accumulators: every contribution to it
at a constant element, or at an element the same for every lane of a block (a
*block-uniform* index: computed before any branch from specials that do not vary
within a block, symbols and constants, as the item of a batched program is,
hologram/passes/isa_batch.py). A uniform element's block total joins a running sum for
that element; when a block's element differs from the last one's, the running sum
restarts from what the partial holds for the new element. A scattered contribution may
hit the same element as another lane's, and is added to the partial in memory, in the
buffer's type. (Min and
max need none: their order does not change the value. A block `maxnum` with a separate
NaN flag was measured no faster than the IEEE `maximum` per element, as x86 needs a
NaN fix-up for both.)
"""

from __future__ import annotations

import math
from typing import Sequence

import attrs
from llvmlite import ir

from hologram.backend import Addr, DType, Imm, Instr, Reg, Special, Stage, Sym

from .codegen_memory import REDUCE_COMBINE
from .codegen_types import at, convert, i64, intrinsic, reg_type

_SUMS = ("ReduceAdd", "ResAccum")
_VARYING = ("gid", "ctaid", "tid")  # specials that vary from block to block or lane to lane
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
    element: ir.Value | None = None  # a block-uniform index: the block's element (-1: none yet)
    last: ir.Value | None = None  # the element the running sums are for


class BlockAccumulators:
    """Mixin of the stage emitter: `self.b`, `self.stage`, `self.items`, `self.buffers`,
    `self.sizes`, `self.partial_ptr`, `alloca`, `new_block`, `read_int`, `size_of` and
    `_constant_in_bounds` come from it."""

    def _block_accumulators_entry(self) -> None:
        """The accumulators of this stage, allocated in the entry block."""
        b = self.b
        self.block_sums: dict[tuple[str, int, str | None], _BlockSum] = {}
        reductions = [i for _, i in self.items if i.op in REDUCE_COMBINE and i.addr is not None]
        uniform = block_uniform(self.stage, [i for _, i in self.items])
        scattered = {i.addr.buffer for i in reductions if i.addr.index is not None and i.addr.index.name not in uniform}
        for ins in reductions:
            a = ins.addr
            key = _key(ins)
            if ins.op not in _SUMS or a.buffer in scattered or key in self.block_sums \
                    or ins.dtype not in _ACCUMULATOR or self.buffers[a.buffer].dtype is not ins.dtype:
                continue
            acc = _ACCUMULATOR[ins.dtype]
            ty = reg_type(acc)
            name = f"sum.{a.buffer}.{a.offset}.{a.index.name if a.index else ''}"
            ptrs = [self.alloca(ty, f"{name}.{part}") for part in ("block", "s", "c", "plain")]
            for ptr, v in zip(ptrs[1:], (-0.0, 0.0, -0.0)):
                b.store(ir.Constant(ty, v), ptr)
            element = last = None
            if a.index is not None:
                element, last = self.alloca(ir.IntType(64), f"{name}.element"), self.alloca(ir.IntType(64), f"{name}.last")
                b.store(i64(-1), element)
                b.store(i64(-1), last)
            self.block_sums[key] = _BlockSum(ins.dtype, acc, *ptrs, element, last)

    def _block_accumulators_reset(self) -> None:
        """At a block's start: empty accumulators."""
        b = self.b
        for summed in self.block_sums.values():
            b.store(ir.Constant(reg_type(summed.acc), -0.0), summed.block)

    def _block_accumulate(self, ins: Instr, v: ir.Value) -> bool:
        """Add the contribution `v` of reduction `ins` to its block accumulator; False
        when it has none (it goes to the partial in memory)."""
        if ins.addr is None:
            return False
        summed = self.block_sums.get(_key(ins))
        if summed is None:
            return False
        b, ty = self.b, reg_type(summed.acc)
        if summed.element is not None:  # every lane of the block stores the same element
            b.store(b.add(self.read_int(ins.addr.index), i64(ins.addr.offset)), summed.element)
        term = convert(b, v, summed.term, summed.acc)
        b.store(b.fadd(b.load(summed.block, typ=ty), term, flags=("reassoc",)), summed.block)
        return True

    def _block_accumulators_flush(self) -> None:
        """At a block's end: each accumulator into its running value, and that into the
        partial."""
        b = self.b
        for (name, offset, _), summed in self.block_sums.items():
            ty = reg_type(summed.acc)
            if summed.element is not None:
                offset = self._restart_if_moved(name, summed)
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

    def _restart_if_moved(self, name: str, summed: _BlockSum) -> ir.Value:
        """The block's element of a block-uniform sum; when it is not the element the
        running sums are for, they restart from the partial's value there. (A block with
        no contribution has a total of -0.0, which changes nothing wherever it goes.)"""
        b, ty = self.b, reg_type(summed.acc)
        element = b.load(summed.element, typ=ir.IntType(64))
        element = b.select(b.icmp_signed("<", element, i64(0)), i64(0), element)
        moved, same = self.new_block("sum.moved"), self.new_block("sum.same")
        b.cbranch(b.icmp_signed("!=", element, b.load(summed.last, typ=ir.IntType(64))), moved, same)
        b.position_at_end(moved)
        inside, read, have = self.new_block("sum.read"), self.new_block("sum.start"), b.block
        b.cbranch(b.icmp_unsigned("<", element, self.size_of(name)), read, inside)
        b.position_at_end(read)
        term_ty = reg_type(summed.term)
        current = convert(b, b.load(at(b, self.partial_ptr[name], element, term_ty), typ=term_ty), summed.term,
                          summed.acc)
        b.branch(inside)
        b.position_at_end(inside)
        start = b.phi(ty)
        start.add_incoming(ir.Constant(ty, -0.0), have)
        start.add_incoming(current, read)
        for ptr, v in ((summed.s, start), (summed.c, ir.Constant(ty, 0.0)), (summed.plain, start)):
            b.store(v, ptr)
        b.store(element, summed.last)
        b.branch(same)
        b.position_at_end(same)
        return element

    def _store_partial(self, name: str, offset: int, ty: ir.Type, value: ir.Value) -> None:
        """Store `value` at element `offset` of `name`'s partial; when the element is
        checked and may be out of range, only if it is not (no lane reached it then: its
        check failed first, and the partial must not be written)."""
        b = self.b
        element = offset if isinstance(offset, ir.Value) else i64(offset)
        if isinstance(offset, ir.Value) or name in self.sizes and \
                not self._constant_in_bounds(Addr(name, None, offset), self.buffers[name]):
            store, done = self.new_block("sum.store"), self.new_block("sum.done")
            b.cbranch(b.icmp_unsigned("<", element, self.size_of(name)), store, done)
            b.position_at_end(store)
            b.store(value, at(b, self.partial_ptr[name], element, ty))
            b.branch(done)
            b.position_at_end(done)
        else:
            b.store(value, at(b, self.partial_ptr[name], element, ty))


def _key(ins: Instr) -> tuple[str, int, str | None]:
    a = ins.addr
    return a.buffer, a.offset, None if a.index is None else a.index.name


def block_uniform(stage: Stage, items: Sequence[Instr]) -> frozenset[str]:
    """Registers that hold the same value in every lane of a block: written once, in the
    straight-line start of the stage (before any label or branch can make lanes differ),
    from immediates, `$` operands, specials constant within a block (`gid`, `ctaid` and
    `tid` on an axis of block size 1 or none; any `ntid`, `nctaid`, `gdim`) and registers
    like these; or loaded from such an address of a buffer the stage never writes."""
    writes: dict[str, int] = {}
    for ins in items:
        if ins.dst is not None:
            writes[ins.dst.name] = writes.get(ins.dst.name, 0) + 1
    written = {i.addr.buffer for i in items if i.addr is not None and i.op != "LDG"}
    uniform: set[str] = set()

    def constant(o: object) -> bool:
        if isinstance(o, (Imm, Sym)):
            return True
        if isinstance(o, Special):
            kind, axis = o.name.split(".")
            k = "xyz".index(axis)
            return kind not in _VARYING or k >= len(stage.block) or stage.block[k] == 1
        return isinstance(o, Reg) and o.name in uniform

    for ins in items:
        if ins.op in ("BRA", "LOOP", "CALL", "RET", "EXIT", "BarSync") or ins.pred is not None:
            break
        if ins.dst is None or writes[ins.dst.name] != 1 or not all(constant(o) for o in ins.srcs):
            continue
        if ins.addr is not None and not (ins.op == "LDG" and ins.addr.buffer not in written
                                         and (ins.addr.index is None or constant(ins.addr.index))):
            continue
        uniform.add(ins.dst.name)
    return frozenset(uniform)
