"""The ISA pass `copyprop`: reads of a copied register read the original instead.

After `MOV %d, s` (or `MOV_IMM %d, imm`), a later read of `%d` in the same straight-line
region reads `s` directly, until `%d` or `s` is written again. A region ends at every
label (another path may arrive there with other values) and after every branch, LOOP,
CALL (the callee may write any register), RET and EXIT. Barriers and fences do not end
one: they order memory, and registers are the lane's own.

An operand slot only receives what the ISA admits there: the address index, a branch
predicate, the LOOP counter and the PoolFree handle must stay registers, so only
register-to-register copies reach them; any source operand takes an immediate, a special
register or a `$` constant. The copy itself stays: `isa-dce` deletes it once nothing
reads it.
"""

from __future__ import annotations

from hologram.isa.program import Label, Operand, Program, Reg, Stage
from hologram.passes.isa_flow import block_starts, map_operands, per_stage, prune_regs, writes


def _rewrite_stage(program: Program, stage: Stage) -> Stage:
    body = stage.body
    starts = block_starts(body)
    value: dict[str, Operand] = {}  # register -> an operand holding its value
    register: dict[str, Reg] = {}  # register -> a register holding its value
    out: list = []

    def substitute(o: Operand, pos: str) -> Operand:
        if not isinstance(o, Reg):
            return o
        if pos == "src" and o.name in value:
            return value[o.name]
        return register.get(o.name, o)

    for pc, it in enumerate(body):
        if pc in starts:
            value.clear()
            register.clear()
        if isinstance(it, Label):
            out.append(it)
            continue
        new = map_operands(it, substitute)
        written = writes(new)
        value = {d: s for d, s in value.items() if d not in written and not (isinstance(s, Reg) and s.name in written)}
        register = {d: s for d, s in register.items() if d not in written and s.name not in written}
        if new.op in ("MOV", "MOV_IMM") and new.srcs[0] != new.dst:
            d, src = new.dst.name, it.srcs[0]
            value[d] = new.srcs[0]
            if isinstance(src, Reg):
                register[d] = register.get(src.name, src) if src.name not in written else src
        out.append(new)
    body_t = tuple(out)
    return stage if body_t == body else prune_regs(stage, body_t)


def run(program: Program) -> Program:
    return per_stage(program, _rewrite_stage)

