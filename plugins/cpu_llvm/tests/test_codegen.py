"""The LLVM code generator against the reference interpreter.

Programs are compiled by `hologram_cpu_llvm.codegen.compile_program`, JIT-compiled by
the small single-threaded harness of llvm_harness.py (llvmlite + ctypes, following the
stage ABI in codegen.py), and run on the same inputs as `InterpBackend`: every opcode on each type's
edge values (NaN, +-inf, -0.0, subnormals, integer extremes), the control-flow and memory
features, the run-time checks, and random verified programs from
`hologram.testing.isa_strategies`. Integers and + - * / sqrt, FMA, conversions and
comparisons must agree bit for bit; transcendentals within 4 ULP; reductions within the
log2(n) bound of `assert_close`.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from hologram.core.errors import ExecutionError
from hologram.core.types import FLOAT_TYPES, INTEGER_TYPES, Affine, DType
from hologram.isa.opcodes import OPCODES
from hologram.isa.program import (Addr, BufferParam, Imm, Init, Instr, Label, MemDecl, Pred, Program, Reg, RegDecl,
                                  ScalarParam, Special, Stage, Sym)
from hologram.testing import assert_close
from hologram.testing.isa_strategies import programs
from hologram_cpu_llvm.codegen import compile_program

from isa_helpers import (EXACT_FLOAT, compare_buffers, edges, float_samples, op_program, pairs, random_inputs, same,
                         triples, ulp_close)
from llvm_harness import INTERP, REAL, I, both, decoded, gid, llvm_launch, stage_program, target_machine, verifies
from repo_paths import KERNELS

I64, F16, F32, F64, BOOL = DType.I64, DType.F16, DType.F32, DType.F64, DType.BOOL
N = Affine.of("n")
NUM_TYPES = INTEGER_TYPES + FLOAT_TYPES


# ===================================================================== one opcode
def run_llvm_op(op: str, dtype: DType, *srcs: np.ndarray, out_type: DType | None = None, mod: str | None = None,
                dtype2: DType | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(llvm, interp) results of `op` applied lane by lane to the arrays `srcs`."""
    if out_type is None:
        out_type = BOOL if OPCODES[op].result == "bool" or op == "SET" else dtype
    n = len(srcs[0])
    prog = op_program(op, dtype, tuple(DType.from_numpy(a.dtype) for a in srcs), out_type, mod=mod, dtype2=dtype2)
    bufs = {f"a{k}": a for k, a in enumerate(srcs)} | {"out": np.zeros(n, out_type.np)}
    got, want = both(prog, bufs, {}, {"n": n})
    return got["out"], want["out"]


def check_same(op: str, t: DType, *srcs: np.ndarray, **kw) -> None:
    got, want = run_llvm_op(op, t, *srcs, **kw)
    same(got, want, *srcs)


def test_every_value_opcode_has_a_code_generator():
    from hologram_cpu_llvm.codegen_ops import VALUE_OPS

    emitted_apart = {"CVT", "SET"}  # codegen_control emits these itself (a source type; a comparison)
    assert [name for name, spec in OPCODES.items() if spec.pure and name not in VALUE_OPS.keys() | emitted_apart] == []


# ================================================================== arithmetic
@pytest.mark.parametrize("t", NUM_TYPES, ids=str)
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "DIV", "REM", "MIN", "MAX"])
def test_binary_arith(op, t):
    check_same(op, t, *pairs(t))


@pytest.mark.parametrize("t", NUM_TYPES, ids=str)
@pytest.mark.parametrize("op", ["ABS", "NEG"])
def test_unary_arith(op, t):
    check_same(op, t, edges(t))


@pytest.mark.parametrize("t", NUM_TYPES, ids=str)
@pytest.mark.parametrize("op", ["MAD", "FMA"])
def test_mad_fma(op, t):
    check_same(op, t, *triples(t))


@pytest.mark.parametrize("t", FLOAT_TYPES, ids=str)
def test_fma_rounds_once_on_random_values(t):
    rng = np.random.default_rng(7)
    a, b, c = (rng.standard_normal(4000).astype(t.np) for _ in range(3))
    # Products near ties: c tiny against a*b exposes a double rounding.
    c[::2] = (a[::2].astype(np.float64) * b[::2] * 2.0 ** -30).astype(t.np)
    check_same("FMA", t, a, b, c)


@pytest.mark.parametrize("t", INTEGER_TYPES + (BOOL,), ids=str)
@pytest.mark.parametrize("op", ["AND", "OR", "XOR"])
def test_bitwise(op, t):
    check_same(op, t, *pairs(t))


@pytest.mark.parametrize("t", INTEGER_TYPES + (BOOL,), ids=str)
def test_not(t):
    check_same("NOT", t, edges(t))


@pytest.mark.parametrize("t", INTEGER_TYPES, ids=str)
@pytest.mark.parametrize("op", ["SHL", "SHR"])
def test_shifts(op, t):
    amounts = np.array([0, 1, 3, t.bits - 1, t.bits, t.bits + 1, 2 * t.bits + 3] +
                       ([-1, -t.bits] if t.is_signed else []), dtype=object)
    amounts = np.array([(int(v) - t.min) % (1 << t.bits) + t.min for v in amounts], dtype=object).astype(t.np)
    check_same(op, t, *pairs(t, amounts))


@pytest.mark.parametrize("t", NUM_TYPES + (BOOL,), ids=str)
@pytest.mark.parametrize("mod", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_set(mod, t):
    check_same("SET", t, *pairs(t), mod=mod)


@pytest.mark.parametrize("t", NUM_TYPES + (BOOL,), ids=str)
def test_sel(t):
    a, b = pairs(t)
    p = (np.arange(len(a)) % 3 == 0)
    check_same("SEL", t, p, a, b)


@pytest.mark.parametrize("t", NUM_TYPES + (BOOL,), ids=str)
def test_mov(t):
    check_same("MOV", t, edges(t))


# ============================================================ float functions
@pytest.mark.parametrize("t", FLOAT_TYPES, ids=str)
@pytest.mark.parametrize("op", [name for name, spec in OPCODES.items() if spec.types == "float" and spec.form == "ds"])
def test_float_unary(op, t):
    # every float instruction of one operand the op table declares
    x = float_samples(t)
    got, want = run_llvm_op(op, t, x)
    if op in EXACT_FLOAT or OPCODES[op].result == "bool":
        same(got, want, x)
    else:
        ulp_close(got, want, 4, x)


TESTS = [name for name, spec in OPCODES.items() if spec.result == "bool" and spec.form == "ds" and spec.group != "atlas"]


@pytest.mark.parametrize("t", NUM_TYPES + (BOOL,), ids=str)
@pytest.mark.parametrize("op", TESTS)
def test_value_tests(op, t):
    # every bool-valued test of one operand the op table declares, on each type it takes
    if not OPCODES[op].admits(t):
        pytest.skip(f"{op} does not take {t}")
    x = float_samples(t) if t.is_float else edges(t)
    check_same(op, t, x)


@pytest.mark.parametrize("t", [F32, F64], ids=str)
@pytest.mark.parametrize("op", ["SIN", "COS", "TAN"])
def test_trig_of_huge_arguments(op, t):
    x = np.array([1e6, -3e7, 1e10, 1e22, float(np.finfo(t.np).max)], dtype=t.np)
    got, want = run_llvm_op(op, t, x)
    ulp_close(got, want, 4, x)


@pytest.mark.parametrize("t", FLOAT_TYPES, ids=str)
@pytest.mark.parametrize("op", [name for name, spec in OPCODES.items() if spec.types == "float" and spec.form == "dss"])
def test_float_binary(op, t):
    a, b = pairs(t)
    got, want = run_llvm_op(op, t, a, b)
    if op in ("FMOD", "COPYSIGN"):
        same(got, want, a, b)
    else:
        ulp_close(got, want, 4, a, b)


# ================================================================= conversions
ALL = NUM_TYPES + (BOOL,)


@pytest.mark.parametrize("dst", ALL, ids=str)
@pytest.mark.parametrize("src", ALL, ids=str)
def test_cvt(src, dst):
    x = edges(src)
    if src.is_float:
        with np.errstate(over="ignore"):  # beyond f16's range the samples are inf, as intended
            x = np.concatenate([x, np.array([0.9, -0.9, 127.5, 128.0, 255.9, 256.0, -128.9, -129.0, 32767.9,
                                             65535.9, 2.0 ** 31, -2.0 ** 31 - 1.0, 2.0 ** 63, 2.0 ** 64, 1e10, -1e10,
                                             2049.0, 2051.0, 65520.0, 65519.0], dtype=src.np)])
    check_same("CVT", dst, x, dtype2=src)


def test_double_to_half_rounds_once():
    # f64 values just above f16 midpoints: rounding through f32 first would tie to even.
    rng = np.random.default_rng(3)
    halves = rng.standard_normal(2000).astype(np.float16).astype(np.float64)
    ulp = np.spacing(np.abs(halves.astype(np.float16))).astype(np.float64)
    x = np.concatenate([halves + ulp / 2 + 2.0 ** -40 * np.abs(halves), halves + ulp / 2,
                        halves - ulp / 2 - 2.0 ** -40 * np.abs(halves), rng.standard_normal(2000) * 1e4])
    check_same("CVT", F16, x, dtype2=F64)


@pytest.mark.parametrize("t", NUM_TYPES + (BOOL,), ids=str)
def test_mov_imm_edges(t):
    from hologram.testing.isa_strategies import edge_values
    for v in edge_values(t) + [3, -2, 2.75, -1e30, True, 2**64 + 1, -(2**70) - 12345, 16777217 * 2**40 + 1, 2**1100]:
        prog = op_program("MOV_IMM", t, (t,), t, imms={0: v})
        got, want = both(prog, {"out": np.zeros(1, t.np)}, {}, {"n": 1})
        same(got["out"], want["out"])


# ====================================================================== Atlas
@pytest.mark.parametrize("t", INTEGER_TYPES, ids=str)
def test_atlas(t):
    x = np.concatenate([edges(t), np.arange(0, min(200, int(t.max)), dtype=t.np)]).astype(t.np)
    for op in ("ClsGet", "MIRROR", "NbrCount", "UnityTest"):
        check_same(op, t, x)
    k = (np.arange(len(x)) % 8 - 1).astype(t.np) if t.is_signed else (np.arange(len(x)) % 8).astype(t.np)
    check_same("NbrGet", t, x, k)
    check_same("BoundMap", t, *triples(t))


# ===================================================== control flow and memory
def _x(n: int, t: DType = F32) -> np.ndarray:
    return (np.arange(n) * 0.75 - 3).astype(t.np)


def assert_bufs(got: dict, want: dict) -> None:
    for k in want:
        same(got[k], want[k])


def test_branch_loop_call_exit():
    v, c, p = Reg("v"), Reg("c"), Reg("p")
    body = [
        gid(),
        Instr("LDG", F32, v, addr=Addr("x", I)),
        Instr("SET", I64, p, (I, Imm(5)), mod="lt"),
        Instr("BRA", target="small", pred=Pred(p)),
        Instr("MOV_IMM", I64, c, (Imm(3),)),
        Label("top"),
        Instr("CALL", target="twice"),
        Instr("LOOP", srcs=(c,), target="top"),
        Instr("BRA", target="store"),
        Label("small"),
        Instr("SET", I64, p, (I, Imm(2)), mod="eq"),
        Instr("BRA", target="store", pred=Pred(p, negate=True)),
        Instr("EXIT"),
        Label("store"),
        Instr("STG", F32, srcs=(v,), addr=Addr("y", I)),
        Instr("EXIT"),
        Label("twice"),
        Instr("CALL", target="inc"),
        Instr("MUL", F32, v, (v, Imm(2.0))),
        Instr("RET"),
        Label("inc"),
        Instr("ADD", F32, v, (v, Imm(1.0))),
        Instr("RET"),
    ]
    prog = stage_program(body, [("i", I64), ("v", F32), ("c", I64), ("p", BOOL)])
    n = 300
    got, want = both(prog, {"x": _x(n), "y": np.full(n, -7, np.float32)}, {}, {"n": n})
    assert_bufs(got, want)


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_specials_and_partial_blocks(rank):
    """Every special register of every lane, on a domain that leaves partial blocks."""
    symbols = ("n", "m", "k")[:rank]
    dims = tuple(Affine.of(s) for s in symbols)
    block = ((7,), (5, 3), (3, 2, 2))[rank - 1]
    specials = [f"{k}.{a}" for k in ("tid", "ntid", "ctaid", "nctaid", "gid", "gdim") for a in "xyz"]
    lin, o, tmp = Reg("lin"), Reg("o"), Reg("tmp")
    # lin = gid.x + n * (gid.y + m * gid.z): the lane's row-major element
    body = [Instr("MOV", I64, lin, (Special("gid.x"),))]
    if rank >= 2:
        body.append(Instr("MAD", I64, lin, (Special("gid.y"), Sym("n"), lin)))
    if rank == 3:
        body += [Instr("MUL", I64, tmp, (Sym("n"), Sym("m"))), Instr("MAD", I64, lin, (Special("gid.z"), tmp, lin))]
    for j, s in enumerate(specials):
        body += [Instr("MAD", I64, o, (lin, Imm(len(specials)), Imm(j))),
                 Instr("STG", I64, srcs=(Special(s),), addr=Addr("y", o), checked=True)]
    regs = (RegDecl("lin", I64), RegDecl("o", I64), RegDecl("tmp", I64))
    prog = Program("sp", (BufferParam("y", I64, (Affine.of("total"),), "out"),), (), symbols + ("total",),
                   (Stage("s", dims, block, regs, body=tuple(body)),))
    syms = {s: v for s, v in zip(symbols, (11, 7, 3))}
    syms["total"] = math.prod(syms.values()) * len(specials)
    got, want = both(prog, {"y": np.full(syms["total"], -1, np.int64)}, {}, syms)
    assert_bufs(got, want)


def test_shared_memory_and_barriers():
    # y[i] = sum of the block's x (each lane writes its slot, barrier, lane 0 sums).
    v, t, j, c, acc, p = Reg("v"), Reg("t"), Reg("j"), Reg("c"), Reg("acc"), Reg("p")
    body = [
        gid(), Instr("MOV", I64, t, (Special("tid.x"),)),
        Instr("LDG", F32, v, addr=Addr("x", I)),
        Instr("STS", F32, srcs=(v,), addr=Addr("sh", t)),
        Instr("BarSync"),
        Instr("MOV_IMM", F32, acc, (Imm(0.0),)),
        Instr("MOV_IMM", I64, j, (Imm(0),)),
        Instr("MOV", I64, c, (Special("ntid.x"),)),
        Label("sum"),
        Instr("SET", I64, p, (j, Special("gdim.x")), mod="ge"),
        Instr("BRA", target="skip", pred=Pred(p)),
        Instr("LDS", F32, v, addr=Addr("sh", j), checked=True),
        Instr("ADD", F32, acc, (acc, v)),
        Label("skip"),
        Instr("ADD", I64, j, (j, Imm(1))),
        Instr("LOOP", srcs=(c,), target="sum"),
        Instr("BarSync"),
        Instr("STS", F32, srcs=(acc,), addr=Addr("sh", t)),
        Instr("BarSync"),
        Instr("LDS", F32, v, addr=Addr("sh", None, 0)),
        Instr("STG", F32, srcs=(v,), addr=Addr("y", I)),
    ]
    prog = stage_program(body, [("i", I64), ("v", F32), ("t", I64), ("j", I64), ("c", I64), ("acc", F32),
                                ("p", BOOL)], shared=[MemDecl("sh", F32, 16)], block=(16,))
    n = 40
    got, want = both(prog, {"x": _x(n), "y": np.zeros(n, np.float32)}, {}, {"n": n})
    assert_bufs(got, want)


def test_barrier_inside_control_flow_and_subroutine():
    v, p, c = Reg("v"), Reg("p"), Reg("c")
    body = [
        gid(),
        Instr("LDG", F32, v, addr=Addr("x", I)),
        Instr("MOV_IMM", I64, c, (Imm(2),)),
        Label("again"),
        Instr("CALL", target="sync"),
        Instr("LOOP", srcs=(c,), target="again"),
        Instr("SET", I64, p, (Special("tid.x"), Imm(0)), mod="eq"),
        Instr("BRA", target="done", pred=Pred(p, negate=True)),
        Instr("LDS", F32, v, addr=Addr("sh", None, 3)),
        Label("done"),
        Instr("STG", F32, srcs=(v,), addr=Addr("y", I)),
        Instr("EXIT"),
        Label("sync"),
        Instr("STS", F32, srcs=(v,), addr=Addr("sh", Reg("t"))),
        Instr("BarSync"),
        Instr("ADD", F32, v, (v, Imm(1.0))),
        Instr("RET"),
    ]
    body.insert(1, Instr("MOV", I64, Reg("t"), (Special("tid.x"),)))
    prog = stage_program(body, [("i", I64), ("v", F32), ("p", BOOL), ("c", I64), ("t", I64)],
                         shared=[MemDecl("sh", F32, 8)], block=(8,))
    n = 20
    got, want = both(prog, {"x": _x(n), "y": np.zeros(n, np.float32)}, {}, {"n": n})
    assert_bufs(got, want)


def test_barriers_with_pools_on_a_2d_block():
    """The state machine keeps every lane's registers and pool across barriers."""
    t, lin, j, h, v, w = Reg("t"), Reg("lin"), Reg("j"), Reg("h"), Reg("v"), Reg("w")
    body = [
        Instr("MAD", I64, lin, (Special("gid.y"), Sym("n"), Special("gid.x"))),
        Instr("MAD", I64, t, (Special("tid.y"), Special("ntid.x"), Special("tid.x"))),
        Instr("LDG", F32, v, addr=Addr("x", lin)),
        Instr("PoolAlloc", None, h, target="pa", count=2),
        Instr("PoolStore", F32, srcs=(v,), addr=Addr("pa", h, 1)),
        Instr("MUL", F32, v, (v, Imm(2.0))),
        Instr("STS", F32, srcs=(v,), addr=Addr("sh", t)),
        Instr("BarSync"),
        Instr("ADD", I64, j, (t, Imm(1))),
        Instr("REM", I64, j, (j, Imm(8))),
        Instr("LDS", F32, w, addr=Addr("sh", j)),
        Instr("BarSync"),
        Instr("PoolLoad", F32, v, addr=Addr("pa", h, 1)),
        Instr("PoolFree", srcs=(h,)),
        Instr("ADD", F32, v, (v, w)),
        Instr("STG", F32, srcs=(v,), addr=Addr("y", lin)),
        Instr("EXIT"),
    ]
    dims = (Affine.of("n"), Affine.of("m"))
    params = (BufferParam("x", F32, dims[::-1], "in"), BufferParam("y", F32, dims[::-1], "out"))
    prog = stage_program(body, [("t", I64), ("lin", I64), ("j", I64), ("h", I64), ("v", F32), ("w", F32)],
                         params=params, shared=[MemDecl("sh", F32, 8)], pools=[MemDecl("pa", F32, 4)],
                         block=(4, 2), domain=dims, symbols=("n", "m"))
    n, m = 10, 5
    got, want = both(prog, {"x": _x(n * m).reshape(m, n), "y": np.zeros((m, n), np.float32)}, {},
                     {"n": n, "m": m})
    assert_bufs(got, want)


@pytest.mark.parametrize("op", ["ReduceAdd", "ReduceMin", "ReduceMax", "ReduceMul"])
@pytest.mark.parametrize("t", [DType.I32, DType.U8, F32, F64], ids=str)
def test_reductions(op, t):
    v, b = Reg("v"), Reg("b")
    ident = {"ReduceAdd": 0, "ReduceMul": 1, "ReduceMin": math.inf if t.is_float else t.max,
             "ReduceMax": -math.inf if t.is_float else t.min}[op]
    body = [gid(), Instr("LDG", t, v, addr=Addr("x", I)), Instr("REM", I64, b, (I, Imm(3))),
            Instr(op, t, srcs=(v,), addr=Addr("r", b))]
    params = (BufferParam("x", t, (N,), "in"), BufferParam("r", t, (Affine.of(3),), "out"))
    prog = stage_program(body, [("i", I64), ("v", t), ("b", I64)], params=params,
                         inits=[Init("r", j, ident) for j in range(3)])
    n = 1000
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(n) * (1.01 if op == "ReduceMul" else 10)).astype(t.np) if t.is_float else \
        rng.integers(0, 50, n).astype(t.np)
    if t.is_float and op in ("ReduceMin", "ReduceMax"):
        x[17] = np.nan
    got, want = both(prog, {"x": x, "r": np.zeros(3, t.np)}, {}, {"n": n})
    if t.is_float:
        assert_close(got["r"], want["r"], reduction_n=n, magnitude=np.full(3, np.abs(x).sum() + 1))
    else:
        same(got["r"], want["r"])
    # Chunked launches (several callers, each with its own partials) agree too.
    chunked = {"x": x, "r": np.zeros(3, t.np)}
    llvm_launch(prog, chunked, {}, {"n": n}, blocks_per_call=3)
    if not t.is_float:
        same(chunked["r"], want["r"])


def test_res_accum_and_bad_class():
    c, v = Reg("c"), Reg("v")
    body = [gid(), Instr("LDG", DType.I32, c, addr=Addr("x", I)), Instr("CVT", F32, v, (c,)),
            Instr("ResAccum", F32, srcs=(v,), addr=Addr("hist", c))]
    params = (BufferParam("x", DType.I32, (N,), "in"), BufferParam("hist", F32, (Affine.of(96),), "inout"))
    prog = stage_program(body, [("i", I64), ("c", DType.I32), ("v", F32)], params=params)
    x = (np.arange(500) * 7 % 96).astype(np.int32)
    got, want = both(prog, {"x": x, "hist": np.ones(96, np.float32)}, {}, {"n": 500})
    assert_close(got["hist"], want["hist"], reduction_n=500)
    x[3] = 96
    with pytest.raises(ExecutionError, match="class"):
        llvm_launch(prog, {"x": x, "hist": np.ones(96, np.float32)}, {}, {"n": 500})


def test_checked_access_out_of_bounds_is_an_error():
    v, j = Reg("v"), Reg("j")
    body = [gid(), Instr("ADD", I64, j, (I, Imm(1))), Instr("LDG", F32, v, addr=Addr("x", j), checked=True),
            Instr("STG", F32, srcs=(v,), addr=Addr("y", I))]
    prog = stage_program(body, [("i", I64), ("v", F32), ("j", I64)])
    with pytest.raises(ExecutionError, match="global"):
        llvm_launch(prog, {"x": _x(10), "y": np.zeros(10, np.float32)}, {}, {"n": 10})
    prog2 = stage_program(body[:2] + [Instr("SUB", I64, j, (I, Imm(1)))] + body[2:],
                          [("i", I64), ("v", F32), ("j", I64)])
    with pytest.raises(ExecutionError, match="global"):  # a negative index too
        llvm_launch(prog2, {"x": _x(10), "y": np.zeros(10, np.float32)}, {}, {"n": 10})


def test_pools_phase_and_scalars():
    h, h2, v, w, ph = Reg("h"), Reg("h2"), Reg("v"), Reg("w"), Reg("ph")
    body = [
        gid(),
        Instr("LDG", F32, v, addr=Addr("x", I)),
        Instr("PoolAlloc", None, h, target="pa", count=3),
        Instr("PoolStore", F32, srcs=(v,), addr=Addr("pa", h, 2)),
        Instr("PoolAlloc", None, h2, target="pa", count=2),
        Instr("PoolStore", F32, srcs=(Sym("alpha"),), addr=Addr("pa", h2, 1)),
        Instr("PoolLoad", F32, w, addr=Addr("pa", h2, 1)),
        Instr("PoolFree", srcs=(h2,)),
        Instr("PoolLoad", F32, v, addr=Addr("pa", h, 2)),
        Instr("PoolFree", srcs=(h,)),
        Instr("MAD", F32, v, (v, w, Imm(0.5))),
        Instr("PhaseAdv", srcs=(I,)),
        Instr("PhaseAdv", srcs=(Imm(700),)),
        Instr("PhaseGet", None, ph),
        Instr("CVT", F32, w, (ph,)),
        Instr("ADD", F32, v, (v, w)),
        Instr("STG", F32, srcs=(v,), addr=Addr("y", I)),
    ]
    params = (BufferParam("x", F32, (N,), "in"), ScalarParam("alpha", F32), BufferParam("y", F32, (N,), "out"))
    prog = stage_program(body, [("i", I64), ("h", I64), ("h2", I64), ("v", F32), ("w", F32), ("ph", I64)],
                         params=params, pools=[MemDecl("pa", F32, 6)])
    n = 2000
    got, want = both(prog, {"x": _x(n), "y": np.zeros(n, np.float32)}, {"alpha": np.float32(1.5)}, {"n": n})
    assert_bufs(got, want)


def test_temps_inits_and_multiple_stages():
    v = Reg("v")
    s1 = Stage("a", (N,), (32,), (RegDecl("i", I64), RegDecl("v", F64)), body=(
        gid(), Instr("LDG", F64, v, addr=Addr("x", I)), Instr("MUL", F64, v, (v, v)),
        Instr("STG", F64, srcs=(v,), addr=Addr("tmp", I))))
    s2 = Stage("b", (N,), (32,), (RegDecl("i", I64), RegDecl("v", F64)), inits=(Init("y", 0, 0),), body=(
        gid(), Instr("LDG", F64, v, addr=Addr("tmp", I)),
        Instr("ReduceAdd", F64, srcs=(v,), addr=Addr("y", None, 0))))
    prog = Program("two", (BufferParam("x", F64, (N,), "in"), BufferParam("y", F64, (), "out")),
                   (BufferParam("tmp", F64, (N,), "temp"),), ("n",), (s1, s2))
    n = 777
    x = np.linspace(-1, 1, n)
    got, want = both(prog, {"x": x, "y": np.full((), 5.0)}, {}, {"n": n})
    assert_close(got["y"], want["y"], reduction_n=n)


def test_module_exports_one_function_per_stage():
    result = compile_program(op_program("ADD", F32, (F32, F32), F32))
    assert len(result.stages) == 1 and result.stages[0].reduce_buffers == ()
    assert f'define void @"{result.stages[0].name}"' in result.module_ir or \
        f"define void @{result.stages[0].name}" in result.module_ir
    assert "noalias" in result.module_ir


def test_straight_line_lane_loop_vectorizes():
    prog = op_program("MAD", F32, (F32, F32, F32), F32)
    result = compile_program(prog)
    mod = llvm.parse_assembly(result.module_ir)
    tm = target_machine()
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(3))
    pb.getModulePassManager().run(mod, pb)
    assert "<8 x float>" in str(mod) or "<16 x float>" in str(mod) or "<4 x float>" in str(mod)


# ======================================================== random programs
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_programs_agree_with_interp(program):
    buffers, scalars, symbols = random_inputs(program, np.random.default_rng(0))
    got, want = both(program, buffers, scalars, symbols)
    compare_buffers(program, got, want)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(max_stages=1, max_instructions=25))
def test_random_programs_in_chunks(program):
    """Several calls per stage, each with its own partials, as the runtime's threads."""
    buffers, scalars, symbols = random_inputs(program, np.random.default_rng(1))
    want = {k: v.copy() for k, v in buffers.items()}
    INTERP.launch(INTERP.prepare(program), want, scalars, symbols)
    got = {k: v.copy() for k, v in buffers.items()}
    llvm_launch(program, got, scalars, symbols, blocks_per_call=2)
    compare_buffers(program, got, want)


# ================================================== run-time errors, end to end
def _error_programs():
    v, j, h, p = Reg("v"), Reg("j"), Reg("h"), Reg("p")
    f32 = [("i", I64), ("v", F32), ("j", I64), ("h", I64), ("c", DType.I32), ("p", BOOL)]
    pool = [MemDecl("pa", F32, 6)]
    hist = (BufferParam("x", F32, (N,), "in"), BufferParam("hist", F32, (Affine.of(96),), "inout"))
    end = [Instr("EXIT")]
    yield "global", stage_program([gid(), Instr("ADD", I64, j, (I, Imm(1))),
                                   Instr("LDG", F32, v, addr=Addr("x", j), checked=True)] + end, f32)
    yield "shared", stage_program([gid(), Instr("LDS", F32, v, addr=Addr("sh", I), checked=True)] + end, f32,
                                  shared=[MemDecl("sh", F32, 4)], block=(8,))
    yield "class", stage_program([gid(), Instr("ADD", I64, j, (I, Imm(90))),
                                  Instr("ResAccum", F32, srcs=(Imm(1.0),), addr=Addr("hist", j), checked=True)] + end,
                                 f32,
                                 params=hist)
    yield "pool_full", stage_program([Instr("PoolAlloc", None, h, target="pa", count=4),
                                      Instr("PoolAlloc", None, h, target="pa", count=4)] + end, f32, pools=pool)
    yield "pool_free", stage_program([Instr("PoolAlloc", None, h, target="pa", count=2),
                                      Instr("ADD", I64, j, (h, Imm(1))), Instr("PoolFree", srcs=(j,))] + end, f32,
                                     pools=pool)
    yield "pool", stage_program([Instr("PoolAlloc", None, h, target="pa", count=2),
                                 Instr("PoolLoad", F32, v, addr=Addr("pa", h, 2), checked=True)] + end, f32,
                                pools=pool)
    yield "barrier", stage_program([Instr("SET", I64, p, (Special("tid.x"), Imm(1)), mod="lt"),
                                    Instr("BRA", target="other", pred=Pred(p)), Instr("BarSync"), Instr("EXIT"),
                                    Label("other"), Instr("BarSync")] + end, f32, block=(4,))


@pytest.mark.parametrize("kind,program", list(_error_programs()), ids=lambda x: x if isinstance(x, str) else "")
def test_runtime_errors(kind, program):
    """Each failed check stops the launch with an ExecutionError, never a crash: the
    harness sees the right error code, and the real backend words it as the interpreter."""
    def bufs():
        out = {"x": _x(10), "y": np.zeros(10, np.float32)}
        if "hist" in program.buffers():
            out = {"x": _x(10), "hist": np.zeros(96, np.float32)}
        return out
    with pytest.raises(ExecutionError, match=f"\\({kind}\\)"):
        llvm_launch(program, bufs(), {}, {"n": 10})
    with pytest.raises(ExecutionError) as interp_error:
        INTERP.launch(decoded(program), bufs(), {}, {"n": 10})
    with pytest.raises(ExecutionError) as llvm_error:
        REAL.launch(REAL.prepare(program) if verifies(program) else _real_unverified(program), bufs(), {}, {"n": 10})
    # The same place: stage and instruction (the interpreter adds the lane).
    where = re.compile(r"stage '[^']*': (instruction \d+|lanes)")
    assert where.search(str(llvm_error.value))[0] == where.search(str(interp_error.value))[0]


def _real_unverified(program: Program):
    pytest.skip("the verifier refuses this program, so the real backend never runs it")


# ============================================================ stdlib kernels
KERNEL_FILES = sorted(str(p) for p in KERNELS.glob("*.toml"))


@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: Path(p).stem)
def test_stdlib_kernels_agree_with_interp(path):
    """Programs as the lowering produces them (fused loops, checked reductions, temps)."""
    import hologram as hg
    program = hg.compile_file(path).program
    rng = np.random.default_rng(5)
    symbols = {s: int(rng.integers(3, 200)) for s in program.symbols}
    buffers, scalars = {}, {}
    for p in program.params:
        if isinstance(p, ScalarParam):
            scalars[p.name] = p.dtype.np.type(0.5 if p.dtype.is_float else 3)
        else:
            shape = [d.evaluate(symbols) for d in p.shape]
            buffers[p.name] = rng.standard_normal(shape).astype(p.dtype.np) if p.dtype.is_float else \
                rng.integers(0, 200, shape).astype(p.dtype.np)
    got, want = both(program, buffers, scalars, symbols)
    terms = math.prod(symbols.values())
    for name in want:
        if want[name].dtype.kind == "f":
            assert_close(got[name], want[name], ulps=8, reduction_n=terms,
                         magnitude=np.abs(want[name]) + np.abs(got[name]) + 1, name=name)
        else:
            same(got[name], want[name])


def test_barrier_layouts():
    """Straight-line barriers get one lane loop per region; a barrier in control flow
    (here: a subroutine) gets the state machine."""
    v, t = Reg("v"), Reg("t")
    straight = [gid(), Instr("MOV", I64, t, (Special("tid.x"),)), Instr("LDG", F32, v, addr=Addr("x", I)),
                Instr("STS", F32, srcs=(v,), addr=Addr("sh", t)), Instr("BarSync"),
                Instr("LDS", F32, v, addr=Addr("sh", None, 0)), Instr("STG", F32, srcs=(v,), addr=Addr("y", I)),
                Instr("EXIT")]
    regs = [("i", I64), ("v", F32), ("t", I64)]
    prog = stage_program(straight, regs, shared=[MemDecl("sh", F32, 64)])
    text = compile_program(prog).module_ir
    assert "region1.lane" in text and "dispatch" not in text
    called = straight[:4] + [Instr("CALL", target="sync")] + straight[5:] + [Label("sync"), Instr("BarSync"),
                                                                             Instr("RET")]
    text = compile_program(stage_program(called, regs, shared=[MemDecl("sh", F32, 64)])).module_ir
    assert "dispatch" in text and "region1.lane" not in text
    got, want = both(prog, {"x": _x(100), "y": np.zeros(100, np.float32)}, {}, {"n": 100})
    assert_bufs(got, want)
