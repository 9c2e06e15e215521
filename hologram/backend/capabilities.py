"""What a backend runs, declared: which instructions at which dtypes, which conversions,
whether block-shared memory and pools, and its limits (lanes per block, domain rank).

A backend that runs the whole ISA declares nothing (`Capabilities()`, every field
"everything"). A partial backend (a first GPU port, a teaching example) says what it
covers, and is then *described* instead of failing: the runtime refuses a program it
does not cover with an `UnsupportedProgram` naming the first uncovered instruction before
the backend's `prepare` is called, the differential harness counts such a program as not
covered by it, and the conformance kit tests exactly what it declares:

    Capabilities.of("ADD SUB MUL LDG STG MOV MOV_IMM EXIT", dtypes=(DType.F32, DType.I32),
                    max_block_threads=1024)
"""

from __future__ import annotations

from typing import Iterable

import attrs

from hologram.core.types import DType
from hologram.isa.opcodes import OPCODES
from hologram.isa.program import Instr, Program

__all__ = ["Capabilities", "Instruction", "table_instructions", "table_conversions"]

Instruction = tuple[str, DType | None]  # (opcode, the dtype of its suffix; None for an opcode without one)


def _suffix_dtypes(op: str) -> tuple[DType | None, ...]:
    spec = OPCODES[op]
    if spec.types == "none":
        return (None,)
    return tuple(d for d in DType if spec.admits(d))


def table_instructions() -> tuple[Instruction, ...]:
    """Every (opcode, dtype) the op table admits, in table order."""
    return tuple((op, d) for op in OPCODES for d in _suffix_dtypes(op))


def table_conversions() -> tuple[tuple[DType, DType], ...]:
    """Every CVT (to, from) pair the ISA has."""
    return tuple((to, frm) for to in DType for frm in DType)


@attrs.frozen
class Capabilities:
    """A backend's declaration. `instructions`: the (opcode, dtype) pairs it runs (None:
    the whole op table); `conversions`: the CVT (to, from) pairs (None: every pair whose
    `CVT.to` instruction is declared); `shared_memory`, `pools`: whether it runs stages
    that declare block-shared arrays or per-lane pools; `max_block_threads`: the most
    lanes a block may have (None: no limit); `max_rank`: the most domain axes (1 to 3)."""

    instructions: frozenset[Instruction] | None = attrs.field(default=None, converter=attrs.converters.optional(
        frozenset))
    conversions: frozenset[tuple[DType, DType]] | None = attrs.field(default=None, converter=attrs.converters.optional(
        frozenset))
    shared_memory: bool = True
    pools: bool = True
    max_block_threads: int | None = None
    max_rank: int = 3

    def __attrs_post_init__(self) -> None:
        unknown = sorted({op for op, _ in self.instructions or ()} - set(OPCODES))
        if unknown:
            raise ValueError(f"capabilities name opcodes the op table does not have: {', '.join(unknown)}")
        if not 1 <= self.max_rank <= 3:
            raise ValueError(f"max_rank is the most domain axes a stage may have, 1 to 3; got {self.max_rank}")
        if self.max_block_threads is not None and self.max_block_threads < 1:
            raise ValueError(f"max_block_threads must be at least 1, got {self.max_block_threads}")

    @staticmethod
    def of(ops: str | Iterable[str], dtypes: Iterable[DType] | None = None, *,
           excluding: Iterable[Instruction] = (), conversions: Iterable[tuple[DType, DType]] | None = None,
           shared_memory: bool = True, pools: bool = True, max_block_threads: int | None = None,
           max_rank: int = 3) -> "Capabilities":
        """The opcodes `ops` (a list or one space-separated string) at every dtype of
        `dtypes` their suffix admits (None: every dtype), less the pairs `excluding`."""
        names = ops.split() if isinstance(ops, str) else list(ops)
        unknown = sorted(set(names) - set(OPCODES))
        if unknown:
            raise ValueError(f"capabilities name opcodes the op table does not have: {', '.join(unknown)}")
        allowed = None if dtypes is None else frozenset(dtypes)
        dropped = set(excluding)
        pairs = {(op, d) for op in names for d in _suffix_dtypes(op)
                 if (d is None or allowed is None or d in allowed) and (op, d) not in dropped}
        return Capabilities(frozenset(pairs), None if conversions is None else frozenset(conversions),
                            shared_memory, pools, max_block_threads, max_rank)

    @property
    def complete(self) -> bool:
        """Whether this declares the whole ISA (nothing to check a program against)."""
        return (self.instructions is None and self.conversions is None and self.shared_memory and self.pools
                and self.max_block_threads is None and self.max_rank == 3)

    def covers(self, op: str, dtype: DType | None) -> bool:
        """Whether `op` at `dtype` (its suffix; None for an opcode without one) is declared."""
        return self.instructions is None or (op, dtype) in self.instructions

    def covers_conversion(self, to: DType, frm: DType) -> bool:
        if not self.covers("CVT", to):
            return False
        return self.conversions is None or (to, frm) in self.conversions

    def covers_instr(self, ins: Instr) -> bool:
        if ins.op == "CVT" and isinstance(ins.dtype2, DType):
            return self.covers_conversion(ins.dtype, ins.dtype2)
        return self.covers(ins.op, ins.dtype if OPCODES[ins.op].types != "none" else None)

    def uncovered(self, program: Program) -> str | None:
        """What in `program` this declaration does not cover, in words (the first such
        thing: stage, then instruction), or None when it covers the whole program."""
        if self.complete:
            return None
        for stage in program.stages:
            where = f"stage {stage.name!r}"
            if len(stage.domain) > self.max_rank:
                return f"{where}: a domain of {len(stage.domain)} axes (this backend runs at most {self.max_rank})"
            lanes = 1
            for b in stage.block:
                lanes *= b
            if self.max_block_threads is not None and lanes > self.max_block_threads:
                return (f"{where}: blocks of {lanes} lanes {tuple(stage.block)} (this backend runs at most "
                        f"{self.max_block_threads} per block)")
            if stage.shared and not self.shared_memory:
                return f"{where}: it declares block-shared memory, which this backend does not run"
            if stage.pools and not self.pools:
                return f"{where}: it declares per-lane pools, which this backend does not run"
            for k, item in enumerate(stage.body):
                if isinstance(item, Instr) and item.op in OPCODES and not self.covers_instr(item):
                    from hologram.isa.asm import format_instr  # only to word a refusal
                    what = (f"CVT.{item.dtype}.{item.dtype2}" if item.op == "CVT"
                            else f"{item.op}.{item.dtype}" if OPCODES[item.op].types != "none" else item.op)
                    return f"{where}: instruction {k} `{format_instr(item, align=False)}`: {what} is not declared"
        return None
