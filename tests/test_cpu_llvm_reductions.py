"""cpu_llvm: the fast paths of cross-lane reductions agree with the contract.

- float ReduceMin/ReduceMax use IEEE minimum/maximum so the lane loop vectorizes: a NaN
  anywhere (vector body or scalar tail) gives NaN, and ties of -0.0/+0.0 give a zero;
- float sums into one element are summed per block and compensated across blocks, so a
  multi-million-term sum stays within the log2(n) bound of `assert_close`.
"""

from __future__ import annotations

import numpy as np
import pytest

from hologram.core.errors import ExecutionError
from hologram.core.isa import Addr, BufferParam, Imm, Init, Instr, Label, Pred, Reg
from hologram.core.types import Affine, DType
from hologram.testing import assert_close
from hologram_cpu_llvm import jit
from hologram_cpu_llvm.codegen import compile_program

from test_cpu_llvm_codegen import REAL, I, N, _gid, both, llvm_launch, stage_program

F32, F64, I64 = DType.F32, DType.F64, DType.I64


def _reduce_program(op: str, t: DType, *, offset: int = 0, size: Affine = Affine.of(1), checked: bool = False,
                    block: int = 256, identity: float | None = None):
    v = Reg("v")
    body = [_gid(), Instr("LDG", t, v, addr=Addr("x", I)),
            Instr(op, t, srcs=(v,), addr=Addr("r", None, offset), checked=checked), Instr("EXIT")]
    params = (BufferParam("x", t, (N,), "in"), BufferParam("r", t, (size,), "inout"))
    inits = [Init("r", offset, identity)] if identity is not None else []
    return stage_program(body, [("i", I64), ("v", t)], params=params, inits=inits, block=(block,))


def _run(prog, x: np.ndarray, r: np.ndarray, *, chunk: int | None = None) -> np.ndarray:
    bufs = {"x": x, "r": r.copy()}
    llvm_launch(prog, bufs, {}, {"n": len(x)}, blocks_per_call=chunk)
    return bufs["r"]


# ---------------------------------------------------------------- min / max
@pytest.mark.parametrize("t", [F32, F64], ids=str)
@pytest.mark.parametrize("op", ["ReduceMin", "ReduceMax"])
def test_float_min_max_propagate_nan_from_every_position(op, t):
    ident = np.inf if op == "ReduceMin" else -np.inf
    prog = _reduce_program(op, t, identity=ident)
    n = 1000  # 3 full blocks of 256 and a partial one: vector bodies and scalar tails
    x = np.random.default_rng(3).standard_normal(n).astype(t.np)
    want = x.min() if op == "ReduceMin" else x.max()
    assert _run(prog, x, np.zeros(1, t.np))[0] == want
    for pos in (0, 1, 15, 16, 63, 64, 255, 256, 257, 767, 768, 990, n - 1):
        y = x.copy()
        y[pos] = np.nan
        assert np.isnan(_run(prog, y, np.zeros(1, t.np))[0]), pos
        assert np.isnan(_run(prog, y, np.zeros(1, t.np), chunk=1)[0]), pos
    # Infinities are ordinary values; the identity is returned for an all-identity input.
    y = np.full(n, ident, t.np)
    assert _run(prog, y, np.zeros(1, t.np))[0] == ident
    y[500] = -ident
    assert _run(prog, y, np.zeros(1, t.np))[0] == -ident


@pytest.mark.parametrize("op", ["ReduceMin", "ReduceMax"])
def test_float_min_max_of_signed_zeros_is_a_zero(op):
    """Which zero wins a -0.0/+0.0 tie depends on the combination order, which the ISA
    leaves to the backend; the value must be a zero, and the interpreter's order is one
    of the allowed ones (test_cpu_llvm_codegen.compare_buffers accepts either sign)."""
    prog = _reduce_program(op, F32, identity=np.inf if op == "ReduceMin" else -np.inf)
    x = np.where(np.arange(700) % 3 == 0, -0.0, 0.0).astype(np.float32)
    got, want = both(prog, {"x": x, "r": np.zeros(1, np.float32)}, {}, {"n": len(x)})
    assert got["r"][0] == 0.0 and want["r"][0] == 0.0
    same_sign = np.full(700, -0.0, np.float32)
    assert np.signbit(_run(prog, same_sign, np.zeros(1, np.float32))[0])  # only -0.0: -0.0


@pytest.mark.parametrize("t", [F32, F64], ids=str)
def test_float_min_max_loop_vectorizes(t):
    optimized: list[str] = []
    jit.compile_object(compile_program(_reduce_program("ReduceMax", t, identity=-np.inf)).module_ir, optimized)
    assert "@llvm.maximum.v" in optimized[0]  # a vector maximum: the lane loop was widened


# --------------------------------------------------------------------- sums
@pytest.mark.parametrize("checked", [False, True])
@pytest.mark.parametrize("t", [F32, F64], ids=str)
def test_long_float_sum_meets_the_log2_bound(t, checked):
    """2**22 terms of 0.1: adding each block's total to one running f32 partial rounds
    the same way every time and errs by ~4e-4 relative; the contract allows ~6e-6."""
    n = 1 << 22
    prog = _reduce_program("ReduceAdd", t, checked=checked, identity=0.0)
    x = np.full(n, 0.1, t.np)
    exact = np.full(1, np.float64(x[0]) * n).astype(t.np)
    for chunk in (None, 4096):
        assert_close(_run(prog, x, np.zeros(1, t.np), chunk=chunk), exact, reduction_n=n)
    bufs = {"x": x, "r": np.zeros(1, t.np)}
    REAL.launch(REAL.prepare(prog), bufs, {}, {"n": n})
    assert_close(bufs["r"], exact, reduction_n=n)


def test_float_sum_special_values():
    prog = _reduce_program("ReduceAdd", F32, identity=-0.0)
    n = 3000
    x = np.full(n, -0.0, np.float32)
    r = _run(prog, x, np.zeros(1, np.float32))
    assert r[0] == 0.0 and np.signbit(r[0])  # -0.0 contributions onto the -0.0 identity
    for specials, want in (({5: np.inf}, np.inf), ({5: np.inf, 2900: -np.inf}, np.nan), ({700: np.nan}, np.nan),
                           ({0: 3e38, 1: 3e38}, np.inf)):
        y = np.ones(n, np.float32)
        for k, v in specials.items():
            y[k] = v
        for chunk in (None, 1):
            got = _run(prog, y, np.zeros(1, np.float32), chunk=chunk)[0]
            assert (np.isnan(got) and np.isnan(want)) or got == want, (specials, chunk, got)


def test_float_sum_next_to_scattered_contributions():
    """A buffer that also receives contributions at a lane-dependent index keeps every
    contribution in memory, so the constant element gets both kinds."""
    v, j = Reg("v"), Reg("j")
    body = [_gid(), Instr("LDG", F32, v, addr=Addr("x", I)), Instr("REM", I64, j, (I, Imm(4))),
            Instr("ReduceAdd", F32, srcs=(v,), addr=Addr("r")),
            Instr("ReduceAdd", F32, srcs=(v,), addr=Addr("r", j)), Instr("EXIT")]
    params = (BufferParam("x", F32, (N,), "in"), BufferParam("r", F32, (Affine.of(4),), "inout"))
    prog = stage_program(body, [("i", I64), ("v", F32), ("j", I64)], params=params, block=(128,))
    x = (np.arange(2000) % 7).astype(np.float32)
    got, want = both(prog, {"x": x, "r": np.zeros(4, np.float32)}, {}, {"n": len(x)})
    assert_close(got["r"], want["r"], reduction_n=len(x))
    assert got["r"][0] == x.sum() + x[::4].sum()


def test_checked_sum_element_out_of_range():
    """A checked constant element beyond the buffer: an error if a lane reaches the
    reduction, and no write at all when every lane branches around it."""
    m = Affine.of("m")
    v, p = Reg("v"), Reg("p")
    body = [_gid(), Instr("LDG", F32, v, addr=Addr("x", I)),
            Instr("SET", F32, p, (v, Imm(0.0)), mod="lt"),
            Instr("BRA", target="skip", pred=Pred(p)),
            Instr("ReduceAdd", F32, srcs=(v,), addr=Addr("r", None, 2), checked=True), Label("skip"), Instr("EXIT")]
    params = (BufferParam("x", F32, (N,), "in"), BufferParam("r", F32, (m,), "inout"))
    prog = stage_program(body, [("i", I64), ("v", F32), ("p", DType.BOOL)], params=params, symbols=("n", "m"))
    r = np.full(2, 7.0, np.float32)
    bufs = {"x": np.full(300, -1.0, np.float32), "r": r.copy()}
    llvm_launch(prog, bufs, {}, {"n": 300, "m": 2})
    assert (bufs["r"] == r).all()
    bufs = {"x": np.full(300, 1.0, np.float32), "r": r.copy()}
    with pytest.raises(ExecutionError, match="global"):
        llvm_launch(prog, bufs, {}, {"n": 300, "m": 2})
    bufs = {"x": np.full(300, 1.0, np.float32), "r": np.zeros(3, np.float32)}
    llvm_launch(prog, bufs, {}, {"n": 300, "m": 3})
    assert bufs["r"][2] == 300.0


@pytest.mark.parametrize("layout", ["regions", "state machine"])
def test_float_sum_across_barriers(layout):
    """Block accumulators under both barrier layouts: lanes contribute before and after
    a barrier (straight-line regions), or inside a subroutine that syncs (state machine)."""
    from hologram.core.isa import MemDecl, Special
    v, t, w = Reg("v"), Reg("t"), Reg("w")
    head = [_gid(), Instr("MOV", I64, t, (Special("tid.x"),)), Instr("LDG", F32, v, addr=Addr("x", I)),
            Instr("ReduceAdd", F32, srcs=(v,), addr=Addr("r"))]
    if layout == "regions":
        body = head + [Instr("STS", F32, srcs=(v,), addr=Addr("sh", t)), Instr("BarSync"),
                       Instr("LDS", F32, w, addr=Addr("sh", None, 0)),
                       Instr("ReduceAdd", F32, srcs=(w,), addr=Addr("r")), Instr("EXIT")]
    else:
        body = head + [Instr("CALL", target="sync"), Instr("ReduceAdd", F32, srcs=(w,), addr=Addr("r")),
                       Instr("EXIT"), Label("sync"), Instr("STS", F32, srcs=(v,), addr=Addr("sh", t)),
                       Instr("BarSync"), Instr("LDS", F32, w, addr=Addr("sh", None, 0)), Instr("RET")]
    params = (BufferParam("x", F32, (N,), "in"), BufferParam("r", F32, (Affine.of(1),), "inout"))
    prog = stage_program(body, [("i", I64), ("v", F32), ("t", I64), ("w", F32)], params=params,
                         shared=[MemDecl("sh", F32, 32)], block=(32,))
    x = (np.arange(1000) % 13 - 6).astype(np.float32)
    got, want = both(prog, {"x": x, "r": np.zeros(1, np.float32)}, {}, {"n": len(x)})
    assert got["r"][0] == want["r"][0] == x.sum() + sum(32 * x[k] for k in range(0, 992, 32)) + 8 * x[992]


ROWS = """[kernel]
name = "rows"
version = "1.0.0"
inputs = {{ x = "{t}[m, n]" }}
outputs = {{ y = "{t}[m]" }}
body = "y[i] = sum(x[i, j], j)"
"""


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 15, 16, 17, 33, 100, 1000])
@pytest.mark.parametrize("t", ["f16", "f32", "f64"])
def test_in_lane_float_sums_of_every_length(t, n):
    """Row sums (one lane per row, lower_loops.py): f16/f32 accumulate in f64 with a
    reassociable add (vectorized by cpu_llvm), f64 in 8 unrolled Kahan accumulators after
    an n % 8 remainder. Specials in the remainder and in the blocks, cancellation, and
    rows as long as the loop, on both backends, against the contract."""
    import hologram as hg
    dt = DType(t).np
    rng = np.random.default_rng(n)
    x = rng.uniform(-4, 4, (7, n)).astype(dt)
    if n:
        x[1, -1] = np.inf
        x[2, 0] = np.nan
        x[3, 0], x[3, -1] = np.inf, -np.inf
        x[4] = np.finfo(dt).eps / 4
        x[4, 0] = 1.0
        x[5, :] = -0.0
    k = hg.compile(ROWS.format(t=t), format="toml")
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN, as numpy's
        want = x.astype(np.float64).sum(axis=1).astype(dt)
    outs = [k.on(b)(x) for b in ("interp", "cpu_llvm")]
    for got in outs:
        assert_close(got, want, reduction_n=max(n, 1), magnitude=np.abs(x.astype(np.float64)).sum(axis=1))
    if t == "f64":  # strict Kahan steps in program order on both backends: the same bits
        np.testing.assert_array_equal(outs[0].view(np.uint64), outs[1].view(np.uint64))
