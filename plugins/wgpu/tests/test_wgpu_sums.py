"""Full float sums on wgpu (hologram.backend.gathered_sums, wgsl.py, sums.py): a lane's
contributions in a Kahan pair, a tree per workgroup, one partial per workgroup, the
partials folded as a tree after the stage. Held to the accuracy contract
at counts where adding one contribution at a time leaves it (2**24 ones stall at
16777216), to the interpreter wherever the contract makes the answer exact, and to
itself: the same launch gives the same bits."""

from __future__ import annotations

import numpy as np
import pytest

import hologram
from hologram.errors import ExecutionError
from hologram.isa.asm import parse_program
from hologram.registry.lookups import get_backend
from hologram.testing import assert_close

from repo_paths import KERNELS


def _sum(backend: str):
    return hologram.compile_file(KERNELS / "sum.toml").on(backend)


def test_a_sum_of_more_ones_than_f32_counts_one_at_a_time_is_exact(wgpu_backend):
    """2**24 + 1000 ones: more blocks (65,540) than a dispatch names (the workgroups loop)."""
    x = np.ones(2 ** 24 + 1000, np.float32)
    got = np.asarray(_sum("wgpu")(x))
    assert got == np.float32(2 ** 24 + 1000)


@pytest.mark.parametrize("n", [1, 255, 257, 65_537, 2 ** 22])
def test_a_sum_of_uniform_values_keeps_the_contract_and_is_the_same_every_launch(wgpu_backend, n):
    x = np.random.default_rng(n).random(n, dtype=np.float32)
    kernel = _sum("wgpu")
    got = np.asarray(kernel(x))
    assert_close(got, np.asarray(x.sum(dtype=np.float32)), reduction_n=n, magnitude=np.asarray(np.abs(x).sum()))
    assert np.asarray(kernel(x)).tobytes() == got.tobytes()


# Three gathered sums in one stage (two elements of one buffer, one seeded by .init, and
# a second buffer) beside a scattered sum into a third, over a 2-D domain with partial
# blocks and a loop in the lane, so each lane adds twice to s[1].
SUMS = """
.program sums
.symbols m n
.param in x: f32[m, n]
.param out s: f32[2]
.param out q: f32[]
.param out rows: f32[m]
.stage gather domain [m, n] block [4, 8]
    .reg %i, %j, %k, %c: i64
    .reg %v, %w: f32
    .init s[1] = 1.5
    MOV.i64 %i, %gid.x
    MOV.i64 %j, %gid.y
    MUL.i64 %k, %i, $n
    ADD.i64 %k, %k, %j
    LDG.f32 %v, [x + %k]
    ReduceAdd.f32 [s], %v
    MUL.f32 %w, %v, %v
    ReduceAdd.f32 [q], %w
    ReduceAdd.f32 [rows + %i], %v
    MOV.i64 %c, 2
top:
    ReduceAdd.f32 [s + 1], %v
    LOOP %c, top
    EXIT
"""


def test_several_gathered_sums_a_seed_and_a_scattered_sum_in_one_stage_are_the_interpreters(wgpu_backend):
    """Small integers: every order of the additions gives the exact sum, so wgpu and the
    interpreter agree bit for bit."""
    program = parse_program(SUMS)
    x = np.random.default_rng(5).integers(-8, 9, (37, 21)).astype(np.float32)
    results = {}
    for backend in ("interp", "wgpu"):
        outs = {"s": np.zeros(2, np.float32), "q": np.zeros((), np.float32), "rows": np.zeros(37, np.float32)}
        get_backend(backend).launch(program, {"x": x, **outs}, {}, {"m": 37, "n": 21})
        results[backend] = outs
    for name in ("s", "q", "rows"):
        assert np.array_equal(results["wgpu"][name], results["interp"][name]), name
    assert results["wgpu"]["s"][1] == np.float32(1.5 + 2 * x.sum())


def test_a_stage_that_fails_merges_nothing_and_raises_the_interpreters_error(wgpu_backend):
    # one failing lane (77, in the second workgroup): with several, wgpu names whichever
    # lane's record lands first (docs/gpu.md, "Several failing lanes")
    program = parse_program("""
    .program failing_sum
    .symbols n
    .param in x: f32[n]
    .param out s: f32[1]
    .stage add domain [n] block [64]
        .reg %i, %j: i64
        .reg %v: f32
        .reg %p: bool
        MOV.i64 %i, %gid.x
        LDG.f32 %v, [x + %i]
        ReduceAdd.f32 [s], %v
        SET.eq.i64 %p, %i, 77
        SEL.i64 %j, %p, 1, 0
        ReduceAdd.f32.chk [s + %j], %v
        EXIT
    """)
    outs = {}
    for backend in ("interp", "wgpu"):
        with pytest.raises(ExecutionError) as caught:
            get_backend(backend).launch(program, {"x": np.ones(100, np.float32), "s": np.zeros(1, np.float32)},
                                        {}, {"n": 100})
        outs[backend] = str(caught.value)
    assert outs["wgpu"] == outs["interp"]


BARRIER_SUM = """
.program bar_sum
.symbols n
.param in x: f32[n]
.param out s: f32[1]
.stage add domain [n] block [64]
    .shared sh: f32[64]
    .reg %i, %t: i64
    .reg %v, %w: f32
    MOV.i64 %i, %gid.x
    MOV.i64 %t, %tid.x
    LDG.f32 %v, [x + %i]
    STS.f32 [sh + %t], %v
    BarSync
    LDS.f32 %w, [sh + %t]
    ReduceAdd.f32 [s], %w
    EXIT
"""


def test_a_full_sum_after_a_barrier_is_the_interpreters(wgpu_backend):
    """A stage with BarSync runs its lanes in rounds; the sum's tree comes after them all."""
    program = parse_program(BARRIER_SUM)
    x = np.arange(1000, dtype=np.float32)
    got = {}
    for backend in ("interp", "wgpu"):
        got[backend] = np.zeros(1, np.float32)
        get_backend(backend).launch(program, {"x": x, "s": got[backend]}, {}, {"n": 1000})
    assert got["wgpu"] == got["interp"] == np.float32(499500)
