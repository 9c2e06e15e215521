"""One stage -> one exported LLVM function: blocks, lanes and control flow.

`StageEmitter.emit` builds (see codegen.py for the ABI and the three lane layouts):

    exported <symbol>(start, end, bufs, syms, scalars, partials, err)
        loads the buffer and partial pointers, calls
    internal <symbol>.body(start, end, noalias buf..., syms, scalars, noalias partial..., err)
        entry: launch constants (symbols, scalars, extents, grid, checked buffer sizes)
        block loop -> lane loops (region loops, or the barrier state machine) -> lane code

The lane's code is emitted by walking the instruction list from pc 0 with a call
context (the stack of inlined CALLs): each reachable (context, pc) gets one LLVM basic
block, created on first use, so CALL bodies are copied per call site and RET becomes a
branch to the caller's continuation.
"""

from __future__ import annotations

import math
from typing import Callable

from llvmlite import ir

from hologram.backend import AXES, OPCODES, REASSOC, DType, Instr, Program, Special, lead_lane_axes
from hologram.backend.llvm.control import Ctx, LaneCode
from hologram.errors import VerifyError

from .codegen_barriers import MAX_BLOCKS, BarrierLayouts
from .codegen_blocks import BlockAccumulators
from .codegen_interchange import InterchangedLoop, plan
from .codegen_loops import LoopLowering
from .codegen_memory import REDUCE_COMBINE, LaneMemory, allocation_stack_depth
from .codegen_ops import REASSOCIATED_OPS, VALUE_OPS, compare
from .abi import ERR_CLASS
from .codegen_types import (
    I1, I8, I32, I64, PTR, at, const, convert, from_mem, i64, intrinsic, mem_type, to_mem,
)


# Blocks a 1-D stage whose lanes see only their gid runs as one lane loop (`_wide`): the
# loop vectorizer's prologue, its reduction's horizontal step and the flush of block
# accumulators then come once per 4096 lanes, not per 256 (a float max over 1e7 values
# ran 1.8x slower than numpy's with one block per turn).
WIDE_BLOCKS = 16
# The specials whose value does not depend on how lanes are grouped into blocks.
_BLOCKLESS_SPECIALS = frozenset({"gid.x", "gdim.x"})


class StageEmitter(LaneMemory, BarrierLayouts, InterchangedLoop, BlockAccumulators, LoopLowering, LaneCode):
    backend_name, max_blocks = "cpu_llvm", MAX_BLOCKS
    convert, const, compare = staticmethod(convert), staticmethod(const), staticmethod(compare)

    def __init__(self, program: Program, index: int, module: ir.Module, symbol: str, partials: tuple[str, ...]):
        self.read_stage(program, index)
        self.module, self.symbol = module, symbol
        stage = self.stage
        self.partial_names = partials
        self.barrier = any(i.op == "BarSync" for _, i in self.items)
        self.interchange = None if self.barrier else plan(self.items, self.labels, stage)
        self.lanes_max = math.prod(self.block)
        self.pool_ids = {p.name: j for j, p in enumerate(stage.pools)}
        self.region_next: ir.Block | None = None  # set while emitting barrier-separated regions
        self.stack_cap = allocation_stack_depth(stage)
        self.wide = self._wide()

    def _wide(self) -> int:
        """Blocks per turn of the block loop: WIDE_BLOCKS for a 1-D stage whose code
        cannot tell one block from another (no block-relative special, shared memory,
        barrier, call, lead lanes or interchanged layout), else 1."""
        if self.rank != 1 or self.barrier or self.interchange is not None or self.stage.shared \
                or lead_lane_axes(self.stage):
            return 1
        for _, ins in self.items:
            if ins.op == "CALL" or any(isinstance(o, Special) and o.name not in _BLOCKLESS_SPECIALS
                                       for o in ins.srcs):
                return 1
        return WIDE_BLOCKS

    # ------------------------------------------------------------------ functions
    def emit(self) -> None:
        buf_names = list(self.buffers)
        body_ty = ir.FunctionType(ir.VoidType(), [I64, I64] + [PTR] * len(buf_names) + [PTR, PTR]
                                  + [PTR] * len(self.partial_names) + [PTR])
        self.fn = fn = ir.Function(self.module, body_ty, self.symbol + ".body")
        fn.linkage = "internal"
        args = list(fn.args)
        self.start, self.end = args[0], args[1]
        self.buf_ptr = dict(zip(buf_names, args[2:2 + len(buf_names)]))
        rest = args[2 + len(buf_names):]
        self.syms_arg, self.scalars_arg = rest[0], rest[1]
        self.partial_ptr = dict(zip(self.partial_names, rest[2:2 + len(self.partial_names)]))
        self.err = rest[-1]
        for a in args[2:2 + len(buf_names)] + rest[2:2 + len(self.partial_names)]:
            a.add_attribute("noalias")
        self._wrapper(buf_names, body_ty)
        self._body()

    def _wrapper(self, buf_names: list[str], body_ty: ir.FunctionType) -> None:
        ty = ir.FunctionType(ir.VoidType(), [I64, I64, PTR, PTR, PTR, PTR, PTR])
        fn = ir.Function(self.module, ty, self.symbol)
        start, end, bufs, syms, scalars, partials, err = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        loads = [b.load(at(b, bufs, i64(i), PTR), typ=PTR) for i in range(len(buf_names))]
        parts = [b.load(at(b, partials, i64(i), PTR), typ=PTR) for i in range(len(self.partial_names))]
        b.call(self.fn, [start, end, *loads, syms, scalars, *parts, err])
        b.ret_void()

    # ------------------------------------------------------------------- helpers
    def new_block(self, name: str) -> ir.Block:
        return self.fn.append_basic_block(name)

    def size_of(self, name: str) -> ir.Value:
        """The element count of a global buffer at this launch."""
        if name in self.sizes:
            return self.sizes[name]
        v = i64(1)
        for d in self.buffers[name].shape:
            v = self.b.mul(v, self.affine(d))
        return v

    def alloca(self, ty: ir.Type, name: str, count: int | None = None) -> ir.Value:
        with self.b.goto_block(self.entry):
            if count is None:
                return self.b.alloca(ty, name=name)
            return self.b.alloca(ir.ArrayType(ty, count), name=name)

    def fail(self, ok: ir.Value, code: int, k: int, value: ir.Value) -> None:
        """Continue where `ok` holds; otherwise record the error and return."""
        b = self.b
        bad, good = self.new_block("fail"), self.new_block("ok")
        b.cbranch(ok, good, bad)
        b.position_at_end(bad)
        for j, v in enumerate((i64(code), i64(self.index), i64(k), value)):
            b.store(v, at(b, self.err, i64(j), I64))
        b.branch(self.exit)
        b.position_at_end(good)

    # ---------------------------------------------------------------- the skeleton
    def _body(self) -> None:
        self.entry = self.new_block("entry")
        self.b = b = ir.IRBuilder(self.entry)
        self.exit = self.new_block("exit")
        # Launch constants.
        self.syms = {s: b.load(at(b, self.syms_arg, i64(i), I64), typ=I64, name=f"sym.{s}")
                     for i, s in enumerate(self.program.symbols)}
        self.consts: dict[str, tuple[ir.Value, DType]] = {s: (v, DType.I64) for s, v in self.syms.items()}
        for i, (name, p) in enumerate(self.scalar_params.items()):
            raw = b.load(at(b, self.scalars_arg, i64(8 * i), I8), typ=mem_type(p.dtype), name=f"scalar.{name}")
            self.consts[name] = (from_mem(b, raw, p.dtype), p.dtype)
        ext = [self.affine(d) for d in self.stage.domain] + [i64(1)] * (3 - self.rank)
        grid = [b.sdiv(b.add(e, i64(blk - 1)), i64(blk)) if a < self.rank else i64(1)
                for a, (e, blk) in enumerate(zip(ext, self.block))]
        self.ext, self.grid = ext, grid
        self.sizes: dict[str, ir.Value] = {}  # element counts of buffers with checked accesses
        for _, ins in self.items:
            if ins.addr is not None and OPCODES[ins.op].space == "global" and ins.checked \
                    and ins.addr.buffer in self.buffers and ins.addr.buffer not in self.sizes:
                v = i64(1)
                for d in self.buffers[ins.addr.buffer].shape:
                    v = b.mul(v, self.affine(d))
                self.sizes[ins.addr.buffer] = v
        self.bid = self.alloca(I64, "bid")
        self._storage()
        self._loops_setup()
        self._block_accumulators_entry()
        b.store(self.start, self.bid)
        head = self.new_block("block.head")
        b.branch(head)
        # Block loop: decode the block's coordinates and its lane counts.
        b.position_at_end(head)
        bid = b.load(self.bid)
        body, latch = self.new_block("block.body"), self.new_block("block.latch")
        b.cbranch(b.icmp_signed("<", bid, self.end), body, self.exit)
        b.position_at_end(body)
        cta, rest = [], bid
        for a in range(3):
            if a >= self.rank:
                cta.append(i64(0))
            elif a == self.rank - 1:
                cta.append(rest)
            else:
                cta.append(b.srem(rest, grid[a]))
                rest = b.sdiv(rest, grid[a])
        self.cta = cta
        self.origin = [b.mul(c, i64(blk)) if a < self.rank else i64(0)
                       for a, (c, blk) in enumerate(zip(cta, self.block))]
        # this turn's blocks: one, or up to `wide` consecutive ones, whose lanes are
        # consecutive too (a wide stage is 1-D)
        turn = b.select(b.icmp_signed("<", b.sub(self.end, bid), i64(self.wide)), b.sub(self.end, bid),
                        i64(self.wide)) if self.wide > 1 else i64(1)
        self.counts = []
        for a in range(3):
            if a >= self.rank:
                self.counts.append(i64(1))
            else:
                left = b.sub(ext[a], self.origin[a])
                most = b.mul(turn, i64(self.block[a])) if a == 0 and self.wide > 1 else i64(self.block[a])
                self.counts.append(b.select(b.icmp_signed("<", left, most), left, most))
        for m in self.stage.shared:
            self._memset(self.shared[m.name], i64(m.size * (1 if m.dtype.is_bool else m.dtype.itemsize)))
        self.block_latch = latch
        self._block_accumulators_reset()
        if self.barrier:
            starts = self._straight_regions()
            if starts is not None:
                self._region_loops(starts)
            else:
                self._state_machine()
        elif self.interchange is not None:
            self._interchanged()
        else:
            self._lane_loops()
        b.position_at_end(latch)
        self._block_accumulators_flush()
        self.poll_cancel(-1)  # between turns: a chunk of blocks stops within one turn's time
        b.store(b.add(b.load(self.bid), turn), self.bid)
        b.branch(head)
        b.position_at_end(self.exit)
        if self.scratch_heap is not None:
            b.call(self._libc("free", ir.VoidType(), [PTR]), [self.scratch_heap])
        b.ret_void()

    def _libc(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args), name)
        return fn

    def _memset(self, ptr: ir.Value, nbytes: ir.Value) -> None:
        fn = self.module.globals.get("llvm.memset.p0.i64")
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [PTR, I8, I64, I1]), "llvm.memset.p0.i64")
        self.b.call(fn, [ptr, ir.Constant(I8, 0), nbytes, ir.Constant(I1, 0)])

    # ----------------------------------------------------------- special registers
    def _specials(self, tid: list[ir.Value]) -> None:
        b = self.b
        self.special: dict[str, ir.Value] = {}
        for a, axis in enumerate(AXES):
            self.special[f"tid.{axis}"] = tid[a]
            self.special[f"ntid.{axis}"] = i64(self.block[a])
            self.special[f"ctaid.{axis}"] = self.cta[a]
            self.special[f"nctaid.{axis}"] = self.grid[a]
            self.special[f"gid.{axis}"] = b.add(self.origin[a], tid[a]) if a < self.rank else i64(0)
            self.special[f"gdim.{axis}"] = self.ext[a]

    # ---------------------------------------------------------- no-barrier lanes
    def _lane_loops(self) -> None:
        """z, y, x loops over the block's lanes; the lane's code sits in the x loop."""
        b = self.b
        self._lane_pointers(i64(0))
        counters = [self.alloca(I64, f"t{axis}") for axis in AXES]
        outer_latch = self.block_latch
        heads = []
        # lanes that only leave are not run at all: a lane loop of 1024 iterations that
        # only test and exit costs about as much as the one lane's work
        lead = lead_lane_axes(self.stage)
        for a in reversed(range(3)):
            if a >= self.rank:
                continue
            b.store(i64(0), counters[a])
            head, body, latch = self.new_block(f"lane.{AXES[a]}.head"), self.new_block(f"lane.{AXES[a]}.body"), \
                self.new_block(f"lane.{AXES[a]}.latch")
            b.branch(head)
            b.position_at_end(head)
            count = self.counts[a] if a not in lead else b.select(
                b.icmp_signed("<", self.counts[a], i64(1)), self.counts[a], i64(1))
            b.cbranch(b.icmp_signed("<", b.load(counters[a]), count), body, outer_latch)
            b.position_at_end(latch)
            b.store(b.add(b.load(counters[a]), i64(1)), counters[a])
            b.branch(head)
            b.position_at_end(body)
            heads.append(latch)
            outer_latch = latch
        tid = [b.load(counters[a]) if a < self.rank else i64(0) for a in range(3)]
        self._specials(tid)
        self._reset_lane()
        self.lane_end = outer_latch
        self.emit_lane_code()

    # -------------------------------------------------------------- the lane code
    # The walk over (call context, pc), operands, BRA/CALL/RET/EXIT: the SDK's LaneCode.
    def write(self, dst, value: ir.Value, have: DType) -> None:
        want = self.type_of(dst)
        value = convert(self.b, value, have, want)
        self.b.store(value, self.reg_ptr[dst.name])
        if dst.name in self.limited:
            self._counter_written(dst.name, value)

    # ------------------------------------------------------------- instructions
    def instruction(self, ctx: Ctx, pc: int) -> None:
        k, ins = self.items[pc]
        handler = _CONTROL.get(ins.op)
        if handler is not None:
            handler(self, ctx, pc, k, ins)
            return
        self.straight(ins, k)
        self.b.branch(self.block_for(ctx, pc + 1))

    def straight(self, ins: Instr, k: int) -> None:
        """Emit a non-control instruction at the builder's position (the block goes on)."""
        b, op, t = self.b, ins.op, ins.dtype
        if self.emit_data_op(ins, k):
            pass
        elif op in REDUCE_COMBINE:
            v = self.read(ins.srcs[0], t)
            if op == "ResAccum":
                if ins.addr is None or ins.addr.index is None:
                    raise VerifyError(f"cpu_llvm: stage '{self.stage.name}': instruction {k}: ResAccum needs an "
                                      f"index register holding the Atlas class")
                cls = self.read_int(ins.addr.index)
                self.fail(b.icmp_unsigned("<", cls, i64(96)), ERR_CLASS, k, cls)
            ptr, bt = self.address(ins, k)  # checks a checked element first
            if self._block_accumulate(ins, v):
                return
            cur = convert(b, from_mem(b, b.load(ptr, typ=mem_type(bt)), bt), bt, t)
            combine = REDUCE_COMBINE[op]
            if combine in ("ADD", "MUL") and t in (DType.F32, DType.F64):
                # Contributions may be combined in any order (docs/isa.md), so the lane
                # loop may keep vector partial sums.
                out = (b.fadd if combine == "ADD" else b.fmul)(cur, v, flags=("reassoc",))
            elif combine in ("MIN", "MAX") and t in (DType.F32, DType.F64):
                # IEEE minimum/maximum: NaN-propagating and associative, so the loop
                # vectorizer keeps vector partials (it cannot for the select form). Only
                # a tie of -0.0 and +0.0 differs from MIN/MAX (-0.0 < +0.0 here), which
                # is one of the combination orders the ISA allows.
                out = intrinsic(b, "minimum" if combine == "MIN" else "maximum", cur.type, [cur, v])
            else:
                out = VALUE_OPS[combine](b, t, [cur, v])
            b.store(to_mem(b, convert(b, out, t, bt), bt), ptr)
        elif op == "PhaseGet":
            self.write(ins.dst, b.load(self.phase_ptr, typ=I64), DType.I64)
        elif op == "PhaseAdv":
            self.phase_adv(ins)
        elif op == "PoolAlloc":
            self.pool_alloc(ins, k)
        elif op == "PoolFree":
            self.pool_free(ins, k)
        elif op == "MemFence":
            pass  # one lane runs at a time here: its memory operations are already ordered
        else:
            emit = VALUE_OPS.get(op)
            if (self.program.reassociate or ins.mod == REASSOC) and t in (DType.F32, DType.F64):
                emit = REASSOCIATED_OPS.get(op, emit)
            if emit is None:
                raise VerifyError(f"cpu_llvm: no code generator for {op}")
            spec = OPCODES[op]
            args = [self.read(s, spec.source_type(k, t)) for k, s in enumerate(ins.srcs)]
            self.write(ins.dst, emit(b, t, args), spec.result_type(t))

    # ------------------------------------------------------------------ control
    def _bar(self, ctx: Ctx, pc: int, k: int, ins: Instr) -> None:
        b = self.b
        if self.region_next is not None:  # region loops: the next region resumes here
            b.branch(self.region_next)
            return
        key = (ctx, pc + 1)
        if pc + 1 >= len(self.items):
            rid = -1  # a barrier at the very end: the lane ends once the block passes it
        else:
            self.block_for(ctx, pc + 1)
            rid = self.resume_points.setdefault(key, len(self.resume_points) + 1)
        b.store(ir.Constant(I32, rid), self.resume_slot)
        b.store(i64(k), self.barrier_k)
        b.branch(self.suspend)


_CONTROL: dict[str, Callable[..., None]] = {
    "BRA": StageEmitter.emit_bra, "LOOP": StageEmitter._loop, "CALL": StageEmitter.emit_call,
    "RET": StageEmitter.emit_ret, "EXIT": StageEmitter.emit_exit, "BarSync": StageEmitter._bar,
}
