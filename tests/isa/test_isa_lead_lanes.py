"""`lead_lane_axes`: the stages whose blocks are worked by their first lane alone, which a
backend may run one lane per block along those axes (docs/cpu-llvm.md)."""

from __future__ import annotations

import pytest

from hologram.isa.asm import parse_program
from hologram.isa.program import lead_lane_axes

HEAD = """\
.program p
.symbols n m
.param out y: f32[m, n]

.stage s domain [n, m] block [4, 2]
    .reg %p, %q: bool
    .reg %i: i64
"""
WORK = """\
    MOV.i64 %i, %gid.x
    STG.f32.chk [y + %i], 1.0
"""


def axes(body: str) -> tuple[int, ...]:
    (stage,) = parse_program(HEAD + body).stages
    return lead_lane_axes(stage)


@pytest.mark.parametrize("body, expected", [
    ("    SET.ne.i64 %p, %tid.x, 0\n    @%p BRA out\n" + WORK + "out:\n    EXIT\n", (0,)),
    ("    SET.ne.i64 %p, %tid.y, 0\n    @%p BRA out\n" + WORK + "out:\n    EXIT\n", (1,)),
    ("    SET.ne.i64 %p, %tid.x, 0\n    @%p BRA out\n    SET.ne.i64 %q, %tid.y, 0\n    @%q BRA out\n" + WORK
     + "out:\n    EXIT\n", (0, 1)),
    # the second test jumps elsewhere: only the first axis is a lead axis
    ("    SET.ne.i64 %p, %tid.x, 0\n    @%p BRA out\n    SET.ne.i64 %q, %tid.y, 0\n    @%q BRA other\n" + WORK
     + "other:\n    EXIT\nout:\n    EXIT\n", (0,)),
    # the same axis twice counts once
    ("    SET.ne.i64 %p, %tid.x, 0\n    @%p BRA out\n    SET.ne.i64 %q, %tid.x, 0\n    @%q BRA out\n" + WORK
     + "out:\n    EXIT\n", (0,)),
    # the lanes that jump do not leave: no lead axis
    ("    SET.ne.i64 %p, %tid.x, 0\n    @%p BRA out\n" + WORK + "out:\n    MOV.i64 %i, 0\n    EXIT\n", ()),
    # a negated branch is taken by the lead lane itself
    ("    SET.ne.i64 %p, %tid.x, 0\n    @!%p BRA out\n" + WORK + "out:\n    EXIT\n", ()),
    # work before the test: every lane does it
    (WORK + "    SET.ne.i64 %p, %tid.x, 0\n    @%p BRA out\nout:\n    EXIT\n", ()),
    # z is not an axis of this 2-D domain
    ("    SET.ne.i64 %p, %tid.z, 0\n    @%p BRA out\n" + WORK + "out:\n    EXIT\n", ()),
])
def test_lead_lane_axes(body, expected):
    assert axes(body) == expected


def test_a_tiled_contraction_is_worked_by_its_lead_lanes():
    import hologram as hg
    pack, tile, narrow = hg.compile_file("kernels/gemm.toml").program.stages
    assert lead_lane_axes(tile) == (0, 1)
    assert lead_lane_axes(narrow) == (0, 1)  # a matrix narrower or shorter than a tile
    assert lead_lane_axes(pack) == (1,)  # a lane copies its block's TILE_COLS columns of b
