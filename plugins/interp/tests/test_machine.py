"""The interpreter's execution model: domains and blocks, specials, control flow,
shared memory and barriers, reductions, pools, phase, bounds checks and errors.

Programs are written in `.hasm` and run through `execute`, which decodes without the
verifier: these tests pin down what the machine does, including with programs a verifier
would refuse (the interpreter must stay safe without one). test_backend.py covers
prepare(), the verifier hook and plugin registration.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from hologram.core import atlas
from hologram.core.errors import ArgumentError, ExecutionError, VerifyError
from hologram.core.types import DType
from hologram.isa.asm import parse_program
from hologram.isa.program import Program
from hologram_interp.decode import decode_program
from test_interp import BACKEND, launch


def execute(text: str | Program, symbols: dict[str, int] | None = None, scalars: dict | None = None,
            **buffers: np.ndarray) -> dict[str, np.ndarray]:
    """Decode (no verifier) and launch; buffers are modified in place and returned."""
    launch(parse_program(text) if isinstance(text, str) else text, buffers, scalars or {}, symbols or {})
    return buffers


def header(*params: str, symbols: str = "n") -> str:
    return "\n".join([".program t", f".symbols {symbols}" if symbols else "", *(f".param {p}" for p in params)])


# ======================================================================= domain
def test_specials_over_a_2d_domain_with_partial_blocks():
    text = header("out s: i64[h, w, 12]", symbols="w h") + """
.stage main domain [w, h] block [3, 2]
    .reg %k: i64
    MUL.i64 %k, %gid.y, $w
    ADD.i64 %k, %k, %gid.x
    MUL.i64 %k, %k, 12
    STG.i64 [s + %k], %tid.x
    STG.i64 [s + %k + 1], %tid.y
    STG.i64 [s + %k + 2], %ntid.x
    STG.i64 [s + %k + 3], %ntid.y
    STG.i64 [s + %k + 4], %ctaid.x
    STG.i64 [s + %k + 5], %ctaid.y
    STG.i64 [s + %k + 6], %nctaid.x
    STG.i64 [s + %k + 7], %nctaid.y
    STG.i64 [s + %k + 8], %gdim.x
    STG.i64 [s + %k + 9], %gdim.y
    STG.i64 [s + %k + 10], %tid.z
    STG.i64 [s + %k + 11], %nctaid.z
    EXIT
"""
    w, h = 7, 5
    s = np.full((h, w, 12), -1, np.int64)
    execute(text, {"w": w, "h": h}, s=s)
    y, x = np.mgrid[0:h, 0:w]
    want = np.stack([x % 3, y % 2, np.full_like(x, 3), np.full_like(x, 2), x // 3, y // 2,
                     np.full_like(x, 3), np.full_like(x, 3), np.full_like(x, w), np.full_like(x, h),
                     np.zeros_like(x), np.ones_like(x)], axis=-1)
    np.testing.assert_array_equal(s, want)


def test_3d_domain_covers_every_point_once():
    text = header("inout c: i32[d, h, w]", symbols="w h d") + """
.stage main domain [w, h, d] block [2, 3, 2]
    .reg %k, %t: i64
    .reg %v: i32
    MUL.i64 %k, %gid.z, $h
    ADD.i64 %k, %k, %gid.y
    MUL.i64 %k, %k, $w
    ADD.i64 %k, %k, %gid.x
    LDG.i32 %v, [c + %k]
    ADD.i32 %v, %v, 1
    STG.i32 [c + %k], %v
    EXIT
"""
    c = np.zeros((3, 4, 5), np.int32)
    execute(text, {"w": 5, "h": 4, "d": 3}, c=c)
    assert (c == 1).all()


def test_empty_domain_runs_no_lane_but_applies_inits():
    text = header("in x: f32[n]", "out y: f32[1]") + """
.stage main domain [n] block [4]
    .init y[0] = 5.0
    .reg %v: f32
    LDG.f32 %v, [x + 100]
    STG.f32 [y], %v
    EXIT
"""
    y = np.zeros(1, np.float32)
    execute(text, {"n": 0}, x=np.zeros(0, np.float32), y=y)
    assert y[0] == 5


def test_negative_domain_is_an_error():
    text = header("out y: f32[1]") + "\n.stage main domain [n - 5] block [4]\n    EXIT\n"
    with pytest.raises(ExecutionError, match="domain axis x is n - 5 = -3"):
        execute(text, {"n": 2}, y=np.zeros(1, np.float32))


# ================================================================= control flow
def test_predicated_branches_and_early_exit():
    text = header("in x: f32[n]", "out y: f32[n]") + """
.stage main domain [n] block [4]
    .reg %i: i64
    .reg %v: f32
    .reg %p, %q: bool
    MOV.i64 %i, %gid.x
    SET.ge.i64 %q, %i, 6
    @%q BRA out                 ; lanes 6.. store nothing
    LDG.f32 %v, [x + %i]
    SET.lt.f32 %p, %v, 0.0
    @!%p BRA store
    NEG.f32 %v, %v
store:
    STG.f32 [y + %i], %v
    EXIT
out:
    EXIT
"""
    x = np.array([1, -2, 3, -4, 0, -0.5, -7, 8], np.float32)
    y = np.full(8, 99, np.float32)
    execute(text, {"n": 8}, x=x, y=y)
    np.testing.assert_array_equal(y, [1, 2, 3, 4, 0, 0.5, 99, 99])


SUBROUTINES = header("in x: f32[n]", "out y: f32[n]") + """
.stage main domain [n] block [4]
    .reg %i: i64
    .reg %v: f32
    MOV.i64 %i, %gid.x
    LDG.f32 %v, [x + %i]
    CALL square
    CALL addone
    STG.f32 [y + %i], %v
    EXIT
square:
    MUL.f32 %v, %v, %v
    CALL addone
    RET
addone:
    ADD.f32 %v, %v, 1.0
    RET
"""


def test_nested_subroutines():
    x = np.arange(6, dtype=np.float32) - 2
    y = execute(SUBROUTINES, {"n": 6}, x=x, y=np.zeros(6, np.float32))["y"]
    np.testing.assert_array_equal(y, x * x + 2)


def test_ret_from_entry_code_ends_the_lane():
    text = header("out y: f32[n]") + """
.stage main domain [n] block [4]
    .reg %i: i64
    MOV.i64 %i, %gid.x
    RET
    STG.f32 [y + %i], 1.0
    EXIT
"""
    y = execute(text, {"n": 3}, y=np.zeros(3, np.float32))["y"]
    assert (y == 0).all()


def test_recursion_is_stopped():
    text = header("out y: f32[n]") + """
.stage main domain [n] block [4]
f:
    CALL f
    EXIT
"""
    with pytest.raises(ExecutionError, match="recursive call to 'f'"):
        execute(text, {"n": 1}, y=np.zeros(1, np.float32))


LOOP = header("in c: i64[n]", "out s: i64[n]") + """
.stage main domain [n] block [4]
    .reg %i, %c, %acc: i64
    MOV.i64 %i, %gid.x
    LDG.i64 %c, [c + %i]
top:
    ADD.i64 %acc, %acc, %c      ; registers start at zero
    LOOP %c, top                ; c -= 1; if c > 0: goto top
    STG.i64 [s + %i], %acc
    EXIT
"""


def test_loop_counts_down_and_runs_its_body_at_least_once():
    c = np.array([5, 1, 0, -3, 100], np.int64)
    s = execute(LOOP, {"n": 5}, c=c, s=np.zeros(5, np.int64))["s"]
    np.testing.assert_array_equal(s, [15, 1, 0, -3, 5050])


def test_memfence_is_ordering_only():
    text = header("inout y: i32[n]") + """
.stage main domain [n] block [4]
    .reg %i: i64
    .reg %v: i32
    MOV.i64 %i, %gid.x
    STG.i32 [y + %i], 7
    MemFence
    LDG.i32 %v, [y + %i]
    ADD.i32 %v, %v, 1
    STG.i32 [y + %i], %v
    EXIT
"""
    assert (execute(text, {"n": 5}, y=np.zeros(5, np.int32))["y"] == 8).all()


# ============================================================ shared + barriers
def test_block_reverse_through_shared_memory():
    text = header("in x: i32[n]", "out y: i32[n]") + """
.stage main domain [n] block [8]
    .reg %i, %t, %j: i64
    .reg %v: i32
    .shared sh: i32[8]
    MOV.i64 %i, %gid.x
    MOV.i64 %t, %tid.x
    LDG.i32 %v, [x + %i]
    STS.i32 [sh + %t], %v
    BarSync
    SUB.i64 %j, 7, %t
    LDS.i32 %v, [sh + %j]
    STG.i32 [y + %i], %v
    EXIT
"""
    x = np.arange(32, dtype=np.int32)
    y = execute(text, {"n": 32}, x=x, y=np.zeros(32, np.int32))["y"]
    np.testing.assert_array_equal(y, x.reshape(4, 8)[:, ::-1].ravel())


TREE_SUM = header("in x: f32[n]", "out y: f32[b]", symbols="n b") + """
.stage main domain [n] block [8]
    .reg %i, %t, %s, %j, %c: i64
    .reg %a, %v: f32
    .reg %p: bool
    .shared sh: f32[8]
    MOV.i64 %i, %gid.x
    MOV.i64 %t, %tid.x
    LDG.f32 %a, [x + %i]
    STS.f32 [sh + %t], %a
    MOV_IMM.i64 %s, 4
    MOV_IMM.i64 %c, 3
top:
    BarSync                     ; a barrier inside a loop: every round is separated
    SET.lt.i64 %p, %t, %s
    @!%p BRA skip
    ADD.i64 %j, %t, %s
    LDS.f32 %a, [sh + %t]
    LDS.f32 %v, [sh + %j]
    ADD.f32 %a, %a, %v
    STS.f32 [sh + %t], %a
skip:
    SHR.i64 %s, %s, 1
    LOOP %c, top
    BarSync
    SET.ne.i64 %p, %t, 0
    @%p BRA done
    LDS.f32 %a, [sh]
    MOV.i64 %j, %ctaid.x
    STG.f32 [y + %j], %a
done:
    EXIT
"""


def test_tree_reduction_in_shared_memory_with_a_partial_block():
    x = np.arange(1, 30, dtype=np.float32)  # 29 lanes: the last block has 5
    y = execute(TREE_SUM, {"n": 29, "b": 4}, x=x, y=np.zeros(4, np.float32))["y"]
    np.testing.assert_array_equal(y, [x[k:k + 8].sum() for k in range(0, 29, 8)])


def test_shared_memory_is_per_block_and_starts_zeroed():
    text = header("out y: i32[n]") + """
.stage main domain [n] block [4]
    .reg %t, %i: i64
    .reg %v: i32
    .shared sh: i32[4]
    MOV.i64 %t, %tid.x
    MOV.i64 %i, %gid.x
    LDS.i32 %v, [sh + %t]       ; zero: the previous block's writes are not visible
    ADD.i32 %v, %v, 1
    STS.i32 [sh + %t], %v
    STG.i32 [y + %i], %v
    EXIT
"""
    y = execute(text, {"n": 12}, y=np.zeros(12, np.int32))["y"]
    assert (y == 1).all()


def test_lanes_that_exit_leave_the_barrier():
    text = header("out y: i32[n]") + """
.stage main domain [n] block [4]
    .reg %t, %i: i64
    .reg %p: bool
    .reg %v: i32
    .shared sh: i32[4]
    MOV.i64 %t, %tid.x
    MOV.i64 %i, %gid.x
    SET.eq.i64 %p, %t, 0
    @%p BRA leave
    STS.i32 [sh + %t], 5
    BarSync
    LDS.i32 %v, [sh + 3]
    STG.i32 [y + %i], %v
    EXIT
leave:
    EXIT
"""
    y = execute(text, {"n": 8}, y=np.zeros(8, np.int32))["y"]
    np.testing.assert_array_equal(y, [0, 5, 5, 5, 0, 5, 5, 5])


def test_divergent_barriers_are_an_error():
    text = header("out y: i32[n]") + """
.stage main domain [n] block [4]
    .reg %t: i64
    .reg %p: bool
    SET.lt.i64 %p, %tid.x, 2
    @%p BRA other
    BarSync
    EXIT
other:
    BarSync
    EXIT
"""
    with pytest.raises(ExecutionError, match=r"different barriers \(instructions 2, 5\)"):  # labels count
        execute(text, {"n": 4}, y=np.zeros(4, np.int32))


# =================================================================== reductions
def pairwise_sum(values: list) -> object:
    while len(values) > 1:
        values = [values[k] + values[k + 1] if k + 1 < len(values) else values[k] for k in range(0, len(values), 2)]
    return values[0]


REDUCE = header("in x: {t}[n]", "inout r: {t}[4]") + """
.stage main domain [n] block [32]
    .init r[0] = {identity}
    .reg %i, %k: i64
    .reg %v: {t}
    MOV.i64 %i, %gid.x
    LDG.{t} %v, [x + %i]
    {op}.{t} [r], %v
    REM.i64 %k, %i, 3
    {op}.{t} [r + %k + 1], %v    ; three interleaved targets
    EXIT
"""


@pytest.mark.parametrize("op, t, identity, fn", [
    ("ReduceAdd", "i32", 0, np.add), ("ReduceMul", "i32", 1, np.multiply),
    ("ReduceMin", "i16", 32767, np.minimum), ("ReduceMax", "u8", 0, np.maximum),
    ("ReduceMin", "f64", math.inf, np.minimum), ("ReduceMax", "f32", -math.inf, np.maximum),
])
def test_reductions_combine_over_many_lanes(op, t, identity, fn):
    rng = np.random.default_rng(1)
    dt = DType.parse(t).np
    x = rng.integers(0 if t == "u8" else -1000, 1000, 301).astype(dt)
    r = np.array([0, 10, 20, 30], dt)  # no init for 1..3: memory takes part
    execute(REDUCE.format(t=t, op=op, identity=identity), {"n": 301}, x=x, r=r)
    with np.errstate(over="ignore"):
        want = [fn.reduce(x)] + [fn(np.array(v, dt), fn.reduce(x[k::3])) for k, v in zip(range(3), (10, 20, 30))]
    np.testing.assert_array_equal(r, np.array(want, dtype=dt))


def test_float_sum_is_pairwise_in_lane_order():
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(1000) * 10.0 ** rng.integers(-3, 4, 1000)).astype(np.float32)
    r = np.zeros(4, np.float32)
    execute(REDUCE.format(t="f32", op="ReduceAdd", identity=0.0), {"n": 1000}, x=x, r=r)
    assert r[0] == pairwise_sum(list(x)) + np.float32(0)
    assert abs(float(r[0]) - math.fsum(map(float, x))) <= 10 * float(np.spacing(np.abs(x).sum()))  # ~log2(n) ulp


def test_min_max_reductions_propagate_nan():
    x = np.array([3, np.nan, -1, 7], np.float32)
    for op, ident in (("ReduceMin", math.inf), ("ReduceMax", -math.inf)):
        r = np.zeros(4, np.float32)
        execute(REDUCE.format(t="f32", op=op, identity=ident), {"n": 4}, x=x, r=r)
        assert np.isnan(r[0]) and np.isnan(r[2]) and r[1] == (0 if op == "ReduceMin" else 7)


def test_reductions_merge_at_stage_end():
    text = header("in x: f32[n]", "out seen: f32[n]", "out total: f32[1]", "out after: f32[1]") + """
.stage accumulate domain [n] block [4]
    .init total[0] = 100.0
    .reg %i: i64
    .reg %v: f32
    MOV.i64 %i, %gid.x
    LDG.f32 %v, [x + %i]
    ReduceAdd.f32 [total], %v
    LDG.f32 %v, [total]         ; the seeded value: contributions land at stage end
    STG.f32 [seen + %i], %v
    EXIT
.stage read domain [1] block [1]
    .reg %v: f32
    LDG.f32 %v, [total]
    STG.f32 [after], %v
    EXIT
"""
    x = np.arange(10, dtype=np.float32)
    out = execute(text, {"n": 10}, x=x, seen=np.zeros(10, np.float32), total=np.zeros(1, np.float32),
                  after=np.zeros(1, np.float32))
    assert (out["seen"] == 100).all() and out["total"][0] == 145 and out["after"][0] == 145


RESONANCE = header("in b: u8[n]", "in w: f32[n]", "out bins: f32[96]") + """
.stage main domain [n] block [64]
    .reg %i: i64
    .reg %c: u8
    .reg %k: i64
    .reg %v: f32
    MOV.i64 %i, %gid.x
    LDG.u8 %c, [b + %i]
    ClsGet.u8 %c, %c
    CVT.i64.u8 %k, %c
    ADD.i64 %k, %k, $shift
    LDG.f32 %v, [w + %i]
    ResAccum.f32 [bins + %k], %v
    EXIT
"""


def test_resaccum_is_a_96_bin_scatter_add():
    text = RESONANCE.replace(".param in b", ".param shift: i64\n.param in b")
    rng = np.random.default_rng(3)
    b = rng.integers(0, 256, 500).astype(np.uint8)
    w = rng.integers(-8, 9, 500).astype(np.float32)
    bins = execute(text, {"n": 500}, {"shift": 0}, b=b, w=w, bins=np.zeros(96, np.float32))["bins"]
    want = np.bincount(atlas.BYTE_CLASS_TABLE[b], weights=w, minlength=96)
    np.testing.assert_array_equal(bins, want.astype(np.float32))


def test_resaccum_rejects_a_class_outside_the_atlas():
    text = RESONANCE.replace(".param in b", ".param shift: i64\n.param in b")
    b, w = np.array([255], np.uint8), np.ones(1, np.float32)  # class 79, shifted to 96
    with pytest.raises(ExecutionError, match="96 is not an Atlas class"):
        execute(text, {"n": 1}, {"shift": 17}, b=b, w=w, bins=np.zeros(96, np.float32))


# ======================================================================= phase
def test_phase_is_per_lane_modulo_768_and_resets_per_stage():
    text = header("in x: i64[n]", "out p: i64[n]", "out q: i32[n]") + """
.stage advance domain [n] block [4]
    .reg %i, %v, %ph: i64
    MOV.i64 %i, %gid.x
    LDG.i64 %v, [x + %i]
    PhaseAdv %v
    PhaseAdv 5
    PhaseGet %ph
    STG.i64 [p + %i], %ph
    EXIT
.stage fresh domain [n] block [4]
    .reg %ph: i32
    .reg %i: i64
    MOV.i64 %i, %gid.x
    PhaseGet %ph
    ADD.i32 %ph, %ph, 1
    STG.i32 [q + %i], %ph
    EXIT
"""
    x = np.array([0, 1, 762, 763, -6, -5, 10**18, -(10**18)], np.int64)
    out = execute(text, {"n": 8}, x=x, p=np.zeros(8, np.int64), q=np.zeros(8, np.int32))
    np.testing.assert_array_equal(out["p"], [(int(v) + 5) % 768 for v in x])
    assert (out["q"] == 1).all()


# ======================================================================== pools
POOLS = header("in x: f32[n]", "out y: f32[n, 5]") + """
.stage main domain [n] block [4]
    .reg %i, %k, %h, %g, %h2, %h3: i64
    .reg %v, %a, %b, %c: f32
    .reg %w: i32
    .pool p: f32[8]
    .pool q: i32[4]
    MOV.i64 %i, %gid.x
    MUL.i64 %k, %i, 5
    LDG.f32 %v, [x + %i]
    PoolAlloc %h, p, 3
    PoolStore.f32 [p + %h + 2], %v
    PoolAlloc %g, q, 4
    PoolStore.i32 [q + %g + 3], 7
    PoolLoad.i32 %w, [q + %g + 3]
    PoolFree %g
    PoolAlloc %h2, p, 5
    PoolLoad.f32 %a, [p + %h2 + 4]  ; fresh elements are zero
    PoolLoad.f32 %b, [p + %h + 2]
    PoolFree %h2
    PoolFree %h
    PoolAlloc %h3, p, 8
    PoolLoad.f32 %c, [p + %h3 + 2]  ; re-allocated: zeroed again
    STG.f32 [y + %k], %b
    STG.f32 [y + %k + 1], %a
    STG.f32 [y + %k + 2], %c
    CVT.f32.i64 %a, %h2
    STG.f32 [y + %k + 3], %a
    CVT.f32.i32 %a, %w
    STG.f32 [y + %k + 4], %a
    EXIT
"""


def test_pools_are_per_lane_stacks():
    x = np.arange(6, dtype=np.float32) + 1
    y = execute(POOLS, {"n": 6}, x=x, y=np.zeros((6, 5), np.float32))["y"]
    np.testing.assert_array_equal(y, np.stack([x, 0 * x, 0 * x, 0 * x + 3, 0 * x + 7], axis=1))


@pytest.mark.parametrize("body, message", [
    ("PoolAlloc %h, p, 9", "pool 'p' of 8 elements cannot allocate 9 more"),
    ("PoolAlloc %h, p, 2\n    PoolAlloc %g, p, 2\n    PoolFree %h",
     "PoolFree of handle 0, but the most recent starts at 2"),
    ("PoolFree %h", "nothing is allocated"),
    ("PoolAlloc %h, p, 2\n    PoolStore.f32 [p + %h + 2], 1.0",
     "index 2 is out of bounds for the allocated part of pool 'p'"),
    ("PoolAlloc %h, p, 2\n    PoolLoad.f32 %v, [p + %h - 1]", "index -1 is out of bounds"),
])
def test_pool_misuse_is_an_execution_error(body, message):
    text = header("out y: f32[n]") + f"""
.stage main domain [n] block [4]
    .reg %h, %g: i64
    .reg %v: f32
    .pool p: f32[8]
    {body}
    EXIT
"""
    with pytest.raises(ExecutionError, match=message.replace("[", r"\[").replace("+", r"\+")):
        execute(text, {"n": 2}, y=np.zeros(2, np.float32))


# ============================================================ temps, scalars, inits
def test_temps_scalars_and_symbols_across_stages():
    text = header("alpha: f32", "in x: f32[n]", "out y: f32[n]") + """
.temp t: f32[n]
.temp acc: f32[1]
.stage scale domain [n] block [4]
    .reg %i: i64
    .reg %v, %m: f32
    MOV.i64 %i, %gid.x
    LDG.f32 %v, [x + %i]
    MUL.f32 %v, %v, $alpha
    CVT.f32.i64 %m, $n
    ADD.f32 %v, %v, %m
    STG.f32 [t + %i], %v
    ReduceAdd.f32 [acc], 1.0    ; no init: the temp starts at zero every launch
    EXIT
.stage reverse domain [n] block [4]
    .reg %i, %j: i64
    .reg %v, %a: f32
    MOV.i64 %i, %gid.x
    SUB.i64 %j, $n, %i
    SUB.i64 %j, %j, 1
    LDG.f32 %v, [t + %j]
    LDG.f32 %a, [acc]
    ADD.f32 %v, %v, %a
    STG.f32 [y + %i], %v
    EXIT
"""
    x = np.arange(5, dtype=np.float32)
    for _ in range(2):
        y = execute(text, {"n": 5}, {"alpha": np.float32(2)}, x=x, y=np.zeros(5, np.float32))["y"]
        np.testing.assert_array_equal(y, (x * 2 + 5 + 5)[::-1])


def test_registers_start_at_zero_and_inits_convert():
    text = header("out y: i16[2]", symbols="") + """
.stage main domain [1] block [1]
    .init y[1] = 70000
    .reg %v: i16
    STG.i16 [y], %v
    EXIT
"""
    y = execute(text, y=np.full(2, 9, np.int16))["y"]
    np.testing.assert_array_equal(y, [0, np.int16(70000 - 65536)])


def test_init_out_of_bounds():
    text = header("out y: f32[2]", symbols="") + "\n.stage main domain [1] block [1]\n    .init y[2] = 1.0\n    EXIT\n"
    with pytest.raises(ExecutionError, match="init of 'y' at offset 2 is out of bounds"):
        execute(text, y=np.zeros(2, np.float32))


# =============================================================== bounds checks
@pytest.mark.parametrize("chk", ["", ".chk"])
@pytest.mark.parametrize("instr, message", [
    ("LDG.f32{chk} %v, [x + %i + 1]", "instruction 1 `LDG.f32{chk} %v, [x + %i + 1]` (lane gid=(3,)): index 4 is out "
                                       "of bounds for global buffer 'x' of 4 elements"),
    ("STG.f32{chk} [x + %i - 4], %v", "index -4 is out of bounds for global buffer 'x'"),
    ("LDS.f32{chk} %v, [sh + %i + 5]", "index 8 is out of bounds for shared array 'sh' of 8 elements"),
    ("STS.f32{chk} [sh + %i - 1], %v", "index -1 is out of bounds for shared array 'sh'"),
    ("ReduceAdd.f32{chk} [x + %i + 4], %v", "index 4 is out of bounds for global buffer 'x'"),
])
def test_every_access_is_bounds_checked(chk, instr, message):
    text = header("inout x: f32[n]") + f"""
.stage main domain [n] block [4]
    .reg %i: i64
    .reg %v: f32
    .shared sh: f32[8]
    MOV.i64 %i, %gid.x
    {instr.format(chk=chk)}
    EXIT
"""
    with pytest.raises(ExecutionError, match="stage 'main': instruction 1") as err:
        execute(text, {"n": 4}, x=np.zeros(4, np.float32))
    assert message.format(chk=chk) in str(err.value)


# ============================================================ decoder refusals
@pytest.mark.parametrize("body, message", [
    ("ADD.f32 %v, %v, %nope", "register %nope is not declared"),
    ("BRA nowhere", "unknown label 'nowhere'"),
    ("back:\n    BRA back", "BRA may only jump forward"),
    ("LOOP %i, ahead\nahead:", "LOOP must jump backward"),
    ("ADD.bool %p, %p, %p", "ADD does not take type bool"),
    ("LDG.f32 %v, [nothere + %i]", "'nothere' is not a global buffer"),
    ("LDS.f32 %v, [x + %i]", "'x' is not a shared array"),
    ("LDG.f32 %v, [x + %v]", "an address index %v must be an integer"),
    ("ADD.f32 %v, %v, $zz", "$zz is neither a shape symbol nor a scalar parameter"),
    ("PoolAlloc %i, nopool, 3", "'nopool' is not a pool"),
    ("PhaseAdv %v", "the phase increment %v must be an integer"),
])
def test_decoder_refuses_malformed_programs(body, message):
    text = header("inout x: f32[n]") + f"""
.stage main domain [n] block [4]
    .reg %i: i64
    .reg %v: f32
    .reg %p: bool
    {body}
    EXIT
"""
    with pytest.raises(VerifyError, match=message.replace("[", r"\[").replace("$", r"\$").replace("+", r"\+")):
        execute(text, {"n": 4}, x=np.zeros(4, np.float32))


# ============================================================= launch arguments
def test_launch_checks_its_arguments():
    exe = decode_program(parse_program(LOOP), "k")
    c, s = np.ones(4, np.int64), np.zeros(4, np.int64)
    cases = [
        ({"c": c}, {"n": 4}, r"program 't' needs buffer\(s\) s"),
        ({"c": c, "s": [0, 0, 0, 0]}, {"n": 4}, "buffer 's': expected a numpy array of i64, got list"),
        ({"c": c, "s": s.astype(np.int32)}, {"n": 4}, "buffer 's': expected dtype i64, got int32"),
        ({"c": c, "s": s}, {"n": 5}, "buffer 'c': expected 5 elements, got 4"),
        ({"c": np.ones(8, np.int64)[::2], "s": s}, {"n": 4}, "'c' must be C-contiguous"),
        ({"c": c, "s": s, "zz": s}, {"n": 4}, "no buffer parameter"),
        ({"c": c, "s": s}, {}, "shape symbol 'n' must be bound to an integer"),
    ]
    for buffers, symbols, message in cases:
        with pytest.raises(ArgumentError, match=message):
            BACKEND.launch(exe, buffers, {}, symbols)
    ro = np.zeros(4, np.int64)
    ro.flags.writeable = False
    with pytest.raises(ArgumentError, match="'s' is written by the program but the array is read-only"):
        BACKEND.launch(exe, {"c": c, "s": ro}, {}, {"n": 4})
    with pytest.raises(ArgumentError, match="scalar parameter 'alpha'"):
        execute(header("alpha: f32", "out y: f32[n]") + "\n.stage s domain [n] block [1]\n    EXIT\n",
                {"n": 1}, y=np.zeros(1, np.float32))


# ============================================================ unverified programs
def test_unverified_programs_get_converted_operands():
    # Each line breaks a verifier typing rule; the interpreter converts as CVT instead.
    text = header("in x: i32[n]", "out y: f32[n]", "out z: u8[n]") + """
.stage main domain [n] block [4]
    .reg %i: i64
    .reg %v, %w: f32
    .reg %b: u8
    MOV.i64 %i, %gid.x
    LDG.f32 %v, [x + %i]        ; an i32 buffer read as f32
    ADD.f32 %v, %v, $n          ; an i64 symbol read as f32
    MOV_IMM.f32 %w, 0.1         ; inexact: rounded to f32
    ADD.f32 %v, %v, %w
    STG.f32 [y + %i], %v
    ADD.i32 %b, %i, 300         ; i64 register and an out-of-range immediate, into a u8 register
    STG.u8 [z + %i], %b
"""  # and no EXIT: the end of the body ends the lane
    x = np.array([1, -2, 3], np.int32)
    out = execute(text, {"n": 3}, x=x, y=np.zeros(3, np.float32), z=np.zeros(3, np.uint8))
    np.testing.assert_array_equal(out["y"], (x + 3).astype(np.float32) + np.float32(0.1))
    np.testing.assert_array_equal(out["z"], (np.arange(3) + 300) % 256)


def test_barrier_inside_a_subroutine_without_the_verifier():
    text = header("out y: i32[n]") + """
.stage main domain [n] block [4]
    .reg %t, %j, %i: i64
    .reg %v: i32
    .shared sh: i32[4]
    MOV.i64 %t, %tid.x
    MOV.i64 %i, %gid.x
    CVT.i32.i64 %v, %t
    STS.i32 [sh + %t], %v
    CALL sync
    SUB.i64 %j, 3, %t
    LDS.i32 %v, [sh + %j]
    STG.i32 [y + %i], %v
    EXIT
sync:
    BarSync
    RET
"""
    np.testing.assert_array_equal(execute(text, {"n": 4}, y=np.zeros(4, np.int32))["y"], [3, 2, 1, 0])
