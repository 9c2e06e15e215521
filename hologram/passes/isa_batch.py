"""Loop dimensions in the program: one launch runs a kernel over a batch of items.

A kernel declared on `f32[n]` and called with a `(4, 7, n)` array maps over the leading
(loop) dimensions, as a numpy gufunc does (hologram.call.loops decides which arguments
carry which loop dimensions). `batch_program` rewrites the kernel's verified program
into one that computes every item of the batch in the same launch, so any backend runs
it as it runs any program, and a bundle's kernel is batched without the compiler:

- a symbol `batch` (a fresh name) counts the items; every output, temporary and input
  with the call's whole loop shape gets a leading dimension of `batch` (item `b` is its
  `b`-th block), an input with a broadcast part of the loop shape one of its own item
  count plus an i64 table (`<name>_items`, filled by the caller) giving its item for each
  `b`; other inputs are shared by every item. A scalar parameter with loop dimensions
  becomes a buffer of them, read once per lane;
- each stage gets the batch as one more launch axis (block size 1, so no block spans two
  items); a stage already on three axes folds it into `z` (`z' = z + Dz*b`), its `z`
  specials rewritten to the item's own;
- every global access adds its item's base offset, `item * size`: an access the verifier
  proved in bounds stays unchecked when the proof carries over, and a checked one is
  checked against its own item's extent first (an index past an item's end raises, it
  never reads the next item);
- an `.init` of a batched buffer becomes a stage of its own that seeds every item.

The result is verified like any program (`batched`), and cached by the kernel per
pattern of loop dimensions.
"""

from __future__ import annotations

from typing import Iterable

import attrs

from hologram.core.dims import DimAlgebra, derived_closure
from hologram.core.errors import MISSED_ITEM, ArgumentError, VerifyError
from hologram.core.names import fresh_name
from hologram.core.types import Affine, DType
from hologram.isa.builder import StageBuilder
from hologram.isa.program import (AXES, Addr, BufferParam, Imm, Instr, Label, Operand, Program, RegDecl,
                                  ScalarParam, Special, Stage, Sym, lead_lane_axes)
from hologram.verify.verifier import verify

I64 = DType.I64
GLOBAL_ACCESS = frozenset({"LDG", "STG", "ReduceAdd", "ReduceMul", "ReduceMin", "ReduceMax", "ResAccum"})
BLOCK_SPECIALS = ("tid", "ntid", "ctaid", "nctaid")  # what a block of more than one lane makes visible
MISSING_AXIS = {"tid": 0, "ctaid": 0, "gid": 0, "ntid": 1, "nctaid": 1, "gdim": 1}


@attrs.frozen
class Batched:
    """A batched program and what its caller must bind: `count` is the symbol of the
    number of items; `items[name]` the symbol of a broadcast input's own item count and
    `tables[name]` the i64 buffer of its item per batch index."""

    program: Program
    count: str
    items: tuple[tuple[str, str], ...] = ()
    tables: tuple[tuple[str, str], ...] = ()


def batched(p: Program, full: Iterable[str], tabled: Iterable[str] = ()) -> Batched:
    """`p` over a batch (module docstring), verified. `full` names the inputs (buffers or
    scalars) with the call's whole loop shape, `tabled` those with a broadcast part of
    it; outputs always have the whole loop shape. The accesses the verifier proved stay
    unchecked when it proves them again; otherwise they are checked, as a backend may
    then check them at no risk (they are in bounds by the original proof)."""
    try:
        return verify_batched(_Batcher(p, frozenset(full), frozenset(tabled), recheck=False).run())
    except VerifyError:
        return verify_batched(_Batcher(p, frozenset(full), frozenset(tabled), recheck=True).run())


def verify_batched(b: Batched) -> Batched:
    verify(b.program)
    return b


class _Batcher:
    def __init__(self, p: Program, full: frozenset[str], tabled: frozenset[str], recheck: bool):
        self.p, self.recheck = p, recheck
        taken = {*p.symbols, *(x.name for x in (*p.params, *p.temps)), *(s.name for s in p.stages)}
        self.fresh_names = taken
        self.count = self.fresh("batch")
        outputs = {b.name for b in p.params if isinstance(b, BufferParam) and b.role != "in"}
        self.full = (full | outputs | {t.name for t in p.temps}) - tabled
        self.tabled = tabled
        self.items = {name: self.fresh(f"{self.count}_{name}") for name in sorted(tabled)}
        self.tables = {name: self.fresh(f"{name}_items") for name in sorted(tabled)}
        self.sizes = {b.name: b.shape for b in (*p.params, *p.temps) if isinstance(b, BufferParam)}
        self.scalars = {s.name: s.dtype for s in p.params if isinstance(s, ScalarParam) and s.name in full | tabled}
        self.classes: dict[DType, str] = {}  # ResAccum's class check, per dtype (a 96-element scratch)

    def fresh(self, base: str) -> str:
        return fresh_name(base, self.fresh_names)

    def leading(self, name: str) -> Affine:
        return Affine.of(self.items[name] if name in self.tabled else self.count)

    def run(self) -> Batched:
        p = self.p
        params: list[BufferParam | ScalarParam] = []
        for prm in p.params:
            if isinstance(prm, ScalarParam):
                params.append(BufferParam(prm.name, prm.dtype, (self.leading(prm.name),), "in")
                              if prm.name in self.scalars else prm)
            elif prm.name in self.full or prm.name in self.tabled:
                params.append(attrs.evolve(prm, shape=(self.leading(prm.name), *prm.shape)))
            else:
                params.append(prm)
        params += [BufferParam(self.tables[n], I64, (Affine.of(self.count),), "in") for n in sorted(self.tabled)]
        stages: list[Stage] = []
        for st in p.stages:
            stages += self.stage(st)
        temps = [attrs.evolve(t, shape=(Affine.of(self.count), *t.shape)) for t in p.temps]
        temps += [BufferParam(name, dtype, (Affine.of(96),), "temp") for dtype, name in self.classes.items()]
        base = (*p.symbols, self.count, *(self.items[n] for n in sorted(self.tabled)))
        used = [s for st in stages for d in st.domain for s in d.symbols]
        symbols = base + tuple(s for s in derived_closure(used) if s not in base)
        program = attrs.evolve(p, params=tuple(params), temps=tuple(temps), symbols=symbols, stages=tuple(stages))
        return Batched(program, self.count, tuple(self.items.items()), tuple(self.tables.items()))

    # ------------------------------------------------------------------ one stage
    def stage(self, st: Stage) -> list[Stage]:
        out = [self.init_stage(st)] if any(self.batched(i.buffer) for i in st.inits) else []
        folded = len(st.domain) == 3
        if folded and st.block[2] != 1 and _cooperates(st):
            raise ArgumentError(f"program {self.p.name!r}: stage {st.name!r} has blocks of {st.block[2]} lanes on "
                                "its third axis that cooperate, so it cannot take loop dimensions",
                                hint="call the kernel once per item")
        sb = StageBuilder(st.name, st.domain, st.block)
        sb.regs.update({r.name: r.dtype for r in st.regs})
        sb.labels.update(it.name for it in st.body if isinstance(it, Label))
        body = list(st.body)
        lead = 2 * len(lead_lane_axes(st))  # the lead-lane tests stay first, where backends recognise them
        head = body[:lead] if all(isinstance(i, Instr) for i in body[:lead]) else []
        sb.body.extend(head)
        remap = self.prologue(sb, st, folded)
        bases = {name: self.base(sb, name, remap) for name in self.accessed(st)}
        loaded = {name: sb.ldg(dtype, name, remap["item:" + name], checked=True, hint="bt_s")
                  for name, dtype in self.scalars.items() if self.reads_scalar(st, name)}
        for it in body[len(head):]:
            if isinstance(it, Label):
                sb.body.append(it)
                continue
            it = attrs.evolve(it, srcs=tuple(self.operand(o, remap, loaded) for o in it.srcs))
            if it.op in GLOBAL_ACCESS and it.addr is not None and self.batched(it.addr.buffer):
                it = self.access(sb, it, bases[it.addr.buffer])
            elif self.recheck and it.op in GLOBAL_ACCESS:  # a shared input read at a rewritten z
                it = attrs.evolve(it, checked=True)
            sb.body.append(it)
        stage = sb.build()
        regs = tuple(RegDecl(n, t) for n, t in sb.regs.items())
        if folded:
            dz = st.domain[2]
            domain, block = (*st.domain[:2], DimAlgebra().mul(dz, Affine.of(self.count))), (*st.block[:2], 1)
        else:
            domain, block = (*st.domain, Affine.of(self.count)), (*st.block, 1)
        inits = tuple(i for i in st.inits if not self.batched(i.buffer))
        return out + [attrs.evolve(st, domain=domain, block=block, regs=regs, inits=inits, body=stage.body)]

    def prologue(self, sb: StageBuilder, st: Stage, folded: bool) -> dict[str, Operand]:
        """The lane's batch index and, for a folded stage, its own `z`; returns the operand
        each rewritten special and each item stands for."""
        remap: dict[str, Operand] = {}
        if folded:
            dz = self.affine(sb, st.domain[2], "bt_dz")
            b = sb.alu("DIV", I64, Special("gid.z"), dz, hint="bt_b")
            z = sb.alu("REM", I64, Special("gid.z"), dz, hint="bt_z")  # REM: the verifier bounds it by dz
            remap.update({"gid.z": z, "ctaid.z": z, "gdim.z": dz, "nctaid.z": dz})
        else:
            axis = AXES[len(st.domain)]
            b = sb.mov(I64, Special(f"gid.{axis}"), hint="bt_b")
            remap.update({f"{k}.{axis}": Imm(v) for k, v in MISSING_AXIS.items()})
        remap["batch"] = b
        for name in sorted({*self.tabled, *self.scalars}):
            if name in self.tabled:
                remap["item:" + name] = sb.ldg(I64, self.tables[name], b, checked=True, hint="bt_item")
            else:
                remap["item:" + name] = b
        return remap

    def base(self, sb: StageBuilder, name: str, remap: dict[str, Operand]) -> tuple[Operand, Operand]:
        """(the item's base offset into `name`, one item's size)."""
        size = self.size(sb, self.sizes[name])
        item = remap.get("item:" + name, remap["batch"])
        return (item if size == Imm(1) else sb.alu("MUL", I64, item, size, hint="bt_base")), size

    def size(self, sb: StageBuilder, shape: tuple[Affine, ...]) -> Operand:
        acc: Operand = Imm(1)
        for d in shape:
            v = self.affine(sb, d, "bt_dim")
            acc = v if acc == Imm(1) else sb.alu("MUL", I64, acc, v, hint="bt_size")
        return acc

    @staticmethod
    def affine(sb: StageBuilder, a: Affine, hint: str) -> Operand:
        """`a` (affine in the symbols) as an operand: an immediate, a `$` symbol or a register."""
        if a.is_const:
            return Imm(a.const)
        acc: Operand | None = None
        for name, c in a.terms:
            term: Operand = Sym(name) if c == 1 else sb.alu("MUL", I64, Sym(name), Imm(c), hint=hint)
            acc = term if acc is None else sb.alu("ADD", I64, acc, term, hint=hint)
        if a.const:
            acc = sb.alu("ADD", I64, acc, Imm(a.const), hint=hint)
        assert acc is not None
        return acc

    def access(self, sb: StageBuilder, it: Instr, base_size: tuple[Operand, Operand]) -> Instr:
        """`it` with its address moved into its item's block."""
        base, size = base_size
        addr = it.addr
        assert addr is not None
        if it.op == "ResAccum":  # keep the class check on a scratch bin, add into the item's bins
            scratch = self.classes.setdefault(it.dtype, self.fresh("batch_classes"))
            sb.emit("ResAccum", it.dtype, Imm(0), addr=Addr(scratch, addr.index, 0), checked=True)
            it = attrs.evolve(it, op="ReduceAdd", checked=True)
        if not it.checked and not self.recheck:
            index = base if addr.index is None else sb.alu("ADD", I64, addr.index, base, hint="bt_i")
            return attrs.evolve(it, addr=Addr(addr.buffer, index, addr.offset))
        if not it.checked:  # proven in bounds for its item: the whole buffer's check never fails
            index = base if addr.index is None else sb.alu("ADD", I64, addr.index, base, hint="bt_i")
            return attrs.evolve(it, addr=Addr(addr.buffer, index, addr.offset), checked=True)
        flat: Operand = sb.mov(I64, Imm(addr.offset), hint="bt_i") if addr.index is None else \
            sb.alu("ADD", I64, addr.index, Imm(addr.offset), hint="bt_i") if addr.offset else addr.index
        inside = sb.alu("AND", DType.BOOL, sb.setp("ge", I64, flat, Imm(0)), sb.setp("lt", I64, flat, size))
        index = sb.sel(I64, inside, sb.alu("ADD", I64, flat, base, hint="bt_i"), Imm(MISSED_ITEM))
        return attrs.evolve(it, addr=Addr(addr.buffer, index, 0), checked=True)

    def init_stage(self, st: Stage) -> Stage:
        """The batched `.init`s of `st`, as a stage seeding every item before `st` runs."""
        sb = StageBuilder(self.fresh(f"{st.name}_init"), (Affine.of(self.count),))
        b = sb.mov(I64, Special("gid.x"), hint="bt_b")
        for init in st.inits:
            if not self.batched(init.buffer):
                continue
            dtype = self.dtype(init.buffer)
            size = self.size(sb, self.sizes[init.buffer])
            base = b if size == Imm(1) else sb.alu("MUL", I64, b, size, hint="bt_base")
            sb.stg(dtype, init.buffer, Imm(init.value), base, init.offset, checked=True)
        return sb.build()

    # ------------------------------------------------------------------ reading the program
    def batched(self, buffer: str) -> bool:
        return buffer in self.full or buffer in self.tabled

    def dtype(self, buffer: str) -> DType:
        return next(b.dtype for b in (*self.p.params, *self.p.temps) if b.name == buffer)

    def accessed(self, st: Stage) -> list[str]:
        found = {it.addr.buffer for it in st.body if isinstance(it, Instr) and it.op in GLOBAL_ACCESS
                 and it.addr is not None}
        return sorted(b for b in found if self.batched(b))

    @staticmethod
    def reads_scalar(st: Stage, name: str) -> bool:
        return any(isinstance(it, Instr) and Sym(name) in it.srcs for it in st.body)

    @staticmethod
    def operand(o: Operand, remap: dict[str, Operand], loaded: dict[str, Operand]) -> Operand:
        if isinstance(o, Special) and o.name in remap:
            return remap[o.name]
        if isinstance(o, Sym) and o.name in loaded:
            return loaded[o.name]
        return o


def _cooperates(st: Stage) -> bool:
    """Whether lanes of one block see each other: shared memory, barriers, or reading the
    block's own specials on the third axis."""
    for it in st.body:
        if not isinstance(it, Instr):
            continue
        if it.op in ("LDS", "STS", "BarSync"):
            return True
        if any(isinstance(o, Special) and o.name.split(".")[0] in BLOCK_SPECIALS and o.name.endswith(".z")
               for o in it.srcs):
            return True
    return bool(st.shared)
