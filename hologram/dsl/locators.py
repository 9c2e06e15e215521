"""Locators for TOML and JSON: the `Place` of every key and value in a document's text.

Both rescan text the real parser (tomllib, json) has already accepted, so they only need
to find boundaries, never to diagnose. Each also decodes every string, with the source
offset of each character; the translators check that decoding against the parser's value,
and a disagreement degrades that string to its start position instead of reporting a
wrong one.
"""

from __future__ import annotations

import bisect
from typing import Callable, Container

from hologram.core.errors import DocumentError
from hologram.dsl.positions import Path, Place, SourceText

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
