"""The verifier proves a split reduction's slices in bounds (`k*(n//k) <= n`, from `n`
as `k*(n//k) + n%k`: hologram.core.dims.divided_lanes) and still refuses a slice that
reaches one row past them."""

from __future__ import annotations

import pytest

import hologram as hg
from hologram.core.errors import VerifyError
from hologram.isa.asm import parse_program
from hologram.isa.program import Instr
from hologram.verify.verifier import verify

SLICES = '''.program slices
.isa 1
.symbols n m "n//4096"
.param in x: f32[n, m]
.param out y: f32["n//4096", m]

.stage y domain [m, "n//4096"] block [16, 16]
    .reg %j, %s, %base, %ii, %c, %at: i64
    .reg %f, %acc: f32
    MOV.i64     %j, %gid.x
    MOV.i64     %s, %gid.y
    MOV_IMM.f32 %acc, 0.0
    MUL.i64     %base, %s, ROWS
    MOV_IMM.i64 %ii, FIRST
    MOV_IMM.i64 %c, ROWS
top:
    ADD.i64     %at, %base, %ii
    MUL.i64     %at, %at, $m
    ADD.i64     %at, %at, %j
    LDG.f32     %f, [x + %at]
    ADD.f32     %acc, %acc, %f
    ADD.i64     %ii, %ii, 1
    LOOP        %c, top
    MUL.i64     %s, %s, $m
    ADD.i64     %s, %s, %j
    STG.f32     [y + %s], %acc
    EXIT
'''


def slices(rows: int = 4096, first: int = 0) -> str:
    return SLICES.replace("ROWS", str(rows)).replace("FIRST", str(first))


def test_rows_of_every_slice_are_proven_in_bounds():
    p = parse_program(slices())
    assert verify(p) is p


@pytest.mark.parametrize("rows, first", [(4096, 1), (4097, 0)])
def test_a_slice_reaching_past_its_rows_is_refused(rows, first):
    with pytest.raises(VerifyError, match=r"`LDG.f32 %f, \[x \+ %at\]`: cannot prove this global access in bounds"):
        verify(parse_program(slices(rows, first)))


def test_the_lowered_split_reads_without_run_time_checks():
    k = hg.compile('''[kernel]
name = "xtv"
version = "1.0.0"
inputs  = { x = "f32[n, m]", v = "f32[n]" }
outputs = { c = "f32[m]" }
body = "c = x.T @ v"
''')
    loads = [i for st in k.program.stages for i in st.body if isinstance(i, Instr) and i.op == "LDG"]
    assert {i.addr.buffer for i in loads} == {"x", "v", "c_part"} and not any(i.checked for i in loads)
