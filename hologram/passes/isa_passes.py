"""The built-in ISA passes, in pipeline order (docs/passes.md, "ISA passes").

peephole -> copyprop -> isa-dce -> licm -> bounds -> regalloc: local simplification
first, so copy propagation sees the copies it leaves; dead code after both; loop
hoisting on the cleaned body; bounds proofs on code whose registers still have one
meaning each (the verifier's interval analysis follows registers by name); register
sharing last, since it only renames.
"""

from __future__ import annotations

from hologram.passes import isa_bounds, isa_copyprop, isa_dce, isa_licm, isa_peephole, isa_regalloc
from hologram.passes.api import Pass

PASSES: tuple[Pass, ...] = (
    Pass("peephole", "isa", isa_peephole.run, before=("copyprop",),
         summary="local exact rewrites: self-moves, x+0 / x*1 (ints; floats only where exact), "
                 "double negation, branches to the next instruction"),
    Pass("copyprop", "isa", isa_copyprop.run, after=("peephole",), before=("isa-dce",),
         summary="reads of a MOV's destination read its source, within straight-line code"),
    Pass("isa-dce", "isa", isa_dce.run, after=("copyprop",), before=("licm",),
         summary="delete unreachable code, side-effect-free instructions with dead results, unused labels"),
    Pass("licm", "isa", isa_licm.run, after=("isa-dce",), before=("bounds",), pipelines=("O2",),
         summary="move loop-invariant instructions before their LOOP"),
    Pass("bounds", "isa", isa_bounds.run, after=("licm",), before=("regalloc",),
         summary="drop .chk from accesses the verifier proves in bounds"),
    Pass("regalloc", "isa", isa_regalloc.run, after=("bounds",), pipelines=("O2",),
         summary="registers with disjoint live ranges share a name (per dtype): fewer .reg"),
)
