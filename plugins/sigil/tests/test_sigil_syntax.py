"""The circuit language: every spelling parsed and written back, every mistake a
CompileError at its line and column, and no input that crashes the parser."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hologram.core.errors import CompileError, DocumentError
from hologram_sigil.api import parse
from hologram_sigil.cases import circuits
from hologram_sigil.circuit import VARIANTS, Gen, Par, Seq, count_ops, format_circuit
from hologram_sigil.syntax import MAX_NESTING, MAX_OPS, SPELLINGS, parse_file
from hologram_sigil.translator import own_origin


def test_every_generator_spelling():
    assert parse("mark@c21") == Gen("mark", "", (21,))
    assert parse("copy@c05->c06") == Gen("copy", "", (5, 6))
    assert parse("swap@c01<->c02") == Gen("swap", "", (1, 2))
    assert parse("quote@c05 . evaluate@c05") == Seq((Gen("quote", "", (5,)), Gen("evaluate", "", (5,))))
    assert parse("merge@c00[c01,c02]") == Gen("merge", "add", (0, 1, 2))  # the seeds' plain merge adds
    assert parse("split@c00[c01,c02]") == Gen("split", "sub", (0, 1, 2))  # and split subtracts
    assert parse("merge_exp@c03[c04]") == Gen("merge", "exp", (3, 4))
    assert parse("reduce_sum@c00->c01") == Gen("reduce", "sum", (0, 1))
    for family, variants in VARIANTS.items():
        for v in variants:
            unary = family == "merge" and v in ("abs", "neg", "exp", "log", "sqrt", "sigmoid", "tanh", "relu")
            text = f"{family}_{v}@c07->c08" if family == "reduce" else \
                f"{family}_{v}@c07[c08]" if unary else f"{family}_{v}@c07[c08,c09]"
            assert format_circuit(parse(text)) == text
    assert len(SPELLINGS) == 5 + sum(len(v) for v in VARIANTS.values()) + 2  # + the plain merge and split


def test_composition_and_layout():
    # `.` binds tighter than `||`; whitespace, newlines and comments go anywhere
    node = parse("mark@c01 . mark@c02 || mark@c03  # a comment\n . copy@c3->c4")
    assert node == Par((Seq((Gen("mark", "", (1,)), Gen("mark", "", (2,)))),
                        Seq((Gen("mark", "", (3,)), Gen("copy", "", (3, 4))))))
    assert parse("(mark@c01 || mark@c02) . id") == Seq((Par((Gen("mark", "", (1,)), Gen("mark", "", (2,)))), Seq(())))
    assert format_circuit(parse("(mark@c01 || mark@c02) . mark@c3")) == "(mark@c01 || mark@c02) . mark@c03"
    assert count_ops(parse("id . (id)")) == 0
    assert parse("c5" and "mark@c5") == parse("mark@c05")  # two digits are the canonical spelling, not required


@settings(max_examples=100)
@given(circuits())
def test_text_round_trip(node):
    assert parse(format_circuit(node)) == node or _flat(parse(format_circuit(node))) == _flat(node)


def _flat(node):
    """Sequencing is associative: `a . (b . c)` and `a . b . c` are one circuit."""
    if isinstance(node, Gen):
        return node
    if isinstance(node, Seq):
        out = []
        for s in node.steps:
            f = _flat(s)
            out.extend(f.steps if isinstance(f, Seq) else [f])
        return Seq(tuple(out)) if len(out) != 1 else out[0]
    return Par(tuple(_flat(b) for b in node.branches))


ERRORS = [
    # (circuit, line, column, end column, in the message)
    ("merg@c00[c01,c02]", 1, 1, 5, "unknown generator 'merg'; did you mean 'merge'?"),
    ("merge_sub@c00[c01,c02]", 1, 1, 10, "merge has no variant 'sub'; sub is a variant of split: split_sub"),
    ("reduce@c00->c01", 1, 1, 7, "reduce needs a variant: reduce_sum"),
    ("copy@c05", 1, 6, 9, "copy takes a source and a target: copy@c05->c06"),
    ("swap@c01->c02", 1, 6, 14, "swap takes two classes to exchange: swap@c01<->c02"),
    ("mark@c01[c02]", 1, 6, 14, "mark takes one class: mark@c21"),
    ("merge_exp@c00[c01,c02]", 1, 11, 23, "merge_exp reads one class into its target, got 2: merge_exp@c00[c01]"),
    ("merge_mul@c00[c01]", 1, 11, 19, "merge_mul reads two classes into its target, got 1"),
    ("mark@c96", 1, 6, 9, "there is no class c96: the classes are c00 to c95"),
    ("mark@C05", 1, 6, 9, "unexpected 'C05'; expected a class (c00 to c95)"),
    ("copy@c05-c06", 1, 9, 10, "unexpected character '-'"),
    ("mark@c21 mark@c22", 1, 10, 14, "unexpected 'mark'"),
    ("mark@c21 .", 1, 11, 12, "the circuit ends too early; expected a generator"),
    ("(mark@c01", 1, 10, 11, "the circuit ends too early; expected ')'"),
    ("", 1, 1, 2, "the circuit ends too early"),
    ("mark@c01 ;\n mark@c02", 1, 10, 11, "unexpected character ';'"),
    ("copy@c01->c02\n  . merge_add@c03[c01,c99]", 2, 23, 26, "there is no class c99"),
    ("copy@c05->c06 || mark@c06", 1, 18, 26, "c06 is written by two branches of '||' (the other at line 1, column 1)"),
    ("quote@c01 || quote@c01", 1, 14, 23, "the quote slot of c01 is written by two branches"),
    ("mark@c05 . evaluate@c05", 1, 12, 24, "evaluate@c05 restores the value quote@c05 saved, but no quote@c05"),
    ("(quote@c05 || mark@c01) . evaluate@c05 . evaluate@c06", 1, 42, 54, "evaluate@c06 restores"),
]


@pytest.mark.parametrize("text, line, col, end, message", ERRORS)
def test_mistakes_are_compile_errors_at_their_place(text, line, col, end, message):
    with pytest.raises(CompileError) as e:
        parse(text, file="c.sigil")
    span = e.value.span
    assert message in e.value.message
    assert (span.file, span.line, span.col, span.end_col) == ("c.sigil", line, col, end)
    assert str(e.value).startswith(f"c.sigil:{line}:{col}: error:")


def test_mistakes_have_hints():
    for text, hint in [("copy@c05-c06", "'->' points from a source class"), ("mark@c01, mark@c02", "compose"),
                       ("merge_sub@c00[c01,c02]", "merge_VARIANT"), ("copy@c05", "one class is how mark"),
                       ("mark@c01 mark@c02", "compose generators with '.'"), ("mark@C01", "lower case")]:
        with pytest.raises(CompileError) as e:
            parse(text)
        assert hint in (e.value.hint or ""), (text, e.value.hint)


def test_limits():
    too_many = " . ".join(["mark@c01"] * (MAX_OPS + 1))
    with pytest.raises(CompileError, match=f"more than {MAX_OPS} generators") as e:
        parse(too_many)
    assert e.value.span.col == 1 + MAX_OPS * len("mark@c01 . ")
    deep = "(" * (MAX_NESTING + 1) + "mark@c01" + ")" * (MAX_NESTING + 1)
    with pytest.raises(CompileError, match="nested more than"):
        parse(deep)
    assert count_ops(parse("(" * MAX_NESTING + "mark@c01" + ")" * MAX_NESTING)) == 1


def test_sigil_files():
    text = ('# two kernels\nkernel first 1.2.0 "the first"\n  mark@c00 . mark@c00\n'
            'kernel second\n  copy@c01->c02\n')
    first, second = parse_file(text, own_origin(text, "two.sigil"))
    assert (first.name, first.version, first.summary, format_circuit(first.circuit)) == \
        ("first", "1.2.0", "the first", "mark@c00 . mark@c00")
    assert (second.name, second.version, second.summary, second.circuit) == ("second", None, "", Gen("copy", "", (1, 2)))
    assert (first.span.line, first.span.col) == (2, 1)
    bare, = parse_file("mark@c01", own_origin("mark@c01", "one.sigil"))
    assert bare.name is None and bare.circuit == Gen("mark", "", (1,))
    with pytest.raises(DocumentError, match="invalid version '1.02.0' for kernel 'k'") as e:
        parse_file("kernel k 1.02.0\nmark@c01", own_origin("kernel k 1.02.0\nmark@c01", "v.sigil"))
    assert (e.value.span.line, e.value.span.col) == (1, 10)
    with pytest.raises(CompileError, match="expected '@'") as e:  # a header needs a circuit
        parse_file("kernel a\nkernel b mark@c01", own_origin("kernel a\nkernel b mark@c01", "h.sigil"))
    assert e.value.span.line == 2


ALPHABET = st.sampled_from(list("cm@->[],.|()<#\n ") + ["mark", "copy", "swap", "merge_add", "c05", "c96", "id",
                                                         "kernel", "1.0.0", '"', "reduce_sum", "quote", "evaluate"])


@settings(max_examples=300)
@given(st.lists(ALPHABET, max_size=30).map("".join))
def test_no_text_crashes_the_parser(text):
    for parser in (lambda t: parse(t), lambda t: parse_file(t, own_origin(t, "f.sigil"))):
        try:
            parser(text)
        except (CompileError, DocumentError) as exc:
            assert exc.span is not None and exc.span.line >= 1 and exc.span.col >= 1
