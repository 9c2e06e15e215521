"""The ISA pass `peephole`: local rewrites of the instruction stream, each exact.

Rules (T the instruction's type; "int" means integer types, never floats):

- `MOV %r, %r` is deleted; `CVT.T.T` is a `MOV`.
- identities that hold for every value of T, NaN, infinities and -0.0 included:
  int `x + 0`, `x - 0`, `x * 1`, `x / 1` (floor division), `x << 0`, `x >> 0`,
  `x | 0`, `x ^ 0`, `x & ~0`; bool `x & true`, `x | false`; float `x * 1.0`,
  `x / 1.0`, `x - 0.0` and `x + -0.0`; any T `min(x, x)`, `max(x, x)`, `x & x`,
  `x | x` become `MOV x`; int `x * 0`, `x - x`, `x ^ x` become `MOV 0` (`false` on
  bool for `x ^ x`). Never `x + 0.0` on floats (`-0.0 + 0.0` is `+0.0`), nor `x * 0.0`
  (NaN, infinities, signs), nor `x - x` on floats (NaN, infinities).
- `SEL %d, p, a, a` and `SEL` on an immediate predicate become `MOV`.
- inside a straight-line region, `NEG(NEG x)`, `NOT(NOT x)` and a value-preserving
  conversion undone (`CVT.A.B` of `CVT.B.A x`, when every A value is a B value, or when
  the verifier's interval analysis proves this `x` is one) become `MOV x`, provided `x`
  is not written in between.
- `X %t, ...` directly followed by `MOV %d, %t`, with `%t` dead after the MOV, writes
  `%d` at once.
- a branch to the instruction that follows it anyway is deleted, and so is a label
  nothing branches, loops or calls to (a label ends a straight-line region).

It repeats until nothing changes, so it is idempotent.
"""

from __future__ import annotations

import math

import attrs

from hologram.core.types import DType
from hologram.isa.program import Imm, Instr, Label, Operand, Program, Reg, Stage
from hologram.passes.isa_flow import BLOCK_ENDS, label_uses, liveness, per_stage, prune_regs, writes
from hologram.verify.dataflow import StageAnalysis, TooComplex

_MAX_ROUNDS = 20


def _imm(o: Operand) -> bool | int | float | None:
    return o.value if isinstance(o, Imm) else None


def _is(o: Operand, t: DType, value: float) -> bool:
    """Is `o` an immediate that denotes exactly `value` as type `t` (sign of zero
    included for floats)?"""
    v = _imm(o)
    if v is None or isinstance(v, bool):
        return False
    if t.is_float:
        return float(v) == value and math.copysign(1.0, float(v)) == math.copysign(1.0, value)
    return isinstance(v, int) and v == value


def _all_ones(o: Operand, t: DType) -> bool:
    v = _imm(o)
    return isinstance(v, int) and not isinstance(v, bool) and v == (-1 if t.is_signed else int(t.max))


def _mov(ins: Instr, src: Operand) -> Instr:
    return Instr("MOV", ins.dtype, ins.dst, (src,))


def _zero(t: DType) -> Imm:
    return Imm(False if t is DType.BOOL else 0)


def _identity(ins: Instr) -> Instr | None:
    """The simpler form of one instruction by itself, or None."""
    op, t, s = ins.op, ins.dtype, ins.srcs
    if op == "CVT" and t == ins.dtype2:
        return _mov(ins, s[0])
    if op == "SEL":
        if s[1] == s[2]:
            return _mov(ins, s[1])
        if isinstance(_imm(s[0]), bool):
            return _mov(ins, s[1] if s[0].value else s[2])
        return None
    if len(s) != 2 or t is None:
        return None
    a, b = s
    if op in ("MIN", "MAX", "AND", "OR") and a == b:
        return _mov(ins, a)
    if t is DType.BOOL:
        for x, k in ((a, b), (b, a)):
            if (op == "AND" and _imm(k) is True) or (op in ("OR", "XOR") and _imm(k) is False):
                return _mov(ins, x)
        if op == "XOR" and a == b:
            return _mov(ins, _zero(t))
        return None
    if t.is_int:
        if op in ("SUB", "XOR") and a == b:
            return _mov(ins, _zero(t))
        for x, k, ops in ((a, b, ("ADD", "SUB", "SHL", "SHR", "OR", "XOR")), (b, a, ("ADD", "OR", "XOR"))):
            if op in ops and _is(k, t, 0):
                return _mov(ins, x)
        for x, k, ops in ((a, b, ("MUL", "DIV")), (b, a, ("MUL",))):
            if op in ops and _is(k, t, 1):
                return _mov(ins, x)
        if op == "MUL" and (_is(a, t, 0) or _is(b, t, 0)):
            return _mov(ins, _zero(t))
        if op == "AND":
            for x, k in ((a, b), (b, a)):
                if _all_ones(k, t):
                    return _mov(ins, x)
        return None
    if t.is_float:
        for x, k, ops in ((a, b, ("MUL", "DIV")), (b, a, ("MUL",))):
            if op in ops and _is(k, t, 1.0):
                return _mov(ins, x)
        if op == "SUB" and _is(b, t, 0.0):
            return _mov(ins, a)
        for x, k in ((a, b), (b, a)):
            if op == "ADD" and _is(k, t, -0.0):
                return _mov(ins, x)
    return None


def _preserving(frm: DType, to: DType) -> bool:
    """Does converting every `frm` value to `to` keep it exactly (so converting back
    gives it again)?"""
    if frm is DType.BOOL:
        return True
    if to is DType.BOOL:
        return False
    if frm.is_int and to.is_int:
        return to.min <= frm.min and frm.max <= to.max
    if frm.is_float and to.is_float:
        return to.bits >= frm.bits
    if frm.is_int and to.is_float:
        mantissa = {16: 11, 32: 24, 64: 53}[to.bits]
        return frm.bits - (1 if frm.is_signed else 0) <= mantissa
    return False


def _undo(ins: Instr, defs: dict[str, tuple[Instr, bool]]) -> Instr | None:
    """`MOV x` when `ins` undoes the instruction that computed its operand."""
    if not ins.srcs or not isinstance(ins.srcs[0], Reg) or ins.srcs[0].name not in defs:
        return None
    prev, kept = defs[ins.srcs[0].name]
    if prev.op != ins.op or not prev.srcs:
        return None
    inner = prev.srcs[0]
    if ins.op in ("NEG", "NOT") and prev.dtype == ins.dtype:
        return _mov(ins, inner)
    if ins.op == "CVT" and prev.dtype == ins.dtype2 and prev.dtype2 == ins.dtype and \
            (kept or _preserving(prev.dtype2, prev.dtype)):
        return _mov(ins, inner)
    return None


def _in_range(program: Program, stage: Stage) -> set[int]:
    """pcs of integer narrowing conversions whose operand the verifier's interval
    analysis proves to fit the narrower type (so they keep the value)."""
    cands = [pc for pc, it in enumerate(stage.body) if isinstance(it, Instr) and it.op == "CVT"
             and it.dtype.is_int and it.dtype2.is_int and isinstance(it.srcs[0], Reg)
             and not _preserving(it.dtype2, it.dtype)]
    if not cands:
        return set()
    analysis = StageAnalysis(program, stage)
    try:
        if analysis.run():
            return set()
    except TooComplex:
        return set()
    return {pc for pc in cands if analysis.fits(pc, stage.body[pc].srcs[0].name, stage.body[pc].dtype)}


def _local(body: tuple, kept: set[int] = frozenset()) -> tuple:
    """The per-instruction and straight-line rules; `kept`: pcs of conversions known to
    keep their operand's value (see `_in_range`)."""
    out: list = []
    defs: dict[str, tuple[Instr, bool]] = {}  # register -> (its instruction, kept), this region
    for pc, it in enumerate(body):
        if isinstance(it, Label):
            defs.clear()
            out.append(it)
            continue
        new = _identity(it) or _undo(it, defs) or it
        if new.op == "MOV" and new.srcs[0] == new.dst:
            continue
        written = writes(new)
        defs = {r: d for r, d in defs.items()
                if r not in written and not any(isinstance(o, Reg) and o.name in written for o in d[0].srcs)}
        if new.op in ("NEG", "NOT", "CVT") and new.dst is not None and \
                not any(isinstance(o, Reg) and o.name == new.dst.name for o in new.srcs):
            defs[new.dst.name] = (new, new is it and pc in kept)
        if new.op in BLOCK_ENDS:
            defs.clear()
        out.append(new)
    return tuple(out)


def _branches(body: tuple) -> tuple:
    """Drop branches to the next instruction (only labels in between), then the labels
    nothing refers to (so straight-line regions grow)."""
    out = list(body)
    for pc in reversed(range(len(out))):
        it = out[pc]
        if isinstance(it, Instr) and it.op == "BRA":
            k = pc + 1
            while k < len(out) and isinstance(out[k], Label):
                if out[k].name == it.target:
                    del out[pc]
                    break
                k += 1
    used = label_uses(out)
    return tuple(it for it in out if not isinstance(it, Label) or it.name in used)


def _fold_copies(body: tuple) -> tuple:
    """`X %t, ...; MOV %d, %t` with %t dead afterwards: X writes %d."""
    live = liveness(body)
    out = list(body)
    drop: set[int] = set()
    for pc in range(len(body) - 1):
        a, b = body[pc], body[pc + 1]
        if not (isinstance(a, Instr) and isinstance(b, Instr) and b.op == "MOV" and a.dst is not None
                and a.op not in BLOCK_ENDS and pc not in drop):
            continue
        t = a.dst
        if b.srcs[0] != t or live.live_out(pc + 1, t.name) or b.dst == t:
            continue
        out[pc] = attrs.evolve(a, dst=b.dst)
        drop.add(pc + 1)
    return tuple(it for pc, it in enumerate(out) if pc not in drop)


def _rewrite_stage(program: Program, stage: Stage) -> Stage:
    body = stage.body
    kept = _in_range(program, stage)
    for _ in range(_MAX_ROUNDS):
        new = _fold_copies(_branches(_local(body, kept)))
        kept = set()  # the proofs were about the original body
        if new == body:
            break
        body = new
    return stage if body == stage.body else prune_regs(stage, body)


def run(program: Program) -> Program:
    return per_stage(program, _rewrite_stage)
