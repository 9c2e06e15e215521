"""Lowering, part 4: register-tiled contractions (matrix products).

`t[i, j] = f(sum(a[i, p] * b[p, j], p))` on f32 or f64 (gemm, and any 2-D statement built
around one such sum), and its batched form `t[z, i, j] = f(sum(a[z, i, p] * b[z, p, j], p))`
(either operand may be one matrix shared by every batch: `a[i, p]`, `b[p, j]`; what
`a @ b` gives for 3-D operands) is computed a tile at a time: a block of the stage's launch is a tile of
`TILE_ROWS x TILE_COLS` outputs, and its first lane computes all of it, keeping one
accumulator per output in registers (the other lanes of the block exit at once). Per
step of `p` the lane loads `TILE_COLS` consecutive values of `b`'s row `p` and one value
of `a` per tile row, then does `TILE_ROWS * TILE_COLS` independent FMAs: straight-line
code over consecutive addresses, which the backend's SLP vectorizer turns into vector
FMAs (`<16 x float>` on AVX-512). The one-lane-per-output form cannot vectorize: its
inner loop is one dependent chain. The tile reads `b` from a packed copy, made by a first
stage (`_pack_panels`): each panel of `TILE_COLS` columns one contiguous run of memory,
where `b`'s own rows, `n` apart, crowd a few cache sets (a 1024^2 gemm ran 3x slower).

Accuracy. A sequential f32 loop errs by up to `n u sum|x|` (u = 2**-24), beyond the
contract's pairwise bound. Here the products of an output are summed in three levels:
blocks of `BLOCK` (8) consecutive `p` in f32 (one FMA, so one rounding, per product; at
most `8 u sum|block|`), groups of `G` block sums in f32 (at most `(G - 1) u
sum|group|`), then the group sums in f64 (less than `n 2**-53 sum|x|`) and one rounding
to f32: at most `(8 + G) u sum|x|` in all. An f64 tile has 16 columns (`tile_cols`) and
adds its group sums with TwoSum, keeping each addition's error in a second register and
adding it at the end: one rounding and `O(n u^2)` more, the same `(8 + G) u` bound. The
bound `2 (ceil(log2 n) + 1) u sum|x|` grows by 2u per doubling of n, so G grows with k (`groups`): `GROUP` (4) blocks up to
k = 32 (an output errs by at most `n u` for n <= 8, `9 u` for n <= 16, `11 u` for n <=
32, `12 u` beyond), and `2e - 5` blocks for k > 2**e (e = 5..10: 5 blocks for k > 32,
11 for k > 256, 15 for k > 1024), one u inside the bound. Longer groups mean fewer f64
conversions of the tile's 192 sums: 1 per 88 steps instead of 32 at k = 512 made batched
`a @ b` (8 x 512^2) about 7% faster.

inf and NaN: NaN and infinite inputs give the NaN/inf numpy gives, and so do block and
group sums that overflow f32. Group sums are added in f64, so a running total that
exceeds the f32 range only *between* groups (of 8G products) and comes back (`2e38 + 2e38 -
3e38`, one per group) gives the finite value where an f32 loop gives inf; such a sum's
f32 value depends on the summation order anyway (numpy's BLAS picks its own). The sum is
rounded to f32 before `f` is applied, as the IR says.

Bounds. Every access of the tile path is unchecked, and proven by the verifier. The
path runs when `m >= TILE_ROWS` and `n >= TILE_COLS` (checked on `$m` and `$n`, which
gives the verifier those lower bounds); the tile's origin is the lead lane's `(gid.x,
gid.y)` (x walks the rows) clamped with MIN to `(m - TILE_ROWS, n - TILE_COLS)`, so a
tile at the bottom or right edge moves back inside the matrix and overlaps its
neighbour: the overlapped outputs are computed twice, by the same instructions in the
same order, so both lanes store the same bits. `p < k` is tested at the top of every
step (the step loop's trip count is `BLOCK`, and it leaves early), which narrows `p`. A
matrix narrower or shorter than a tile is a third stage's (`_narrow_stage`): narrow tiles
of `narrow_cols` columns reading `b` in place, their rows and (n < `narrow_cols`) columns
clamped into the matrix; the same sums.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import attrs

from hologram.core.types import Affine, DType
from hologram.ir import Compute, Expr, TensorDecl
from hologram.isa.builder import ProgramBuilder, StageBuilder
from hologram.isa.program import Imm, Operand, Reg, Special
from hologram.lower.expr import ExprGen
from hologram.lower.loops import reduce_in_lane
from hologram.lower.plan import I64, Names, affine_expr

TILE_ROWS = 6
TILE_COLS = 32  # f32 columns: a tile row is two 512-bit vectors (16 columns of f64)
NARROW_COLS = 16  # f32 columns of a narrow tile (a matrix narrower or shorter than a tile)
BLOCK = 8
GROUP = 4  # block sums per f32 group for k <= 32; longer sums take longer groups (groups)
LONG_GROUPS = tuple((1 << e, 2 * e - 5) for e in range(5, 11))  # (k above, blocks per group)
F32, F64 = DType.F32, DType.F64


@attrs.frozen
class Contraction:
    """`reduce` = sum(a[i, p] * b[p, j], p) inside a statement over (i, j), or over
    (z, i, j) with `a[z, i, p]` and/or `b[z, p, j]` (`a_batched`, `b_batched`)."""

    reduce: Expr
    a: str
    b: str
    p: str
    k: Affine
    batch: str | None = None  # the statement's batch variable z
    a_batched: bool = False
    b_batched: bool = False
    dtype: DType = F32  # of a, b, the sum (f32 or f64)

    @property
    def cols(self) -> int:
        """A tile's columns: as many as two 512-bit vectors of `dtype` hold."""
        return tile_cols(self.dtype)


def tile_cols(t: DType) -> int:
    return TILE_COLS * DType.F32.itemsize // t.itemsize


def narrow_cols(t: DType) -> int:
    """A narrow tile's columns (`_narrow_stage`): one 512-bit vector of `t`."""
    return NARROW_COLS * DType.F32.itemsize // t.itemsize


def match_contraction(st: Compute, decls: Mapping[str, TensorDecl]) -> Contraction | None:
    """The contraction `st` is built around, when it can be tiled: a 2-D statement whose
    body holds exactly one REDUCE, an f32 `sum` over one variable of the product of two
    f32 array loads `a[i, p]` and `b[p, j]` (i, j the statement's variables, in order),
    with `a: [m, k]`, `b: [k, n]` and the target `[m, n]`."""
    target = decls[st.target]
    if len(st.vars) not in (2, 3) or len(target.shape) != len(st.vars) or len(set(st.vars)) != len(st.vars):
        return None
    reduces = {n for n in st.body.walk() if n.op == "REDUCE"}
    if len(reduces) != 1:
        return None
    (red,) = reduces
    kind, axes = red.arg
    axes = tuple(axes)
    prod = red.srcs[0]
    t = red.dtype
    if kind != "sum" or t not in (F32, F64) or len(axes) != 1 or prod.op != "MUL" or prod.dtype is not t:
        return None
    p, k = axes[0]
    *batch, i, j = st.vars
    if p in st.vars:
        return None
    *zs, m, n = target.shape
    z = (batch[0], zs[0]) if batch else None
    for x, y in (prod.srcs, tuple(reversed(prod.srcs))):
        for a_batched, b_batched in ((True, True), (True, False), (False, True)) if z else ((False, False),):
            if _load(x, decls, t, (i, p), (m, k), z if a_batched else None) and \
                    _load(y, decls, t, (p, j), (k, n), z if b_batched else None):
                return Contraction(red, x.arg, y.arg, p, k, batch[0] if batch else None, a_batched, b_batched, t)
    return None


def _load(e: Expr, decls: Mapping[str, TensorDecl], t: DType, vars_: tuple[str, str],
          shape: tuple[Affine, Affine], batch: tuple[str, Affine] | None = None) -> bool:
    """Whether `e` loads an array of `t` of `shape` at `vars_` (preceded by the batch
    variable and dimension, when given)."""
    if batch is not None:
        vars_, shape = (batch[0], *vars_), (batch[1], *shape)
    d = decls.get(e.arg) if e.op == "LOAD" else None
    return (d is not None and d.kind != "scalar" and d.dtype is t and e.dtype is t and d.shape == shape
            and tuple((s.op, s.arg) for s in e.srcs) == tuple(("IDX", v) for v in vars_))


def group_blocks(k: int) -> int:
    """Blocks per f32 group of a contraction over k terms: what the tile computes at run
    time (`_Tile.groups`)."""
    return max([GROUP] + [blocks for above, blocks in LONG_GROUPS if k > above])


def contraction_stages(pb: ProgramBuilder, names: tuple[str, str, str], st: Compute, decls: dict[str, TensorDecl],
                       c: Contraction) -> None:
    """The stages computing `st` (module docstring), named `names`: `b`'s panels packed
    into a temp (added to `decls`), then a tile per block, then (a matrix narrower or
    shorter than a tile) a narrow tile per block, reading `b` in place."""
    target = decls[st.target]
    *z_dims, m_dim, n_dim = target.shape
    cols = c.cols
    b_dims = (*(z_dims if c.b_batched else ()), n_dim + (cols - 1), c.k)
    panels = Names(decls).temp(f"{c.b}_panels", c.dtype, b_dims)
    pb.temp(panels.name, panels.dtype, panels.shape)
    pack_name, name, narrow_name = names
    _pack_panels(pb, pack_name, decls, c, (m_dim, n_dim, *z_dims), panels.name)
    # x walks the row tiles: consecutive tiles share b's column panel (k x TILE_COLS, kept
    # in L2) and stream a's rows, so a and b each cross the memory bus far fewer times;
    # z (a batched contraction) walks the batches, one matrix product each
    sb = pb.stage(name, (m_dim, n_dim, *z_dims), (TILE_ROWS, cols, *(1 for _ in z_dims)))
    gen = ExprGen(sb, decls, reduce_in_lane)
    end = sb.label("end")
    # A block is a tile and its first lane computes all of it; the other lanes leave at
    # once, before anything else, so a backend may skip them (isa.program.lead_lane_axes)
    for axis in "xy":
        sb.bra(end, pred=sb.setp("ne", I64, Special(f"tid.{axis}"), 0))
    m, n, k = (gen.value(affine_expr(d)) for d in (m_dim, n_dim, c.k))
    zb = sb.mov(I64, Special("gid.z"), hint=c.batch) if c.batch is not None else None
    sb.bra(end, pred=sb.setp("lt", I64, m, TILE_ROWS))  # the narrow stage's matrix
    sb.bra(end, pred=sb.setp("lt", I64, n, cols))
    # The lead lane's indices are the tile's origin; a tile that would stick out of the
    # matrix moves back inside it (and overlaps its neighbour, recomputing equal values)
    i0 = sb.alu("MIN", I64, Special("gid.x"), sb.alu("SUB", I64, m, TILE_ROWS), hint="i0")
    j0 = sb.alu("MIN", I64, Special("gid.y"), sb.alu("SUB", I64, n, cols), hint="j0")
    _Tile(gen, st, target, c, (m, n, k), i0, j0, zb, panels.name).emit()
    sb.place(end)
    _narrow_stage(pb, narrow_name, st, decls, c)


def _narrow_stage(pb: ProgramBuilder, name: str, st: Compute, decls: Mapping[str, TensorDecl],
                  c: Contraction) -> None:
    """The stage computing a matrix with fewer than TILE_ROWS rows or `c.cols` columns
    (its lead lanes leave at once otherwise): a block is a tile of TILE_ROWS x
    `narrow_cols` outputs, read from `b` in place (no panels: the pack skips such a
    matrix), every row and column index clamped into the matrix (`_NarrowTile`). A stage
    of its own, not a branch of the tile's: each keeps two LOOPs (cpu_llvm compiles a
    stage of more than four at O2), and the runtime weighs each stage's cost alone."""
    target = decls[st.target]
    *z_dims, m_dim, n_dim = target.shape
    cols = narrow_cols(c.dtype)
    sb = pb.stage(name, (m_dim, n_dim, *z_dims), (TILE_ROWS, cols, *(1 for _ in z_dims)))
    gen = ExprGen(sb, decls, reduce_in_lane)
    end, narrow = sb.label("end"), sb.label("narrow")
    for axis in "xy":
        sb.bra(end, pred=sb.setp("ne", I64, Special(f"tid.{axis}"), 0))
    m, n, k = (gen.value(affine_expr(d)) for d in (m_dim, n_dim, c.k))
    zb = sb.mov(I64, Special("gid.z"), hint=c.batch) if c.batch is not None else None
    sb.bra(narrow, pred=sb.setp("lt", I64, m, TILE_ROWS))
    sb.bra(end, pred=sb.setp("ge", I64, n, c.cols))  # the tile stage's matrix
    sb.place(narrow)
    # origin: the block's, moved back inside a matrix of at least a tile's size
    i0 = sb.alu("MIN", I64, Special("gid.x"), sb.alu("MAX", I64, sb.alu("SUB", I64, m, TILE_ROWS), 0), hint="i0")
    few = sb.label("few_cols")
    sb.bra(few, pred=sb.setp("lt", I64, n, cols))
    j0 = sb.alu("MIN", I64, Special("gid.y"), sb.alu("SUB", I64, n, cols), hint="j0")
    _NarrowTile(gen, st, target, c, (m, n, k), i0, j0, zb, cols, clamp_cols=False).emit()
    sb.bra(end)
    sb.place(few)  # fewer columns than a narrow tile: one block column, at 0
    _NarrowTile(gen, st, target, c, (m, n, k), i0, sb.mov(I64, 0, hint="j0"), zb, cols, clamp_cols=True).emit()
    sb.place(end)


def _pack_panels(pb: ProgramBuilder, name: str, decls: Mapping[str, TensorDecl], c: Contraction,
                 dims: tuple[Affine, ...], panels: str) -> None:
    """The stage copying `b`'s column panels into `panels`: the panel of the tiles at
    column `y0` (a multiple of C = `c.cols`) holds `b[p, j0 + q]` for every `p` at
    `y0 * k + p * C + q`, `j0` the tiles' clamped origin. A tile then reads its
    panel as one contiguous stream: `b`'s own rows are `n` apart, so at n = 1024 a panel
    falls into a few cache sets and a 1024^2 gemm ran at 40% of its in-cache speed.
    Panels start `y0 * k` apart (not `j0 * k`: the last, clamped panel would overlap its
    neighbour), so `panels` holds `(n + C - 1) * k` values per matrix."""
    m_dim, n_dim, *z_dims = dims
    cols, t = c.cols, c.dtype
    b_dims = z_dims if c.b_batched else []
    # x walks p, so consecutive lanes write one panel's rows one after another; y walks
    # the panels and z the batches of a batched b. A block is a panel's columns, and its
    # first lane copies all of them (straight-line loads and stores the backend vectorizes)
    sb = pb.stage(name, (c.k, n_dim, *b_dims), (1, cols, *(1 for _ in b_dims)))
    gen = ExprGen(sb, decls, reduce_in_lane)
    end = sb.label("end")
    sb.bra(end, pred=sb.setp("ne", I64, Special("tid.y"), 0))
    m, n, k = (gen.value(affine_expr(d)) for d in (m_dim, n_dim, c.k))
    sb.bra(end, pred=sb.setp("lt", I64, m, TILE_ROWS))  # no tile reads the panels
    sb.bra(end, pred=sb.setp("lt", I64, n, cols))
    p, y0 = Special("gid.x"), Special("gid.y")
    j0 = sb.alu("MIN", I64, y0, sb.alu("SUB", I64, n, cols), hint="j0")
    src = sb.alu("ADD", I64, sb.alu("MUL", I64, p, n, hint="brow"), j0, hint="bidx")
    dst = sb.alu("ADD", I64, sb.alu("MUL", I64, y0, k, hint="panel"), sb.alu("MUL", I64, p, cols), hint="pidx")
    if b_dims:
        zb = sb.mov(I64, Special("gid.z"), hint="z")
        src = sb.alu("ADD", I64, src, sb.alu("MUL", I64, sb.alu("MUL", I64, zb, k), n), hint="bidx")
        dst = sb.alu("ADD", I64, dst, sb.alu("MUL", I64, sb.alu("MUL", I64, zb, sb.alu("ADD", I64, n, cols - 1)), k),
                     hint="pidx")
    for q in range(cols):
        sb.stg(t, panels, sb.ldg(t, c.b, src, q, hint="bv"), dst, q)
    sb.place(end)


class _Tile:
    """The code of one tile at (i0, j0): blocked accumulation, then the statement per output."""

    def __init__(self, gen: ExprGen, st: Compute, target: TensorDecl, c: Contraction,
                 dims: tuple[Operand, Operand, Operand], i0: Reg, j0: Reg, zb: Reg | None, panels: str):
        self.gen, self.sb, self.st, self.target, self.c = gen, gen.sb, st, target, c
        self.m, self.n, self.k = dims
        self.i0, self.j0, self.zb, self.panels = i0, j0, zb, panels
        sb = self.sb
        # a batch's first row of a, the tile's packed panel of b (_pack_panels), first row of t
        self.a_base = sb.alu("MUL", I64, sb.alu("MUL", I64, zb, self.m), self.k, hint="abase") \
            if zb is not None and c.a_batched else None
        self.panel = sb.alu("MUL", I64, Special("gid.y"), self.k, hint="panel")
        if zb is not None and c.b_batched:
            per_batch = sb.alu("MUL", I64, sb.alu("ADD", I64, self.n, c.cols - 1), self.k)
            self.panel = sb.alu("ADD", I64, self.panel, sb.alu("MUL", I64, zb, per_batch), hint="panel")
        self.t_base = sb.alu("MUL", I64, sb.alu("MUL", I64, zb, self.m), self.n, hint="tbase") \
            if zb is not None else None

    cols = property(lambda self: self.c.cols)

    def a_rows(self) -> list[Reg]:
        """The offsets of the tile's rows in `a`."""
        sb, k = self.sb, self.k
        a_rows = [sb.alu("MUL", I64, self.i0, k, hint="arow")]
        if self.a_base is not None:
            a_rows[0] = sb.alu("ADD", I64, a_rows[0], self.a_base, hint="arow")
        for _ in range(TILE_ROWS - 1):
            a_rows.append(sb.alu("ADD", I64, a_rows[-1], k, hint="arow"))
        return a_rows

    def emit(self) -> None:
        sb, k = self.sb, self.k
        a_rows = self.a_rows()
        t = self.c.dtype
        shape = [range(self.cols)] * TILE_ROWS
        total = [[sb.mov(F64, 0.0, hint="tot") for _ in cols] for cols in shape]
        # f64 group sums are added with their rounding errors kept aside (TwoSum)
        comp = [[sb.mov(F64, 0.0, hint="comp") for _ in cols] for cols in shape] if t is F64 else None
        mid = [[sb.mov(t, 0.0, hint="mid") for _ in cols] for cols in shape]
        part = [[sb.reg(t, hint="acc") for _ in cols] for cols in shape]
        done, same_group = sb.label("kdone"), sb.label("kgroup")
        pb = sb.mov(I64, 0, hint="pb")
        # ceil(k / BLOCK) trips: the `pb >= k` test ends the loop first, but the count is
        # what hologram.passes.work reads as the loop's trips (the launch's cost estimate)
        blocks = sb.alu("DIV", I64, sb.alu("ADD", I64, k, BLOCK - 1), BLOCK, hint="pb_n")
        groups = self.groups()
        left = sb.mov(I64, groups, hint="left")
        outer = sb.label("kblock")
        sb.place(outer)
        sb.bra(done, pred=sb.setp("ge", I64, pb, k))
        _each(lambda acc: sb.mov(t, 0.0, dst=acc), part)
        # pb (0, 8, 16, ...) is below k here, but the verifier's bound for it is 8*(k-1),
        # which may wrap; the clamp gives p an exact range, so `p < k` can narrow it
        p = sb.alu("MAX", I64, sb.alu("MIN", I64, pb, k), 0, hint="p")
        steps = sb.mov(I64, BLOCK, hint="p_n")
        inner, block_end = sb.label("kstep"), sb.label("kblock_end")
        sb.place(inner)
        sb.bra(block_end, pred=sb.setp("ge", I64, p, k))
        self._step(p, a_rows, part)
        sb.alu("ADD", I64, p, 1, dst=p)
        sb.loop(steps, inner)
        sb.place(block_end)
        _each(lambda m, acc: sb.alu("ADD", t, m, acc, dst=m), mid, part)
        sb.alu("SUB", I64, left, 1, dst=left)
        # a group ends after GROUP blocks or with the sum (p = k), so `mid` is empty at kdone
        more = sb.alu("AND", DType.BOOL, sb.setp("gt", I64, left, 0), sb.setp("lt", I64, p, k))
        sb.bra(same_group, pred=more)
        if comp is None:
            wide = sb.reg(F64, hint="wide")  # one scratch register: fewer registers, faster verify
            _each(lambda tot, m: sb.alu("ADD", F64, tot, sb.emit("CVT", F64, m, dtype2=F32, dst=wide), dst=tot),
                  total, mid)
        else:
            self._two_sum(total, comp, mid)
        _each(lambda m: sb.mov(t, 0.0, dst=m), mid)
        sb.mov(I64, groups, dst=left)
        sb.place(same_group)
        sb.alu("ADD", I64, pb, BLOCK, dst=pb)
        sb.loop(blocks, outer)
        sb.place(done)
        self._store(total, comp)

    def _two_sum(self, total: list[list[Reg]], comp: list[list[Reg]], mid: list[list[Reg]]) -> None:
        """total += mid, each addition's rounding error added to comp (Knuth's TwoSum,
        which needs no ordering of the two magnitudes)."""
        sb = self.sb
        s, back, err = (sb.reg(F64, hint=h) for h in ("two_sum", "back", "err"))  # shared scratch

        def add(tot: Reg, c: Reg, m: Reg) -> None:
            sb.alu("ADD", F64, tot, m, dst=s)
            sb.alu("SUB", F64, s, tot, dst=back)
            # (tot - (s - back)) + (m - back): what s lost of tot and of m
            sb.alu("ADD", F64, sb.alu("SUB", F64, tot, sb.alu("SUB", F64, s, back, dst=err), dst=err),
                   sb.alu("SUB", F64, m, back, dst=back), dst=err)
            sb.alu("ADD", F64, c, err, dst=c)
            sb.mov(F64, s, dst=tot)

        _each(add, total, comp, mid)

    def groups(self) -> Operand:
        """Blocks per f32 group for this k (module docstring, LONG_GROUPS)."""
        sb = self.sb
        groups: Operand = Imm(GROUP)
        for above, blocks in LONG_GROUPS:
            groups = sb.sel(I64, sb.setp("gt", I64, self.k, above), blocks, groups,
                            dst=groups if isinstance(groups, Reg) else None)
        return groups

    def b_row(self, p: Reg) -> list[Reg]:
        """The tile's columns of `b`'s row `p`: consecutive values of its packed panel."""
        sb, t, cols = self.sb, self.c.dtype, self.cols
        base = sb.alu("ADD", I64, sb.alu("MUL", I64, p, cols), self.panel, hint="bidx")
        return [sb.ldg(t, self.panels, base, q, hint="bv") for q in range(cols)]

    def _step(self, p: Reg, a_rows: Sequence[Reg], part: list[list[Reg]]) -> None:
        sb, t = self.sb, self.c.dtype
        bv = self.b_row(p)
        for a_row, prow in zip(a_rows, part):
            av = sb.ldg(t, self.c.a, sb.alu("ADD", I64, a_row, p, hint="aidx"), hint="av")
            for acc, b in zip(prow, bv):
                sb.alu("FMA", t, av, b, acc, dst=acc)

    def _store(self, total: list[list[Reg]], comp: list[list[Reg]] | None) -> None:
        """The statement per output, its sum the f64 total rounded to f32, or (f64) the
        total plus its compensation where the total is finite; an infinite or NaN total
        as it is (its compensation is NaN: inf - inf), like the in-lane loop's plain sum."""
        sb, gen, st = self.sb, self.gen, self.st
        *batch, i, j = st.vars
        uses = _outer_vars(st.body)
        *z_dims, m_dim, n_dim = self.target.shape
        rows, cols, places = self.outputs(i in uses, j in uses)
        result = sb.reg(self.c.dtype, hint="sum")
        wide = sb.reg(F64, hint="wide")
        for r, trow in enumerate(total):
            row = rows[r]
            for q, tot in enumerate(trow):
                crow, off = places(r, q)
                gen.push()
                if comp is None:
                    sb.emit("CVT", F32, tot, dtype2=F64, dst=result)
                else:
                    finite = sb.setp("eq", F64, sb.alu("SUB", F64, tot, tot, dst=wide), 0.0)
                    sb.sel(F64, finite, sb.alu("ADD", F64, tot, comp[r][q], dst=wide), tot, dst=result)
                gen.scopes[-1][self.c.reduce] = result
                gen.bind(i, row, m_dim)
                gen.bind(j, cols[q], n_dim)
                if batch:
                    gen.bind(batch[0], self.zb, z_dims[0])
                sb.stg(self.target.dtype, self.target.name, gen.value_as(st.body, self.target.dtype), crow, off)
                gen.pop()

    def outputs(self, use_i: bool, use_j: bool) -> tuple[list[Operand], list[Operand], Callable]:
        """The tile's row and column indices (where the statement uses them) and
        `places(r, q)`: the index and offset in the target of output (r, q)."""
        sb, *_, i, j = self.sb, *self.st.vars
        cols = [sb.alu("ADD", I64, self.j0, q, hint=j) if use_j else self.j0 for q in range(self.cols)]
        rows = [sb.alu("ADD", I64, self.i0, r, hint=i) if use_i else self.i0 for r in range(TILE_ROWS)]
        crow = sb.alu("ADD", I64, sb.alu("MUL", I64, self.i0, self.n, hint="crow"), self.j0, hint="cidx")
        if self.t_base is not None:
            crow = sb.alu("ADD", I64, crow, self.t_base, hint="cidx")
        crows = [crow]
        for _ in range(TILE_ROWS - 1):
            crows.append(sb.alu("ADD", I64, crows[-1], self.n, hint="cidx"))
        return rows, cols, lambda r, q: (crows[r], q)


class _NarrowTile(_Tile):
    """A tile of TILE_ROWS x `cols` outputs at (i0, j0) of a matrix that may be smaller:
    its row r is `min(i0 + r, m - 1)` and its column q `min(j0 + q, n - 1)`, so a matrix
    of fewer rows or columns computes its last ones more than once, by the same
    instructions in the same order (the same bits, stored to the same place). It reads
    `b` in place (a row of b at `p * n`): only small matrices and edges take it. The
    clamped columns are not consecutive to the backend, so the loads of `b` are scalar;
    the FMAs are the tile's."""

    def __init__(self, gen: ExprGen, st: Compute, target: TensorDecl, c: Contraction,
                 dims: tuple[Operand, Operand, Operand], i0: Reg, j0: Reg, zb: Reg | None, cols: int,
                 clamp_cols: bool):
        super().__init__(gen, st, target, c, dims, i0, j0, zb, c.b)
        sb = self.sb
        self._cols, self.clamp_cols = cols, clamp_cols
        last_row, last_col = sb.alu("SUB", I64, self.m, 1), sb.alu("SUB", I64, self.n, 1)
        self.rows = [sb.alu("MIN", I64, sb.alu("ADD", I64, i0, r), last_row, hint="i") for r in range(TILE_ROWS)]
        self.col = [sb.alu("MIN", I64, sb.alu("ADD", I64, j0, q), last_col, hint="j") if clamp_cols
                    else sb.alu("ADD", I64, j0, q, hint="j") for q in range(cols)]
        # a batch's first element of b, in place
        self.b_base = sb.alu("MUL", I64, sb.alu("MUL", I64, zb, self.k), self.n, hint="bbase") \
            if zb is not None and c.b_batched else None

    cols = property(lambda self: self._cols)

    def a_rows(self) -> list[Reg]:
        sb = self.sb
        out = []
        for row in self.rows:
            a_row = sb.alu("MUL", I64, row, self.k, hint="arow")
            out.append(sb.alu("ADD", I64, a_row, self.a_base, hint="arow") if self.a_base is not None else a_row)
        return out

    def b_row(self, p: Reg) -> list[Reg]:
        sb, t = self.sb, self.c.dtype
        base = sb.alu("MUL", I64, p, self.n, hint="brow")
        if self.b_base is not None:
            base = sb.alu("ADD", I64, base, self.b_base, hint="brow")
        if not self.clamp_cols:  # consecutive values: offsets of one index, which vectorize
            base = sb.alu("ADD", I64, base, self.j0, hint="bidx")
            return [sb.ldg(t, self.c.b, base, q, hint="bv") for q in range(self.cols)]
        return [sb.ldg(t, self.c.b, sb.alu("ADD", I64, base, col, hint="bidx"), hint="bv") for col in self.col]

    def outputs(self, use_i: bool, use_j: bool) -> tuple[list[Operand], list[Operand], Callable]:
        sb = self.sb
        crows = [sb.alu("MUL", I64, row, self.n, hint="crow") for row in self.rows]
        if self.t_base is not None:
            crows = [sb.alu("ADD", I64, crow, self.t_base, hint="crow") for crow in crows]
        if not self.clamp_cols:
            crows = [sb.alu("ADD", I64, crow, self.j0, hint="cidx") for crow in crows]
            return self.rows, self.col, lambda r, q: (crows[r], q)
        return self.rows, self.col, lambda r, q: (sb.alu("ADD", I64, crows[r], self.col[q], hint="cidx"), 0)


def _each(fn: Callable[..., object], *tiles: list[list[Reg]]) -> None:
    for rows in zip(*tiles):
        for regs in zip(*rows):
            fn(*regs)


def _outer_vars(body: Expr) -> set[str]:
    """Index variables `body` uses outside its REDUCE."""
    out: set[str] = set()
    stack, seen = [body], set()
    while stack:
        e = stack.pop()
        if id(e) in seen or e.op == "REDUCE":
            continue
        seen.add(id(e))
        if e.op == "IDX":
            out.add(e.arg)
        stack.extend(e.srcs)
    return out


__all__ = ["BLOCK", "GROUP", "LONG_GROUPS", "NARROW_COLS", "TILE_COLS", "TILE_ROWS", "Contraction", "narrow_cols",
           "tile_cols",
           "contraction_stages", "group_blocks", "match_contraction"]
