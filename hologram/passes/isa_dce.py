"""The ISA pass `isa-dce`: delete what cannot affect a result.

- instructions no path reaches (from the stage entry, or from a subroutine some
  reached CALL names);
- instructions whose destination is dead (no path reads it before it is written again)
  and that have no other effect: arithmetic, logic, math, conversions, moves, Atlas
  lookups, `PhaseGet`, and unchecked `LDG`/`LDS` (proven in bounds, so they cannot
  fault). A checked load stays (it may raise), so do `PoolLoad` (checked against the
  pool's top at run time), `PoolAlloc`, stores, reductions, barriers and control flow;
- labels nothing branches, loops or calls to;
- register declarations no instruction mentions.

Liveness is the conservative, context-insensitive kind of `isa_flow`, so a register a
subroutine reads is live at every call that can reach it. Repeats to a fixpoint.
"""

from __future__ import annotations

from hologram.isa.program import Label, Program, Stage
from hologram.passes.isa_flow import Graph, label_uses, liveness, per_stage, prune_regs, removable


def _sweep(body: tuple) -> tuple:
    g = Graph.of(body)
    live = liveness(body, g)
    used = label_uses(body)
    out = []
    for pc, it in enumerate(body):
        if pc not in g.reached:
            continue
        if isinstance(it, Label):
            if it.name in used:
                out.append(it)
            continue
        if it.dst is not None and removable(it) and not live.live_out(pc, it.dst.name):
            continue
        out.append(it)
    return tuple(out)


def _rewrite_stage(program: Program, stage: Stage) -> Stage:
    body = stage.body
    while True:
        new = _sweep(body)
        if new == body:
            break
        body = new
    return prune_regs(stage, body)


def run(program: Program) -> Program:
    return per_stage(program, _rewrite_stage)

