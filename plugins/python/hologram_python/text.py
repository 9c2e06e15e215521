"""Body lines cut from the module's text, with the file column of every character.

The kernel language reads most Python expressions as they are, so a statement's body
line is its own text. Where the translator must change the text (a folded constant, an
alias of numpy, `return e` as `out = e`, `c[:] = e` as `c = e`), an `Edit` replaces a
range of one line and the replacement's characters point back at the range they
replaced: an error anywhere in the line underlines the file's own text
(`BodyOrigin.columns`).
"""

from __future__ import annotations

from typing import Sequence

import attrs

from hologram_python.module import Source


@attrs.frozen
class Edit:
    """Replace characters [start, end) of file line `line` (0-based columns) by `text`;
    `start == end` inserts `text` before the character at `start`."""

    line: int
    start: int
    end: int
    text: str


@attrs.frozen
class BodyLine:
    """One line of the kernel body: its text, its file line and the file column (1-based)
    of each character, with one more for the column just past its end."""

    text: str
    line: int
    cols: tuple[int, ...]


def cut(src: Source, start: tuple[int, int], end: tuple[int, int], edits: Sequence[Edit] = (),
        prefix: str = "", prefix_at: tuple[int, int] | None = None) -> list[BodyLine]:
    """The body lines of the file text from `start` to `end` ((line, 0-based column)),
    with `edits` applied; continuation lines lose their indentation. `prefix` is put
    before the first line, its characters pointing at `prefix_at` (the `return` of a
    `return e` that became `out = e`, say)."""
    by_line: dict[int, list[Edit]] = {}
    for e in sorted(edits, key=lambda e: (e.line, e.start, e.end)):
        by_line.setdefault(e.line, []).append(e)
    out = []
    for line in range(start[0], end[0] + 1):
        text = src.lines[line - 1]
        a = start[1] if line == start[0] else len(text) - len(text.lstrip(" \t"))
        b = end[1] if line == end[0] else len(text)
        chars: list[str] = []
        cols: list[int] = []
        if line == start[0] and prefix:
            at_line, at_col = prefix_at or start
            lead = _span_cols(src, at_line, at_col, len(prefix))
            chars.extend(prefix)
            cols.extend(lead)
        c = a
        pending = [e for e in by_line.get(line, ()) if a <= e.start <= b]
        while pending or c < b:
            while pending and pending[0].start < c:  # inside a replacement already made
                pending.pop(0)
            if pending and pending[0].start == c:
                e = pending.pop(0)
                chars.extend(e.text)
                if e.end > e.start:  # a replacement: its characters point at what it replaced
                    width = e.end - e.start
                    cols.extend(e.start + 1 + min(k, width - 1) for k in range(len(e.text)))
                    c = e.end
                else:  # an insertion: at the character it comes before
                    cols.extend(e.start + 1 for _ in e.text)
                continue
            if c >= b:
                break
            chars.append(text[c])
            cols.append(c + 1)
            c += 1
        cols.append(b + 1)
        out.append(BodyLine("".join(chars), line, tuple(cols)))
    return out


def _span_cols(src: Source, line: int, col: int, n: int) -> list[int]:
    """n columns pointing at the word that starts at (line, col): a prefix underlines it."""
    text = src.lines[line - 1]
    end = col
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):
        end += 1
    width = max(end - col, 1)
    return [col + 1 + min(k, width - 1) for k in range(n)]
