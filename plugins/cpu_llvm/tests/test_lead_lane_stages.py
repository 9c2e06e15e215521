"""Lead-lane stages (hologram.isa.program.lead_lane_axes) run one lane per block along
their lead axes natively, and compute what the interpreter computes, every lane run."""

from __future__ import annotations

import numpy as np
import pytest

from hologram.isa.asm import parse_program
from hologram_cpu_llvm import CpuLlvmBackend
from hologram_interp import InterpBackend

# Each block's first lane fills its block of y (4 x 2 outputs, clipped at the edges) with
# the block's linear id; every other lane leaves at once.
TILES = """\
.program tiles
.symbols n m
.param out y: i64[m, n]

.stage s domain [n, m] block [4, 2]
    .reg %p: bool
    .reg %r, %c, %i, %j, %rows, %cols, %id, %at: i64
    SET.ne.i64 %p, %tid.x, 0
    @%p BRA out
    SET.ne.i64 %p, %tid.y, 0
    @%p BRA out
    MUL.i64 %id, %ctaid.y, %nctaid.x
    ADD.i64 %id, %id, %ctaid.x
    MOV_IMM.i64 %r, 0
    MOV_IMM.i64 %rows, 2
row:
    MOV_IMM.i64 %c, 0
    MOV_IMM.i64 %cols, 4
col:
    ADD.i64 %i, %gid.y, %r
    ADD.i64 %j, %gid.x, %c
    SET.ge.i64 %p, %i, $m
    @%p BRA skip
    SET.ge.i64 %p, %j, $n
    @%p BRA skip
    MUL.i64 %at, %i, $n
    ADD.i64 %at, %at, %j
    STG.i64.chk [y + %at], %id
skip:
    ADD.i64 %c, %c, 1
    LOOP %cols, col
    ADD.i64 %r, %r, 1
    LOOP %rows, row
out:
    EXIT
"""


@pytest.mark.parametrize("n, m", [(1, 1), (4, 2), (9, 5), (33, 17)])
@pytest.mark.parametrize("threads", [1, 2])
def test_lead_lane_tiles_as_the_interpreter(tmp_path, n, m, threads):
    program = parse_program(TILES)
    outs = []
    for backend in (InterpBackend(), CpuLlvmBackend(num_threads=threads, cache_dir=tmp_path)):
        y = np.full((m, n), -1, np.int64)
        backend.launch(backend.prepare(program), {"y": y}, {}, {"n": n, "m": m})
        outs.append(y)
    assert np.array_equal(*outs)
    want = (np.arange(m)[:, None] // 2) * ((n + 3) // 4) + np.arange(n)[None, :] // 4
    assert np.array_equal(outs[0], want)
