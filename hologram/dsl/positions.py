"""Where a kernel document's keys and values sit in its source text: the position model.

Every translator builds a tree of `Located` values, which know their key's and value's
`Span` and, for strings, the source offset of every decoded character, so a position
inside a string (a kernel body, a type string) maps back to the exact file line and
column. TOML's reader (toml_reader.py) builds the tree as it reads; PyYAML's nodes give
only the start and end of each scalar (yaml_scalars.py replays a string's characters);
the stdlib's json gives values without positions (locators.py finds them, as `Place`s).

Lines and columns follow `str.splitlines`, the line model `Span.excerpt` renders with.
"""

from __future__ import annotations

import bisect
from typing import Any

import attrs

from hologram.core.errors import Span

Path = tuple[str | int, ...]



@attrs.frozen
class SourceText:
    """A document's text with its line starts: character offsets to (line, column)."""

    file: str
    text: str = attrs.field(repr=False)
    starts: tuple[int, ...] = attrs.field(repr=False)

    @classmethod
    def of(cls, text: str, file: str) -> "SourceText":
        starts, at = [0], 0
        for line in text.splitlines(keepends=True)[:-1]:
            at += len(line)
            starts.append(at)
        return cls(file, text, tuple(starts))

    def pos(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of the character at `offset`."""
        offset = min(max(offset, 0), len(self.text))
        row = bisect.bisect_right(self.starts, offset) - 1
        return row + 1, offset - self.starts[row] + 1

    def span(self, start: int, end: int | None = None) -> Span:
        """The span of characters [start, end); a point when `end` is None."""
        # pos() twice, inlined: the readers make a span of every key and value
        starts, size = self.starts, len(self.text)
        start = min(max(start, 0), size)
        row = bisect.bisect_right(starts, start) - 1
        line, col = row + 1, start - starts[row] + 1
        if end is None or end <= start:
            return Span(self.file, line, col, line, col + 1, source=self.text)
        last = min(end - 1, size)
        if last >= starts[row] and (row + 1 == len(starts) or last < starts[row + 1]):  # on the same line
            return Span(self.file, line, col, line, last - starts[row] + 2, source=self.text)
        end_row = bisect.bisect_right(starts, last) - 1
        return Span(self.file, line, col, end_row + 1, last - starts[end_row] + 2, source=self.text)


@attrs.frozen(eq=False)
class Located:
    """A document value with its position.

    `kind` is the format's own word for the value's type ("string", "table", "mapping",
    "object", "integer", ...); `value` is a str, number, bool, None, a `dict[str, Located]`
    (tables) or a `tuple[Located, ...]` (arrays). `chars[i]` is the source offset of the
    string's i-th character, with one extra entry just past its end.
    """

    kind: str
    value: Any
    span: Span
    key_span: Span | None = None
    chars: tuple[int, ...] | None = attrs.field(default=None, repr=False)
    src: SourceText | None = attrs.field(default=None, repr=False)

    @property
    def is_table(self) -> bool:
        return isinstance(self.value, dict)

    @property
    def is_array(self) -> bool:
        return isinstance(self.value, tuple)

    @property
    def is_string(self) -> bool:
        return self.kind == "string" and isinstance(self.value, str)

    def sub_span(self, start: int, end: int) -> Span:
        """The file span of characters [start, end) of this string value."""
        if self.chars is None or self.src is None:
            return self.span
        last = len(self.chars) - 1
        a = self.chars[min(max(start, 0), last)]
        b = self.chars[min(max(end - 1, 0), last)] + 1 if end > start else a
        return self.src.span(a, b)

    def line_starts(self) -> tuple[tuple[int, int], ...]:
        """`(file_line, col_offset)` for each "\\n"-separated line of this string, as
        `BodyOrigin.lines` wants them."""
        text = self.value if isinstance(self.value, str) else ""
        firsts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
        if self.chars is None or self.src is None:
            return tuple((self.span.line, self.span.col - 1) for _ in firsts)
        out = []
        for first in firsts:
            line, col = self.src.pos(self.chars[first])
            out.append((line, col - 1))
        return tuple(out)


@attrs.frozen
class Place:
    """What a locator found for one path: key and value offsets, and for a string its
    decoded text and per-character offsets (see `Located.chars`)."""

    key: tuple[int, int] | None
    value: tuple[int, int]
    text: str | None = None
    chars: tuple[int, ...] | None = None
