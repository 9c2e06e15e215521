"""The ISA pass `bounds`: drop the run-time check of accesses the verifier proves.

The lowering marks an access `.chk` when it does not know the index is in range. The
verifier's interval analysis (hologram.verify.dataflow) often does: `[m]` of a one-element temporary,
`[x + %i + 1]` on a domain of `n - 2` lanes over `x: f32[n]`, a column index bounded by
the loop that counts it. This pass asks it: it analyses each stage as if every access
were unchecked, and keeps `.chk` exactly on the accesses it could not prove. An access
it proves may then run without a check on a native backend, which is what the proof
licenses (docs/isa.md, "Bounds"); the interpreter checks every access anyway.

The analysis does not depend on which accesses are checked (a check only adds a run-time
test), so one run decides them all, and the result verifies by construction.
"""

from __future__ import annotations

import attrs

from hologram.isa.program import Instr, Program, Stage
from hologram.passes.isa_flow import per_stage
from hologram.verify.dataflow import StageAnalysis, TooComplex


def _rewrite_stage(program: Program, stage: Stage) -> Stage:
    checked = [pc for pc, it in enumerate(stage.body) if isinstance(it, Instr) and it.checked]
    if not checked:
        return stage
    body = list(stage.body)
    for pc in checked:  # an access that cannot fail needs no site to name
        body[pc] = attrs.evolve(body[pc], checked=False, site=None)
    trial = attrs.evolve(stage, body=tuple(body))
    try:
        problems = StageAnalysis(program, trial).run()
    except TooComplex:
        return stage
    if any(p.rule != "bounds" for p in problems):
        return stage  # the input does not verify: leave it to the verifier to say why
    unproven = {p.pc for p in problems}
    for pc in checked:
        if pc in unproven:
            body[pc] = stage.body[pc]
    return attrs.evolve(stage, body=tuple(body))


def run(program: Program) -> Program:
    return per_stage(program, _rewrite_stage, check=False)
