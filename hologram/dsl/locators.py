"""The JSON locator: the `Place` of every key and value in a JSON document's text.

It rescans text `json.loads` (the standard library's C parser, which also words the
syntax errors) has already accepted, so it only needs to find boundaries, never to
diagnose, besides the duplicate keys json.loads resolves silently. It also decodes every
string, with the source offset of each character; the translator checks that decoding
against the parser's value, and a disagreement degrades that string to its start
position instead of reporting a wrong one. (TOML has a reader that keeps positions
itself, toml_reader.py.)
"""

from __future__ import annotations

from hologram.core.errors import DocumentError
from hologram.dsl.positions import Path, Place, SourceText

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
