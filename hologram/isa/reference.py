"""docs/isa.md's instruction tables, generated from the op table.

docs/isa.md marks each table with the groups it lists:

    <!-- opcode-table: transcendental math -->
    | opcode | form | types | semantics |
    ...
    <!-- /opcode-table -->

`with_tables(text)` is the document with every marked table regenerated from
`hologram.isa.opcodes.OPCODES`; tests/isa/test_reference.py checks that docs/isa.md is
its own regeneration, so the reference cannot drift from the table. After changing the
table, rewrite the document with

    python -m hologram.isa.reference docs/isa.md
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from hologram.core.errors import HologramError
from hologram.isa.opcodes import GROUPS, OPCODES, OpSpec

TABLE = re.compile(r"(<!-- opcode-table: ([^>]*?) -->\n)(.*?)(<!-- /opcode-table -->)", re.S)
_OPERANDS = {"d": "%d", "m": "[buf + %i + k]", "l": "L", "p": "p", "n": "n"}


def syntax(spec: OpSpec) -> str:
    """How the reference writes the instruction: `ADD.T %d, a, b`."""
    if spec.syntax:
        return spec.syntax
    sources = iter("abc")
    operands = [next(sources) if kind == "s" else _OPERANDS[kind] for kind in spec.form]
    head = spec.name + ("" if spec.types == "none" else ".T")
    return f"{head} {', '.join(operands)}" if operands else head


def row(spec: OpSpec) -> str:
    form = " ".join(spec.form) or "—"
    types = "—" if spec.types == "none" else spec.types
    return f"| `{syntax(spec)}`{' ≈' if spec.approx else ''} | {form} | {types} | {spec.doc} |"


def table(groups: list[str]) -> str:
    """The markdown table of the instructions of `groups`, in the op table's order."""
    unknown = [g for g in groups if g not in GROUPS]
    if unknown or not groups:
        raise HologramError(f"docs/isa.md: opcode-table names groups {unknown or groups}; expected some of "
                            f"{', '.join(GROUPS)}")
    rows = [row(spec) for spec in OPCODES.values() if spec.group in groups]
    return "\n".join(["| opcode | form | types | semantics |", "|---|---|---|---|", *rows]) + "\n"


def with_tables(text: str) -> str:
    """`text` with every marked opcode table regenerated."""
    return TABLE.sub(lambda m: m.group(1) + table(m.group(2).split()) + m.group(4), text)


def listed(text: str) -> set[str]:
    """The groups the marked tables of `text` list."""
    return {g for m in TABLE.finditer(text) for g in m.group(2).split()}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m hologram.isa.reference docs/isa.md", file=sys.stderr)
        return 2
    path = Path(argv[0])
    text = path.read_text(encoding="utf-8")
    missing = set(GROUPS) - listed(text)
    if missing:
        print(f"{path}: no opcode-table lists the group(s) {', '.join(sorted(missing))}", file=sys.stderr)
        return 1
    new = with_tables(text)
    if new != text:
        path.write_text(new, encoding="utf-8")
        print(f"{path}: tables regenerated")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
