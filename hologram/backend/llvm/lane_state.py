"""A lane's own state as every target keeps it: the phase counter and the pools'
allocation stack (docs/isa.md, "Pools" and "Atlas"), and how each reduction combines.

`PoolsAndPhase` is a mixin for a backend's stage emitter (with `LaneCode`), which provides
`b`, `stage`, `backend_name`, `read_int`, `raw`, `write`, `fail`, and:

- `phase_ptr` (the lane's i64 phase);
- for pools: `pool_ptr` (pool -> its elements), `pool_ids` (pool -> index),
  `stack_base`/`stack_pool` (the allocation stack: each live allocation's first element
  and pool index, `stack_cap` slots), `sp_ptr` (the stack's depth);
- `element_at(base, index, ety)` (an element's address), `pool_top_at(index)` (the
  address of pool `index`'s top: its elements in use) and `zero_fill(ptr, nbytes)`.
"""

from __future__ import annotations

from llvmlite import ir

from hologram.core.errors import VerifyError
from hologram.core.types import DType
from hologram.isa.program import Imm, Instr, Stage

from ..error_record import ERR_POOL_FREE, ERR_POOL_FULL
from .types import I32, I64, i64, int_value, mem_type

# How each reduction opcode combines a contribution into its target (a VALUE_OPS opcode).
REDUCE_COMBINE = {"ReduceAdd": "ADD", "ResAccum": "ADD", "ReduceMul": "MUL", "ReduceMin": "MIN", "ReduceMax": "MAX"}
PHASES = 768  # PhaseAdv is modulo this (docs/isa.md, "Atlas")


def allocation_stack_depth(stage: Stage) -> int:
    """The most allocations a lane of `stage` can hold at once (its allocation stack's
    slots): each live allocation of a pool takes at least the smallest count any PoolAlloc
    of it asks for, and together they fit the pool (a zero-element allocation counts as
    one slot of the pool)."""
    smallest: dict[str, int] = {}
    for item in stage.body:
        if isinstance(item, Instr) and item.op == "PoolAlloc" and isinstance(item.count, int):
            smallest[item.target] = min(smallest.get(item.target, item.count), item.count)
    return max(1, sum(p.size // max(1, smallest[p.name]) for p in stage.pools if p.name in smallest))


class PoolsAndPhase:
    def pool_top(self, name: str) -> ir.Value:
        """The address of pool `name`'s top (its elements in use)."""
        return self.pool_top_at(i64(self.pool_ids[name]))

    def phase_adv(self, ins: Instr) -> None:
        b, src = self.b, ins.srcs[0]
        if isinstance(src, Imm):
            step = i64(int(src.value) % PHASES)
        else:
            v, have = self.raw(src)
            if have.is_unsigned or have.is_bool:
                step = b.urem(int_value(b, v, have), i64(PHASES))
            else:
                r = b.srem(int_value(b, v, have), i64(PHASES))
                step = b.select(b.icmp_signed("<", r, i64(0)), b.add(r, i64(PHASES)), r)
        b.store(b.urem(b.add(b.load(self.phase_ptr, typ=I64), step), i64(PHASES)), self.phase_ptr)

    def pool_alloc(self, ins: Instr, k: int) -> None:
        """`count` zeroed elements on top of the pool, their first index to `dst`, pushed
        on the allocation stack; ERR_POOL_FULL when the pool or the stack is full."""
        b = self.b
        pool = {m.name: m for m in self.stage.pools}.get(ins.target)
        if pool is None or not isinstance(ins.count, int) or ins.count < 0:
            raise VerifyError(f"{self.backend_name}: stage '{self.stage.name}': bad PoolAlloc of {ins.count!r} "
                              f"elements from {ins.target!r}")
        top_ptr = self.pool_top(pool.name)
        top = b.load(top_ptr, typ=I64)
        new_top = b.add(top, i64(ins.count))
        sp = b.load(self.sp_ptr, typ=I64)
        fits = b.and_(b.icmp_signed("<=", new_top, i64(pool.size)), b.icmp_signed("<", sp, i64(self.stack_cap)))
        self.fail(fits, ERR_POOL_FULL, k, top)
        start = self.element_at(self.pool_ptr[pool.name], top, mem_type(pool.dtype))
        self.zero_fill(start, ins.count * (1 if pool.dtype is DType.BOOL else pool.dtype.itemsize))
        b.store(new_top, top_ptr)
        b.store(top, self.element_at(self.stack_base, sp, I64))
        b.store(ir.Constant(I32, self.pool_ids[pool.name]), self.element_at(self.stack_pool, sp, I32))
        b.store(b.add(sp, i64(1)), self.sp_ptr)
        self.write(ins.dst, top, DType.I64)

    def pool_free(self, ins: Instr, k: int) -> None:
        """Pop the most recent allocation, which must be handle `srcs[0]` (ERR_POOL_FREE
        otherwise): its pool's top goes back to it."""
        b = self.b
        h = self.read_int(ins.srcs[0])
        sp = b.load(self.sp_ptr, typ=I64)
        nonempty = b.icmp_signed(">", sp, i64(0))
        last = b.select(nonempty, b.sub(sp, i64(1)), i64(0))
        base = b.load(self.element_at(self.stack_base, last, I64), typ=I64)
        self.fail(b.and_(nonempty, b.icmp_signed("==", base, h)), ERR_POOL_FREE, k, h)
        pool_id = b.load(self.element_at(self.stack_pool, last, I32), typ=I32)
        b.store(h, self.pool_top_at(b.zext(pool_id, I64)))
        b.store(last, self.sp_ptr)
