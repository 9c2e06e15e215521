"""What one launch of an ISA program costs: the loop iterations and the weighted
operations one lane of a stage runs (`lane_work`; `lane_cost`, which the cpu_llvm
runtime weighs to decide whether a stage is worth waking threads) and the bytes a stage
reads and writes (`stage_traffic`), as `Formula`s in the shape symbols. Read from the program alone (no IR), so a process that only runs
kernels can import it; hologram.passes.stats adds the IR and presents both."""

from __future__ import annotations

from typing import Callable, Mapping

import attrs

from hologram.core.dims import derived_closure, parse_derived
from hologram.isa.opcodes import OPCODES
from hologram.isa.program import Imm, Instr, Label, Program, Reg, Special, Stage, Sym, lead_lane_axes
from hologram.verify.intervals import Poly

__all__ = ["Poly", "Formula", "Term", "QUOTIENTS", "lane_cost", "lane_work", "quotient", "stage_traffic"]

Term = tuple[int, tuple[Poly, ...], tuple[Poly, ...]]  # (coefficient, factors, conditions)


def _term(t: tuple) -> Term:
    c, factors, *conditions = t
    return int(c), tuple(factors), tuple(conditions[0]) if conditions else ()


def _terms(ts: tuple) -> tuple[Term, ...]:
    return tuple(_term(t) for t in ts)


@attrs.frozen
class Formula:
    """A count per launch: the sum over `terms` of `coeff * max(f1, 0) * max(f2, 0) ...`,
    each factor a polynomial in the shape symbols (a domain extent or a loop trip count:
    one that is negative runs nothing), times 1 or 0 for each condition `g > 0` (code a
    zero-trip guard skips when its loop has no trips). A term is `(coeff, factors)` or
    `(coeff, factors, conditions)`. `str()` prints the expansion, which equals the value
    whenever every factor and condition is >= 1 (every extent at least 1)."""

    terms: tuple[Term, ...] = attrs.field(default=(), converter=_terms)

    def __repr__(self) -> str:
        return f"Formula({str(self)!r})"

    @staticmethod
    def const(value: int) -> "Formula":
        return Formula(((int(value), ()),) if value else ())

    def __add__(self, other: "Formula") -> "Formula":
        return Formula(self.terms + other.terms).simplify()

    def simplify(self) -> "Formula":
        """Constant factors multiplied out (clamped), constant conditions decided, equal
        products merged."""
        acc: dict[tuple, int] = {}
        for c, factors, conditions in self.terms:
            rest = []
            for f in factors:
                if f.is_const:
                    c *= max(f.value, 0)
                else:
                    rest.append(f)
            conds = []
            for g in conditions:
                if g.is_const:
                    c *= g.value > 0
                else:
                    conds.append(g)
            key = (tuple(sorted(rest)), tuple(sorted(set(conds))))
            acc[key] = acc.get(key, 0) + c
        return Formula(tuple(sorted(((c, *k) for k, c in acc.items() if c), key=lambda t: t[1:])))

    def expand(self) -> Poly:
        """The sum of the products, every condition taken as true."""
        total = Poly()
        for c, factors, _ in self.terms:
            term = Poly.const(c)
            for f in factors:
                term = term * f
            total = total + term
        return total

    @property
    def symbols(self) -> frozenset[str]:
        return frozenset().union(*(f.symbols for _, fs, gs in self.terms for f in fs + gs))

    @property
    def is_const(self) -> bool:
        return not self.symbols

    def bind(self, symbols: Mapping[str, int]) -> "Formula":
        """Substitute `symbols`; a quotient symbol (`(n + 1023)//1024`) whose numerator
        they make constant is substituted too."""
        values = dict(symbols)
        derived = derived_closure(n for n in self.symbols if parse_derived(n) is not None)
        for name in derived:  # `max(n - 1, 0)` (hologram.core.dims): computed once its inputs are known
            try:
                values.setdefault(name, parse_derived(name).evaluate(values))
            except KeyError:
                pass
        for name in self.symbols:
            if name in QUOTIENTS and name not in values:
                num, d = QUOTIENTS[name]
                bound = num.bind(values)
                if bound.is_const:
                    values[name] = bound.value // d
        return Formula(tuple((c, tuple(f.bind(values) for f in fs), tuple(g.bind(values) for g in gs))
                             for c, fs, gs in self.terms)).simplify()

    def evaluate(self, symbols: Mapping[str, int]) -> int:
        """The value for these symbol values; KeyError names a symbol left unbound."""
        bound = self.bind(symbols)
        missing = sorted(bound.symbols)
        if missing:
            raise KeyError(f"no value for shape symbol(s) {', '.join(missing)}")
        return bound.expand().value

    def __str__(self) -> str:
        """The expansion, highest degree first and a positive term before a negative one:
        a count reads `4*k*n - 4*k^2 + 8*k`, never with a minus sign first when it has a
        positive term."""
        poly = self.expand()
        terms = sorted(poly.terms, key=lambda t: (-len(t[0]), t[1] < 0, t[0]))
        lead = next((k for k, (_, c) in enumerate(terms) if c > 0), 0)
        return poly.text([terms[lead], *terms[:lead], *terms[lead + 1:]]) if terms else "0"


def lane_work(stage: Stage) -> Formula:
    """About how many loop iterations one lane of `stage` runs: 1, plus for each LOOP the
    product of its trip count and those of the loops around it (a data-dependent count
    is a `trips.*` symbol, see `_trip_counts`)."""
    return Formula.const(1) + _weighed(stage, lambda ins: ins.op == "LOOP")


# What an instruction weighs in `lane_cost`, in simple operations: a transcendental
# function is a polynomial of ~10-20 FMAs and its argument reduction (cpu_llvm's
# vecmath); a square root is one slow instruction.
MATH_WEIGHT, SQRT_WEIGHT = 16, 4


def _weight(ins: Instr) -> int:
    if ins.op == "SQRT":
        return SQRT_WEIGHT
    return MATH_WEIGHT if OPCODES[ins.op].group in ("math", "transcendental") else 1


def lane_cost(stage: Stage) -> Formula:
    """About how many simple operations one lane of `stage` runs: each instruction
    weighs 1 (a transcendental MATH_WEIGHT, a square root SQRT_WEIGHT) times the trip
    counts of the loops around it. Where `lane_work` counts iterations, this tells a
    stage of one load and one add from one of a tanh per element: what the cpu_llvm
    runtime weighs to decide whether a stage is worth waking threads."""
    return _weighed(stage, _weight)


def _weighed(stage: Stage, weight: Callable[[Instr], int]) -> Formula:
    """The sum over the stage's instructions of `weight(ins)` times the trip counts of
    the loops around it (a LOOP is inside its own loop)."""
    body = stage.body
    labels = {it.name: k for k, it in enumerate(body) if isinstance(it, Label)}
    spans = _loop_spans(body, labels, _trip_counts(stage, labels)[0])
    return Formula(tuple((int(weight(it)), tuple(c for lo, hi, c in spans if lo <= k <= hi), ())
                         for k, it in enumerate(body) if isinstance(it, Instr))).simplify()


def _loop_spans(body: tuple, labels: Mapping[str, int], counts: Mapping[int, Poly]) -> list[tuple[int, int, Poly]]:
    """(its label's position, its own position, its trip count) per LOOP: the loops
    around position k are the spans holding it."""
    return [(labels[i.target], k, counts[k]) for k, i in enumerate(body)
            if isinstance(i, Instr) and i.op == "LOOP" and i.target in labels]


# Quotient symbols by name: the name spells the quotient (`(n + 1023)//1024`), so this
# cache is keyed by what it holds; `Formula.bind` substitutes a quotient once its
# numerator is known.
QUOTIENTS: dict[str, tuple[Poly, int]] = {}


def quotient(num: Poly, d: int) -> Poly:
    """floor(num / d) for a positive constant d: a constant, or a symbol standing for it
    (a block count, `ceil(n / 1024)` = `(n + 1023)//1024`, is not a polynomial)."""
    if num.is_const:
        return Poly.const(num.value // d)
    name = f"({num})//{d}"
    QUOTIENTS[name] = (num, d)
    return Poly.sym(name)


# ------------------------------------------------------------------ byte counting
_READS = frozenset(name for name, spec in OPCODES.items() if "reads" in spec.effects and spec.space == "global")
_WRITES = frozenset(name for name, spec in OPCODES.items() if "writes" in spec.effects and spec.space == "global")
_TRACKED = {"MOV", "MOV_IMM", "ADD", "SUB", "MUL", "DIV", "CVT"}


def stage_traffic(stage: Stage, program: Program) -> tuple[Formula, Formula, bool]:
    """Bytes one launch of `stage` reads and writes (its domain times the lane's count),
    and whether that count is exact (False: an upper bound, see `_skips_memory`)."""
    buffers = program.buffers()
    lanes = tuple(Poly.of(d) for d in stage.domain)
    body = stage.body
    labels = {it.name: k for k, it in enumerate(body) if isinstance(it, Label)}
    handled = set()  # branches whose skipped code carries its condition: the count stays exact
    lead = lead_lane_axes(stage)
    for axis in lead:  # one lane per block works: the lane count along `axis` is the block count
        block = stage.block[axis]
        lanes = lanes[:axis] + (quotient(lanes[axis] + (block - 1), block),) + lanes[axis + 1:]
    handled.update([k for k, it in enumerate(body) if isinstance(it, Instr) and it.op == "BRA"][:len(lead)])
    counts, guards = _trip_counts(stage, labels)
    varying = _lane_varying(stage, labels)
    spans = _loop_spans(body, labels, counts)
    # a guarded branch: the code it skips, (its position, its target), runs when g > 0;
    # when the code before its target ends in a jump over an `else` part, (target, end),
    # that part runs when h > 0
    skips = []
    jumps_to: dict[str, int] = {}
    for it in body:
        if isinstance(it, Instr) and it.op in ("BRA", "LOOP", "CALL"):
            jumps_to[it.target] = jumps_to.get(it.target, 0) + 1
    for k, (g, h) in guards.items():
        t = labels.get(body[k].target, -1)
        if t <= k:
            continue
        skips.append((k, t, g))
        handled.add(k)
        jump = body[t - 1]
        e = labels.get(jump.target, -1) if isinstance(jump, Instr) and jump.op == "BRA" and jump.pred is None else -1
        if e > t and jumps_to[body[k].target] == 1:  # reached only from this guard: runs when h > 0
            skips.append((t, e, h))
            handled.add(t - 1)

    def region(start: int, factors: tuple[Poly, ...], conds: tuple[Poly, ...], depth: int) -> tuple[list, list]:
        """Memory traffic of the code from `start` up to its EXIT/RET, CALLs followed."""
        reads: list = []
        writes: list = []
        if depth > len(body):  # the verifier rejects recursion; do not loop on a bad program
            return reads, writes
        for k in range(start, len(body)):
            it = body[k]
            if not isinstance(it, Instr):
                continue
            here = factors + tuple(c for lo, hi, c in spans if lo <= k <= hi and lo >= start)
            when = conds + tuple(x for lo, hi, x in skips if lo < k < hi and lo >= start)
            if it.op in _READS or it.op in _WRITES:
                size = buffers[it.addr.buffer].dtype.itemsize if it.addr.buffer in buffers else 0
                if it.addr.index is None or it.addr.index.name not in varying[k]:
                    here = here[len(lanes):]  # the same element for every lane: moved once
                (reads if it.op in _READS else writes).append((size, here, when))
            elif it.op == "CALL" and it.target in labels:
                r, w = region(labels[it.target], here, when, depth + 1)
                reads += r
                writes += w
            elif it.op in ("EXIT", "RET") and it.pred is None and not _inside_branch(body, start, k):
                break
        return reads, writes

    reads, writes = region(0, lanes, (), 0)
    inits = sum(buffers[i.buffer].dtype.itemsize for i in stage.inits if i.buffer in buffers)
    exact = not any(_skips_memory(body, k, labels) for k, it in enumerate(body)
                    if isinstance(it, Instr) and it.op == "BRA" and k not in handled)
    return (Formula(tuple(t for t in reads if t[0])).simplify(),
            Formula(tuple(t for t in writes if t[0])) + Formula.const(inits), exact)


_MEMORY = _READS | _WRITES | {"CALL"}
_LANE = frozenset(f"{k}.{a}" for k in ("gid", "tid", "ctaid") for a in "xyz")  # the lane's position


def _uniform_value(ins: Instr, varying: set[str]) -> bool:
    """Whether `ins` computes the same value in every lane, given the varying registers."""
    def is_varying(op: object) -> bool:
        return isinstance(op, Reg) and op.name in varying or isinstance(op, Special) and op.name in _LANE

    if ins.op == "LDG":
        return ins.addr.index is None or not is_varying(ins.addr.index)
    return OPCODES[ins.op].pure and not any(is_varying(op) for op in ins.srcs)


def _lane_varying(stage: Stage, labels: Mapping[str, int]) -> dict[int, frozenset[str]]:
    """Per instruction position, the registers whose value may differ between the lanes
    of a launch there: anything computed from the lane's position, from memory other
    than a global load of one element, or by a non-pure instruction; and, after lanes
    may have split (a branch or loop count that varies), whatever the split code wrote.
    Forward dataflow to a fixpoint over the loops' back edges; conservative: a register
    it calls uniform is uniform."""
    body = stage.body
    everything = frozenset(i.dst.name for i in body if isinstance(i, Instr) and i.dst is not None)

    def written(lo: int, hi: int) -> set[str]:
        return {i.dst.name for i in body[lo:hi] if isinstance(i, Instr) and i.dst is not None}

    back: dict[int, frozenset[str]] = {}
    for _ in range(len(body) + 2):  # each round can only grow the back edges' sets
        state: set[str] = set()
        pending: dict[str, list[set[str]]] = {}
        live = True
        at: dict[int, frozenset[str]] = {}
        new_back: dict[int, frozenset[str]] = {}
        for k, it in enumerate(body):
            if isinstance(it, Label):
                incoming = ([state] if live else []) + pending.pop(it.name, [])
                if k in back:
                    incoming.append(set(back[k]))
                # reached by nothing before it: a subroutine entry, any register may vary
                state = set().union(*incoming) if incoming else set(everything)
                live = True
                continue
            at[k] = frozenset(state)
            if it.op == "BRA":
                target = labels.get(it.target, -1)
                split = it.pred is not None and it.pred.reg.name in state and target > k
                pending.setdefault(it.target, []).append(state | (written(k + 1, target) if split else set()))
                live = it.pred is not None
            elif it.op == "LOOP":
                top = labels.get(it.target, k)
                counter = it.srcs[0]
                split = isinstance(counter, Reg) and counter.name in state
                new_back[top] = frozenset(state | (written(top, k) if split else set()))
                if split:
                    state |= written(top, k)
            elif it.op in ("EXIT", "RET"):
                live = it.pred is not None
            elif it.op == "CALL":
                state = set(everything)
            elif it.dst is not None:
                if _uniform_value(it, state):
                    state.discard(it.dst.name)
                else:
                    state.add(it.dst.name)
        if new_back == back:
            return at
        back = {t: frozenset(back.get(t, frozenset()) | v) for t, v in new_back.items()}
    return {k: everything for k in range(len(body))}


def _skips_memory(body: tuple, k: int, labels: Mapping[str, int]) -> bool:
    """Whether the branch at `k` jumps over memory accesses (or calls). Unless it is a
    zero-trip guard (`SET.le %p, X, 0; @%p BRA`, whose skipped code the count takes
    only when X > 0), the count then includes accesses a lane may not make: a bound."""
    target = labels.get(body[k].target)
    if target is None or target <= k:
        return False
    return any(isinstance(body[j], Instr) and body[j].op in _MEMORY for j in range(k + 1, target))


def _inside_branch(body: tuple, start: int, k: int) -> bool:
    """Whether a forward branch from before `k` jumps past it: then the code after `k`
    is still reachable (an EXIT inside an `if` does not end the region)."""
    for j in range(start, k):
        it = body[j]
        if isinstance(it, Instr) and it.op == "BRA":
            for t in range(k + 1, len(body)):
                if isinstance(body[t], Label) and body[t].name == it.target:
                    return True
    return False


def _trip_counts(stage: Stage, labels: Mapping[str, int]
                 ) -> tuple[dict[int, Poly], dict[int, tuple[Poly, Poly]]]:
    """Per LOOP position, its trip count: the counter's value on entry to the loop as a
    polynomial in the symbols, by symbolic evaluation of the integer code before it (1
    for a constant below 1, which runs the body once). A
    count that depends on data becomes a symbol of its own, `trips.<stage>.<label>`.
    Also, per branch on a comparison of known integers (`SET.le %p, X, 0`, `SET.lt %p,
    $n, 1024`), (g, h): the code it jumps over runs when g > 0, the code at its target
    when h > 0."""
    body = stage.body
    loop_tops: dict[int, list[int]] = {}
    for k, it in enumerate(body):
        if isinstance(it, Instr) and it.op == "LOOP" and it.target in labels:
            loop_tops.setdefault(labels[it.target], []).append(k)
    env: dict[str, Poly] = {}
    pending: dict[str, list[dict[str, Poly]]] = {}
    live = True  # whether the previous item can fall through to this one
    at_top: dict[int, dict[str, Poly]] = {}
    # predicate register -> (g, h) for a SET comparing known integers: g > 0 when the
    # comparison is false, h > 0 when it is true (`SET.le p, X, 0`: X, 1 - X)
    tests: dict[str, tuple[Poly, Poly]] = {}
    guards: dict[int, tuple[Poly, Poly]] = {}
    for k, it in enumerate(body):
        if isinstance(it, Label):
            incoming = ([env] if live else []) + pending.pop(it.name, [])
            env = _merge(incoming)
            live = True
            if k in loop_tops:
                at_top[k] = dict(env)
                written = {i.dst.name for i in body[k:max(loop_tops[k]) + 1] if isinstance(i, Instr) and i.dst}
                env = {r: v for r, v in env.items() if r not in written}
                tests = {r: v for r, v in tests.items() if r not in written}
            continue
        if it.op == "BRA":
            pending.setdefault(it.target, []).append(dict(env))
            live = it.pred is not None
            if it.pred is not None and it.pred.reg.name in tests:
                g, h = tests[it.pred.reg.name]
                guards[k] = (h, g) if it.pred.negate else (g, h)
            continue
        if it.op in ("EXIT", "RET"):
            live = it.pred is not None
            continue
        if it.op == "CALL":
            env, tests = {}, {}  # a subroutine may write any register
            continue
        if it.dst is not None:
            tests.pop(it.dst.name, None)
            test = _test(it, env)
            if test is not None:
                tests[it.dst.name] = test
            value = _eval(it, env)
            if value is None:
                env.pop(it.dst.name, None)
            else:
                env[it.dst.name] = value
    counts: dict[int, Poly] = {}
    for top, loops in loop_tops.items():
        for k in loops:
            counter = body[k].srcs[0]
            value = _operand(counter, at_top.get(top, {}))
            if value is not None and value.is_const and value.value < 1:
                value = Poly.const(1)  # a counter <= 1 runs the body once (LOOP is a do-while)
            counts[k] = value if value is not None else Poly.sym(f"trips.{stage.name}.{body[top].name}")
    return counts, guards


def _test(ins: Instr, env: Mapping[str, Poly]) -> tuple[Poly, Poly] | None:
    """(g, h) for `SET.<cmp> p, a, b` over integers known symbolically: g > 0 exactly
    when the comparison is false, h > 0 exactly when it is true."""
    if ins.op != "SET" or ins.mod not in ("lt", "le", "gt", "ge") or len(ins.srcs) != 2 \
            or ins.dtype is None or not ins.dtype.is_int:
        return None
    a, b = (_operand(x, env) for x in ins.srcs)
    if a is None or b is None:
        return None
    if ins.mod in ("gt", "ge"):
        a, b = b, a  # a > b is b < a
    # a < b: true when b - a > 0, false when a - b + 1 > 0; a <= b: b - a + 1, a - b
    strict = ins.mod in ("lt", "gt")
    return (a - b + 1, b - a) if strict else (a - b, b - a + 1)


def _merge(envs: list[dict[str, Poly]]) -> dict[str, Poly]:
    if not envs:
        return {}
    first, *rest = envs
    return {r: v for r, v in first.items() if all(e.get(r) == v for e in rest)}


def _operand(op: object, env: Mapping[str, Poly]) -> Poly | None:
    if isinstance(op, Reg):
        return env.get(op.name)
    if isinstance(op, Sym):
        return Poly.sym(op.name)
    if isinstance(op, Imm) and isinstance(op.value, int) and not isinstance(op.value, bool):
        return Poly.const(op.value)
    return None


def _eval(ins: Instr, env: Mapping[str, Poly]) -> Poly | None:
    """The symbolic value of an integer instruction over known operands, else None.
    Only i64 arithmetic is tracked, where shape arithmetic cannot wrap in practice."""
    if ins.op not in _TRACKED or ins.dtype is None or not ins.dtype.is_int:
        return None
    if ins.op == "CVT" and (ins.dtype2 is None or not ins.dtype2.is_int or ins.dtype.bits < 64):
        return None
    args = [_operand(s, env) for s in ins.srcs]
    if any(a is None for a in args) or OPCODES[ins.op].form.count("s") != len(args):
        return None
    if ins.op in ("MOV", "MOV_IMM", "CVT"):
        return args[0]
    a, b = args
    if ins.op == "DIV":  # floor division; only by a positive constant
        return quotient(a, b.value) if b.is_const and b.value > 0 else None
    return a + b if ins.op == "ADD" else a - b if ins.op == "SUB" else a * b
