"""Lane state and memory for the stage emitter: registers, pools, phase, addresses.

`LaneMemory` is the part of `StageEmitter` (codegen_control.py) that decides where a
lane's state lives and how memory operands become checked element pointers:

- registers, the phase counter, each pool's top and the lane's allocation stack are
  arrays with one slot per lane of the block when the stage has barriers, and one slot
  (an alloca mem2reg promotes) otherwise;
- pools are byte areas, one per lane;
- all of these and the shared arrays are the stage's scratch (docs/cpu-llvm.md, "Scratch
  and the stack"): the arrays that fit STACK_SCRATCH_BYTES, smallest first, are allocas
  in the stage function's frame, the rest one block from `malloc` per call, freed on
  every exit (a verified stage's scratch is up to ~1 MiB, docs/isa.md "Block scratch",
  more than a thread's stack should hold);
- global and shared accesses are checked only when marked `.chk` (the verifier proved
  the others), pool accesses always, against the pool's current top: a pool's extent
  changes at run time.
"""

from __future__ import annotations

import math

from llvmlite import ir

from hologram.backend import OPCODES, DType, Instr
from hologram.backend.llvm.lane_state import (  # noqa: F401  (REDUCE_COMBINE, allocation_stack_depth: read here)
    REDUCE_COMBINE, PoolsAndPhase, allocation_stack_depth,
)
from hologram.errors import VerifyError

from .abi import ERR_OOB_GLOBAL, ERR_OOB_POOL, ERR_OOB_SHARED, ERR_SCRATCH
from .codegen_types import I8, I32, I64, PTR, at, byte_size, const, i64, mem_type, reg_type

# The most scratch a stage function keeps in its frame; the rest is on the heap. Well
# below any thread's stack (a Python thread's is 8 MiB on Linux, as small as 512 KiB
# elsewhere), and big enough that every stage the lowering makes stays off the heap.
STACK_SCRATCH_BYTES = 64 << 10
_ALIGN = 64  # of each array in the heap block: a cache line


class LaneMemory(PoolsAndPhase):
    """Mixed into StageEmitter, whose attributes (b, stage, buffers, ...) it uses. The
    phase counter and the pools' allocation stack are the SDK's (PoolsAndPhase, through
    the three methods below)."""

    def element_at(self, base: ir.Value, index: ir.Value, ety: ir.Type) -> ir.Value:
        return at(self.b, base, index, ety)

    def pool_top_at(self, index: ir.Value) -> ir.Value:
        return at(self.b, self.tops_ptr, index, I64)

    def zero_fill(self, ptr: ir.Value, nbytes: int) -> None:
        self._memset(ptr, i64(nbytes))

    def _storage(self) -> None:
        """The shared arrays and the per-lane state. Without barriers: one slot per lane
        (allocas LLVM promotes). With barriers: arrays with one slot per lane of the
        block, addressed per lane."""
        stage = self.stage
        n = self.lanes_max if self.barrier else 1
        npools = max(1, len(stage.pools))
        self.pool_offsets: dict[str, int] = {}  # byte offset of each pool inside one lane's pool area
        offset = 0
        for p in stage.pools:
            self.pool_offsets[p.name] = offset
            offset += (p.size * p.dtype.itemsize + 7) // 8 * 8
        self.pool_bytes = offset
        arrays = {f"shared.{m.name}": (mem_type(m.dtype), m.size) for m in stage.shared}
        arrays |= {f"r.{r.name}": (reg_type(r.dtype), self.lanes_max if self.carried(r.name) else n)
                   for r in stage.regs}
        arrays |= {"phase": (I64, n), "pool.tops": (I64, n * npools), "pool.sp": (I64, n),
                   "pool.stack.base": (I64, n * self.stack_cap), "pool.stack.pool": (I32, n * self.stack_cap)}
        if stage.pools:
            arrays["pools"] = (I8, n * offset)
        ptrs = self._scratch(arrays)
        self.shared = {m.name: ptrs[f"shared.{m.name}"] for m in stage.shared}
        self.reg_arrays = {r.name: ptrs[f"r.{r.name}"] for r in stage.regs}
        self.phase_array, self.tops_array, self.sp_array = ptrs["phase"], ptrs["pool.tops"], ptrs["pool.sp"]
        self.stack_base_array, self.stack_pool_array = ptrs["pool.stack.base"], ptrs["pool.stack.pool"]
        if stage.pools:
            self.pool_area = ptrs["pools"]

    def _scratch(self, arrays: dict[str, tuple[ir.Type, int]]) -> dict[str, ir.Value]:
        """A pointer to each array (name -> (element type, count)): the smallest arrays
        whose total fits STACK_SCRATCH_BYTES are allocas, the others share one heap block
        allocated in the entry block (a failed malloc is ERR_SCRATCH) and freed at exit."""
        ptrs: dict[str, ir.Value] = {}
        on_stack, heap = 0, []
        for name, (ty, count) in sorted(arrays.items(), key=lambda kv: byte_size(kv[1][0]) * kv[1][1]):
            size = byte_size(ty) * count
            if on_stack + size <= STACK_SCRATCH_BYTES:
                on_stack += size
                ptrs[name] = self.alloca(ty, name, count)
            else:
                heap.append((name, size))
        self.scratch_heap = None
        if heap:
            b = self.b
            offsets, total = {}, 0
            for name, size in heap:
                offsets[name] = total
                total += -(-size // _ALIGN) * _ALIGN
            self.scratch_heap = b.call(self._libc("malloc", PTR, [I64]), [i64(total)], name="scratch")
            ptrs |= {name: at(b, self.scratch_heap, i64(off), I8) for name, off in offsets.items()}
            self.fail(b.icmp_unsigned("!=", self.scratch_heap, ir.Constant(PTR, None)), ERR_SCRATCH, -1, i64(total))
        return ptrs

    def _lane_pointers(self, lane: ir.Value) -> None:
        """Point the lane's state at slot `lane` of the per-lane storage."""
        b = self.b
        npools = max(1, len(self.stage.pools))
        self.reg_ptr = {name: at(b, arr, lane, reg_type(self.reg_types[name]))
                        for name, arr in self.reg_arrays.items()}
        self.phase_ptr = at(b, self.phase_array, lane, I64)
        self.tops_ptr = at(b, self.tops_array, b.mul(lane, i64(npools)), I64)
        self.sp_ptr = at(b, self.sp_array, lane, I64)
        self.stack_base = at(b, self.stack_base_array, b.mul(lane, i64(self.stack_cap)), I64)
        self.stack_pool = at(b, self.stack_pool_array, b.mul(lane, i64(self.stack_cap)), I32)
        if self.stage.pools:
            area = at(b, self.pool_area, b.mul(lane, i64(self.pool_bytes)), I8)
            self.pool_ptr = {p.name: at(b, area, i64(off), I8) for p, off in
                             zip(self.stage.pools, self.pool_offsets.values())}

    def _reset_lane(self) -> None:
        """Registers zero, phase zero, pools empty: the state a lane starts with."""
        b = self.b
        for r in self.stage.regs:
            b.store(const(0, r.dtype), self.reg_ptr[r.name])
        b.store(i64(0), self.phase_ptr)
        for j in range(len(self.stage.pools)):
            b.store(i64(0), at(b, self.tops_ptr, i64(j), I64))
        b.store(i64(0), self.sp_ptr)

    @staticmethod
    def _constant_in_bounds(a, decl) -> bool:
        """A checked access that needs no run-time check: a constant element of a buffer
        of constant shape (a reduction into a 0-d result, typically)."""
        if a.index is not None or not all(d.is_const for d in decl.shape):
            return False
        return 0 <= a.offset < math.prod(d.const for d in decl.shape)

    def address(self, ins: Instr, k: int) -> tuple[ir.Value, DType]:
        """(element pointer, element dtype) of the memory operand, bounds-checked as the
        space requires: global and shared only when `.chk` (otherwise the verifier proved
        them), pools always (against the pool's current top)."""
        b, a = self.b, ins.addr
        space = OPCODES[ins.op].space
        known = {"global": self.buffers, "shared": {m.name for m in self.stage.shared},
                 "pool": {m.name for m in self.stage.pools}}[space]
        if a is None or a.buffer not in known:
            raise VerifyError(f"cpu_llvm: stage '{self.stage.name}': instruction {k}: "
                              f"{a.buffer if a else None!r} is not a {space} array")
        idx = i64(a.offset) if a.index is None else b.add(self.read_int(a.index), i64(a.offset))
        if space == "global":
            decl = self.buffers[a.buffer]
            if ins.checked and not self._constant_in_bounds(a, decl):
                self.fail(b.icmp_unsigned("<", idx, self.sizes[a.buffer]), ERR_OOB_GLOBAL, k, idx)
            base = self.partial_ptr[a.buffer] if ins.op in REDUCE_COMBINE else self.buf_ptr[a.buffer]
        elif space == "shared":
            decl = {m.name: m for m in self.stage.shared}[a.buffer]
            if ins.checked:
                self.fail(b.icmp_unsigned("<", idx, i64(decl.size)), ERR_OOB_SHARED, k, idx)
            base = self.shared[a.buffer]
        else:
            decl = {m.name: m for m in self.stage.pools}[a.buffer]
            top = b.load(at(b, self.tops_ptr, i64(self.pool_ids[a.buffer]), I64), typ=I64)
            self.fail(b.icmp_unsigned("<", idx, top), ERR_OOB_POOL, k, idx)
            base = self.pool_ptr[a.buffer]
        return at(b, base, idx, mem_type(decl.dtype), inbounds=True), decl.dtype
