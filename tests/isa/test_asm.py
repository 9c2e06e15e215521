"""`.hasm` text assembly: exact round trip, canonical form, precise parse errors."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given

from hologram.core.errors import ISAError
from hologram.core.types import Affine, DType
from hologram.isa.asm import format_instr, format_program, parse_program
from hologram.isa.opcodes import OPCODES
from hologram.isa.program import (Addr, BufferParam, Imm, Init, Instr, Label, MemDecl, Pred, Program, Reg, RegDecl,
                                  ScalarParam, Stage, Sym)
from hologram.testing.isa_strategies import programs

SAXPY = """\
.program saxpy
.isa 1
.symbols n
.param a: f32
.param in x: f32[n]
.param inout y: f32[n]

.stage main domain [n] block [256]
    .reg %i: i64
    .reg %xv, %yv: f32
    MOV.i64     %i, %gid.x
    LDG.f32     %xv, [x + %i]
    LDG.f32     %yv, [y + %i]
    FMA.f32     %yv, $a, %xv, %yv
    STG.f32     [y + %i], %yv
    EXIT
"""


def _program(body: tuple, regs: tuple = (), **stage) -> Program:
    return Program("p", (BufferParam("x", DType.F32, (Affine.of("n"),), "in"),), symbols=("n",),
                   stages=(Stage("s", (Affine.of("n"),), (4,), regs, body=body, **stage),))


@given(programs())
def test_text_round_trip_is_exact(p):
    text = format_program(p)
    q = parse_program(text)
    assert q == p
    assert format_program(q) == text


def test_canonical_text_is_a_fixed_point():
    assert format_program(parse_program(SAXPY)) == SAXPY


def test_free_form_input_formats_canonically():
    messy = """
    ; a comment line
    .program   saxpy      ; trailing comment
    .symbols n
    .param a : f32
    .param in x: f32[ n ]
    .param inout y:f32[n]
    .stage main domain [n] block [256]
    .reg %i : i64
    .reg %xv: f32
    .reg %yv: f32
    MOV.i64 %i,%gid.x
    LDG.f32 %xv, [x+%i]
    LDG.f32 %yv, [y + %i]
    FMA.f32 %yv, $a, %xv, %yv
    STG.f32 [y + %i], %yv
    EXIT
    """
    assert format_program(parse_program(messy)) == SAXPY  # `.isa` defaults to the current version


def test_suffix_order_offsets_and_inline_labels_are_normalised():
    text = ".program p\n.symbols n\n.param in x: f32[n]\n.stage s domain [n] block [1]\n" \
           ".reg %v: f32\n.reg %i: i64\n.reg %b: bool\n" \
           "MOV.i64 %i, 0\nSET.f32.lt %b, %v, 1.0\nLDG.chk.f32 %v, [x + 4 + %i - 1]\ndone: EXIT\n"
    out = format_program(parse_program(text))
    assert "SET.lt.f32  %b, %v, 1.0" in out
    assert "LDG.f32.chk %v, [x + %i + 3]" in out
    assert "done:\n    EXIT" in out


@pytest.mark.parametrize("value, text", [
    (math.nan, "nan"), (-math.nan, "-nan"), (math.inf, "inf"), (-math.inf, "-inf"), (-0.0, "-0.0"),
    (0.0, "0.0"), (5e-324, "5e-324"), (1e300, "1e+300"), (0.1, "0.1"), (1.0, "1.0"), (1, "1"), (-7, "-7"),
    (True, "true"), (False, "false"), (2**64 - 1, str(2**64 - 1)),
    (struct.unpack("<d", struct.pack("<Q", 0x7FF4000000000001))[0], "nan(0x7ff4000000000001)"),
    (struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000001))[0], "nan(0xfff8000000000001)"),
])
def test_immediates_are_written_exactly(value, text):
    p = _program((Instr("MOV_IMM", DType.F64, Reg("r"), (Imm(value),)), Instr("EXIT")), (RegDecl("r", DType.F64),))
    out = format_program(p)
    assert f"%r, {text}\n" in out
    back = parse_program(out).stages[0].body[0].srcs[0].value
    assert type(back) is type(value)
    if isinstance(value, float):
        assert struct.pack("<d", back) == struct.pack("<d", value)  # bit-exact, NaN payloads included
    else:
        assert back == value
    assert parse_program(out) == p


def test_immediate_kinds_stay_distinct():
    regs = (RegDecl("r", DType.F64),)
    progs = [_program((Instr("MOV_IMM", DType.F64, Reg("r"), (Imm(v),)), Instr("EXIT")), regs)
             for v in (1, 1.0, True, 0.0, -0.0)]
    assert len({format_program(p) for p in progs}) == 5
    for p in progs:
        assert parse_program(format_program(p)) == p


def test_huge_integers_round_trip_in_hex():
    p = _program((Instr("MOV_IMM", DType.I64, Reg("r"), (Imm(-(7 ** 6000)),)), Instr("EXIT")),
                 (RegDecl("r", DType.I64),))
    text = format_program(p)
    assert "-0x" in text
    assert parse_program(text) == p


def test_names_that_are_not_identifiers_are_quoted():
    p = Program("my kernel", (BufferParam("x y", DType.F32, (Affine.of("n m"),), "in"),
                              ScalarParam('q"uote', DType.I32)),
                symbols=("n m",),
                stages=(Stage("stage 0", (Affine.of("n m") - 2,), (1,), (RegDecl("a.b", DType.I64),),
                              body=(Instr("MOV", DType.I64, Reg("a.b"), (Sym("n m"),)), Label("my label"),
                                    Instr("LDG", DType.F32, Reg("a.b"), addr=Addr("x y", Reg("a.b"), -1)),
                                    Instr("BRA", target="my label"))),))
    text = format_program(p)
    assert '.program "my kernel"' in text and '%"a.b"' in text and '$"n m"' in text
    assert parse_program(text) == p


@pytest.mark.parametrize("dim, text", [
    (Affine.of("n") - 2, "n - 2"), (Affine.of("n") * 2, "2*n"), (3 - Affine.of("n"), "-n + 3"),
    (Affine.of("m") * 2 + Affine.of("n") * -3 + 1, "2*m - 3*n + 1"), (Affine.of(0), "0"), (Affine.of(-4), "-4"),
])
def test_affine_dimensions(dim, text):
    p = Program("p", (BufferParam("x", DType.F32, (dim, Affine.of(5)), "in"),), symbols=("m", "n"))
    out = format_program(p)
    assert f"f32[{text}, 5]" in out
    assert parse_program(out) == p
    assert parse_program(out.replace(f"[{text},", f"[{text.replace(' ', '')},")) == p


def test_every_opcode_round_trips():
    kinds = {"d": Reg("d"), "s": Reg("a"), "m": Addr("x", Reg("i"), 2), "l": "L", "p": "pl", "n": 3}
    for op, spec in OPCODES.items():
        fields: dict = {"srcs": tuple(Reg(f"s{k}") for k in range(spec.form.count("s")))}
        for kind, field in (("d", "dst"), ("m", "addr"), ("l", "target"), ("p", "target"), ("n", "count")):
            if kind in spec.form:
                fields[field] = kinds[kind]
        ins = Instr(op, None if spec.types == "none" else DType.F32, mod="lt" if op == "SET" else None,
                    dtype2=DType.I32 if op == "CVT" else None, checked="m" in spec.form,
                    pred=Pred(Reg("p"), True) if op == "BRA" else None, **fields)
        p = _program((Label("L"), ins))
        assert parse_program(format_program(p)) == p, op


def test_header_shapes_and_stage_directives_round_trip():
    p = Program("p", (BufferParam("x", DType.F32, (Affine.of("n"), Affine.of("m")), "in"),
                      BufferParam("s", DType.F64, (), "out"), ScalarParam("k", DType.U8)),
                temps=(BufferParam("t", DType.I16, (Affine.of("n") * 2,), "temp"),), symbols=("n", "m"),
                stages=(Stage("a", (Affine.of("n"), Affine.of("m"), Affine.of(2)), (4, 2, 1),
                              (RegDecl("r", DType.F32), RegDecl("q", DType.F32), RegDecl("z", DType.BOOL)),
                              (MemDecl("sh", DType.F32, 8),), (MemDecl("pl", DType.I64, 4),),
                              (Init("s", 0, 0.0), Init("s", 0, -math.inf)), (Instr("EXIT"),)),
                        Stage("b", (Affine.of(1),), (1,), body=(Instr("EXIT"),))))
    text = format_program(p)
    assert ".param out s: f64[]" in text and ".temp t: i16[2*n]" in text
    assert ".reg %r, %q: f32\n    .reg %z: bool" in text
    assert ".init s[0] = -inf" in text
    assert parse_program(text) == p


def test_format_instr_is_total_for_diagnostics():
    assert format_instr(Instr("ADD", DType.F32, Reg("a"))) == "ADD.f32     %a, ?, ?"
    assert format_instr(Instr("ADD", DType.F32, Reg("a"), (Reg("b"),)), align=False) == "ADD.f32 %a, %b, ?"
    assert format_instr(Instr("NOPE")) == "NOPE"


PREFIX = ".program p\n.symbols n\n.param in x: f32[n]\n.stage s domain [n] block [4]\n.reg %a, %b: f32\n"


@pytest.mark.parametrize("text, line, col, fragment", [
    ("", 1, 1, "expected '.program <name>'"),
    (".stage s domain [n] block [1]", 1, 1, "a program starts with '.program <name>'"),
    (".program p\n.program q", 2, 1, "a second .program"),
    (".program p\n.foo", 2, 1, "unknown directive '.foo'"),
    (".program p\n.param x: f32[n]", 2, 8, "needs a role"),
    (".program p\n.param in x: f33[n]", 2, 14, "unknown type 'f33'"),
    (".program p\n.param in x: f32[n", 2, 19, "expected ',' or ']' in a shape"),
    (".program p\n.param in x: f32[n +]", 2, 21, "expected a dimension"),
    (".program p\n.temp t: f32", 2, 13, "expected a shape"),
    (".program p\n.reg %a: f32", 2, 1, ".reg outside a stage"),
    (".program p\nEXIT", 2, 1, "instruction outside a stage"),
    (PREFIX + ".param in y: f32[n]", 6, 1, "belongs in the program header"),
    (PREFIX + "ADDD.f32 %a, %a, %b", 6, 1, "unknown opcode 'ADDD'; did you mean 'ADD'?"),
    (PREFIX + "ADD.f32 %a, %b", 6, 15, "expected ',' and a source operand"),
    (PREFIX + "ADD.f32 %a, %b, %b, %b", 6, 19, "expected end of instruction"),
    (PREFIX + "ADD.f32.f32.f32 %a, %b, %b", 6, 1, "unexpected suffix .f32"),
    (PREFIX + "MOV.f32 %a, %gid.w", 6, 13, "unknown special register '%gid.w'"),
    (PREFIX + "MOV.f32 %gid.x, %a", 6, 9, "expected a general register"),
    (PREFIX + "MOV.f32 %a, foo", 6, 13, "expected an operand"),
    (PREFIX + "MOV.f32 %a, -true", 6, 14, "expected a number after '-'"),
    (PREFIX + "MOV.f32 %a, nan(0x1)", 6, 13, "not the bit pattern of a NaN"),
    (PREFIX + "MOV.f32 %a, ~", 6, 13, "unexpected character '~'"),
    (PREFIX + "LDG.f32 %a, [x + 1.5]", 6, 18, "expected an index register or integer offset"),
    (PREFIX + "LDG.f32 %a, [x * 2]", 6, 16, "expected '+', '-' or ']'"),
    (PREFIX + "BRA", 6, 4, "expected a label"),
    (PREFIX + 'MOV.f32 %a, "x', 6, 13, "unexpected character"),
    (PREFIX + "MOV.i64 %a, " + "9" * 5000, 6, 13, "integer literal too long"),
])
def test_parse_errors_point_at_the_problem(text, line, col, fragment):
    with pytest.raises(ISAError) as exc:
        parse_program(text, file="k.hasm")
    err = exc.value
    assert fragment in err.message
    assert (err.span.file, err.span.line, err.span.col) == ("k.hasm", line, col)
    assert str(err).startswith(f"k.hasm:{line}:{col}: error:")


def test_parse_error_renders_underlined_excerpt():
    with pytest.raises(ISAError) as exc:
        parse_program(PREFIX + "FMA.f32 %a, %a, %b, %c, %d")
    assert "FMA.f32 %a, %a, %b, %c, %d\n" in str(exc.value) and "^^" in str(exc.value)


def test_format_refuses_ill_typed_programs():
    with pytest.raises(ISAError, match=r"program.stages\[0\].body\[0\].dtype should be DType or None"):
        format_program(_program((Instr("EXIT", "f32"),)))  # type: ignore[arg-type]


def test_parse_rejects_non_text():
    with pytest.raises(ISAError, match="expects the assembly as str"):
        parse_program(b".program p")  # type: ignore[arg-type]
