"""The verifier: every rule rejects with its message; real kernels' idioms are proven;
the bounds analysis is sound against concrete execution."""

from __future__ import annotations

import math

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hologram.core.errors import VerifyError
from hologram.core.types import Affine, DType
from hologram.isa.asm import parse_program
from hologram.isa.program import Addr, Imm, Init, Instr, Label, Pred, Program, Reg, RegDecl, Special, Stage, Sym
from hologram.testing import scratch_cases
from hologram.testing.isa_strategies import programs
from hologram.verify import dataflow
from hologram.verify.abstract_values import EMPTY
from hologram.verify.dataflow import StageAnalysis
from hologram.verify.decl_rules import MAX_BLOCK_SCRATCH_BYTES, MAX_SHARED_BYTES, block_scratch, representable
from hologram.verify.intervals import Domain, Interval, Poly
from hologram.verify.verifier import verify

from repo_paths import DOCS

HEADER = """\
.program p
.symbols n
.param s: f32
.param in x: f32[n]
.param out y: f32[n]
.stage main domain [n] block [4]
    .reg %i, %c, %k: i64
    .reg %v, %w: f32
    .reg %p: bool
    .shared sh: f32[4]
    .pool pl: f32[4]
"""


def prog(body: str, header: str = HEADER) -> Program:
    return parse_program(header + body)


def rejected(p: Program, rule: str, *fragments: str) -> VerifyError:
    with pytest.raises(VerifyError) as exc:
        verify(p)
    err = exc.value
    assert err.rule == rule, str(err)
    for f in fragments:
        assert f in str(err), str(err)
    return err


# ============================================================================ accepted
@given(programs())
def test_generated_programs_verify(p):
    assert verify(p) is p


ACCEPTED = {
    "stencil": """\
.program stencil
.symbols n
.param in x: f32[n]
.param out y: f32[n - 2]
.stage main domain [n - 2] block [64]
    .reg %i: i64
    .reg %a, %b: f32
    MOV.i64 %i, %gid.x
    LDG.f32 %a, [x + %i]
    LDG.f32 %b, [x + %i + 2]
    ADD.f32 %a, %a, %b
    STG.f32 [y + %i], %a
    EXIT
""",
    "gemm: loop over k, guarded against k = 0, index from the counter": """\
.program gemm
.symbols m n k
.param in a: f32[m, k]
.param in b: f32[k, n]
.param out c: f32[m, n]
.stage main domain [m, n] block [16, 16]
    .reg %i, %j, %p, %cnt, %ia, %ib, %ic: i64
    .reg %acc, %va, %vb: f32
    .reg %q: bool
    MOV.i64 %i, %gid.x
    MOV.i64 %j, %gid.y
    MOV_IMM.f32 %acc, 0.0
    MOV.i64 %cnt, $k
    SET.lt.i64 %q, %cnt, 1
    @%q BRA done
top:
    SUB.i64 %p, $k, %cnt
    MAD.i64 %ia, %i, $k, %p
    MAD.i64 %ib, %p, $n, %j
    LDG.f32 %va, [a + %ia]
    LDG.f32 %vb, [b + %ib]
    FMA.f32 %acc, %va, %vb, %acc
    LOOP %cnt, top
done:
    MAD.i64 %ic, %i, $n, %j
    STG.f32 [c + %ic], %acc
    EXIT
""",
    "guard on the lane index, clamps, masks, gathers, shared and pool": HEADER + """\
    MOV.i64 %i, %gid.x
    ADD.i64 %k, %i, 1
    SET.ge.i64 %p, %k, $n
    @%p BRA skip
    LDG.f32 %v, [x + %k]
skip:
    ADD.i64 %k, %i, 5
    MIN.i64 %k, %k, $n
    SUB.i64 %k, %k, 1
    LDG.f32 %v, [x + %k]
    REM.i64 %c, %k, $n
    LDG.f32 %v, [x + %c]
    AND.i64 %c, %i, 3
    STS.f32 [sh + %c], %v
    MOV.i64 %c, %tid.x
    LDS.f32 %v, [sh + %c]
    LDS.f32 %v, [sh + 3]
    PoolAlloc %c, pl, 3
    PoolStore.f32 [pl + %c + 2], %v
    PoolLoad.f32 %w, [pl + %c]
    PoolFree %c
    LDG.f32.chk %w, [x + %i + 7]
    STG.f32 [y + %i], %w
    EXIT
""",
    "reassociable float accumulation": HEADER + """\
    MOV.i64 %i, %gid.x
    LDG.f32 %v, [x + %i]
    MOV_IMM.f32 %w, 0.0
    ADD.reassoc.f32 %w, %w, %v
    MAX.reassoc.f32 %w, %w, %v
    MIN.reassoc.f32 %v, %w, %v
    STG.f32 [y + %i], %v
    EXIT
""",
    "subroutine reads the caller's registers, loop counts down": HEADER + """\
    MOV.i64 %i, %gid.x
    MOV_IMM.i64 %c, 3
again:
    CALL load
    LOOP %c, again
    STG.f32 [y + %i], %v
    EXIT
load:
    LDG.f32 %v, [x + %i]
    RET
""",
    "one combining operation per reduced buffer and stage (ResAccum is a sum)": """\
.program sums
.symbols n
.param in x: i32[n]
.param out hist: i64[97]
.param out top: i64[1]
.stage count domain [n] block [64]
    .reg %i, %c, %v: i64
    .reg %b: i32
    .init hist[96] = 0
    MOV.i64 %i, %gid.x
    LDG.i32 %b, [x + %i]
    ClsGet.i32 %b, %b
    CVT.i64.i32 %c, %b
    MOV_IMM.i64 %v, 1
    ResAccum.i64 [hist + %c], %v
    ReduceAdd.i64 [hist + 96], %v
    ReduceMax.i64 [top], %c
    EXIT
.stage again domain [n] block [64]
    .reg %v: i64
    MOV_IMM.i64 %v, 2
    ReduceMul.i64 [hist + 96], %v
    EXIT
""",
}


@pytest.mark.parametrize("name", list(ACCEPTED))
def test_accepted(name):
    p = parse_program(ACCEPTED[name])
    assert verify(p) is p


# ============================================================================ rejected
I_EQ_GID = "    MOV.i64 %i, %gid.x\n"
REJECTED = [
    # --- dataflow
    ("    ADD.f32 %v, %v, 1.0\n    EXIT\n", "uninitialized", "instruction 0 `ADD.f32 %v, %v, 1.0`",
     "%v may be read before it is written"),
    (I_EQ_GID + "    SET.lt.i64 %p, %i, 2\n    @%p BRA L\n    MOV_IMM.f32 %v, 1.0\nL:\n    STG.f32 [y + %i], %v\n"
     "    EXIT\n", "uninitialized", "instruction 5", "%v may be read"),
    (I_EQ_GID + "    LDG.f32 %v, [x + %i + 1]\n    EXIT\n", "bounds", "instruction 1 `LDG.f32 %v, [x + %i + 1]`",
     "%i + 1 lies in [1, n]", "x has n element(s)", "LDG.f32.chk"),
    ("    MOV_IMM.f32 %v, 1.0\n    STS.f32 [sh + 4], %v\n    EXIT\n", "bounds", "shared access",
     "sh has 4 element(s)"),
    ("    PoolAlloc %k, pl, 2\n    PoolLoad.f32 %v, [pl + %k + 3]\n    EXIT\n", "bounds", "%k + 3 lies in [3, 5]"),
    ("    MOV.i64 %c, $n\n    LDG.f32 %v, [x + %c]\n    EXIT\n", "bounds", "%c lies in [n, n]"),
    ("    LDG.f32 %v, [x + %c]\n    EXIT\n", "uninitialized", "%c may be read"),
    ("    MOV_IMM.i64 %c, 3\nL:\n    SUB.i64 %k, $n, %c\n    LDG.f32 %v, [x + %k]\n    LOOP %c, L\n    EXIT\n",
     "bounds", "%k lies in"),
    # --- operand types
    ("    MOV.i64 %v, %gid.x\n    EXIT\n", "type", "the destination %v is f32 but MOV needs i64"),
    ("    ADD.f32 %v, %i, 1.0\n    EXIT\n", "type", "source 1 %i is i64 but ADD needs f32"),
    ("    MOV.f32 %v, %gid.x\n    EXIT\n", "type", "special register (i64)"),
    ("    MOV.i64 %i, $s\n    EXIT\n", "type", "$s is f32 but MOV needs i64"),
    ("    MOV.i64 %i, $q\n    EXIT\n", "symbol", "$q is neither a shape symbol nor a scalar parameter"),
    ("    SEL.f32 %v, %w, %v, %w\n    EXIT\n", "type", "source 1 %w is f32 but SEL needs bool"),
    ("    CVT.f32.i32 %v, %i\n    EXIT\n", "type", "%i is i64 but CVT needs i32"),
    ("    SET.lt.f32 %v, %v, %w\n    EXIT\n", "type", "the destination %v is f32 but SET needs bool"),
    ("    MOV.f32 %zz, 1.0\n    EXIT\n", "undeclared", "register %zz is not declared"),
    ("    MOV_IMM.f32 %v, 0.1\n    EXIT\n", "immediate",
     "source 1 (the immediate 0.1) is not exactly representable in f32"),
    ("    MOV_IMM.i64 %i, 9223372036854775808\n    EXIT\n", "immediate", "not exactly representable in i64"),
    ("    MOV_IMM.f32 %v, true\n    EXIT\n", "immediate", "(the immediate True) is not exactly representable in f32"),
    ("    MOV_IMM.bool %p, 1\n    EXIT\n", "immediate", "representable in bool"),
    ("    MOV_IMM.f32 %v, %w\n    EXIT\n", "operand", "MOV_IMM takes an immediate"),
    ("L:\n    LOOP 3, L\n    EXIT\n", "operand", "the loop counter must be a general register"),
    ("    PoolFree 0\n    EXIT\n", "operand", "the pool handle must be a general register"),
    ("    LDG.i64 %i, [x]\n    EXIT\n", "type", "'x' holds f32 but the access is i64"),
    ("    LDG.f32 %v, [x + %v]\n    EXIT\n", "type", "the index %v is f32"),
    # --- opcode forms and types
    ("    SET.foo.f32 %p, %v, %w\n    EXIT\n", "compare", "unknown comparison 'foo'"),
    ("    ADD.bool %p, %p, %p\n    EXIT\n", "dtype", "ADD works on a numeric type, not bool"),
    ("    SQRT.i64 %i, %i\n    EXIT\n", "dtype", "SQRT works on a float type"),
    ("    SHL.f32 %v, %v, %v\n    EXIT\n", "dtype", "SHL works on an integer type"),
    ("    PhaseGet.i64 %i\n    EXIT\n", "dtype", "PhaseGet takes no type suffix"),
    ("    ADD %v, %v, %v\n    EXIT\n", "dtype", "ADD needs a type suffix"),
    ("    @%p ADD.f32 %v, %v, %v\n    EXIT\n", "form", "only BRA can be predicated"),
    ("    ADD.f32.chk %v, %v, %v\n    EXIT\n", "form", ".chk applies to memory accesses"),
    ("    SET.f32 %p, %v, %w\n    EXIT\n", "form", "SET needs a comparison"),
    ("    ADD.lt.f32 %v, %v, %w\n    EXIT\n", "form", "only SET takes a comparison and only ADD, MAX, MIN take "
     ".reassoc"),
    ("    SUB.reassoc.f32 %v, %v, %w\n    EXIT\n", "form", "only ADD, MAX, MIN take .reassoc"),
    ("    ADD.reassoc.i64 %i, %i, %c\n    EXIT\n", "form", "ADD.reassoc applies to float types, not i64"),
    ("    SET.reassoc.f32 %p, %v, %w\n    EXIT\n", "compare", "unknown comparison 'reassoc'"),
    ("    CVT.f32 %v, %w\n    EXIT\n", "form", "CVT needs the source type"),
    ("    @%v BRA L\nL:\n    EXIT\n", "type", "the predicate %v is f32 but BRA needs bool"),
    # --- memory spaces
    ("    LDG.f32 %v, [sh]\n    EXIT\n", "space", "LDG accesses global buffers (parameters and temporaries), and 'sh'"),
    ("    LDS.f32 %v, [x]\n    EXIT\n", "space", "LDS accesses .shared arrays"),
    ("    PoolLoad.f32 %v, [x]\n    EXIT\n", "space", "PoolLoad accesses .pool arrays"),
    ("    PoolAlloc %k, nope, 1\n    EXIT\n", "space", "'nope', which is not a .pool array"),
    ("    PoolAlloc %k, pl, 5\n    EXIT\n", "size", "PoolAlloc of 5 elements from pool 'pl' of 4"),
    ("    MOV_IMM.f32 %v, 1.0\n    STG.f32 [x], %v\n    EXIT\n", "readonly", "STG writes 'x', an input"),
    ("    MOV_IMM.f32 %v, 1.0\n    ReduceAdd.f32 [x], %v\n    EXIT\n", "readonly", "ReduceAdd writes 'x'"),
    ("    MOV_IMM.f32 %v, 1.0\n    ResAccum.f32 [y + 2], %v\n    EXIT\n", "form",
     "instruction 1 `ResAccum.f32 [y + 2], %v`", "ResAccum needs an index register holding the Atlas class"),
    # --- reductions
    ("    MOV_IMM.f32 %v, 1.0\n    ReduceAdd.f32 [y], %v\n    ReduceMax.f32 [y], %v\n    EXIT\n", "reduction",
     "instruction 2 `ReduceMax.f32 [y], %v`", "'y' is reduced with ReduceMax here and with ReduceAdd at instruction 1"),
    ("    MOV_IMM.f32 %v, 1.0\n    MOV_IMM.i64 %k, 0\n    ResAccum.f32 [y + %k], %v\n    ReduceMul.f32 [y], %v\n"
     "    EXIT\n", "reduction", "with ReduceMul here and with ResAccum (a sum) at instruction 2"),
    # --- control flow
    ("    BRA nowhere\n    EXIT\n", "label", "label 'nowhere' does not exist"),
    ("L:\n    BRA L\n", "branch", "BRA may only jump forward"),
    ("    MOV_IMM.i64 %c, 1\n    LOOP %c, L\nL:\n    EXIT\n", "branch", "LOOP may only jump backward"),
    ("    MOV_IMM.i64 %c, 3\nL:\n    MOV_IMM.i64 %c, 2\n    LOOP %c, L\n    EXIT\n", "loop-counter",
     "instruction 3 `LOOP %c, L`", "the loop counter %c is written inside its loop, at instruction 2"),
    ("    MOV_IMM.i64 %c, 3\nL:\n    CALL S\n    LOOP %c, L\n    EXIT\nS:\n    MOV_IMM.i64 %c, 1\n    RET\n",
     "loop-counter", "by a call to 'S'"),
    ("    MOV_IMM.i64 %c, 2\n    MOV_IMM.i64 %k, 2\nA:\n    MOV_IMM.f32 %v, 1.0\nB:\n    LOOP %c, A\n"
     "    LOOP %k, B\n    EXIT\n", "loop-nesting", "overlaps the loop closed at instruction 6"),
    ("    CALL S\n    EXIT\nS:\n    CALL S\n    RET\n", "recursion", "recursive call: S -> S"),
    ("    CALL A\n    EXIT\nA:\n    CALL B\n    RET\nB:\n    CALL A\n    RET\n", "recursion", "A -> B -> A"),
    ("    RET\n", "ret", "RET is reachable from the stage entry without a CALL"),
    ("    MOV_IMM.f32 %v, 1.0\n", "fall-off", "control can fall off the end of the stage here"),
    ("", "fall-off", "the stage body is empty"),
    ("    CALL S\n    EXIT\nS:\n    MOV_IMM.f32 %v, 1.0\n", "fall-off", "reached from subroutine 'S'"),
    ("    CALL S\n    EXIT\nS:\n    BarSync\n    RET\n", "barsync", "BarSync inside subroutine 'S'"),
    ("L:\nL:\n    EXIT\n", "duplicate", "label 'L' is defined twice"),
]


@pytest.mark.parametrize("case", REJECTED, ids=lambda c: f"{c[1]}:{c[2][:40]}")
def test_rejected_instruction_rules(case):
    body, rule, *fragments = case
    err = rejected(prog(body), rule, "program 'p', stage 'main'", *fragments)
    assert err.stage == "main"


def _header(replace: str, by: str) -> str:
    assert replace in HEADER
    return HEADER.replace(replace, by)


PROGRAM_RULES = [
    (_header(".symbols n", ".isa 2\n.symbols n"), "isa-version", "ISA version 2 is not supported"),
    (_header(".program p", '.program "p q"'), "name", "the program name must be an identifier"),
    (_header(".param s: f32", ".param x: f32"), "duplicate", "'x' is declared twice"),
    (_header(".param s: f32", ".param n: f32"), "duplicate", "(as a symbol and as a scalar parameter)"),
    (_header(".param in x", ".param foo x"), "role", "has role 'foo'; expected 'in' or 'out' or 'inout'"),
    (_header(".param out y: f32[n]", ".param out y: f32[n]\n.temp t: f32[k]"), "symbol",
     "the shape of 't' uses symbol 'k'"),
    (_header(".param out y: f32[n]", ".param out y: f32[n]\n.temp in t: f32[n]"), "role", "temporary 't'"),
    (_header("domain [n] block [4]", "domain [n, n, n, n] block [1, 1, 1, 1]"), "domain", "4 dimensions"),
    (_header("domain [n] block [4]", "domain [] block []"), "domain", "0 dimensions"),
    (_header("domain [n] block [4]", "domain [n] block [4, 1]"), "block", "one size per domain dimension"),
    (_header("domain [n] block [4]", "domain [n] block [0]"), "block", "positive integers"),
    (_header("domain [n] block [4]", "domain [n, n] block [64, 32]"), "block", "2048 lanes exceeds the limit"),
    (_header("domain [n] block [4]", "domain [n - m] block [4]"), "symbol", "the domain uses symbol 'm'"),
    (_header(".reg %v, %w: f32", ".reg %v, %i: f32"), "duplicate", "register %i is declared twice"),
    (_header(".shared sh: f32[4]", ".shared sh: f32[0]"), "size", "shared array 'sh' has size 0"),
    (_header(".pool pl: f32[4]", ".pool pl: f32[5000]"), "size", "expected 1 to 4096"),
    (_header(".shared sh: f32[4]", ".shared x: f32[4]"), "duplicate", "shared array 'x' reuses the name"),
    (_header(".pool pl: f32[4]", ".pool pl: f32[4]\n.init z[0] = 0.0"), "init", "'z', which is not a global"),
    (_header(".pool pl: f32[4]", ".pool pl: f32[4]\n.init x[0] = 0.0"), "readonly", "whose role is 'in'"),
    (_header(".pool pl: f32[4]", ".pool pl: f32[4]\n.init y[0] = 1e300"), "immediate", "not exactly representable"),
    (_header(".pool pl: f32[4]", ".pool pl: f32[4]\n.init y[0] = 0.0"), "bounds", "y has n element(s)"),
    (_header(".param out y: f32[n]", ".param out y: f32[n]\n.param out r: f32[]")
     + "    .init r[1] = 0.0\n", "bounds", ".init r[1] may be out of bounds"),
]


@pytest.mark.parametrize("text, rule, fragment", PROGRAM_RULES)
def test_rejected_program_and_stage_rules(text, rule, fragment):
    rejected(parse_program(text + "    EXIT\n"), rule, fragment)


def test_a_program_that_passed_is_not_checked_again(monkeypatch):
    from hologram.verify import verifier
    p = parse_program(ACCEPTED[next(iter(ACCEPTED))])
    runs = []
    real = verifier._StageChecker.run
    monkeypatch.setattr(verifier._StageChecker, "run", lambda self: runs.append(1) or real(self))
    assert verify(p) is p and verify(p) is p
    assert len(runs) == len(p.stages)
    # an equal copy: its stages passed under the same signature, so they are not re-run
    assert verify(attrs.evolve(p)) is not p and len(runs) == len(p.stages)
    # the same stages under another signature are checked again (their buffers differ)
    other = attrs.evolve(p, symbols=p.symbols + ("unused",))
    assert verify(other) is other and len(runs) == 2 * len(p.stages)
    with pytest.raises(VerifyError):
        verify(None)


def test_a_well_typed_program_is_walked_once(monkeypatch):
    from hologram.isa import structure
    p = parse_program(ACCEPTED[next(iter(ACCEPTED))])
    walks = []
    real = structure._problem
    monkeypatch.setattr(structure, "_problem", lambda *a: walks.append(1) or real(*a))
    assert structure.structure_problem(p) is None
    first = len(walks)
    assert first > 0 and structure.structure_problem(p) is None and len(walks) == first
    bad = attrs.evolve(p, name=5)
    assert structure.structure_problem(bad) and structure.structure_problem(bad)  # said every time


def test_two_stages_with_one_name():
    p = prog("    EXIT\n")
    rejected(attrs.evolve(p, stages=p.stages * 2), "duplicate", "two stages are named 'main'")


def test_structurally_broken_values_are_rejected_not_crashed():
    p = prog("    EXIT\n")
    st0 = p.stages[0]
    cases = [
        (attrs.evolve(st0, body=(Instr("FOO"),)), "opcode", "unknown opcode 'FOO'"),
        (attrs.evolve(st0, body=(Instr("ADD", DType.F32, Reg("v"), (Reg("v"),)),)), "form", "takes 2 source"),
        (attrs.evolve(st0, body=(Instr("EXIT", dst=Reg("v")),)), "form", "EXIT takes no a destination"),
        (attrs.evolve(st0, body=("EXIT",)), "structure", "program.stages[0].body[0] should be Instr or Label"),
        (attrs.evolve(st0, regs=(RegDecl("r", "f32"),)), "structure", "stages[0].regs[0].dtype should be DType"),
        (attrs.evolve(st0, regs=(RegDecl("1r", DType.F32),)), "name", "register name '1r'"),
        (attrs.evolve(st0, block=(True,)), "structure", "stages[0].block[0] should be int"),
    ]
    for stage, rule, fragment in cases:
        rejected(attrs.evolve(p, stages=(stage,)), rule, fragment)
    rejected(attrs.evolve(p, isa_version="1"), "structure", "isa_version should be int")
    rejected(attrs.evolve(p, params=(object(),)), "structure", "should be BufferParam or ScalarParam")
    rejected("p", "structure", "verify expects a Program")  # type: ignore[arg-type]


_JUNK = [None, 0, -1, 10**30, "x", "", "L1", Reg("zz"), Reg("r0"), Imm(math.nan), Imm(True), Imm("s"), DType.F32,
         DType.BOOL, (), (Reg("r0"),), (Imm(1), Imm(2)), Addr("x"), Addr("nope", Reg("r0"), 3), Addr("sh", None, -1),
         Pred(Reg("r0")), Special("gid.x"), Sym("n"), Sym("zz"), True, 1.5, "SET", "lt", "pl", object()]


@given(programs(max_stages=1, max_instructions=15), st.data())
@settings(max_examples=100)
def test_corrupted_programs_are_rejected_cleanly(p, data):
    """Any field of any instruction or stage replaced by junk: the verifier, encoder and
    formatter answer with their own error (or accept), never another exception."""
    from hologram.core.errors import ISAError
    from hologram.isa.asm import format_program
    from hologram.isa.encoding import encode

    s = p.stages[0]
    if data.draw(st.booleans()):
        k = data.draw(st.integers(0, len(s.body) - 1))
        item = s.body[k]
        field = data.draw(st.sampled_from([f.name for f in attrs.fields(type(item))]))
        s = attrs.evolve(s, body=s.body[:k] + (attrs.evolve(item, **{field: data.draw(st.sampled_from(_JUNK))}),)
                         + s.body[k + 1:])
    else:
        field = data.draw(st.sampled_from([f.name for f in attrs.fields(Stage)]))
        s = attrs.evolve(s, **{field: data.draw(st.sampled_from(_JUNK))})
    q = attrs.evolve(p, stages=(s,))
    for fn, error in ((verify, VerifyError), (encode, ISAError), (format_program, ISAError)):
        try:
            fn(q)
        except error:
            pass


def test_too_many_calling_contexts(monkeypatch):
    body = "    MOV_IMM.i64 %c, 1\n    CALL S\n    MOV_IMM.i64 %c, 2\n    CALL S\n    EXIT\nS:\n    RET\n"
    verify(prog(body))
    monkeypatch.setattr(dataflow, "MAX_CONTEXTS", 1)  # main, then S from two calling states
    from hologram.verify import verifier
    monkeypatch.setattr(verifier, "_STAGES_PASSED", type(verifier._STAGES_PASSED)())  # the limit changed
    rejected(prog(body), "complexity", "too many distinct calling contexts")


def test_error_attributes_and_hint():
    err = rejected(prog(I_EQ_GID + "    LDG.f32 %v, [x + %i + 1]\n    EXIT\n"), "bounds")
    assert (err.stage, err.index) == ("main", 1)
    assert err.hint is not None and "LDG.f32.chk" in err.hint


# ==================================================================== block scratch
@pytest.mark.parametrize("name", scratch_cases.AT_LIMIT)
def test_a_stage_at_the_scratch_limit_verifies_and_one_element_more_is_refused(name):
    p = scratch_cases.at_limit(name)
    scratch = block_scratch(p.stages[0])
    assert scratch.total == MAX_BLOCK_SCRATCH_BYTES or scratch.shared == MAX_SHARED_BYTES
    assert verify(p) is p
    err = rejected(scratch_cases.over(name), "scratch", "program", "stage 'main'", "the limit is")
    assert (err.stage, err.index) == ("main", None)


@pytest.mark.parametrize("name, message", [
    ("pool_f64_4096_barrier_1024_lanes", "the block scratch is 33,611,776 bytes (1,024 lanes x (32,768 pool + 56 "
                                         "register bytes) + 0 shared bytes); the limit is 1,048,576 bytes"),
    ("shared_16_f64_65536", "the shared arrays take 8,388,608 bytes; the limit is 32,768 bytes"),
    ("pool_f64_4096_state_machine", "the block scratch is 33,619,968 bytes"),
    ("pools_256_f64_4096_one_lane", "the block scratch is 8,388,608 bytes (1 lane x (8,388,608 pool + 0 register "
                                    "bytes) + 0 shared bytes)"),
])
def test_the_programs_that_smashed_cpu_llvms_stack_are_refused(name, message):
    """Issue 21: each verified, and each killed cpu_llvm with SIGSEGV (a 48 MiB frame)."""
    rejected(scratch_cases.reproducer(name), "scratch", f"program 'smash_", "stage 'main'", message)


def test_registers_count_in_the_block_scratch_only_across_a_barrier():
    """Without a BarSync a backend may run a block's lanes one at a time; with one, every
    lane is suspended at once, registers and all."""
    pool = (MAX_BLOCK_SCRATCH_BYTES // 1024,)  # the whole budget, with nothing left for registers
    assert verify(scratch_cases.scratch_program("free_lanes", DType.U8, pools=pool))
    rejected(scratch_cases.scratch_program("barrier", DType.U8, pools=pool, barrier="straight"), "scratch",
             "(1,024 pool + 56 register bytes)")


def test_the_lowering_stays_within_the_scratch_limit():
    """The only shared arrays the lowering makes are the online softmax's chunks, widest
    for f64; its blocks have no pools and no barrier."""
    import hologram as hg

    doc = ('[kernel]\nname = "s"\nversion = "1.0.0"\nreassociate = true\ninputs = { x = "f64[n]" }\n'
           'outputs = { y = "f64[n]" }\nbody = """\nm = max(x)\ne = exp(x - m)\ny = e / sum(e)\n"""\n')
    stages = hg.compile(doc, backend="interp").program.stages
    assert max(block_scratch(s).shared for s in stages) == 8 * 1024 <= MAX_SHARED_BYTES
    assert all(block_scratch(s).total <= MAX_BLOCK_SCRATCH_BYTES for s in stages)


# ======================================================================= immediates
@pytest.mark.parametrize("value, dtype, ok", [
    (True, DType.BOOL, True), (1, DType.BOOL, False), (255, DType.U8, True), (256, DType.U8, False),
    (-1, DType.U8, False), (-128, DType.I8, True), (True, DType.I32, False), (1.0, DType.I32, False),
    (0.1, DType.F64, True), (0.1, DType.F32, False), (0.5, DType.F16, True), (2049, DType.F16, False),
    (2048, DType.F16, True), (math.nan, DType.F16, True), (-math.inf, DType.F32, True), (-0.0, DType.F32, True),
    (1e300, DType.F32, False), (2**53 + 1, DType.F64, False), (10**400, DType.F64, False), ("1", DType.I32, False),
])
def test_representable(value, dtype, ok):
    assert representable(value, dtype) is ok


# ===================================================================== the domain
def test_domain_prover_uses_dimension_facts():
    n, m = Poly.sym("n"), Poly.sym("m")
    d = Domain.from_dims([Affine.of("n") - 2, Affine.of("m")], [Affine.of("m") + 0])
    assert d.lower == {"n": 2, "m": 1}
    assert d.nonneg(n - 2) and not d.nonneg(n - 3)
    assert d.le(Poly.const(0), m - 1) and d.le(m * n - 1, m * n)
    assert not d.nonneg(Poly.sym("k"))  # nothing is known about k
    assert d.nonneg(n * m - 2 * m)  # (n' + 2)(m' + 1) - 2(m' + 1) = n'm' + n' >= 0


def test_domain_keeps_bounds_that_do_not_compare():
    d = Domain.from_dims([Affine.of("k")], [Affine.of(1)])
    k = Poly.sym("k")
    c = d.narrow(Interval.point(k), "ge", Interval.point(1), DType.I64)  # after `if c >= 1`
    assert set(c.lo) == {k, Poly.const(1)} and c.hi == (k,)
    back = d.narrow(d.add(c, Interval.point(-1), DType.I64), "gt", Interval.point(0), DType.I64)
    head = d.hull(c, back, DType.I64)
    assert set(head.lo) == {Poly.const(1), k - 1} and head.hi == (k,)
    assert d.widen(head, d.hull(c, d.add(head, Interval.point(-1), DType.I64), DType.I64), DType.I64).hi == (k,)


def test_modular_intervals_stay_correct_modulo_wrapping():
    d = Domain({})
    big = Interval.point(2**62)
    prod = d.mul(big, Interval.point(4), DType.I64)  # 2**64: wraps to 0
    assert not prod.exact
    assert d.narrow(prod, "lt", Interval.point(5), DType.I64) == prod  # comparisons teach nothing
    assert d.exact(prod, DType.I64) == Interval.top(DType.I64)


def _eval(p: Poly, env: dict[str, int]) -> int:
    return sum(c * math.prod(env[s] for s in m) for m, c in p.terms)


def _wrap(v: int, t: DType) -> int:
    return (v - t.min) % (1 << t.bits) + t.min


_CONCRETE = {  # actual i64 semantics (docs/isa.md), on Python ints
    "ADD": lambda a, b: a + b, "SUB": lambda a, b: a - b, "MUL": lambda a, b: a * b,
    "MIN": min, "MAX": max, "AND": lambda a, b: a & b,
    "DIV": lambda a, b: 0 if b == 0 else a // b, "REM": lambda a, b: 0 if b == 0 else a % b,
    "SHL": lambda a, b: a << (b & 63), "SHR": lambda a, b: a >> (b & 63),
    "NEG": lambda a: -a, "ABS": abs, "MOV": lambda a: a,
}
_RING = {"ADD", "SUB", "MUL", "NEG", "MOV", "SHL"}  # commute with wrapping (SHL is a multiplication)


_CONSTANTS = [1, 2, 3, -1, 0, 64, 2**40, 2**62, 2**63 - 1, -(2**63)]


@st.composite
def _random_code(draw, max_depth: int = 2):
    """A random verified stage of i64 code over %gid.x, $n and edge constants: value
    instructions, guards (`SET` + `@%q BRA` over a block, on a register or on $n), and
    counted loops (counter from a constant, $n or a remainder in [0, 3], optionally
    guarded against zero trips) whose bodies may step an induction register."""
    i64, regs = DType.I64, [f"r{k}" for k in range(6)]
    body: list = [Instr("MOV", i64, Reg(r), (Special("gid.x"),)) for r in regs]
    labels = iter(range(10**6))

    def operand():
        kind = draw(st.sampled_from(["r", "r", "imm", "gid", "n"]))
        return Reg(draw(st.sampled_from(regs))) if kind == "r" else Special("gid.x") if kind == "gid" else \
            Sym("n") if kind == "n" else Imm(draw(st.sampled_from(_CONSTANTS)))

    def block(depth: int, counters: list[str]) -> None:
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from(["op", "op", "op"] + (["guard", "loop"] if depth < max_depth else [])))
            if kind == "op":
                op = draw(st.sampled_from(sorted(_CONCRETE)))
                arity = 1 if op in ("NEG", "ABS", "MOV") else 2
                body.append(Instr(op, i64, Reg(draw(st.sampled_from(regs))), tuple(operand() for _ in range(arity))))
            elif kind == "guard":
                end = f"L{next(labels)}"
                lhs = draw(st.sampled_from([Sym("n"), Reg(draw(st.sampled_from(regs)))]))
                body.extend([Instr("SET", i64, Reg("q"), (lhs, Imm(draw(st.sampled_from([0, 1, 3, 17])))),
                                   mod=draw(st.sampled_from(["lt", "le", "gt", "ge", "eq", "ne"]))),
                             Instr("BRA", target=end, pred=Pred(Reg("q"), draw(st.booleans())))])
                block(depth + 1, counters)
                body.append(Label(end))
            else:
                c, head, skip = f"c{depth}", f"L{next(labels)}", f"L{next(labels)}"
                start = draw(st.sampled_from([Sym("n"), Imm(1), Imm(3), "rem"]))
                if start == "rem":  # a count known only as an interval, [0, 3]
                    body.append(Instr("REM", i64, Reg(c), (Reg(draw(st.sampled_from(regs))), Imm(4))))
                else:
                    body.append(Instr("MOV", i64, Reg(c), (start,)))
                if draw(st.booleans()):  # guard against a zero trip count, as lowered loops do
                    body.extend([Instr("SET", i64, Reg("q"), (Reg(c), Imm(1)), mod="lt"),
                                 Instr("BRA", target=skip, pred=Pred(Reg("q")))])
                body.append(Label(head))
                if draw(st.booleans()):  # an induction register, stepped once per iteration
                    body.append(Instr("ADD", i64, Reg(draw(st.sampled_from(regs))),
                                      (Reg("r0"), Imm(draw(st.sampled_from([1, 2, -1]))))))
                    body[-1] = attrs.evolve(body[-1], srcs=(body[-1].dst, body[-1].srcs[1]))
                block(depth + 1, counters + [c])
                body.extend([Instr("LOOP", srcs=(Reg(c),), target=head), Label(skip)])

    block(0, [])
    body.append(Instr("EXIT"))
    decls = (RegDecl("q", DType.BOOL),) + tuple(RegDecl(r, i64) for r in regs) + tuple(
        RegDecl(f"c{k}", i64) for k in range(max_depth))
    stage = Stage("s", (Affine.of("n"),), (4,), decls, body=tuple(body))
    return verify(Program("p", (), symbols=("n",), stages=(stage,)))


def _concrete(it: Instr, regs: dict[str, int], n: int, gid: int, unbounded: bool) -> int:
    vals = [regs[o.name] if isinstance(o, Reg) else gid if isinstance(o, Special) else n if isinstance(o, Sym)
            else o.value for o in it.srcs]
    v = _CONCRETE[it.op](*vals)
    return v if unbounded else _wrap(v, DType.I64)


@given(_random_code(), st.integers(1, 40), st.data())
@settings(max_examples=150)
def test_bounds_analysis_is_sound(p, n, data):
    """Run random code concretely for a random launch; at every instruction executed the
    analysis must have a state, and each claim in it must hold: an exact interval bounds
    the i64 value; a modular one bounds the value computed without wrapping (which the
    i64 value equals modulo 2**64); a `$n` fact bounds n."""
    _check_run(p, n, data.draw(st.integers(0, n - 1)))


def _check_run(p: Program, n: int, gid: int) -> None:
    stage = p.stages[0]
    body = stage.body
    labels = {it.name: k for k, it in enumerate(body) if isinstance(it, Label)}
    analysis = StageAnalysis(p, stage)
    ins, _ = analysis._analyze(0, EMPTY)
    actual: dict[str, int] = {}
    unbounded: dict[str, int] = {}
    pc = steps = 0
    while True:
        steps += 1
        assert steps < 100_000
        state = ins.get(pc)
        assert state is not None, f"instruction {pc} runs but the analysis thinks it unreachable"
        for r, iv in state.vals.items():
            if r == "$n":
                assert n >= iv
            elif isinstance(iv, Interval):
                v = actual[r] if iv.exact else unbounded[r]
                assert all(_eval(b, {"n": n}) <= v <= _eval(h, {"n": n}) for b in iv.lo for h in iv.hi), \
                    (pc, r, str(iv), v)
                assert _wrap(unbounded[r], DType.I64) == actual[r]
                if iv.exact:  # the analysis reasons from the actual value of an exact register
                    unbounded[r] = actual[r]
        it = body[pc]
        pc += 1
        if isinstance(it, Label):
            continue
        if it.op == "EXIT":
            return
        if it.op == "SET":
            a, b = (actual[o.name] if isinstance(o, Reg) else n if isinstance(o, Sym) else o.value for o in it.srcs)
            actual["q"] = {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b, "eq": a == b, "ne": a != b}[it.mod]
        elif it.op == "BRA":
            if actual["q"] != it.pred.negate:
                pc = labels[it.target]
        elif it.op == "LOOP":
            c = it.srcs[0].name
            actual[c] = _wrap(actual[c] - 1, DType.I64)
            unbounded[c] = actual[c]
            if actual[c] > 0:
                pc = labels[it.target]
        else:
            r = it.dst.name
            actual[r] = _concrete(it, actual, n, gid, False)
            result = analysis._transfer(pc - 1, state)["fall"].vals[r]
            # the analysis tracks the unwrapped value through + - * only, from exact values
            unbounded[r] = _concrete(it, unbounded, n, gid, True) if it.op in _RING and not result.exact \
                else actual[r]


def test_lowered_loop_idiom_is_proven_and_needs_its_guard():
    """The loop the lowering emits for `sum(a[i, p] * b[p, j], p)`: a guard on $k, an
    induction register stepped once per trip, the counter counting down."""
    text = """\
.program gemm
.symbols m k n
.param in a: f32[m, k]
.param out c: f32[m]
.stage c domain [m] block [16]
    .reg %i, %r0, %p, %p_n, %r1: i64
    .reg %acc, %f0: f32
    .reg %p0: bool
    MOV.i64 %i, %gid.x
    MOV_IMM.f32 %acc, 0.0
    SET.le.i64 %p0, $k, 0
    @%p0 BRA done
    MUL.i64 %r0, %i, $k
    MOV_IMM.i64 %p, 0
    MOV.i64 %p_n, $k
top:
    ADD.i64 %r1, %r0, %p
    LDG.f32 %f0, [a + %r1]
    ADD.f32 %acc, %acc, %f0
    ADD.i64 %p, %p, 1
    LOOP %p_n, top
done:
    STG.f32 [c + %i], %acc
    EXIT
"""
    assert verify(parse_program(text))
    unguarded = text.replace("    @%p0 BRA done\n", "")
    rejected(parse_program(unguarded), "bounds", "LDG.f32 %f0, [a + %r1]")
    twice = text.replace("    ADD.i64 %p, %p, 1\n", "    ADD.i64 %p, %p, 1\n    ADD.i64 %p, %p, 1\n")
    rejected(parse_program(twice), "bounds", "[a + %r1]")
    sometimes = text.replace("    ADD.i64 %p, %p, 1\n", "    SET.lt.i64 %p0, %i, 3\n    @%p0 BRA skip\n"
                                                        "    ADD.i64 %p, %p, 1\nskip:\n")
    rejected(parse_program(sometimes), "bounds", "[a + %r1]")


def test_the_documented_examples_hold():
    """docs/hasm.md: the annotated example verifies, the encoding dump is exact."""
    import re

    from hologram.isa.encoding import encode

    doc = (DOCS / "hasm.md").read_text()
    example = doc.split("### Annotated example\n\n```\n", 1)[1].split("```", 1)[0]
    assert verify(parse_program(example, "hasm.md"))
    dump = doc.split("Example: this 76-byte file", 1)[1].split("```\n", 1)[1].split("```", 1)[0]
    hexes = "".join(re.match(r"((?:[0-9a-f]{2}\s+)+)", line + " ").group(1).replace(" ", "")
                    for line in dump.splitlines())
    p = parse_program(".program k\n.symbols n\n.param in x: f32[n]\n.stage s domain [n] block [4]\n"
                      ".reg %i: i64\nMOV.i64 %i, %gid.x\nEXIT\n")
    assert bytes.fromhex(hexes) == encode(p)


def test_a_loop_does_not_widen_registers_it_never_writes():
    """Found by `hologram diff-test` (seed 11): `%r0` (gid.x) reached the second loop's
    head first through an edge that narrowed it (`%r0 < %r0` taken: [1, n - 2]), then
    through the other one ([0, n - 1]); widening there dropped the bound although the
    loop never writes `%r0`, and the store after it could no longer be proven."""
    verify(parse_program("""
.program prog
.symbols n
.param in x: i8[n]
.param out y: i8[n]
.stage s domain [n] block [1]
    .reg %r0, %k, %c: i64
    .reg %r1: i8
    .reg %p: bool
    MOV.i64     %r0, %gid.x
    MOV_IMM.i64 %k, 0
    LDG.i8      %r1, [x + %r0]
    SET.lt.i64  %p, %r0, %r0
    @%p BRA     L1
    MOV_IMM.i64 %c, 4
L2:
    MOV_IMM.i64 %k, 1
    LOOP        %c, L2
L1:
    MOV_IMM.i64 %c, 2
L3:
    ADD.i64     %k, %k, 1
    LOOP        %c, L3
    STG.i8      [y + %r0], %r1
    EXIT
"""))


# ============================================= soundness findings of the fuzzing campaign
def _forged(dim: Affine, terms: tuple) -> Affine:
    """`dim` with `terms` as they are, as no constructor builds it any more (Affine
    canonicalizes): the verifier must still read what the runtimes evaluate."""
    object.__setattr__(dim, "terms", terms)
    return dim


def test_poly_of_sums_a_repeated_symbol():
    n = _forged(Affine.of("n"), (("n", -1), ("n", 2)))
    assert n.evaluate({"n": 5}) == 5 and Poly.of(n) == Poly.sym("n")
    assert Poly.of(_forged(Affine.of(3), (("m", 2), ("n", 0), ("m", -1)))) == Poly.sym("m") + 3


def test_a_forged_repeated_symbol_shape_is_read_as_the_runtimes_read_it():
    """`x, y: f32[-1*n + 2*n]` (that is, `n`) over a domain of `2*n` lanes: Poly.of used
    to keep the last term and prove the copy in bounds for `2*n` elements."""
    shape = lambda: (_forged(Affine.of("n"), (("n", -1), ("n", 2))),)  # noqa: E731
    p = prog("    MOV.i64 %i, %gid.x\n    LDG.f32 %v, [x + %i]\n    STG.f32 [y + %i], %v\n    EXIT\n",
             HEADER.replace("domain [n]", "domain [2*n]"))
    p = attrs.evolve(p, params=(p.params[0], attrs.evolve(p.params[1], shape=shape()),
                                attrs.evolve(p.params[2], shape=shape())))
    rejected(p, "bounds", "LDG.f32 %v, [x + %i]")


def test_numpy_block_sizes_do_not_wrap_the_lane_count():
    """`(np.int32(65536),) * 2` made math.prod wrap to 0 lanes: the check passed and
    cpu_llvm returned an untouched output. Stage keeps Python ints."""
    p = prog("    EXIT\n")
    stage = attrs.evolve(p.stages[0], block=(np.int32(65536),))
    assert stage.block == (65536,) and type(stage.block[0]) is int
    two_d = attrs.evolve(stage, domain=(Affine.of("n"), Affine.of("n")), block=(np.int32(65536),) * 2)
    rejected(attrs.evolve(p, stages=(two_d,)), "block", "a block of 4294967296 lanes exceeds the limit of 1024")


def _with_numpy_fields(p: Program) -> Program:
    """`p` (a `.pool pl` first, `LDG` second) with numpy scalars wherever the ISA holds an
    integer or an immediate: the address offset, an init's offset and value, the pool's
    size, a PoolAlloc count and a MOV_IMM's immediate."""
    st = p.stages[0]
    body = list(st.body)
    body[1] = attrs.evolve(body[1], addr=attrs.evolve(body[1].addr, offset=np.int64(0)))
    body[2] = Instr("PoolAlloc", None, Reg("c"), target="pl", count=np.int16(2))
    body[3] = Instr("MOV_IMM", DType.F32, Reg("w"), (Imm(np.float32(0.5)),))
    stage = attrs.evolve(st, body=tuple(body), pools=(attrs.evolve(st.pools[0], size=np.int32(4)),),
                         inits=(Init("z", np.uint8(0), np.float16(0.0)),))
    return attrs.evolve(p, stages=(stage,), isa_version=np.int64(1))


NUMPY_FIELDS = HEADER + """\
    .init z[0] = 0.0
    MOV.i64 %i, %gid.x
    LDG.f32 %v, [x + %i]
    PoolAlloc %c, pl, 2
    MOV_IMM.f32 %w, 0.5
    STG.f32 [y + %i], %v
    ReduceAdd.f32 [z], %w
    EXIT
"""


def test_numpy_scalars_in_isa_values_become_python_values():
    """The fuzzers found numpy integers as address and init offsets passing verify():
    interp refused such a program at prepare, cpu_llvm ran it. Every ISA value converts
    the numpy scalars it is given, so there is one program: same values, same Python
    types, same bytes, same hash, same text."""
    from hologram.isa.asm import format_program
    from hologram.isa.encoding import encode, program_hash
    from hologram.isa.program import MemDecl
    assert type(Addr("x", None, np.int64(3)).offset) is int
    assert type(Instr("PoolAlloc", dst=Reg("c"), target="pl", count=np.uint16(2)).count) is int
    assert type(MemDecl("pl", DType.F32, np.int8(4)).size) is int
    i = Init("y", np.int32(1), np.float32(0.5))
    assert (type(i.offset), type(i.value)) == (int, float)
    assert [type(Imm(v).value) for v in (np.bool_(True), np.int8(-3), np.uint64(2**64 - 1), np.float16(0.5))] \
        == [bool, int, int, float]
    plain = parse_program(NUMPY_FIELDS.replace(".param out y: f32[n]", ".param out y: f32[n]\n.param out z: f32[1]"))
    numpy_built = _with_numpy_fields(plain)
    assert verify(numpy_built) is numpy_built
    assert encode(numpy_built) == encode(plain) and program_hash(numpy_built) == program_hash(plain)
    assert format_program(numpy_built) == format_program(plain)
    st = numpy_built.stages[0]
    assert {type(st.body[1].addr.offset), type(st.body[2].count), type(st.body[3].srcs[0].value),
            type(st.pools[0].size), type(st.inits[0].offset), type(numpy_built.isa_version)} == {int, float}


def test_a_numpy_field_that_escaped_the_constructor_is_malformed():
    """Only a forged value (set past the constructor) can still hold a numpy integer; the
    structure check refuses it rather than let the backends read it two ways."""
    p = prog("    MOV.i64 %i, %gid.x\n    LDG.f32 %v, [x + %i]\n    EXIT\n")
    ldg = p.stages[0].body[1]
    addr = Addr("x", Reg("i"), 0)
    object.__setattr__(addr, "offset", np.int64(0))
    body = (p.stages[0].body[0], attrs.evolve(ldg, addr=addr), p.stages[0].body[2])
    rejected(attrs.evolve(p, stages=(attrs.evolve(p.stages[0], body=body),)), "structure",
             "program.stages[0].body[1].addr.offset should be int, not np.int64(0)")


_HUGE = 10**5000  # Python will not convert it to decimal (4300-digit limit)
_SHOWN = "<16610-bit integer, about 10**5000>"


def _huge_cases() -> dict[str, tuple[Program, str, str]]:
    """Programs holding `_HUGE` somewhere: (program, rule, what the message shows)."""
    p = prog("    MOV.i64 %i, %gid.x\n    LDG.f32 %v, [x + %i]\n    STG.f32 [y + %i], %v\n    EXIT\n")
    st = p.stages[0]

    def body(k: int, ins: Instr) -> Program:
        items = list(st.body)
        items[k] = ins
        return attrs.evolve(p, stages=(attrs.evolve(st, body=tuple(items)),))

    def stage(**fields) -> Program:
        return attrs.evolve(p, stages=(attrs.evolve(st, **fields),))

    def param(k: int, **fields) -> Program:
        params = list(p.params)
        params[k] = attrs.evolve(params[k], **fields)
        return attrs.evolve(p, params=tuple(params))

    def init(i: Init) -> Program:
        return attrs.evolve(param(2, role="inout"), stages=(attrs.evolve(st, inits=(i,)),))

    return {
        "immediate": (body(0, Instr("MOV", DType.I64, Reg("i"), (Imm(_HUGE),))), "immediate",
                      f"source 1 (the immediate {_SHOWN}) is not exactly representable in i64"),
        "float immediate": (body(0, Instr("MOV_IMM", DType.F32, Reg("v"), (Imm(-_HUGE),))), "immediate",
                            f"(the immediate -{_SHOWN}) is not exactly representable in f32"),
        "loop counter": (body(0, Instr("LOOP", None, None, (Imm(_HUGE),), target="x")), "operand",
                         "the loop counter must be a general register, not <Imm holding a huge integer>"),
        "address offset": (body(1, Instr("LDG", DType.F32, Reg("v"), addr=Addr("x", Reg("i"), _HUGE))), "range",
                           f"the address offset {_SHOWN} is beyond 64 bits"),
        "init value": (init(Init("y", 0, _HUGE)), "immediate", f".init y[0] = {_SHOWN}: the value"),
        "init offset": (init(Init("y", _HUGE, 1.0)), "range", f".init y[{_SHOWN}]: the offset is beyond 64 bits"),
        "shape": (param(1, shape=(Affine.of("n") + _HUGE,)), "range",
                  f"the shape of 'x' has the integer {_SHOWN} in a dimension, beyond 64 bits"),
        "domain": (stage(domain=(Affine(-_HUGE),)), "range", f"the domain has the integer -{_SHOWN}"),
        "block": (stage(block=(_HUGE,)), "block", f"a block of {_SHOWN} lanes exceeds the limit of 1024"),
        "pool size": (stage(pools=(attrs.evolve(st.pools[0], size=_HUGE),)), "size",
                      f"pool array 'pl' has size {_SHOWN}; expected 1 to 4096 elements"),
        "isa version": (attrs.evolve(p, isa_version=_HUGE), "isa-version", f"ISA version {_SHOWN} is not supported"),
    }


@pytest.mark.parametrize("case", list(_huge_cases()))
def test_huge_integers_are_refused_with_short_messages(case):
    """verify() raised Python's ValueError formatting a message about a 5,000-digit
    immediate. Integers beyond their type (immediates) or beyond 64 bits (dimensions,
    offsets) are refused, and messages show them abbreviated."""
    p, rule, shown = _huge_cases()[case]
    err = rejected(p, rule, shown)
    assert len(str(err)) < 400, str(err)
