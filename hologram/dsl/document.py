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

    def span(self, line: int, col: int, end_col: int | None = None, end_line: int | None = None) -> Span:
        """The file span of body line `line`, columns [col, end_col) (all 1-based)."""
        if not self.lines:
            return Span(self.file, 1, 1, source=self.source)
        file_line, off = self.lines[min(max(line, 1), len(self.lines)) - 1]
        if end_line is not None and end_line != line:
            end_file_line, end_off = self.lines[min(max(end_line, 1), len(self.lines)) - 1]
            return Span(self.file, file_line, col + off, end_file_line,
                        None if end_col is None else end_col + end_off, source=self.source)
        return Span(self.file, file_line, col + off, file_line,
                    None if end_col is None else end_col + off, source=self.source)


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
