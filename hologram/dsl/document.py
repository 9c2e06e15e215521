"""The kernel document: what a translator produces from TOML, YAML or JSON.

A `KernelDef` is one kernel as written: its name, version, typed inputs and outputs and
its body text, with enough position information (`BodyOrigin`) that any later stage can
point an error at the exact file, line and column, inside the body too.
"""

from __future__ import annotations

import attrs

from hologram.core.errors import Span
from hologram.core.types import DType, Shape

# The kernel language's version, recorded in bundles: bumped when a document that compiled
# before would now compile to a program that means something else.
DSL_VERSION = 1


@attrs.frozen
class BodyOrigin:
    """Where a kernel's body text sits in its file.

    `lines[k]` is `(file_line, col_offset)` for body line k+1: body column c on that line
    is file column `c + col_offset`. Exact for TOML multi-line strings and YAML block
    scalars; for strings with escape sequences columns are approximate.
    """

    file: str
    source: str = attrs.field(repr=False)
    lines: tuple[tuple[int, int], ...]
    # For a translator that rewrites text (the Python one folds constants, turns `return e`
    # into `out = e`): `columns[k][c - 1]` is the file column of body column c on body line
    # k+1, with one entry more for the column just past the line's end; the offsets in
    # `lines` are then not used for columns. Empty: every line is shifted by its offset.
    columns: tuple[tuple[int, ...], ...] = attrs.field(default=(), repr=False)

    def span(self, line: int, col: int, end_col: int | None = None, end_line: int | None = None) -> Span:
        """The file span of body line `line`, columns [col, end_col) (all 1-based)."""
        if not self.lines:
            return Span(self.file, 1, 1, source=self.source)
        file_line, _ = self.lines[min(max(line, 1), len(self.lines)) - 1]
        if end_line is not None and end_line != line:
            end_file_line, _ = self.lines[min(max(end_line, 1), len(self.lines)) - 1]
            return Span(self.file, file_line, self._column(line, col), end_file_line,
                        None if end_col is None else self._column(end_line, end_col, end=True), source=self.source)
        return Span(self.file, file_line, self._column(line, col), file_line,
                    None if end_col is None else self._column(line, end_col, end=True), source=self.source)

    def _column(self, line: int, col: int, end: bool = False) -> int:
        """The file column of body column `col` on body line `line`; an exclusive end
        column maps through the last column it covers, so a span over rewritten text
        underlines all of the text it replaced."""
        k = min(max(line, 1), len(self.lines)) - 1
        if not self.columns:
            return col + self.lines[k][1]
        table = self.columns[k]
        if end and col > 1:
            at = min(col - 1, len(table)) - 1
            return table[at] + 1 + max(col - 1 - len(table), 0)
        at = min(max(col, 1), len(table)) - 1
        return table[at] + max(col - len(table), 0)


@attrs.frozen
class ParamSpec:
    """An input or output as declared: `x = "f32[n]"`. A scalar has `shape == ()`."""

    name: str
    dtype: DType
    shape: Shape
    span: Span


@attrs.frozen
class KernelDef:
    name: str
    version: str
    summary: str
    inputs: tuple[ParamSpec, ...]
    outputs: tuple[ParamSpec, ...]
    body: str
    origin: BodyOrigin
    span: Span
    reassociate: bool = False
    # what the translator has to say about the kernel, as (label, text) pairs, e.g.
    # ("circuit", "4 ops -> 1 op"): printed by `hologram compile --emit stats` and the
    # bundle build table, kept in a bundle's manifest (docs/plugins.md, "Notes")
    notes: tuple[tuple[str, str], ...] = ()
    # whether the body's temporaries are names its author wrote (a TOML body, a Python
    # function's locals): the front end warns about one nothing reads. False for a body a
    # translator generates from something else (a sigil circuit's r3, s4: the author
    # never saw them, and an unused one is the translator's business, docs/plugins.md)
    authored_temporaries: bool = True
