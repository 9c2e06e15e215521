"""Hypothesis strategies for random, verified Atlas programs.

`programs()` draws programs that pass `verify` and mean the same thing on every correct
backend, so they serve round-trip tests (text, binary) and differential backend tests:

- every register is written before it is read, loops count down from small constants,
  calls go to subroutines with lower numbers (no recursion);
- every lane writes only its own elements of `y` (and `t`), so stores never race;
  block-shared memory is written at the lane's own slot between two barriers and read
  at its own slot or slot 0 (which every existing block has); pools are written before
  they are read and freed in stack order;
- unchecked accesses are provable; `.chk` accesses are in range too, so a launch with
  every symbol >= 1 never raises;
- immediates include each type's edge values (min, max, -0.0, NaN, infinities,
  subnormals);
- one program in three has a table of source sites that some checked instructions name;
- one stage in four has its block scratch near or at the limit (docs/isa.md, "Block
  scratch"): the largest block its registers allow, its pool grown, more pools and
  shared arrays declared.

What a program needs at launch: symbols `n` (and `m` for 2-D), all >= 1; buffer params
named by `Program.params` (`x` in, `y` out, optionally `hist` inout with 96 elements,
`r` a 0-d out seeded by `.init`), and the scalar `s` when declared.
"""

from __future__ import annotations

import math
from typing import Callable

import attrs
import numpy as np
from hypothesis import strategies as st

from hologram.core.errors import Site
from hologram.core.types import Affine, DType
from hologram.isa.opcodes import OPCODES
from hologram.isa.program import (COMPARE_MODS, Addr, BufferParam, Imm, Init, Instr, Label, MemDecl, Pred, Program, Reg,
                                  RegDecl, ScalarParam, Special, Stage, Sym)
from hologram.verify.decl_rules import (MAX_BLOCK_SCRATCH_BYTES, MAX_POOL_ELEMENTS, MAX_SHARED_BYTES,
                                        MAX_SHARED_ELEMENTS, REGISTER_BYTES, block_scratch)

I64, BOOL = DType.I64, DType.BOOL
# The value-computing instructions: every pure one of the op table, drawn by its typing rule
VALUE_OPS = tuple(name for name, spec in OPCODES.items() if spec.pure)
REDUCE_IDENTITY = {"ReduceAdd": lambda t: 0, "ReduceMul": lambda t: 1,
                   "ReduceMin": lambda t: math.inf if t.is_float else int(t.max),
                   "ReduceMax": lambda t: -math.inf if t.is_float else int(t.min)}


def edge_values(t: DType) -> list[bool | int | float]:
    """The immediates most likely to expose a backend bug, for type `t`."""
    if t is BOOL:
        return [False, True]
    if t.is_int:
        vals = [0, 1, int(t.max), int(t.min), int(t.max) - 1, 7]
        return vals + ([-1, int(t.min) + 1] if t.is_signed else [])
    info = np.finfo(t.np)
    return [0.0, -0.0, 1.0, -1.5, math.inf, -math.inf, math.nan, float(info.max), float(-info.max),
            float(info.smallest_subnormal), float(info.smallest_normal), float(info.eps)]


def immediates(t: DType) -> st.SearchStrategy:
    """Immediates of type `t` (exactly representable, as the verifier requires)."""
    if t is BOOL:
        return st.booleans()
    if t.is_int:
        return st.sampled_from(edge_values(t)) | st.integers(int(t.min), int(t.max))
    width = {DType.F16: 16, DType.F32: 32, DType.F64: 64}[t]
    return st.sampled_from(edge_values(t)) | st.floats(width=width).map(lambda v: float(t.np.type(v))) \
        | st.integers(-2048, 2048)


class _Gen:
    """Builds one stage body. `defined` holds, per type, the registers written on every
    path to the current point; `frozen` names registers the body must not overwrite
    (loop counters, index registers, live pool handles)."""

    def __init__(self, draw: Callable, prog: "_ProgGen", t: DType):
        self.draw, self.pg, self.t = draw, prog, t
        self.regs: dict[str, DType] = {}
        self.defined: dict[DType, list[str]] = {}
        self.frozen: set[str] = set()
        self.items: list = []
        self.labels = 0
        self.subs: list[tuple[str, str]] = []  # (label, result register)
        self.budget = 0

    # ---------------------------------------------------------------- registers
    def new(self, t: DType) -> Reg:
        name = f"r{len(self.regs)}"
        self.regs[name] = t
        return Reg(name)

    def define(self, r: Reg) -> Reg:
        lst = self.defined.setdefault(self.regs[r.name], [])
        if r.name not in lst:
            lst.append(r.name)
        return r

    def label(self) -> str:
        self.labels += 1
        return f"L{self.labels}"

    def emit(self, *items) -> None:
        self.items.extend(items)
        self.budget -= sum(isinstance(i, Instr) for i in items)

    def source(self, t: DType):
        """A readable operand of type `t`: a defined register, an immediate, a symbol."""
        d = self.draw
        choices = ["imm"]
        if self.defined.get(t):
            choices += ["reg"] * 3
        if t is I64:
            choices += ["special", "sym"]
        if self.pg.scalar is not None and self.pg.scalar.dtype == t:
            choices.append("scalar")
        kind = d(st.sampled_from(choices))
        if kind == "reg":
            return Reg(d(st.sampled_from(self.defined[t])))
        if kind == "special":
            return Special(d(st.sampled_from(["gid.x", "tid.x", "ntid.x", "ctaid.x", "nctaid.x", "gdim.x", "gid.y",
                                              "gdim.z"])))
        if kind == "sym":
            return Sym(d(st.sampled_from(self.pg.symbols)))
        if kind == "scalar":
            return Sym(self.pg.scalar.name)
        return Imm(d(immediates(t)))

    def target(self, t: DType) -> Reg:
        """A register of type `t` to write: a fresh one or a defined, unfrozen one."""
        old = [r for r in self.defined.get(t, []) if r not in self.frozen]
        if old and self.draw(st.booleans()):
            return Reg(self.draw(st.sampled_from(old)))
        return self.new(t)

    def value(self, t: DType) -> Reg:
        """A register of type `t` holding some computed value (emitting code if needed)."""
        if not self.defined.get(t) or self.draw(st.integers(0, 3)) == 0:
            dst = self.target(t)
            self.emit(Instr("MOV_IMM" if self.draw(st.booleans()) else "MOV", t, dst, (Imm(self.draw(immediates(t))),)))
            return self.define(dst)
        return Reg(self.draw(st.sampled_from(self.defined[t])))

    # ------------------------------------------------------------------ snippets
    def compute(self) -> None:
        """One value-computing instruction of a random group."""
        d = self.draw
        t = d(st.sampled_from([self.t, self.t, I64, d(st.sampled_from(list(DType)))]))
        spec = OPCODES[d(st.sampled_from([op for op in VALUE_OPS if OPCODES[op].admits(t)]))]
        frm = d(st.sampled_from(list(DType))) if "S" in spec.sources else None
        srcs = tuple(Imm(d(immediates(t))) if kind == "k" else self.source(spec.source_type(k, t, frm))
                     for k, kind in enumerate(spec.sources))
        mod = d(st.sampled_from(COMPARE_MODS)) if spec.modifier == "compare" else None
        ins = Instr(spec.name, t, self.target(spec.result_type(t)), srcs, mod=mod, dtype2=frm)
        self.emit(ins)
        self.define(ins.dst)

    def gather(self) -> None:
        """x[k] for an arbitrary i64 k reduced into range with REM by a symbol."""
        k = self.new(I64)
        v = self.target(self.t)
        self.emit(Instr("REM", I64, k, (self.source(I64), Sym("n"))))
        self.define(k)
        if self.pg.two_d:  # row k, column gid.y
            self.emit(Instr("MAD", I64, k, (k, Sym("m"), Special("gid.y"))))
        self.emit(Instr("LDG", self.t, v, addr=Addr("x", k), checked=self.draw(st.booleans())))
        self.define(v)

    def branch(self, depth: int) -> None:
        p = self.new(BOOL)
        ty = self.draw(st.sampled_from([self.t, I64]))
        end = self.label()
        mod = self.draw(st.sampled_from(["lt", "ge", "ne"]))
        self.emit(Instr("SET", ty, p, (self.source(ty), self.source(ty)), mod=mod),
                  Instr("BRA", target=end, pred=Pred(p, self.draw(st.booleans()))))
        saved = {k: list(v) for k, v in self.defined.items()}
        self.block(depth + 1)
        self.defined = saved
        self.define(p)
        self.emit(Label(end))

    def loop(self, depth: int) -> None:
        c = self.new(I64)
        head = self.label()
        self.emit(Instr("MOV_IMM", I64, c, (Imm(self.draw(st.integers(1, 3))),)), Label(head))
        self.define(c)
        self.frozen.add(c.name)
        self.block(depth + 1)
        self.frozen.discard(c.name)
        self.emit(Instr("LOOP", srcs=(c,), target=head))

    def pool(self) -> None:
        if not self.pg.pool:
            return
        name, size = self.pg.pool
        n = self.draw(st.integers(1, size))
        h = self.new(I64)
        chk = self.draw(st.booleans())
        self.emit(Instr("PoolAlloc", None, h, target=name, count=n))
        self.define(h)
        self.frozen.add(h.name)  # the handle must reach PoolFree unchanged
        if n > 1 and self.draw(st.booleans()):  # fill it in a loop: [pl + h + p], p an induction register
            p, c, at, head = self.new(I64), self.new(I64), self.new(I64), self.label()
            self.emit(Instr("MOV_IMM", I64, p, (Imm(0),)), Instr("MOV_IMM", I64, c, (Imm(n),)), Label(head),
                      Instr("ADD", I64, at, (h, p)),
                      Instr("PoolStore", self.t, srcs=(self.source(self.t),), addr=Addr(name, at), checked=chk),
                      Instr("ADD", I64, p, (p, Imm(1))), Instr("LOOP", srcs=(c,), target=head))
        else:
            for j in range(n):
                self.emit(Instr("PoolStore", self.t, srcs=(self.source(self.t),), addr=Addr(name, h, j), checked=chk))
        v = self.target(self.t)
        self.emit(Instr("PoolLoad", self.t, v, addr=Addr(name, h, self.draw(st.integers(0, n - 1))), checked=chk),
                  Instr("PoolFree", srcs=(h,)))
        self.frozen.discard(h.name)
        self.define(v)

    def atlas(self) -> None:
        d = self.draw
        if d(st.booleans()):
            self.emit(Instr("PhaseAdv", srcs=(self.source(I64),)))
        ph = self.target(I64)
        self.emit(Instr("PhaseGet", None, ph))
        self.define(ph)
        if self.pg.hist and not self.t.is_bool:
            v = self.value(self.t)  # first: it may write a register, never the index below
            cls = self.new(I64)
            self.emit(Instr("REM", I64, cls, (self.source(I64), Imm(96))))
            self.define(cls)
            self.emit(Instr("ResAccum", self.t, srcs=(v,), addr=Addr("hist", cls)))

    def fence(self) -> None:
        self.emit(Instr("MemFence"))

    def call(self) -> None:
        if self.subs:
            lbl, res = self.draw(st.sampled_from(self.subs))
            self.emit(Instr("CALL", target=lbl))
            self.define(Reg(res))

    def block(self, depth: int) -> None:
        kinds = ["compute"] * 4 + ["gather", "pool", "atlas", "call", "fence"]
        if depth < 2:
            kinds += ["branch", "loop"]
        for _ in range(self.draw(st.integers(1, 4))):
            if self.budget <= 0:
                return
            kind = self.draw(st.sampled_from(kinds))
            if kind in ("branch", "loop"):
                getattr(self, kind)(depth)
            else:
                getattr(self, kind)()


class _ProgGen:
    def __init__(self, draw: Callable):
        self.draw = draw
        d = draw
        self.t: DType = d(st.sampled_from(list(DType)))
        self.two_d = d(st.booleans())
        self.symbols = ("n", "m") if self.two_d else ("n",)
        self.scalar = ScalarParam("s", d(st.sampled_from([self.t, I64]))) if d(st.booleans()) else None
        self.hist = not self.t.is_bool and d(st.booleans())
        self.reduce = d(st.sampled_from([None] + list(REDUCE_IDENTITY))) if not self.t.is_bool else None
        # each lane contributes once or twice: a backend that keeps a lane's share in
        # registers (the GPU backends' full sums) must add both
        self.contributions = d(st.integers(1, 2)) if self.reduce else 0
        self.pool: tuple[str, int] | None = None
        self.shape = (Affine.of("n"), Affine.of("m")) if self.two_d else (Affine.of("n"),)

    def params(self) -> tuple:
        out: list = [BufferParam("x", self.t, self.shape, "in")]
        if self.scalar is not None:
            out.append(self.scalar)
        out.append(BufferParam("y", self.t, self.shape, "out"))
        if self.hist:
            out.append(BufferParam("hist", self.t, (Affine.of(96),), "inout"))
        if self.reduce:
            out.append(BufferParam("r", self.t, (), "out"))
        return tuple(out)

    def stage(self, no: int, n_stages: int, max_instructions: int) -> Stage:
        d = self.draw
        g = _Gen(d, self, self.t)
        g.budget = max_instructions
        block = (d(st.sampled_from([1, 2, 4])), d(st.sampled_from([1, 2]))) if self.two_d else \
            (d(st.sampled_from([1, 2, 3, 8, 32])),)
        large = d(st.integers(0, 3)) == 0  # one stage in four: its block scratch near the limit
        self.pool = ("pl", d(st.integers(1, 6))) if d(st.booleans()) else None
        shared = d(st.booleans())
        # prologue: the element index and the lane's own x value
        i = g.define(g.new(I64))
        g.emit(Instr("MOV", I64, i, (Special("gid.x"),)))
        idx = i
        if self.two_d:
            idx = g.define(g.new(I64))
            g.emit(Instr("MAD", I64, idx, (i, Sym("m"), Special("gid.y"))))
        src_buf = "t" if no > 0 else "x"
        v = g.define(g.new(self.t))
        g.emit(Instr("LDG", self.t, v, addr=Addr(src_buf, idx), checked=d(st.booleans())))
        g.frozen |= {i.name, idx.name}
        # subroutines read only prologue registers; each ends by writing its result
        sub_bodies = []
        for k in range(d(st.integers(0, 2))):
            saved_defined = {t: list(v) for t, v in g.defined.items()}
            start = len(g.items)
            res = g.new(self.t)
            g.block(1)
            g.emit(Instr("MOV", self.t, res, (g.value(self.t),)), Instr("RET"))
            sub_items = g.items[start:]
            del g.items[start:]
            sub_bodies.append([Label(f"S{k}")] + sub_items)
            g.defined = saved_defined
            g.subs.append((f"S{k}", res.name))
        if shared:
            v = g.value(self.t)
            t_lin = g.define(g.new(I64))
            g.frozen.add(t_lin.name)
            g.emit(Instr("MAD", I64, t_lin, (Special("tid.y"), Special("ntid.x"), Special("tid.x"))),
                   Instr("BarSync"),
                   Instr("STS", self.t, srcs=(v,), addr=Addr("sh", t_lin)),
                   Instr("BarSync"))
            own = d(st.booleans())
            got = g.target(self.t)
            g.emit(Instr("LDS", self.t, got, addr=Addr("sh", t_lin if own else None), checked=d(st.booleans())))
            g.define(got)
        g.block(0)
        out_buf = "t" if no < n_stages - 1 else "y"
        g.emit(Instr("STG", self.t, srcs=(g.value(self.t),), addr=Addr(out_buf, idx)))
        inits = ()
        if self.reduce and no == n_stages - 1:
            for _ in range(self.contributions):
                g.emit(Instr(self.reduce, self.t, srcs=(g.value(self.t),), addr=Addr("r")))
            inits = (Init("r", 0, _typed(REDUCE_IDENTITY[self.reduce](self.t), self.t)),)
        g.emit(Instr("EXIT"))
        for sub in sub_bodies:
            g.items.extend(sub)
        regs = tuple(RegDecl(n, t) for n, t in g.regs.items())
        pools = (MemDecl(self.pool[0], self.t, self.pool[1]),) if self.pool else ()
        if large:
            block = self.large_block(len(regs) if shared else 0, self.pool[1] if self.pool else 0, shared)
        sh = (MemDecl("sh", self.t, math.prod(block)),) if shared else ()
        stage = Stage(f"stage{no}", self.shape, block, regs, sh, pools, inits, tuple(g.items))
        return self.fill_scratch(stage) if large else stage

    def large_block(self, registers: int, pool: int, shared: bool) -> tuple[int, ...]:
        """The largest block of a drawn size whose lanes hold `registers` (those a barrier
        keeps), a pool of `pool` elements and, with `shared`, a slot of `sh` each."""
        sizes = [(32, 32), (64, 8), (16, 16), (8, 4), (2, 2)] if self.two_d else \
            [(1024,), (512,), (256,), (32,)]
        per_lane = REGISTER_BYTES * registers + self.t.itemsize * (pool + shared)
        fitting = [b for b in sizes if math.prod(b) * per_lane <= MAX_BLOCK_SCRATCH_BYTES // 2] or [sizes[-1]]
        return self.draw(st.sampled_from(fitting))

    def fill_scratch(self, stage: Stage) -> Stage:
        """`stage` with its pool grown and more shared arrays and pools declared, up to or
        near the limits on its shared bytes and its block scratch (docs/isa.md, "Block
        scratch"): large pools x large blocks x many shared arrays."""
        d = self.draw
        shared = list(stage.shared)
        for k in range(d(st.integers(0, 6))):
            t = d(st.sampled_from(list(DType)))
            room = (MAX_SHARED_BYTES - block_scratch(attrs.evolve(stage, shared=tuple(shared))).shared) // t.itemsize
            if room < 1:
                break
            size = d(st.sampled_from([room, room // 2 or 1]))
            shared.append(MemDecl(f"pad_sh{k}", t, min(MAX_SHARED_ELEMENTS, size)))
        stage = attrs.evolve(stage, shared=tuple(shared))
        pools = list(stage.pools)
        for k in range(-1 if pools else 0, d(st.integers(0, 40))):
            t = pools[0].dtype if k < 0 else d(st.sampled_from(list(DType)))
            scratch = block_scratch(attrs.evolve(stage, pools=tuple(pools)))
            room = (MAX_BLOCK_SCRATCH_BYTES - scratch.total) // (scratch.lanes * t.itemsize)
            if k < 0:  # grow the pool the body uses
                pools[0] = attrs.evolve(pools[0], size=min(MAX_POOL_ELEMENTS, pools[0].size + room))
            elif room >= 1:
                size = d(st.sampled_from([room, room // 3 or 1]))
                pools.append(MemDecl(f"pad_pl{k}", t, min(MAX_POOL_ELEMENTS, size)))
        return attrs.evolve(stage, pools=tuple(pools))


def _typed(v: int | float, t: DType) -> bool | int | float:
    return float(v) if t.is_float else int(v)


@st.composite
def programs(draw: Callable, max_stages: int = 2, max_instructions: int = 40) -> Program:
    """A random verified program (see the module docstring for what it needs to run).
    `max_instructions` bounds each stage's body roughly (blocks stop drawing beyond it)."""
    pg = _ProgGen(draw)
    n = draw(st.integers(1, max_stages))
    stages = tuple(pg.stage(k, n, max_instructions) for k in range(n))
    temps = (BufferParam("t", pg.t, pg.shape, "temp"),) if n > 1 else ()
    program = Program(draw(st.sampled_from(["prog", "kernel_1", "k"])), pg.params(), temps, pg.symbols, stages)
    return draw(with_sites(program)) if draw(st.integers(0, 2)) == 0 else program


SITE_TEXTS = ("y[i] = x[idx[i]]", 'h[b[i]] += w["q"]', "é ☃ \\ \t", "")


@st.composite
def with_sites(draw: Callable, p: Program) -> Program:
    """`p` with a table of source sites, named by some of its checked instructions
    (docs/isa.md, "Sites"): a site changes nothing the program does."""
    sites = tuple(Site(draw(st.sampled_from(("kernels/g.toml", "sources/a b.yaml", "<string>"))),
                       draw(st.integers(1, 10**6)), col := draw(st.integers(1, 200)), col + draw(st.integers(1, 40)),
                       draw(st.sampled_from(SITE_TEXTS)))
                  for _ in range(draw(st.integers(1, 3))))

    def mark(it):
        if isinstance(it, Instr) and it.checked and draw(st.booleans()):
            return attrs.evolve(it, site=draw(st.integers(0, len(sites) - 1)))
        return it
    stages = tuple(attrs.evolve(s, body=tuple(mark(it) for it in s.body)) for s in p.stages)
    return attrs.evolve(p, stages=stages, sites=sites)
