"""Reductions, pools and the phase counter for the kernel emitter (codegen.py).

A full float sum (`abi.tree_sums`: f32 or f64 `ReduceAdd` into a constant element, in a
stage without BarSync) is added as a tree (docs/gpu.md, "Full float sums"): each lane
adds its contributions in a compensated (Kahan) register pair; at the lane's end the
block adds its lanes' as a tree in shared memory and thread 0 writes the block's
partial to the scratch memory (`block_partials`); the stage's sums kernel, one block of
abi.SUM_THREADS threads launched after it, adds the partials (each thread a Kahan pair
over a strided share, then a tree) and merges the total into memory unless a lane
failed (`fold_and_merge`).

Other reductions go straight to global memory with atomics. The ISA gathers a stage's
contributions and merges them into memory when the stage ends (`mem = mem (op)
combine(contributions)`, in an order the backend chooses, docs/isa.md "Reductions"), and
reading a reduced element within the stage is unspecified, so an atomic read-modify-write
per contribution computes exactly that. Where the combine is one LLVM `atomicrmw` at the
buffer's type it is used:

- ReduceAdd/ResAccum: `add` on integers (PTX `atom.global.add.u32/u64`; LLVM's atomic
  expansion makes 8/16-bit ones a compare-and-swap on their 32-bit word), `fadd` on
  floats (`atom.global.add.f32/f64`, `atom.global.add.noftz.f16`). PTX's f32 add flushes
  subnormal inputs and results to zero (docs/gpu.md, "CUDA");
- ReduceMin/ReduceMax on integers: `min`/`max`/`umin`/`umax`.

Everything else (float MIN/MAX, which must propagate NaN as no PTX atomic does, MUL, and
a contribution whose type is not the buffer's) is a compare-and-swap loop on the
element's bits: read, combine with the ISA's own emitter (codegen_ops.py), swap if the
element still holds what was read, else retry with what it holds.

Pools are per-thread arrays (allocas in PTX's local space), with each pool's top and the
lane's allocation stack beside them, checked as docs/isa.md "Pools" says; the phase
counter is one more per-thread word.
"""

from __future__ import annotations

from llvmlite import ir

from hologram.backend import DType, Instr
from hologram.backend.llvm.lane_state import (  # noqa: F401  (codegen.py reads REDUCE_COMBINE here)
    REDUCE_COMBINE, PoolsAndPhase, allocation_stack_depth,
)
from hologram.errors import VerifyError

from .abi import ERR_CLASS
from .codegen_ops import VALUE_OPS
from .codegen_types import (I1, I8, I32, I64, convert, declared_call, element, from_mem, i64, intrinsic, mem_type,
                            reg_type, to_mem)


def barrier(b: ir.IRBuilder) -> None:
    """`barrier.sync 0`, the non-`.aligned` form (threads may arrive from divergent paths)."""
    declared_call(b, "llvm.nvvm.barrier.cta.sync.all", ir.VoidType(), [ir.Constant(I32, 0)])

_FLOAT_BITS = {"half": 16, "float": 32, "double": 64}


def native_rmw(combine: str, t: DType) -> str | None:
    """The `atomicrmw` operation that is `combine` on elements of type `t`, if any."""
    if combine == "ADD":
        return "fadd" if t.is_float else "add"
    if combine in ("MIN", "MAX") and t.is_int:
        return ("" if t.is_signed else "u") + combine.lower()
    return None


class LaneState(PoolsAndPhase):
    """Mixed into KernelEmitter, whose builder, registers and `fail` it uses. The phase
    counter and the pools' allocation stack are the SDK's (PoolsAndPhase, through
    `element_at`, `pool_top_at` and `zero_fill`)."""

    # ---------------------------------------------------------------- reductions
    def reduce(self, ins: Instr, k: int) -> None:
        b, t = self.b, ins.dtype
        v = self.read(ins.srcs[0], t)
        pair = self.sum_pairs.get((ins.addr.buffer, ins.addr.offset)) \
            if ins.op == "ReduceAdd" and ins.addr.index is None else None
        if pair is not None and pair[2] is t:  # a full sum: the lane's share, compensated
            self.address(ins, k)  # its bounds check, when `.chk`
            self.kahan_add(pair, v)
            return
        if ins.op == "ResAccum":
            if ins.addr is None or ins.addr.index is None:
                raise VerifyError(f"cuda: stage '{self.stage.name}': instruction {k}: ResAccum needs an index "
                                  f"register holding the Atlas class")
            cls = self.read_int(ins.addr.index)
            self.fail(b.icmp_unsigned("<", cls, i64(96)), ERR_CLASS, k, cls)
        ptr, bt = self.address(ins, k)
        combine = REDUCE_COMBINE[ins.op]
        rmw = native_rmw(combine, t) if bt is t else None
        if rmw is not None:
            b.atomic_rmw(rmw, ptr, v, "monotonic")
            return
        self._cas_loop(ptr, bt, lambda old: VALUE_OPS[combine](b, t, [convert(b, old, bt, t), v]), t)

    # ---------------------------------------------------------------- full sums
    def sum_pair(self, t: DType) -> tuple[ir.Value, ir.Value, DType]:
        """A Kahan pair (sum, compensation) of allocas, -0.0 (the identity) and 0."""
        b, ty = self.b, reg_type(t)
        s, c = b.alloca(ty), b.alloca(ty)
        b.store(ir.Constant(ty, -0.0), s)
        b.store(ir.Constant(ty, 0.0), c)
        return s, c, t

    def kahan_add(self, pair: tuple[ir.Value, ir.Value, DType], v: ir.Value) -> None:
        """sum += v, the rounding error carried in the compensation; an inf or NaN sum
        ends the compensation (inf - inf would make it NaN)."""
        b, (s_ptr, c_ptr, t) = self.b, pair
        ty = reg_type(t)
        s, c = b.load(s_ptr, typ=ty), b.load(c_ptr, typ=ty)
        y = b.fsub(v, c)
        total = b.fadd(s, y)
        lost = b.fsub(b.fsub(total, s), y)
        finite = b.fcmp_ordered("<", intrinsic(b, "fabs", ty, [total]), ir.Constant(ty, float("inf")))
        b.store(b.select(finite, lost, ir.Constant(ty, 0.0)), c_ptr)
        b.store(total, s_ptr)

    def pair_value(self, pair: tuple[ir.Value, ir.Value, DType]) -> ir.Value:
        b, (s_ptr, c_ptr, t) = self.b, pair
        return b.fsub(b.load(s_ptr, typ=reg_type(t)), b.load(c_ptr, typ=reg_type(t)))

    def block_tree(self, arrays: list[tuple[ir.Value, DType]], values: list[ir.Value], thread: ir.Value,
                   lanes: int) -> None:
        """values[j] of every thread added as a balanced tree in the shared array
        arrays[j] (of `lanes` elements; element 0 then holds the block's sum). Every
        thread of the block must get here: barriers separate the levels."""
        b = self.b
        for (array, t), v in zip(arrays, values):
            b.store(v, element(b, array, thread, reg_type(t)))
        barrier(b)
        half = 1 << (lanes - 1).bit_length() - 1 if lanes > 1 else 0
        while half:
            add, done = self.fn.append_basic_block(f"tree.{half}"), self.fn.append_basic_block(f"tree.{half}.done")
            b.cbranch(b.and_(b.icmp_unsigned("<", thread, i64(half)),
                             b.icmp_unsigned("<", b.add(thread, i64(half)), i64(lanes))), add, done)
            b.position_at_end(add)
            for array, t in arrays:
                ty = reg_type(t)
                mine, other = element(b, array, thread, ty), element(b, array, b.add(thread, i64(half)), ty)
                b.store(b.fadd(b.load(mine, typ=ty), b.load(other, typ=ty)), mine)
            b.branch(done)
            b.position_at_end(done)
            barrier(b)
            half //= 2

    def _cas_loop(self, ptr: ir.Value, bt: DType, combine, t: DType) -> None:
        """`*ptr = combine(*ptr)` atomically, by compare-and-swap on the element's bits;
        a combine that leaves the element as it is writes nothing."""
        b = self.b
        ety = mem_type(bt)
        bits = ir.IntType(ety.width if isinstance(ety, ir.IntType) else _FLOAT_BITS[str(ety)])
        first = b.load_atomic(ptr, "monotonic", bits.width // 8, typ=bits)
        start = b.block
        loop, done = self.fn.append_basic_block("reduce.cas"), self.fn.append_basic_block("reduce.done")
        b.branch(loop)
        b.position_at_end(loop)
        old = b.phi(bits)
        old.add_incoming(first, start)
        value = from_mem(b, old if bits == ety else b.bitcast(old, ety), bt)
        new = to_mem(b, convert(b, combine(value), t, bt), bt)
        new_bits = new if bits == ety else b.bitcast(new, bits)
        swap = b.cmpxchg(ptr, old, new_bits, "monotonic", "monotonic")
        old.add_incoming(b.extract_value(swap, 0), b.block)
        unchanged = b.icmp_unsigned("==", new_bits, old)
        b.cbranch(b.or_(unchanged, b.extract_value(swap, 1)), done, loop)
        b.position_at_end(done)

    # ------------------------------------------------------------ pools, phase
    def lane_state(self) -> None:
        """The phase counter (0) and the pools (empty), in the entry block: per-thread
        allocas, which PTX keeps in registers where it can and in local memory else."""
        b, stage = self.b, self.stage
        self.phase_ptr = b.alloca(I64, name="phase")
        b.store(i64(0), self.phase_ptr)
        self.pools = {p.name: p for p in stage.pools}
        if not stage.pools:
            return
        self.pool_ids = {p.name: j for j, p in enumerate(stage.pools)}
        self.pool_ptr = {p.name: b.alloca(ir.ArrayType(mem_type(p.dtype), p.size), name=f"pool.{p.name}")
                         for p in stage.pools}
        self.stack_cap = allocation_stack_depth(stage)
        self.tops = b.alloca(ir.ArrayType(I64, len(stage.pools)), name="pool.tops")
        self.stack_base = b.alloca(ir.ArrayType(I64, self.stack_cap), name="pool.stack.base")
        self.stack_pool = b.alloca(ir.ArrayType(I32, self.stack_cap), name="pool.stack.pool")
        self.sp_ptr = b.alloca(I64, name="pool.sp")
        for j in range(len(stage.pools)):
            b.store(i64(0), element(b, self.tops, i64(j), I64))
        b.store(i64(0), self.sp_ptr)

    def element_at(self, base: ir.Value, index: ir.Value, ety: ir.Type) -> ir.Value:
        return element(self.b, base, index, ety)

    def pool_top_at(self, index: ir.Value) -> ir.Value:
        return element(self.b, self.tops, index, I64)

    def zero_fill(self, ptr: ir.Value, nbytes: int) -> None:
        b = self.b
        start = b.bitcast(ptr, I8.as_pointer())
        declared_call(b, "llvm.memset.p0.i64", ir.VoidType(),
                      [start, ir.Constant(I8, 0), i64(nbytes), ir.Constant(I1, 0)])
