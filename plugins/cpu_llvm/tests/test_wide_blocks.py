"""Several blocks per turn of the block loop (codegen_control.WIDE_BLOCKS): which stages
run consecutive blocks as one lane loop, and that the results do not change with it,
nor where the code can tell blocks apart."""

from __future__ import annotations

import numpy as np
import pytest
from llvmlite import ir

import hologram as hg
from hologram.isa.asm import parse_program
from hologram_cpu_llvm.codegen_control import WIDE_BLOCKS, StageEmitter
from llvm_harness import both

# y[i] = x[i] + ctaid.x * 1000 + tid.x, and the sum of x into s: one stage that can
# tell its blocks apart, one that cannot
BLOCKS = '''.program blocks
.isa 1
.symbols n
.param in x: i64[n]
.param out y: i64[n]
.param out s: i64[]

.stage y domain [n] block [64]
    .reg %i, %v, %b: i64
    MOV.i64     %i, %gid.x
    LDG.i64     %v, [x + %i]
    MUL.i64     %b, %ctaid.x, 1000
    ADD.i64     %v, %v, %b
    ADD.i64     %v, %v, %tid.x
    STG.i64     [y + %i], %v
    EXIT

.stage s domain [n] block [64]
    .reg %i, %v: i64
    MOV.i64     %i, %gid.x
    LDG.i64     %v, [x + %i]
    ReduceAdd.i64 [s], %v
    EXIT
'''


def _wide(program, index: int) -> int:
    return StageEmitter(program, index, ir.Module(), f"stage{index}", ()).wide


def test_only_stages_blind_to_their_blocks_run_them_together():
    program = parse_program(BLOCKS)
    assert _wide(program, 0) == 1  # ctaid.x and tid.x depend on the grouping
    assert _wide(program, 1) == WIDE_BLOCKS
    # two-dimensional stages and lead-lane stages keep one block per turn
    gemm = hg.compile_file("kernels/gemm.toml").program
    assert [_wide(gemm, k) for k in range(len(gemm.stages))] == [1, 1, 1]  # pack, tile, narrow
    total = hg.compile_file("kernels/sum.toml").program
    assert any(_wide(total, k) == WIDE_BLOCKS for k in range(len(total.stages)))


@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 64 * WIDE_BLOCKS - 1, 64 * WIDE_BLOCKS, 64 * WIDE_BLOCKS + 1,
                               64 * WIDE_BLOCKS * 3 + 17, 200_000])
def test_results_are_the_interpreters_at_every_turn_boundary(n):
    x = np.arange(n, dtype=np.int64) * 7 - 3
    got, want = both(parse_program(BLOCKS), {"x": x, "y": np.zeros(n, np.int64), "s": np.zeros((), np.int64)},
                     symbols={"n": n})
    np.testing.assert_array_equal(got["y"], want["y"])
    assert got["s"] == want["s"] == x.sum()


@pytest.mark.parametrize("n", [1, 1000, 4097, 100_000, 1_000_003])
def test_float_max_and_argmax_across_turns(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    x[rng.integers(0, n)] = 50.0  # one largest value, somewhere
    assert hg.compile_file("kernels/max.toml").on("cpu_llvm")(x) == x.max()
    assert hg.compile_file("kernels/argmax.toml").on("cpu_llvm")(x) == x.argmax()
    x[rng.integers(0, n)] = np.nan
    assert np.isnan(hg.compile_file("kernels/max.toml").on("cpu_llvm")(x))
    assert hg.compile_file("kernels/argmax.toml").on("cpu_llvm")(x) == x.argmax()
