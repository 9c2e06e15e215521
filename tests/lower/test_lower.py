"""KernelIR -> Program: structure (stages, fusion, bounds checks), the builder, and end to
end runs on the interp backend compared with numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hologram.core import atlas
from hologram.isa.asm import format_program, parse_program
from hologram.isa.builder import ProgramBuilder, StageBuilder, gid, sym
from hologram.core.errors import CompileError, ExecutionError
from hologram.ir import Accumulate, Compute, Expr, KernelIR, TensorDecl
from hologram.isa.program import Imm, Instr, Label, Program, Reg
from hologram.lower.stages import lower
from hologram.core.types import convert_const
from hologram.lower.plan import make_plan
from hologram.core.types import Affine, DType
from hologram.verify.verifier import verify
from hologram.passes.ir_fuse import fuse  # the lowering materializes every temp; fusion is this pass
from hologram.testing.contract import assert_close
from hologram_interp import InterpBackend
from erf_reference import ERF, ERFC

BOOL, I8, I32, I64, U8, U32 = DType.BOOL, DType.I8, DType.I32, DType.I64, DType.U8, DType.U32
F16, F32, F64 = DType.F16, DType.F32, DType.F64
BACKEND = InterpBackend()


# ------------------------------------------------------------------ IR shorthands
def T(name: str, dtype: DType, *shape: int | str | Affine, kind: str = "input") -> TensorDecl:
    return TensorDecl(name, dtype, tuple(Affine.of(d) for d in shape), kind)


def V(var: str) -> Expr:
    return Expr.idx(var)


def K(value, dtype: DType) -> Expr:
    return Expr.const(value, dtype)


def L(name: str, dtype: DType, *index: Expr) -> Expr:
    return Expr.load(name, dtype, index)


def E(op: str, dtype: DType, *srcs: Expr) -> Expr:
    return Expr(op, dtype, srcs)


def R(kind: str, dtype: DType, body: Expr, *axes: tuple[str, int | str | Affine]) -> Expr:
    return Expr("REDUCE", dtype, (body,), (kind, tuple((v, Affine.of(x)) for v, x in axes)))


def kernel(params, outputs, body, temps=(), symbols=()) -> KernelIR:
    return KernelIR("k", "1.0.0", tuple(params), tuple(outputs), tuple(temps), tuple(body), tuple(symbols))


def run(kir: KernelIR, symbols: dict | None = None, **args) -> dict[str, np.ndarray]:
    """Lower, verify, check the assembly round-trips, run on interp; the outputs by name."""
    prog = verify(lower(kir))
    assert parse_program(format_program(prog)) == prog
    symbols = symbols or {}
    bufs, scalars = {}, {}
    for d in kir.params:
        if d.kind == "scalar":
            scalars[d.name] = d.dtype.np.type(args[d.name])
        else:
            bufs[d.name] = np.ascontiguousarray(args[d.name], dtype=d.dtype.np)
    outs = {}
    for d in kir.outputs:
        shape = tuple(x.evaluate(symbols) for x in d.shape)
        outs[d.name] = bufs[d.name] = np.full(shape, 7, d.dtype.np)  # garbage: stages must overwrite
    BACKEND.launch(BACKEND.prepare(prog), bufs, scalars, symbols)
    return outs


def instrs(prog: Program, stage: int = 0) -> list[Instr]:
    return [i for i in prog.stages[stage].body if isinstance(i, Instr)]


def ops(prog: Program, stage: int = 0) -> list[str]:
    return [i.op for i in instrs(prog, stage)]


def same(got: np.ndarray, want: np.ndarray) -> None:
    """Bit-exact (NaN equal to NaN, and -0.0 distinct from 0.0)."""
    want = np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "f":
        bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
        nan = np.isnan(got) & np.isnan(want)
        mismatch = (got.view(bits) != want.view(bits)) & ~nan
        assert not mismatch.any(), f"at {np.argwhere(mismatch)[:5].tolist()}: {got[mismatch][:5]} != {want[mismatch][:5]}"
    else:
        np.testing.assert_array_equal(got, want)


EDGE = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, -7.25, 1e-3, 123.456, -1e4,
                 np.inf, -np.inf, np.nan, 1e30, -1e-30, 5e-324, 7.0, -3.0])


# --------------------------------------------------------------------- the builder
def test_builder_names_registers_and_types_destinations():
    sb = StageBuilder("s", ("n",))
    assert sb.block == (256,)
    i = sb.mov(I64, gid("x"), hint="i")
    assert i == Reg("i") and sb.reg(I64, hint="i") == Reg("i0")
    p = sb.setp("lt", I64, i, sym("n"))
    assert sb.regs[p.name] is BOOL and p.name.startswith("p")
    f = sb.cvt(F32, I64, i)
    assert sb.regs[f.name] is F32 and sb.body[-1].dtype2 is I64
    assert sb.type_of(gid("y")) is I64 and sb.type_of(Imm(1)) is None
    top = sb.label("loop")
    assert top != sb.label("loop")
    stage = sb.build()
    assert stage.body[-1] == Instr("EXIT")
    with pytest.raises(ValueError, match="unknown opcode"):
        sb.emit("FROB", F32)
    with pytest.raises(ValueError, match="1 to 3"):
        StageBuilder("bad", ("a", "b", "c", "d"))


def test_builder_program_runs():
    pb = ProgramBuilder("axpy", symbols=("n",))
    pb.scalar("a", F32)
    pb.buffer("x", F32, ("n",), "in")
    pb.buffer("y", F32, ("n",), "out")
    s = pb.stage("y", ("n",))
    i = s.mov(I64, gid("x"), hint="i")
    s.stg(F32, "y", s.alu("FMA", F32, sym("a"), s.ldg(F32, "x", i), 1.0), i)
    prog = verify(pb.build())
    assert [p.name for p in prog.params] == ["a", "x", "y"] and prog.stages[0].body[-1].op == "EXIT"
    x, y = np.arange(5, dtype=np.float32), np.zeros(5, np.float32)
    BACKEND.launch(BACKEND.prepare(prog), {"x": x, "y": y}, {"a": np.float32(3)}, {"n": 5})
    same(y, 3 * x + 1)


# ------------------------------------------------------------------------ signature
def test_signature_order_roles_and_temps():
    k = kernel([T("x", F32, "n"), T("s", F32, kind="scalar")],
               [T("y", F32, "n", kind="output"), T("total", F64, kind="output")],
               [Compute("y", ("i",), E("MUL", F32, L("x", F32, V("i")), Expr("SCALAR", F32, (), "s"))),
                Compute("total", (), R("sum", F64, E("CAST", F64, L("x", F32, V("j"))), ("j", "n")))],
               symbols=["n"])
    prog = lower(k)
    assert [(p.name, getattr(p, "role", None)) for p in prog.params] == \
        [("x", "in"), ("s", None), ("y", "out"), ("total", "out")]
    assert prog.buffers()["total"].shape == () and prog.symbols == ("n",) and prog.temps == ()
    out = run(k, {"n": 6}, x=np.arange(6), s=2.0)
    same(out["y"], np.arange(6, dtype=np.float32) * 2)
    same(out["total"], np.array(15.0))


# ----------------------------------------------------------- fusion and elementwise
def test_elementwise_chain_fuses_into_one_stage():
    x = L("x", F32, V("i"))
    k = kernel([T("x", F32, "n")], [T("y", F32, "n", kind="output")],
               [Compute("t", ("i",), E("ADD", F32, E("MUL", F32, x, K(2.0, F32)), K(1.0, F32))),
                Compute("u", ("i",), E("ABS", F32, L("t", F32, V("i")))),
                Compute("y", ("i",), E("SQRT", F32, E("MUL", F32, L("u", F32, V("i")), L("t", F32, V("i")))))],
               temps=[T("t", F32, "n", kind="temp"), T("u", F32, "n", kind="temp")], symbols=["n"])
    assert len(lower(k).stages) == 3  # unfused: every temp is a stage
    prog = lower(fuse(k))
    assert len(prog.stages) == 1 and prog.temps == ()
    # value numbering: x is loaded once and t computed once though used twice
    assert ops(prog).count("LDG") == 1 and ops(prog).count("MUL") == 2
    xs = EDGE.astype(np.float32)
    with np.errstate(all="ignore"):
        t = xs * np.float32(2) + np.float32(1)
        same(run(k, {"n": xs.size}, x=xs)["y"], np.sqrt(np.abs(t) * t))


def test_one_dim_accesses_are_direct_everything_else_checked():
    k = kernel([T("x", F32, "n"), T("z", F32, 4)], [T("y", F32, "n", kind="output")],
               [Compute("y", ("i",), E("ADD", F32, L("x", F32, V("i")), L("z", F32, K(2, I64))))], symbols=["n"])
    prog = lower(k)
    mem = {i.addr.buffer: i for i in instrs(prog) if i.addr is not None}
    assert not mem["x"].checked and not mem["y"].checked
    assert mem["z"].checked and mem["z"].addr.index is None and mem["z"].addr.offset == 2
    assert instrs(prog)[0].srcs == (gid("x"),)


def test_broadcasting_two_dims():
    # y[i, j] = a[i, j] + b[0, j] * c[i]   (b: [1, n], c: [m])
    k = kernel([T("a", F64, "m", "n"), T("b", F64, 1, "n"), T("c", F64, "m")],
               [T("y", F64, "m", "n", kind="output")],
               [Compute("y", ("i", "j"), E("ADD", F64, L("a", F64, V("i"), V("j")),
                                           E("MUL", F64, L("b", F64, K(0, I64), V("j")), L("c", F64, V("i")))))],
               symbols=["m", "n"])
    prog = lower(k)
    (stage,) = prog.stages
    assert stage.domain == (Affine.of("n"), Affine.of("m")) and stage.block == (16, 16)
    rng = np.random.default_rng(1)
    a, b, c = rng.standard_normal((3, 5)), rng.standard_normal((1, 5)), rng.standard_normal(3)
    same(run(k, {"m": 3, "n": 5}, a=a, b=b, c=c)["y"], a + b * c[:, None])


def test_stencil_and_affine_shapes():
    x = lambda off: L("x", F32, E("ADD", I64, V("i"), K(off, I64)) if off else V("i"))  # noqa: E731
    k = kernel([T("x", F32, "n")], [T("y", F32, Affine.of("n") - 2, kind="output")],
               [Compute("y", ("i",), E("ADD", F32, E("ADD", F32, x(0), x(1)), x(2)))], symbols=["n"])
    prog = lower(k)
    loads = [i for i in instrs(prog) if i.op == "LDG"]
    assert [i.addr.offset for i in loads] == [0, 1, 2] and len({i.addr.index for i in loads}) == 1
    xs = np.arange(10, dtype=np.float32) ** 2
    same(run(k, {"n": 10}, x=xs)["y"], xs[:-2] + xs[1:-1] + xs[2:])


def test_rank_four_and_five_fold_leading_dims_into_loops():
    for rank in (4, 5):
        dims = [f"d{k}" for k in range(rank)]
        vars_ = [f"i{k}" for k in range(rank)]
        idx = [V(v) for v in vars_]
        # y = x * 2 + mean over the last axis (a per-row reduction, hoisted to a temp)
        row = R("sum", F64, L("x", F64, *idx[:-1], V("r")), ("r", dims[-1]))
        k = kernel([T("x", F64, *dims)], [T("y", F64, *dims, kind="output")],
                   [Compute("y", tuple(vars_), E("ADD", F64, E("MUL", F64, L("x", F64, *idx), K(2.0, F64)), row))],
                   symbols=dims)
        prog = lower(k)
        assert [s.domain for s in prog.stages] == [tuple(Affine.of(d) for d in reversed(dims[:-1][-3:])),
                                                   tuple(Affine.of(d) for d in reversed(dims[-3:]))]
        assert prog.temps[0].shape == tuple(Affine.of(d) for d in dims[:-1])
        shape = (2, 3, 1, 4, 3)[:rank]
        xs = np.random.default_rng(rank).standard_normal(shape)
        got = run(k, dict(zip(dims, shape)), x=xs)["y"]
        mag = 2 * np.abs(xs) + np.abs(xs).sum(axis=-1, keepdims=True)
        assert_close(got, xs * 2 + xs.sum(axis=-1, keepdims=True), reduction_n=shape[-1], magnitude=mag)


def test_empty_and_zero_d_computes():
    k = kernel([T("x", I32, "n"), T("s", I32, kind="scalar")],
               [T("y", I32, "n", kind="output"), T("z", I32, kind="output")],
               [Compute("y", ("i",), E("ADD", I32, L("x", I32, V("i")), K(1, I32))),
                Compute("z", (), E("MUL", I32, Expr("SCALAR", I32, (), "s"), K(3, I32)))], symbols=["n"])
    prog = lower(k)
    assert prog.stages[1].domain == (Affine.of(1),)
    out = run(k, {"n": 0}, x=np.zeros(0), s=5)
    assert out["y"].shape == (0,) and out["z"] == 15


# ---------------------------------------------------------------------- reductions
def softmax_ir() -> KernelIR:
    return kernel([T("x", F32, "n")], [T("y", F32, "n", kind="output")],
                  [Compute("m", (), R("max", F32, L("x", F32, V("j")), ("j", "n"))),
                   Compute("e", ("i",), E("EXP", F32, E("SUB", F32, L("x", F32, V("i")), L("m", F32)))),
                   Compute("y", ("i",), E("DIV", F32, L("e", F32, V("i")),
                                          R("sum", F32, L("e", F32, V("k")), ("k", "n"))))],
                  temps=[T("m", F32, kind="temp"), T("e", F32, "n", kind="temp")], symbols=["n"])


def test_softmax_is_three_stages():
    assert [st.name for st in lower(softmax_ir()).stages] == ["m", "e", "y_sum", "y"]  # unfused
    prog = lower(fuse(softmax_ir()))
    assert len(prog.stages) == 3
    m, s, y = prog.stages
    assert [t.name for t in prog.temps] == ["m", "y_sum"]
    assert "ReduceMax" in ops(prog, 0) and m.inits[0].buffer == "m" and m.inits[0].value == -math.inf
    assert "ReduceAdd" in ops(prog, 1) and "EXP" in ops(prog, 1) and s.inits[0].value == 0.0
    assert "LOOP" not in ops(prog, 2) and ops(prog, 2).count("EXP") == 1
    xs = np.random.default_rng(0).standard_normal(300).astype(np.float32) * 10
    e = np.exp(xs - xs.max())
    assert_close(run(softmax_ir(), {"n": 300}, x=xs)["y"], e / e.sum(), ulps=4, reduction_n=300)


def gemm_ir(dtype=F32) -> KernelIR:
    prod = E("MUL", dtype, L("a", dtype, V("i"), V("p")), L("b", dtype, V("p"), V("j")))
    return kernel([T("alpha", dtype, kind="scalar"), T("a", dtype, "m", "k"), T("b", dtype, "k", "n")],
                  [T("c", dtype, "m", "n", kind="output")],
                  [Compute("c", ("i", "j"), E("MUL", dtype, Expr("SCALAR", dtype, (), "alpha"),
                                              R("sum", dtype, prod, ("p", "k"))))],
                  symbols=["m", "k", "n"])


def test_gemm_loops_in_lane_with_hoisted_row_offset():
    # integers: the f32 and f64 forms are register-tiled (tests/lower/test_lower_contract.py)
    prog = lower(gemm_ir(I64))
    assert len(prog.stages) == 1
    body = prog.stages[0].body
    top = next(k for k, i in enumerate(body) if isinstance(i, Label))
    end = next(k for k, i in enumerate(body) if isinstance(i, Instr) and i.op == "LOOP")
    loop_ops = [i.op for i in body[top:end] if isinstance(i, Instr)]
    assert loop_ops.count("LDG") == 2 and loop_ops.count("MUL") == 2  # i*k was hoisted out
    rng = np.random.default_rng(2)
    a, b = rng.integers(-99, 99, (5, 7)), rng.integers(-99, 99, (7, 3))
    same(run(gemm_ir(I64), {"m": 5, "k": 7, "n": 3}, alpha=3, a=a, b=b)["c"], 3 * (a @ b))
    # k = 0: the zero-trip guard skips the loop, c is alpha * 0
    same(run(gemm_ir(I64), {"m": 2, "k": 0, "n": 3}, alpha=2, a=np.zeros((2, 0), np.int64),
             b=np.zeros((0, 3), np.int64))["c"], np.zeros((2, 3), np.int64))


def test_matvec_integer_is_exact_and_wraps():
    k = kernel([T("a", I32, "m", "n"), T("x", I32, "n")], [T("y", I64, "m", kind="output")],
               [Compute("y", ("i",), R("sum", I64, E("MUL", I32, L("a", I32, V("i"), V("j")), L("x", I32, V("j"))),
                                       ("j", "n")))], symbols=["m", "n"])
    rng = np.random.default_rng(3)
    a = rng.integers(-2**31, 2**31, (4, 6), dtype=np.int32)
    x = rng.integers(-2**31, 2**31, 6, dtype=np.int32)
    with np.errstate(all="ignore"):
        same(run(k, {"m": 4, "n": 6}, a=a, x=x)["y"], (a * x).astype(np.int64).sum(axis=1))


def test_per_axis_sum_and_argmax_with_nan():
    xs = np.array([[1, 5, 5, 2], [np.nan, 1, np.nan, 9], [-np.inf, -np.inf, -np.inf, -np.inf],
                   [3, np.inf, 2, np.inf]], np.float32)
    for kind, fn in (("argmax", np.argmax), ("argmin", np.argmin)):
        k = kernel([T("x", F32, "m", "n")], [T("y", I64, "m", kind="output"), T("s", F32, "m", kind="output")],
                   [Compute("y", ("i",), R(kind, I64, L("x", F32, V("i"), V("j")), ("j", "n"))),
                    Compute("s", ("i",), R("sum", F32, L("x", F32, V("i"), V("q")), ("q", "n")))],
                   symbols=["m", "n"])
        out = run(k, {"m": 4, "n": 4}, x=xs)
        same(out["y"], fn(xs, axis=1))
        same(out["s"], xs.sum(axis=1))


@pytest.mark.parametrize("dtype", [F16, F32, F64])
def test_in_lane_float_sums_keep_every_tiny_term(dtype):
    # a big term then many tiny ones: a sequential sum drops every tiny term
    n = 2048
    tiny = {F16: 2.0**-12, F32: 2.0**-26, F64: 2.0**-55}[dtype]
    xs = np.full((4, n), tiny)
    xs[:, 0] = 1.0
    xs[1, 7], xs[2, 5], xs[2, 9], xs[3, 3] = np.inf, np.inf, -np.inf, np.nan
    xs = xs.astype(dtype.np)
    k = kernel([T("x", dtype, "m", "n")], [T("y", dtype, "m", kind="output")],
               [Compute("y", ("i",), R("sum", dtype, L("x", dtype, V("i"), V("j")), ("j", "n")))],
               symbols=["m", "n"])
    got = run(k, {"m": 4, "n": n}, x=xs)["y"]
    exact = 1.0 + (n - 1) * tiny
    assert abs(float(got[0]) - exact) <= 2 * np.finfo(dtype.np).eps * exact
    same(got[1:], np.array([np.inf, np.nan, np.nan], dtype.np))


def test_argmax_over_two_index_variables_in_lane_is_flat():
    # y[i] = argmax over (j, k) of x[i, j, k]: a flat row-major index, first occurrence
    k = kernel([T("x", I8, "m", 3, 4)], [T("y", I64, "m", kind="output")],
               [Compute("y", ("i",), R("argmax", I64, L("x", I8, V("i"), V("j"), V("k")), ("j", 3), ("k", 4)))],
               symbols=["m"])
    xs = np.random.default_rng(4).integers(-3, 4, (5, 3, 4)).astype(np.int8)
    same(run(k, {"m": 5}, x=xs)["y"], xs.reshape(5, -1).argmax(axis=1))
    # argmin of a bool per row (compared as u8): the first False
    b = E("CMPGT", BOOL, L("x", I8, V("i"), V("j"), V("k")), K(0, I8))
    kb = kernel([T("x", I8, "m", 3, 4)], [T("y", I64, "m", kind="output")],
                [Compute("y", ("i",), R("argmin", I64, b, ("j", 3), ("k", 4)))], symbols=["m"])
    same(run(kb, {"m": 5}, x=xs)["y"], (xs > 0).reshape(5, -1).argmin(axis=1))


def test_lazy_where_inside_a_reduction_loop():
    # y[i] = sum(where(j > 0, x[i, j - 1], 0) * w[j], j): shifted row dot, x[i, -1] never read
    left = L("x", F32, V("i"), E("SUB", I64, V("j"), K(1, I64)))
    term = E("MUL", F32, E("WHERE", F32, E("CMPGT", BOOL, V("j"), K(0, I64)), left, K(0.0, F32)),
             L("w", F32, V("j")))
    k = kernel([T("x", F32, "m", "n"), T("w", F32, "n")], [T("y", F32, "m", kind="output")],
               [Compute("y", ("i",), R("sum", F32, term, ("j", "n")))], symbols=["m", "n"])
    xs = np.arange(12, dtype=np.float32).reshape(3, 4)
    w = np.float32([1, 2, 3, 4])
    same(run(k, {"m": 3, "n": 4}, x=xs, w=w)["y"], (xs[:, :-1] * w[1:]).sum(axis=1))


FULL = [("sum", np.sum), ("prod", np.prod), ("min", np.min), ("max", np.max)]


@pytest.mark.parametrize("kind,fn", FULL)
def test_full_reduction_is_one_cross_lane_stage(kind, fn):
    k = kernel([T("x", F64, "n")], [T("r", F64, kind="output")],
               [Compute("r", (), R(kind, F64, L("x", F64, V("j")), ("j", "n")))], symbols=["n"])
    prog = lower(k)
    (stage,) = prog.stages
    assert stage.domain == (Affine.of("n"),) and len(stage.inits) == 1
    assert "LOOP" not in ops(prog)
    xs = np.random.default_rng(5).uniform(0.5, 1.5, 200)
    assert_close(run(k, {"n": 200}, x=xs)["r"], np.array(fn(xs)), ulps=1, reduction_n=200,
                 magnitude=np.abs(xs).sum() if kind == "sum" else None)
    if kind in ("min", "max"):
        xs[[3, 50]] = np.nan
        same(run(k, {"n": 200}, x=xs)["r"], np.array(np.nan))


@pytest.mark.parametrize("kind,fn", [("argmin", np.argmin), ("argmax", np.argmax)])
def test_full_argext_is_two_stages_with_numpy_nan_and_tie_rules(kind, fn):
    k = kernel([T("x", F32, "m", "n")], [T("r", I64, kind="output")],
               [Compute("r", (), R(kind, I64, L("x", F32, V("i"), V("j")), ("i", "m"), ("j", "n")))],
               symbols=["m", "n"])
    prog = lower(k)
    assert len(prog.stages) == 2 and [t.name for t in prog.temps] == [f"r_{kind[3:]}"]
    assert {"ReduceMax" if kind == "argmax" else "ReduceMin"} <= set(ops(prog, 0)) and "ReduceMin" in ops(prog, 1)
    rng = np.random.default_rng(6)
    for case in range(4):
        xs = rng.integers(-2, 3, (6, 7)).astype(np.float32)  # ties everywhere
        if case >= 1:
            xs[4, 2] = np.nan
        if case >= 2:
            xs[1, 5] = np.nan
        if case == 3:
            xs[:] = -np.inf if kind == "argmax" else np.inf
        same(run(k, {"m": 6, "n": 7}, x=xs)["r"], np.array(fn(xs)))


def test_empty_reductions_leave_the_identity():
    # (the runtime raises for empty min/max/argmin/argmax before launching; sum/prod are defined)
    k = kernel([T("x", F32, "n")], [T(kind, F32, kind="output") for kind in ("sum", "prod")],
               [Compute(kind, (), R(kind, F32, L("x", F32, V(f"j{kind}")), (f"j{kind}", "n")))
                for kind in ("sum", "prod")], symbols=["n"])
    out = run(k, {"n": 0}, x=np.zeros(0))
    same(out["sum"], np.array(0.0, np.float32))
    same(out["prod"], np.array(1.0, np.float32))


def test_full_integer_and_bool_reductions():
    xs = np.array([3, -128, 127, 0, 5, -7], np.int8)
    body = []
    outs = []
    for kind, dt in (("sum", I64), ("prod", I64), ("min", I8), ("max", I8), ("argmin", I64), ("argmax", I64)):
        x = L("x", I8, V(f"j{kind}"))
        body.append(Compute(kind, (), R(kind, dt, E("CAST", dt, x) if kind in ("sum", "prod") else x,
                                        (f"j{kind}", "n"))))
        outs.append(T(kind, dt, kind="output"))
    b = E("CMPGT", BOOL, L("x", I8, V("q")), K(0, I8))
    for kind in ("min", "max", "argmax"):
        body.append(Compute(f"b{kind}", (), R(kind, I64 if kind == "argmax" else BOOL, b, ("q", "n"))))
        outs.append(T(f"b{kind}", I64 if kind == "argmax" else BOOL, kind="output"))
    k = kernel([T("x", I8, "n")], outs, body, symbols=["n"])
    out = run(k, {"n": xs.size}, x=xs)
    wide = xs.astype(np.int64)
    for name, want in {"sum": wide.sum(), "prod": wide.prod(), "min": xs.min(), "max": xs.max(),
                       "argmin": xs.argmin(), "argmax": xs.argmax(), "bmin": (xs > 0).min(),
                       "bmax": (xs > 0).max(), "bargmax": (xs > 0).argmax()}.items():
        same(out[name], np.array(want))


def test_full_reduction_over_four_axes_and_inside_expressions():
    dims = ["a", "b", "c", "d"]
    x = L("x", F64, *(V(v) for v in "ijkl"))
    k = kernel([T("x", F64, *dims)], [T("r", F64, kind="output"), T("z", F64, kind="output")],
               [Compute("r", (), R("max", F64, x, *zip("ijkl", dims))),
                # z = 2 * sum(x) + min(x): both reductions hoisted into their own stages
                Compute("z", (), E("ADD", F64, E("MUL", F64, K(2.0, F64), R("sum", F64, x, *zip("ijkl", dims))),
                                   R("min", F64, x, *zip("ijkl", dims))))], symbols=dims)
    prog = lower(k)
    assert len(prog.stages) == 4 and prog.stages[0].domain == tuple(Affine.of(d) for d in "dcb")
    xs = np.random.default_rng(7).standard_normal((2, 3, 4, 5))
    out = run(k, dict(zip(dims, xs.shape)), x=xs)
    same(out["r"], np.array(xs.max()))
    assert_close(out["z"], np.array(2 * xs.sum() + xs.min()), ulps=1, reduction_n=xs.size,
                 magnitude=2 * np.abs(xs).sum() + abs(xs.min()))


def test_row_reduction_depending_on_outer_index_is_hoisted_to_a_vector_temp():
    # y[i, j] = x[i, j] / sum(x[i, k], k): the row sum runs once per row, not per element
    k = kernel([T("x", F32, "m", "n")], [T("y", F32, "m", "n", kind="output")],
               [Compute("y", ("i", "j"), E("DIV", F32, L("x", F32, V("i"), V("j")),
                                           R("sum", F32, L("x", F32, V("i"), V("k")), ("k", "n"))))],
               symbols=["m", "n"])
    prog = lower(k)
    assert len(prog.stages) == 2 and prog.temps[0].shape == (Affine.of("m"),)
    assert "LOOP" in ops(prog, 0) and "LOOP" not in ops(prog, 1)
    xs = np.random.default_rng(8).uniform(1, 2, (3, 4)).astype(np.float32)
    assert_close(run(k, {"m": 3, "n": 4}, x=xs)["y"], xs / xs.sum(axis=1, keepdims=True), ulps=1, reduction_n=4)


def test_unused_reduction_temp_is_dropped():
    k = kernel([T("x", F32, "n")], [T("y", F32, "n", kind="output")],
               [Compute("dead", (), R("sum", F32, L("x", F32, V("j")), ("j", "n"))),
                Compute("y", ("i",), L("x", F32, V("i")))], temps=[T("dead", F32, kind="temp")], symbols=["n"])
    prog = lower(k)
    assert len(prog.stages) == 1 and prog.temps == ()


def test_resonance_accumulate_zeroes_then_scatters():
    cls = E("ATLAS_CLASS", I32, L("b", U8, V("i")))
    k = kernel([T("b", U8, "n"), T("v", F32, "n")], [T("r", F32, 96, kind="output")],
               [Accumulate("r", ("i",), (Affine.of("n"),), cls, L("v", F32, V("i")), resonance=True)], symbols=["n"])
    prog = lower(k)
    # an f32 scatter-add accumulates in an f64 temp (lower_plan.WIDE_SCATTER), then rounds
    assert len(prog.stages) == 3 and "STG" in ops(prog, 0) and "ResAccum" in ops(prog, 1)
    assert [t.dtype for t in prog.temps] == [F64] and "CVT" in ops(prog, 2)
    rng = np.random.default_rng(9)
    b, v = rng.integers(0, 256, 500).astype(np.uint8), rng.integers(-4, 5, 500).astype(np.float32)
    want = np.zeros(96, np.float32)
    np.add.at(want, atlas.BYTE_CLASS_TABLE[b], v)
    same(run(k, {"n": 500}, b=b, v=v)["r"], want)


def test_accumulate_over_many_axes_loops_in_lane():
    # h[key[a, b, c, d]] += 1 over a rank-4 domain: the leading axis loops inside the lane
    dims = ["a", "b", "c", "d"]
    key = L("key", U8, *(V(v) for v in "ijkl"))
    k = kernel([T("key", U8, *dims)], [T("h", I64, 96, kind="output")],
               [Accumulate("h", tuple("ijkl"), tuple(Affine.of(d) for d in dims),
                           E("ATLAS_CLASS", I32, key), K(1, I64))], symbols=dims)
    prog = lower(k)
    assert "LOOP" in ops(prog, 1) and prog.stages[1].domain == tuple(Affine.of(d) for d in "dcb")
    keys = np.random.default_rng(10).integers(0, 256, (2, 3, 2, 5)).astype(np.uint8)
    want = np.bincount(atlas.BYTE_CLASS_TABLE[keys].ravel(), minlength=96).astype(np.int64)
    same(run(k, dict(zip(dims, keys.shape)), key=keys)["h"], want)


def test_generic_scatter_add_and_its_bounds_check():
    k = kernel([T("key", I32, "n"), T("v", I64, "n")], [T("h", I64, 5, kind="output")],
               [Accumulate("h", ("i",), (Affine.of("n"),), L("key", I32, V("i")), L("v", I64, V("i")))],
               symbols=["n"])
    assert "ReduceAdd" in ops(lower(k), 1)
    keys, v = np.array([0, 4, 4, 2, 0, 0]), np.arange(6)
    want = np.zeros(5, np.int64)
    np.add.at(want, keys, v)
    same(run(k, {"n": 6}, key=keys, v=v)["h"], want)
    with pytest.raises(ExecutionError):
        run(k, {"n": 2}, key=np.array([1, 5]), v=np.arange(2))


# -------------------------------------------------------------------- bounds checks
def test_inner_dim_overrun_raises_instead_of_wrapping():
    k = kernel([T("x", F32, "m", "n")], [T("y", F32, "m", "n", kind="output")],
               [Compute("y", ("i", "j"), L("x", F32, V("i"), E("ADD", I64, V("j"), K(1, I64))))],
               symbols=["m", "n"])
    with pytest.raises(ExecutionError):
        run(k, {"m": 3, "n": 4}, x=np.zeros((3, 4)))


def test_gather_index_out_of_range_raises():
    k = kernel([T("x", F32, "n"), T("ix", I32, "m")], [T("y", F32, "m", kind="output")],
               [Compute("y", ("i",), L("x", F32, E("CAST", I64, L("ix", I32, V("i")))))], symbols=["n", "m"])
    xs = np.arange(4, dtype=np.float32)
    same(run(k, {"n": 4, "m": 3}, x=xs, ix=np.array([3, 0, 2]))["y"], xs[[3, 0, 2]])
    for bad in (4, -1):
        with pytest.raises(ExecutionError):
            run(k, {"n": 4, "m": 3}, x=xs, ix=np.array([0, bad, 1]))


def test_where_reads_only_the_chosen_side():
    # y[i] = where(i > 0, x[i - 1], 0): x[-1] is never read, so this must not raise
    prev = L("x", F32, E("SUB", I64, V("i"), K(1, I64)))
    k = kernel([T("x", F32, "n")], [T("y", F32, "n", kind="output")],
               [Compute("y", ("i",), E("WHERE", F32, E("CMPGT", BOOL, V("i"), K(0, I64)), prev, K(0.0, F32)))],
               symbols=["n"])
    assert "BRA" in ops(lower(k))
    xs = np.arange(1, 6, dtype=np.float32)
    same(run(k, {"n": 5}, x=xs)["y"], np.concatenate([[0], xs[:-1]]).astype(np.float32))
    # a WHERE with only safe loads stays branch-free
    safe = kernel([T("x", F32, "n")], [T("y", F32, "n", kind="output")],
                  [Compute("y", ("i",), E("WHERE", F32, E("CMPGT", BOOL, L("x", F32, V("i")), K(0.0, F32)),
                                          L("x", F32, V("i")), K(0.0, F32)))], symbols=["n"])
    assert "BRA" not in ops(lower(safe)) and "SEL" in ops(lower(safe))


# --------------------------------------------------------------- scalar semantics
def elementwise(op: str, dtype: DType, *in_types: DType) -> KernelIR:
    names = "abc"[:len(in_types)]
    srcs = tuple(L(n, t, V("i")) for n, t in zip(names, in_types))
    return kernel([T(n, t, "n") for n, t in zip(names, in_types)], [T("y", dtype, "n", kind="output")],
                  [Compute("y", ("i",), Expr(op, dtype, srcs))], symbols=["n"])


def apply(op: str, dtype: DType, *arrays: np.ndarray) -> np.ndarray:
    types = [DType.from_numpy(a.dtype) for a in arrays]
    return run(elementwise(op, dtype, *types), {"n": arrays[0].size}, **dict(zip("abc", arrays)))["y"]


def pairs(values: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.meshgrid(values, values)
    return a.ravel().astype(dtype), b.ravel().astype(dtype)


@pytest.mark.parametrize("dtype", [F16, F32, F64])
def test_float_floordiv_matches_numpy_bit_for_bit(dtype):
    with np.errstate(all="ignore"):
        a, b = pairs(EDGE, dtype.np)
        same(apply("FLOORDIV", dtype, a, b), np.floor_divide(a, b))


@settings(max_examples=20)
@given(st.lists(st.tuples(st.floats(width=32), st.floats(width=32)), min_size=1, max_size=40))
def test_float_floordiv_property(values):
    a, b = (np.array(v, np.float32) for v in zip(*values))
    with np.errstate(all="ignore"):
        same(apply("FLOORDIV", F32, a, b), np.floor_divide(a, b))


def test_float_binary_ops_match_numpy():
    a, b = pairs(EDGE, np.float64)
    with np.errstate(all="ignore"):
        for op, fn in {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "DIV": np.divide,
                       "MOD": np.remainder, "MIN": np.minimum, "MAX": np.maximum, "FMOD": np.fmod,
                       "COPYSIGN": np.copysign, "ATAN2": np.arctan2, "HYPOT": np.hypot}.items():
            same(apply(op, F64, a, b), fn(a, b))
        assert_close(apply("POW", F64, a, b), np.power(a, b), ulps=4)
        for op, fn in {"CMPEQ": np.equal, "CMPNE": np.not_equal, "CMPLT": np.less, "CMPLE": np.less_equal,
                       "CMPGT": np.greater, "CMPGE": np.greater_equal}.items():
            same(apply(op, BOOL, a, b), fn(a, b))


def test_float_unary_ops_match_numpy():
    x = EDGE.astype(np.float32)
    fns = {"NEG": np.negative, "ABS": np.abs, "SQRT": np.sqrt, "EXP": np.exp, "EXP2": np.exp2,
           "EXPM1": np.expm1, "LOG": np.log, "LOG2": np.log2, "LOG10": np.log10, "LOG1P": np.log1p,
           "SIN": np.sin, "COS": np.cos, "TAN": np.tan, "ASIN": np.arcsin, "ACOS": np.arccos,
           "ATAN": np.arctan, "SINH": np.sinh, "COSH": np.cosh, "TANH": np.tanh, "ASINH": np.arcsinh,
           "ACOSH": np.arccosh, "ATANH": np.arctanh, "FLOOR": np.floor, "CEIL": np.ceil,
           "TRUNC": np.trunc, "RINT": np.rint, "SIGN": np.sign, "ERF": ERF, "ERFC": ERFC,
           "RSQRT": lambda v: 1 / np.sqrt(v), "SIGMOID": lambda v: 1 / (1 + np.exp(-v))}
    with np.errstate(all="ignore"):
        for op, fn in fns.items():
            assert_close(apply(op, F32, x), fn(x), ulps=4, name=op)
        same(apply("SIGN", F32, x), np.sign(x))
        same(apply("ISNAN", BOOL, x), np.isnan(x))
        same(apply("ISNAN", BOOL, np.arange(3, dtype=np.int32)), np.zeros(3, bool))


INTS = np.array([0, 1, -1, 2, -2, 3, -7, 7, 100, -100, 127, -128, 64, 5])


@pytest.mark.parametrize("dtype", [I8, I32, U8, DType.U64])
def test_integer_ops_wrap_and_define_division_by_zero(dtype):
    a, b = pairs(INTS, np.int64)
    a, b = a.astype(dtype.np), b.astype(dtype.np)
    nz = np.where(b == 0, 1, b).astype(dtype.np)
    with np.errstate(all="ignore"):
        for op, fn in {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "MIN": np.minimum, "MAX": np.maximum,
                       "AND": np.bitwise_and, "OR": np.bitwise_or, "XOR": np.bitwise_xor}.items():
            same(apply(op, dtype, a, b), fn(a, b))
        for op, fn in {"FLOORDIV": np.floor_divide, "MOD": np.remainder, "FMOD": np.fmod}.items():
            same(apply(op, dtype, a, b), np.where(b == 0, 0, fn(a, nz)).astype(dtype.np))
        mask = dtype.np.type(dtype.bits - 1)
        same(apply("SHL", dtype, a, b), np.left_shift(a, b & mask))
        same(apply("SHR", dtype, a, b), np.right_shift(a, b & mask))
        same(apply("NOT", dtype, a), np.invert(a))
        same(apply("SIGN", dtype, a), np.sign(a))
        same(apply("ABS", dtype, a), np.abs(a))
        same(apply("FLOOR", dtype, a), a)
        same(apply("CMPLT", BOOL, a, b), a < b)


def test_integer_power():
    xs = np.array([0, 1, -1, 2, -2, 3, 7, -5, 100], np.int32)
    with np.errstate(all="ignore"):
        for n in (0, 1, 2, 3, 10, 31):
            k = kernel([T("a", I32, "n")], [T("y", I32, "n", kind="output")],
                       [Compute("y", ("i",), E("POW", I32, L("a", I32, V("i")), K(n, I32)))], symbols=["n"])
            same(run(k, {"n": xs.size}, a=xs)["y"], np.power(xs, n))
        a, b = pairs(xs, np.int32)
        got = apply("POW", I32, a, b)
        pos = b >= 0
        same(got[pos], np.power(a[pos], b[pos]))
        # a negative exponent gives the truncated reciprocal: 1 / a**-b
        neg = ~pos
        same(got[neg], np.where(a[neg] == 1, 1, np.where(a[neg] == -1, np.power(-1, -b[neg]), 0)).astype(np.int32))
    u = np.array([0, 1, 2, 3, 255], np.uint8)
    with np.errstate(all="ignore"):
        same(apply("POW", U8, *pairs(u, np.uint8)), np.power(*pairs(u, np.uint8)))


def test_bool_ops_casts_where_fma():
    p, q = pairs(np.array([False, True]), bool)
    for op, fn in {"AND": np.logical_and, "OR": np.logical_or, "XOR": np.logical_xor, "ADD": np.add,
                   "MUL": np.multiply, "MIN": np.minimum, "MAX": np.maximum, "CMPEQ": np.equal}.items():
        same(apply(op, BOOL, p, q), fn(p, q))
    same(apply("NOT", BOOL, p), ~p)
    x = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 3.7, -3.7, 0.5, -0.0, 200.0, -129.0])
    want = {"i8": np.array([0, 127, -128, 127, -128, 3, -3, 0, 0, 127, -128], np.int8),
            "u8": np.array([0, 255, 0, 255, 0, 3, 0, 0, 0, 200, 0], np.uint8)}
    for name, w in want.items():
        same(apply("CAST", DType.parse(name), x), w)
    same(apply("CAST", BOOL, x), x != 0)
    with np.errstate(over="ignore"):
        same(apply("CAST", F16, x), x.astype(np.float16))
    same(apply("CAST", I8, np.array([300, -129, 5], np.int32)), np.array([44, 127, 5], np.int8))
    c = np.array([True, False, True])
    same(apply("WHERE", F32, c, np.ones(3, np.float32), np.zeros(3, np.float32)), c.astype(np.float32))
    a, b = np.float32([0.1, 3.0, -2.0]), np.float32([10.0, 1 / 3, 0.5])
    c = np.float32([-1, 0, 1])  # fused: one rounding, so 0.1f * 10 - 1 is not 0
    same(apply("FMA", F32, a, b, c), (a.astype(np.float64) * b + c).astype(np.float32))


def test_atlas_ops():
    b = np.arange(-20, 300, dtype=np.int32)
    same(apply("ATLAS_CLASS", I32, b), atlas.BYTE_CLASS_TABLE[b & 0xFF].astype(np.int32))
    c = np.arange(-2, 99, dtype=np.int16)
    ok = (c >= 0) & (c < 96)
    cc = np.where(ok, c, 0)
    same(apply("MIRROR", I32, c), np.where(ok, atlas.MIRROR_TABLE[cc], -1).astype(np.int32))
    same(apply("DEGREE", I32, c), np.where(ok, atlas.DEGREE_TABLE[cc], 0).astype(np.int32))
    same(apply("IS_UNITY", BOOL, c), np.where(ok, atlas.UNITY_TABLE[cc], False))
    kk = (np.arange(c.size) % 7).astype(np.int64)
    want = np.array([atlas.neighbor(int(x), int(y)) for x, y in zip(c, kk)], np.int32)
    same(apply("NEIGHBOR", I32, c, kk), want)
    pg, by = np.full(c.size, 3, np.int64), np.full(c.size, 200, np.int64)
    same(apply("BOUND_MAP", I64, c, pg, by), c.astype(np.int64) * 12288 + 3 * 256 + 200)


def test_index_values_symbols_and_scalars():
    # y[i, j] = f32(i * n + j) + f32(s): index variables and symbols as values
    flat = E("ADD", I64, E("MUL", I64, V("i"), Expr("SYM", I64, (), "n")), V("j"))
    body = E("ADD", F32, E("CAST", F32, flat), E("CAST", F32, Expr("SCALAR", F64, (), "s")))
    k = kernel([T("s", F64, kind="scalar")], [T("y", F32, "m", "n", kind="output")],
               [Compute("y", ("i", "j"), body)], symbols=["m", "n"])
    want = np.arange(6, dtype=np.float32).reshape(2, 3) + np.float32(0.5)
    same(run(k, {"m": 2, "n": 3}, s=0.5)["y"], want)


def test_convert_const_matches_cvt_rules():
    assert convert_const(float("nan"), I32) == 0 and convert_const(1e300, I8) == 127
    assert convert_const(-3.9, I32) == -3 and convert_const(300, U8) == 44 and convert_const(-1, U8) == 255
    assert convert_const(0.1, F32) == float(np.float32(0.1)) and convert_const(2, F64) == 2.0
    assert convert_const(float("nan"), BOOL) is True and isinstance(convert_const(True, I32), int)


# --------------------------------------------------------------------------- errors
def test_unassigned_output_and_untyped_ops_are_compile_errors():
    with pytest.raises(CompileError, match="never assigned"):
        lower(kernel([T("x", F32, "n")], [T("y", F32, "n", kind="output")], [], symbols=["n"]))
    with pytest.raises(CompileError, match="SQRT on i32"):
        lower(elementwise("SQRT", I32, I32))
    with pytest.raises(CompileError, match="not bound"):
        lower(kernel([T("x", F32, "n")], [T("y", F32, "n", kind="output")],
                     [Compute("y", ("i",), L("x", F32, V("q")))], symbols=["n"]))


def test_deep_expressions_lower():
    e = L("x", F32, V("i"))
    for _ in range(300):
        e = E("ADD", F32, e, K(1.0, F32))
    k = kernel([T("x", F32, "n")], [T("y", F32, "n", kind="output")], [Compute("y", ("i",), e)], symbols=["n"])
    same(run(k, {"n": 3}, x=np.zeros(3))["y"], np.full(3, 300, np.float32))


def test_plan_is_exposed_for_inspection():
    plan = make_plan(fuse(softmax_ir()))
    assert [st.target for st in plan.statements] == ["m", "y_sum", "y"]
    assert [t.name for t in plan.temps] == ["m", "y_sum"]
