"""The `.hasm` lexer: one source line as tokens, with the small grammars the parser is
built from (names, integers, dimensions, immediates, operands, memory operands).

Every method either consumes what it asked for or raises ISAError with a span on the
line and a message saying what was expected there. Names are identifiers or JSON string
literals; numbers are ASCII; floats use Python's `repr` syntax plus `inf`, `nan` and
`nan(0xBITS)` for NaNs with a payload (asm.format_value writes exactly this).
"""

from __future__ import annotations

import json
import math
import re
import struct

import attrs

from hologram.core.errors import ISAError, Span, did_you_mean
from hologram.core.types import Affine, DType
from hologram.isa.program import SPECIALS, Addr, Imm, Operand, Reg, Special, Sym

DTYPES = {d.value: d for d in DType}
QNAN_BITS = 0x7FF8000000000000
NEG_NAN = -math.nan

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\f\v]+)
  | (?P<comment>;.*)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<directive>\.[A-Za-z_][A-Za-z0-9_]*)
  | (?P<reg>%(?:[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?|"(?:[^"\\\n]|\\.)*"))
  | (?P<sym>\$(?:[A-Za-z_][A-Za-z0-9_]*|"(?:[^"\\\n]|\\.)*"))
  | (?P<pred>@!?)
  | (?P<hex>0[xX][0-9a-fA-F]+)
  | (?P<num>[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|[0-9]+)
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<punct>[\[\](),:=+\-*])
""", re.VERBOSE)


@attrs.frozen
class Tok:
    kind: str
    text: str
    col: int  # 1-based
    end: int  # 1-based, exclusive


def _unquote(text: str) -> str:
    return json.loads(text) if text.startswith('"') else text


class LineReader:
    """The tokens of one source line with a cursor; every error points into the line."""

    def __init__(self, text: str, lineno: int, file: str, source: str):
        self.lineno, self.file, self.source = lineno, file, source
        self.toks: list[Tok] = []
        self.i = 0
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise ISAError(f"unexpected character {text[pos]!r}",
                               self.span(pos + 1, pos + 2))
            if m.lastgroup not in ("ws", "comment"):
                self.toks.append(Tok(m.lastgroup, m.group(), pos + 1, m.end() + 1))
            pos = m.end()
        self.eol = len(text.rstrip()) + 1

    def span(self, col: int, end: int | None = None) -> Span:
        return Span(self.file, self.lineno, col, self.lineno, end or col + 1, source=self.source)

    def error(self, expected: str, tok: Tok | None = None, rest: bool = False) -> ISAError:
        """`expected X, found Y`, underlining Y (and with `rest`, the rest of the line)."""
        tok = tok if tok is not None else self.peek()
        if tok is None:
            return ISAError(f"expected {expected}, found end of line", self.span(self.eol))
        return ISAError(f"expected {expected}, found {tok.text!r}", self.span(tok.col, self.eol if rest else tok.end))

    def peek(self, k: int = 0) -> Tok | None:
        return self.toks[self.i + k] if self.i + k < len(self.toks) else None

    def at(self, kind: str, text: str | None = None) -> bool:
        t = self.peek()
        return t is not None and t.kind == kind and (text is None or t.text == text)

    def take(self, kind: str, expected: str, text: str | None = None) -> Tok:
        if not self.at(kind, text):
            raise self.error(expected)
        self.i += 1
        return self.toks[self.i - 1]

    def punct(self, text: str) -> Tok:
        return self.take("punct", f"'{text}'", text)

    def accept(self, text: str) -> bool:
        if self.at("punct", text):
            self.i += 1
            return True
        return False

    def end(self) -> None:
        if self.peek() is not None:
            raise self.error("end of line", rest=True)

    # --------------------------------------------------------------- small grammars
    def name(self, what: str) -> str:
        t = self.peek()
        if t is None or t.kind not in ("word", "str") or (t.kind == "word" and "." in t.text):
            raise self.error(what)
        self.i += 1
        return self._string(t)

    def string(self, what: str) -> str:
        """A JSON string literal (any text, not only a name)."""
        t = self.peek()
        if t is None or t.kind != "str":
            raise self.error(what)
        self.i += 1
        return self._string(t)

    def _string(self, t: Tok) -> str:
        try:
            return _unquote(t.text)
        except ValueError:
            raise ISAError("malformed string literal", self.span(t.col, t.end)) from None

    def int(self, what: str) -> int:
        neg = self.accept("-")
        v = self._plain_int(what)
        return -v if neg else v

    def _plain_int(self, what: str) -> int:
        t = self.peek()
        if t is None or not (t.kind == "hex" or t.kind == "num" and t.text.isdigit()):
            raise self.error(what)
        self.i += 1
        return self._int_text(t)

    def _int_text(self, t: Tok) -> int:
        try:
            return int(t.text, 0 if t.kind == "hex" else 10)
        except ValueError:  # Python refuses to read decimals of more than 4300 digits
            raise ISAError("integer literal too long (write it in hex)", self.span(t.col, t.end)) from None

    def dtype(self) -> DType:
        t = self.take("word", "a type (bool, i8..i64, u8..u64, f16, f32, f64)")
        if t.text not in DTYPES:
            raise ISAError(f"unknown type {t.text!r}; expected one of {', '.join(DTYPES)}"
                           f"{did_you_mean(t.text, DTYPES)}", self.span(t.col, t.end))
        return DTYPES[t.text]

    def reg(self) -> Reg:
        t = self.take("reg", "a register (%name)")
        if t.text.startswith('%"'):
            return Reg(self._string(Tok(t.kind, t.text[1:], t.col + 1, t.end)))
        if "." in t.text:
            raise self.error("a general register (special registers are read-only)", t)
        return Reg(t.text[1:])

    def affine(self) -> Affine:
        """`c`, `s`, `c*s`, combined with + and -: a symbolic dimension."""
        total, sign = Affine(), 1
        if self.accept("-"):
            sign = -1
        while True:
            t = self.peek()
            if t is not None and t.kind == "num" and t.text.isdigit():
                self.i += 1
                if self.accept("*"):
                    total = total + Affine.of(self.name("a symbol after '*'")) * (sign * int(t.text))
                else:
                    total = total + sign * int(t.text)
            elif t is not None and t.kind in ("word", "str"):
                sym = Affine.of(self.name("a symbol"))
                total = total + sym * (sign * (self._plain_int("an integer after '*'") if self.accept("*") else 1))
            else:
                raise self.error("a dimension (integer, symbol or c*symbol)")
            if self.accept("+"):
                sign = 1
            elif self.accept("-"):
                sign = -1
            else:
                return total

    def dims(self, what: str) -> tuple[Affine, ...]:
        self.punct("[")
        out: list[Affine] = []
        if not self.accept("]"):
            out.append(self.affine())
            while self.accept(","):
                out.append(self.affine())
            self.take("punct", f"',' or ']' in {what}", "]")
        return tuple(out)

    def value(self) -> bool | int | float:
        """An immediate: integer, float (repr syntax, inf, nan, nan(0xBITS)) or bool."""
        neg = self.accept("-")
        t = self.peek()
        if t is not None and t.kind in ("num", "hex"):
            self.i += 1
            v: int | float = self._int_text(t) if t.kind == "hex" or t.text.isdigit() else float(t.text)
            return -v if neg else v
        if t is not None and t.kind == "word" and t.text in ("inf", "nan", "true", "false"):
            self.i += 1
            if t.text in ("true", "false"):
                if neg:
                    raise self.error("a number after '-'", t)
                return t.text == "true"
            if t.text == "inf":
                return -math.inf if neg else math.inf
            bits = QNAN_BITS
            if self.accept("("):
                bits = int(self.take("hex", "the bits of a NaN (0x...)").text, 16)
                self.punct(")")
                if bits >> 64 or (bits >> 52) & 0x7FF != 0x7FF or not bits & ((1 << 52) - 1):
                    raise ISAError(f"0x{bits:x} is not the bit pattern of a NaN", self.span(t.col, self.peek(-1).end))
            if bits == QNAN_BITS:  # the shared NaN objects, so that equal programs compare equal
                return NEG_NAN if neg else math.nan
            return struct.unpack("<d", struct.pack("<Q", bits ^ (neg << 63)))[0]
        raise self.error("an immediate (integer, float, inf, nan, true or false)")

    def operand(self) -> Operand:
        t = self.peek()
        if t is not None and t.kind == "reg":
            if "." in t.text and not t.text.startswith('%"'):
                if t.text[1:] not in SPECIALS:
                    raise ISAError(f"unknown special register {t.text!r}; expected one of "
                                   f"{', '.join('%' + s for s in SPECIALS)}", self.span(t.col, t.end))
                self.i += 1
                return Special(t.text[1:])
            return self.reg()
        if t is not None and t.kind == "sym":
            self.i += 1
            return Sym(self._string(Tok(t.kind, t.text[1:], t.col + 1, t.end)))
        if t is not None and (t.kind in ("num", "hex") or t.text == "-"
                              or t.text in ("inf", "nan", "true", "false")):
            return Imm(self.value())
        raise self.error("an operand (%register, %special, $symbol or immediate)", t)

    def addr(self) -> Addr:
        """`[buf]`, `[buf + %r]`, `[buf + %r + 4]`, `[buf - 2]`."""
        self.punct("[")
        buffer = self.name("a buffer name")
        index, offset = None, 0
        while not self.accept("]"):
            if self.accept("+"):
                sign = 1
            elif self.accept("-"):
                sign = -1
            else:
                raise self.error("'+', '-' or ']' in a memory operand")
            if self.at("reg") and sign == 1 and index is None:
                index = self.reg()
            else:
                offset += sign * self._plain_int("an index register or integer offset")
        return Addr(buffer, index, offset)
