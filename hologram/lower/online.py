"""Lowering, part 5: the online max-and-sum (`OnlineMaxSum`, passes/ir_online.py).

`m = max(v)` and `s = sum(exp(v - m))` over `j < E`, reading `v` once, in two stages:

    .stage m   domain [E] block [CHUNK]     the first lane of each block does one chunk:
               m_b = max(v) over the chunk, keeping the values in the block's shared
               array, then s_b = sum(exp(v - m_b)) over that array (the input is read
               once); it stores (m_b, s_b) in the scratch temp and contributes
               ReduceMax m_b to m
    .stage s   domain [1]                   s = sum over chunks of s_b * exp(m_b - m)

Chunks are CHUNK (1024) elements: every block's lead lane loops over exactly CHUNK
values, so its loops have a constant trip count and its loads are proven in bounds by the
verifier (no checks, so the backend vectorizes them). The last chunk would stick out of
the array; like a gemm tile (contract.py), it moves back inside and overlaps its
neighbour: its maximum then also covers some of the neighbour's values (harmless: any
`m_b` at least the chunk's own values gives the same `s_b * exp(m_b - m)`), and its sum
skips them. An array shorter than a chunk is one block whose lead lane loops over all E
values and stores `s` itself (the combining stage then does nothing).

Accuracy: `exp(v - m_b)` is computed in the kernel's type; for f32 the chunk sums, the
scratch values and the combination are f64, so `s` errs by a few ulp of the terms (the
exp's own error and that of `exp(m_b - m)`), never by the length of the sum.

Special values, as the two-pass form gives them: a NaN anywhere makes `m` NaN, and `s`
NaN. A chunk whose values are all -inf has `m_b = -inf` and `s_b = NaN` (`exp(-inf -
-inf)`); its contribution is 0 when `exp(m_b - m)` is 0 (some value above -inf exists;
the two-pass terms `exp(-inf - m)` are 0 too) and NaN otherwise (every value is -inf:
NaN, as `exp(-inf - -inf)`). `+inf` values give `m = inf` and `s = NaN` (`exp(inf - inf)`),
through `s_b * exp(inf - inf)`.

The scratch temp holds two f64 per chunk, (m_b, s_b) at 2b and 2b+1; it is declared with
E elements, which covers the ceil(E / CHUNK) chunks of an array of at least one chunk
(the only case that uses it; the ISA's shapes are affine, so E is the tight bound it can
state, and backends leave untouched pages of a temp unallocated).
"""

from __future__ import annotations

from typing import Callable

from hologram.core.types import Affine, DType
from hologram.ir import Expr, OnlineMaxSum, TensorDecl
from hologram.isa.builder import ProgramBuilder, StageBuilder
from hologram.isa.program import Addr, MemDecl, Operand, Reg, Special
from hologram.lower.expr import ExprGen
from hologram.lower.loops import reduce_in_lane
from hologram.lower.plan import I64, Names, affine_expr

CHUNK = 1024  # the ISA's largest block; one lane of each block works
F64 = DType.F64


def online_max_sum_stages(pb: ProgramBuilder, st: OnlineMaxSum, decls: dict[str, TensorDecl],
                          stage_name: Callable[[str], str]) -> None:
    """The two stages computing `st` (module docstring), and their scratch temp (added to
    `decls`); `stage_name(base)` gives fresh stage names."""
    m_decl, s_decl = decls[st.max_target], decls[st.target]
    t = s_decl.dtype
    acc_t = F64  # chunk sums, scratch and combination: f64 for f32 data too
    ((var, extent),) = st.axes
    scratch = Names(decls).temp(f"{st.target}_chunks", acc_t, (extent,))
    pb.temp(scratch.name, scratch.dtype, scratch.shape)
    _chunk_stage(pb.stage(stage_name(st.max_target), (extent,), (CHUNK,)), st, decls, scratch, t, acc_t)
    _combine_stage(pb.stage(stage_name(st.target), (1,), (1,)), st, decls, scratch, m_decl, s_decl, acc_t)


def _chunk_stage(sb: StageBuilder, st: OnlineMaxSum, decls: dict[str, TensorDecl], scratch: TensorDecl,
                 t: DType, acc_t: DType) -> None:
    gen = ExprGen(sb, decls, reduce_in_lane)
    ((var, extent),) = st.axes
    sb.init(st.max_target, float("-inf"))
    n = gen.value(affine_expr(extent))
    small, end = sb.label("small"), sb.label("end")
    sb.bra(end, pred=sb.setp("ne", I64, Special("tid.x"), 0))
    sb.bra(small, pred=sb.setp("lt", I64, n, CHUNK))
    # a full chunk; the last one moves back inside the array (module docstring)
    start = sb.alu("MUL", I64, Special("ctaid.x"), CHUNK, hint="start")
    base = sb.alu("MAX", I64, sb.alu("MIN", I64, start, sb.alu("SUB", I64, n, CHUNK)), 0, hint="base")
    skip = sb.alu("SUB", I64, start, base, hint="skip")
    mb, total = _chunk(gen, st.value, var, extent, base, skip, t, acc_t)
    slot = sb.alu("MUL", I64, Special("ctaid.x"), 2, hint="slot")
    sb.stg(acc_t, scratch.name, gen.convert(mb, t, acc_t), slot, checked=True)
    sb.stg(acc_t, scratch.name, total, slot, 1, checked=True)
    sb.reduce("ReduceMax", t, st.max_target, mb)
    sb.bra(end)
    sb.place(small)
    mb, total = _chunk(gen, st.value, var, extent, None, None, t, acc_t)
    sb.reduce("ReduceMax", t, st.max_target, mb)
    sb.stg(t, st.target, gen.convert(total, acc_t, t))
    sb.place(end)


def _chunk(gen: ExprGen, value: Expr, var: str, extent: Affine, base: Reg | None, skip: Reg | None,
           t: DType, acc_t: DType) -> tuple[Reg, Reg]:
    """(max of `value`, sum of exp(value - max) in `acc_t`) over the CHUNK values of `var`
    from `base` (the sum skipping the first `skip`), or over all of `extent` when `base`
    is None. Two loops: a full chunk's values go through the block's shared array, so the
    second loop reads them from there (memory the block owns, in cache) and the input is
    read once; a short array (under CHUNK, and no longer provably inside the shared array)
    is read twice, from cache."""
    sb = gen.sb
    count = CHUNK if base is not None else gen.value(affine_expr(extent))
    if base is not None:
        shared = f"{var}_chunk"
        sb.shared.append(MemDecl(shared, t, CHUNK))

    def loop(step: Callable[[Reg], None]) -> None:
        k = sb.mov(I64, 0, hint="k")
        left = sb.mov(I64, count, hint="k_n")
        top = sb.label("chunk")
        sb.place(top)
        gen.push()
        step(k)
        gen.pop()
        sb.alu("ADD", I64, k, 1, dst=k)
        sb.loop(left, top)

    def load(k: Reg) -> Operand:
        gen.bind(var, sb.alu("ADD", I64, base, k, hint=var) if base is not None else k, extent)
        return gen.value_as(value, t)

    mb = sb.mov(t, float("-inf"), hint="mb")

    def fold_max(k: Reg) -> None:
        v = load(k)
        if base is not None:
            sb.emit("STS", t, v, addr=Addr(shared, k, 0))
        gen.isa("MAX", t, mb, v, dst=mb)

    loop(fold_max)
    total = sb.mov(acc_t, 0.0, hint="sb")

    def add(k: Reg) -> None:
        v = sb.emit("LDS", t, addr=Addr(shared, k, 0), hint="v") if base is not None else load(k)
        term = gen.convert(gen.isa("EXP", t, gen.isa("SUB", t, v, mb)), t, acc_t)
        if skip is not None:  # values of the previous chunk (the last chunk overlaps it)
            term = gen.sel(acc_t, gen.setp("ge", I64, k, skip), term, 0.0)
        gen.isa("ADD", acc_t, total, term, dst=total)

    loop(add)
    return mb, total


def _combine_stage(sb: StageBuilder, st: OnlineMaxSum, decls: dict[str, TensorDecl], scratch: TensorDecl,
                   m_decl: TensorDecl, s_decl: TensorDecl, acc_t: DType) -> None:
    """One lane: s = sum over chunks of s_b * exp(m_b - m), where a chunk whose scale
    exp(m_b - m) is 0 adds 0 (its s_b may be NaN: all -inf; module docstring)."""
    gen = ExprGen(sb, decls, reduce_in_lane)
    ((_, extent),) = st.axes
    t = s_decl.dtype
    n = gen.value(affine_expr(extent))
    end = sb.label("end")
    sb.bra(end, pred=sb.setp("lt", I64, n, CHUNK))  # one chunk: the first stage stored s
    chunks = sb.alu("DIV", I64, sb.alu("ADD", I64, n, CHUNK - 1), CHUNK, hint="chunks")
    m = gen.convert(sb.ldg(t, m_decl.name, hint="m"), t, acc_t)
    total = sb.mov(acc_t, 0.0, hint="s")
    slot = sb.mov(I64, 0, hint="slot")
    top = sb.label("combine")
    sb.place(top)
    mb = sb.ldg(acc_t, scratch.name, slot, checked=True, hint="mb")
    sb_ = sb.ldg(acc_t, scratch.name, slot, 1, checked=True, hint="sb")
    scale = gen.isa("EXP", acc_t, gen.isa("SUB", acc_t, mb, m))
    term = gen.sel(acc_t, gen.setp("eq", acc_t, scale, 0.0), 0.0, gen.isa("MUL", acc_t, sb_, scale))
    gen.isa("ADD", acc_t, total, term, dst=total)
    sb.alu("ADD", I64, slot, 2, dst=slot)
    sb.loop(chunks, top)
    sb.stg(t, s_decl.name, gen.convert(total, acc_t, t))
    sb.place(end)


__all__ = ["CHUNK", "online_max_sum_stages"]
