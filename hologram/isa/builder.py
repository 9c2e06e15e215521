"""Build Atlas ISA programs: fresh typed registers and labels, and one `emit` that reads
`OPCODES` to know what each instruction produces.

The lowering writes every stage through a `StageBuilder`, and tests write programs by hand
with the same calls:

    pb = ProgramBuilder("scale", symbols=("n",))
    pb.buffer("x", DType.F32, ("n",), "in"); pb.buffer("y", DType.F32, ("n",), "out")
    s = pb.stage("y", ("n",))
    i = s.mov(DType.I64, gid("x"), hint="i")
    v = s.ldg(DType.F32, "x", i)
    s.stg(DType.F32, "y", s.alu("MUL", DType.F32, v, 2.0), i)
    prog = pb.build()          # every stage ends in EXIT

Python numbers given where an operand is expected become immediates (`Imm`).
"""

from __future__ import annotations

from typing import Sequence

import attrs

from hologram.core.dims import derived_closure
from hologram.core.errors import Site
from hologram.core.types import Affine, DType
from hologram.isa.opcodes import OPCODES
from hologram.isa.program import (Addr, BufferParam, Imm, Init, Instr, Item, Label, MemDecl, Operand, Pred, Program,
                                  Reg, RegDecl, ScalarParam, Special, Stage, Sym)
from hologram.isa.structure import structure_problem

# Lanes per block by domain rank: 256 lanes, x widest (it walks the contiguous last dim).
DEFAULT_BLOCKS: dict[int, tuple[int, ...]] = {1: (256,), 2: (16, 16), 3: (8, 8, 4)}

OperandLike = Operand | bool | int | float
Dim = Affine | int | str


def gid(axis: str) -> Special:
    """`%gid.<axis>`: the lane's global index on that domain axis."""
    return Special(f"gid.{axis}")


def sym(name: str) -> Sym:
    """`$name`: a shape symbol or a scalar parameter."""
    return Sym(name)


def as_operand(x: OperandLike) -> Operand:
    if isinstance(x, (Reg, Special, Imm, Sym)):
        return x
    if isinstance(x, (bool, int, float)):
        return Imm(x)
    raise TypeError(f"not an operand: {x!r}")


def _default_hint(dtype: DType) -> str:
    return "p" if dtype.is_bool else "f" if dtype.is_float else "r"


class StageBuilder:
    """Accumulates one stage: registers, labels, inits and the instruction list."""

    def __init__(self, name: str, domain: Sequence[Dim], block: Sequence[int] | None = None):
        if not 1 <= len(domain) <= 3:
            raise ValueError(f"stage '{name}': a domain has 1 to 3 dimensions, got {len(domain)}")
        self.name = name
        self.domain = tuple(Affine.of(d) for d in domain)
        self.block = tuple(block) if block is not None else DEFAULT_BLOCKS[len(self.domain)]
        self.regs: dict[str, DType] = {}
        self.labels: set[str] = set()
        self.body: list[Item] = []
        self.inits: list[Init] = []
        self.shared: list[MemDecl] = []
        self.pools: list[MemDecl] = []
        self._counters: dict[str, int] = {}

    # -- names ------------------------------------------------------------------------
    def _fresh(self, base: str, taken: set[str] | dict[str, DType], numbered: bool) -> str:
        if not numbered and base not in taken:
            return base
        n = self._counters.get(base, 0)
        while f"{base}{n}" in taken:
            n += 1
        self._counters[base] = n + 1
        return f"{base}{n}"

    def reg(self, dtype: DType, hint: str | None = None) -> Reg:
        """A fresh register. `hint` names it (`%i`, then `%i0`, `%i1`... once taken);
        without a hint it is `%p<n>` (bool), `%f<n>` (float) or `%r<n>` (integer)."""
        name = self._fresh(hint or _default_hint(dtype), self.regs, numbered=hint is None)
        self.regs[name] = dtype
        return Reg(name)

    def label(self, hint: str = "L") -> str:
        """A fresh label name; `place` puts it in the body."""
        name = self._fresh(hint, self.labels, numbered=True)
        self.labels.add(name)
        return name

    def place(self, label: str) -> None:
        self.body.append(Label(label))

    def type_of(self, x: Operand) -> DType | None:
        """The type of a register or special; None for immediates and `$` operands, which
        take the type of the instruction that reads them."""
        if isinstance(x, Reg):
            return self.regs[x.name]
        if isinstance(x, Special):
            return DType.I64
        return None

    # -- instructions -----------------------------------------------------------------
    def emit(self, op: str, dtype: DType | None = None, *srcs: OperandLike, dst: Reg | None = None,
             addr: Addr | None = None, target: str | None = None, mod: str | None = None,
             dtype2: DType | None = None, count: int | None = None, pred: Pred | None = None,
             checked: bool = False, hint: str | None = None, site: int | None = None) -> Reg | None:
        """Append one instruction; returns its destination register, fresh unless `dst` is
        given, typed by the opcode's result rule (same as `dtype`, bool, or i64)."""
        spec = OPCODES.get(op)
        if spec is None:
            raise ValueError(f"unknown opcode {op!r}")
        if "d" in spec.form and dst is None:
            rtype = {"same": dtype, "bool": DType.BOOL, "i64": DType.I64}[spec.result]
            if rtype is None:
                raise ValueError(f"{op} needs a dtype to type its destination")
            dst = self.reg(rtype, hint)
        self.body.append(Instr(op, dtype, dst, tuple(as_operand(s) for s in srcs), addr, target, mod,
                               dtype2, count, pred, checked, site))
        return dst

    def alu(self, op: str, dtype: DType, *srcs: OperandLike, dst: Reg | None = None,
            hint: str | None = None) -> Reg:
        """Any register-producing operation: `alu("ADD", DType.F32, a, b)`."""
        out = self.emit(op, dtype, *srcs, dst=dst, hint=hint)
        assert out is not None, f"{op} has no destination"
        return out

    def mov(self, dtype: DType, src: OperandLike, dst: Reg | None = None, hint: str | None = None) -> Reg:
        src = as_operand(src)
        return self.alu("MOV_IMM" if isinstance(src, Imm) else "MOV", dtype, src, dst=dst, hint=hint)

    def cvt(self, to: DType, frm: DType, src: OperandLike, hint: str | None = None) -> Reg:
        out = self.emit("CVT", to, src, dtype2=frm, hint=hint)
        assert out is not None
        return out

    def setp(self, cmp: str, dtype: DType, a: OperandLike, b: OperandLike) -> Reg:
        """`SET.<cmp>.<dtype>`: a bool register; cmp in eq ne lt le gt ge."""
        out = self.emit("SET", dtype, a, b, mod=cmp)
        assert out is not None
        return out

    def sel(self, dtype: DType, p: OperandLike, a: OperandLike, b: OperandLike, dst: Reg | None = None) -> Reg:
        """`a if p else b`."""
        return self.alu("SEL", dtype, p, a, b, dst=dst)

    def ldg(self, dtype: DType, buffer: str, index: Reg | None = None, offset: int = 0,
            checked: bool = False, hint: str | None = None, site: int | None = None) -> Reg:
        """A global load; `site` (an index into the builder's site table) only on a checked one."""
        out = self.emit("LDG", dtype, addr=Addr(buffer, index, offset), checked=checked, hint=hint,
                        site=site if checked else None)
        assert out is not None
        return out

    def stg(self, dtype: DType, buffer: str, value: OperandLike, index: Reg | None = None, offset: int = 0,
            checked: bool = False, site: int | None = None) -> None:
        self.emit("STG", dtype, value, addr=Addr(buffer, index, offset), checked=checked,
                  site=site if checked else None)

    def reduce(self, op: str, dtype: DType, buffer: str, value: OperandLike, index: Reg | None = None,
               offset: int = 0, checked: bool = False, site: int | None = None) -> None:
        """A cross-lane contribution: op in ReduceAdd ReduceMul ReduceMin ReduceMax ResAccum."""
        self.emit(op, dtype, value, addr=Addr(buffer, index, offset), checked=checked,
                  site=site if checked else None)

    def bra(self, label: str, pred: Reg | None = None, negate: bool = False) -> None:
        """Jump forward to `label`, if `pred` (or its negation) holds when given."""
        self.emit("BRA", target=label, pred=None if pred is None else Pred(pred, negate))

    def loop(self, counter: Reg, label: str) -> None:
        """`counter -= 1; if counter > 0: goto label` (label placed earlier)."""
        self.emit("LOOP", None, counter, target=label)

    def exit(self) -> None:
        self.emit("EXIT")

    def init(self, buffer: str, value: bool | int | float, offset: int = 0) -> None:
        """Seed `buffer[offset]` before any lane of the stage runs."""
        self.inits.append(Init(buffer, offset, value))

    def build(self) -> Stage:
        """The stage, with a final EXIT appended unless the body already ends in one."""
        body = list(self.body)
        if not body or not (isinstance(body[-1], Instr) and body[-1].op == "EXIT"):
            body.append(Instr("EXIT"))
        return Stage(self.name, self.domain, self.block,
                     tuple(RegDecl(n, t) for n, t in self.regs.items()),
                     tuple(self.shared), tuple(self.pools), tuple(self.inits), tuple(body))


class ProgramBuilder:
    """Accumulates a program: its signature, temporaries and stages in order. `sites` is
    the table instructions' `site` fields index while building (the lowering passes the
    kernel IR's); the program keeps only the sites its instructions use."""

    def __init__(self, name: str, symbols: Sequence[str] = (), reassociate: bool = False,
                 sites: Sequence[Site] = ()):
        self.name = name
        self.symbols = tuple(symbols)
        self.reassociate = reassociate
        self.sites = tuple(sites)
        self.params: list[BufferParam | ScalarParam] = []
        self.temps: list[BufferParam] = []
        self.stages: list[StageBuilder] = []

    def buffer(self, name: str, dtype: DType, shape: Sequence[Dim], role: str = "in") -> BufferParam:
        p = BufferParam(name, dtype, tuple(Affine.of(d) for d in shape), role)
        self.params.append(p)
        return p

    def scalar(self, name: str, dtype: DType) -> ScalarParam:
        p = ScalarParam(name, dtype)
        self.params.append(p)
        return p

    def temp(self, name: str, dtype: DType, shape: Sequence[Dim]) -> BufferParam:
        t = BufferParam(name, dtype, tuple(Affine.of(d) for d in shape), "temp")
        self.temps.append(t)
        return t

    def stage(self, name: str, domain: Sequence[Dim], block: Sequence[int] | None = None) -> StageBuilder:
        sb = StageBuilder(name, domain, block)
        self.stages.append(sb)
        return sb

    def build(self) -> Program:
        """The program; its symbols are the ones given, then every derived symbol
        (hologram.core.dims) a shape, a domain or an operand uses, each after the ones it
        reads: a derived symbol needs no declaration of its own. Only the sites its
        instructions name are kept (`compact_sites`)."""
        stages = tuple(s.build() for s in self.stages)
        used = [n for b in (*self.params, *self.temps) if isinstance(b, BufferParam) for d in b.shape
                for n in d.symbols]
        used += [n for st in stages for d in st.domain for n in d.symbols]
        used += [op.name for st in stages for it in st.body if isinstance(it, Instr) for op in it.srcs
                 if isinstance(op, Sym)]
        derived = tuple(n for n in derived_closure(used) if n not in self.symbols)
        return compact_sites(Program(self.name, tuple(self.params), tuple(self.temps), self.symbols + derived,
                                     stages, reassociate=self.reassociate, sites=self.sites))


def compact_sites(p: Program) -> Program:
    """`p` with only the sites its instructions name, numbered in order of first use
    (`p` itself when that is what it has), so a program does not change with the
    locations of accesses a pass proved safe."""
    if structure_problem(p) is not None:
        return p  # the verifier says what is wrong
    used: dict[int, int] = {}  # old index -> new, in order of first use
    for s in p.stages:
        for it in s.body:
            if isinstance(it, Instr) and it.site is not None:
                used.setdefault(it.site, len(used))
    if list(used) == list(range(len(p.sites))):
        return p
    if any(not 0 <= k < len(p.sites) for k in used):
        return p  # the verifier says what is wrong
    stages = tuple(attrs.evolve(s, body=tuple(
        attrs.evolve(it, site=used[it.site]) if isinstance(it, Instr) and it.site is not None else it
        for it in s.body)) if any(isinstance(it, Instr) and it.site is not None for it in s.body) else s
        for s in p.stages)
    return attrs.evolve(p, stages=stages, sites=tuple(p.sites[k] for k in used))


__all__ = ["DEFAULT_BLOCKS", "ProgramBuilder", "StageBuilder", "as_operand", "compact_sites", "gid", "sym"]
