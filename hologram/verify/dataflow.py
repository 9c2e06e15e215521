"""The verifier's dataflow analysis of one stage: definite initialization and bounds.

An abstract interpretation over the stage body. The state at an instruction maps every
register that is *definitely written* on all paths reaching it to what is known of its
value (abstract_values.py): an `Interval` (integer registers), a `Cmp` (a predicate set
by an integer SET, so a branch on it narrows the compared registers), or None (written,
value untracked). Reading a register missing from the state is an error, and every
unchecked memory access must have its index proven inside the array.

Control flow is the ISA's: forward BRA, backward LOOP (its counter narrows on both
edges: `> 0` on the back edge, `<= 0` after), and CALL, analysed per calling state (the
call graph is acyclic, the verifier checked that first). From the third round on, a
loop head keeps only the bounds that survived the previous round (widening) of the
registers the loop writes, and derives its induction variables from the counter
(loops.py), so the iteration terminates. The analysis runs in two phases:
states to a fixpoint, then checks against the final states (an intermediate state is an
under-approximation and would give wrong answers).

Every part of the work that can grow faster than the stage (a state copied per
instruction, the rounds of a loop nest, the bounds compared, the prover's terms) is
charged to a `Meter`; past MAX_ANALYSIS_STEPS the analysis raises TooComplex, so no
program, however built, keeps it busy for more than a second or two (docs/hasm.md,
"Limits").
"""

from __future__ import annotations

import attrs

from hologram.core.dims import divided_lanes, lane_facts, substitute, within_lanes
from hologram.core.types import Affine, DType
from hologram.isa.opcodes import OPCODES
from hologram.isa.program import Addr, Instr, Label, Program, Reg, Stage, Sym
from hologram.verify.abstract_values import EMPTY, AVal, Cmp, Evaluator, State, freeze
from hologram.verify.control import reads, successors
from hologram.verify.intervals import MAX_PROOF_WORK, Domain, Interval, Meter, Poly, TooComplex
from hologram.verify.loops import StageLoops

I64 = DType.I64
NEGATE = {"lt": "ge", "ge": "lt", "le": "gt", "gt": "le", "eq": "ne", "ne": "eq"}
SWAP = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le", "eq": "eq", "ne": "ne"}
_CONTROL = frozenset(name for name, spec in OPCODES.items() if "control" in spec.effects)
MAX_CONTEXTS = 20_000  # distinct (subroutine, calling state) analyses per stage
# Steps (a register state copied or joined, a bound compared, a prover term, an
# instruction of a loop scanned) the verification of one stage may take, so that no
# program keeps the verifier busy for long (docs/hasm.md, "Limits"). The largest stdlib
# stage (gemm's, 2237 instructions) takes 33k; a step costs about 1-5 us.
MAX_ANALYSIS_STEPS = 2_000_000


@attrs.frozen
class Problem:
    pc: int
    rule: str  # 'uninitialized' or 'bounds'
    message: str
    hint: str | None = None


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
        # a lane exists only where the domain is not empty: a derived extent max(A, 0) is A
        # in every lane (hologram.core.dims.within_lanes), everywhere it appears
        inside = within_lanes(stage.domain)
        # and a symbol the program divides (`n//4096` slices) is its quotient and remainder
        divided = divided_lanes(stage.domain, program.symbols)
        inside.update(divided)
        lane_stage = attrs.evolve(stage, domain=tuple(substitute(d, inside) for d in stage.domain))
        dims = [substitute(d, inside) for b in buffers.values() for d in b.shape]
        dims += [Affine.of(n) for d in divided.values() for n, _ in d.terms]  # quotient and remainder are >= 0
        self.base = self.dom = Domain.from_dims(dims, (*lane_stage.domain, *lane_facts(stage.domain)), self.meter)
        self.domains: dict[tuple, Domain] = {(): self.base}
        self.sizes: dict[tuple[str, str], Poly] = {}
        for name, b in buffers.items():
            size = Poly.const(1)
            for d in b.shape:
                size = size * Poly.of(substitute(d, inside))
            self.sizes["global", name] = size
        self.sizes.update({("shared", m.name): Poly.const(m.size) for m in stage.shared})
        self.sizes.update({("pool", m.name): Poly.const(m.size) for m in stage.pools})
        self.values = Evaluator(lane_stage, program.symbols, self.types, inside)
        self.preds: dict[int, list[tuple[int, str]]] = {}
        for pc in range(len(self.body)):
            for nxt, kind in successors(self.body, self.labels, pc):
                self.preds.setdefault(nxt, []).append((pc, kind))
        # pc -> the init bit it sets (0: none) for instructions that only write an
        # untracked register or nothing, and fall through: their transfer is one OR
        self.plain: dict[int, int] = {
            pc: 0 if it.dst is None else self.bits.get(it.dst.name, 0) for pc, it in enumerate(self.body)
            if isinstance(it, Instr) and it.op not in _CONTROL and (it.dst is None or it.dst.name not in self.tracked)}
        self.loops = StageLoops(self.body, self.labels, self.types, self.meter)
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
    def _analyze(self, entry: int, state: State) -> tuple[dict[int, State], State | None]:
        """In-states of every instruction reached from `entry`, and the state at RET."""
        self.meter.charge(len(state.vals))
        key = (entry, freeze(state))
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
        region = self.loops.region(entry)
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
                if pc in self.loops.heads and pc in ins:
                    visits[pc] = visits.get(pc, 0) + 1
                    if visits[pc] > 2:
                        new = self._widen(ins[pc], new, self.loops.loop_writes(pc))
                if pc in self.loops.inductions:
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

    def _induct(self, head: int, arrivals: list[State], s: State) -> State:
        """`s` at loop `head` with each induction variable set from the counter: its value
        on arriving from before the loop plus its step times the trips taken so far."""
        counter, steps = self.loops.inductions[head]
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
                if trips.exact:  # c0 - c counts arrivals (LOOP goes back only from c > 1, so
                    # c = c0 - j, never wrapped): >= 0 even when the intervals of c0 and c
                    # overlap (a count known only as [1, 15])
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
            # LOOP's decrement saturates at the minimum (docs/isa.md): where c may be the
            # minimum, c - 1 is not exact and the counter is anything (sound, if loose)
            dec = self.dom.add(self.dom.exact(s.vals.get(c), I64), Interval.point(-1), I64)
            after = self._write(s, c, self.dom.exact(dec, I64))
            edges = {"taken": self._narrow(after, c, "gt", Interval.point(0)),
                     "fall": self._narrow(after, c, "le", Interval.point(0))}
            return {k: v for k, v in edges.items() if not self._infeasible(v)}
        if op == "CALL":
            _, ret = self._analyze(self.labels[item.target], s)
            return {} if ret is None else {"fall": ret}
        if item.dst is not None:
            return {"fall": self._write(s, item.dst.name, self.values.result(item, s, self.dom))}
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
            other = self.values.operand(y, s, fact.dtype)
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

    # ===================================================================== checks
    def _check(self, entry: int, state: State) -> None:
        key = (entry, freeze(state))
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
