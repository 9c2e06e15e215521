"""A TOML reader that keeps positions: TOML text to one `Located` tree, in one pass.

Every key and value comes with its span, and every string with the source offset of each
character it decodes to (an escape's characters point at its backslash), so a position
inside a kernel body or a type string maps back to the file's line and column.

It reads TOML 1.0 as the standard library's `tomllib` does: the same documents are
accepted, with the same values, and a malformed one is refused with tomllib's message
(Python 3.11's wording, lower-cased, as `invalid TOML: ...`) at the same position;
tests/dsl/test_toml_reader.py holds it to tomllib on generated and mutated documents. The
one difference: a decimal integer too long for Python to convert (4300 digits) is
refused with its span, where tomllib raises a bare ValueError.

Like tomllib, the reader works on the text with CRLF folded to LF (TOML allows a CRLF
inside a multi-line string to read as LF) and a leading byte-order mark removed; offsets
are mapped back to the file's own at the end, so spans and character offsets refer to
the text the caller gave.

A table's span is its header (`[kernel]`, `[[kernels]]`), or for a table no header
declares, the key or header that first named it; an inline table's or an array's span
runs from its opening bracket to its closing one. The document's root is the point at
its first character.
"""

from __future__ import annotations

import bisect
import datetime
import re
import sys
from typing import Any, Callable

import attrs

from hologram.core.errors import DocumentError
from hologram.dsl.positions import Located, SourceText

Key = tuple[str, ...]

# --- lexical ----------------------------------------------------------------------------

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_BARE_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_KEY_START = _BARE_KEY_CHARS | frozenset("\"'")
_WS = frozenset(" \t")
_WS_NL = frozenset(" \t\n")
_CONTROL = frozenset(chr(i) for i in range(32)) | {"\x7f"}
_ILLEGAL_LINE = _CONTROL - {"\t"}  # in a one-line string and in a comment
_ILLEGAL_MULTILINE = _CONTROL - {"\t", "\n"}
# runs of characters a basic string takes as they are (no quote, backslash or control)
_BASIC_RUN = re.compile(r'[^"\\\x00-\x08\x0a-\x1f\x7f]*')
_MULTILINE_RUN = re.compile(r'[^"\\\x00-\x08\x0b-\x1f\x7f]*')
_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")

_TIME = r"([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9])(?:\.([0-9]{1,6})[0-9]*)?"
_NUMBER = re.compile(r"""
0(?:x[0-9A-Fa-f](?:_?[0-9A-Fa-f])*|b[01](?:_?[01])*|o[0-7](?:_?[0-7])*)
|[+-]?(?:0|[1-9](?:_?[0-9])*)(?P<fraction>(?:\.[0-9](?:_?[0-9])*)?(?:[eE][+-]?[0-9](?:_?[0-9])*)?)
""", re.VERBOSE)
_LOCAL_TIME = re.compile(_TIME)
_DATE_TIME = re.compile(rf"""
([0-9]{{4}})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])
(?:[Tt ]{_TIME}(?:([Zz])|([+-])([01][0-9]|2[0-3]):([0-5][0-9]))?)?
""", re.VERBOSE)
_SPECIAL_FLOATS = ("inf", "nan", "+inf", "-inf", "+nan", "-nan")

_HINTS = {
    "invalid value": "values are quoted strings (\"...\"), numbers, booleans, arrays [...] or inline tables {...}",
    "invalid statement": "each line is a key = value pair, a [table] header or a comment",
}


class _Syntax(Exception):
    """A malformed document: tomllib's message and the offset (in the folded text)."""

    def __init__(self, message: str, at: int):
        super().__init__(message)
        self.message, self.at = message, at


# --- the tree while it is read -----------------------------------------------------------


class _Table:
    """A table being filled. `explicit`: declared by a header, or (from the next header
    on) by a dotted key, so no header may declare it again. `frozen`: an inline table or
    inside one, closed to every later key. `declared`: its key and span come from its
    own header or key = value line (a table first named as another's parent takes those
    of where it was named, until its own header)."""

    __slots__ = ("items", "key", "span", "explicit", "frozen", "declared")

    def __init__(self, key: tuple[int, int] | None, span: tuple[int, int], declared: bool):
        self.items: dict[str, Any] = {}
        self.key, self.span, self.declared = key, span, declared
        self.explicit = self.frozen = False


class _Array:
    """An array: a value written with brackets (`frozen`), or an array of tables
    ([[name]] headers, `explicit`)."""

    __slots__ = ("items", "key", "span", "explicit", "frozen")

    def __init__(self, key: tuple[int, int] | None, span: tuple[int, int], of_tables: bool):
        self.items: list[Any] = []
        self.key, self.span = key, span
        self.explicit, self.frozen = of_tables, not of_tables


# --- the reader ---------------------------------------------------------------------------


def read_toml(src: SourceText) -> Located:
    """The document `src` as a `Located` tree of tables, arrays and values; a
    DocumentError ("invalid TOML: ...", with the span and a hint where one helps) when it
    is not TOML. Deep nesting raises RecursionError (the caller's to report)."""
    text = src.text
    bom = 1 if text.startswith("\ufeff") else 0
    folded = text[bom:].replace("\r\n", "\n")
    crlf: list[int] = []  # folded offsets of the line feeds that were CRLF
    if len(folded) != len(text) - bom:
        at = text.find("\r\n", bom)
        while at >= 0:
            crlf.append(at - bom - len(crlf))
            at = text.find("\r\n", at + 2)
    shift = (lambda at: at + bom + bisect.bisect_left(crlf, at)) if crlf or bom else None
    reader = _Reader(folded, src, shift)
    try:
        root = reader.document()
    except _Syntax as err:
        message = err.message[:1].lower() + err.message[1:]
        hint = next((h for start, h in _HINTS.items() if message.startswith(start)), None)
        at = reader.at(min(err.at, len(folded)))  # past the end: "at end of document"
        raise DocumentError(f"invalid TOML: {message}", src.span(at), hint=hint) from None
    return attrs.evolve(reader.located(root), span=src.span(0))  # the root: the file's first character


class _Reader:
    def __init__(self, s: str, src: SourceText, shift: Callable[[int], int] | None):
        self.s, self.src, self.shift = s, src, shift
        self.pending: list[_Table] = []  # tables dotted keys opened in the current section

    # offsets of the folded text to the file's
    def at(self, offset: int) -> int:
        return offset if self.shift is None else self.shift(offset)

    def span(self, start: int, end: int) -> Any:
        shift = self.shift
        if shift is None:
            return self.src.span(start, end)
        return self.src.span(shift(start), shift(end - 1) + 1 if end > start else shift(start))

    def value_located(self, kind: str, value: Any, start: int, end: int, key: tuple[int, int] | None,
                      chars: list[int] | None = None) -> Located:
        if chars is not None and self.shift is not None:
            chars = [self.shift(c) for c in chars]
        return Located(kind, value, self.span(start, end), None if key is None else self.span(*key),
                       None if chars is None else tuple(chars), self.src)

    def located(self, node: Any) -> Located:
        """The finished tree: tables and arrays frozen into `Located` values."""
        if isinstance(node, Located):
            return node
        key = None if node.key is None else self.span(*node.key)
        if isinstance(node, _Table):
            items = {k: self.located(v) for k, v in node.items.items()}
            return Located("table", items, self.span(*node.span), key, None, self.src)
        return Located("array", tuple(self.located(v) for v in node.items), self.span(*node.span), key, None, self.src)

    # -- statements ------------------------------------------------------------------------
    def document(self) -> _Table:
        s, n = self.s, len(self.s)
        root = _Table(None, (0, 0), True)
        table, path = root, ()
        pos = 0
        while True:
            while pos < n and s[pos] in _WS:
                pos += 1
            if pos >= n:
                return root
            c = s[pos]
            if c == "\n":
                pos += 1
                continue
            if c in _KEY_START:
                pos = self.key_value(pos, root, table, path)
            elif c == "[":
                for opened in self.pending:
                    opened.explicit = True
                self.pending.clear()
                if s.startswith("[[", pos):
                    pos, table, path = self.array_header(pos, root)
                else:
                    pos, table, path = self.table_header(pos, root)
            elif c != "#":
                raise _Syntax("Invalid statement", pos)
            while pos < n and s[pos] in _WS:
                pos += 1
            pos = self.comment(pos)
            if pos >= n:
                return root
            if s[pos] != "\n":
                raise _Syntax("Expected newline or end of document after a statement", pos)
            pos += 1

    def comment(self, pos: int) -> int:
        if pos < len(self.s) and self.s[pos] == "#":
            return self.skip_until(pos + 1, "\n", _ILLEGAL_LINE, eof_ok=True)
        return pos

    def skip_until(self, pos: int, end: str, illegal: frozenset[str], eof_ok: bool) -> int:
        """The offset of the next `end` (EOF when `eof_ok`); an illegal character before
        it is an error."""
        s = self.s
        stop = s.find(end, pos)
        if stop < 0:
            if not eof_ok:
                raise _Syntax(f"Expected {end!r}", len(s))
            stop = len(s)
        if not illegal.isdisjoint(s[pos:stop]):
            while s[pos] not in illegal:
                pos += 1
            raise _Syntax(f"Found invalid character {s[pos]!r}", pos)
        return stop

    def blank(self, pos: int) -> int:
        """Whitespace, newlines and comments, as inside an array."""
        s, n = self.s, len(self.s)
        while True:
            before = pos
            while pos < n and s[pos] in _WS_NL:
                pos += 1
            pos = self.comment(pos)
            if pos == before:
                return pos

    # -- headers -----------------------------------------------------------------------
    def table_header(self, start: int, root: _Table) -> tuple[int, _Table, Key]:
        pos = self.skip_ws(start + 1)
        pos, path, parts = self.key(pos)
        span = (start, pos + 1)
        declared = _lookup(root, path)
        if _frozen_on(root, path) or isinstance(declared, (_Table, _Array)) and declared.explicit:
            raise _Syntax(f"Cannot declare {path} twice", pos)
        parent = self.tables(root, path[:-1], parts, span, pos)[-1]
        node = parent.items.get(path[-1])
        if node is None:
            node = parent.items[path[-1]] = _Table(parts[-1], span, True)
        elif not isinstance(node, _Table):
            raise _Syntax("Cannot overwrite a value", pos)
        node.explicit = True
        if not node.declared:
            node.key, node.span, node.declared = parts[-1], span, True
        if not self.s.startswith("]", pos):
            raise _Syntax("Expected ']' at the end of a table declaration", pos)
        return pos + 1, node, path

    def array_header(self, start: int, root: _Table) -> tuple[int, _Table, Key]:
        pos = self.skip_ws(start + 2)
        pos, path, parts = self.key(pos)
        span = (start, pos + 2)
        if _frozen_on(root, path):
            raise _Syntax(f"Cannot mutate immutable namespace {path}", pos)
        parent = self.tables(root, path[:-1], parts, span, pos)[-1]
        array = parent.items.get(path[-1])
        if array is None:
            array = parent.items[path[-1]] = _Array(parts[-1], span, of_tables=True)
        elif not isinstance(array, _Array):
            raise _Syntax("Cannot overwrite a value", pos)
        element = _Table(parts[-1], span, True)
        element.explicit = True
        array.items.append(element)
        if not self.s.startswith("]]", pos):
            raise _Syntax("Expected ']]' at the end of an array declaration", pos)
        return pos + 2, element, path

    def tables(self, table: _Table, path: Key, parts: list[tuple[int, int]], span: tuple[int, int] | None,
               pos: int) -> list[_Table]:
        """The tables from `table` down `path` (through an array of tables: into its last
        table), creating the missing ones, each named by its key part and spanning the
        header `span` (None: the part itself); a value that is no table in the way is an
        error at `pos`."""
        chain = [table]
        for name, key in zip(path, parts):
            node = table.items.get(name)
            if node is None:
                node = table.items[name] = _Table(key, span or key, False)
            elif isinstance(node, _Array):
                node = node.items[-1]
            if not isinstance(node, _Table):
                raise _Syntax("Cannot overwrite a value", pos)
            table = node
            chain.append(table)
        return chain

    # -- key = value ------------------------------------------------------------------------
    def key_value(self, pos: int, root: _Table, table: _Table, header: Key) -> int:
        pos, path, parts, value = self.pair(pos)
        for i in range(1, len(path)):
            node = _lookup(table, path[:i])
            if isinstance(node, (_Table, _Array)) and node.explicit:
                raise _Syntax(f"Cannot redefine namespace {header + path[:i]}", pos)
        if _frozen_on(root, header + path[:-1]):
            raise _Syntax(f"Cannot mutate immutable namespace {header + path[:-1]}", pos)
        chain = self.tables(table, path[:-1], parts, None, pos)
        parent = chain[-1]
        self.pending.extend(chain[1:])  # explicit from the next header on
        if path[-1] in parent.items:
            raise _Syntax("Cannot overwrite a value", pos)
        if isinstance(value, (_Table, _Array)):
            value.frozen = True
        parent.items[path[-1]] = value
        return pos

    def pair(self, pos: int) -> tuple[int, Key, list[tuple[int, int]], Any]:
        """`key = value` at `pos`: the offset after it, the key's path and parts' spans,
        and the value (its key span set)."""
        pos, path, parts = self.key(pos)
        if pos >= len(self.s) or self.s[pos] != "=":
            raise _Syntax("Expected '=' after a key in a key/value pair", pos)
        pos, value = self.value(self.skip_ws(pos + 1), parts[-1])
        return pos, path, parts, value

    def key(self, pos: int) -> tuple[int, Key, list[tuple[int, int]]]:
        s = self.s
        path: list[str] = []
        parts: list[tuple[int, int]] = []
        while True:
            start = pos
            c = s[pos] if pos < len(s) else ""
            if c in _BARE_KEY_CHARS:
                pos = _BARE_KEY.match(s, pos).end()  # type: ignore[union-attr]
                name = s[start:pos]
            elif c == "'":
                pos, name, _ = self.literal_string(pos)
            elif c == '"':
                pos, name, _ = self.basic_string(pos + 1, start, multiline=False)
            else:
                raise _Syntax("Invalid initial character for a key part", pos)
            path.append(name)
            parts.append((start, pos))
            pos = self.skip_ws(pos)
            if pos >= len(s) or s[pos] != ".":
                return pos, tuple(path), parts
            pos = self.skip_ws(pos + 1)

    def skip_ws(self, pos: int) -> int:
        s, n = self.s, len(self.s)
        while pos < n and s[pos] in _WS:
            pos += 1
        return pos

    # -- values ------------------------------------------------------------------------------
    def value(self, pos: int, key: tuple[int, int] | None) -> tuple[int, Any]:
        """The value at `pos` (a `Located` scalar, or a `_Table`/`_Array` still open)."""
        s = self.s
        c = s[pos] if pos < len(s) else ""
        if c == '"':
            if s.startswith('"""', pos):
                end, text, chars = self.multiline_string(pos, '"')
            else:
                end, text, chars = self.basic_string(pos + 1, pos, multiline=False)
            return end, self.value_located("string", text, pos, end, key, chars)
        if c == "'":
            if s.startswith("'''", pos):
                end, text, chars = self.multiline_string(pos, "'")
            else:
                end, text, chars = self.literal_string(pos)
            return end, self.value_located("string", text, pos, end, key, chars)
        if c == "t" and s.startswith("true", pos):
            return pos + 4, self.value_located("boolean", True, pos, pos + 4, key)
        if c == "f" and s.startswith("false", pos):
            return pos + 5, self.value_located("boolean", False, pos, pos + 5, key)
        if c == "[":
            return self.array(pos, key)
        if c == "{":
            return self.inline_table(pos, key)
        found = _DATE_TIME.match(s, pos)
        if found:
            try:
                moment = _date_time(found)
            except ValueError:
                raise _Syntax("Invalid date or datetime", pos) from None
            kind = "date-time" if isinstance(moment, datetime.datetime) else "date"
            return found.end(), self.value_located(kind, moment, pos, found.end(), key)
        found = _LOCAL_TIME.match(s, pos)
        if found:
            return found.end(), self.value_located("time", _time(found.groups()), pos, found.end(), key)
        found = _NUMBER.match(s, pos)
        if found:
            return found.end(), self.number(found, key)
        for word in _SPECIAL_FLOATS:
            if s.startswith(word, pos):
                return pos + len(word), self.value_located("float", float(word), pos, pos + len(word), key)
        raise _Syntax("Invalid value", pos)

    def number(self, found: re.Match, key: tuple[int, int] | None) -> Located:
        text, start, end = found.group(), found.start(), found.end()
        if found.group("fraction"):
            return self.value_located("float", float(text), start, end, key)
        try:
            value = int(text, 0)
        except ValueError:  # past sys.get_int_max_str_digits() decimal digits
            unsigned = text.lstrip("+-")
            raise DocumentError(f"invalid TOML: a number has {len(unsigned.replace('_', ''))} digits, more than "
                                f"Python converts ({sys.get_int_max_str_digits()})",
                                self.span(end - len(unsigned), end)) from None
        return self.value_located("integer", value, start, end, key)

    def array(self, start: int, key: tuple[int, int] | None) -> tuple[int, _Array]:
        s = self.s
        array = _Array(key, (start, start), of_tables=False)
        pos = self.blank(start + 1)
        while not s.startswith("]", pos):  # (after a comma too: a trailing comma is allowed)
            pos, item = self.value(pos, None)
            array.items.append(item)
            pos = self.blank(pos)
            if s.startswith("]", pos):
                break
            if not s.startswith(",", pos):
                raise _Syntax("Unclosed array", pos)
            pos = self.blank(pos + 1)
        array.span = (start, pos + 1)
        return pos + 1, array

    def inline_table(self, start: int, key: tuple[int, int] | None) -> tuple[int, _Table]:
        s = self.s
        table = _Table(key, (start, start), True)
        pos = self.skip_ws(start + 1)
        if s.startswith("}", pos):
            table.span = (start, pos + 1)
            return pos + 1, table
        while True:
            pos, path, parts, value = self.pair(pos)
            if _frozen_on(table, path):
                raise _Syntax(f"Cannot mutate immutable namespace {path}", pos)
            parent = self.tables(table, path[:-1], parts, None, pos)[-1]
            if path[-1] in parent.items:
                raise _Syntax(f"Duplicate inline table key {path[-1]!r}", pos)
            parent.items[path[-1]] = value
            pos = self.skip_ws(pos)
            c = s[pos:pos + 1]
            if c == "}":
                table.span = (start, pos + 1)
                return pos + 1, table
            if c != ",":
                raise _Syntax("Unclosed inline table", pos)
            if isinstance(value, (_Table, _Array)):
                value.frozen = True
            pos = self.skip_ws(pos + 1)

    # -- strings ------------------------------------------------------------------------------
    def literal_string(self, start: int) -> tuple[int, str, list[int]]:
        end = self.skip_until(start + 1, "'", _ILLEGAL_LINE, eof_ok=False)
        return end + 1, self.s[start + 1:end], [*range(start + 1, end + 1)]

    def multiline_string(self, start: int, quote: str) -> tuple[int, str, list[int]]:
        s = self.s
        pos = start + 3
        if s.startswith("\n", pos):
            pos += 1
        if quote == "'":
            end = self.skip_until(pos, "'''", _ILLEGAL_MULTILINE, eof_ok=False)
            text, chars, pos = s[pos:end], [*range(pos, end + 1)], end + 3
        else:
            pos, text, chars = self.basic_string(pos, start, multiline=True)
        # up to two quotes right before the closing three belong to the string
        for _ in range(2):
            if not s.startswith(quote, pos):
                break
            text += quote
            chars[-1] = pos - 3
            chars.append(pos - 2)
            pos += 1
        return pos, text, chars

    def basic_string(self, pos: int, start: int, multiline: bool) -> tuple[int, str, list[int]]:
        """The basic string whose content starts at `pos` (its opening quotes at `start`):
        the offset after its closing quotes, its text and each character's offset (with
        one more, where the closing quotes start)."""
        s, n = self.s, len(self.s)
        run = _MULTILINE_RUN if multiline else _BASIC_RUN
        pieces: list[str] = []
        chars: list[int] = []
        while True:
            end = run.match(s, pos).end()  # type: ignore[union-attr]
            if end > pos:
                pieces.append(s[pos:end])
                chars.extend(range(pos, end))
                pos = end
            if pos >= n:
                raise _Syntax("Unterminated string", pos)
            c = s[pos]
            if c == '"':
                if not multiline:
                    chars.append(pos)
                    return pos + 1, "".join(pieces), chars
                if s.startswith('"""', pos):
                    chars.append(pos)
                    return pos + 3, "".join(pieces), chars
                pieces.append(c)
                chars.append(pos)
                pos += 1
            elif c == "\\":
                pos = self.escape(pos, multiline, pieces, chars)
            else:  # the runs take every other character
                raise _Syntax(f"Illegal character {c!r}", pos)

    def escape(self, pos: int, multiline: bool, pieces: list[str], chars: list[int]) -> int:
        """The escape at `pos` (a backslash) decoded into `pieces`; the offset after it."""
        s = self.s
        e = s[pos + 1:pos + 2]
        after = pos + 2
        if multiline and e in (" ", "\t", "\n"):  # a line-ending backslash: the break and indentation go
            if e != "\n":
                after = self.skip_ws(after)
                if after >= len(s):
                    return after
                if s[after] != "\n":
                    raise _Syntax("Unescaped '\\' in a string", after)
                after += 1
            while after < len(s) and s[after] in _WS_NL:
                after += 1
            return after
        if e in ("u", "U"):
            width = 4 if e == "u" else 8
            digits = s[after:after + width]
            if len(digits) != width or not _HEX_DIGITS.issuperset(digits):
                raise _Syntax("Invalid hex value", after)
            code = int(digits, 16)
            if not (0 <= code <= 0xD7FF or 0xE000 <= code <= 0x10FFFF):
                raise _Syntax("Escaped character is not a Unicode scalar value", after + width)
            pieces.append(chr(code))
            chars.append(pos)
            return after + width
        if e not in _ESCAPES:
            raise _Syntax("Unescaped '\\' in a string", after)
        pieces.append(_ESCAPES[e])
        chars.append(pos)
        return after


def _lookup(table: _Table, path: Key) -> Any:
    """The node at `path` below `table` (into an array of tables: its last table); None
    when there is none."""
    node: Any = table
    for name in path:
        if isinstance(node, _Array):
            node = node.items[-1] if node.items else None
        if not isinstance(node, _Table):
            return None
        node = node.items.get(name)
    return node


def _frozen_on(table: _Table, path: Key) -> bool:
    """Whether a frozen table or array is on `path` below `table` (itself included):
    nothing may be added there."""
    node: Any = table
    for name in path:
        if isinstance(node, _Array):
            if node.frozen:
                return True
            node = node.items[-1] if node.items else None
        if not isinstance(node, _Table):
            return False
        if node.frozen:
            return True
        node = node.items.get(name)
    return isinstance(node, (_Table, _Array)) and node.frozen


def _date_time(found: re.Match) -> datetime.datetime | datetime.date:
    year, month, day, hour, minute, second, micros, zulu, sign, off_hour, off_minute = found.groups()
    if hour is None:
        return datetime.date(int(year), int(month), int(day))
    zone: datetime.tzinfo | None = None
    if sign:
        minutes = int(off_hour) * 60 + int(off_minute)
        zone = datetime.timezone(datetime.timedelta(minutes=minutes if sign == "+" else -minutes))
    elif zulu:
        zone = datetime.timezone.utc
    return datetime.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second),
                             int(micros.ljust(6, "0")) if micros else 0, tzinfo=zone)


def _time(groups: tuple[str, ...]) -> datetime.time:
    hour, minute, second, micros = groups
    return datetime.time(int(hour), int(minute), int(second), int(micros.ljust(6, "0")) if micros else 0)
