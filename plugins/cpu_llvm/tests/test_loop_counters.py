"""LOOP counters at the integer extremes, on both backends (issue 21).

docs/isa.md: `LOOP %c, L` decrements `c` and jumps back while it is above zero, and a
counter of 1, 0 or a negative value runs the body once. A counter at its type's minimum
must not wrap to the maximum at the decrement (a verified program whose counter starts
at -2**63 ran ~2**63 times): the decrement saturates there. The program below counts the
body's runs (leaving the loop after 5, so a wrapped counter shows as 5 runs instead of
hanging) and stores the counter as the loop left it.
"""

from __future__ import annotations

import numpy as np
import pytest

from hologram.core.types import INTEGER_TYPES, DType
from hologram.isa.asm import parse_program
from hologram.registry.lookups import get_backend

from llvm_harness import both

CAP = 5  # the body leaves the loop at its 5th run

PROGRAM = """
.program loop_counters
.symbols n
.param in c: CT[n]
.param out runs: i64[n]
.param out after: CT[n]

.stage main domain [n] block [4]
    .reg %i, %k: i64
    .reg %c: CT
    .reg %p: bool
    MOV.i64 %i, %gid.x
    LDG.CT %c, [c + %i]
    MOV_IMM.i64 %k, 0
top:
    ADD.i64 %k, %k, 1
    SET.ge.i64 %p, %k, 5
    @%p BRA out
    LOOP %c, top
out:
    STG.i64 [runs + %i], %k
    STG.CT [after + %i], %c
    EXIT
"""


def program(t: DType):
    return parse_program(PROGRAM.replace("CT", str(t)))


def starts(t: DType) -> np.ndarray:
    lo, hi = int(t.min), int(t.max)
    values = {lo, lo + 1, lo + 2, -2, -1, 0, 1, 2, 3, 4, 5, 6, hi - 1, hi, 1023, 1024, 1025, 4097}
    return np.array(sorted(v for v in values if lo <= v <= hi), dtype=object).astype(t.np)


def expected(t: DType, c0: int) -> tuple[int, int]:
    """(runs of the body, the counter after the loop) by docs/isa.md's rule."""
    if c0 >= CAP:  # left by the branch after CAP runs and CAP - 1 decrements
        return CAP, c0 - (CAP - 1)
    if c0 >= 1:
        return c0, 0
    return 1, max(c0 - 1, int(t.min))  # one run; the decrement stops at the type's minimum


def check(t: DType, c: np.ndarray, runs: np.ndarray, after: np.ndarray) -> None:
    want = [expected(t, int(v)) for v in c]
    assert [int(r) for r in runs] == [w[0] for w in want], f"runs of the body for counters {c.tolist()}"
    assert [int(a) for a in after] == [w[1] for w in want], f"counters after the loop for {c.tolist()}"


@pytest.mark.parametrize("backend", ["interp", "cpu_llvm"])
def test_i64_counters_at_the_extremes_run_as_documented(backend):
    """The verified form (the verifier requires an i64 counter), through each backend."""
    t = DType.I64
    c = starts(t)
    b = get_backend(backend)
    exe = b.prepare(program(t))
    runs, after = np.zeros(len(c), np.int64), np.zeros(len(c), np.int64)
    b.launch(exe, {"c": c, "runs": runs, "after": after}, {}, {"n": len(c)})
    check(t, c, runs, after)


@pytest.mark.parametrize("t", INTEGER_TYPES, ids=str)
def test_counters_of_every_integer_type_never_wrap(t):
    """Unverified programs may count in any integer type (the interpreter decodes them,
    the code generator compiles them): no type wraps at its minimum either."""
    c = starts(t)
    bufs = {"c": c, "runs": np.zeros(len(c), np.int64), "after": np.zeros(len(c), t.np)}
    got, want = both(program(t), bufs, {}, {"n": len(c)})
    check(t, c, want["runs"], want["after"])  # the interpreter
    check(t, c, got["runs"], got["after"])  # the generated code


STRIPS = """
.program strips
.symbols n
.param in c: i64[n]
.param out y: i64[n]

.stage main domain [n] block [8]
    .reg %i, %c, %o, %acc, %j: i64
    .reg %p: bool
    .shared sh: i64[8]
    MOV.i64 %i, %gid.x
    MOV.i64 %j, %tid.x
    MOV.i64 %acc, %i
    MOV_IMM.i64 %o, 3
outer:
    LDG.i64 %c, [c + %i]
BARRIER_A
inner:
    MUL.i64 %acc, %acc, 3
    XOR.i64 %acc, %acc, %c
    LOOP %c, inner
    STS.i64 [sh + %j], %acc
BARRIER_B
    LDS.i64 %acc, [sh + %j]
    LOOP %o, outer
    STG.i64 [y + %i], %acc
    EXIT
"""


@pytest.mark.parametrize("layout, first, second", [
    ("plain", "", ""), ("state machine", "    BarSync", "    BarSync"), ("straight regions", "", "")])
def test_long_innermost_loops_are_right_in_every_lane_layout(layout, first, second):
    """cpu_llvm polls an innermost loop every 1024 trips from a limit the counter's writes
    set, and resets the limits where a lane resumes (the barrier layouts run lanes by
    turns): counts of 0 to 5000 trips, across several strips, agree with the interpreter."""
    text = STRIPS.replace("BARRIER_A", first).replace("BARRIER_B", second)
    if layout == "straight regions":  # one barrier in straight-line code before the loops
        text = text.replace("    MOV_IMM.i64 %o, 3\n", "    MOV_IMM.i64 %o, 3\n    BarSync\n")
    c = np.array([0, 1, 1023, 1024, 1025, 2048, 2049, 5000, -2**63, 3, 4097, 7], np.int64)
    got, want = both(parse_program(text), {"c": c, "y": np.zeros(len(c), np.int64)}, {}, {"n": len(c)})
    np.testing.assert_array_equal(got["y"], want["y"])
