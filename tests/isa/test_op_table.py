"""The op table is the one declaration of every instruction: the reference in docs/isa.md
is generated from it, and what the front end, the lowering, the verifier, the
interpreter and the test kit know of an instruction is read from it."""

from __future__ import annotations

import pytest

from hologram.core.errors import HologramError
from hologram.core.semantics import ORACLE
from hologram.dsl.functions import FUNCTIONS
from hologram.dsl.schema import RESERVED
from hologram.ir import OPS
from hologram.isa import reference
from hologram.isa.opcodes import EFFECTS, GROUPS, OPCODES, SOURCE_KINDS, TYPE_CLASSES, ir_ops
from hologram.lower.expr import DIRECT
from hologram.testing.exprgen import VOCABULARY
from hologram.testing.isa_strategies import VALUE_OPS
from hologram.testing.precision import APPROX

from repo_paths import DOCS

ISA_MD = DOCS / "isa.md"


def test_the_isa_reference_tables_are_the_op_table():
    text = ISA_MD.read_text(encoding="utf-8")
    assert reference.listed(text) == set(GROUPS), "docs/isa.md: every group has one opcode-table"
    assert reference.with_tables(text) == text, (
        "docs/isa.md's opcode tables differ from the op table: run `python -m hologram.isa.reference docs/isa.md`")


def test_the_generator_rewrites_a_drifted_table_and_refuses_a_missing_group(tmp_path, capsys):
    text = ISA_MD.read_text(encoding="utf-8")
    drifted = tmp_path / "isa.md"
    drifted.write_text(text.replace("| `SUB.T %d, a, b` | d s s | num | `a - b` |\n", ""), encoding="utf-8")
    assert reference.main([str(drifted)]) == 0 and drifted.read_text(encoding="utf-8") == text
    incomplete = tmp_path / "partial.md"
    incomplete.write_text(text.replace("<!-- opcode-table: pool -->", "<!-- pools -->"), encoding="utf-8")
    assert reference.main([str(incomplete)]) == 1
    assert "no opcode-table lists the group(s) pool" in capsys.readouterr().err
    with pytest.raises(HologramError, match="opcode-table names groups \\['vector'\\]"):
        reference.table(["vector"])


@pytest.mark.parametrize("name", sorted(OPCODES))
def test_every_entry_is_complete_and_read_where_it_matters(name):
    spec = OPCODES[name]
    assert spec.group in GROUPS and spec.doc and spec.types in (*TYPE_CLASSES, "none")
    assert spec.effects <= EFFECTS.keys() and set(spec.sources) <= SOURCE_KINDS.keys()
    assert len(spec.sources) == spec.form.count("s") and spec.modifier in (None, "compare", "reassoc")
    if spec.pure:  # a value instruction: its reference semantics, drawn by the ISA generator
        assert spec.semantics is not None and name in VALUE_OPS
    assert (name in APPROX) == spec.approx
    for ir_op in spec.lowers:  # the IR has the op, and the lowering maps it here
        assert ir_op in OPS and DIRECT[ir_op] is spec
    for f in spec.dsl:  # a DSL function of the instruction's name, reserved, with an oracle, drawn by exprgen
        fn = FUNCTIONS[f.name]
        assert (fn.kind, fn.op, fn.ufunc) == ("elementwise", name, f.ufunc) and RESERVED[f.name] == "a function"
        assert f.name in ORACLE and VOCABULARY[f.name].arity == spec.arity


def test_each_ir_op_lowers_to_one_instruction():
    owners = [ir for spec in OPCODES.values() for ir in spec.lowers]
    assert len(owners) == len(set(owners)) == len(ir_ops())
