"""No program, however malformed, crashes the interpreter.

Hypothesis builds programs from the ISA's vocabulary with little regard for the rules
(wrong types and operand counts, undeclared registers, unknown labels and buffers, any
immediate, any offset) and runs them without the verifier: each run must finish or
raise a HologramError, never another exception. LOOP is left out: a loop whose counter
is rewritten inside it never ends, which only the verifier rules out.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from hologram.core.errors import HologramError
from hologram.core.types import ALL_TYPES, Affine, DType
from hologram.isa.opcodes import OPCODES
from hologram.isa.program import (COMPARE_MODS, SPECIALS, Addr, BufferParam, Imm, Init, Instr, Label, MemDecl, Pred,
                                  Program, Reg, RegDecl, ScalarParam, Special, Stage, Sym)
from test_interp import launch

REGS = tuple(RegDecl(f"r{t}", t) for t in ALL_TYPES)
INT_REGS = [Reg(r.name) for r in REGS if r.dtype.is_int]
IMMS = [0, 1, -1, 7, 300, -(2**70), 2**64, 0.5, -0.0, math.nan, math.inf, 1e300, True, False]
LABELS = ["L0", "L1", "L2"]
OPS = sorted(set(OPCODES) - {"LOOP"})
SPACES = {"global": ["g", "t"], "shared": ["sh"], "pool": ["p"], None: ["nope"]}

regs = st.sampled_from([Reg(r.name) for r in REGS])
operands = st.one_of(regs, st.sampled_from(SPECIALS).map(Special), st.sampled_from(IMMS).map(Imm),
                     st.sampled_from(["n", "s"]).map(Sym))
junk = st.one_of(st.none(), st.just(Reg("undeclared")), st.just(Sym("nope")), st.sampled_from(ALL_TYPES))


@st.composite
def instrs(draw) -> Instr:
    """Mostly well-formed instructions with arbitrary operand types and values; one in
    eight breaks a structural rule as well."""
    op = draw(st.sampled_from(OPS))
    spec = OPCODES[op]
    sloppy = draw(st.integers(0, 7)) == 0
    pick = lambda good: draw(st.one_of(good, junk)) if sloppy else draw(good)  # noqa: E731
    types = [t for t in ALL_TYPES if spec.types != "none" and spec.admits(t)]
    addr = None
    if "m" in spec.form:
        addr = Addr(draw(st.sampled_from(SPACES[spec.space])), draw(st.none() | st.sampled_from(INT_REGS)),
                    draw(st.sampled_from([-1, 0, 1, 3, 10])))
    return Instr(
        op, pick(st.sampled_from(types)) if types else pick(st.none()),
        dst=pick(regs) if "d" in spec.form else None,
        srcs=tuple(pick(operands) for _ in range(spec.form.count("s") + (draw(st.integers(-1, 1)) if sloppy else 0))),
        addr=pick(st.just(addr)) if addr else None,
        target=draw(st.sampled_from(LABELS)) if "l" in spec.form else "p" if "p" in spec.form else None,
        mod=pick(st.sampled_from(COMPARE_MODS)) if spec.modifier == "compare" else None,
        dtype2=pick(st.sampled_from(ALL_TYPES)) if "S" in spec.sources else None,
        count=draw(st.sampled_from([0, 1, 2, 5])) if "n" in spec.form else None,
        pred=draw(st.none() | st.builds(Pred, regs, st.booleans())) if spec.predicated else None,
        checked=draw(st.booleans()),
    )


@st.composite
def programs(draw) -> Program:
    body = draw(st.lists(instrs(), max_size=12))
    for label in draw(st.lists(st.sampled_from(LABELS), max_size=3, unique=True)):
        body.insert(draw(st.integers(0, len(body))), Label(label))
    inits = draw(st.lists(st.builds(Init, st.sampled_from(["t", "t", "g"]), st.sampled_from([0, 1, 3, 3, -1, 5]),
                                    st.sampled_from(IMMS)), max_size=2))
    stage = Stage("s", (Affine.of("n"),), (2,), REGS, shared=(MemDecl("sh", DType.F32, 4),),
                  pools=(MemDecl("p", DType.I32, 4),), inits=tuple(inits), body=tuple(body))
    n = (Affine.of("n"),)
    return Program("fuzz", (BufferParam("g", DType.F32, n, "inout"), ScalarParam("s", DType.F32)),
                   temps=(BufferParam("t", DType.I32, (Affine.of(4),), "temp"),), symbols=("n",), stages=(stage,))


@given(programs(), st.integers(0, 5))
def test_any_program_finishes_or_raises_a_hologram_error(program, n):
    try:
        launch(program, {"g": np.zeros(n, np.float32)}, {"s": np.float32(1.5)}, {"n": n})
    except HologramError:
        pass
