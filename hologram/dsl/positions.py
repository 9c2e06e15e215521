"""Where every key and value of a kernel document sits in its source text.

The stdlib parsers (tomllib, json) give values without positions, and PyYAML's nodes give
only the start and end of each scalar. This module turns a parsed document into a tree of
`Located` values that also know their key's and value's `Span`, and, for strings, the
source offset of every decoded character, so a position inside a string (a kernel body,
a type string) maps back to the exact file line and column.

The TOML and JSON locators rescan text the real parser has already accepted, so they
only need to find boundaries, never to diagnose; their decoding of each string is checked
against the parser's value, and a disagreement degrades that string to its start position
instead of reporting a wrong one. YAML scalars are replayed the same way PyYAML scans them.

Lines and columns follow `str.splitlines`, the line model `Span.excerpt` renders with.
"""

from __future__ import annotations

import bisect
from typing import Any, Callable, Container

import attrs

from hologram.core.errors import DocumentError, Span

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
        line, col = self.pos(start)
        if end is None or end <= start:
            return Span(self.file, line, col, line, col + 1, source=self.text)
        end_line, end_col = self.pos(end - 1)
        return Span(self.file, line, col, end_line, end_col + 1, source=self.text)


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


# --- TOML ---------------------------------------------------------------------------

_BARE_KEY = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_TOML_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", "e": "\x1b",
                 '"': '"', "\\": "\\"}
_TOML_HEX = {"x": 2, "u": 4, "U": 8}


class _TomlScanner:
    """Finds keys and values in TOML text that tomllib has accepted.

    Runs on tomllib's own view of the text (CRLF folded to LF); `shift` maps those
    offsets back to the original text.
    """

    def __init__(self, src: str, shift: Callable[[int], int]):
        self.src, self.shift, self.i = src, shift, 0
        self.places: dict[Path, Place] = {}
        self.explicit: set[Path] = set()
        self.arrays: dict[Path, int] = {}  # array-of-tables path -> entries so far

    def run(self) -> dict[Path, Place]:
        src, table = self.src, ()
        while True:
            self.skip(" \t\n")
            if self.i >= len(src):
                return self.places
            if src[self.i] == "#":
                self.skip_comment()
            elif src[self.i] == "[":
                table = self.header()
            else:
                self.keyval(table)

    # lexical helpers
    def skip(self, chars: Container[str]) -> None:
        while self.i < len(self.src) and self.src[self.i] in chars:
            self.i += 1

    def skip_comment(self) -> None:
        end = self.src.find("\n", self.i)
        self.i = len(self.src) if end < 0 else end

    def skip_blank(self) -> None:
        """Whitespace, newlines and comments (inside arrays)."""
        while True:
            self.skip(" \t\n")
            if self.i < len(self.src) and self.src[self.i] == "#":
                self.skip_comment()
            else:
                return

    def record(self, path: Path, key: tuple[int, int] | None, value: tuple[int, int],
               text: str | None = None, chars: list[int] | None = None, implicit: bool = False) -> None:
        if path in self.explicit or (implicit and path in self.places):
            return
        if not implicit:
            self.explicit.add(path)
        sh = self.shift
        self.places[path] = Place(
            None if key is None else (sh(key[0]), sh(key[1])), (sh(value[0]), sh(value[1])), text,
            None if chars is None else tuple(sh(c) for c in chars))

    # structure
    def key(self) -> list[tuple[str, int, int]]:
        parts = []
        while True:
            self.skip(" \t")
            start = self.i
            if self.src[self.i] in "\"'":
                name, _ = self.string()
            else:
                self.skip(_BARE_KEY)
                name = self.src[start:self.i]
            parts.append((name, start, self.i))
            self.skip(" \t")
            if self.i < len(self.src) and self.src[self.i] == ".":
                self.i += 1
            else:
                return parts

    def header(self) -> Path:
        start, many = self.i, self.src.startswith("[[", self.i)
        self.i += 2 if many else 1
        parts = self.key()
        self.i += 2 if many else 1
        path: Path = ()
        for name, a, b in parts[:-1]:
            path += (name,)
            self.record(path, (a, b), (start, self.i), implicit=True)
            if path in self.arrays:
                path += (self.arrays[path] - 1,)
        name, a, b = parts[-1]
        path += (name,)
        if many:
            self.record(path, (a, b), (start, self.i), implicit=True)
            self.arrays[path] = self.arrays.get(path, 0) + 1
            path += (self.arrays[path] - 1,)
        self.record(path, (a, b), (start, self.i))
        return path

    def keyval(self, table: Path) -> None:
        parts = self.key()
        self.i += 1  # '='
        self.skip(" \t")
        path = table
        for name, a, b in parts[:-1]:
            path += (name,)
            self.record(path, (a, b), (a, b), implicit=True)
        name, a, b = parts[-1]
        self.value(path + (name,), (a, b))

    def value(self, path: Path, key: tuple[int, int] | None) -> None:
        src, start = self.src, self.i
        c = src[start]
        if c in "\"'":
            text, chars = self.string()
            self.record(path, key, (start, self.i), text, chars)
            return
        if c == "[":
            self.i += 1
            index = 0
            while True:
                self.skip_blank()
                if src[self.i] == "]":
                    break
                self.value(path + (index,), None)
                index += 1
                self.skip_blank()
                if src[self.i] == ",":
                    self.i += 1
            self.i += 1
        elif c == "{":
            self.i += 1
            while True:
                self.skip_blank()
                if src[self.i] == "}":
                    break
                self.keyval(path)
                self.skip_blank()
                if src[self.i] == ",":
                    self.i += 1
            self.i += 1
        else:  # number, boolean, date-time: runs to a delimiter (a date-time may hold a space)
            end = start
            while end < len(src) and src[end] not in ",]}\n#":
                end += 1
            while src[end - 1] in " \t":
                end -= 1
            self.i = end
        self.record(path, key, (start, self.i))

    # strings
    def string(self) -> tuple[str, list[int]]:
        """Decode the string at `i`: its text and each character's offset (+ the end)."""
        src, i = self.src, self.i
        quote = src[i]
        if src.startswith(quote * 3, i):
            return self.multiline(quote)
        out: list[str] = []
        offs: list[int] = []
        i += 1
        while src[i] != quote:
            if quote == '"' and src[i] == "\\":
                ch, after = self.escape(i)
                out.append(ch)
                offs.append(i)
                i = after
            else:
                out.append(src[i])
                offs.append(i)
                i += 1
        offs.append(i)
        self.i = i + 1
        return "".join(out), offs

    def multiline(self, quote: str) -> tuple[str, list[int]]:
        src, n = self.src, len(self.src)
        i = self.i + 3
        if src.startswith("\n", i):  # a newline right after the opening delimiter is trimmed
            i += 1
        out: list[str] = []
        offs: list[int] = []
        while True:
            c = src[i]
            if c == quote and src.startswith(quote * 3, i):
                run = 3
                while run < 5 and i + run < n and src[i + run] == quote:
                    run += 1
                out.extend(quote * (run - 3))  # up to two quotes may end the content
                offs.extend(range(i, i + run - 3))
                offs.append(i + run - 3)
                self.i = i + run
                return "".join(out), offs
            if quote == '"' and c == "\\":
                j = i + 1
                while j < n and src[j] in " \t":
                    j += 1
                if j < n and src[j] == "\n":  # line-ending backslash: drop the break and indentation
                    while j < n and src[j] in " \t\n":
                        j += 1
                    i = j
                    continue
                ch, after = self.escape(i)
                out.append(ch)
                offs.append(i)
                i = after
                continue
            out.append(c)
            offs.append(i)
            i += 1

    def escape(self, i: int) -> tuple[str, int]:
        e = self.src[i + 1]
        if e in _TOML_HEX:
            width = _TOML_HEX[e]
            return chr(int(self.src[i + 2:i + 2 + width], 16)), i + 2 + width
        return _TOML_ESCAPES.get(e, e), i + 2


def toml_view(text: str) -> tuple[str, Callable[[int], int]]:
    """The text tomllib actually parses (BOM removed, CRLF folded to LF) and a function
    mapping offsets in it back to offsets in `text`."""
    bom = 1 if text.startswith("\ufeff") else 0
    body = text[bom:]
    folded: list[int] = []  # positions, in the folded text, of line feeds that were CRLF
    at = body.find("\r\n")
    while at >= 0:
        folded.append(at - len(folded))
        at = body.find("\r\n", at + 2)
    return body.replace("\r\n", "\n"), lambda offset: offset + bom + bisect.bisect_left(folded, offset)


def toml_places(text: str) -> dict[Path, Place]:
    """Positions of every key and value in `text`, which tomllib has accepted (offsets
    into `text` itself)."""
    return _TomlScanner(*toml_view(text)).run()


# --- JSON ---------------------------------------------------------------------------

_JSON_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class _JsonScanner:
    """Finds keys and values in JSON text that json.loads has accepted; reports duplicate
    keys (which json.loads silently resolves to the last)."""

    def __init__(self, src: SourceText):
        self.source, self.src, self.i = src, src.text, 0
        self.places: dict[Path, Place] = {}

    def ws(self) -> None:
        while self.i < len(self.src) and self.src[self.i] in " \t\n\r\ufeff":
            self.i += 1

    def value(self, path: Path, key: tuple[int, int] | None) -> None:
        self.ws()
        src, start = self.src, self.i
        text = chars = None
        if src[start] == "{":
            self.i += 1
            seen: dict[str, tuple[int, int]] = {}
            while True:
                self.ws()
                if src[self.i] == "}":
                    break
                k0 = self.i
                name, _ = self.string()
                k1 = self.i
                if name in seen:
                    first = self.source.span(*seen[name])
                    raise DocumentError(f"duplicate key {name!r}", self.source.span(k0, k1),
                                        hint=f"first given at {first}; each key may appear once per object")
                seen[name] = (k0, k1)
                self.ws()
                self.i += 1  # ':'
                self.value(path + (name,), (k0, k1))
                self.ws()
                if src[self.i] == ",":
                    self.i += 1
            self.i += 1
        elif src[start] == "[":
            self.i += 1
            index = 0
            while True:
                self.ws()
                if src[self.i] == "]":
                    break
                self.value(path + (index,), None)
                index += 1
                self.ws()
                if src[self.i] == ",":
                    self.i += 1
            self.i += 1
        elif src[start] == '"':
            text, chars = self.string()
        else:
            while self.i < len(src) and src[self.i] not in ",]} \t\n\r":
                self.i += 1
        self.places[path] = Place(key, (start, self.i), text, None if chars is None else tuple(chars))

    def string(self) -> tuple[str, list[int]]:
        src, i = self.src, self.i + 1
        out: list[str] = []
        offs: list[int] = []
        while src[i] != '"':
            offs.append(i)
            if src[i] != "\\":
                out.append(src[i])
                i += 1
                continue
            if src[i + 1] != "u":
                out.append(_JSON_ESCAPES[src[i + 1]])
                i += 2
                continue
            code, i = int(src[i + 2:i + 6], 16), i + 6
            if 0xD800 <= code < 0xDC00 and src.startswith("\\u", i):  # a surrogate pair is one character
                low = int(src[i + 2:i + 6], 16)
                if 0xDC00 <= low < 0xE000:
                    code, i = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00), i + 6
            out.append(chr(code))
        offs.append(i)
        self.i = i + 1
        return "".join(out), offs


def json_places(src: SourceText) -> dict[Path, Place]:
    """Positions of every key and value in JSON text json.loads has accepted; raises
    DocumentError on a duplicate key."""
    scanner = _JsonScanner(src)
    scanner.value((), None)
    return scanner.places


# --- YAML ---------------------------------------------------------------------------

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
