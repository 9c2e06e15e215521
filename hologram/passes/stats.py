"""What a pipeline bought: stages, operations, instructions, registers and bytes moved.

    s = measure(kir, program)          # Stats; s.bytes_read is symbolic, e.g. 12*n + 12
    s.bind(n=1024).bytes_read          # Formula('12300')

Definitions (docs/passes.md, "Measuring: stats"):

- stages: the program's stages (each one a pass over its domain, a global barrier after).
- ir_ops: the operations of the kernel IR: per statement, its distinct non-leaf
  expression nodes (loads, arithmetic, reductions; not constants, indices, symbols or
  scalars), summed over statements.
- instructions: the instructions of all stage bodies (static count, labels excluded).
- registers: the most registers any one stage declares (the per-lane register file).
- bytes_read / bytes_written: what one launch moves from and to global memory (params
  and temps) with no cache: every global load, store and reduction executed, times the
  element size. An access whose element differs between lanes counts once per lane;
  one to the same element for every lane (a scalar temp, a reduction into one element)
  once per launch, as a broadcast or combined contributions move it once (both times
  the trip counts of the loops around it); an `.init` writes one element per launch.
  A loop runs max(count, 0) times; code under a zero-trip guard (`SET.le %p, X, 0;
  @%p BRA`: a loop and the invariants hoisted out of it) runs when X > 0. Code any
  other branch may skip counts as if it ran: a stage with such a branch over memory
  accesses (a lazy `where`, lanes that leave early) gives an upper bound, and
  `bytes_exact` is False; straight-line code, loops and guards are exact. Shared
  memory and pools are block- or lane-local: not counted.
"""

from __future__ import annotations

from typing import Mapping

import attrs

from hologram.ir import LEAF_OPS, Expr, KernelIR, OnlineMaxSum, Scan, Statement, statement_exprs
from hologram.isa.program import Instr, Program
from hologram.passes.work import QUOTIENTS, Formula, Poly, lane_work, quotient, stage_traffic

__all__ = ["Poly", "Formula", "QUOTIENTS", "Stats", "instruction_count", "lane_work", "measure", "quotient"]


# ------------------------------------------------------------------------ stats
@attrs.frozen
class Stats:
    """One kernel after one pipeline (see the module docstring for each field)."""

    stages: int
    ir_ops: int
    instructions: int
    registers: int
    bytes_read: Formula
    bytes_written: Formula
    bytes_exact: bool = True  # False: the byte counts are upper bounds (a branch skips accesses)

    @property
    def bytes_moved(self) -> Formula:
        return self.bytes_read + self.bytes_written

    def bind(self, symbols: Mapping[str, int] | None = None, **more: int) -> "Stats":
        """The same stats with these shape symbols substituted in the byte counts."""
        values = {**(symbols or {}), **more}
        return attrs.evolve(self, bytes_read=self.bytes_read.bind(values),
                            bytes_written=self.bytes_written.bind(values))


def instruction_count(program: Program) -> int:
    """The instructions of `program` (labels are not instructions)."""
    return sum(isinstance(i, Instr) for s in program.stages for i in s.body)


def measure(kir: KernelIR, program: Program) -> Stats:
    """The stats of one kernel: its IR (after the IR passes) and its program (after the
    ISA passes)."""
    read, written, exact = Formula(), Formula(), True
    for stage in program.stages:
        r, w, e = stage_traffic(stage, program)
        read, written, exact = read + r, written + w, exact and e
    return Stats(
        stages=len(program.stages),
        ir_ops=sum(_ir_ops(st) for st in kir.body),
        instructions=instruction_count(program),
        registers=max((len(s.regs) for s in program.stages), default=0),
        bytes_read=read,
        bytes_written=written,
        bytes_exact=exact,
    )


def _ir_ops(st: Statement) -> int:
    seen: set[Expr] = set()
    for root in statement_exprs(st):
        seen.update(n for n in root.walk() if n.op not in LEAF_OPS)
    # an online max-and-sum also computes max(v), v - max, exp and the sum; a scan its
    # running sum or product
    return len(seen) + (4 if isinstance(st, OnlineMaxSum) else 1 if isinstance(st, Scan) else 0)
