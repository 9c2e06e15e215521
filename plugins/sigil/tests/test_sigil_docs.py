"""docs/sigil.md keeps up with the plugin: every generator and rule is there, and the
examples it shows (canonical forms, a kernel body, error messages) are what the code does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hologram.core.errors import CompileError
from hologram_sigil import canonicalize, parse
from hologram_sigil.canon import _RULES
from hologram_sigil.circuit import WIDTH, format_circuit
from hologram_sigil.lower import lower
from hologram_sigil.syntax import SPELLINGS

DOC = (Path(__file__).resolve().parents[3] / "docs" / "sigil.md").read_text()


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_generator_is_documented(spelling):
    assert re.search(rf"`{spelling}@", DOC), f"docs/sigil.md lacks {spelling}"


@pytest.mark.parametrize("rule", _RULES)
def test_every_rule_is_documented(rule):
    assert f"| {rule} |" in DOC, f"docs/sigil.md's rule table lacks {rule}"


def test_the_body_shown_is_the_body_compiled():
    shown = DOC[DOC.index('$ hologram sigil "reduce_max'):]
    circuit = shown[len('$ hologram sigil "'):shown.index('" --body')]
    start = shown.index("\nbody\n") + len("\nbody\n")
    body = shown[start:shown.index("```", start)]
    assert lower(canonicalize(circuit)[0], WIDTH).text == "".join(line[4:] + "\n" for line in body.splitlines())


def test_the_seeds_example_is_as_documented():
    node, report = canonicalize("copy@c05->c06 . mark@c21 . copy@c05->c06 . mark@c21")
    assert f"canonical  {format_circuit(node)}" in DOC
    assert f"{report.note()}; rules: {report.fired()}" in DOC


def test_the_error_table():
    table = DOC[DOC.index("| circuit | error |"):DOC.index("A circuit has at most")]
    rows = [r for r in table.splitlines()[2:] if r.startswith("| `")]
    assert len(rows) >= 10
    for row in rows:
        circuit, error = (cell.strip() for cell in row.strip("|").split("` |"))
        circuit = circuit.lstrip("`").replace("\\|", "|")
        message = error.split(" (hint")[0].replace("\\|", "|").split("...")[0].strip()
        with pytest.raises(CompileError) as e:
            parse(circuit)
        assert e.value.message.startswith(message), (circuit, e.value.message)
