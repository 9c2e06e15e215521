"""YAML string scalars: the source offset of every decoded character.

PyYAML's nodes give only the start and end of a scalar; a position inside a string (a
kernel body, a type string) needs each character's offset. This replays PyYAML's scan of
plain, quoted and block scalars (line folding, escapes, chomping, indentation), and
reports nothing rather than a wrong offset when the replay does not reproduce PyYAML's
value exactly.
"""

from __future__ import annotations

from typing import Any

_YAML_BREAKS = "\r\n\x85\u2028\u2029"
_YAML_ESCAPES = {"0": "\0", "a": "\x07", "b": "\x08", "t": "\t", "\t": "\t", "n": "\n", "v": "\x0b",
                 "f": "\x0c", "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\",
                 "N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029"}
_YAML_HEX = {"x": 2, "u": 4, "U": 8}


def _yaml_break(text: str, i: int) -> tuple[str, int]:
    """PyYAML's reading of the line break at `i`: its value and the offset after it."""
    if text.startswith("\r\n", i):
        return "\n", i + 2
    return ("\n" if text[i] in "\r\n\x85" else text[i]), i + 1


class _Chars:
    """Decoded characters, each with the source offset it came from."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.offs: list[int] = []

    def put(self, s: str, at: int) -> None:
        self.out.extend(s)
        self.offs.extend([at] * len(s))

    def result(self, end: int) -> tuple[str, tuple[int, ...]]:
        return "".join(self.out), tuple(self.offs) + (end,)


def _yaml_fold(text: str, i: int, stop: int, ws: str) -> tuple[list[tuple[str, int]], int]:
    """The line breaks of the blank lines after a folded break, and where content resumes."""
    breaks = []
    while True:
        while i < stop and text[i] in ws:
            i += 1
        if i < stop and text[i] in _YAML_BREAKS:
            value, after = _yaml_break(text, i)
            breaks.append((value, i))
            i = after
        else:
            return breaks, i


def _yaml_flow(text: str, start: int, end: int, style: str | None) -> tuple[str, tuple[int, ...]]:
    """Replay PyYAML's scan of a plain, 'single' or "double" quoted scalar."""
    quoted = style in ("'", '"')
    ws = " \t" if quoted else " "
    i, stop = (start + 1, end - 1) if quoted else (start, end)
    c = _Chars()
    while i < stop:
        ch = text[i]
        if ch in ws or ch in _YAML_BREAKS:
            j = i
            while j < stop and text[j] in ws:
                j += 1
            if j < stop and text[j] in _YAML_BREAKS:  # a line fold: one break is a space
                value, after = _yaml_break(text, j)
                breaks, i = _yaml_fold(text, after, stop, ws)
                if value != "\n":
                    c.put(value, j)
                elif not breaks:
                    c.put(" ", j)
                for b, at in breaks:
                    c.put(b, at)
            else:
                for k in range(i, j):
                    c.put(text[k], k)
                i = j
        elif style == '"' and ch == "\\":
            e = text[i + 1]
            if e in _YAML_BREAKS:  # an escaped line break joins the lines without a space
                breaks, i = _yaml_fold(text, _yaml_break(text, i + 1)[1], stop, " \t")
                for b, at in breaks:
                    c.put(b, at)
            elif e in _YAML_HEX:
                width = _YAML_HEX[e]
                c.put(chr(int(text[i + 2:i + 2 + width], 16)), i)
                i += 2 + width
            else:
                c.put(_YAML_ESCAPES[e], i)
                i += 2
        else:
            c.put(ch, i)
            i += 2 if (style == "'" and ch == "'") else 1  # '' is a quote
    return c.result(stop)


def _yaml_block(text: str, i: int, indent: int | None, folded: bool,
                chomp: bool | None) -> tuple[str, tuple[int, ...]]:
    """Replay PyYAML's scan of a block scalar's content starting at line start `i`; with
    `indent` None the indentation is detected as PyYAML does."""
    n, c = len(text), _Chars()

    def breaks_at(i: int) -> tuple[list[tuple[str, int]], int, int]:
        found, col = [], 0
        while col < indent and i < n and text[i] == " ":
            i, col = i + 1, col + 1
        while i < n and text[i] in _YAML_BREAKS:
            value, after = _yaml_break(text, i)
            found.append((value, i))
            i, col = after, 0
            while col < indent and i < n and text[i] == " ":
                i, col = i + 1, col + 1
        return found, i, col

    if indent is None:
        found, col, top = [], 0, 0
        while i < n and (text[i] == " " or text[i] in _YAML_BREAKS):
            if text[i] == " ":
                i, col = i + 1, col + 1
                top = max(top, col)
            else:
                value, after = _yaml_break(text, i)
                found.append((value, i))
                i, col = after, 0
        indent = max(1, top)
    else:
        found, i, col = breaks_at(i)
    line_break = ("", i)
    while col == indent and i < n:
        for b in found:
            c.put(*b)
        leading_text = text[i] not in " \t"
        j = i
        while j < n and text[j] not in _YAML_BREAKS:
            j += 1
        for k in range(i, j):
            c.put(text[k], k)
        if j < n:
            value, i = _yaml_break(text, j)
            line_break = (value, j)
        else:
            line_break, i = ("", j), j
        found, i, col = breaks_at(i)
        if not (col == indent and i < n):
            break
        if folded and line_break[0] == "\n" and leading_text and text[i] not in " \t":
            if not found:
                c.put(" ", line_break[1])
        else:
            c.put(*line_break)
    if chomp is not False:
        c.put(*line_break)
    if chomp is True:
        for b in found:
            c.put(*b)
    return c.result(i)


def yaml_scalar_chars(text: str, node: Any) -> tuple[int, ...] | None:
    """Per-character source offsets of a YAML string scalar, or None when the replay does
    not reproduce PyYAML's value exactly."""
    start, end = node.start_mark.index, node.end_mark.index
    while start < end and text[start] in "&!#":  # skip an anchor, a tag, or a comment after them
        stop = " \t" if text[start] != "#" else ""
        while start < end and text[start] not in stop + _YAML_BREAKS:
            start += 1
        while start < end and text[start] in " \t" + _YAML_BREAKS:
            start += 1
    try:
        if node.style not in ("|", ">"):
            decoded, chars = _yaml_flow(text, start, end, node.style)
            return chars if decoded == node.value else None
        i, chomp, explicit = start + 1, None, False
        while i < len(text) and text[i] in "+-123456789":
            chomp, explicit = ((text[i] == "+") if text[i] in "+-" else chomp), explicit or text[i].isdigit()
            i += 1
        while i < len(text) and text[i] not in _YAML_BREAKS:
            i += 1
        i = _yaml_break(text, i)[1] if i < len(text) else i
        detected = _yaml_block(text, i, None, node.style == ">", chomp)
        if not explicit and detected[0] == node.value:
            return detected[1]
        # An explicit indentation indicator is relative to the parent's indentation, which a
        # node does not record, and content indented no deeper than the parent makes the
        # scalar end at once: try each indentation up to one past the first line's.
        top = len(text[i:].lstrip(_YAML_BREAKS)) - len(text[i:].lstrip(_YAML_BREAKS).lstrip(" "))
        for indent in range(1, top + 2):
            decoded, chars = _yaml_block(text, i, indent, node.style == ">", chomp)
            if decoded == node.value:
                return chars
        return None
    except (IndexError, KeyError, ValueError):
        return None
