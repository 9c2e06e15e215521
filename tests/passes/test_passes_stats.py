"""hologram.passes.stats: the counts are what the program does, symbolically and bound.

Byte counts are checked against hand counts of small programs (straight-line code, a
guarded loop nest, a data-dependent loop, a subroutine called in a loop, inits) and of
the stdlib kernels; the polynomial and formula algebra against direct evaluation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hologram.core.types import Affine, DType
from hologram.ir import Compute, Expr, KernelIR, TensorDecl
from hologram.isa.asm import parse_program
from hologram.passes.stats import Formula, Poly, Stats, measure
from hologram.passes.stats_table import format_stats, reduction, render

EMPTY_IR = KernelIR("k", "1", (), (), (), ())


def traffic(text: str) -> Stats:
    return measure(EMPTY_IR, parse_program(text))


HEAD = """\
.program p
.symbols n m
.param in x: f32[n]
.param in w: f64[m]
.param out y: f32[n]
.temp t: i32[]
"""


def test_straight_line_stage_counts_every_lane_access():
    s = traffic(HEAD + """
.stage s domain [n - 1] block [4]
    .reg %i: i64
    .reg %a, %b: f32
    .init t[0] = 0
    MOV.i64 %i, %gid.x
    LDG.f32.chk %a, [x + %i]
    LDG.f32.chk %b, [x + %i + 1]
    ADD.f32 %a, %a, %b
    STG.f32.chk [y + %i], %a
    EXIT
""")
    assert str(s.bytes_read) == "8*n - 8"
    assert str(s.bytes_written) == "4*n"  # 4*(n-1) stored + the 4-byte init of t
    assert s.bind(n=5).bytes_read.evaluate({}) == 32
    assert (s.stages, s.instructions, s.registers) == (1, 6, 3)


LOOPS = HEAD + """
.stage s domain [n] block [4]
    .reg %i, %j, %c, %k, %kc, %e: i64
    .reg %p: bool
    .reg %v: f64
    MOV.i64 %i, %gid.x
    SUB.i64 %e, $m, 1
    SET.le.i64 %p, %e, 0
    @%p BRA done
    MOV_IMM.i64 %j, 0
    MOV.i64 %c, %e
top:
    LDG.f64.chk %v, [w + %j]
    MOV_IMM.i64 %kc, 3
inner:
    ReduceAdd.f64.chk [w + %i], %v
    LOOP %kc, inner
    ADD.i64 %j, %j, 1
    LOOP %c, top
done:
    EXIT
"""


def test_loop_nest_trip_counts_are_symbolic_and_clamped():
    s = traffic(LOOPS)
    # (m - 1) iterations of an 8-byte load of w[j], the same element for every lane
    # (moved once), and per lane 3 reductions of 8 bytes into its own w[i]
    assert str(s.bytes_read) == "8*m - 8"
    assert str(s.bytes_written) == "24*m*n - 24*n"
    assert s.bytes_written.evaluate({"n": 10, "m": 4}) == 10 * 3 * 3 * 8
    # m = 0: the guarded loop runs no times (the expansion alone would say -24*n)
    assert s.bytes_written.evaluate({"n": 10, "m": 0}) == 0
    assert str(s.bind(m=3).bytes_written) == "48*n"


def test_a_data_dependent_trip_count_becomes_its_own_symbol():
    s = traffic(HEAD + """
.stage s domain [n] block [4]
    .reg %i, %c: i64
    .reg %v: f32
    MOV.i64 %i, %gid.x
    LDG.f32.chk %v, [x + %i]
    CVT.i64.f32 %c, %v
top:
    STG.f32.chk [y + %i], %v
    LOOP %c, top
    EXIT
""")
    assert s.bytes_written.symbols == {"n", "trips.s.top"}
    assert s.bytes_written.evaluate({"n": 2, "trips.s.top": 5}) == 2 * 5 * 4
    with pytest.raises(KeyError, match="trips.s.top"):
        s.bytes_written.evaluate({"n": 2})


def test_a_subroutine_counts_once_per_call_at_the_callers_multiplicity():
    s = traffic(HEAD + """
.stage s domain [n] block [4]
    .reg %i, %c: i64
    .reg %v: f32
    MOV.i64 %i, %gid.x
    MOV.i64 %c, $m
top:
    CALL body
    LOOP %c, top
    CALL body
    EXIT
body:
    LDG.f32.chk %v, [x + %i]
    RET
""")
    assert str(s.bytes_read) == "4*m*n + 4*n"


def test_both_arms_of_a_branch_count_and_code_after_an_inner_exit_too():
    s = traffic(HEAD + """
.stage s domain [n] block [4]
    .reg %i: i64
    .reg %v: f32
    .reg %p: bool
    MOV.i64 %i, %gid.x
    SET.lt.i64 %p, %i, 1
    @%p BRA other
    LDG.f32.chk %v, [x + %i]
    EXIT
other:
    LDG.f32.chk %v, [x + %i]
    STG.f32.chk [y + %i], %v
    EXIT
""")
    assert str(s.bytes_read) == "8*n"
    assert str(s.bytes_written) == "4*n"


def test_ir_ops_count_distinct_operations_per_statement():
    x = Expr.load("x", DType.F32, (Expr.idx("i"),))
    sq = Expr("MUL", DType.F32, (x, x))
    body = Expr("ADD", DType.F32, (sq, Expr("MUL", DType.F32, (x, x))))  # the same square twice
    kir = KernelIR("k", "1", (TensorDecl("x", DType.F32, (Affine.of("n"),), "input"),),
                   (TensorDecl("y", DType.F32, (Affine.of("n"),), "output"),), (),
                   (Compute("y", ("i",), body), Compute("y", ("i",), x)))
    prog = parse_program(".program k\n.param in x: f32[1]\n.stage s domain [1] block [1]\n    EXIT\n")
    # load, mul, add in the first statement; the load again in the second
    assert measure(kir, prog).ir_ops == 4


# ----------------------------------------------------------------- the algebra
polys = st.builds(lambda cs: sum((Poly.const(c) * Poly.sym(s) if s else Poly.const(c) for s, c in cs), Poly()),
                  st.lists(st.tuples(st.sampled_from(["", "n", "m"]), st.integers(-5, 5)), max_size=4))
bindings = st.fixed_dictionaries({"n": st.integers(-4, 6), "m": st.integers(-4, 6)})


def value(p: Poly, b: dict) -> int:
    return p.bind(b).value


@given(polys, polys, bindings)
def test_poly_ring_operations_agree_with_evaluation(a, b, env):
    assert value(a + b, env) == value(a, env) + value(b, env)
    assert value(a - b, env) == value(a, env) - value(b, env)
    assert value(a * b, env) == value(a, env) * value(b, env)
    assert (a * b).bind(env).is_const


@given(st.lists(st.tuples(st.integers(0, 9), st.lists(polys, max_size=3)), max_size=4), bindings)
def test_formula_evaluates_every_factor_clamped_at_zero(terms, env):
    f = Formula(tuple((c, tuple(fs)) for c, fs in terms))
    want = 0
    for c, fs in terms:
        prod = c
        for p in fs:
            prod *= max(value(p, env), 0)
        want += prod
    assert f.evaluate(env) == want
    assert f.simplify().evaluate(env) == want
    assert f.bind({"n": env["n"]}).evaluate({"m": env["m"]}) == want


def test_poly_prints_highest_degree_first():
    n, m = Poly.sym("n"), Poly.sym("m")
    assert str(Poly.const(4) * m * n + Poly.const(8) * n - Poly.const(4)) == "4*m*n + 8*n - 4"
    assert str(n * n - n) == "n^2 - n"
    assert str(Poly()) == "0"


# ------------------------------------------------------------------- the table
def test_reduction_wording():
    assert reduction(4, 1) == "75% reduction"
    assert reduction(4, 4) == "no change"
    assert reduction(4, 5) == "25% increase"


def test_format_stats_shows_each_level_and_the_change():
    b = Poly.sym("n")
    s0 = Stats(3, 10, 20, 7, Formula(((24, (b,)),)), Formula(((12, (b,)), (8, ()))))
    s2 = Stats(2, 8, 15, 7, Formula(((12, (b,)),)), Formula(((4, (b,)), (4, ()))))
    text = render(format_stats({"O0": s0, "O2": s2}))
    assert "3 -> 2 (33% reduction)" in text
    assert "24*n" in text and "12*n" in text
    assert "24576 -> 12288 (50% reduction)" in text  # at n = 1024, as the caption says
    assert "n=1024" in text
    assert "n=10" in render(format_stats({"O0": s0, "O2": s2}, symbols={"n": 10}))


def test_exactness_flag_separates_zero_trip_guards_from_branches_that_skip_accesses():
    assert traffic(LOOPS).bytes_exact  # `SET.le %p, X, 0; @%p BRA done` around a loop of X trips
    skipping = traffic(HEAD + """
.stage s domain [n] block [4]
    .reg %i: i64
    .reg %v: f32
    .reg %p: bool
    MOV.i64 %i, %gid.x
    SET.ne.i64 %p, %tid.x, 0
    @%p BRA done
    LDG.f32.chk %v, [x + %i]
    STG.f32.chk [y + %i], %v
done:
    EXIT
""")
    assert not skipping.bytes_exact and str(skipping.bytes_read) == "4*n"
    assert "<= 4*n" in render(format_stats({"O0": skipping}))
    # what a guard skips runs only when its X > 0: here a loop of n trips under a guard on m - 1
    other = traffic(LOOPS.replace("MOV.i64 %c, %e", "MOV.i64 %c, $n"))
    assert other.bytes_exact and str(other.bytes_written) == "24*n^2"
    assert other.bytes_written.evaluate({"n": 3, "m": 1}) == 0
    assert other.bytes_written.evaluate({"n": 3, "m": 5}) == 24 * 3 * 3


def test_an_invariant_hoisted_under_a_zero_trip_guard_counts_only_when_the_loop_runs():
    s = traffic(HEAD + """
.stage s domain [n] block [4]
    .reg %i, %j, %c: i64
    .reg %p: bool
    .reg %v: f32
    .reg %u: f64
    MOV.i64 %i, %gid.x
    SET.le.i64 %p, $m, 0
    @%p BRA done
    LDG.f32.chk %v, [x + %i]
    MOV_IMM.i64 %j, 0
    MOV.i64 %c, $m
top:
    LDG.f64.chk %u, [w + %j]
    ADD.i64 %j, %j, 1
    LOOP %c, top
done:
    EXIT
""")
    assert s.bytes_exact and str(s.bytes_read) == "8*m + 4*n"  # w[j]: the same for every lane
    assert s.bytes_read.evaluate({"n": 10, "m": 0}) == 0
    assert s.bytes_read.evaluate({"n": 10, "m": 2}) == 10 * 4 + 16


def test_an_access_the_same_for_every_lane_counts_once_per_launch():
    s = traffic(HEAD + """
.stage s domain [n] block [4]
    .reg %i, %k, %c: i64
    .reg %a, %b: f32
    .reg %p: bool
    MOV.i64 %i, %gid.x
    MOV_IMM.i64 %k, 2
    ADD.i64 %k, %k, $n
    LDG.f32.chk %a, [x + %k]
    LDG.f32.chk %b, [x]
    CVT.i64.f32 %c, %b
    LDG.f32.chk %b, [x + %c]
    ADD.f32 %a, %a, %b
    ReduceAdd.f32.chk [y], %a
    SET.lt.i64 %p, %i, 2
    SEL.i64 %c, %p, %k, %i
    LDG.f32.chk %b, [x + %c]
    STG.f32.chk [y + %i], %b
    EXIT
""")
    # x[n+2], x[0] and x[x[0]] are one element each; so is the reduction into y[0];
    # x[%c] with %c chosen by the lane's position, and y[i], are one per lane
    assert str(s.bytes_read) == "4*n + 12"
    assert str(s.bytes_written) == "4*n + 4"


def test_quotients_are_symbols_until_their_numerator_is_known():
    from hologram.passes.stats import quotient
    q = quotient(Poly.sym("n") + 1023, 1024)
    assert str(q) == "(n + 1023)//1024"
    f = Formula(((16, (q,)), (4, (Poly.sym("n"),))))
    assert f.evaluate({"n": 1}) == 16 + 4
    assert f.evaluate({"n": 1024}) == 16 + 4096 and f.evaluate({"n": 1025}) == 32 + 4100
    assert quotient(Poly.const(2047), 1024) == Poly.const(1)
    with pytest.raises(KeyError):
        f.evaluate({})


def test_an_else_part_reached_from_two_guards_is_not_conditioned_on_both():
    # `small` runs when m < 6 OR n < 32: it must not count only when both hold
    p = parse_program("""
.program g
.symbols m n
.param in x: f32[m]
.param out y: f32[m]
.stage s domain [m] block [64]
    .reg %i: i64
    .reg %v: f32
    .reg %p: bool
    SET.lt.i64  %p, $m, 6
    @%p BRA     small
    SET.lt.i64  %p, $n, 32
    @%p BRA     small
    BRA         end
small:
    MOV.i64     %i, %gid.x
    LDG.f32     %v, [x + %i]
    STG.f32     [y + %i], %v
end:
    EXIT
""")
    st = measure(EMPTY_IR, p)
    assert st.bytes_read.evaluate({"m": 4, "n": 100}) == 16  # m < 6 alone sends lanes to `small`
    assert not st.bytes_exact or st.bytes_read.evaluate({"m": 100, "n": 100}) == 0


NESTED_LOOPS = """.program loops
.symbols m n
.stage s domain [m] block [64]
    .reg %a, %b, %c: i64
    MOV.i64 %a, $n
outer:
    MOV_IMM.i64 %b, 3
inner:
    LOOP %b, inner
    LOOP %a, outer
    MOV.i64 %c, %gid.x
    REM.i64 %c, %c, 5
again:
    LOOP %c, again
    EXIT
"""


def test_lane_work_counts_nested_loop_iterations():
    from hologram.passes.stats import lane_work
    stage = parse_program(NESTED_LOOPS).stages[0]
    work = lane_work(stage)
    # 1 + n (outer) + 3n (inner, inside outer) + trips of the data-dependent loop
    symbols = sorted(work.symbols)
    assert symbols[0] == "n" and symbols[1].startswith("trips.s.")
    assert work.evaluate({"n": 10, symbols[1]: 2}) == 1 + 10 + 30 + 2
    flat = parse_program(".program p\n.stage s domain [4] block [4]\n    EXIT\n").stages[0]
    assert str(lane_work(flat)) == "1"


def test_lane_cost_weighs_each_instruction_by_the_loops_around_it():
    from hologram.passes.work import MATH_WEIGHT, SQRT_WEIGHT, lane_cost
    stage = parse_program(NESTED_LOOPS).stages[0]
    cost = lane_cost(stage)
    trips = sorted(cost.symbols)[1]
    # MOV; per outer trip MOV_IMM and LOOP; per inner trip LOOP; MOV, REM; per data trip
    # LOOP; EXIT
    assert cost.evaluate({"n": 10, trips: 2}) == 1 + 10 * 2 + 30 * 1 + 2 + 2 * 1 + 1
    math = parse_program(""".program p
.symbols n
.param in x: f32[n]
.param out y: f32[n]
.stage s domain [n] block [64]
    .reg %i: i64
    .reg %v, %w: f32
    MOV.i64 %i, %gid.x
    LDG.f32 %v, [x + %i]
    TANH.f32 %w, %v
    SQRT.f32 %v, %v
    ADD.f32 %v, %v, %w
    STG.f32 [y + %i], %v
    EXIT
""").stages[0]
    assert str(lane_cost(math)) == str(5 + MATH_WEIGHT + SQRT_WEIGHT)


@pytest.mark.parametrize("start", [-2**63, -1, 0, 1])
def test_a_loop_counter_below_one_counts_one_trip(start):
    """docs/isa.md: a counter of 1, 0 or below, -2**63 included, runs the body once (issue
    21); the estimate said `1 + start` trips, -2**63 + 1 for the minimum."""
    from hologram.passes.stats import lane_work
    stage = parse_program(f""".program p
.stage s domain [4] block [4]
    .reg %c: i64
    MOV_IMM.i64 %c, {start}
top:
    LOOP %c, top
    EXIT
""").stages[0]
    assert str(lane_work(stage)) == "2"


def test_lead_lanes_on_two_axes_count_one_lane_per_block():
    s = traffic(HEAD.replace(".param out y: f32[n]", ".param out y: f32[m, n]") + """
.stage s domain [n, m] block [4, 2]
    .reg %p: bool
    .reg %i, %j: i64
    .reg %a: f32
    SET.ne.i64 %p, %tid.x, 0
    @%p BRA done
    SET.ne.i64 %p, %tid.y, 0
    @%p BRA done
    MOV.i64 %i, %gid.x
    MOV.i64 %j, %gid.y
    LDG.f32.chk %a, [x + %i]
    STG.f32.chk [y + %i], %a
done:
    EXIT
""")
    # ceil(n / 4) * ceil(m / 2) lanes work, 4 bytes read each
    assert s.bind(n=9, m=5).bytes_read.evaluate({}) == 4 * 3 * 3


def test_a_byte_count_leads_with_a_positive_term():
    """A window over `x: f32[n]` with `k: f32[k]` taps: the count is `4*k*n - 4*k^2 + 8*k`,
    never `-4*k^2 + ...` (a count is >= 0; a reader should not meet a minus sign first)."""
    import hologram

    window = hologram.compile('[kernel]\nname = "window"\nversion = "1.0.0"\ninputs = { x = "f32[n]", '
                              'w = "f32[k]" }\noutputs = { y = "f32[n - k + 1]" }\n'
                              'body = "y[i] = sum(x[i + j] * w[j], j)"\n')
    s = window.stats()["O2"]
    assert str(s.bytes_read) == "4*k*n - 4*k^2 + 8*k"
    assert str(s.bytes_written) == "4*n - 4*k + 4"
    assert str(Formula(((-1, (Poly.sym("n"),)), (3, ())))) == "3 - n"  # the only positive term is a constant
    n = Poly.sym("n")
    assert str(Poly.const(8) - n * n) == "-n^2 + 8"  # a Poly (the verifier's bounds) keeps its order
