"""Reductions, pools and the phase counter for the kernel emitter (codegen.py).

Reductions go straight to global memory with atomics. The ISA gathers a stage's
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
from .codegen_types import I1, I8, I32, I64, convert, declared_call, element, from_mem, i64, mem_type, to_mem

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
