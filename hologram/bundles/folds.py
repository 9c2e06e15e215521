"""The min/max reductions a program shows, so a bundle's manifest can be held to them.

A call refuses a min, max, argmin or argmax over an empty extent, as numpy does, from the
list of reductions a bundle's manifest gives (hologram.call.args.check_reductions).
A program cannot state its reductions in general (it is any code), but the shapes
hologram lowers them to can be recognized, and a manifest must list an extent for each
(docs/bundles.md, "What loading checks"):

- across lanes: ReduceMax/ReduceMin into one element (no index) that the stage's
  `.init` seeds with the identity; it folds over the stage's whole domain;
- in a lane: a counted loop whose body folds a register into itself (MAX/MIN, or SEL
  for argmin/argmax) that holds the identity when the loop starts; it folds over the
  loop's trip count, when straight-line moves, adds and constant multiples of shape
  symbols give it.

A listed extent E that the lowering split into slices (`E//k` of them, and a tail of
`E - k*(E//k)`, hologram/lower/split.py) counts as listed for both parts.

The identity is -inf for a float max, +inf for a float min, the type's smallest for an
integer max and its largest for an integer min. A fold written any other way shows no
extent: this finds the reductions a manifest leaves out of an honest program; it cannot
prove a hand-written one has none. The program has passed the verifier, so its loops
nest (at most 64 deep) or are disjoint, and its labels are unique: the work is linear
in the program's size, times that depth.
"""

from __future__ import annotations

import bisect
from typing import Iterator

from hologram.core.dims import is_derived, parse_derived
from hologram.core.types import Affine, DType
from hologram.isa.program import Imm, Instr, Label, Program, Reg, Stage, Sym, imm_key

_SIGN = {"ReduceMax": -1, "ReduceMin": 1, "MAX": -1, "MIN": 1}  # the sign of each fold's identity
_MAX_VALUE_DEPTH = 32  # registers followed back to compute a trip count


def unlisted_reduction(reductions: tuple, program: Program) -> str | None:
    """How `program` folds a min or max over an extent the manifest's `reductions`
    ((kind, ((variable, extent), ...)) each) do not list, so that a call would give the
    fold's seed for an empty one instead of refusing it; None when every one is listed
    (or cannot be empty: `n + 1`, a constant >= 1, shape symbols being >= 0)."""
    listed = _with_slices({extent for _, axes in reductions for _, extent in axes}, program.symbols)
    for stage, fold, extent in identityless_folds(program):
        never_empty = extent.const >= 1 and all(c > 0 for _, c in extent.terms)
        if extent not in listed and not never_empty:
            return (f"stage {stage!r} {fold} over {extent}: an extent the manifest's reductions do not list (a call "
                    f"would give the seed for an empty one instead of refusing it)")
    return None


def _with_slices(listed: set[Affine], symbols: tuple[str, ...]) -> set[Affine]:
    """`listed` and, for each listed extent E the program splits (hologram/lower/split.py:
    a symbol `E//k`), its slices `E//k` and its tail `E - k*(E//k)`: either may be empty
    in a call whose E is not, and the fold combining them then has E's terms."""
    out = set(listed)
    for name in symbols:
        d = parse_derived(name) if is_derived(name) else None
        if d is not None and d.op == "floordiv" and d.a in listed:
            out |= {Affine.of(name), d.a - Affine.of(name) * d.b.const}
    return out


def identityless_folds(program: Program) -> Iterator[tuple[str, str, Affine]]:
    """(stage, what it folds, extent) of each min/max fold `program` shows in one of the
    module docstring's shapes."""
    buffers = program.buffers()
    symbols = set(program.symbols)
    for stage in program.stages:
        seeds = {(i.buffer, i.offset): i.value for i in stage.inits}
        defs = _Definitions(stage, symbols)
        for k, ins in enumerate(stage.body):
            if not isinstance(ins, Instr):
                continue
            if ins.op in ("ReduceMax", "ReduceMin") and ins.addr is not None and ins.addr.index is None \
                    and ins.addr.buffer in buffers:
                seed = seeds.get((ins.addr.buffer, ins.addr.offset))
                if seed is not None and imm_key(seed) == imm_key(identity(_SIGN[ins.op],
                                                                          buffers[ins.addr.buffer].dtype)):
                    for extent in stage.domain:
                        yield stage.name, f"folds {ins.op}.{ins.dtype} into {ins.addr.buffer}, seeded with {seed},", \
                            extent
            elif ins.op == "LOOP" and ins.srcs and isinstance(ins.srcs[0], Reg) and ins.target in defs.labels:
                top = defs.labels[ins.target]
                trips = defs.value(ins.srcs[0], top) if top < k else None
                if trips is not None:
                    for folded in defs.seeded_folds(top, k):
                        yield stage.name, f"folds %{folded.name} in the loop {ins.target},", trips


def identity(sign: int, dtype: DType) -> int | float:
    """The identity of a min (sign 1) or max (sign -1) fold over `dtype`, as
    hologram.lower.loops.identity seeds it."""
    if dtype.is_float:
        return sign * float("inf")
    return dtype.max if sign > 0 else dtype.min


class _Definitions:
    """Where each register of one stage is written, to find the value it holds at a point
    of the body in program order (the lowering's straight-line code before a loop)."""

    def __init__(self, stage: Stage, symbols: set[str]):
        self.body = stage.body
        self.types = stage.reg_types()
        self.symbols = symbols
        self.labels: dict[str, int] = {}
        self.defs: dict[Reg, list[int]] = {}
        for i, item in enumerate(self.body):
            if isinstance(item, Label):
                self.labels.setdefault(item.name, i)
            elif item.dst is not None:
                self.defs.setdefault(item.dst, []).append(i)
        self.values: dict[int, Affine | None] = {}  # by the index of the defining instruction

    def last(self, reg: Reg, before: int) -> Instr | None:
        """The last instruction before body[before] that writes `reg`."""
        at = self._last_index(reg, before)
        return None if at is None else self.body[at]  # type: ignore[return-value]

    def _last_index(self, reg: Reg, before: int) -> int | None:
        positions = self.defs.get(reg, [])
        k = bisect.bisect_left(positions, before)
        return positions[k - 1] if k else None

    def value(self, operand: object, before: int, depth: int = 0) -> Affine | None:
        """`operand`'s value at body[before] as an affine function of shape symbols, or None."""
        if isinstance(operand, Imm):
            return Affine.of(operand.value) if type(operand.value) is int else None
        if isinstance(operand, Sym):
            return Affine.of(operand.name) if operand.name in self.symbols else None
        if not isinstance(operand, Reg) or depth > _MAX_VALUE_DEPTH:
            return None
        at = self._last_index(operand, before)
        if at is None:
            return None
        if at not in self.values:
            ins = self.body[at]
            assert isinstance(ins, Instr)
            self.values[at] = self._computed(ins, [self.value(src, at, depth + 1) for src in ins.srcs])
        return self.values[at]

    @staticmethod
    def _computed(ins: Instr, values: list[Affine | None]) -> Affine | None:
        if any(v is None for v in values):
            return None
        a, b = values[0], values[-1]
        assert a is not None and b is not None
        if ins.op in ("MOV", "MOV_IMM"):
            return a
        if ins.op == "ADD":
            return a + b
        if ins.op == "SUB":
            return a - b
        if ins.op == "MUL" and (a.is_const or b.is_const):
            return b * a.const if a.is_const else a * b.const
        return None

    def seeded_folds(self, top: int, end: int) -> Iterator[Reg]:
        """The registers the loop body[top:end] folds into themselves (MAX/MIN r, r, x;
        SEL r, p, x, r) that hold a min/max identity entering the loop."""
        for ins in self.body[top + 1:end]:
            if not isinstance(ins, Instr) or ins.dst is None or ins.dst not in ins.srcs:
                continue
            if ins.op in ("MAX", "MIN"):
                signs: tuple[int, ...] = (_SIGN[ins.op],)
            elif ins.op == "SEL" and ins.srcs[0] != ins.dst:
                signs = (1, -1)  # argmin or argmax: the best value so far
            else:
                continue
            seed = self.last(ins.dst, top)
            dtype = self.types.get(ins.dst.name)
            if dtype is not None and seed is not None and seed.op == "MOV_IMM" and isinstance(seed.srcs[0], Imm) \
                    and any(imm_key(seed.srcs[0].value) == imm_key(identity(s, dtype)) for s in signs):
                yield ins.dst
