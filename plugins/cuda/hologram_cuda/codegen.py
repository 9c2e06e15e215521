"""The code generator: a verified Atlas ISA `Program` -> one LLVM IR module for NVPTX.

Every stage becomes one kernel entry (`ptx_kernel`), launched with one CUDA block per
Atlas block (CTA = block, `ntid` = the stage's block shape) over a grid of
`ceil(gdim / ntid)` blocks per axis:

A stage with `.init` stores gets one more kernel before it, `<symbol>_init`, with the
same parameters, launched as one thread (kind `init`): it does the stores (the
verifier proved each offset inside its buffer for every shape), so they happen once
per launch and before any lane of the stage runs (docs/isa.md, "Inits"), also for an
empty domain. A stage with full float sums (`abi.tree_sums`) gets one after it,
`<symbol>_sums`, launched as one block (kind `sums`): it adds the stage's per-block
partials and merges the totals into memory (codegen_memory.py).
`KernelModule.kernels` lists the kernels in launch order.

    <symbol>(ptr addrspace(1) noalias buf..., i64 sym..., scalar..., ptr addrspace(1) err,
             ptr addrspace(1) scratch)

`buf` are the data pointers of `program.buffers()` in order, `sym` the shape symbols'
values, each scalar parameter in its memory type (bool a byte), `err` four i64 words in
global memory, `scratch` the launch's scratch memory (8 bytes per block and full sum).
A failed check claims the error word with a compare-and-swap of `err[0]` from 0 to the
error code (so the first failing lane to get there wins and the rest keep `err[1..3]`
intact), writes `err[1..3] = [stage, instruction index, value]` and ends its lane; the codes are the SDK's (hologram.backend.error_record), which also
decodes them, for cpu_llvm too. The host zeroes `err` before a launch and reads it after.

What a kernel does, in order:
- its shared arrays (`addrspace(3)` globals of the kernel) are zeroed by all the
  block's threads, strided, then one aligned barrier: the ISA zero-fills them per block;
- the domain guard: a thread whose `gid` (`ctaid * ntid + tid`, in i64) is outside the
  domain on any axis goes to the lane's end (the CTA has full blocks; the ISA's last
  block is partial);
- registers are allocas zeroed at entry, promoted to PTX registers by SROA;
- the lane's code is laid out by the SDK's `LaneCode` (hologram.backend.llvm.control),
  as cpu_llvm's: each reachable (call context, pc) one basic block, CALL inlined per
  call site, RET a branch to the caller's continuation, EXIT/falling off the end a return;
- `BarSync` is `barrier.cta.sync.all` (`barrier.sync 0`), the non-`.aligned` form: a
  verified program may reach a barrier from divergent control flow (every live lane at
  the same BarSync), which `.aligned` forbids. A thread that has returned no longer
  counts toward a barrier (PTX: exited threads; a lane ends with `exit`), as the ISA
  says of ended lanes;
- `MemFence` is a `fence acq_rel` (`fence.acq_rel.sys`);
- a full float sum is a Kahan pair per lane, then at the lane's end (where every thread
  of the block arrives: such a stage has no BarSync) a tree in shared memory and one
  partial per block; other reductions are atomics on global memory; pools are
  per-thread arrays and the phase one more per-thread word (codegen_memory.py).
"""

from __future__ import annotations

import math
import re

import attrs
from llvmlite import ir

from hologram.backend import AXES, OPCODES, DType, Instr, Program, Reg
from hologram.backend.llvm.control import Ctx, LaneCode
from hologram.errors import HologramError, VerifyError

from .abi import ERR_OOB_GLOBAL, ERR_OOB_POOL, ERR_OOB_SHARED, SUM_THREADS, KernelEntry, kernel_shapes, tree_sums
from .codegen_memory import REDUCE_COMBINE, LaneState, barrier
from .codegen_ops import VALUE_OPS, compare
from .codegen_types import (DOUBLE, GLOBAL_PTR, I1, I32, I64, SHARED, const, convert, declared_call, element,
                            from_mem, i64, mem_type, reg_type, to_mem)

# The most (call context, pc) code copies one stage may need (CALL inlining).
MAX_BLOCKS = 1 << 14


@attrs.frozen
class KernelModule:
    module_ir: str
    kernels: tuple[KernelEntry, ...]


def _ident(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def kernel_symbol(program: Program, index: int) -> str:
    return f"hg_{_ident(program.name)}_{index}_{_ident(program.stages[index].name)}"


def compile_program(program: Program) -> KernelModule:
    """The whole program as one module with one kernel per stage."""
    try:
        module = ir.Module(name=_ident(program.name))
        module.triple = "nvptx64-nvidia-cuda"
        entries = []
        for index, block, kind in kernel_shapes(program):
            symbol = kernel_symbol(program, index) + {"stage": ""}.get(kind, f"_{kind}")
            KernelEmitter(program, index, module, symbol, kind).emit()
            entries.append(KernelEntry(symbol, index, block, kind))
        return KernelModule(str(module), tuple(entries))
    except HologramError:
        raise
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as e:
        # Only a program the verifier would refuse gets here (prepare verifies first).
        raise VerifyError(f"cuda: program '{getattr(program, 'name', program)!s}' cannot be compiled; "
                          f"run hologram.backend.verify on it for the reason ({type(e).__name__}: {e})") from e


def _sreg(b: ir.IRBuilder, name: str) -> ir.Value:
    """A PTX special register (u32) as i64."""
    return b.zext(declared_call(b, f"llvm.nvvm.read.ptx.sreg.{name}", I32, []), I64)


class KernelEmitter(LaneState, LaneCode):
    backend_name, max_blocks = "cuda", MAX_BLOCKS
    convert, const, compare = staticmethod(convert), staticmethod(const), staticmethod(compare)

    def __init__(self, program: Program, index: int, module: ir.Module, symbol: str, kind: str = "stage"):
        self.read_stage(program, index)
        self.module, self.symbol, self.kind = module, symbol, kind
        self.sums = tree_sums(program, self.stage)  # (buffer, offset, dtype) of each full float sum
        self.sum_pairs: dict[tuple[str, int], tuple] = {}  # (buffer, offset) -> the lane's Kahan pair

    # ------------------------------------------------------------------ the kernel
    def emit(self) -> None:
        params = ([GLOBAL_PTR] * len(self.buffers) + [I64] * len(self.program.symbols)
                  + [mem_type(p.dtype) for p in self.scalar_params.values()] + [GLOBAL_PTR, GLOBAL_PTR])
        self.fn = fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), params), self.symbol)
        fn.calling_convention = "ptx_kernel"
        args = list(fn.args)
        nbuf, nsym = len(self.buffers), len(self.program.symbols)
        self.buf_ptr = dict(zip(self.buffers, args[:nbuf]))
        for a in args[:nbuf]:
            a.add_attribute("noalias")  # the runtime copies an input that aliases an output (cpu_llvm's contract)
        self.syms = dict(zip(self.program.symbols, args[nbuf:nbuf + nsym]))
        self.err, self.scratch = args[-2], args[-1]
        self.entry = fn.append_basic_block("entry")
        self.b = b = ir.IRBuilder(self.entry)
        self.lane_end = fn.append_basic_block("exit")
        self.consts: dict[str, tuple[ir.Value, DType]] = {s: (v, DType.I64) for s, v in self.syms.items()}
        for (name, p), raw in zip(self.scalar_params.items(), args[nbuf + nsym:-2]):
            self.consts[name] = (from_mem(b, raw, p.dtype), p.dtype)
        {"init": self._inits, "stage": self._lane, "sums": self._fold_and_merge}[self.kind]()
        b.position_at_end(self.lane_end)
        if self.kind == "stage" and self.sums:
            self._block_partials()
        # `exit`, not only `ret`: PTX releases a barrier that waits only on exited threads
        # (docs/gpu.md), which is the ISA's "ended lanes no longer take part".
        declared_call(b, "llvm.nvvm.exit", ir.VoidType(), [])
        b.ret_void()

    def _inits(self) -> None:
        """The stage's `.init` stores."""
        b = self.b
        for init in self.stage.inits:
            decl = self.buffers.get(init.buffer)
            if decl is None:
                raise VerifyError(f"cuda: stage '{self.stage.name}': .init of {init.buffer!r}, which is not a "
                                  f"global buffer")
            value = to_mem(b, const(init.value, decl.dtype), decl.dtype)
            b.store(value, element(b, self.buf_ptr[init.buffer], i64(init.offset), mem_type(decl.dtype)))
        b.branch(self.lane_end)

    def _lane(self) -> None:
        b = self.b
        self.reg_ptr = {r.name: b.alloca(reg_type(r.dtype), name=f"r.{r.name}") for r in self.stage.regs}
        for r in self.stage.regs:
            b.store(const(0, r.dtype), self.reg_ptr[r.name])
        self.sum_pairs = {(name, offset): self.sum_pair(t) for name, offset, t in self.sums}
        self.lane_state()
        self.sizes = {name: self._size(decl) for name, decl in self.buffers.items()
                      if any(ins.checked and ins.addr is not None and ins.addr.buffer == name
                             and OPCODES[ins.op].space == "global" for _, ins in self.items)}
        self._specials()
        self._shared_arrays()
        self._domain_guard()
        self.emit_lane_code()

    def _thread(self) -> ir.Value:
        """The thread's linear index in its block (x fastest)."""
        b = self.b
        return b.add(self.tid[0], b.mul(i64(self.block[0]), b.add(self.tid[1], b.mul(i64(self.block[1]),
                                                                                     self.tid[2]))))

    def _sum_arrays(self, lanes: int) -> list[tuple[ir.Value, DType]]:
        """A shared array of `lanes` elements per full sum, for its tree."""
        arrays = []
        for j, (_, _, t) in enumerate(self.sums):
            ty = ir.ArrayType(reg_type(t), lanes)
            g = ir.GlobalVariable(self.module, ty, f"{self.symbol}.sum{j}", addrspace=SHARED)
            g.linkage, g.initializer, g.align = "internal", ir.Constant(ty, ir.Undefined), 8
            arrays.append((g, t))
        return arrays

    def _block_partials(self) -> None:
        """At the lane's end, where every thread of the block arrives (the domain guard
        and failed checks lead here too): each full sum's lane shares added as a tree,
        thread 0 writing the block's partial to scratch slot `j * blocks + block`."""
        b, sp = self.b, self.special
        thread = self._thread()
        pairs = [self.sum_pairs[name, offset] for name, offset, _ in self.sums]
        arrays = self._sum_arrays(math.prod(self.block))
        self.block_tree(arrays, [self.pair_value(p) for p in pairs], thread, math.prod(self.block))
        blocks = b.mul(sp["nctaid.x"], b.mul(sp["nctaid.y"], sp["nctaid.z"]))
        block = b.add(sp["ctaid.x"], b.mul(sp["nctaid.x"], b.add(sp["ctaid.y"], b.mul(sp["nctaid.y"],
                                                                                       sp["ctaid.z"]))))
        write, done = self.fn.append_basic_block("partials"), self.fn.append_basic_block("partials.done")
        b.cbranch(b.icmp_unsigned("==", thread, i64(0)), write, done)
        b.position_at_end(write)
        for j, (array, t) in enumerate(arrays):
            total = b.load(element(b, array, i64(0), reg_type(t)), typ=reg_type(t))
            b.store(total, element(b, self.scratch, b.add(b.mul(i64(j), blocks), block), DOUBLE))
        b.branch(done)
        b.position_at_end(done)

    def _fold_and_merge(self) -> None:
        """The sums kernel (one block of SUM_THREADS): per full sum, each thread adds a
        strided share of the stage's per-block partials in a Kahan pair, the block adds
        the threads' as a tree, and thread 0 merges the total into the element
        (`mem = mem + total`) unless a lane of the stage failed."""
        b = self.b
        self._specials()  # nctaid: the stage's blocks, from its domain
        sp = self.special
        blocks = b.mul(sp["nctaid.x"], b.mul(sp["nctaid.y"], sp["nctaid.z"]))
        thread = _sreg(b, "tid.x")
        pairs = [self.sum_pair(t) for _, _, t in self.sums]
        i = b.alloca(I64, name="partial")
        b.store(thread, i)
        head, body, done = (self.fn.append_basic_block(f"fold.{s}") for s in ("head", "body", "done"))
        b.branch(head)
        b.position_at_end(head)
        cur = b.load(i, typ=I64)
        b.cbranch(b.icmp_unsigned("<", cur, blocks), body, done)
        b.position_at_end(body)
        for j, pair in enumerate(pairs):
            slot = element(b, self.scratch, b.add(b.mul(i64(j), blocks), cur), DOUBLE)
            self.kahan_add(pair, b.load(slot, typ=reg_type(pair[2])))
        b.store(b.add(cur, i64(SUM_THREADS)), i)
        b.branch(head)
        b.position_at_end(done)
        arrays = self._sum_arrays(SUM_THREADS)
        self.block_tree(arrays, [self.pair_value(p) for p in pairs], thread, SUM_THREADS)
        merge, end = self.fn.append_basic_block("merge"), self.fn.append_basic_block("merge.done")
        failed = b.load(element(b, self.err, i64(0), I64), typ=I64)
        b.cbranch(b.and_(b.icmp_unsigned("==", thread, i64(0)), b.icmp_unsigned("==", failed, i64(0))), merge, end)
        b.position_at_end(merge)
        for (name, offset, t), (array, _) in zip(self.sums, arrays):
            ty = reg_type(t)
            at = element(b, self.buf_ptr[name], i64(offset), ty)
            b.store(b.fadd(b.load(at, typ=ty), b.load(element(b, array, i64(0), ty), typ=ty)), at)
        b.branch(end)
        b.position_at_end(end)
        b.branch(self.lane_end)

    def _size(self, decl) -> ir.Value:
        v = i64(1)
        for d in decl.shape:
            v = self.b.mul(v, self.affine(d))
        return v

    def _specials(self) -> None:
        b = self.b
        ext = [self.affine(d) for d in self.stage.domain] + [i64(1)] * (3 - self.rank)
        self.special: dict[str, ir.Value] = {}
        self.tid = []
        for a, axis in enumerate(AXES):
            inside = a < self.rank
            tid = _sreg(b, f"tid.{axis}") if inside else i64(0)
            cta = _sreg(b, f"ctaid.{axis}") if inside else i64(0)
            self.tid.append(tid)
            self.special[f"tid.{axis}"] = tid
            self.special[f"ntid.{axis}"] = i64(self.block[a])
            self.special[f"ctaid.{axis}"] = cta
            # ceil(gdim / ntid) from the domain, whatever grid the launch used
            self.special[f"nctaid.{axis}"] = b.sdiv(b.add(ext[a], i64(self.block[a] - 1)), i64(self.block[a])) \
                if inside else i64(1)
            self.special[f"gid.{axis}"] = b.add(b.mul(cta, i64(self.block[a])), tid) if inside else i64(0)
            self.special[f"gdim.{axis}"] = ext[a]

    def _shared_arrays(self) -> None:
        """Each shared array a kernel-private `addrspace(3)` global, zeroed by the whole
        block (thread t clears elements t, t + lanes, ...), then an aligned barrier: every
        thread of the CTA is here, none has exited yet."""
        self.shared: dict[str, tuple[ir.GlobalVariable, object]] = {}
        if not self.stage.shared:
            return
        b = self.b
        lanes = math.prod(self.block)
        linear = self._thread()
        for m in self.stage.shared:
            ty = ir.ArrayType(mem_type(m.dtype), m.size)
            g = ir.GlobalVariable(self.module, ty, f"{self.symbol}.shared.{_ident(m.name)}", addrspace=SHARED)
            g.linkage = "internal"
            g.initializer = ir.Constant(ty, ir.Undefined)
            g.align = 8
            self.shared[m.name] = (g, m)
            i = b.alloca(I64, name=f"zero.{m.name}")
            b.store(linear, i)
            head, body, done = (self.fn.append_basic_block(f"zero.{m.name}.{s}") for s in ("head", "body", "done"))
            b.branch(head)
            b.position_at_end(head)
            cur = b.load(i, typ=I64)
            b.cbranch(b.icmp_signed("<", cur, i64(m.size)), body, done)
            b.position_at_end(body)
            b.store(ir.Constant(mem_type(m.dtype), 0), element(b, g, cur, mem_type(m.dtype)))
            b.store(b.add(cur, i64(lanes)), i)
            b.branch(head)
            b.position_at_end(done)
        declared_call(b, "llvm.nvvm.barrier.cta.sync.aligned.all", ir.VoidType(), [ir.Constant(I32, 0)])

    def _domain_guard(self) -> None:
        """Threads of a partial block outside the domain end here (lanes exist only
        inside the domain, docs/isa.md)."""
        b = self.b
        inside: ir.Value = ir.Constant(I1, 1)
        for a in range(self.rank):
            axis = AXES[a]
            inside = b.and_(inside, b.icmp_signed("<", self.special[f"gid.{axis}"], self.special[f"gdim.{axis}"]))
        self.lane = self.fn.append_basic_block("lane")
        b.cbranch(inside, self.lane, self.lane_end)
        b.position_at_end(self.lane)

    def fail(self, ok: ir.Value, code: int, k: int, value: ir.Value) -> None:
        """Continue where `ok` holds; otherwise claim the error word and end the lane."""
        b = self.b
        bad, claimed, good = (self.fn.append_basic_block(s) for s in ("fail", "fail.claimed", "ok"))
        b.cbranch(ok, good, bad)
        b.position_at_end(bad)
        swap = b.cmpxchg(element(b, self.err, i64(0), I64), i64(0), i64(code), "monotonic", "monotonic")
        b.cbranch(b.extract_value(swap, 1), claimed, self.lane_end)
        b.position_at_end(claimed)
        for j, v in enumerate((i64(self.index), i64(k), value), start=1):
            b.store(v, element(b, self.err, i64(j), I64))
        b.branch(self.lane_end)
        b.position_at_end(good)

    # -------------------------------------------------------------- the lane code
    # The walk over (call context, pc), operands, BRA/CALL/RET/EXIT: the SDK's LaneCode.
    def new_block(self, name: str) -> ir.Block:
        return self.fn.append_basic_block(name)

    def write(self, dst, value: ir.Value, have: DType) -> None:
        self.b.store(convert(self.b, value, have, self.type_of(dst)), self.reg_ptr[dst.name])

    def address(self, ins: Instr, k: int) -> tuple[ir.Value, DType]:
        """(element pointer, element dtype) of a global or shared operand, bounds-checked
        when `.chk` (the verifier proved the others)."""
        b, a = self.b, ins.addr
        space = OPCODES[ins.op].space
        known = {"global": self.buffers, "shared": self.shared, "pool": self.pools}[space]
        if a is None or a.buffer not in known:
            raise VerifyError(f"cuda: stage '{self.stage.name}': instruction {k}: "
                              f"{a.buffer if a else None!r} is not a {space} array")
        idx = i64(a.offset) if a.index is None else b.add(self.read_int(a.index), i64(a.offset))
        if space == "global":
            decl, base = self.buffers[a.buffer], self.buf_ptr[a.buffer]
            if ins.checked:
                self.fail(b.icmp_unsigned("<", idx, self.sizes[a.buffer]), ERR_OOB_GLOBAL, k, idx)
        elif space == "shared":
            base, decl = self.shared[a.buffer]
            if ins.checked:
                self.fail(b.icmp_unsigned("<", idx, i64(decl.size)), ERR_OOB_SHARED, k, idx)
        else:  # a pool: every access is checked against its current top (docs/isa.md, "Pools")
            base, decl = self.pool_ptr[a.buffer], self.pools[a.buffer]
            self.fail(b.icmp_unsigned("<", idx, b.load(self.pool_top(a.buffer), typ=I64)), ERR_OOB_POOL, k, idx)
        return element(b, base, idx, mem_type(decl.dtype)), decl.dtype

    # ------------------------------------------------------------- instructions
    def instruction(self, ctx: Ctx, pc: int) -> None:
        k, ins = self.items[pc]
        b, op, t = self.b, ins.op, ins.dtype
        control = _CONTROL.get(op)
        if control is not None:
            control(self, ctx, pc, k, ins)
            return
        if self.emit_data_op(ins, k):
            pass
        elif op in REDUCE_COMBINE:
            self.reduce(ins, k)
        elif op == "PoolAlloc":
            self.pool_alloc(ins, k)
        elif op == "PoolFree":
            self.pool_free(ins, k)
        elif op == "PhaseGet":
            self.write(ins.dst, b.load(self.phase_ptr, typ=I64), DType.I64)
        elif op == "PhaseAdv":
            self.phase_adv(ins)
        elif op == "BarSync":
            barrier(b)
        elif op == "MemFence":
            b.fence("acq_rel")
        else:
            emit = VALUE_OPS.get(op)
            if emit is None:
                raise VerifyError(f"cuda: no code generator for {op} (stage '{self.stage.name}', instruction {k})")
            spec = OPCODES[op]
            args = [self.read(s, spec.source_type(j, t)) for j, s in enumerate(ins.srcs)]
            self.write(ins.dst, emit(b, t, args), spec.result_type(t))
        b.branch(self.block_for(ctx, pc + 1))

    def _loop(self, ctx: Ctx, pc: int, k: int, ins: Instr) -> None:
        """`c = c - 1` saturating at the type's minimum; `if c > 0: goto L` (docs/isa.md)."""
        target = self.label(ins.target)
        counter = ins.srcs[0] if ins.srcs else None
        if target > pc or not isinstance(counter, Reg) or not self.type_of(counter).is_int:
            raise VerifyError(f"cuda: stage '{self.stage.name}': instruction {k}: LOOP needs an integer counter "
                              f"register and a label at or before it")
        b, ct = self.b, self.type_of(counter)
        ptr, rt = self.reg_ptr[counter.name], reg_type(ct)
        c = b.load(ptr, typ=rt)
        above = (b.icmp_signed if ct.is_signed else b.icmp_unsigned)(">", c, ir.Constant(rt, 1))
        at_min = b.icmp_unsigned("==", c, ir.Constant(rt, int(ct.min)))
        b.store(b.select(at_min, c, b.sub(c, ir.Constant(rt, 1))), ptr)
        b.cbranch(above, self.block_for(ctx, target), self.block_for(ctx, pc + 1))


_CONTROL = {"BRA": KernelEmitter.emit_bra, "LOOP": KernelEmitter._loop, "CALL": KernelEmitter.emit_call,
            "RET": KernelEmitter.emit_ret, "EXIT": KernelEmitter.emit_exit}
