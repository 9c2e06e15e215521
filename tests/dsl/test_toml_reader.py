"""The TOML reader (hologram.dsl.toml_reader): one pass that gives values and positions.

It is held to the standard library's tomllib: the same documents accepted with the same
values, the same ones refused with the same message at the same line and column; and
every key and value it reports sits where its span says (each scalar's text reads back as
its value, each string character maps to the file character it came from).
"""

from __future__ import annotations

import bisect
import datetime
import math
import re
import tomllib
from typing import Any, Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hologram.core.errors import DocumentError, Span
from hologram.dsl import translators
from hologram.dsl.positions import Located, SourceText
from hologram.dsl.toml_reader import read_toml

KITCHEN_SINK = '''\
# every construct the reader must step over
title = "x" # comment
"quoted key" = 'lit'
'lit key'.sub = 1_000
a.b.c = 0x1F
dt = 1979-05-27 07:32:00Z
odt = 1979-05-27T00:32:00.999999-07:00
ld = 1979-05-27
lt = 07:32:00.5
f = -inf
n = nan
e = 6.626e-34
bits = [0b1101, 0o755, +17, -0]
arr = [ 1, [2, 3], # comment
  "four", { x = 1, y.z = "q\\"\\u00e9\\U0001F600" }, ]
ml = """\\
   joined \\
   here"""
ml2 = """
line1
  line2 ""quoted"" """""
lit = \'\'\'
raw \\n \'\'\'\'\'

[t1]
k = true
[t1.sub]
k = false
[[aot]]
n = 1
[aot.inner]
m = 2
[[aot]]
n = 2
[[aot.deep]]
d = 1
[[aot.deep]]
d = 2
[ "we ird" . 'x' ]
e = """a\\tb\\
"""
[implicit.child]
[implicit]
declared = "later"
'''

KERNEL = '''\
[[kernels]]
name = "scale"
version = "1.0.0"
inputs  = { alpha = "f32", x = "f32[n]" }
outputs = { y = "f32[n]" }
body = """
y = alpha * x
"""
'''

_AT = re.compile(r"\s*\((?:at line (\d+), column (\d+)|at end of document)\)\s*$")


def tomllib_reading(text: str) -> tuple[str, Any]:
    """What tomllib makes of `text` (after the byte-order mark, which it does not take):
    ("ok", data) or ("error", (message, line, column)) in the file's own lines and
    columns, or ("too long", message) for a number Python will not convert."""
    bom = 1 if text.startswith("\ufeff") else 0
    folded = text[bom:].replace("\r\n", "\n")  # as tomllib folds it, once
    try:
        return "ok", tomllib.loads(text[bom:])
    except tomllib.TOMLDecodeError as err:
        message = str(err.args[0])
        at = _AT.search(message)
        assert at is not None, message
        offset = len(folded)
        if at.group(1):  # tomllib counts in its CRLF-folded view of the text
            offset = sum(len(line) + 1 for line in folded.split("\n")[:int(at.group(1)) - 1]) + int(at.group(2)) - 1
        crlf, start = [], text.find("\r\n", bom)
        while start >= 0:
            crlf.append(start - bom - len(crlf))
            start = text.find("\r\n", start + 2)
        line, col = SourceText.of(text, "t").pos(offset + bom + bisect.bisect_left(crlf, offset))
        return "error", (message[:1].lower() + message[1:at.start()], line, col)
    except ValueError as err:
        return "too long", str(err)


def plain(value: Located) -> Any:
    if value.is_table:
        return {k: plain(v) for k, v in value.value.items()}
    if value.is_array:
        return [plain(v) for v in value.value]
    return value.value


def same(a: Any, b: Any) -> bool:
    """Equal, with the same types (True is not 1), NaN equal to NaN of its sign, and
    date-times with the same offset."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b) and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, datetime.datetime):
        return a == b and a.utcoffset() == b.utcoffset()
    return a == b


def text_of(text: str, span: Span) -> str:
    src = SourceText.of(text, "t")
    start = src.starts[span.line - 1] + span.col - 1
    end = src.starts[span.end_line - 1] + span.end_col - 1
    return text[start:end]


def walk(value: Located, path: tuple = ()) -> Iterator[tuple[tuple, Located]]:
    yield path, value
    items = value.value.items() if value.is_table else enumerate(value.value) if value.is_array else ()
    for k, v in items:
        yield from walk(v, path + (k,))


def check_positions(text: str, root: Located) -> None:
    """Each scalar's span holds text that reads back as the scalar; each string's
    characters are the file's (an escape's, its backslash; a CRLF's line feed, its CR);
    each key's span holds the key; tables and arrays span their brackets or header."""
    for path, value in walk(root):
        if not path:
            assert (value.span.line, value.span.col) == (1, 1)
            continue
        piece = text_of(text, value.span).replace("\r\n", "\n")
        if value.is_table:
            assert piece[:1] in "[{" or value.key_span is not None and piece == text_of(text, value.key_span), path
        elif value.is_array:
            assert piece.startswith("[") and piece.endswith("]"), (path, piece)
        else:
            assert same(tomllib.loads("v = " + piece)["v"], value.value), (path, piece)
        if value.is_string:
            assert len(value.chars) == len(value.value) + 1
            for c, ch in zip(value.chars, value.value):
                assert text[c] in (ch, "\\", "\r" if ch == "\n" else ch), (path, c, ch)
        if isinstance(path[-1], str):
            key = text_of(text, value.key_span)
            assert list(tomllib.loads(key + " = 1")) == [path[-1]], (path, key)
        else:
            assert value.key_span is None or value.is_table, path  # an array's element (a [[table]]'s: its name)


def check_as_tomllib(text: str) -> None:
    """The reader accepts what tomllib accepts, with the same values and exact positions,
    and refuses the rest with tomllib's message at tomllib's line and column."""
    outcome, expected = tomllib_reading(text)
    try:
        root = read_toml(SourceText.of(text, "t"))
    except DocumentError as err:
        assert err.message.startswith("invalid TOML: "), err.message
        if outcome == "too long":
            assert "digits, more than Python converts" in err.message
            return
        assert outcome == "error", (text, err.render())
        assert (err.message[len("invalid TOML: "):], err.span.line, err.span.col) == expected, text
        return
    assert outcome == "ok", (text, expected)
    assert same(plain(root), expected), text
    check_positions(text, root)


@pytest.mark.parametrize("text", [KITCHEN_SINK, KITCHEN_SINK.replace("\n", "\r\n"), "\ufeff" + KITCHEN_SINK,
                                  KERNEL, "", "# only a comment", "a = 1", "\ufeff\r\n"])
def test_reads_documents_as_tomllib_does(text):
    check_as_tomllib(text)


def test_a_document_is_read_once(monkeypatch):
    """The translator reads a document with the reader alone: no second parser runs over it."""
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("tomllib was asked to read the document too")

    monkeypatch.setattr(tomllib, "loads", refuse)
    (kdef,) = translators.parse_toml(KERNEL, "k.toml")
    assert kdef.name == "scale" and kdef.body == "y = alpha * x\n"


# (document, message, line, column): each of the reader's refusals, worded as tomllib words it
REFUSALS = [
    ("a = 1\n[a]\n", "cannot overwrite a value", 2, 3),
    ("[a]\n[a]\n", "cannot declare ('a',) twice", 2, 3),
    ("a = {}\n[a.b]\n", "cannot declare ('a', 'b') twice", 2, 5),
    ("a = []\n[[a]]\n", "cannot mutate immutable namespace ('a',)", 2, 4),
    ("a.b = 1\n[a]\n", "cannot declare ('a',) twice", 2, 3),
    ("[a.b]\n[a]\nb.c = 1\n", "cannot redefine namespace ('a', 'b')", 3, 8),
    ("a = {b = 1}\na.c = 2\n", "cannot mutate immutable namespace ('a',)", 2, 8),
    ("a = {b = 1, b = 2}\n", "duplicate inline table key 'b'", 1, 18),
    ("a = {b = [], b.c = 2}\n", "cannot mutate immutable namespace ('b', 'c')", 1, 21),
    ("a = 1 2\n", "expected newline or end of document after a statement", 1, 7),
    ("a = [1 2]\n", "unclosed array", 1, 8),
    ("a = {b = 1\n", "unclosed inline table", 1, 11),
    ("a 1\n", "expected '=' after a key in a key/value pair", 1, 3),
    ("= 1\n", "invalid statement", 1, 1),
    ("a = \"x\n", "illegal character '\\n'", 1, 7),
    ("a = \"x", "unterminated string", 1, 7),
    ("a = 'x", "expected \"'\"", 1, 7),
    ("a = '''x\x01'''", "found invalid character '\\x01'", 1, 9),
    ("a = \"\\q\"", "unescaped '\\' in a string", 1, 8),
    ("a = \"\\u12\"", "invalid hex value", 1, 8),
    ("a = \"\\uD800\"", "escaped character is not a Unicode scalar value", 1, 12),
    ("a = 1979-02-30\n", "invalid date or datetime", 1, 5),
    ("a = \"\"\"x \\ y\"\"\"", "unescaped '\\' in a string", 1, 12),
    ("[[a]\n", "expected ']]' at the end of an array declaration", 1, 4),
    ("a = 1 # \x00\n", "found invalid character '\\x00'", 1, 9),
    ("[a\r\nb = 1\r\n", "expected ']' at the end of a table declaration", 1, 3),
]


@pytest.mark.parametrize("text, message, line, col", REFUSALS)
def test_refusals_say_what_tomllib_says_where_it_says_it(text, message, line, col):
    check_as_tomllib(text)
    with pytest.raises(DocumentError) as info:
        read_toml(SourceText.of(text, "r.toml"))
    err = info.value
    assert (err.message, err.span.file, err.span.line, err.span.col) == (f"invalid TOML: {message}", "r.toml", line, col)


def test_a_number_past_pythons_digit_limit_is_underlined():
    text = "a = -" + "1_" * 4400 + "1\n"
    with pytest.raises(DocumentError) as info:
        read_toml(SourceText.of(text, "d.toml"))
    err = info.value
    assert err.message == "invalid TOML: a number has 4401 digits, more than Python converts (4300)"
    assert (err.span.line, err.span.col, err.span.end_col) == (1, 6, len(text))


# --- generated documents ------------------------------------------------------------------

_KEYS = st.sampled_from(["a", "b", "c", '"a"', "'b'", '"x y"', "1", "-"])
_SCALARS = st.sampled_from([
    "1", "+1_000", "0x_1", "0o17", "0b11", "-0.5e3", "1e", "inf", "-nan", '"s"', '"\\t\\u00e9"', "'lit'",
    '"""\nml\\\n   cont"""', "'''\nraw'''''", "true", "false", "1979-05-27", "1979-05-27 07:32:00+01:00", "07:32",
    "07:32:00", "{}", "[]", "[{}]", "[{a=1}]", "x",
])


@st.composite
def values(draw: st.DrawFn, depth: int = 0) -> str:
    kind = draw(st.sampled_from(["scalar", "scalar", "table", "array"] if depth < 2 else ["scalar"]))
    if kind == "table":
        pairs = draw(st.lists(st.tuples(st.lists(_KEYS, min_size=1, max_size=3), values(depth + 1)), max_size=3))
        return "{" + ", ".join(f"{'.'.join(k)} = {v}" for k, v in pairs) + "}"
    if kind == "array":
        items = draw(st.lists(values(depth + 1), max_size=3))
        sep = draw(st.sampled_from([", ", ",\n  ", " , # c\n"]))
        return "[" + sep.join(items) + draw(st.sampled_from(["", ",", "\n"])) + "]"
    return draw(_SCALARS)


@st.composite
def statements(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["table", "array", "pair", "pair", "comment"]))
    key = ".".join(draw(st.lists(_KEYS, min_size=1, max_size=3)))
    if kind == "table":
        return f"[{key}]"
    if kind == "array":
        return f"[[{key}]]"
    if kind == "comment":
        return "# note"
    return f"{key} = {draw(values())}"


@st.composite
def documents(draw: st.DrawFn) -> str:
    text = "\n".join(draw(st.lists(statements(), min_size=1, max_size=8))) + "\n"
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    return ("\ufeff" if draw(st.booleans()) else "") + text


@given(documents())
def test_generated_documents_read_as_tomllib_reads_them(text):
    check_as_tomllib(text)


_NOISE = list("[]{}\"'=.,#\n \t\\\r:+-_") + ['"""', "'''", "\r\n", "a", "1", "x.y", "true", "1979-05-27", "07:32:00",
                                              "\\u00e9", "inf", "\x00", "\u2028"]


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from([KITCHEN_SINK, KERNEL]))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        piece = draw(st.sampled_from(_NOISE))
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        if op == "insert":
            text = text[:at] + piece + text[at:]
        elif op == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 8)):]
        else:
            text = text[:at] + piece + text[at + len(piece):]
    return text


@given(mutated())
def test_mutated_documents_read_as_tomllib_reads_them(text):
    check_as_tomllib(text)
