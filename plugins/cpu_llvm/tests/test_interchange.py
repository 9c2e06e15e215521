"""Lanes inside a uniform loop (codegen_interchange.py): which stages take the layout,
how their registers are kept, and the same results as the interpreter: columns of a
matrix, a zero-trip guard, partial blocks, a 3-D domain, registers the epilogue
rewrites, a counter at its type's minimum."""

from __future__ import annotations

import numpy as np
import pytest

import hologram as hg
from hologram.isa.asm import parse_program
from hologram.isa.program import Instr
from hologram_cpu_llvm.codegen_interchange import plan
from llvm_harness import both

COLUMNS = '''.program columns
.isa 1
.symbols n m
.param in x: i64[n, m]
.param out y: i64[m]

.stage y domain [m] block [BLOCK]
    .reg %j, %acc, %row, %at, %c: i64
    .reg %p: bool
    MOV.i64     %j, %gid.x
    MOV_IMM.i64 %acc, 7
    SET.le.i64  %p, $n, 0
    @%p BRA     done
    MOV_IMM.i64 %row, 0
    MOV.i64     %c, $n
top:
    MUL.i64     %at, %row, $m
    ADD.i64     %at, %at, %j
    LDG.i64     %at, [x + %at]
    MUL.i64     %at, %at, %row
    ADD.i64     %acc, %acc, %at
    ADD.i64     %row, %row, 1
    LOOP        %c, top
done:
    MUL.i64     %j, %j, 1
    STG.i64     [y + %j], %acc
    EXIT
'''


def columns(block: int = 256) -> str:
    return COLUMNS.replace("BLOCK", str(block))


def _stage_plan(program, index: int = 0):
    stage = program.stages[index]
    items, labels = [], {}
    for item in stage.body:
        if isinstance(item, Instr):
            items.append((len(items), item))
        else:
            labels[item.name] = len(items)
    return plan(items, labels, stage)


def test_a_column_loop_is_interchanged_with_its_registers_classed():
    it = _stage_plan(parse_program(columns()))
    assert it is not None and [s[0] for s in it.steps] == ["run", "guard", "run", "loop", "run"]
    assert {"row", "c", "p"} <= it.uniform and "acc" not in it.uniform and "j" not in it.uniform
    assert "at" in it.local  # written first wherever it is used
    assert len(it.remat) == 1  # %j = %gid.x, recomputed each turn though the epilogue rewrites it


@pytest.mark.parametrize("n, m, block", [(0, 5, 256), (1, 1, 256), (37, 21, 16), (300, 3, 256), (5, 300, 256)])
def test_interchanged_columns_match_the_interpreter(n, m, block):
    x = np.random.default_rng(n * 1000 + m).integers(-1000, 1000, (n, m))
    got, want = both(parse_program(columns(block)), {"x": x, "y": np.zeros(m, np.int64)}, {}, {"n": n, "m": m})
    np.testing.assert_array_equal(got["y"], want["y"])
    np.testing.assert_array_equal(got["y"], 7 + (x * np.arange(n)[:, None]).sum(axis=0))


TWO_LOOPS = COLUMNS.replace("""done:
    MUL.i64     %j, %j, 1
""", """done:
    SET.le.i64  %p, $m, 2
    @%p BRA     done2
    MOV_IMM.i64 %row, 0
    MOV.i64     %c, $m
again:
    MUL.i64     %at, %row, $m
    ADD.i64     %at, %at, %j
    LDG.i64     %at, [x + %at]
    SUB.i64     %acc, %acc, %at
    ADD.i64     %row, %row, 1
    LOOP        %c, again
done2:
    MUL.i64     %j, %j, 1
""")


@pytest.mark.parametrize("n, m", [(0, 2), (2, 2), (7, 3), (40, 5), (3, 40)])
def test_loops_one_after_another_each_guarded(n, m):
    program = parse_program(TWO_LOOPS.replace("BLOCK", "16"))
    assert [s[0] for s in _stage_plan(program).steps].count("loop") == 2
    x = np.random.default_rng(n + m).integers(-9, 9, (max(n, m), m))
    got, want = both(program, {"x": x, "y": np.zeros(m, np.int64)}, {}, {"n": max(n, m), "m": m})
    np.testing.assert_array_equal(got["y"], want["y"])


def test_the_split_combination_takes_the_layout_too():
    k = hg.compile('''[kernel]
name = "xtv"
version = "1.0.0"
inputs  = { x = "f32[n, m]", v = "f32[n]" }
outputs = { c = "f32[m]" }
body = "c = x.T @ v"
''')
    assert all(_stage_plan(k.program, i) is not None for i in range(len(k.program.stages)))


def test_a_counter_at_its_minimum_runs_the_body_once():
    text = columns().replace("    MOV.i64     %c, $n\n", "    MOV_IMM.i64 %c, -9223372036854775808\n")
    x = np.arange(6).reshape(2, 3)
    got, want = both(parse_program(text), {"x": x, "y": np.zeros(3, np.int64)}, {}, {"n": 2, "m": 3})
    np.testing.assert_array_equal(got["y"], want["y"])
    np.testing.assert_array_equal(got["y"], [7, 7, 7])  # row 0 only, times row index 0


@pytest.mark.parametrize("change, why", [
    (("    MOV.i64     %c, $n\n", "    MOV.i64     %c, %gid.x\n"), "a counter that differs between lanes"),
    (("    MOV.i64     %c, $n\n", "    LDG.i64     %c, [x + 0]\n"), "a counter read from memory"),
    (("    LDG.i64     %at, [x + %at]\n", "    LDG.i64.chk %at, [x + %at]\n"), "a checked access"),
    (("    SET.le.i64  %p, $n, 0\n", "    SET.le.i64  %p, %gid.x, 0\n"), "a guard that differs between lanes"),
    (("    MUL.i64     %at, %row, $m\n    ADD.i64     %at, %at, %j\n",
      "    MUL.i64     %at, %j, $n\n    ADD.i64     %at, %at, %row\n"), "each lane walking its own row"),
])
def test_what_keeps_the_plain_layout(change, why):
    assert _stage_plan(parse_program(columns().replace(*change))) is None, why


def test_a_3d_domain_and_the_kernels_that_take_the_layout():
    k = hg.compile('''[kernel]
name = "cols3"
version = "1.0.0"
inputs  = { x = "f32[a, n, b]" }
outputs = { y = "f32[a, b]" }
body = "y = x.sum(axis=1)"
''')
    slices = next(i for i, st in enumerate(k.program.stages) if st.name == "y_part")
    assert len(k.program.stages[slices].domain) == 3 and _stage_plan(k.program, slices) is not None
    x = np.random.default_rng(5).uniform(0, 1, (3, 9000, 5)).astype(np.float32)
    got = k.on("cpu_llvm")(x)
    np.testing.assert_allclose(got, x.astype(np.float64).sum(axis=1), rtol=1e-6)
    np.testing.assert_allclose(got, k.on("interp")(x), rtol=1e-6)


def test_a_register_read_before_its_last_prologue_write_is_carried_not_recomputed():
    # %j starts at zero (every register does), is read, then set from %gid.x: not a value
    # to recompute from its definition alone, and it must read zero in every lane
    text = columns().replace("    MOV.i64     %j, %gid.x\n",
                             "    ADD.i64     %acc, %acc, %j\n    MOV.i64     %j, %gid.x\n")
    program = parse_program(text)
    it = _stage_plan(program)
    assert it is not None and it.remat == ()
    x = np.arange(12).reshape(4, 3)
    got, want = both(program, {"x": x, "y": np.zeros(3, np.int64)}, {}, {"n": 4, "m": 3})
    np.testing.assert_array_equal(got["y"], want["y"])
