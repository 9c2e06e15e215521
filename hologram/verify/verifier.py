"""The verifier: nothing runs, and nothing loads from a bundle, until it passes here.

`verify(p)` returns `p` or raises `VerifyError` naming the stage, the instruction (its
index in `stage.body`, labels included, and its assembly text) and the rule broken. The
error also carries them as attributes: `rule` (a short id, listed in docs/hasm.md),
`stage` and `index` (None where they do not apply).

Checks run in this order, and the first failure is reported:
0. structure: every field holds the Python type its class declares (structure.py);
1. program: ISA version, names, parameter roles and shapes;
2. per stage: domain and block, declarations, inits;
3. per instruction: operand kinds by `OPCODES[op].form`, types by `types` and `result`,
   immediates representable, memory spaces and element types, labels and pools, one
   combining operation per buffer a stage reduces into;
4. control flow: branch directions, loop counters and nesting, calls (no recursion),
   RET only in subroutines, no BarSync in subroutines, no path falls off the end;
5. dataflow (dataflow.py): registers written before read, every unchecked memory access
   proven in bounds (intervals.py), under the launch contract that every shape symbol is
   below 2**62 and every dimension evaluates to a size >= 0.
Together with the ISA's semantics this makes every verified program terminate and never
touch memory outside its arrays, on any backend.
"""

from __future__ import annotations

import bisect
import math
import re
import weakref

import numpy as np

from hologram.core.errors import VerifyError, did_you_mean, shorten
from hologram.core.types import Affine, DType, python_scalar
from hologram.isa.asm import format_instr
from hologram.isa.encoding import SUPPORTED_ISA_VERSIONS
from hologram.isa.opcodes import OPCODES
from hologram.isa.program import (COMPARE_MODS, REASSOC, REASSOC_OPS, BufferParam, Imm, Instr, Label, Program, Reg,
                                  ScalarParam, Special, Stage, Sym)
from hologram.isa.structure import ByIdentity, structure_problem
from hologram.verify.control import reachable
from hologram.verify.dataflow import MAX_ANALYSIS_STEPS, StageAnalysis
from hologram.verify.intervals import Domain, Meter, Poly, TooComplex

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
PARAM_ROLES = ("in", "out", "inout")
WRITES_GLOBAL = ("STG", "ReduceAdd", "ReduceMin", "ReduceMax", "ReduceMul", "ResAccum")
# How each reduction combines its contributions: ResAccum is a ReduceAdd into a class's bin.
COMBINES = {"ReduceAdd": "ReduceAdd", "ResAccum": "ReduceAdd", "ReduceMul": "ReduceMul", "ReduceMin": "ReduceMin",
            "ReduceMax": "ReduceMax"}
MAX_BLOCK_THREADS = 1024
MAX_SHARED_ELEMENTS = 1 << 16  # per block
MAX_POOL_ELEMENTS = 1 << 12  # per lane: backends may keep a pool on the native stack
MAX_DIMS = 3
# Limits on a program's shape that keep verification cheap (docs/hasm.md, "Limits"), far
# above what the DSL makes (rank <= 32: the front end's own limit; a loop per dimension).
MAX_RANK = 64  # dimensions of a buffer (numpy's own limit)
MAX_SIZE_TERMS = 256  # the product of a buffer's dimensions' term counts
MAX_LOOP_DEPTH = 64  # loops nested in one another
MAX_CALL_DEPTH = 64  # calls nested in one another
# Analysis steps for all the stages of a program together (each stage has at most
# dataflow.MAX_ANALYSIS_STEPS): a program of many stages cannot add up to a long wait.
MAX_PROGRAM_STEPS = 2 * MAX_ANALYSIS_STEPS
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1  # the range of dimension terms and memory offsets

_TYPE_CLASS_TEXT = {"any": "any type", "num": "a numeric type", "int": "an integer type",
                    "intbool": "an integer type or bool", "float": "a float type"}


# Programs that passed: the front end verifies what it lowers and a backend re-verifies
# what it is handed; this makes the second check free (1-6 ms of a warm cpu_llvm prepare).
_PASSED = ByIdentity()
# Stages that passed, by value, with the signatures (params, temps, symbols) they passed
# under: a stage's checks read nothing else of its program, so the ISA passes' checks of
# a rewritten stage (isa_flow.stage_verifies) make the final verify of the same stage
# free. Weak: an entry lives as long as some program holds the stage.
_STAGES_PASSED: "weakref.WeakKeyDictionary[Stage, list[tuple]]" = weakref.WeakKeyDictionary()


def verify(p: Program) -> Program:
    """`p` itself when it satisfies every rule (docs/hasm.md), else VerifyError."""
    if p in _PASSED:
        return p
    if not isinstance(p, Program):
        raise _fail("structure", f"verify expects a Program, got {type(p).__name__}")
    bad = structure_problem(p)
    if bad is not None:
        raise _fail("structure", f"malformed program: {bad}")
    _check_program(p)
    signature = (p.params, p.temps, p.symbols)
    steps_left = MAX_PROGRAM_STEPS
    for stage in p.stages:
        passed = _STAGES_PASSED.get(stage)
        if passed is not None and signature in passed:
            continue
        steps_left -= _StageChecker(p, stage, steps_left).run()
        _STAGES_PASSED.setdefault(stage, []).append(signature)
    _PASSED.add(p)
    return p


def representable(value: object, t: DType) -> bool:
    """True when the immediate `value` denotes exactly one value of type `t`: bools for
    bool, in-range ints for integers, and for floats an int or float the type holds
    exactly (NaN and infinities included), so no backend ever rounds a constant."""
    v = python_scalar(value)
    if t is DType.BOOL:
        return isinstance(v, bool)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    if t.is_int:
        return isinstance(v, int) and t.min <= v <= t.max
    try:
        x = float(v)
    except OverflowError:
        return False
    if math.isnan(x) or math.isinf(x):
        return isinstance(v, float)
    with np.errstate(over="ignore"):
        return x == v and float(t.np.type(x)) == x


def _fail(rule: str, message: str, hint: str | None = None, stage: str | None = None,
          index: int | None = None) -> VerifyError:
    err = VerifyError(message, hint=hint)
    err.rule, err.stage, err.index = rule, stage, index
    return err


def _instr_text(item: Instr | Label) -> str:
    """The item's assembly text for a message, cut short when long (an immediate beyond
    64 bits prints as hundreds of digits; an offset beyond 4300 digits does not print)."""
    if isinstance(item, Label):
        return f"{item.name}:"
    try:
        text = format_instr(item, align=False)
    except ValueError:  # Python's limit on int-to-decimal conversion
        return f"{item.op} ..."
    return text if len(text) <= 120 else text[:100] + " ..."


def _is_name(x: object) -> bool:
    return isinstance(x, str) and NAME.match(x) is not None


# =========================================================================== program
def _check_program(p: Program) -> None:
    where = f"program {p.name!r}"
    fail = lambda rule, msg, hint=None: _fail(rule, f"{where}: {msg}", hint)  # noqa: E731
    if p.isa_version not in SUPPORTED_ISA_VERSIONS:
        raise fail("isa-version", f"ISA version {shorten(p.isa_version)} is not supported (this Hologram runs "
                                  f"{', '.join(map(str, SUPPORTED_ISA_VERSIONS))})")
    if not _is_name(p.name):
        raise fail("name", "the program name must be an identifier ([A-Za-z_][A-Za-z0-9_]*)")
    seen: dict[str, str] = {}
    for n in p.symbols:
        _declare(seen, n, "symbol", fail)
    for prm in p.params:
        if isinstance(prm, ScalarParam):
            _declare(seen, prm.name, "scalar parameter", fail)
        else:
            _check_buffer(p, prm, "buffer parameter", PARAM_ROLES, seen, fail)
    for t in p.temps:
        _check_buffer(p, t, "temporary", ("temp",), seen, fail)
    stage_names: set[str] = set()
    for s in p.stages:
        if not _is_name(s.name):
            raise fail("name", f"stage name {s.name!r} is not an identifier")
        if s.name in stage_names:
            raise fail("duplicate", f"two stages are named {s.name!r}")
        stage_names.add(s.name)


def _check_buffer(p: Program, b: BufferParam, kind: str, roles: tuple[str, ...], seen: dict, fail) -> None:
    _declare(seen, b.name, kind, fail)
    if b.role not in roles:
        raise fail("role", f"{kind} {b.name!r} has role {b.role!r}; expected {' or '.join(map(repr, roles))}")
    _check_dims(p, b.shape, f"the shape of {b.name!r}", fail)
    if len(b.shape) > MAX_RANK:
        raise fail("limit", f"{kind} {b.name!r} has {len(b.shape)} dimensions; the verifier allows at most "
                            f"{MAX_RANK}")
    # its element count, the product of the dimensions, has at most this many terms
    terms = math.prod(len(d.terms) + (d.const != 0 or not d.terms) for d in b.shape)
    if terms > MAX_SIZE_TERMS:
        raise fail("limit", f"the element count of {kind} {b.name!r}, the product of its dimensions, is a polynomial "
                            f"of up to {terms} terms; the verifier allows at most {MAX_SIZE_TERMS}",
                   "use fewer dimensions that are sums of several symbols")


def _declare(seen: dict[str, str], name: object, kind: str, fail) -> None:
    if not _is_name(name):
        raise fail("name", f"{kind} name {name!r} is not an identifier ([A-Za-z_][A-Za-z0-9_]*)")
    if name in seen:
        raise fail("duplicate", f"{name!r} is declared twice (as a {seen[name]} and as a {kind})")
    seen[name] = kind


def _check_dims(p: Program, dims: tuple[Affine, ...], what: str, fail) -> None:
    for d in dims:
        for k in (d.const, *(c for _, c in d.terms)):
            if not I64_MIN <= k <= I64_MAX:
                raise fail("range", f"{what} has the integer {shorten(k)} in a dimension, beyond 64 bits")
        for sym in d.symbols:
            if sym not in p.symbols:
                raise fail("symbol", f"{what} uses symbol {sym!r}, which is not among the program's symbols "
                                     f"({', '.join(p.symbols) or 'none'}){did_you_mean(sym, p.symbols)}")


# ============================================================================= stage
class _StageChecker:
    def __init__(self, p: Program, s: Stage, steps_left: int = MAX_PROGRAM_STEPS):
        self.p, self.s, self.steps_left = p, s, steps_left
        self.buffers = p.buffers()
        self.scalars = p.scalars()
        self.types: dict[str, DType] = {}
        self.labels: dict[str, int] = {}
        self.reduced: dict[str, int] = {}  # buffer -> the first reduction into it (its pc)

    def fail(self, rule: str, msg: str, hint: str | None = None, pc: int | None = None) -> VerifyError:
        where = f"program {self.p.name!r}, stage {self.s.name!r}"
        if pc is not None:
            item = self.s.body[pc]
            where += f", instruction {pc} `{_instr_text(item)}`"
        return _fail(rule, f"{where}: {msg}", hint, self.s.name, pc)

    def run(self) -> int:
        """Check the stage (VerifyError at the first problem); the analysis steps it took."""
        self.check_launch()
        self.check_decls()
        for pc, item in enumerate(self.s.body):
            if isinstance(item, Instr):
                _InstrChecker(self, pc, item).run()
        # one budget for the control checks and the dataflow, within what the program has left
        meter = Meter(min(MAX_ANALYSIS_STEPS, self.steps_left))
        try:
            self.check_control(meter)
            problems = StageAnalysis(self.p, self.s, meter).run()
        except TooComplex as e:
            if meter.spent > meter.limit and meter.limit < MAX_ANALYSIS_STEPS:
                raise self.fail("complexity", f"the program is too complex to verify: its stages need more than "
                                              f"{MAX_PROGRAM_STEPS:,} steps of analysis in all",
                                "split it into several programs") from None
            raise self.fail("complexity", f"this stage is too complex to verify: {e}",
                            "split it into smaller stages or simplify its subroutine structure") from None
        if problems:
            first = problems[0]
            raise self.fail(first.rule, first.message, first.hint, first.pc)
        return meter.spent

    # ----------------------------------------------------------- launch and decls
    def check_launch(self) -> None:
        s, fail = self.s, lambda rule, msg, hint=None: self.fail(rule, msg, hint)  # noqa: E731
        if not 1 <= len(s.domain) <= MAX_DIMS:
            raise fail("domain", f"the domain has {len(s.domain)} dimensions; expected 1 to {MAX_DIMS}")
        _check_dims(self.p, s.domain, "the domain", fail)
        block = [int(b) for b in s.block]  # Python ints: numpy ones would wrap in the product
        shown = f"[{', '.join(map(shorten, block))}]"
        if len(block) != len(s.domain):
            raise fail("block", f"the block {shown} must have one size per domain dimension ({len(s.domain)})")
        if not all(b >= 1 for b in block):
            raise fail("block", f"block sizes must be positive integers, got {shown}")
        if math.prod(block) > MAX_BLOCK_THREADS:
            raise fail("block", f"a block of {shorten(math.prod(block))} lanes exceeds the limit of "
                                f"{MAX_BLOCK_THREADS}")

    def check_decls(self) -> None:
        s, fail = self.s, lambda rule, msg, hint=None: self.fail(rule, msg, hint)  # noqa: E731
        for r in s.regs:
            if not _is_name(r.name):
                raise fail("name", f"register name {r.name!r} is not an identifier")
            if r.name in self.types:
                raise fail("duplicate", f"register %{r.name} is declared twice")
            self.types[r.name] = r.dtype
        arrays: set[str] = set()
        for kind, decls, cap in (("shared", s.shared, MAX_SHARED_ELEMENTS), ("pool", s.pools, MAX_POOL_ELEMENTS)):
            for m in decls:
                if not _is_name(m.name):
                    raise fail("name", f"{kind} array name {m.name!r} is not an identifier")
                if m.name in arrays or m.name in self.buffers:
                    raise fail("duplicate", f"{kind} array {m.name!r} reuses the name of another array or buffer")
                arrays.add(m.name)
                if not 1 <= m.size <= cap:
                    raise fail("size", f"{kind} array {m.name!r} has size {shorten(m.size)}; "
                                       f"expected 1 to {cap} elements")
        dims_only = Domain.from_dims([d for b in self.buffers.values() for d in b.shape], ())
        for i in s.inits:
            b = self.buffers.get(i.buffer)
            if b is None:
                raise fail("init", f".init names {i.buffer!r}, which is not a global buffer"
                                   f"{did_you_mean(str(i.buffer), self.buffers)}")
            if b.role == "in":
                raise fail("readonly", f".init writes buffer {b.name!r}, whose role is 'in' (read-only)")
            if not I64_MIN <= i.offset <= I64_MAX:
                raise fail("range", f".init {b.name}[{shorten(i.offset)}]: the offset is beyond 64 bits")
            if not representable(i.value, b.dtype):
                raise fail("immediate", f".init {b.name}[{i.offset}] = {shorten(i.value)}: the value is not exactly "
                                        f"representable in {b.dtype}")
            size = Poly.const(1)
            for d in b.shape:
                size = size * Poly.of(d)
            offset = Poly.const(int(i.offset))
            if not (dims_only.nonneg(offset) and dims_only.le(offset, size - 1)):
                raise fail("bounds", f".init {b.name}[{i.offset}] may be out of bounds: {b.name} has {size} "
                                     f"element(s) and inits run even when the domain is empty")
        for pc, item in enumerate(s.body):
            if isinstance(item, Label):
                if not _is_name(item.name):
                    raise self.fail("name", f"label name {item.name!r} is not an identifier", pc=pc)
                if item.name in self.labels:
                    raise self.fail("duplicate", f"label {item.name!r} is defined twice "
                                                 f"(also at {self.labels[item.name]})",
                                    pc=pc)
                self.labels[item.name] = pc

    # -------------------------------------------------------------- control flow
    def check_control(self, meter: Meter) -> None:
        body, labels = self.s.body, self.labels
        if not body:
            raise self.fail("fall-off", "the stage body is empty; it must end with EXIT")
        regions = {"the stage entry": reachable(body, labels, 0, meter)}
        calls = {pc: it.target for pc, it in enumerate(body) if isinstance(it, Instr) and it.op == "CALL"}
        for target in dict.fromkeys(calls.values()):
            regions[target] = reachable(body, labels, labels[target], meter)
        for name, pcs in regions.items():
            sub = name != "the stage entry"
            if len(body) in pcs:
                last = len(body) - 1
                raise self.fail("fall-off", f"control can fall off the end of the stage here (reached from "
                                            f"{'subroutine ' + repr(name) if sub else name})",
                                "end every path with EXIT, RET (in a subroutine) or an unconditional BRA", last)
            for pc in pcs:
                op = getattr(body[pc], "op", None)
                if op == "RET" and not sub:
                    raise self.fail("ret", "RET is reachable from the stage entry without a CALL; RET belongs "
                                           "in a subroutine", "end the main code with EXIT", pc)
                if op == "BarSync" and sub:
                    raise self.fail("barsync", f"BarSync inside subroutine {name!r}: barriers are only allowed "
                                               "in the stage's main code", pc=pc)
        self._check_calls(regions, calls)
        self._check_loops(self._region_writes(regions, meter), meter)

    def _check_loops(self, writes: dict[str, set[str]], meter: Meter) -> None:
        """No loop writes its counter, loops nest or are disjoint, at most MAX_LOOP_DEPTH
        deep. One pass over the body: a loop opens at its label and closes at its LOOP,
        and at a LOOP every loop opened since its label must have closed; the first
        problem in LOOP order is reported."""
        body, labels = self.s.body, self.labels
        loops = [(labels[it.target], pc) for pc, it in enumerate(body) if isinstance(it, Instr) and it.op == "LOOP"]
        closers: dict[int, list[int]] = {}  # label position -> the LOOPs back to it, ascending
        for head, pc in loops:
            closers.setdefault(head, []).append(pc)
        opened: list[int] = []  # labels of the open loops, innermost last
        pending: dict[int, int] = {}  # label position -> its LOOPs not reached yet
        depth = 0  # open loops, one per LOOP
        for pos in sorted(set(closers) | {pc for _, pc in loops}):
            if pos in closers:  # a label: its loops open
                opened.append(pos)
                pending[pos] = len(closers[pos])
                depth += pending[pos]
                continue
            pc, head = pos, labels[body[pos].target]
            self._check_counter(head, pc, writes, meter)
            if opened[-1] != head:  # a loop opened inside this one closes after it
                inner = opened[opened.index(head) + 1:]
                pc2 = min(closers[h][bisect.bisect_right(closers[h], pc)] for h in inner)
                raise self.fail("loop-nesting", f"this loop (from {body[head].name!r}) overlaps the loop closed at "
                                                f"instruction {pc2} without nesting inside it",
                                "loops must nest or be disjoint", pc)
            if depth > MAX_LOOP_DEPTH:
                raise self.fail("limit", f"this loop is nested {depth} deep; the verifier allows at most "
                                         f"{MAX_LOOP_DEPTH}", "flatten the loop nest or split the stage", pc)
            depth -= 1
            pending[head] -= 1
            if not pending[head]:
                opened.pop()

    def _check_counter(self, head: int, pc: int, writes: dict[str, set[str]], meter: Meter) -> None:
        body = self.s.body
        counter = body[pc].srcs[0].name
        meter.charge(pc - head)  # at most MAX_LOOP_DEPTH times the body in all
        for k in range(head, pc):
            it = body[k]
            if isinstance(it, Instr) and counter in (writes[it.target] if it.op == "CALL" else _writes(it)):
                how = f" by a call to {it.target!r}" if it.op == "CALL" else ""
                raise self.fail("loop-counter", f"the loop counter %{counter} is written inside its loop, at "
                                                f"instruction {k} (`{format_instr(it, align=False)}`){how}; the "
                                                "loop might not terminate",
                                "count with a register the loop body leaves alone", pc)

    def _check_calls(self, regions: dict[str, list[int]], calls: dict[int, str]) -> None:
        """No recursion, and calls nest at most MAX_CALL_DEPTH deep. A depth-first search
        with its own stack: the call graph may be deeper than Python's."""
        callees = {name: [(pc, calls[pc]) for pc in pcs if pc in calls] for name, pcs in regions.items()}
        state: dict[str, int] = {}  # 1: on the DFS stack, 2: done
        height: dict[str, int] = {}  # the longest chain of calls from a region
        for root in regions:
            if root in state:
                continue
            state[root] = 1
            path, todo = [root], [iter(callees[root])]
            while todo:
                for pc, callee in todo[-1]:
                    if state.get(callee) == 1:
                        cycle = path[path.index(callee):] + [callee]
                        raise self.fail("recursion", f"recursive call: {' -> '.join(cycle)}",
                                        "calls may not recurse (directly or indirectly)", pc)
                    if callee not in state:
                        state[callee] = 1
                        path.append(callee)
                        todo.append(iter(callees[callee]))
                        break
                else:
                    name = path.pop()
                    todo.pop()
                    state[name] = 2
                    height[name] = max((height[c] + 1 for _, c in callees[name]), default=0)
        name = max(regions, key=height.__getitem__)
        if height[name] > MAX_CALL_DEPTH:
            pc, callee = max(callees[name], key=lambda call: height[call[1]])
            raise self.fail("limit", f"calls nest {height[name]} deep from here "
                                     f"({'subroutine ' + repr(name) if name in calls.values() else name}); the verifier "
                                     f"allows at most {MAX_CALL_DEPTH}", "inline some subroutines", pc)

    def _region_writes(self, regions: dict[str, list[int]], meter: Meter) -> dict[str, set[str]]:
        """Registers each subroutine may write, callees included (the graph is acyclic
        and at most MAX_CALL_DEPTH deep: _check_calls ran)."""
        memo: dict[str, set[str]] = {}

        def writes(name: str) -> set[str]:
            if name not in memo:
                meter.charge(len(regions[name]))
                out: set[str] = set()
                for pc in regions[name]:
                    it = self.s.body[pc]
                    if isinstance(it, Instr):
                        out |= writes(it.target) if it.op == "CALL" else _writes(it)
                memo[name] = out
            return memo[name]

        return {name: writes(name) for name in regions}


def _writes(ins: Instr) -> set[str]:
    if ins.op == "LOOP":
        return {ins.srcs[0].name}
    return {ins.dst.name} if ins.dst is not None else set()


# ======================================================================= instruction
_FIELDS = (("dst", "d", "a destination register"), ("addr", "m", "a memory operand"),
           ("target", "lp", "a label or pool name"), ("count", "n", "an element count"))


class _InstrChecker:
    def __init__(self, sc: _StageChecker, pc: int, ins: Instr):
        self.sc, self.pc, self.ins = sc, pc, ins

    def fail(self, rule: str, msg: str, hint: str | None = None) -> VerifyError:
        return self.sc.fail(rule, msg, hint, self.pc)

    def run(self) -> None:
        ins = self.ins
        spec = OPCODES.get(ins.op)
        if spec is None:
            raise self.fail("opcode", f"unknown opcode {ins.op!r}{did_you_mean(str(ins.op), OPCODES)}")
        self.spec = spec
        self.check_shape()
        self.check_types()
        self.check_targets()

    def check_shape(self) -> None:
        ins, form, op = self.ins, self.spec.form, self.ins.op
        for field, kinds, text in _FIELDS:
            needed = any(k in form for k in kinds)
            if (getattr(ins, field) is not None) != needed:
                raise self.fail("form", f"{op} {'needs' if needed else 'takes no'} {text}")
        if len(ins.srcs) != form.count("s"):
            raise self.fail("form", f"{op} takes {form.count('s')} source operand(s), got {len(ins.srcs)}")
        if ins.mod == REASSOC and op in REASSOC_OPS:
            if ins.dtype is None or not ins.dtype.is_float:
                raise self.fail("form", f"{op}.{REASSOC} applies to float types, not {ins.dtype}")
        elif (ins.mod is not None) != (op == "SET"):
            raise self.fail("form", f"only SET takes a comparison and only {', '.join(sorted(REASSOC_OPS))} take "
                                    f".{REASSOC}" if op != "SET" else "SET needs a comparison")
        if op == "SET" and ins.mod not in COMPARE_MODS:
            raise self.fail("compare", f"unknown comparison {ins.mod!r}; expected one of {', '.join(COMPARE_MODS)}")
        if (ins.dtype2 is not None) != (op == "CVT"):
            raise self.fail("form", "only CVT takes a second (source) type" if op != "CVT"
                            else "CVT needs the source type as a second suffix (CVT.f32.i32)")
        if ins.pred is not None and op != "BRA":
            raise self.fail("form", "only BRA can be predicated")
        if ins.checked and "m" not in form:
            raise self.fail("form", f".chk applies to memory accesses; {op} has none")
        if ins.pred is not None:
            self.operand(ins.pred.reg, DType.BOOL, "the predicate", reg_only=True)

    def check_types(self) -> None:
        ins, spec, op = self.ins, self.spec, self.ins.op
        t = ins.dtype
        if spec.types == "none":
            if t is not None:
                raise self.fail("dtype", f"{op} takes no type suffix")
        elif t is None:
            raise self.fail("dtype", f"{op} needs a type suffix ({_TYPE_CLASS_TEXT[spec.types]})")
        elif not spec.admits(t):
            raise self.fail("dtype", f"{op} works on {_TYPE_CLASS_TEXT[spec.types]}, not {t}")
        if ins.dst is not None:
            want = {"same": t, "bool": DType.BOOL, "i64": DType.I64}[spec.result]
            self.operand(ins.dst, want, "the destination", reg_only=True)
        expected = {"CVT": [ins.dtype2], "SEL": [DType.BOOL, t, t]}.get(
            op, [DType.I64] if op in ("LOOP", "PoolFree", "PhaseAdv") else [t] * len(ins.srcs))
        for k, (o, want) in enumerate(zip(ins.srcs, expected)):
            what = "the loop counter" if op == "LOOP" else "the pool handle" if op == "PoolFree" else f"source {k + 1}"
            self.operand(o, want, what, reg_only=op in ("LOOP", "PoolFree"), imm_only=op == "MOV_IMM")
        if ins.addr is not None:
            self.check_addr()

    def operand(self, o: object, want: DType, what: str, reg_only: bool = False, imm_only: bool = False) -> None:
        op = self.ins.op
        if imm_only and not isinstance(o, Imm):
            raise self.fail("operand", f"{op} takes an immediate; use MOV for {o}")
        if reg_only and not isinstance(o, Reg):
            raise self.fail("operand", f"{what} must be a general register, not {shorten(o)}")
        if isinstance(o, Reg):
            have = self.sc.types.get(o.name)
            if have is None:
                raise self.fail("undeclared", f"register %{o.name} is not declared"
                                              f"{did_you_mean(o.name, self.sc.types)}",
                                f"declare it: .reg %{o.name}: {want}")
            if have != want:
                raise self.fail("type", f"{what} %{o.name} is {have} but {op} needs {want} here")
        elif isinstance(o, Special):
            if want != DType.I64:
                raise self.fail("type", f"{what} %{o.name} is a special register (i64) but {op} needs {want} here")
        elif isinstance(o, Sym):
            p = self.sc.p
            if o.name in p.symbols:
                have = DType.I64
            elif o.name in self.sc.scalars:
                have = self.sc.scalars[o.name].dtype
            else:
                raise self.fail("symbol", f"${o.name} is neither a shape symbol nor a scalar parameter"
                                          f"{did_you_mean(o.name, list(p.symbols) + list(self.sc.scalars))}")
            if have != want:
                raise self.fail("type", f"{what} ${o.name} is {have} but {op} needs {want} here")
        elif isinstance(o, Imm):
            if not representable(o.value, want):
                raise self.fail("immediate", f"{what} (the immediate {shorten(o.value)}) is not exactly "
                                             f"representable in {want}",
                                "integers must be in range; floats must be values of the type "
                                "(e.g. float(np.float32(x))); bool takes true/false")

    def check_addr(self) -> None:
        a, op, space = self.ins.addr, self.ins.op, self.spec.space
        s = self.sc.s
        arrays = {"global": self.sc.buffers, "shared": {m.name: m for m in s.shared},
                  "pool": {m.name: m for m in s.pools}}[space]
        decl = arrays.get(a.buffer)
        if decl is None:
            kinds = {"global": "global buffers (parameters and temporaries)", "shared": ".shared arrays",
                     "pool": ".pool arrays"}
            raise self.fail("space", f"{op} accesses {kinds[space]}, and {a.buffer!r} is not one"
                                     f"{did_you_mean(a.buffer, arrays)}")
        if decl.dtype != self.ins.dtype:
            raise self.fail("type", f"{a.buffer!r} holds {decl.dtype} but the access is {self.ins.dtype}")
        if a.index is not None:
            self.operand(a.index, DType.I64, "the index", reg_only=True)
        if not I64_MIN <= a.offset <= I64_MAX:
            raise self.fail("range", f"the address offset {shorten(a.offset)} is beyond 64 bits")
        if op in WRITES_GLOBAL and decl.role == "in":
            raise self.fail("readonly", f"{op} writes {a.buffer!r}, an input (role 'in') buffer")
        if op == "ResAccum" and a.index is None:
            raise self.fail("form", "ResAccum needs an index register holding the Atlas class (0..95)",
                            "write ResAccum.T [buf + %c + k], v with the class in %c")
        if op in COMBINES:
            self.check_one_combine(a.buffer)

    def check_one_combine(self, buffer: str) -> None:
        """A stage reduces into a buffer one way. Contributions of different kinds would
        merge in an order no backend can make agree (the maximum of a sum, or the sum of
        a maximum), and a backend keeps one partial per buffer, seeded with one identity."""
        op = self.ins.op
        first_pc = self.sc.reduced.setdefault(buffer, self.pc)
        first = self.sc.s.body[first_pc].op
        if COMBINES[first] != COMBINES[op]:
            shown = lambda name: f"{name} (a sum)" if name == "ResAccum" else name  # noqa: E731
            raise self.fail("reduction", f"{buffer!r} is reduced with {shown(op)} here and with {shown(first)} at "
                                         f"instruction {first_pc}; a stage combines the contributions to a buffer "
                                         "one way", "reduce into separate buffers, or in separate stages")

    def check_targets(self) -> None:
        ins, op = self.ins, self.ins.op
        if "l" in self.spec.form:
            where = self.sc.labels.get(ins.target)
            if where is None:
                raise self.fail("label", f"label {ins.target!r} does not exist in this stage"
                                         f"{did_you_mean(str(ins.target), self.sc.labels)}")
            if op == "BRA" and where < self.pc:
                raise self.fail("branch", f"BRA may only jump forward; {ins.target!r} is at {where}",
                                "repeat code with LOOP (a counted backward jump)")
            if op == "LOOP" and where > self.pc:
                raise self.fail("branch", f"LOOP may only jump backward; {ins.target!r} is at {where}")
        if op == "PoolAlloc":
            pools = {m.name: m for m in self.sc.s.pools}
            pool = pools.get(ins.target)
            if pool is None:
                raise self.fail("space", f"PoolAlloc names {ins.target!r}, which is not a .pool array"
                                         f"{did_you_mean(str(ins.target), pools)}")
            if not 1 <= ins.count <= pool.size:
                raise self.fail("size", f"PoolAlloc of {shorten(ins.count)} elements from pool {pool.name!r} of "
                                        f"{pool.size}; expected 1 to {pool.size}")
