"""What the verifier's dataflow analysis knows of registers, and what instructions compute.

The abstract value of a register (`AVal`) is an `Interval` for an integer register, a
`Cmp` for a predicate an integer SET wrote (so a branch on it can narrow the compared
registers), or None: written, value untracked. A `State` holds them for every register
definitely written before an instruction, split by what can be known of a register:
integer and predicate registers (the ones addresses and branches depend on) map to their
values in a dict, every other register is one bit of a mask that says only "written". A
float instruction then changes one bit and shares the dict, so a stage of many float
registers (a tiled matrix product: ~900 registers, ~2200 instructions) does not copy a
dict of every register per instruction.

`Evaluator` gives the abstract value of an operand and of an instruction's result: the
launch geometry bounds the special registers, `+ - *` pass modular intervals through
(intervals.py), and the operations that do not commute with wrapping first ask for an
exact interval.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple, Union

import attrs

from hologram.core.types import Affine, DType
from hologram.isa.program import Imm, Instr, Operand, Reg, Special, Stage, Sym
from hologram.verify.intervals import Domain, Interval, Poly

@attrs.frozen
class Cmp:
    """A predicate register holds `a <mod> b` compared as `dtype` (an integer type)."""

    mod: str
    a: Operand
    b: Operand
    dtype: DType

    def mentions(self, reg: str) -> bool:
        return any(isinstance(o, Reg) and o.name == reg for o in (self.a, self.b))


AVal = Union[Interval, Cmp, None]


class State(NamedTuple):
    """What is known before an instruction. `vals`: every *tracked* register (integer or
    bool) definitely written on all paths here, with its value, plus `$symbol -> lower
    bound` facts; never mutated, so states share it. `init`: a bit per register of the
    stage (`StageAnalysis.bits`), set when it is definitely written."""

    vals: dict[str, AVal]
    init: int


EMPTY = State({}, 0)


def freeze(s: State) -> tuple:
    """`s` as a hashable key (the analysis memoizes per calling state)."""
    return tuple(sorted(s.vals.items(), key=lambda kv: kv[0])), s.init


def launch_intervals(stage: Stage) -> dict[str, Interval]:
    """The special registers' values, from the stage's domain and block."""
    out: dict[str, Interval] = {}
    for k, axis in enumerate("xyz"):
        if k < len(stage.domain):
            ext, blk = Poly.of(stage.domain[k]), stage.block[k]
            below_ext = Interval.range(0, ext - 1)
            out.update({f"gid.{axis}": below_ext, f"ctaid.{axis}": below_ext,
                        f"tid.{axis}": Interval.range(0, blk - 1), f"ntid.{axis}": Interval.point(blk),
                        f"gdim.{axis}": Interval.point(ext), f"nctaid.{axis}": Interval.range(1, ext)})
        else:  # axes beyond the domain have extent 1, as in CUDA
            out.update({f"{s}.{axis}": Interval.point(0) for s in ("gid", "ctaid", "tid")})
            out.update({f"{s}.{axis}": Interval.point(1) for s in ("ntid", "gdim", "nctaid")})
    return out


class Evaluator:
    """The abstract values of operands and instruction results in one stage: its register
    `types`, its launch geometry, the program's shape `symbols` and the stage's pools."""

    def __init__(self, stage: Stage, symbols: tuple[str, ...], types: dict[str, DType],
                 inside: Mapping[str, Affine] | None = None):
        self.symbols, self.types = symbols, types
        self.inside = dict(inside or {})  # derived symbols' values within the stage's lanes
        self.specials = launch_intervals(stage)
        self.pool_sizes = {m.name: m.size for m in stage.pools}

    def operand(self, o: Operand, s: State, t: DType) -> Interval:
        """The value of operand `o` read as type `t` in state `s` (the full range of `t`
        when nothing is known)."""
        if isinstance(o, Imm):
            return Interval.point(int(o.value)) if isinstance(o.value, int) else Interval.top(t)
        if isinstance(o, Reg):
            v = s.vals.get(o.name)
            return v if isinstance(v, Interval) else Interval.top(t)
        if isinstance(o, Special):
            return self.specials[o.name]
        if isinstance(o, Sym) and o.name in self.symbols:
            return Interval.point(Poly.of(self.inside[o.name]) if o.name in self.inside else Poly.sym(o.name))
        return Interval.top(t)

    def result(self, ins: Instr, s: State, d: Domain) -> AVal:
        """The value instruction `ins` writes to its destination, from state `s`, with `d`
        deciding the bounds (the state's prover)."""
        t = self.types.get(ins.dst.name)
        op = ins.op
        if t is DType.BOOL:
            if op == "SET" and ins.dtype.is_int:
                return Cmp(ins.mod, ins.srcs[0], ins.srcs[1], ins.dtype)
            return None
        if t is None or not t.is_int:
            return None
        src = [self.operand(o, s, ins.dtype2 if op == "CVT" else (ins.dtype or t)) for o in ins.srcs]
        top = Interval.top(t)
        if op in ("MOV", "MOV_IMM"):
            return src[0]
        if op in _RING:
            return _RING[op](d, src, t)
        if op == "SHL":
            k = d.exact(src[1], t).const
            return d.mul(src[0], Interval.point(1 << k), t) if k is not None and 0 <= k < t.bits else top
        if op in ("MIN", "MAX"):
            a, b = d.exact(src[0], t), d.exact(src[1], t)
            if op == "MIN":  # above what both are above; below what either is below
                return d.make(d.hull(a, b, t).lo, a.hi + b.hi, t, True)
            return d.make(a.lo + b.lo, d.hull(a, b, t).hi, t, True)
        if op == "ABS":
            a = d.exact(src[0], t)
            if d.above(a, Poly()):
                return a
            if d.below(a, Poly()) and d.above(a, Poly.const(int(t.min) + 1)):
                return d.neg(a, t)
            return top
        if op in ("DIV", "REM", "AND", "SHR"):
            return _nonring(d, op, src[0], d.exact(src[1], t), t)
        if op == "SEL":
            return d.hull(src[1], src[2], t)
        if op == "CVT":
            return _convert(d, ins.dtype2, t, src[0])
        if op in ("LDG", "LDS", "PoolLoad"):
            return top
        if op == "PoolAlloc":
            return Interval.range(0, self.pool_sizes[ins.target] - ins.count)
        return _FIXED_RANGES.get((op, t.is_signed), top)


def _nonring(d: Domain, op: str, raw: Interval, b: Interval, t: DType) -> Interval:
    top, zero = Interval.top(t), Poly()
    a = d.exact(raw, t)
    a_nonneg = d.above(a, zero)
    if op == "REM":  # numpy remainder takes the divisor's sign: [0, b - 1] for b >= 1
        if not d.above(b, Poly.const(1)):
            return top
        return d.make([zero], [p - 1 for p in b.hi] + (list(a.hi) if a_nonneg else []), t, True)
    if op == "AND":  # x & m lies in [0, m] for m >= 0, whatever x is
        his = [p for x in (a, b) if d.above(x, zero) for p in x.hi]
        return d.make([zero], his, t, True) if his else top
    if not a_nonneg:
        return top
    if op == "DIV" and d.above(b, Poly.const(1)):  # floor(a / b) in [0, a] for a >= 0, b >= 1
        alo, ahi = _const_bound(a.lo, max), _const_bound(a.hi, min)
        blo, bhi = _const_bound(b.lo, max), _const_bound(b.hi, min)
        if None not in (alo, ahi, blo, bhi):
            return Interval.range(max(alo, 0) // max(bhi, blo), ahi // blo)  # (bhi < blo: a dead path)
        return d.make([zero], a.hi, t, True)
    k = b.const
    if op == "SHR" and k is not None and 0 <= k < t.bits:
        return d.make([zero] + [Poly.const(c >> k) for c in [_const_bound(a.lo, max)] if c is not None],
                      [p for p in a.hi if not p.is_const] + [Poly.const(p.value >> k) for p in a.hi if p.is_const],
                      t, True)
    return top


def _convert(d: Domain, frm: DType, to: DType, x: Interval) -> Interval:
    if frm is DType.BOOL:
        return Interval.range(0, 1)
    if not frm.is_int:
        return Interval.top(to)  # float -> int saturates into the type
    if x.exact and frm.min >= to.min and frm.max <= to.max:  # widening keeps the value
        return x
    if to.bits <= frm.bits:  # reduction modulo 2**bits commutes with the wrap
        return d.make(x.lo, x.hi, to, False)
    return Interval.top(to)


_FIXED_RANGES = {  # (opcode, signed result type) -> the range of its result (docs/atlas.md)
    **{(op, sg): Interval.range(lo, hi) for op, lo, hi in (("ClsGet", 0, 95), ("NbrCount", 0, 6),
                                                          ("PhaseGet", 0, 767)) for sg in (True, False)},
    ("MIRROR", True): Interval.range(-1, 95),
    ("NbrGet", True): Interval.range(-1, 95),
}


_RING = {  # + - * commute with wrapping: modular intervals pass through them
    "ADD": lambda d, s, t: d.add(s[0], s[1], t),
    "SUB": lambda d, s, t: d.sub(s[0], s[1], t),
    "NEG": lambda d, s, t: d.neg(s[0], t),
    "MUL": lambda d, s, t: d.mul(s[0], s[1], t),
    "MAD": lambda d, s, t: d.add(d.mul(s[0], s[1], t), s[2], t),
    "FMA": lambda d, s, t: d.add(d.mul(s[0], s[1], t), s[2], t),
}


def _const_bound(bounds: tuple[Poly, ...], pick) -> int | None:
    consts = [p.value for p in bounds if p.is_const]
    return pick(consts) if consts else None
