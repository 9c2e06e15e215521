"""The verifier's dataflow analysis of one stage: definite initialization and bounds.

An abstract interpretation over the stage body. The state at an instruction maps every
register that is *definitely written* on all paths reaching it to what is known of its
value: an `Interval` (integer registers), a `Cmp` (a predicate set by an integer SET,
so a branch on it narrows the compared registers), or None (written, value untracked).
Reading a register missing from the state is an error, and every unchecked memory access
must have its index proven inside the array.

The state is split by what can be known of a register (`State`): integer and
predicate registers (the ones addresses and branches depend on) map to their values in
a dict, every other register is one bit of a mask that says only "written". A float
instruction then changes one bit and shares the dict, so a stage of many float
registers (a tiled matrix product: ~900 registers, ~2200 instructions) does not copy a
dict of every register per instruction.

Control flow is the ISA's: forward BRA, backward LOOP (its counter narrows on both
edges: `> 0` on the back edge, `<= 0` after), and CALL, analysed per calling state (the
call graph is acyclic, the verifier checked that first). From the third round on, a
loop head keeps only the bounds that survived the previous round (widening), so the
iteration terminates. The analysis runs in two phases:
states to a fixpoint, then checks against the final states (an intermediate state is an
under-approximation and would give wrong answers).

Every part of the work that can grow faster than the stage (a state copied per
instruction, the rounds of a loop nest, the bounds compared, the prover's terms) is
charged to a `Meter`; past MAX_ANALYSIS_STEPS the analysis raises TooComplex, so no
program, however built, keeps it busy for more than a second or two (docs/hasm.md,
"Limits").
"""

from __future__ import annotations

import bisect
import collections
from typing import NamedTuple, Union

import attrs

from hologram.core.types import DType
from hologram.isa.opcodes import OPCODES
from hologram.isa.program import Addr, Imm, Instr, Label, Operand, Program, Reg, Special, Stage, Sym
from hologram.verify.control import induction_step, reachable, reads, successors
from hologram.verify.intervals import MAX_PROOF_WORK, Domain, Interval, Meter, Poly, TooComplex

I64 = DType.I64
NEGATE = {"lt": "ge", "ge": "lt", "le": "gt", "gt": "le", "eq": "ne", "ne": "eq"}
SWAP = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le", "eq": "eq", "ne": "ne"}
MAX_CONTEXTS = 20_000  # distinct (subroutine, calling state) analyses per stage
# Steps (a register state copied or joined, a bound compared, a prover term, an
# instruction of a loop scanned) the verification of one stage may take, so that no
# program keeps the verifier busy for long (docs/hasm.md, "Limits"). The largest stdlib
# stage (gemm's, 2237 instructions) takes 33k; a step costs about 1-5 us.
MAX_ANALYSIS_STEPS = 2_000_000


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


@attrs.frozen
class Problem:
    pc: int
    rule: str  # 'uninitialized' or 'bounds'
    message: str
    hint: str | None = None


def _freeze(s: State) -> tuple:
    return tuple(sorted(s.vals.items(), key=lambda kv: kv[0])), s.init


class StageAnalysis:
    """The analysis of one stage. `meter` bounds its work (MAX_ANALYSIS_STEPS by default;
    the verifier passes the one its control-flow checks already drew on): past it, any
    method raises TooComplex."""

    def __init__(self, program: Program, stage: Stage, meter: Meter | None = None):
        self.p, self.stage, self.body = program, stage, stage.body
        self.meter = meter if meter is not None else Meter(MAX_ANALYSIS_STEPS)
        self.types = stage.reg_types()
        self.bits = {name: 1 << k for k, name in enumerate(self.types)}
        self.tracked = {name for name, t in self.types.items() if t.is_int or t is DType.BOOL}
        self.labels = {it.name: k for k, it in enumerate(self.body) if isinstance(it, Label)}
        buffers = program.buffers()
        dims = [d for b in buffers.values() for d in b.shape]
        self.base = self.dom = Domain.from_dims(dims, stage.domain, self.meter)
        self.domains: dict[tuple, Domain] = {(): self.base}
        self.sizes: dict[tuple[str, str], Poly] = {}
        for name, b in buffers.items():
            size = Poly.const(1)
            for d in b.shape:
                size = size * Poly.of(d)
            self.sizes["global", name] = size
        self.sizes.update({("shared", m.name): Poly.const(m.size) for m in stage.shared})
        self.sizes.update({("pool", m.name): Poly.const(m.size) for m in stage.pools})
        self.pool_sizes = {m.name: m.size for m in stage.pools}
        self.specials = self._specials()
        self.preds: dict[int, list[tuple[int, str]]] = {}
        for pc in range(len(self.body)):
            for nxt, kind in successors(self.body, self.labels, pc):
                self.preds.setdefault(nxt, []).append((pc, kind))
        # pc -> the init bit it sets (0: none) for instructions that only write an
        # untracked register or nothing, and fall through: their transfer is one OR
        self.plain: dict[int, int] = {
            pc: 0 if it.dst is None else self.bits.get(it.dst.name, 0) for pc, it in enumerate(self.body)
            if isinstance(it, Instr) and it.op not in _CONTROL and (it.dst is None or it.dst.name not in self.tracked)}
        self.loops = [(self.labels[it.target], pc) for pc, it in enumerate(self.body)
                      if isinstance(it, Instr) and it.op == "LOOP"]  # (head, LOOP pc), by pc
        self.loop_heads = {head for head, _ in self.loops}
        self.loop_ends = {head: end for head, end in self.loops}  # the last LOOP to each head
        self.regions: dict[int, list[int]] = {}
        self.callee_writes: dict[int, set[str]] = {}
        self.loop_written: dict[int, set[str]] = {}
        self.inductions = self._inductions()
        self.fact_keys = tuple("$" + name for name in sorted(program.symbols))
        # register -> the predicates a SET compares it into (only a SET makes a Cmp), so a
        # write finds the facts it invalidates without scanning the whole state
        self.compares: dict[str, set[str]] = {}
        for it in self.body:
            if isinstance(it, Instr) and it.op == "SET" and it.dst is not None:
                for o in it.srcs:
                    if isinstance(o, Reg):
                        self.compares.setdefault(o.name, set()).add(it.dst.name)
        self.memo: dict[tuple, tuple[dict[int, State], State | None]] = {}
        self.checked: set[tuple] = set()
        self.problems: dict[int, Problem] = {}

    def _specials(self) -> dict[str, Interval]:
        out: dict[str, Interval] = {}
        for k, axis in enumerate("xyz"):
            if k < len(self.stage.domain):
                ext, blk = Poly.of(self.stage.domain[k]), self.stage.block[k]
                below_ext = Interval.range(0, ext - 1)
                out.update({f"gid.{axis}": below_ext, f"ctaid.{axis}": below_ext,
                            f"tid.{axis}": Interval.range(0, blk - 1), f"ntid.{axis}": Interval.point(blk),
                            f"gdim.{axis}": Interval.point(ext), f"nctaid.{axis}": Interval.range(1, ext)})
            else:  # axes beyond the domain have extent 1, as in CUDA
                out.update({f"{s}.{axis}": Interval.point(0) for s in ("gid", "ctaid", "tid")})
                out.update({f"{s}.{axis}": Interval.point(1) for s in ("ntid", "gdim", "nctaid")})
        return out

    # ================================================================ entry point
    def run(self) -> list[Problem]:
        """Problems found, ordered by instruction; empty when the stage is proven."""
        self._check(0, EMPTY)
        return [self.problems[pc] for pc in sorted(self.problems)]

    def fits(self, pc: int, reg: str, t: DType) -> bool:
        """After `run()`: whether register `reg` provably holds a value of integer type
        `t` just before instruction `pc`, in every calling context the checks analysed
        (an exact interval inside `t`'s range). False for a pc no check reached. For
        passes that read the proofs; the verifier itself does not use it."""
        states = [self.memo[key][0][pc] for key in self.checked if pc in self.memo[key][0]]
        for s in states:
            v = s.vals.get(reg)
            if not (isinstance(v, Interval) and v.exact and self._domain(s).fits(v.lo, v.hi, t)):
                return False
        return bool(states)

    # ================================================================== fixpoint
    def _region(self, entry: int) -> list[int]:
        if entry not in self.regions:
            self.regions[entry] = [pc for pc in reachable(self.body, self.labels, entry, self.meter)
                                   if pc < len(self.body)]
        return self.regions[entry]

    def _analyze(self, entry: int, state: State) -> tuple[dict[int, State], State | None]:
        """In-states of every instruction reached from `entry`, and the state at RET."""
        self.meter.charge(len(state.vals))
        key = (entry, _freeze(state))
        if key not in self.memo:
            if len(self.memo) >= MAX_CONTEXTS:
                raise TooComplex(f"too many distinct calling contexts to analyse (the limit is {MAX_CONTEXTS:,})")
            ins = self._fixpoint(entry, state)
            rets = [ins[pc] for pc in ins if isinstance(self.body[pc], Instr) and self.body[pc].op == "RET"]
            ret = None
            for s in rets:
                ret = s if ret is None else self._join(ret, s)
            self.memo[key] = (ins, ret)
        return self.memo[key]

    def _fixpoint(self, entry: int, start: State) -> dict[int, State]:
        region = self._region(entry)
        inside = set(region)
        ins: dict[int, State] = {}
        outs: dict[int, dict[str, State]] = {}
        visits: dict[int, int] = {}
        changed = True
        while changed:
            changed = False
            for pc in region:
                self.meter.charge(1 + len(self.preds.get(pc, ())))
                incoming = [outs[src][kind] for src, kind in self.preds.get(pc, ())
                            if src in inside and kind in outs.get(src, {})]
                if pc == entry:
                    incoming.append(start)
                if not incoming:
                    continue
                new = incoming[0]
                for s in incoming[1:]:
                    new = self._join(new, s)
                if pc in self.loop_heads and pc in ins:
                    visits[pc] = visits.get(pc, 0) + 1
                    if visits[pc] > 2:
                        new = self._widen(ins[pc], new, self._loop_writes(pc))
                if pc in self.inductions:
                    arrivals = [outs[src][kind] for src, kind in self.preds.get(pc, ())
                                if src < pc and src in inside and kind in outs.get(src, {})]
                    arrivals += [start] if pc == entry else []
                    if arrivals:
                        new = self._induct(pc, arrivals, new)
                if ins.get(pc) != new or pc not in outs:
                    ins[pc] = new
                    outs[pc] = self._transfer(pc, new)
                    changed = True
        return ins

    def _join(self, a: State, b: State) -> State:
        init = a.init & b.init
        if a.vals is b.vals:
            return State(a.vals, init)
        av, bv = a.vals, b.vals
        self.meter.charge(len(av) + len(bv))
        common = av.keys() & bv.keys()
        out = {k: min(av[k], bv[k]) for k in common if k[0] == "$"}  # facts both paths know
        d = self._domain_of(out)
        for r in common - out.keys():
            va, vb = av[r], bv[r]
            if va == vb:
                out[r] = va
            elif isinstance(va, Interval) and isinstance(vb, Interval):
                out[r] = d.hull(va, vb, self.types[r])
            else:
                out[r] = None
        return State(out, init)

    def _widen(self, old: State, new: State, written: set[str]) -> State:
        """Widen the registers the loop writes. One it does not write changes at the head
        only because a path from before the loop brought a new value (those paths are
        acyclic, so that settles), and widening it would lose a bound for nothing."""
        olds, news = old.vals, new.vals
        self.meter.charge(len(news))
        out = {k: v for k, v in news.items() if k[0] != "$" or olds.get(k) == v}
        d = self._domain_of(out)
        for r, v in news.items():
            if r not in written:
                continue
            if isinstance(v, Interval):
                was = olds.get(r)
                out[r] = d.widen(was, v, self.types[r]) if isinstance(was, Interval) else Interval.top(self.types[r])
            elif isinstance(v, Cmp) and olds.get(r) != v:
                out[r] = None
        return State(out, new.init)

    def _domain(self, s: State) -> Domain:
        """The prover for a state: the stage's facts plus the symbol bounds that guards
        established on the paths to it (kept in the state as `$symbol -> lower bound`)."""
        return self._domain_of(s.vals)

    def _domain_of(self, vals: dict[str, AVal]) -> Domain:
        # by symbol, not by scanning the state (it holds every register; this runs per instruction)
        facts = tuple((k[1:], vals[k]) for k in self.fact_keys if k in vals)
        if facts not in self.domains:
            lower = dict(self.base.lower)
            for sym, lb in facts:
                lower[sym] = max(lower.get(sym, lb), lb)
            self.domains[facts] = Domain(lower, self.meter)
        return self.domains[facts]

    # ======================================================== induction variables
    def _inductions(self) -> dict[int, tuple[str, dict[str, int]]]:
        """Loop head -> (counter, {register: step}) for the i64 registers a counted loop
        steps by a constant exactly once per iteration: at head arrival j, such a register
        is `v0 + step*j` and the counter `c0 - j`, so `v = v0 + step*(c0 - c)`. Requires
        one LOOP to the head, no entry into the loop but through the head, and the one
        write to the register on every path around, outside inner loops and callees."""
        loops = self.loops
        heads = collections.Counter(head for head, _ in loops)
        # every BRA as (its target's position, its pc), by target: the ones into a loop
        branches = sorted((self.labels[it.target], pc) for pc, it in enumerate(self.body)
                          if isinstance(it, Instr) and it.op == "BRA")
        targets = [t for t, _ in branches]
        ends = [end for _, end in loops]
        out: dict[int, tuple[str, dict[str, int]]] = {}
        for head, end in loops:
            into = branches[bisect.bisect_right(targets, head):bisect.bisect_left(targets, end)]
            inner = loops[bisect.bisect_right(ends, head):bisect.bisect_left(ends, end)]  # closed inside
            self.meter.charge(1 + len(into) + len(inner) + end - head)
            if heads[head] > 1 or any(not head <= pc < end for _, pc in into):
                continue
            writes: dict[str, list[int]] = {}
            for pc in range(head, end):
                for r in self._writes(pc):
                    writes.setdefault(r, []).append(pc)
            steps: dict[str, int] = {}
            for r, pcs in writes.items():
                step = induction_step(self.body[pcs[0]], r) if len(pcs) == 1 else None
                w = pcs[0]
                if step is None or self.types.get(r) is not I64:
                    continue
                self.meter.charge(len(inner) + w - head)
                if any(h2 <= w <= e2 for h2, e2 in inner if head < h2) or any(
                        self._jumps(pc, w + 1, end) for pc in range(head, w)):
                    continue
                steps[r] = step
            if steps:
                out[head] = (self.body[end].srcs[0].name, steps)
        return out

    def _loop_writes(self, head: int) -> set[str]:
        """Registers written anywhere in the loops that jump back to `head` (from the head
        to the last LOOP targeting it; only LOOP jumps backwards)."""
        if head not in self.loop_written:
            end = self.loop_ends.get(head, head)
            self.meter.charge(end - head)
            self.loop_written[head] = set().union(*(self._writes(pc) for pc in range(head, end + 1)))
        return self.loop_written[head]

    def _jumps(self, pc: int, lo: int, hi: int) -> bool:
        """Does the branch at `pc` target a label in [lo, hi)?"""
        it = self.body[pc]
        return isinstance(it, Instr) and it.op == "BRA" and lo <= self.labels[it.target] < hi

    def _writes(self, pc: int) -> set[str]:
        """Registers instruction `pc` may write, through calls too (the call graph is
        acyclic: the verifier checked it before this analysis runs)."""
        it = self.body[pc]
        if not isinstance(it, Instr):
            return set()
        if it.op == "LOOP":
            return {it.srcs[0].name}
        if it.op == "CALL":
            entry = self.labels[it.target]
            if entry not in self.callee_writes:
                self.meter.charge(len(self._region(entry)))
                self.callee_writes[entry] = set().union(*(self._writes(q) for q in self._region(entry)))
            return self.callee_writes[entry]
        return {it.dst.name} if it.dst is not None else set()

    def _induct(self, head: int, arrivals: list[State], s: State) -> State:
        counter, steps = self.inductions[head]
        e = arrivals[0]
        for a in arrivals[1:]:
            e = self._join(e, a)
        d = self._domain(s)
        ev, sv = e.vals, s.vals
        self.meter.charge(len(sv))
        out = dict(sv)
        for r, step in steps.items():
            if all(isinstance(x.get(y), Interval) for x in (ev, sv) for y in (r, counter)):
                trips = d.sub(ev[counter], sv[counter], I64)
                if trips.exact:  # c0 - c counts arrivals (never wraps): >= 0 even when the
                    # intervals of c0 and c overlap (a count known only as [1, 15])
                    trips = d.make(trips.lo + (Poly(),), trips.hi, I64, True)
                out[r] = d.add(ev[r], d.mul(Interval.point(step), trips, I64), I64)
        return State(out, s.init)

    # ================================================================== transfer
    def _transfer(self, pc: int, s: State) -> dict[str, State]:
        bit = self.plain.get(pc)
        if bit is not None:
            return {"fall": s if s.init & bit == bit else State(s.vals, s.init | bit)}
        self.dom = self._domain(s)
        item = self.body[pc]
        if isinstance(item, Label):
            return {"fall": s}
        op = item.op
        if op in ("EXIT", "RET"):
            return {}
        if op == "BRA":
            if item.pred is None:
                return {"taken": s}
            fact = s.vals.get(item.pred.reg.name)
            if not isinstance(fact, Cmp):
                return {"taken": s, "fall": s}
            edges = {"taken": self._refine(s, fact, not item.pred.negate),
                     "fall": self._refine(s, fact, item.pred.negate)}
            return {k: v for k, v in edges.items() if not self._infeasible(v)}
        if op == "LOOP":
            c = item.srcs[0].name
            dec = self.dom.add(self.dom.exact(s.vals.get(c), I64), Interval.point(-1), I64)
            after = self._write(s, c, self.dom.exact(dec, I64))  # LOOP compares the wrapped value
            edges = {"taken": self._narrow(after, c, "gt", Interval.point(0)),
                     "fall": self._narrow(after, c, "le", Interval.point(0))}
            return {k: v for k, v in edges.items() if not self._infeasible(v)}
        if op == "CALL":
            _, ret = self._analyze(self.labels[item.target], s)
            return {} if ret is None else {"fall": ret}
        if item.dst is not None:
            return {"fall": self._write(s, item.dst.name, self._value(item, s))}
        return {"fall": s}

    def _infeasible(self, s: State) -> bool:
        """A narrowed state no execution reaches (some register's interval is empty)."""
        d = self._domain(s)
        self.meter.charge(len(s.vals))
        return any(isinstance(v, Interval) and d.empty(v) for v in s.vals.values())

    def _write(self, s: State, reg: str, value: AVal) -> State:
        init = s.init | self.bits[reg]
        if reg not in self.tracked:  # only "written": no value, and no Cmp mentions it
            return s if init == s.init else State(s.vals, init)
        self.meter.charge(len(s.vals))
        out = dict(s.vals)
        for p in self.compares.get(reg, ()):
            v = out.get(p)
            if isinstance(v, Cmp) and v.mentions(reg):
                out[p] = None
        out[reg] = value
        return State(out, init)

    def _refine(self, s: State, fact: Cmp, holds: bool) -> State:
        mod = fact.mod if holds else NEGATE[fact.mod]
        for x, y, m in ((fact.a, fact.b, mod), (fact.b, fact.a, SWAP[mod])):
            other = self._operand(y, s, fact.dtype)
            if isinstance(x, Reg) and x.name in s.vals:
                s = self._narrow(s, x.name, m, other)
            elif isinstance(x, Sym) and x.name in self.p.symbols and m in ("gt", "ge", "eq") and other.exact:
                # `$k > 0` on this path: a lower bound of the symbol for everything after
                lbs = [b.value + (m == "gt") for b in other.lo if b.is_const]
                key = "$" + x.name
                if lbs and max(lbs) > max(s.vals.get(key, max(lbs) - 1), self.base.lower.get(x.name, max(lbs) - 1)):
                    s = State({**s.vals, key: max(lbs)}, s.init)
        return s

    def _narrow(self, s: State, reg: str, mod: str, other: Interval) -> State:
        """`s` on the path where `reg <mod> other` held."""
        self.meter.charge(len(s.vals))
        return State({**s.vals, reg: self.dom.narrow(s.vals.get(reg), mod, other, self.types[reg])}, s.init)

    # ==================================================================== values
    def _operand(self, o: Operand, s: State, t: DType) -> Interval:
        if isinstance(o, Imm):
            return Interval.point(int(o.value)) if isinstance(o.value, int) else Interval.top(t)
        if isinstance(o, Reg):
            v = s.vals.get(o.name)
            return v if isinstance(v, Interval) else Interval.top(t)
        if isinstance(o, Special):
            return self.specials[o.name]
        if isinstance(o, Sym) and o.name in self.p.symbols:
            return Interval.point(Poly.sym(o.name))
        return Interval.top(t)

    def _value(self, ins: Instr, s: State) -> AVal:
        t = self.types.get(ins.dst.name)
        op = ins.op
        if t is DType.BOOL:
            if op == "SET" and ins.dtype.is_int:
                return Cmp(ins.mod, ins.srcs[0], ins.srcs[1], ins.dtype)
            return None
        if t is None or not t.is_int:
            return None
        src = [self._operand(o, s, ins.dtype2 if op == "CVT" else (ins.dtype or t)) for o in ins.srcs]
        d, top = self.dom, Interval.top(t)
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
            return self._nonring(op, src[0], d.exact(src[1], t), t)
        if op == "SEL":
            return d.hull(src[1], src[2], t)
        if op == "CVT":
            return self._convert(ins.dtype2, t, src[0])
        if op in ("LDG", "LDS", "PoolLoad"):
            return top
        if op == "PoolAlloc":
            return Interval.range(0, self.pool_sizes[ins.target] - ins.count)
        return _FIXED_RANGES.get((op, t.is_signed), top)

    def _nonring(self, op: str, raw: Interval, b: Interval, t: DType) -> Interval:
        d, top, zero = self.dom, Interval.top(t), Poly()
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

    def _convert(self, frm: DType, to: DType, x: Interval) -> Interval:
        if frm is DType.BOOL:
            return Interval.range(0, 1)
        if not frm.is_int:
            return Interval.top(to)  # float -> int saturates into the type
        if x.exact and frm.min >= to.min and frm.max <= to.max:  # widening keeps the value
            return x
        if to.bits <= frm.bits:  # reduction modulo 2**bits commutes with the wrap
            return self.dom.make(x.lo, x.hi, to, False)
        return Interval.top(to)

    # ===================================================================== checks
    def _check(self, entry: int, state: State) -> None:
        key = (entry, _freeze(state))
        if key in self.checked:
            return
        self.checked.add(key)
        ins, _ = self._analyze(entry, state)
        self.meter.charge(len(ins))
        for pc in sorted(ins):
            item, s = self.body[pc], ins[pc]
            if isinstance(item, Label):
                continue
            self.dom = self._domain(s)
            for r in reads(item):
                if not s.init & self.bits.get(r, 0):
                    self._problem(pc, "uninitialized", f"register %{r} may be read before it is written",
                                  "write it on every path that reaches this instruction")
            if item.addr is not None and not item.checked and OPCODES[item.op].space:
                self._check_access(pc, item, s)
            if item.op == "CALL":
                self._check(self.labels[item.target], s)

    def _check_access(self, pc: int, ins: Instr, s: State) -> None:
        a: Addr = ins.addr
        space = OPCODES[ins.op].space
        size = self.sizes[space, a.buffer]
        idx = Interval.point(0) if a.index is None else s.vals.get(a.index.name)
        if a.index is not None and not isinstance(idx, Interval):
            idx = Interval.top(I64)
        at = self.dom.add(idx, Interval.point(a.offset), I64) if a.offset else idx
        # a modular index is fine: its true value is in range, and so is the wrapped one
        if self.dom.above(at, Poly()) and self.dom.below(at, size - 1):
            return
        off = f" {'-' if a.offset < 0 else '+'} {abs(a.offset)}" if a.offset else ""
        what = f"the address {a.offset}" if a.index is None else f"%{a.index.name}{off}"
        gave_up = (f" (the prover gave up on a bound here: past its limit of {MAX_PROOF_WORK:,} steps per bound)"
                   if self.dom.gave_up else "")
        self._problem(
            pc, "bounds", f"cannot prove this {space} access in bounds: {what} lies in {at} "
                f"but {a.buffer} has {size} element(s) (valid indices 0 .. {size - 1}){gave_up}",
            f"bound the index (guard it with SET/BRA, or MIN/MAX/REM) or mark the access checked: "
            f"{ins.op}{'.' + str(ins.dtype) if ins.dtype else ''}.chk")

    def _problem(self, pc: int, rule: str, message: str, hint: str | None = None) -> None:
        self.problems.setdefault(pc, Problem(pc, rule, message, hint))


_CONTROL = frozenset({"BRA", "LOOP", "CALL", "RET", "EXIT"})

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
