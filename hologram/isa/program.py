"""The Atlas ISA: programs of SIMT stages over a launch domain.

A `Program` has a signature (buffer and scalar parameters with dtypes and symbolic
shapes), internal temporaries, the shape symbols bound at launch, and an ordered list of
`Stage`s with an implicit global barrier between them. A stage is a launch domain of
1-3 symbolic dimensions tiled into blocks, and a body every lane executes.

Values here are frozen attrs classes; which opcodes exist, and the operands each takes,
is `hologram.isa.opcodes`. The semantics of every opcode are in docs/isa.md.
"""

from __future__ import annotations

import struct
from typing import Union

import attrs
import numpy as np

from hologram.core.errors import Site
from hologram.core.types import Affine, DType, Shape, python_int, python_ints, python_scalar

ISA_VERSION = 1

AXES = ("x", "y", "z")
SPECIALS = tuple(f"{k}.{a}" for k in ("tid", "ntid", "ctaid", "nctaid", "gid", "gdim") for a in AXES)
COMPARE_MODS = ("eq", "ne", "lt", "le", "gt", "ge")
# `ADD.reassoc.f64`: a float ADD/MIN/MAX whose tree of `.reassoc` operations may be
# evaluated in any association (docs/isa.md, "Reassociable operations")
REASSOC = "reassoc"


# ---------------------------------------------------------------------------- operands
@attrs.frozen
class Reg:
    """A virtual register declared in the stage (`.reg %name dtype`). Printed `%name`."""

    name: str

    def __str__(self) -> str:
        return f"%{self.name}"


@attrs.frozen
class Special:
    """A read-only i64 special register: `%gid.x`, `%tid.y`, `%ntid.x`, `%ctaid.z`,
    `%nctaid.x`, `%gdim.x` (the domain extent on that axis)."""

    name: str

    def __attrs_post_init__(self) -> None:
        if self.name not in SPECIALS:
            raise ValueError(f"unknown special register %{self.name}")

    def __str__(self) -> str:
        return f"%{self.name}"


def imm_key(value: bool | int | float) -> tuple:
    """Identity of an immediate value: its kind and exact bits, so `1`, `1.0` and `True`
    are different immediates, `0.0` and `-0.0` differ, and a NaN equals the same NaN.
    Two programs compare equal exactly when they encode to the same bytes."""
    if isinstance(value, (bool, np.bool_)):
        return ("bool", bool(value))
    if isinstance(value, (int, np.integer)):
        return ("int", int(value))
    if isinstance(value, (float, np.floating)):
        return ("float", struct.unpack("<Q", struct.pack("<d", float(value)))[0])
    return ("other", value)


@attrs.frozen
class Imm:
    """An immediate, typed by the instruction that uses it."""

    value: bool | int | float = attrs.field(eq=imm_key, converter=python_scalar)

    def __str__(self) -> str:
        return repr(self.value)


@attrs.frozen
class Sym:
    """A launch-time constant: a shape symbol (i64) or a scalar parameter. Printed `$name`."""

    name: str

    def __str__(self) -> str:
        return f"${self.name}"


Operand = Union[Reg, Special, Imm, Sym]


@attrs.frozen
class Addr:
    """`[buffer + %index + offset]`: element (not byte) address into a global buffer
    (param or temp), a block-shared array, or the lane's pool. `index` may be None."""

    buffer: str
    index: Reg | None = None
    offset: int = attrs.field(default=0, converter=python_int)

    def __str__(self) -> str:
        text = self.buffer
        if self.index is not None:
            text += f" + {self.index}"
        if self.offset:
            text += f" {'+' if self.offset > 0 else '-'} {abs(self.offset)}"
        return f"[{text}]"


# ------------------------------------------------------------------------ instructions
@attrs.frozen
class Pred:
    """A branch guard: `@%p` (negate=False) or `@!%p`."""

    reg: Reg
    negate: bool = False

    def __str__(self) -> str:
        return f"@{'!' if self.negate else ''}{self.reg}"


@attrs.frozen
class Label:
    """A branch/call target; sits in a stage body between instructions."""

    name: str

    def __str__(self) -> str:
        return f"{self.name}:"


@attrs.frozen
class Instr:
    """One instruction. Which fields are used is fixed by `OPCODES[op].form`:

    dtype   operation type (`ADD.f32`); for CVT the destination type
    dtype2  CVT only: the source type (`CVT.f32.i32`)
    mod     SET: the comparison (`SET.lt.f32`); float ADD/MIN/MAX: optionally
            `reassoc` (`ADD.reassoc.f64`: the backend may reassociate it)
    dst     destination register
    srcs    source operands
    addr    memory operand (loads, stores, reductions, ResAccum)
    target  label (BRA, CALL, LOOP); pool name (PoolAlloc)
    count   PoolAlloc only: number of elements to allocate
    pred    BRA only: optional guard predicate
    checked memory access is bounds-checked at run time (`.chk`); an unchecked access
            must be proven in bounds by the verifier
    site    index into `Program.sites`: the document line the instruction's check comes
            from, which a failed check names
    """

    op: str
    dtype: DType | None = None
    dst: Reg | None = None
    srcs: tuple[Operand, ...] = ()
    addr: Addr | None = None
    target: str | None = None
    mod: str | None = None
    dtype2: DType | None = None
    count: int | None = attrs.field(default=None, converter=python_int)
    pred: Pred | None = None
    checked: bool = False
    site: int | None = attrs.field(default=None, converter=python_int)


Item = Union[Instr, Label]


# ---------------------------------------------------------------------- declarations
@attrs.frozen
class RegDecl:
    name: str
    dtype: DType


@attrs.frozen
class MemDecl:
    """Block-shared array (`.shared`) or per-lane pool (`.pool`) of `size` elements."""

    name: str
    dtype: DType
    size: int = attrs.field(converter=python_int)


@attrs.frozen
class Init:
    """`buffer[offset] = value`, done once per launch before any lane of the stage runs
    (used to seed reduction outputs with the identity)."""

    buffer: str
    offset: int = attrs.field(converter=python_int)
    value: bool | int | float = attrs.field(eq=imm_key, converter=python_scalar)


@attrs.frozen
class BufferParam:
    """A global buffer: row-major, C-contiguous, `shape` symbolic. role: 'in', 'out',
    'inout' (for params) or 'temp' (program-internal, allocated per launch)."""

    name: str
    dtype: DType
    shape: Shape
    role: str


@attrs.frozen
class ScalarParam:
    name: str
    dtype: DType


@attrs.frozen
class Stage:
    name: str
    domain: tuple[Affine, ...]
    block: tuple[int, ...] = attrs.field(converter=python_ints)  # numpy ints would wrap in arithmetic
    regs: tuple[RegDecl, ...] = ()
    shared: tuple[MemDecl, ...] = ()
    pools: tuple[MemDecl, ...] = ()
    inits: tuple[Init, ...] = ()
    body: tuple[Item, ...] = ()

    def reg_types(self) -> dict[str, DType]:
        return {r.name: r.dtype for r in self.regs}


def lead_lane_axes(stage: Stage) -> tuple[int, ...]:
    """The axes along which every lane but the first of each block does nothing: the
    stage opens with one or more `SET.ne %p, %tid.<axis>, 0 ; @%p BRA L` pairs, all to
    one L at an EXIT (or the end). One lane per block does the block's work (the chunks
    of lower/online.py on x, a matrix tile of lower/contract.py on x and y). A backend
    may skip the other lanes; stats count one lane per block along those axes."""
    body = [it for it in stage.body if not isinstance(it, Label)]
    axes: list[int] = []
    target = None
    for test, bra in zip(body[0::2], body[1::2]):
        if not (test.op == "SET" and test.mod == "ne" and test.dst is not None and len(test.srcs) == 2
                and isinstance(test.srcs[0], Special) and test.srcs[0].name.startswith("tid.")
                and test.srcs[1] == Imm(0)):
            break
        if not (bra.op == "BRA" and bra.pred is not None and not bra.pred.negate and bra.pred.reg == test.dst
                and bra.target == (target or bra.target)):
            break
        axis = AXES.index(test.srcs[0].name[4:])
        if axis >= len(stage.domain) or axis in axes:
            break
        target = bra.target
        axes.append(axis)
    if not axes:
        return ()
    at = [k for k, it in enumerate(stage.body) if isinstance(it, Label) and it.name == target]
    after = [it for it in stage.body[at[0]:] if isinstance(it, Instr)] if at else None
    if after is None or not (after == [] or after[0].op == "EXIT" and after[0].pred is None):
        return ()
    return tuple(axes)


@attrs.frozen
class Program:
    """A whole program. `reassociate` (`.reassociate` in the text) is the kernel's licence
    to reorder float arithmetic: a backend may evaluate float ADD/SUB/MUL in another
    association and resolve a MIN/MAX tie of -0.0 and +0.0 either way (docs/isa.md,
    "Program flags"). A licence, not an obligation: the interpreter ignores it. `sites`
    are the source locations instructions point at (`Instr.site`), for run-time errors."""

    name: str
    params: tuple[BufferParam | ScalarParam, ...]
    temps: tuple[BufferParam, ...] = ()
    symbols: tuple[str, ...] = ()
    stages: tuple[Stage, ...] = ()
    isa_version: int = attrs.field(default=ISA_VERSION, converter=python_int)
    reassociate: bool = False
    sites: tuple[Site, ...] = ()

    def buffers(self) -> dict[str, BufferParam]:
        out = {p.name: p for p in self.params if isinstance(p, BufferParam)}
        out.update({t.name: t for t in self.temps})
        return out

    def scalars(self) -> dict[str, ScalarParam]:
        return {p.name: p for p in self.params if isinstance(p, ScalarParam)}


def without_sites(p: Program) -> Program:
    """`p` without its source sites (the site table emptied, every instruction's `site`
    dropped): what the program computes, whatever file and line it was compiled from.
    `program_hash(without_sites(p))` is the same for a kernel compiled from a Python
    function and from the document `hologram translate` wrote for it; caches key on the
    program itself, since the sites are part of what an ExecutionError says."""
    if not p.sites and not any(isinstance(it, Instr) and it.site is not None for s in p.stages for it in s.body):
        return p
    return attrs.evolve(p, sites=(), stages=tuple(
        attrs.evolve(s, body=tuple(attrs.evolve(it, site=None) if isinstance(it, Instr) and it.site is not None
                                   else it for it in s.body)) for s in p.stages))
