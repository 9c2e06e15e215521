"""Lowering, part 6: scans (`Scan`, numpy's cumsum and cumprod along one variable).

`t[.., v, ..] = sum (or prod) of value at v' <= v` for every row (every point of the
other variables). A scan along an extent that is a constant of at most CHUNK is one
stage: one lane per row scans its row in order. Any other extent E runs in parallel, as a
two-pass block scan over chunks of CHUNK consecutive elements, with a scratch temp
`<t>_chunks` of t's shape in the accumulator type (only the first ceil(E / CHUNK) - 1
elements of each row's axis are used):

    .stage t_totals  domain [E, rows..] block [CHUNK, 1..]   one lead lane per chunk
        E <= CHUNK:  the row is one chunk: scan it in order into t (the stages below
                     then do nothing), so a short row never pays for three stages
        else:        chunk b (but the last) totals its CHUNK values into chunks[.., b]
    .stage t_offsets domain [rows..]                         one lane per row
        E > CHUNK:   chunks[.., b] becomes the total of chunks 0..b (an inclusive scan
                     of the chunk totals, in order)
    .stage t         domain [E, rows..] block [CHUNK, 1..]   one lead lane per chunk
        E > CHUNK:   chunk b scans its values in order from chunks[.., b - 1] (the
                     identity for b = 0) and stores every prefix into t

(A scan down columns, along an axis other than the last, has chunks of COLUMN_CHUNK and
blocks of [COLUMN_CHUNK, COLUMNS]: a lead lane per column, neighbours in one block.)

The total of a full chunk is a loop of exactly CHUNK iterations whose loads the verifier
proves in bounds (its start is clamped to E - CHUNK, which changes nothing for a chunk
that is not the last), so the backend vectorizes it like an in-lane reduction; a full
chunk's rescan starts there too (the last chunk's clamps and masks each index); the
rescan is one dependent chain per chunk (one operation per block of RESCAN_WAYS values),
and the chunks run side by side on the thread pool. The lead lane test opens the chunk stages (`isa.program.lead_lane_axes`),
so a backend skips the other lanes of a block; rows beyond two more axes loop inside
each lane.

Accuracy (docs/lowering.md, "Scans"): f16 and f32 values accumulate in f64 and every
prefix is rounded once (any association of exact f64 terms errs by far less than the
contract's log2 bound, so the chunk totals may be reassociated: `ADD.reassoc.f64`,
vectorized); f64 sums are compensated (Kahan, with a plain sum alongside that stands
when it is not finite, as in loops.py) in the chunk totals (8 accumulators), the offsets
and the rescan, so each prefix errs by a few eps * sum|x| however long; products
multiply in f64 for f16/f32 factors (in order), f64 and integer ones in their type;
integers wrap. Sums start from -0.0, the additive identity that keeps a first -0.0 (as
numpy's, whose first prefix is the first element itself).
"""

from __future__ import annotations

from typing import Callable

from hologram.core.types import Affine, DType
from hologram.ir import Expr, Scan, TensorDecl
from hologram.isa.builder import ProgramBuilder, StageBuilder, gid
from hologram.isa.program import AXES, REASSOC, Imm, Operand, Reg, Special
from hologram.lower.expr import ExprGen
from hologram.lower.loops import loop_nest, reduce_in_lane
from hologram.lower.plan import I64, Names, affine_expr

CHUNK = 1024  # elements per chunk: the ISA's largest block, one working lane each
# A scan along an axis that is not the last (down the columns of a matrix) reads values a
# row apart: its chunks are COLUMN_CHUNK long and a block holds COLUMNS neighbouring
# columns' chunks (COLUMN_CHUNK x COLUMNS lanes, the ISA's largest block; a lead lane
# each), so the lanes one thread runs in turn share every cache line they read.
COLUMN_CHUNK, COLUMNS = 64, 16
KAHAN_WAYS = 8  # independent compensated accumulators of an f64 chunk total (chunks are multiples)
RESCAN_WAYS = 4  # values per step of a rescan: its dependent chain is one operation per block
F16, F32, F64 = DType.F16, DType.F32, DType.F64
Axes = tuple[tuple[str, Affine], ...]


def accumulator(t: DType) -> DType:
    """The type a scan of `t` values accumulates in: f64 for f16/f32, else `t`."""
    return F64 if t in (F16, F32) else t


def scan_stages(pb: ProgramBuilder, st: Scan, decls: dict[str, TensorDecl],
                stage_name: Callable[[str], str]) -> None:
    """The stages computing `st` (module docstring) and their scratch temp (added to `decls`)."""
    decl = decls[st.target]
    axes = tuple(zip(st.vars, decl.shape))
    extent = dict(axes)[st.var]
    rows = tuple(a for a in axes if a[0] != st.var)
    if extent.is_const and extent.const <= CHUNK:
        if extent.const > 0:
            _row_stage(pb, st, decls, stage_name(st.target), rows, extent)
        return
    acc_t = accumulator(decl.dtype)
    scratch = Names(decls).temp(f"{st.target}_chunks", acc_t, decl.shape)
    pb.temp(scratch.name, scratch.dtype, scratch.shape)
    columns = bool(rows) and st.vars[-1] != st.var  # the last (contiguous) variable is a row's
    chunk = COLUMN_CHUNK if columns else CHUNK
    _chunk_stage(pb, st, decls, stage_name(f"{st.target}_totals"), rows, extent, scratch, chunk, rescan=False)
    _offsets_stage(pb, st, decls, stage_name(f"{st.target}_offsets"), rows, extent, scratch, chunk)
    _chunk_stage(pb, st, decls, stage_name(st.target), rows, extent, scratch, chunk, rescan=True)


# ------------------------------------------------------------------------ stages
def _row_stage(pb: ProgramBuilder, st: Scan, decls: dict[str, TensorDecl], name: str, rows: Axes,
               extent: Affine) -> None:
    """A constant extent of at most CHUNK: one lane per row scans it in order."""
    sb, gen, lead = _row_lanes(pb, decls, name, rows)
    n = gen.value(affine_expr(extent))
    _per_row(gen, lead, lambda: _rescan(gen, st, decls, Imm(0), n, None))


def _chunk_stage(pb: ProgramBuilder, st: Scan, decls: dict[str, TensorDecl], name: str, rows: Axes,
                 extent: Affine, scratch: TensorDecl, chunk: int, rescan: bool) -> None:
    """The first stage (chunk totals, or a short row scanned whole) or, with `rescan`,
    the last (each chunk scanned from its offset). Chunks of `chunk` values; COLUMNS
    rows a block when chunks are COLUMN_CHUNK long."""
    lane, lead = rows[-2:], rows[:-2]
    block = (chunk,) + tuple(COLUMNS if k == 0 and chunk == COLUMN_CHUNK else 1 for k in range(len(lane)))
    sb = pb.stage(name, (extent, *(e for _, e in reversed(lane))), block)
    gen = ExprGen(sb, decls, reduce_in_lane)
    end = sb.label("end")
    sb.bra(end, pred=sb.setp("ne", I64, Special("tid.x"), 0))  # first: the lead lane test
    _bind(gen, lane, AXES[1:])
    n = gen.value(affine_expr(extent))
    b = Special("ctaid.x")

    def row() -> None:
        done = sb.label("done")
        short = done if rescan else sb.label("short")  # a row of one chunk: the first stage did it all
        sb.bra(short, pred=gen.setp("le", I64, n, chunk))
        gen.push()  # values of this path stay in it
        start = sb.alu("MUL", I64, b, chunk, hint="start")
        if rescan:
            prev = sb.alu("MAX", I64, sb.alu("SUB", I64, b, 1), 0, hint="prev")
            offset = _load_slot(gen, st, scratch, prev, extent)
            first = gen.setp("eq", I64, b, 0)
            init = gen.sel(scratch.dtype, first, _identity(st.kind, scratch.dtype), offset)
            # a full chunk needs no clamps or masks: its start is proven at most E - chunk
            last, end = sb.label("last"), sb.label("rescanned")
            sb.bra(last, pred=gen.setp("gt", I64, sb.alu("ADD", I64, start, chunk), n))
            base = sb.alu("MAX", I64, sb.alu("MIN", I64, start, sb.alu("SUB", I64, n, chunk)), 0, hint="base")
            gen.push()
            _rescan(gen, st, decls, base, Imm(chunk), init, full=True)
            gen.pop()
            sb.bra(end)
            sb.place(last)
            gen.push()
            _rescan(gen, st, decls, start, Imm(chunk), init)
            gen.pop()
            sb.place(end)
        else:
            # the last chunk's total is never needed: no offset comes after it
            sb.bra(done, pred=gen.setp("ge", I64, sb.alu("ADD", I64, start, chunk), n))
            base = sb.alu("MAX", I64, sb.alu("MIN", I64, start, sb.alu("SUB", I64, n, chunk)), 0, hint="base")
            total = _chunk_total(gen, st, decls, base, extent, chunk)
            _store_slot(gen, st, scratch, gen.reg(b, I64), extent, total)
            gen.pop()
            sb.bra(done)
            sb.place(short)
            gen.push()
            _rescan(gen, st, decls, Imm(0), n, None)
        gen.pop()
        sb.place(done)

    _per_row(gen, lead, row)
    sb.place(end)


def _offsets_stage(pb: ProgramBuilder, st: Scan, decls: dict[str, TensorDecl], name: str, rows: Axes,
                   extent: Affine, scratch: TensorDecl, chunk: int) -> None:
    """One lane per row turns the totals of chunks 0 .. last - 1 into their running
    totals in place: slot b then holds the offset of chunk b + 1."""
    sb, gen, lead = _row_lanes(pb, decls, name, rows)
    n = gen.value(affine_expr(extent))
    acc_t = scratch.dtype

    def row() -> None:
        done = sb.label("done")
        sb.bra(done, pred=gen.setp("le", I64, n, chunk))
        slot = sb.mov(I64, 0, hint="slot")
        left = sb.alu("DIV", I64, sb.alu("SUB", I64, n, 1), chunk, hint="slots")  # chunks - 1 >= 1
        running = _Running(gen, st.kind, acc_t, acc_t, None)
        top = sb.label("offsets")
        sb.place(top)
        gen.push()
        running.add(_load_slot(gen, st, scratch, slot, extent))
        _store_slot(gen, st, scratch, slot, extent, running.value())
        gen.pop()
        sb.alu("ADD", I64, slot, 1, dst=slot)
        sb.loop(left, top)
        sb.place(done)

    _per_row(gen, lead, row)


# ------------------------------------------------------------------------ lanes and rows
def _row_lanes(pb: ProgramBuilder, decls: dict[str, TensorDecl], name: str, rows: Axes
               ) -> tuple[StageBuilder, ExprGen, Axes]:
    """A stage with one lane per row (the last three row variables on x, y, z; one lane
    when there are none); returns the leading row variables, which loop in each lane."""
    lane, lead = rows[-3:], rows[:-3]
    if lane:
        sb = pb.stage(name, tuple(e for _, e in reversed(lane)))
    else:
        sb = pb.stage(name, (1,), (1,))
    gen = ExprGen(sb, decls, reduce_in_lane)
    _bind(gen, lane, AXES)
    return sb, gen, lead


def _bind(gen: ExprGen, lane: Axes, axes: tuple[str, ...]) -> None:
    """Each of `lane`'s variables (the last first) a copy of its `%gid` on `axes` in order."""
    for axis, (var, ext) in zip(axes, reversed(lane)):
        gen.bind(var, gen.sb.mov(I64, gid(axis), hint=var), ext)


def _per_row(gen: ExprGen, lead: Axes, row: Callable[[], None]) -> None:
    """`row()` for the lane's row, or for each of them when leading row variables loop."""
    if lead:  # nothing hoisted here: the value also varies along the scanned variable, bound later
        loop_nest(gen, lead, row)
    else:
        row()


# ------------------------------------------------------------------------ loops
def _rescan(gen: ExprGen, st: Scan, decls: dict[str, TensorDecl], start: Operand, count: Operand,
            init: Operand | None, full: bool = False) -> None:
    """Store the running sum (product) of the `count` values from `start` along the
    scanned variable into the target, starting from `init` (None: the identity). `full`:
    the values are all inside the extent (`start` is at most E - count), which the
    verifier proves, so there is nothing to clamp or mask.

    A dependent chain, in blocks of RESCAN_WAYS values: the block's own prefixes are
    summed first, off the chain, then each is added to the running value, so the chain
    is one addition per block rather than one per value (f64 sums, compensated, and
    f64 products go one value at a time). Values past the extent (a short last chunk or
    block) fold in the identity and store the last element again, unchanged; so the
    trip count is a constant for a chunk, which keeps the stage's work known to the
    runtime (it decides from it whether to use threads)."""
    sb = gen.sb
    decl = decls[st.target]
    t, acc_t = decl.dtype, accumulator(decl.dtype)
    extent = dict(zip(st.vars, decl.shape))[st.var]
    ways = 1 if _compensated(st.kind, t) or (st.kind == "prod" and t is F64) else RESCAN_WAYS
    n = gen.value(affine_expr(extent))
    last = gen.isa("SUB", I64, n, 1)
    gen.prefetch(st.value, {st.var})  # what does not vary along the row, once
    running = _Running(gen, st.kind, t, acc_t, init)
    blocks = Imm(-(-count.value // ways)) if isinstance(count, Imm) else \
        sb.alu("DIV", I64, sb.alu("ADD", I64, count, ways - 1), ways)
    k, left = sb.mov(I64, 0, hint="k"), sb.mov(I64, blocks, hint="k_n")
    top = sb.label("scan")
    sb.place(top)
    first = sb.alu("ADD", I64, start, sb.alu("MUL", I64, k, ways) if ways > 1 else k, hint="pos")
    places, values = [], []
    for slot in range(ways):
        gen.push()
        pos = sb.alu("ADD", I64, first, slot, hint="pos") if slot else first
        # = pos inside the extent; the clamp proves the index in bounds to the verifier
        at = pos if full else sb.alu("MAX", I64, sb.alu("MIN", I64, pos, last), 0, hint=st.var)
        gen.bind(st.var, at, extent)
        value = gen.value_as(st.value, t)
        if not full:
            value = gen.sel(t, gen.setp("lt", I64, pos, n), value, _identity(st.kind, t))
        places.append(at)
        values.append(gen.convert(value, t, acc_t))
        gen.pop()
    if ways == 1:
        running.add(values[0], converted=True)
        outs = [running.value()]
    else:
        op = "MUL" if st.kind == "prod" else "ADD"
        prefix = [values[0]]
        for v in values[1:]:
            prefix.append(gen.isa(op, acc_t, prefix[-1], v))
        outs = [gen.isa(op, acc_t, running.acc, p) for p in prefix]
        sb.mov(acc_t, outs[-1], dst=running.acc)
    for at, out in zip(places, outs):
        gen.push()
        gen.bind(st.var, at, extent)
        gen.store(decl, [Expr.idx(v) for v in st.vars], gen.convert(out, acc_t, t))
        gen.pop()
    sb.alu("ADD", I64, k, 1, dst=k)
    sb.loop(left, top)


def _chunk_total(gen: ExprGen, st: Scan, decls: dict[str, TensorDecl], base: Reg, extent: Affine,
                 chunk: int) -> Operand:
    """The sum (product) of the `chunk` values from `base` (at most E - chunk), in the
    accumulator type: a loop of a constant count, proven in bounds; an f64 sum in
    KAHAN_WAYS compensated accumulators side by side."""
    sb = gen.sb
    t = decls[st.target].dtype
    acc_t = accumulator(t)
    ways = KAHAN_WAYS if _compensated(st.kind, t) else 1
    parts = [_Running(gen, st.kind, t, acc_t, None, reassociate=True) for _ in range(ways)]
    gen.prefetch(st.value, {st.var})
    j, left = sb.mov(I64, 0, hint="j"), sb.mov(I64, chunk // ways, hint="j_n")
    top = sb.label("total")
    sb.place(top)
    at = sb.alu("ADD", I64, base, sb.alu("MUL", I64, j, ways) if ways > 1 else j, hint="at")
    for slot, part in enumerate(parts):
        gen.push()
        gen.bind(st.var, sb.alu("ADD", I64, at, slot, hint=st.var) if slot else at, extent)
        part.add(gen.value_as(st.value, t))
        gen.pop()
    sb.alu("ADD", I64, j, 1, dst=j)
    sb.loop(left, top)
    return _Running.combine(gen, parts)


def _slot_index(gen: ExprGen, st: Scan, slot: Reg, extent: Affine) -> list[Expr]:
    """The scratch index of chunk slot `slot` of the lane's row: the row's variables, and
    the slot where the scanned variable was (a slot is below the extent)."""
    name = f"{st.var}#slot"
    gen.bind(name, slot, extent)
    return [Expr.idx(name if v == st.var else v) for v in st.vars]


def _load_slot(gen: ExprGen, st: Scan, scratch: TensorDecl, slot: Reg, extent: Affine) -> Operand:
    idx, off, chk = gen.address(scratch, _slot_index(gen, st, slot, extent))
    return gen.sb.ldg(scratch.dtype, scratch.name, idx, off, checked=chk)


def _store_slot(gen: ExprGen, st: Scan, scratch: TensorDecl, slot: Reg, extent: Affine, value: Operand) -> None:
    gen.store(scratch, _slot_index(gen, st, slot, extent), value)


# ------------------------------------------------------------------------ accumulation
def _identity(kind: str, dtype: DType) -> bool | int | float:
    """1 for products; for sums 0, or -0.0 for floats: -0.0 + x is x for every x (a
    first -0.0 stays -0.0, as numpy's first prefix is the first element itself)."""
    if kind == "prod":
        return 1.0 if dtype.is_float else 1
    return -0.0 if dtype.is_float else 0


def _compensated(kind: str, t: DType) -> bool:
    return kind == "sum" and t is F64


class _Running:
    """A running sum or product of `t` values in `acc_t` (a register from `init`, or the
    identity). An f64 sum is Kahan-compensated with a plain sum alongside, which is the
    value when it is not finite (an inf or NaN term makes the compensation NaN; the plain
    sum then is numpy's inf or NaN). `reassociate` lets the backend reorder an f16/f32 sum
    in f64 (every order is within the contract), so a loop of them vectorizes."""

    def __init__(self, gen: ExprGen, kind: str, t: DType, acc_t: DType, init: Operand | None,
                 reassociate: bool = False):
        self.gen, self.kind, self.t, self.acc_t = gen, kind, t, acc_t
        start = _identity(kind, acc_t) if init is None else init
        self.acc = gen.sb.mov(acc_t, start, hint="acc")  # a copy: it is updated in place
        self.compensated = _compensated(kind, acc_t) and acc_t is t
        self.reassoc = REASSOC if reassociate and kind == "sum" and acc_t is F64 and not self.compensated else None
        if self.compensated:
            self.comp = gen.sb.mov(F64, 0.0, hint="comp")
            self.plain = gen.sb.mov(F64, self.acc, hint="plain")

    def add(self, x: Operand, converted: bool = False) -> None:
        """Fold `x` (a `t` value, or already an `acc_t` one) in."""
        gen, F = self.gen, self.acc_t
        x = x if converted else gen.convert(x, self.t, F)
        if self.kind == "prod":
            gen.isa("MUL", F, self.acc, x, dst=self.acc)
        elif not self.compensated:
            gen.sb.emit("ADD", F, self.acc, x, dst=self.acc, mod=self.reassoc)
        else:
            y = gen.isa("SUB", F, x, self.comp)
            total = gen.isa("ADD", F, self.acc, y)
            gen.isa("SUB", F, gen.isa("SUB", F, total, self.acc), y, dst=self.comp)
            gen.sb.mov(F, total, dst=self.acc)
            gen.isa("ADD", F, self.plain, x, dst=self.plain)

    def value(self) -> Operand:
        """The running value (`acc_t`)."""
        if not self.compensated:
            return self.acc
        gen = self.gen
        finite = gen.setp("eq", F64, gen.isa("SUB", F64, self.plain, self.plain), 0.0)
        return gen.sel(F64, finite, self.acc, self.plain)

    @staticmethod
    def combine(gen: ExprGen, parts: list["_Running"]) -> Operand:
        """The total of independent partial accumulations, added pairwise (upper half
        onto lower), their plain sums likewise."""
        first = parts[0]
        while len(parts) > 1:
            half = len(parts) // 2
            for lo, hi in zip(parts[:half], parts[half:]):
                lo.acc = gen.isa("ADD", F64, lo.acc, hi.acc)
                lo.plain = gen.isa("ADD", F64, lo.plain, hi.plain)
            parts = parts[:half]
        return first.value()


__all__ = ["CHUNK", "accumulator", "scan_stages"]
