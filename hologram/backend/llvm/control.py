"""A lane's code as LLVM basic blocks: operands, and the control flow every target
lowers alike (BRA, CALL, RET, EXIT).

The lane's code is emitted by walking the instruction list with a call context (the
stack of inlined CALLs): each reachable (context, pc) gets one basic block, created on
first use, so a CALL body is copied per call site and RET becomes a branch to the
caller's continuation (the verifier forbids recursion, so the walk ends).

`LaneCode` is a mixin for a backend's stage emitter, which provides:

- `backend_name` (messages), `max_blocks` (the most code copies a stage may take),
  and `convert`/`const`/`compare` (its CVT, immediates and SET, as staticmethods);
- after `read_stage` (the stage's facts), `reg_ptr` (register -> alloca), `special`
  (special register -> value), `syms` (shape symbol -> i64), `consts` (shape symbol or
  scalar -> (value, dtype)), `b` (the builder);
- `lane_end` (the block that ends the lane), `new_block(name)`, `instruction(ctx, pc)`
  (one instruction, ending its block), `fail(ok, code, k, value)` (the error record),
  `address(ins, k)` (an operand's element pointer and dtype, bounds-checked when
  `.chk`) and `write(dst, value, dtype)` (a register written, converted as CVT).
"""

from __future__ import annotations

from typing import Any, Callable

from llvmlite import ir

from hologram.core.errors import VerifyError
from hologram.core.types import Affine, DType
from hologram.isa.program import Imm, Instr, Label, Program, Reg, Special, Sym

from ..error_record import ERR_RECURSION
from .types import I1, from_mem, i64, int_value, mem_type, reg_type, to_mem

Ctx = tuple[tuple[int, int], ...]  # (subroutine entry pc, return pc) of each active CALL


class LaneCode:
    backend_name: str
    max_blocks: int
    convert: Callable[[ir.IRBuilder, ir.Value, DType, DType], ir.Value]
    const: Callable[[Any, DType], ir.Constant]
    compare: Callable[[ir.IRBuilder, str, DType, ir.Value, ir.Value], ir.Value]

    b: ir.IRBuilder
    lane_end: ir.Block
    items: list[tuple[int, Instr]]
    labels: dict[str, int]

    def read_stage(self, program: Program, index: int) -> None:
        """Take in stage `index` of `program`: `program`, `index`, `stage`, `buffers`,
        `scalar_params`, `reg_types`, `items` and `labels` (the body without its labels,
        which map to the index in `items` they stand before), `rank`, `block` (3-D)."""
        self.program, self.index = program, index
        self.stage = stage = program.stages[index]
        self.buffers = program.buffers()
        self.scalar_params = program.scalars()
        self.reg_types = stage.reg_types()
        self.items = []  # (body index, instruction)
        self.labels = {}
        for k, item in enumerate(stage.body):
            if isinstance(item, Label):
                self.labels[item.name] = len(self.items)
            else:
                self.items.append((k, item))
        self.rank = len(stage.domain)
        self.block = tuple(stage.block) + (1,) * (3 - len(stage.block))

    def affine(self, a: Affine) -> ir.Value:
        """An affine dimension's value at this launch, from the shape symbols `syms`."""
        b = self.b
        v: ir.Value = i64(a.const)
        for name, c in a.terms:
            if name not in self.syms:
                raise VerifyError(f"{self.backend_name}: shape symbol '{name}' is not a program symbol")
            v = b.add(v, b.mul(self.syms[name], i64(c)))
        return v

    def emit_lane_code(self, start: int = 0) -> None:
        """Emit the lane's code from (top level, `start`) at the builder's position."""
        self.blocks: dict[tuple[Ctx, int], ir.Block] = {}
        self.todo: list[tuple[Ctx, int]] = []
        self.b.branch(self.block_for((), start))
        while self.todo:
            ctx, pc = self.todo.pop()
            self.b.position_at_end(self.blocks[(ctx, pc)])
            self.instruction(ctx, pc)

    def block_for(self, ctx: Ctx, pc: int) -> ir.Block:
        if pc >= len(self.items):
            return self.lane_end  # falling off the body ends the lane
        key = (ctx, pc)
        blk = self.blocks.get(key)
        if blk is None:
            if len(self.blocks) >= self.max_blocks:
                raise VerifyError(f"{self.backend_name}: stage '{self.stage.name}': inlining the subroutine calls "
                                  f"needs more than {self.max_blocks} code copies")
            blk = self.blocks[key] = self.new_block(f"pc{pc}")
            self.todo.append(key)
        return blk

    def label(self, name: str | None) -> int:
        if name not in self.labels:
            raise VerifyError(f"{self.backend_name}: stage '{self.stage.name}': unknown label {name!r}")
        return self.labels[name]

    # ----------------------------------------------------------------- operands
    def type_of(self, operand) -> DType:
        if isinstance(operand, Reg):
            if operand.name not in self.reg_types:
                raise VerifyError(f"{self.backend_name}: stage '{self.stage.name}': register %{operand.name} is "
                                  f"not declared")
            return self.reg_types[operand.name]
        if isinstance(operand, Special):
            return DType.I64
        if isinstance(operand, Sym):
            if operand.name not in self.consts:
                raise VerifyError(f"{self.backend_name}: ${operand.name} is neither a shape symbol nor a scalar "
                                  f"parameter")
            return self.consts[operand.name][1]
        raise VerifyError(f"{self.backend_name}: bad operand {operand!r}")

    def raw(self, operand) -> tuple[ir.Value, DType]:
        t = self.type_of(operand)
        if isinstance(operand, Reg):
            return self.b.load(self.reg_ptr[operand.name], typ=reg_type(t)), t
        if isinstance(operand, Special):
            return self.special[operand.name], t
        return self.consts[operand.name][0], t

    def read(self, operand, want: DType) -> ir.Value:
        """`operand` as a value of `want`, converted as CVT when its type differs."""
        if isinstance(operand, Imm):
            return self.const(operand.value, want)
        v, have = self.raw(operand)
        return self.convert(self.b, v, have, want)

    def read_int(self, operand) -> ir.Value:
        """An integer operand's mathematical value as i64 (indices, handles, counts)."""
        if isinstance(operand, Imm):
            return i64(int(operand.value))
        v, have = self.raw(operand)
        if have.is_float:
            raise VerifyError(f"{self.backend_name}: {operand} must be an integer, not {have}")
        return int_value(self.b, v, have)

    def emit_data_op(self, ins: Instr, k: int) -> bool:
        """Emit `ins` if it is one every target emits alike (a load, a store, CVT, SET),
        without ending its block; False for any other instruction."""
        b, op, t = self.b, ins.op, ins.dtype
        if op in ("LDG", "LDS", "PoolLoad"):
            ptr, bt = self.address(ins, k)
            v = from_mem(b, b.load(ptr, typ=mem_type(bt)), bt)
            self.write(ins.dst, self.convert(b, v, bt, t), t)
        elif op in ("STG", "STS", "PoolStore"):
            v = self.read(ins.srcs[0], t)
            ptr, bt = self.address(ins, k)
            b.store(to_mem(b, self.convert(b, v, t, bt), bt), ptr)
        elif op == "CVT":
            src = ins.dtype2 or self.type_of(ins.srcs[0])
            self.write(ins.dst, self.convert(b, self.read(ins.srcs[0], src), src, t), t)
        elif op == "SET":
            x, y = (self.read(s, t) for s in ins.srcs)
            self.write(ins.dst, self.compare(b, ins.mod, t, x, y), DType.BOOL)
        else:
            return False
        return True

    # ------------------------------------------------------------------ control
    def emit_bra(self, ctx: Ctx, pc: int, k: int, ins: Instr) -> None:
        target = self.label(ins.target)
        if target <= pc:
            raise VerifyError(f"{self.backend_name}: stage '{self.stage.name}': instruction {k}: BRA may only jump "
                              f"forward")
        if ins.pred is None:
            self.b.branch(self.block_for(ctx, target))
            return
        p = self.read(ins.pred.reg, DType.BOOL)
        taken, fall = self.block_for(ctx, target), self.block_for(ctx, pc + 1)
        if ins.pred.negate:
            taken, fall = fall, taken
        self.b.cbranch(p, taken, fall)

    def emit_call(self, ctx: Ctx, pc: int, k: int, ins: Instr) -> None:
        target = self.label(ins.target)
        if any(entry == target for entry, _ in ctx):
            # Unreachable in verified programs (no recursion); kept total for others.
            self.fail(ir.Constant(I1, 0), ERR_RECURSION, k, i64(0))
            self.b.branch(self.lane_end)
            return
        self.b.branch(self.block_for(ctx + ((target, pc + 1),), target))

    def emit_ret(self, ctx: Ctx, pc: int, k: int, ins: Instr) -> None:
        # As PTX's `ret`: returning from the stage's entry code ends the lane.
        self.b.branch(self.block_for(ctx[:-1], ctx[-1][1]) if ctx else self.lane_end)

    def emit_exit(self, ctx: Ctx, pc: int, k: int, ins: Instr) -> None:
        self.b.branch(self.lane_end)
