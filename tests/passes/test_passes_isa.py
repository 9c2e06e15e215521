"""The built-in ISA passes: each rewrite on a hand-written program and a case it must
leave alone; on random verified programs every pass (and the whole ISA pipeline) keeps
the interpreter's results bit for bit, verifies, and is idempotent or converges."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from hologram.core.errors import ExecutionError
from hologram.isa.asm import format_program, parse_program
from hologram.isa.program import Instr, Program
from hologram.passes import isa_passes
from hologram.passes.isa_bounds import run as bounds
from hologram.passes.isa_copyprop import run as copyprop
from hologram.passes.isa_dce import run as isa_dce
from hologram.passes.isa_licm import run as licm
from hologram.passes.isa_peephole import run as peephole
from hologram.passes.isa_regalloc import run as regalloc
from hologram.testing.isa_strategies import programs
from hologram.verify.verifier import verify
from hologram_cpu_llvm import CpuLlvmBackend
from hologram_interp import InterpBackend

from isa_helpers import compare_buffers, random_inputs
from repo_paths import KERNELS

INTERP = InterpBackend()
LLVM = CpuLlvmBackend(num_threads=2, cache_dir=False)

HEADER = """\
.program p
.symbols n
.param in x: f32[n]
.param in k: i32[n]
.param out y: f32[n]
.param out z: i32[n]
.stage main domain [n] block [4]
"""


def prog(regs: str, body: str) -> Program:
    """A verified one-stage program over x, k -> y, z with the given declarations."""
    return verify(parse_program(HEADER + regs + body))


def asm_body(p: Program) -> list[str]:
    """The stage's instructions and labels, one line each, blanks collapsed."""
    text = format_program(p).split(".stage")[-1].splitlines()[1:]
    return [" ".join(line.split()) for line in text if line.strip() and not line.strip().startswith((".reg", ".init"))]


def run(p: Program, n: int = 7, seed: int = 0) -> dict | str:
    """Launch on the interpreter with deterministic inputs full of edge values."""
    rng = np.random.default_rng(seed)
    symbols = {s: n for s in p.symbols}
    buffers: dict[str, np.ndarray] = {}
    for name, b in p.buffers().items():
        if b.role == "temp":
            continue
        shape = [d.evaluate(symbols) for d in b.shape]
        size = math.prod(shape)
        t = b.dtype
        if t.is_bool:
            arr = rng.integers(0, 2, size).astype(bool)
        elif t.is_int:
            arr = rng.integers(-50 if t.is_signed else 0, 50, size).astype(t.np)
            if size > 2:
                arr[:2] = [t.min, t.max]
        else:
            arr = (rng.standard_normal(size) * 3).astype(t.np)
            if size > 4:
                arr[:4] = [np.nan, -0.0, np.inf, np.finfo(t.np).smallest_subnormal]
        buffers[name] = arr.reshape(shape)
    scalars = {s.name: (s.dtype.np.type(1.5) if s.dtype.is_float else s.dtype.np.type(3))
               for s in p.scalars().values()}
    try:
        INTERP.launch(INTERP.prepare(p), buffers, scalars, symbols)
    except ExecutionError as exc:
        return f"error: {str(exc).split(':')[0]}"
    return buffers


def assert_same_results(a: dict | str, b: dict | str) -> None:
    """Bit for bit, NaN payloads aside."""
    assert isinstance(a, str) == isinstance(b, str), (a, b)
    if isinstance(a, str):
        assert a == b
        return
    for name, want in a.items():
        got = b[name]
        assert got.dtype == want.dtype
        if want.dtype.kind == "f":
            nan = np.isnan(want)
            assert (np.isnan(got) == nan).all(), name
            assert (got[~nan] == want[~nan]).all() and (np.signbit(got[~nan]) == np.signbit(want[~nan])).all(), name
        else:
            assert (got == want).all(), name


def instrs(p: Program) -> int:
    return sum(isinstance(i, Instr) for s in p.stages for i in s.body)


# ============================================================================ peephole
def test_peephole_integer_identities_become_moves_and_copies_fold():
    p = prog("    .reg %i: i64\n    .reg %a, %b, %c: i32\n", """\
    MOV.i64     %i, %gid.x
    LDG.i32     %a, [k + %i]
    ADD.i32     %b, %a, 0
    MUL.i32     %c, 1, %b
    STG.i32     [z + %i], %c
    EXIT
""")
    out = peephole(p)
    assert asm_body(out) == ["MOV.i64 %i, %gid.x", "LDG.i32 %c, [k + %i]", "STG.i32 [z + %i], %c", "EXIT"]
    assert_same_results(run(p), run(out))


def test_peephole_float_identities_only_where_exact():
    p = prog("    .reg %i: i64\n    .reg %v, %a, %b, %c, %d, %e: f32\n", """\
    MOV.i64     %i, %gid.x
    LDG.f32     %v, [x + %i]
    MUL.f32     %a, %v, 1.0
    SUB.f32     %b, %a, 0.0
    ADD.f32     %c, -0.0, %b
    ADD.f32     %d, %c, 0.0
    MUL.f32     %e, %d, 0.0
    STG.f32     [y + %i], %e
    EXIT
""")
    out = peephole(p)
    body = asm_body(out)
    # x * 1.0, x - 0.0 and -0.0 + x are x exactly; x + 0.0 turns -0.0 into +0.0 and
    # x * 0.0 is NaN for infinities: those two stay.
    assert body[1:4] == ["LDG.f32 %c, [x + %i]", "ADD.f32 %d, %c, 0.0", "MUL.f32 %e, %d, 0.0"]
    assert_same_results(run(p), run(out))


def test_peephole_double_negation_select_and_branch_to_next():
    p = prog("    .reg %i: i64\n    .reg %v, %a, %b, %c: f32\n    .reg %p: bool\n", """\
    MOV.i64     %i, %gid.x
    LDG.f32     %v, [x + %i]
    NEG.f32     %a, %v
    NEG.f32     %b, %a
    SET.lt.f32  %p, %b, 1.0
    @%p BRA     next
next:
    SEL.f32     %c, %p, %b, %b
    STG.f32     [y + %i], %c
    EXIT
""")
    out = peephole(p)
    assert asm_body(out)[2:6] == ["NEG.f32 %a, %v", "MOV.f32 %b, %v", "SET.lt.f32 %p, %b, 1.0", "MOV.f32 %c, %b"]
    assert_same_results(run(p), run(out))
    tidy = isa_dce(copyprop(out))  # what the pipeline does next
    assert asm_body(tidy) == ["MOV.i64 %i, %gid.x", "LDG.f32 %v, [x + %i]", "STG.f32 [y + %i], %v", "EXIT"]


def test_peephole_conversions_undone_only_when_the_value_survives():
    p = prog("    .reg %i, %w, %w2: i64\n    .reg %a, %b: i32\n    .reg %s: i16\n", """\
    MOV.i64     %i, %gid.x
    LDG.i32     %a, [k + %i]
    CVT.i64.i32 %w, %a
    CVT.i32.i64 %b, %w
    STG.i32     [z + %i], %b
    CVT.i16.i32 %s, %a
    CVT.i32.i16 %b, %s
    STG.i32     [z + %i], %b
    EXIT
""")
    body = asm_body(peephole(p))
    assert "MOV.i32 %b, %a" in body  # i32 -> i64 -> i32 keeps every value
    assert "CVT.i32.i16 %b, %s" in body  # i32 -> i16 wraps: not undone


def test_peephole_uses_the_verifiers_ranges_for_narrowing_round_trips():
    p2 = prog("    .reg %i, %c, %w: i64\n    .reg %a: i8\n", """\
    MOV.i64     %i, %gid.x
    REM.i64     %c, %i, 96
    CVT.i8.i64  %a, %c
    CVT.i64.i8  %w, %a
    STG.i32.chk [z + %w], 1
    EXIT
""")
    out = peephole(p2)
    assert "MOV.i64 %w, %c" in asm_body(out)  # [0, 95] fits i8: the round trip is the identity
    assert_same_results(run(p2), run(out))
    p3 = prog("    .reg %i, %w: i64\n    .reg %a: i8\n", """\
    MOV.i64     %i, %gid.x
    CVT.i8.i64  %a, %i
    CVT.i64.i8  %w, %a
    STG.i32.chk [z + %w], 1
    EXIT
""")
    assert "CVT.i64.i8 %w, %a" in asm_body(peephole(p3))  # gid.x may exceed 127


# ============================================================================ copyprop
def test_copyprop_replaces_reads_within_straight_line_code():
    p = prog("    .reg %i, %j, %a, %b: i64\n    .reg %p: bool\n", """\
    MOV.i64     %i, %gid.x
    MOV.i64     %j, %i
    MOV.i64     %a, 5
    ADD.i64     %b, %j, %a
    SET.lt.i64  %p, %b, 3
    @%p BRA     skip
    ADD.i64     %b, %a, 1
skip:
    ADD.i64     %b, %b, %a
    REM.i64     %b, %b, $n
    STG.i32.chk [z + %j], 1
    EXIT
""")
    out = copyprop(p)
    body = asm_body(out)
    assert body[1:4] == ["MOV.i64 %j, %gid.x", "MOV.i64 %a, 5", "ADD.i64 %b, %gid.x, 5"]  # chains resolve
    assert "STG.i32.chk [z + %j], 1" in body  # after the label: another region
    assert "ADD.i64 %b, %b, %a" in body
    assert_same_results(run(p), run(out))


def test_copyprop_keeps_registers_where_the_isa_needs_them_and_stops_at_redefinition():
    p = prog("    .reg %i, %j, %c: i64\n    .reg %v: f32\n", """\
    MOV.i64     %i, %gid.x
    MOV.i64     %c, 2
    MOV.i64     %j, %i
    LDG.f32     %v, [x + %j]
    ADD.i64     %i, %i, 0
    MOV.i64     %i, 0
    STG.f32     [y + %j], %v
loop:
    LOOP        %c, loop
    EXIT
""")
    body = asm_body(copyprop(p))
    assert "LDG.f32 %v, [x + %i]" in body  # register copy: fine in an address
    assert "STG.f32 [y + %j], %v" in body  # %i was rewritten since the copy
    assert "LOOP %c, loop" in body  # the counter stays a register


# ============================================================================= isa-dce
def test_dce_removes_dead_pure_code_unreachable_code_and_unused_labels():
    p = prog("    .reg %i, %d: i64\n    .reg %v, %w: f32\n", """\
    MOV.i64     %i, %gid.x
    MUL.i64     %d, %i, 3
    LDG.f32     %w, [x + %i]
    LDG.f32     %v, [x + %i]
    STG.f32     [y + %i], %v
    BRA         out
    ADD.i64     %d, %d, 1
unused:
out:
    EXIT
""")
    out = isa_dce(p)
    assert asm_body(out) == ["MOV.i64 %i, %gid.x", "LDG.f32 %v, [x + %i]", "STG.f32 [y + %i], %v",
                             "BRA out", "out:", "EXIT"]
    assert [r.name for r in out.stages[0].regs] == ["i", "v"]


def test_dce_keeps_what_can_fault_or_has_effects():
    p = prog("    .reg %i, %q: i64\n    .reg %v: f32\n", """\
    MOV.i64     %i, %gid.x
    ADD.i64     %q, %i, 1
    LDG.f32.chk %v, [x + %q]
    PhaseAdv    1
    STG.f32     [y + %i], 1.0
    EXIT
""")
    assert isa_dce(p) == p  # the checked load may raise on the last lane: it stays
    assert run(p) == "error: stage 'main'"


# ================================================================================ licm
LOOP_REGS = "    .reg %i, %c, %t, %u, %w: i64\n    .reg %v, %s: f32\n    .reg %p: bool\n"


def test_licm_hoists_invariant_arithmetic_and_prefix_loads():
    p = prog(LOOP_REGS, """\
    MOV.i64     %i, %gid.x
    MOV_IMM.f32 %s, 0.0
    MOV.i64     %c, 4
loop:
    LDG.f32     %v, [x + %i]
    MUL.i64     %t, %i, 3
    ADD.i64     %u, %t, $n
    ADD.f32     %s, %s, %v
    LOOP        %c, loop
    CVT.f32.i64 %v, %u
    ADD.f32     %s, %s, %v
    STG.f32     [y + %i], %s
    EXIT
""")
    out = licm(p)
    body = asm_body(out)
    assert body.index("loop:") == 6 and body[3:6] == ["LDG.f32 %v, [x + %i]", "MUL.i64 %t, %i, 3",
                                                     "ADD.i64 %u, %t, $n"]
    assert_same_results(run(p), run(out))
    assert licm(out) == out


def test_licm_leaves_variant_conditional_faulting_and_live_in_instructions():
    p = prog(LOOP_REGS, """\
    MOV.i64     %i, %gid.x
    ADD.i64     %u, %i, 1
    MOV_IMM.f32 %s, 0.0
    MOV.i64     %c, 3
    MOV.i64     %t, 0
    MOV.i64     %w, 0
loop:
    ADD.i64     %w, %w, %t
    MUL.i64     %t, %i, 3
    SET.ge.i64  %p, %w, 0
    @%p BRA     skip
    LDG.f32.chk %v, [x + %u]
    ADD.f32     %s, %s, %v
skip:
    LOOP        %c, loop
    CVT.f32.i64 %v, %w
    ADD.f32     %s, %s, %v
    STG.f32     [y + %i], %s
    EXIT
""")
    # %t is read before it is written (its value crosses iterations), %p depends on %w,
    # and the checked load is invariant but never runs (the branch always skips it):
    # before the loop it would fault on the last lane. Nothing may move.
    assert licm(p) == p
    assert not isinstance(run(p), str)


# ============================================================================== bounds
def test_bounds_drops_checks_the_verifier_proves_and_keeps_the_rest():
    p = verify(parse_program("""\
.program stencil
.symbols n
.param in x: f32[n]
.param out y: f32[n - 2]
.param out total: f32[]
.stage main domain [n - 2] block [4]
    .reg %i, %g: i64
    .reg %a, %b: f32
    MOV.i64     %i, %gid.x
    LDG.f32.chk %a, [x + %i + 2]
    MUL.i64     %g, %i, 7
    LDG.f32.chk %b, [x + %g]
    ADD.f32     %a, %a, %b
    STG.f32.chk [y + %i], %a
    ReduceAdd.f32.chk [total], %a
    EXIT
"""))
    out = bounds(p)
    assert asm_body(out) == ["MOV.i64 %i, %gid.x", "LDG.f32 %a, [x + %i + 2]", "MUL.i64 %g, %i, 7",
                             "LDG.f32.chk %b, [x + %g]", "ADD.f32 %a, %a, %b", "STG.f32 [y + %i], %a",
                             "ReduceAdd.f32 [total], %a", "EXIT"]
    assert verify(out) is out and bounds(out) == out
    for n in (3, 9):  # with 9 the gather goes out of bounds: both raise
        assert_same_results(run(p, n=n), run(out, n=n))


# ============================================================================ regalloc
def test_regalloc_shares_registers_with_disjoint_live_ranges():
    p = prog("    .reg %i: i64\n    .reg %a, %b, %c, %d, %e: f32\n    .reg %k: i32\n", """\
    MOV.i64     %i, %gid.x
    LDG.f32     %a, [x + %i]
    MUL.f32     %b, %a, %a
    ADD.f32     %c, %b, 1.0
    SQRT.f32    %d, %c
    MOV.f32     %e, %d
    STG.f32     [y + %i], %e
    LDG.i32     %k, [k + %i]
    STG.i32     [z + %i], %k
    EXIT
""")
    out = regalloc(p)
    assert [(r.name, str(r.dtype)) for r in out.stages[0].regs] == [("i", "i64"), ("a", "f32"), ("k", "i32")]
    assert "MOV.f32" not in " ".join(asm_body(out))  # the copy coalesced away
    assert_same_results(run(p), run(out))


def test_regalloc_keeps_values_that_are_live_together_apart():
    p = prog("    .reg %i, %c: i64\n    .reg %acc, %v, %t: f32\n", """\
    MOV.i64     %i, %gid.x
    MOV_IMM.f32 %acc, 0.0
    MOV.i64     %c, 3
loop:
    LDG.f32     %v, [x + %i]
    MUL.f32     %t, %v, %acc
    ADD.f32     %acc, %acc, %t
    ADD.f32     %acc, %acc, %v
    LOOP        %c, loop
    STG.f32     [y + %i], %acc
    EXIT
""")
    out = regalloc(p)
    # %acc lives around the loop, %v until the second ADD: only %t can share (with %v? no:
    # %v is read after %t is written), so the three floats stay three.
    assert len(out.stages[0].regs) == 5
    assert_same_results(run(p), run(out))


def test_a_malformed_stage_is_left_for_the_verifier_to_report():
    import attrs

    p = prog("    .reg %i: i64\n    .reg %p: bool\n", """\
    MOV.i64     %i, %gid.x
    SET.lt.i64  %p, %i, 2
    @%p BRA     done
    STG.i32     [z + %i], 1
done:
    EXIT
""")
    body = list(p.stages[0].body)
    body[2] = attrs.evolve(body[2], target="nowhere")  # what a buggy plugin pass might leave
    bad = attrs.evolve(p, stages=(attrs.evolve(p.stages[0], body=tuple(body)),))
    for name, run_pass in PASSES.items():
        assert run_pass(bad) == bad, name


# ============================================================== properties on programs
PASSES = {p.name: p.run for p in isa_passes.PASSES}


def _pipeline(p: Program) -> Program:
    for run_pass in PASSES.values():
        p = run_pass(p)
    return p


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_every_pass_keeps_results_verifies_and_converges(program):
    want = run(program)
    for name, run_pass in {**PASSES, "pipeline": _pipeline}.items():
        once = run_pass(program)
        assert verify(once) is once, name
        assert_same_results(want, run(once))
        assert _converges(run_pass, once, 3 if name != "pipeline" else 6), f"{name} does not converge"


def _converges(f, p: Program, limit: int) -> bool:
    """Does applying `f` again reach a fixpoint within `limit` runs?"""
    for _ in range(limit):
        q = f(p)
        if q == p:
            return True
        p = q
    return False


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_cpu_llvm_runs_the_optimized_program_as_the_interpreter_runs_the_original(program):
    """The proven accesses lose their run-time check on cpu_llvm: a wrong proof would
    show here as a difference (or a crash), where the interpreter checks everything."""
    buffers, scalars, symbols = random_inputs(program, np.random.default_rng(3))
    want = {k: v.copy() for k, v in buffers.items()}
    INTERP.launch(INTERP.prepare(program), want, scalars, symbols)
    got = {k: v.copy() for k, v in buffers.items()}
    LLVM.launch(LLVM.prepare(_pipeline(program)), got, scalars, symbols)
    compare_buffers(program, got, want)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(max_stages=1))
def test_the_pipeline_never_grows_a_program(program):
    out = _pipeline(program)
    assert instrs(out) <= instrs(program)
    assert sum(len(s.regs) for s in out.stages) <= sum(len(s.regs) for s in program.stages)


# ===================================================================== the stdlib
@pytest.mark.parametrize("kernel", ["softmax", "layernorm", "stencil3", "class_histogram", "matvec"])
def test_stdlib_kernels_shrink_and_agree(kernel):
    import hologram

    lib = hologram.compile_file(KERNELS / f"{kernel}.toml", passes=[p.name for p in _ir_passes()])
    for k in ([lib] if hasattr(lib, "program") else [lib[name] for name in lib]):
        before = k.program
        after = _pipeline(before)
        assert verify(after) is after
        assert instrs(after) <= instrs(before)
        assert sum(len(s.regs) for s in after.stages) < sum(len(s.regs) for s in before.stages)
        assert sum(getattr(i, "checked", False) for s in after.stages for i in s.body) <= 1
        assert_same_results(run(before, n=37), run(after, n=37))


def _ir_passes():
    from hologram.registry.pipelines import resolve

    return resolve("O2").ir
