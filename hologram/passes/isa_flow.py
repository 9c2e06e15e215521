"""What the ISA passes share: reads and writes of an instruction, the control-flow graph
of a stage (calls included), register liveness, and the per-stage safety net.

The graph is the ISA's: forward BRA, LOOP back to its label, EXIT. A CALL is an edge to
the subroutine's entry, and a RET an edge to the instruction after *every* CALL that can
reach it (context-insensitive): that merges paths no execution takes, which only makes
registers live longer, so every answer built on it is conservative.

`per_stage` runs a stage rewrite and keeps the rewritten stage only when it still
verifies. The rewrites here preserve what a program computes; what they cannot always
preserve is the verifier's *proof* (its interval analysis follows registers by name, so
renaming or replacing one can lose a fact an unchecked access needed). Keeping the
original stage then is always correct, and it means no pass can make the pipeline
refuse a program the lowering produced. A stage the verifier would refuse anyway (an
earlier plugin pass's output, say) is left as it is when a rewrite cannot make sense of
it, so the verifier, not a crash inside a pass, says what is wrong with it.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

import attrs

from hologram.core.errors import VerifyError
from hologram.isa.opcodes import OPCODES
from hologram.isa.program import Addr, Instr, Label, Operand, Pred, Program, Reg, RegDecl, Stage
from hologram.verify.control import reachable, successors
from hologram.verify.verifier import verify

Body = tuple  # tuple[Instr | Label, ...]

BLOCK_ENDS = tuple(name for name, spec in OPCODES.items() if "control" in spec.effects)


def is_pure(ins: Instr) -> bool:
    """Computes its destination from its operands alone, with no other effect (an
    instruction the op table declares without effects): removable when the result is
    dead, movable when its operands do not change. Loads are handled apart (they read
    memory and a checked one can fault), and so are PoolAlloc (it moves the pool's top)
    and PhaseGet (it reads state PhaseAdv changes)."""
    spec = OPCODES.get(ins.op)
    return spec is not None and ins.dst is not None and spec.pure


def removable(ins: Instr) -> bool:
    """Deleting it when its destination is dead changes nothing: pure instructions, and
    loads that cannot fault (unchecked LDG/LDS are proven in bounds; a PoolLoad is
    also checked against the pool's current top at run time, so it stays)."""
    return is_pure(ins) or (ins.op in ("LDG", "LDS") and not ins.checked) or ins.op == "PhaseGet"


def reads(ins: Instr) -> set[str]:
    out = {o.name for o in ins.srcs if isinstance(o, Reg)}
    if ins.addr is not None and ins.addr.index is not None:
        out.add(ins.addr.index.name)
    if ins.pred is not None:
        out.add(ins.pred.reg.name)
    return out


def writes(ins: Instr) -> set[str]:
    if ins.op == "LOOP":
        return {ins.srcs[0].name}
    return {ins.dst.name} if ins.dst is not None else set()


def labels_of(body: Body) -> dict[str, int]:
    return {it.name: pc for pc, it in enumerate(body) if isinstance(it, Label)}


def label_uses(body: Body) -> set[str]:
    """Labels some BRA, CALL or LOOP names."""
    return {it.target for it in body if isinstance(it, Instr) and it.op in ("BRA", "CALL", "LOOP")}


@attrs.frozen
class Graph:
    """The control-flow graph of one stage body (see the module docstring)."""

    succ: tuple[tuple[int, ...], ...]
    pred: tuple[tuple[int, ...], ...]
    reached: frozenset[int]  # pcs reachable from the entry or from a called subroutine

    @staticmethod
    def of(body: Body) -> "Graph":
        labels = labels_of(body)
        n = len(body)
        succ: list[list[int]] = [[] for _ in range(n)]
        returns: dict[int, list[int]] = {}  # RET pc -> return sites
        reached = set(reachable(body, labels, 0)) if n else set()
        calls = [pc for pc, it in enumerate(body) if isinstance(it, Instr) and it.op == "CALL" and it.target in labels]
        done: set[int] = set()
        while any(pc in reached and pc not in done for pc in calls):  # subroutines called from reached code
            for pc in [pc for pc in calls if pc in reached and pc not in done]:
                done.add(pc)
                region = reachable(body, labels, labels[body[pc].target])
                reached.update(region)
                for q in region:
                    if q < n and isinstance(body[q], Instr) and body[q].op == "RET":
                        returns.setdefault(q, []).append(pc + 1)
        for pc, it in enumerate(body):
            if isinstance(it, Instr) and it.op == "CALL":
                succ[pc] = [labels[it.target]] if it.target in labels else []
            elif isinstance(it, Instr) and it.op == "RET":
                succ[pc] = returns.get(pc, [])
            else:
                succ[pc] = [t for t, _ in successors(body, labels, pc)]
            succ[pc] = sorted({t for t in succ[pc] if t < n})
        pred: list[list[int]] = [[] for _ in range(n)]
        for pc, ts in enumerate(succ):
            for t in ts:
                pred[t].append(pc)
        return Graph(tuple(map(tuple, succ)), tuple(map(tuple, pred)), frozenset(q for q in reached if q < n))


@attrs.frozen
class Liveness:
    """Which registers some path from a point reads before writing them: `out[pc]`
    after instruction `pc`, `inn[pc]` before it, as bit masks over `bit`."""

    bit: dict[str, int]
    out: tuple[int, ...]
    inn: tuple[int, ...]

    def live_out(self, pc: int, name: str) -> bool:
        return name in self.bit and bool(self.out[pc] >> self.bit[name] & 1)

    def live_in(self, pc: int, name: str) -> bool:
        return name in self.bit and bool(self.inn[pc] >> self.bit[name] & 1)

    def mask(self, names: Iterable[str]) -> int:
        m = 0
        for n in names:
            if n in self.bit:
                m |= 1 << self.bit[n]
        return m

    def names(self, mask: int) -> list[str]:
        return [n for n, b in self.bit.items() if mask >> b & 1]


def liveness(body: Body, graph: Graph | None = None, keep_compares: bool = False) -> Liveness:
    """Liveness over `graph` (the stage's, by default). LOOP both reads and writes its
    counter (it decrements it). With `keep_compares`, a predicated branch also reads
    the registers any integer SET of its predicate compared: the verifier narrows them
    on the branch's edges, so they must keep their identity until then."""
    g = graph or Graph.of(body)
    names: dict[str, int] = {}
    for it in body:
        if isinstance(it, Instr):
            for r in sorted(reads(it) | writes(it)):
                names.setdefault(r, len(names))
    bits = lambda rs: sum(1 << names[r] for r in set(rs))  # noqa: E731
    compared: dict[str, set[str]] = {}
    if keep_compares:
        for it in body:
            if isinstance(it, Instr) and it.op == "SET" and it.dtype is not None and it.dtype.is_int:
                compared.setdefault(it.dst.name, set()).update(o.name for o in it.srcs if isinstance(o, Reg))
    n = len(body)
    use, keep = [0] * n, [-1] * n
    for pc, it in enumerate(body):
        if isinstance(it, Instr):
            r = reads(it)
            if it.pred is not None:
                r = r | compared.get(it.pred.reg.name, set())
            use[pc] = bits(r)
            keep[pc] = ~bits(writes(it) - r)
    inn, out = [0] * n, [0] * n
    changed = True
    while changed:
        changed = False
        for pc in reversed(range(n)):
            o = 0
            for s in g.succ[pc]:
                o |= inn[s]
            i = use[pc] | (o & keep[pc])
            if o != out[pc] or i != inn[pc]:
                out[pc], inn[pc] = o, i
                changed = True
    return Liveness(names, tuple(out), tuple(inn))


def block_starts(body: Body) -> set[int]:
    """First pcs of the straight-line regions: the entry, every label, and every
    instruction after a branch, LOOP, CALL, RET or EXIT."""
    starts = {0}
    for pc, it in enumerate(body):
        if isinstance(it, Label):
            starts.add(pc)
        elif it.op in BLOCK_ENDS:
            starts.add(pc + 1)
    return starts


def map_operands(ins: Instr, fn: Callable[[Operand, str], Operand]) -> Instr:
    """`ins` with every read operand replaced by `fn(operand, position)`; position is
    'src' (any operand kind allowed), 'reg' (a source that must stay a register: the
    LOOP counter, the PoolFree handle), 'imm' (MOV_IMM's), 'index' or 'pred'."""
    pos = "reg" if ins.op in ("LOOP", "PoolFree") else "imm" if ins.op == "MOV_IMM" else "src"
    srcs = tuple(fn(o, pos) for o in ins.srcs)
    addr = ins.addr
    if addr is not None and addr.index is not None:
        addr = Addr(addr.buffer, fn(addr.index, "index"), addr.offset)
    pred = ins.pred
    if pred is not None:
        pred = Pred(fn(pred.reg, "pred"), pred.negate)
    if srcs == ins.srcs and addr is ins.addr and pred is ins.pred:
        return ins
    return attrs.evolve(ins, srcs=srcs, addr=addr, pred=pred)


def used_registers(body: Body) -> set[str]:
    out: set[str] = set()
    for it in body:
        if isinstance(it, Instr):
            out |= reads(it) | writes(it)
    return out


def prune_regs(stage: Stage, body: Body) -> Stage:
    """`stage` with `body`, declaring only the registers the body mentions."""
    used = used_registers(body)
    regs = tuple(r for r in stage.regs if r.name in used)
    return attrs.evolve(stage, body=tuple(body), regs=regs)


def stage_verifies(program: Program, stage: Stage) -> bool:
    try:
        verify(attrs.evolve(program, stages=(stage,)))
    except VerifyError:
        return False
    return True


def per_stage(program: Program, rewrite: Callable[[Program, Stage], Stage], check: bool = True) -> Program:
    """Apply `rewrite` to every stage, keeping a rewritten stage only when it verifies
    (see the module docstring; `check=False` for a rewrite that verifies by
    construction); `program` itself when nothing changed."""
    stages = []
    for s in program.stages:
        try:
            new = rewrite(program, s)
        except (KeyError, IndexError, AttributeError, TypeError, ValueError):
            if stage_verifies(program, s):
                raise  # a valid stage: the pass has a bug, say so
            new = s  # a malformed stage (from an earlier pass): the verifier will say what is wrong
        stages.append(new if new != s and (not check or stage_verifies(program, new)) else s)
    stages_t = tuple(stages)
    return program if stages_t == program.stages else attrs.evolve(program, stages=stages_t)


def instructions(body: Iterable) -> Iterator[tuple[int, Instr]]:
    for pc, it in enumerate(body):
        if isinstance(it, Instr):
            yield pc, it


def declare(stage: Stage, names: dict[str, RegDecl]) -> tuple[RegDecl, ...]:
    """Declarations for `names` in the order the stage declared them, new ones last."""
    old = [r for r in stage.regs if r.name in names]
    return tuple(old) + tuple(d for n, d in names.items() if n not in {r.name for r in old})
