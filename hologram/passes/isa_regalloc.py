"""The ISA pass `regalloc`: registers whose live ranges never overlap share one name.

Liveness (`isa_flow.liveness`) gives, after each instruction, the registers some later
path still reads. Two registers *interfere* when one is written while the other is
live (a `MOV %d, %s` does not make `%d` and `%s` interfere: right after it they hold the
same value, so they may share). Registers of one dtype are then coloured greedily, in
order of first appearance, each preferring the colour of a register it is copied from or
to (so the copy becomes `MOV %x, %x` and disappears); a colour is named after its first
register. The stage's `.reg` declarations become one per colour.

Why this keeps every result: every read on an execution path of a verified program is
preceded by a write of the same register on that path (the verifier checks it), and the
liveness is computed over a superset of the execution paths (forward branches, LOOP back
edges, calls and returns merged context-insensitively). So between a write of a register
and every read of that value, nothing writes a register of the same colour. Registers are
the lane's own, so barriers need nothing special: a value live across a `BarSync` simply
interferes with everything written on the way. The verifier checks the renamed stage; if
the renaming costs a proof (its interval analysis tracks facts by register), the stage is
kept as it was.
"""

from __future__ import annotations

import attrs

from hologram.core.types import DType
from hologram.isa.program import Instr, Label, Program, Reg, RegDecl, Stage
from hologram.passes.isa_flow import Graph, Liveness, liveness, map_operands, per_stage, reads, writes


def _interference(body: tuple, live: Liveness) -> list[int]:
    """adj[b]: the mask of registers live where register bit b is written. Interference
    is the symmetric closure (a and c interfere when c is in adj[a] or a in adj[c]);
    `_colour` tests both directions instead of building it, which would visit every
    edge one bit at a time (a tiled matrix product has ~10^6)."""
    adj = [0] * len(live.bit)
    for pc, it in enumerate(body):
        if not isinstance(it, Instr):
            continue
        spare = live.mask(r.name for r in it.srcs[:1] if it.op == "MOV" and isinstance(r, Reg))
        for d in writes(it):
            b = live.bit[d]
            adj[b] |= live.out[pc] & ~(1 << b) & ~spare
    return adj


def _colour(body: tuple, types: dict[str, DType], live: Liveness, adj: list[int]) -> dict[str, str]:
    """Register -> the register whose name it takes. Copies are coalesced first (their
    two sides merged when nothing makes them interfere), then groups are coloured
    greedily in order of first appearance."""
    bit, n = live.bit, len(live.bit)
    group = list(range(n))  # union-find over register bits
    members, gadj = [1 << b for b in range(n)], list(adj)

    def find(b: int) -> int:
        while group[b] != b:
            group[b] = group[group[b]]
            b = group[b]
        return b

    for it in body:
        if isinstance(it, Instr) and it.op == "MOV" and isinstance(it.srcs[0], Reg):
            a, c = find(bit[it.dst.name]), find(bit[it.srcs[0].name])
            if a != c and not (gadj[a] & members[c] or gadj[c] & members[a]) \
                    and types[it.dst.name] == types[it.srcs[0].name]:
                group[c] = a
                members[a] |= members[c]
                gadj[a] |= gadj[c]
    names = list(bit)  # in order of first appearance
    colours: list[tuple[str, DType, int, int]] = []  # (name, dtype, mask of members, their gadj)
    chosen: dict[int, str] = {}
    for name in names:
        g = find(bit[name])
        if g in chosen:
            continue
        t = types[name]
        for k, (cname, ct, cmask, cadj) in enumerate(colours):
            if ct == t and not (cmask & gadj[g] or cadj & members[g]):
                colours[k] = (cname, ct, cmask | members[g], cadj | gadj[g])
                chosen[g] = cname
                break
        else:
            colours.append((name, t, members[g], gadj[g]))
            chosen[g] = name
    return {name: chosen[find(b)] for name, b in bit.items()}


def _rewrite_stage(program: Program, stage: Stage) -> Stage:
    body = stage.body
    types = stage.reg_types()
    if any(r not in types for it in body if isinstance(it, Instr) for r in reads(it) | writes(it)):
        return stage  # an undeclared register: not a program this pass can reason about
    live = liveness(body, Graph.of(body), keep_compares=True)
    colour = _colour(body, types, live, _interference(body, live))
    rename = lambda o, pos: Reg(colour[o.name]) if isinstance(o, Reg) else o  # noqa: E731
    out: list = []
    for it in body:
        if isinstance(it, Label):
            out.append(it)
            continue
        new = map_operands(it, rename)
        if new.dst is not None:
            new = attrs.evolve(new, dst=Reg(colour[new.dst.name]))
        if new.op == "MOV" and new.srcs[0] == new.dst:
            continue
        out.append(new)
    used = set(colour.values())
    regs = tuple(RegDecl(r.name, r.dtype) for r in stage.regs if r.name in used)
    return attrs.evolve(stage, body=tuple(out), regs=regs)


def run(program: Program) -> Program:
    return per_stage(program, _rewrite_stage)
