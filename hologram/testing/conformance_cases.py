"""The programs the conformance kit runs (hologram.testing.conformance), built from the op
table and from a few hand-written stages.

- instructions: every value-computing opcode of `OPCODES` (forms `ds`, `dss`, `dsss`: the
  arithmetic, logic, comparisons, selects, transcendentals, Atlas operations) at every
  dtype its suffix admits, `SET` at every comparison, `MOV_IMM`, and `CVT` at every
  (to, from) pair: lane k loads its operands from edge values (and, with `examples`,
  random bit patterns), computes, stores. The instructions of one dtype share a program,
  one stage and one output buffer each, so a backend compiles a dozen programs, not
  hundreds; a new opcode of one of those forms is covered without an edit here.
- memory, control, barriers, reductions, pools and the Atlas phase: small programs
  written out below (`HAND_WRITTEN`), per dtype where the dtype matters.
- stage shapes: domains of rank 1 to 3, blocks of one lane to full, partial blocks and
  an empty domain, every lane storing its specials.

Only what a backend declares is built: an instruction its `Capabilities` leave out is a
`NotDeclared` item here, never a program.
"""

from __future__ import annotations

import itertools
from typing import Callable, Iterable, Mapping

import attrs
import numpy as np

from hologram.backend.capabilities import Capabilities
from hologram.core.types import Affine, DType
from hologram.isa.asm import parse_program
from hologram.isa.builder import ProgramBuilder, gid, sym
from hologram.isa.opcodes import OPCODES
from hologram.isa.program import COMPARE_MODS, BufferParam, Imm, Instr, Program, Special, Sym
from hologram.testing.values import edge_values

__all__ = ["Case", "NotDeclared", "AREAS", "value_ops", "instruction_cases", "hand_written_cases",
           "stage_shape_cases", "HAND_WRITTEN"]

AREAS = ("instructions", "conversions", "memory", "control", "barriers", "reductions", "pools", "stage shapes",
         "generated kernels", "generated programs")
MAX_PAIRS = 16  # edge values per operand of a binary operation (16**2 lanes)
MAX_TRIPLES = 8  # per operand of a ternary one (8**3 lanes)


@attrs.frozen(eq=False)
class Case:
    """One program and a launch of it. `items` maps each item the case checks (`ADD.f32`)
    to the output buffers that show it; `exact` compares those bitwise whatever the
    program's precision analysis allows (data chosen so that order cannot matter)."""

    area: str
    program: Program
    buffers: Mapping[str, np.ndarray]
    items: Mapping[str, tuple[str, ...]]
    symbols: Mapping[str, int] = attrs.field(factory=dict)
    scalars: Mapping[str, np.generic] = attrs.field(factory=dict)
    exact: bool = False


@attrs.frozen
class NotDeclared:
    """An item the backend's capabilities leave out, and why."""

    area: str
    item: str
    reason: str


# ------------------------------------------------------------------------------- values
def _values(t: DType, rng: np.random.Generator | None, extra: int, limit: int | None = None) -> np.ndarray:
    """The edge values of `t` (at most `limit`, spread over the list), then `extra`
    random bit patterns (NaNs, subnormals and all)."""
    edges = np.array(edge_values(t), t.np)
    if limit is not None and len(edges) > limit:
        edges = edges[np.linspace(0, len(edges) - 1, limit).astype(int)]
    if not extra or rng is None:
        return edges
    if t.is_bool:
        random = rng.integers(0, 2, extra).astype(bool)
    else:
        random = np.frombuffer(rng.bytes(extra * t.np.itemsize), t.np).copy()
    return np.concatenate([edges, random])


def _columns(types: tuple[DType, ...], rng: np.random.Generator | None, extra: int) -> list[np.ndarray]:
    """Operand columns: every combination of the operands' edge values (fewer per operand
    the more operands), then `extra` random rows."""
    limit = {1: None, 2: MAX_PAIRS, 3: MAX_TRIPLES}[len(types)]
    edges = [_values(t, None, 0, limit) for t in types]
    rows = list(itertools.product(*(range(len(e)) for e in edges)))
    columns = [np.array([e[r[k]] for r in rows], t.np) for k, (e, t) in enumerate(zip(edges, types))]
    if extra and rng is not None:
        columns = [np.concatenate([c, _values(t, rng, extra)[len(_values(t, None, 0)):]])
                   for c, t in zip(columns, types)]
    return columns


# ------------------------------------------------------------------------ instructions
@attrs.frozen
class ValueOp:
    """One value-computing instruction: `item` (`SET.lt.f32`), the opcode, its suffix
    dtype, its modifier, its operand types and its result type."""

    item: str
    op: str
    dtype: DType
    mod: str | None
    sources: tuple[DType, ...]
    result: DType


def value_ops() -> tuple[ValueOp, ...]:
    """Every value-computing instruction of the op table, at every dtype it admits,
    its operands typed by the table (`OpSpec.source_type`, `OpSpec.result_type`)."""
    out = []
    for op, spec in OPCODES.items():
        if not spec.pure or spec.types == "none" or op in ("CVT", "MOV_IMM"):
            continue
        if not (len(spec.form) > 1 and set(spec.form[1:]) == {"s"}):
            continue
        for t in (d for d in DType if spec.admits(d)):
            sources = tuple(spec.source_type(k, t) for k in range(spec.arity))
            for mod in (COMPARE_MODS if spec.modifier == "compare" else (None,)):
                item = f"{op}.{mod}.{t}" if mod else f"{op}.{t}"
                out.append(ValueOp(item, op, t, mod, sources, spec.result_type(t)))
    return tuple(out)


def instruction_cases(caps: Capabilities, rng: np.random.Generator, extra: int
                      ) -> tuple[list[Case], list[NotDeclared]]:
    """The value instructions grouped by dtype (one program each), `MOV_IMM` per dtype,
    and `CVT` grouped by target dtype; with what the capabilities leave out."""
    cases: list[Case] = []
    missing: list[NotDeclared] = []
    by_dtype: dict[DType, list[ValueOp]] = {}
    for v in value_ops():
        if caps.covers(v.op, v.dtype):
            by_dtype.setdefault(v.dtype, []).append(v)
        else:
            missing.append(NotDeclared("instructions", v.item, f"{v.op}.{v.dtype} is not declared"))
    for t, ops in by_dtype.items():
        cases.append(_value_case(f"conformance_{t}", ops, rng, extra))
    for t in DType:
        if caps.covers("MOV_IMM", t):
            cases.append(_immediate_case(t))
        else:
            missing.append(NotDeclared("instructions", f"MOV_IMM.{t}", f"MOV_IMM.{t} is not declared"))
    for to in DType:
        pairs = [frm for frm in DType if caps.covers_conversion(to, frm)]
        missing += [NotDeclared("conversions", f"CVT.{to}.{frm}", f"CVT.{to}.{frm} is not declared")
                    for frm in DType if frm not in pairs]
        if pairs:
            cases.append(_conversion_case(to, pairs, rng, extra))
    return cases, missing


# A stage binds its instructions' outputs and operands: few enough for a GPU adapter,
# which binds a bounded number of storage buffers per shader (lavapipe 32; WebGPU's
# default 8, which the wgpu backend raises to the adapter's own limit).
STAGE_INSTRUCTIONS = 16


def _value_case(name: str, ops: Iterable[ValueOp], rng: np.random.Generator, extra: int) -> Case:
    """One stage per operand signature (unary, binary, ternary, SEL's) and up to
    STAGE_INSTRUCTIONS instructions: each lane loads one row of operands and computes
    every instruction of the stage on it, storing each result to the instruction's own
    buffer (what a failure is blamed on)."""
    by_sources: dict[tuple[DType, ...], list[ValueOp]] = {}
    for v in ops:
        by_sources.setdefault(v.sources, []).append(v)
    groups = [(sources, members[k:k + STAGE_INSTRUCTIONS]) for sources, members in by_sources.items()
              for k in range(0, len(members), STAGE_INSTRUCTIONS)]
    pb = ProgramBuilder(name)
    buffers: dict[str, np.ndarray] = {}
    items: dict[str, tuple[str, ...]] = {}
    for g, (sources, members) in enumerate(groups):
        columns = _columns(sources, rng, extra)
        n = len(columns[0])
        s = pb.stage(f"g{g}", (n,))
        i = s.mov(DType.I64, gid("x"), hint="i")
        regs = []
        for j, (t, column) in enumerate(zip(sources, columns)):
            pb.buffer(f"g{g}_a{j}", t, (n,), "in")
            buffers[f"g{g}_a{j}"] = column
            regs.append(s.ldg(t, f"g{g}_a{j}", i))
        for k, v in enumerate(members):
            out = f"g{g}_out{k}"
            pb.buffer(out, v.result, (n,), "out")
            buffers[out] = np.zeros(n, v.result.np)
            s.stg(v.result, out, s.emit(v.op, v.dtype, *regs, mod=v.mod), i)
            items[v.item] = (out,)
    return Case("instructions", pb.build(), buffers, items)


def _immediate_case(t: DType) -> Case:
    values = [v.item() for v in edge_values(t)]
    pb = ProgramBuilder(f"conformance_imm_{t}")
    pb.buffer("out", t, (len(values),), "out")
    s = pb.stage("imm", (1,))
    for k, value in enumerate(values):
        s.stg(t, "out", s.mov(t, Imm(value)), offset=k)
    return Case("instructions", pb.build(), {"out": np.zeros(len(values), t.np)}, {f"MOV_IMM.{t}": ("out",)})


def _conversion_case(to: DType, sources: Iterable[DType], rng: np.random.Generator, extra: int) -> Case:
    """One stage converting every source dtype's values to `to`, each lane one value of
    each (the shorter lists repeated), each source to its own buffer."""
    sources = list(sources)
    columns = {frm: _values(frm, rng, extra) for frm in sources}
    n = max(len(c) for c in columns.values())
    pb = ProgramBuilder(f"conformance_cvt_{to}")
    s = pb.stage("cvt", (n,))
    i = s.mov(DType.I64, gid("x"), hint="i")
    buffers: dict[str, np.ndarray] = {}
    items: dict[str, tuple[str, ...]] = {}
    for frm in sources:
        pb.buffer(f"from_{frm}", frm, (n,), "in")
        pb.buffer(f"to_{frm}", to, (n,), "out")
        s.stg(to, f"to_{frm}", s.cvt(to, frm, s.ldg(frm, f"from_{frm}", i)), i)
        buffers[f"from_{frm}"], buffers[f"to_{frm}"] = np.resize(columns[frm], n), np.zeros(n, to.np)
        items[f"CVT.{to}.{frm}"] = (f"to_{frm}",)
    return Case("conversions", pb.build(), buffers, items)


# ------------------------------------------------------------------------ hand-written
# Each: (area, item with {t}, the dtypes it runs at, the program's text with {t}, and the
# launch: (symbols, {buffer: values or a shape to zero}). Integer-valued data keeps float
# reductions exact in any order, so they are compared bitwise (`exact`).
Launch = Callable[[DType, str], tuple[dict[str, int], dict[str, np.ndarray]]]
NUMERIC = tuple(d for d in DType if not d.is_bool)
FLOATS = (DType.F16, DType.F32, DType.F64)


def _edges(t: DType, n: int) -> np.ndarray:
    """n of the edge values of `t` (repeated when it has fewer)."""
    return np.resize(_values(t, None, 0, n), n)


def _small(t: DType, n: int, lo: int = -3, hi: int = 4) -> np.ndarray:
    """n small integers in [lo, hi) as `t` (non-negative for an unsigned type)."""
    lo = max(lo, 0) if t.is_unsigned else lo
    return (np.arange(n) % (hi - lo) + lo).astype(t.np)


COPY = """.program copy_{t}
.symbols n
.param in x: {t}[n + 1]
.param out y: {t}[n]
.stage copy domain [n] block [3]
    .reg %i: i64
    .reg %v: {t}
    MOV.i64 %i, %gid.x
    LDG.{t} %v, [x + %i + 1]
    STG.{t} [y + %i], %v
    EXIT
"""

SHARED = """.program shared_{t}
.param in x: {t}[8]
.param out y: {t}[8]
.stage reverse domain [8] block [4]
    .reg %i, %j, %r: i64
    .reg %v: {t}
    .shared sh: {t}[4]
    MOV.i64 %i, %gid.x
    MOV.i64 %j, %tid.x
    LDG.{t} %v, [x + %i]
    STS.{t} [sh + %j], %v
    BarSync
    SUB.i64 %r, 3, %j
    LDS.{t} %v, [sh + %r]
    STG.{t} [y + %i], %v
    EXIT
"""

BARRIERS = """.program barriers
.param in x: i32[12]
.param out y: i32[12]
.stage rotate domain [12] block [6]
    .reg %i, %j, %r: i64
    .reg %v, %w: i32
    .shared sh: i32[6]
    MOV.i64 %i, %gid.x
    MOV.i64 %j, %tid.x
    LDG.i32 %v, [x + %i]
    STS.i32 [sh + %j], %v
    BarSync
    ADD.i64 %r, %j, 1
    REM.i64 %r, %r, 6
    LDS.i32 %w, [sh + %r]
    MemFence
    BarSync
    ADD.i32 %w, %w, %v
    STS.i32 [sh + %j], %w
    BarSync
    SUB.i64 %r, 5, %j
    LDS.i32 %w, [sh + %r]
    STG.i32 [y + %i], %w
    EXIT
"""

BRANCHES = """.program branches_{t}
.symbols n
.param in x: {t}[n]
.param out y: {t}[n]
.stage abs domain [n] block [4]
    .reg %i, %k: i64
    .reg %v: {t}
    .reg %p, %q: bool
    MOV.i64 %i, %gid.x
    REM.i64 %k, %i, 5
    SET.eq.i64 %q, %k, 4
    @%q BRA skip
    LDG.{t} %v, [x + %i]
    SET.lt.{t} %p, %v, 0
    @!%p BRA store
    NEG.{t} %v, %v
store:
    STG.{t} [y + %i], %v
    EXIT
skip:
    EXIT
"""

LOOPS = """.program loops
.symbols n
.param in c: i64[n]
.param out s: i64[n]
.stage sum domain [n] block [4]
    .reg %i, %c, %acc, %d, %e: i64
    MOV.i64 %i, %gid.x
    MOV.i64 %acc, 0
    MOV.i64 %e, 0
    LDG.i64 %c, [c + %i]
outer:
    MOV.i64 %d, 3
inner:
    ADD.i64 %acc, %acc, %c
    ADD.i64 %e, %e, 1
    LOOP %d, inner
    LOOP %c, outer
    ADD.i64 %acc, %acc, %e
    STG.i64 [s + %i], %acc
    EXIT
"""

CALLS = """.program calls_{t}
.symbols n
.param in x: {t}[n]
.param out y: {t}[n]
.stage main domain [n] block [4]
    .reg %i: i64
    .reg %v: {t}
    MOV.i64 %i, %gid.x
    LDG.{t} %v, [x + %i]
    CALL twice
    CALL addone
    STG.{t} [y + %i], %v
    EXIT
twice:
    ADD.{t} %v, %v, %v
    CALL addone
    RET
addone:
    ADD.{t} %v, %v, 1
    RET
"""

REDUCE_ONE = """.program reduce_{op}_{t}
.symbols n
.param in x: {t}[n]
.param out y: {t}[2]
.stage total domain [n] block [4]
    .reg %i: i64
    .reg %v: {t}
    .init y[0] = {identity}
    MOV.i64 %i, %gid.x
    LDG.{t} %v, [x + %i]
    {op}.{t} [y], %v
    EXIT
"""

REDUCE_MANY = """.program reduce_bins_{op}_{t}
.symbols n
.param in x: {t}[n]
.param inout y: {t}[3]
.stage bins domain [n] block [4]
    .reg %i, %k: i64
    .reg %v: {t}
    MOV.i64 %i, %gid.x
    REM.i64 %k, %i, 3
    LDG.{t} %v, [x + %i]
    {op}.{t} [y + %k], %v
    EXIT
"""

RESONANCE = """.program resonance_{t}
.symbols n
.param in b: u8[n]
.param in w: {t}[n]
.param out bins: {t}[96]
.stage accumulate domain [n] block [8]
    .reg %i, %k: i64
    .reg %c: u8
    .reg %v: {t}
    MOV.i64 %i, %gid.x
    LDG.u8 %c, [b + %i]
    ClsGet.u8 %c, %c
    CVT.i64.u8 %k, %c
    LDG.{t} %v, [w + %i]
    ResAccum.{t} [bins + %k], %v
    EXIT
"""

POOLS = """.program pools_{t}
.symbols n
.param in x: {t}[n]
.param out y: {t}[n, 3]
.stage main domain [n] block [4]
    .reg %i, %k, %h, %g: i64
    .reg %a, %b, %c: {t}
    .pool p: {t}[6]
    MOV.i64 %i, %gid.x
    MUL.i64 %k, %i, 3
    LDG.{t} %a, [x + %i]
    PoolAlloc %h, p, 2
    PoolStore.{t} [p + %h + 1], %a
    PoolAlloc %g, p, 4
    PoolLoad.{t} %b, [p + %g + 3]
    PoolFree %g
    PoolLoad.{t} %c, [p + %h + 1]
    PoolFree %h
    STG.{t} [y + %k], %c
    STG.{t} [y + %k + 1], %b
    CVT.{t}.i64 %c, %g
    STG.{t} [y + %k + 2], %c
    EXIT
"""

PHASE = """.program phase
.symbols n
.param in x: i64[n]
.param out p: i64[n]
.stage advance domain [n] block [4]
    .reg %i, %v, %ph: i64
    MOV.i64 %i, %gid.x
    LDG.i64 %v, [x + %i]
    PhaseAdv %v
    PhaseAdv 5
    PhaseGet %ph
    STG.i64 [p + %i], %ph
    EXIT
"""


def _identity(op: str, t: DType) -> str:
    if op == "ReduceAdd":
        return "-0.0" if t.is_float else "0"
    if op == "ReduceMul":
        return "1.0" if t.is_float else "1"
    big = "inf" if t.is_float else str(t.max if op == "ReduceMin" else t.min)
    return big if op == "ReduceMin" else ("-inf" if t.is_float else big)


@attrs.frozen
class HandWritten:
    area: str
    item: str  # with {t} (and {op})
    dtypes: tuple[DType, ...]
    text: str  # with {t} (and {op}, {identity})
    launch: Launch  # (dtype, opcode) -> (symbols, buffers)
    exact: bool = False
    ops: tuple[str, ...] = ("",)  # for the reductions: one case per opcode


def _copy(t: DType, op: str) -> tuple[dict[str, int], dict[str, np.ndarray]]:
    x = _values(t, None, 0)
    return {"n": len(x) - 1}, {"x": x, "y": np.zeros(len(x) - 1, t.np)}


def _per_lane(n: int, data: Callable[[DType, int], np.ndarray], out_shape: tuple[int, ...] | None = None) -> Launch:
    """n lanes reading x (`data(t, n)`), writing y (zeros of `out_shape`, else n)."""
    return lambda t, op: ({"n": n}, {"x": data(t, n), "y": np.zeros(out_shape or n, t.np)})


def _reduction(seeded: bool) -> Launch:
    """37 lanes contributing small values (powers of two for products) into y: seeded
    with 1, 2, 3 (the contributions merge with memory), or left to the stage's init."""
    def launch(t: DType, op: str) -> tuple[dict[str, int], dict[str, np.ndarray]]:
        n = 37
        if op == "ReduceMul":
            x = np.array([(1, 2, 1, 1)[k % 4] if t.is_unsigned else (1, 2, -1, 1)[k % 4] for k in range(n)], t.np)
        else:
            x = _small(t, n)
        return {"n": n}, {"x": x, "y": _small(t, 3, 1, 4) if seeded else np.zeros(2, t.np)}
    return launch


def _resonance(t: DType, op: str) -> tuple[dict[str, int], dict[str, np.ndarray]]:
    n = 300
    return {"n": n}, {"b": (np.arange(n) * 37 % 256).astype(np.uint8), "w": _small(t, n),
                      "bins": np.zeros(96, t.np)}


def _counts(t: DType, op: str) -> tuple[dict[str, int], dict[str, np.ndarray]]:
    c = np.array([5, 1, 0, -3, 7, 2], np.int64)
    return {"n": len(c)}, {"c": c, "s": np.zeros(len(c), np.int64)}


def _phases(t: DType, op: str) -> tuple[dict[str, int], dict[str, np.ndarray]]:
    x = np.array([0, 1, 762, 763, -6, -5, 10**18, -(10**18)], np.int64)
    return {"n": len(x)}, {"x": x, "p": np.zeros(len(x), np.int64)}


REDUCTIONS = ("ReduceAdd", "ReduceMul", "ReduceMin", "ReduceMax")
HAND_WRITTEN: tuple[HandWritten, ...] = (
    HandWritten("memory", "LDG.{t} / STG.{t}", tuple(DType), COPY, _copy),
    HandWritten("memory", "LDS.{t} / STS.{t}", tuple(DType), SHARED,
                lambda t, op: ({}, {"x": _edges(t, 8), "y": np.zeros(8, t.np)})),
    HandWritten("barriers", "BarSync, MemFence: a block exchanging through shared memory", (DType.I32,), BARRIERS,
                lambda t, op: ({}, {"x": np.arange(12, dtype=np.int32) * 7, "y": np.zeros(12, np.int32)})),
    HandWritten("control", "BRA (guarded, forward), EXIT (early) at {t}", NUMERIC, BRANCHES,
                _per_lane(11, lambda t, n: _small(t, n, -5, 6))),
    HandWritten("control", "LOOP (nested, counts from data)", (DType.I64,), LOOPS, _counts),
    HandWritten("control", "CALL / RET (nested) at {t}", NUMERIC, CALLS, _per_lane(6, _small)),
    HandWritten("reductions", "{op}.{t} into one element (stage init)", NUMERIC, REDUCE_ONE, _reduction(False),
                exact=True, ops=REDUCTIONS),
    HandWritten("reductions", "{op}.{t} into several elements", NUMERIC, REDUCE_MANY, _reduction(True),
                exact=True, ops=REDUCTIONS),
    HandWritten("reductions", "ResAccum.{t} into the 96 Atlas classes", NUMERIC, RESONANCE, _resonance, exact=True),
    HandWritten("pools", "PoolAlloc / PoolStore.{t} / PoolLoad.{t} / PoolFree", tuple(DType), POOLS,
                _per_lane(5, _edges, (5, 3))),
    HandWritten("instructions", "PhaseAdv / PhaseGet", (DType.I64,), PHASE, _phases),
)


def hand_written_cases(caps: Capabilities) -> tuple[list[Case], list[NotDeclared]]:
    """Every hand-written program at each of its dtypes (and opcodes), those of one
    template and opcode merged into one program (`merged`: a native backend compiles a
    dozen programs, not two hundred); one the capabilities do not cover is NotDeclared,
    with the first thing they leave out."""
    cases: list[Case] = []
    missing: list[NotDeclared] = []
    for h in HAND_WRITTEN:
        for op in h.ops:
            parts: dict[str, tuple[Program, dict[str, int], dict[str, np.ndarray], str]] = {}
            for t in h.dtypes:
                if op and not OPCODES[op].admits(t):
                    continue
                item = h.item.format(t=t, op=op)
                program = parse_program(h.text.format(t=t, op=op, identity=_identity(op, t) if op else ""),
                                        file=f"<conformance {item}>")
                why = caps.uncovered(program)
                if why is not None:
                    missing.append(NotDeclared(h.area, item, why))
                    continue
                symbols, buffers = h.launch(t, op)
                parts[str(t)] = (program, symbols, buffers, item)
            if not parts:
                continue
            program = merged({suffix: part[0] for suffix, part in parts.items()}, f"conformance_{op or h.area}")
            outputs = {suffix: tuple(f"{p.name}_{suffix}" for p in part[0].params
                                     if isinstance(p, BufferParam) and p.role != "in")
                       for suffix, part in parts.items()}
            cases.append(Case(h.area, program,
                              {f"{name}_{suffix}": v for suffix, part in parts.items() for name, v in part[2].items()},
                              {part[3]: outputs[suffix] for suffix, part in parts.items()},
                              {f"{name}_{suffix}": v for suffix, part in parts.items() for name, v in part[1].items()},
                              exact=h.exact))
    return cases, missing


def merged(programs: Mapping[str, Program], name: str) -> Program:
    """One program running every stage of `programs` in turn, each program's symbols,
    params and stages renamed with `_<its key>` so nothing is shared."""
    params, symbols, stages = [], [], []
    for suffix, p in programs.items():
        def rename(n: str) -> str:
            return f"{n}_{suffix}"

        def affine(a: Affine) -> Affine:
            return Affine(a.const, tuple((rename(n), c) for n, c in a.terms))

        globals_ = set(p.buffers())
        symbols += [rename(n) for n in p.symbols]
        for q in p.params:
            params.append(attrs.evolve(q, name=rename(q.name), shape=tuple(map(affine, q.shape)))
                          if isinstance(q, BufferParam) else attrs.evolve(q, name=rename(q.name)))
        for st in p.stages:
            body = []
            for it in st.body:
                if isinstance(it, Instr):
                    if it.addr is not None and it.addr.buffer in globals_:
                        it = attrs.evolve(it, addr=attrs.evolve(it.addr, buffer=rename(it.addr.buffer)))
                    it = attrs.evolve(it, srcs=tuple(Sym(rename(o.name)) if isinstance(o, Sym) else o for o in it.srcs))
                body.append(it)
            stages.append(attrs.evolve(st, name=rename(st.name), domain=tuple(map(affine, st.domain)),
                                       inits=tuple(attrs.evolve(i, buffer=rename(i.buffer)) for i in st.inits),
                                       body=tuple(body)))
    return Program(name, tuple(params), (), tuple(symbols), tuple(stages))


# ---------------------------------------------------------------------- stage shapes
# (domain, block, sizes): every rank, one-lane and uneven blocks, partial blocks, an empty domain
SHAPES = (
    (("n",), (1,), {"n": 3}), (("n",), (3,), {"n": 10}), (("n",), (256,), {"n": 300}), (("n",), (4,), {"n": 0}),
    (("n", "m"), (3, 2), {"n": 7, "m": 5}), (("n", "m"), (16, 16), {"n": 17, "m": 3}),
    (("n", "m", "k"), (2, 3, 2), {"n": 5, "m": 4, "k": 3}), (("n", "m", "k"), (4, 1, 1), {"n": 3, "m": 0, "k": 2}),
)
_SPECIALS = ("gid", "tid", "ctaid", "ntid", "nctaid", "gdim")


def stage_shape_cases(caps: Capabilities) -> tuple[list[Case], list[NotDeclared]]:
    """Each lane of each shape stores every special register of every axis its domain
    has, at its own element."""
    cases: list[Case] = []
    missing: list[NotDeclared] = []
    for dims, block, sizes in SHAPES:
        item = f"domain [{', '.join(f'{d} = {sizes[d]}' for d in dims)}] block {list(block)}"
        axes = "xyz"[:len(dims)]
        pb = ProgramBuilder(f"shape_{len(dims)}d", symbols=dims)
        shape = tuple(reversed(dims))  # x walks the last (contiguous) dimension
        outputs = [f"{kind}_{a}" for kind in _SPECIALS for a in axes]
        for name in outputs:
            pb.buffer(name, DType.I64, shape, "out")
        s = pb.stage("lanes", dims, block)
        index = s.mov(DType.I64, 0, hint="index")
        for k in reversed(range(len(dims))):  # row-major, x fastest: ((gid.z * m) + gid.y) * n + gid.x
            index = s.alu("ADD", DType.I64, s.alu("MUL", DType.I64, index, sym(dims[k])), gid(axes[k]))
        for kind in _SPECIALS:
            for a in axes:
                s.stg(DType.I64, f"{kind}_{a}", s.mov(DType.I64, Special(f"{kind}.{a}")), index)
        program = pb.build()
        why = caps.uncovered(program)
        if why is not None:
            missing.append(NotDeclared("stage shapes", item, why))
            continue
        out_shape = tuple(sizes[d] for d in shape)
        buffers = {name: np.full(out_shape, -1, np.int64) for name in outputs}
        cases.append(Case("stage shapes", program, buffers, {item: tuple(outputs)}, dict(sizes)))
    return cases, missing
