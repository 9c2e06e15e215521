"""The verifier's rules on single instructions (rule 3 of verifier.py).

Each instruction is checked against its opcode's spec (`OPCODES[op]`): operand kinds by
`form`, types by `types` and `result`, immediates representable in their type, memory
accesses into arrays of their space and element type (and no writes to inputs), labels
that exist and run the way the opcode jumps, pool allocations that fit their pool, and
one combining operation per buffer a stage reduces into. Names resolve in the stage's
`StageScope` (decl_rules.py).
"""

from __future__ import annotations

from hologram.core.errors import VerifyError, did_you_mean, shorten
from hologram.core.types import DType
from hologram.isa.opcodes import OPCODES
from hologram.isa.program import COMPARE_MODS, REASSOC, Imm, Instr, Reg, Special, Sym
from hologram.verify.decl_rules import I64_MAX, I64_MIN, StageScope, representable

WRITES_GLOBAL = frozenset(name for name, spec in OPCODES.items() if "writes" in spec.effects and spec.space == "global")
# How each reduction combines its contributions: ResAccum is a ReduceAdd into a class's bin.
COMBINES = {**{name: name for name, spec in OPCODES.items() if spec.group == "reduce"}, "ResAccum": "ReduceAdd"}
# How messages name the sources of the opcodes that read a register in a role
_ROLE = {"LOOP": "the loop counter", "PoolFree": "the pool handle"}


def _those(has) -> str:
    return ", ".join(sorted(name for name, spec in OPCODES.items() if has(spec)))


_COMPARING = _those(lambda spec: spec.modifier == "compare")
_CONVERTING = _those(lambda spec: "S" in spec.sources)
_PREDICATED = _those(lambda spec: spec.predicated)
_REASSOCIABLE = _those(lambda spec: spec.modifier == REASSOC)

_TYPE_CLASS_TEXT = {"any": "any type", "num": "a numeric type", "int": "an integer type",
                    "intbool": "an integer type or bool", "float": "a float type"}
_FIELDS = (("dst", "d", "a destination register"), ("addr", "m", "a memory operand"),
           ("target", "lp", "a label or pool name"), ("count", "n", "an element count"))


def check_instructions(scope: StageScope) -> None:
    """Rule 3, for every instruction of the stage in order (VerifyError at the first
    problem)."""
    reduced: dict[str, int] = {}  # buffer -> the first reduction into it (its pc)
    for pc, item in enumerate(scope.s.body):
        if isinstance(item, Instr):
            _InstrChecker(scope, reduced, pc, item).run()


class _InstrChecker:
    """The rules for instruction `ins` at `pc`; `reduced` is shared by the stage's
    instructions (see `check_one_combine`)."""

    def __init__(self, sc: StageScope, reduced: dict[str, int], pc: int, ins: Instr):
        self.sc, self.reduced, self.pc, self.ins = sc, reduced, pc, ins

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
        modifier = self.spec.modifier
        if ins.mod == REASSOC and modifier == REASSOC:
            if ins.dtype is None or not ins.dtype.is_float:
                raise self.fail("form", f"{op}.{REASSOC} applies to float types, not {ins.dtype}")
        elif (ins.mod is not None) != (modifier == "compare"):
            raise self.fail("form", f"only {_COMPARING} takes a comparison and only {_REASSOCIABLE} take "
                                    f".{REASSOC}" if modifier != "compare" else f"{op} needs a comparison")
        if modifier == "compare" and ins.mod not in COMPARE_MODS:
            raise self.fail("compare", f"unknown comparison {ins.mod!r}; expected one of {', '.join(COMPARE_MODS)}")
        if (ins.dtype2 is not None) != ("S" in self.spec.sources):
            raise self.fail("form", f"only {_CONVERTING} takes a second (source) type" if "S" not in self.spec.sources
                            else f"{op} needs the source type as a second suffix (CVT.f32.i32)")
        if ins.pred is not None and not self.spec.predicated:
            raise self.fail("form", f"only {_PREDICATED} can be predicated")
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
            self.operand(ins.dst, spec.result_type(t), "the destination", reg_only=True)
        for k, o in enumerate(ins.srcs):
            kind = spec.sources[k]
            self.operand(o, spec.source_type(k, t, ins.dtype2), _ROLE.get(op, f"source {k + 1}"), reg_only=kind == "c",
                         imm_only=kind == "k")
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
        first_pc = self.reduced.setdefault(buffer, self.pc)
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
