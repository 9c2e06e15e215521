"""Full sums a GPU backend gathers itself instead of merging each contribution at once.

A stage's float `ReduceAdd` into a constant element (`ReduceAdd.f32 [total]`: what
`sum`, `mean` and `dot` lower to) combines every lane's contribution into one value.
Merged into memory one contribution at a time (an atomic per lane), its running sum
grows past the values added and the error grows with the count, not with its log2 as
the accuracy contract says (docs/isa.md, "Reductions"): 2**24 + 1000 ones in f32 give
16777216. So the GPU backends add such sums as trees (docs/gpu.md, "Full float sums"):
per lane in registers, per block in shared memory, then over the blocks' partials.
`gathered_sums` names the elements that qualify; a scattered sum (an indexed element)
is still merged at once, as the contract allows.
"""

from __future__ import annotations

from typing import Iterable

from hologram.core.types import DType
from hologram.isa.program import Instr, Program, Stage

__all__ = ["gathered_sums"]


def gathered_sums(program: Program, stage: Stage,
                  dtypes: Iterable[DType] = (DType.F32,)) -> tuple[tuple[str, int, DType], ...]:
    """The elements `stage` sums contributions of one of `dtypes` into at a constant
    address of a global buffer of that same type, as (buffer, offset, dtype), in
    first-use order."""
    types = {name: b.dtype for name, b in program.buffers().items()}
    wanted = frozenset(dtypes)
    found: list[tuple[str, int, DType]] = []
    for ins in stage.body:
        if isinstance(ins, Instr) and ins.op == "ReduceAdd" and ins.addr.index is None and ins.dtype in wanted \
                and types.get(ins.addr.buffer) is ins.dtype:
            target = (ins.addr.buffer, ins.addr.offset, ins.dtype)
            if target not in found:
                found.append(target)
    return tuple(found)
