"""The kernel document schema, one for TOML, YAML and JSON, and the type-string parser.

A document holds one `kernel` table or a `kernels` array of tables. Each kernel has:

    name     identifier, unique in the file          version  "MAJOR.MINOR.PATCH[-pre]"
    summary  optional string                         inputs   table: name -> type string
    outputs  table: name -> type string (>= 1)       body     string: the statements
    reassociate  optional boolean: the opt-in to reordering float arithmetic

Every violation is a `DocumentError` whose span points at the offending key or value, or
inside a type string at the offending dimension. The schema sees documents as `Located`
trees (positions.py), so it is written once for every format; plain Python mappings are
accepted too, for kernels defined in code.
"""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Any, Callable, Mapping

import attrs

from hologram.core.dims import DimAlgebra, is_derived
from hologram.core.errors import DocumentError, HologramError, PluginError, Span, did_you_mean, in_words, shorten
from hologram.core.hookspecs import BodyKey
from hologram.core.instructions import OPCODES
from hologram.core.types import Affine, DType, Shape
from hologram.dsl.document import BodyOrigin, KernelDef, ParamSpec
from hologram.dsl.positions import Located

# Names with a meaning in kernel bodies cannot name a parameter or a shape symbol
# (docs/dsl.md, decision 20). The constants pi, e, inf, nan are not reserved: declaring
# one shadows the constant. Spelled out here (the functions that are one instruction:
# from the op table) rather than imported from functions.py so a translator does not
# load the analyzer's typing machinery; test_documents.py checks that the two lists agree.
_RESERVED_GROUPS = {
    "a keyword": "and or not true false True False",
    "a built-in": "len any all",
    "a type name (a cast)": " ".join(d.value for d in DType),
    "a function": " ".join(f.name for spec in OPCODES.values() for f in spec.dsl)
                  + " round sign clip isnan where relu gelu fma",
    "a reduction": "sum prod min max mean argmin argmax",
    "a scan": "cumsum cumprod",
    "an Atlas function": "atlas_class mirror degree neighbor is_unity bound_map resonance",
}
RESERVED: Mapping[str, str] = {name: what for what, names in _RESERVED_GROUPS.items() for name in names.split()}

KERNEL_KEYS: Mapping[str, str] = {
    "name": 'the kernel\'s name, an identifier such as "softmax"',
    "version": 'a semantic version string such as "1.0.0"',
    "summary": "one line describing the kernel (optional)",
    "inputs": 'a table of input names to type strings, such as { x = "f32[n]" } (may be empty)',
    "outputs": 'a table of output names to type strings, such as { y = "f32[n]" }',
    "body": "the kernel's statements, a string",
    "reassociate": "true to let the optimizer and backends reorder float sums, products, minima and maxima "
                   "(optional, default false; docs/dsl.md)",
}
REQUIRED = ("name", "version", "inputs", "outputs", "body")
TOP_KEYS = ("kernel", "kernels")

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NUMBER = r"(?:0|[1-9][0-9]*)"
_PRE_ID = r"(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
SEMVER = re.compile(rf"{_NUMBER}\.{_NUMBER}\.{_NUMBER}(?:-{_PRE_ID}(?:\.{_PRE_ID})*)?\Z")


# --- type strings -------------------------------------------------------------------

_DTYPE_ALIASES: Mapping[str, DType] = {
    **{d.np.name: d for d in DType},  # float32, int8, uint64, bool, ...
    "half": DType.F16, "single": DType.F32, "double": DType.F64, "float": DType.F64, "int": DType.I64,
    "uint": DType.U64, "long": DType.I64, "byte": DType.I8, "ubyte": DType.U8, "short": DType.I16,
    "ushort": DType.U16, "boolean": DType.BOOL, "bool_": DType.BOOL, "f2": DType.F16, "f4": DType.F32,
    "f8": DType.F64, "i1": DType.I8, "i2": DType.I16, "i4": DType.I32, "u1": DType.U8, "u2": DType.U16,
    "u4": DType.U32, "fp16": DType.F16, "fp32": DType.F32, "fp64": DType.F64,
}
_DTYPES = ", ".join(d.value for d in DType)
# complex spellings (ours would be c64, c128; numpy's complex64, c8, cfloat, cdouble): no element type is complex
_COMPLEX = re.compile(r"c\d+|complex\d*|c(?:float|double|longdouble)", re.IGNORECASE)
MAX_RANK = 32  # dimensions of an array (numpy 1's limit; docs/dsl.md, "Limits")
_INPUT_HINT = ("an input's dimensions are affine, such as 2*n + 1 or n - 2: the call solves the shape symbols "
               "from them (an output may use products and '//')")
_DIM_HINT = ("a dimension is an integer (4), a shape symbol (n), an affine expression such as 2*n + 1 or n - 2, "
             "or, for an output, a product (m*n) or floor division ((n + 1)//2) of those")
# A dimension's constant and coefficients are 64-bit integers, as the ISA holds them (the
# verifier refused wider ones, without a position in the document).
_I64_MIN, _I64_MAX = DType.I64.min, DType.I64.max
_I64_DIGITS = len(str(_I64_MAX))
_RANGE_HINT = "the integers of a dimension (its constant and coefficients) lie in -2**63 .. 2**63 - 1"
_TOKEN = re.compile(r"\s*(?:(?P<int>[0-9]+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>//|[][,+*()-])|(?P<bad>\S))")


@attrs.frozen
class _Tok:
    kind: str  # int name op bad end
    text: str
    start: int
    end: int

    def describe(self) -> str:
        return "the end of the type" if self.kind == "end" else repr(self.text)


def parse_type(text: str, span: Span | None = None,
               locate: Callable[[int, int], Span] | None = None, affine_only: bool = False) -> tuple[DType, Shape]:
    """`"f32[m, 2*n + 1]"` -> `(DType.F32, (Affine m, Affine 2n+1))`; a scalar has shape ().

    `span` is where `text` sits in its document; `locate(start, end)`, when given, maps a
    character range of `text` to its exact span, so errors underline the bad dimension.
    Without either, errors point into `text` itself. `affine_only` (an input's type)
    refuses products of symbols and `//`, which an output may use. Raises DocumentError.
    """
    if locate is None:
        def locate(start: int, end: int) -> Span:
            if span is not None:
                return span
            return Span("<type>", 1, start + 1, 1, max(end, start + 1) + 1, source=text)
    try:
        return _TypeParser(text, locate, affine_only).parse()
    except RecursionError:
        raise DocumentError(f"type {text!r} is nested too deeply", locate(0, len(text))) from None


class _TypeParser:
    """Recursive descent over `dtype [ '[' dim (',' dim)* ']' ]`, dims as affine sums."""

    def __init__(self, text: str, locate: Callable[[int, int], Span], affine_only: bool = False):
        self.text, self.locate, self.affine_only = text, locate, affine_only
        self.toks = [_Tok(m.lastgroup or "bad", m.group(m.lastgroup or "bad"), m.start(m.lastgroup), m.end(m.lastgroup))
                     for m in _TOKEN.finditer(text) if m.lastgroup]
        self.toks.append(_Tok("end", "", len(text.rstrip()), len(text.rstrip())))
        self.k = 0

    def fail(self, message: str, start: int, end: int, hint: str | None = None) -> DocumentError:
        return DocumentError(message, self.locate(start, end), hint=hint)

    def peek(self) -> _Tok:
        return self.toks[self.k]

    def take(self) -> _Tok:
        tok = self.toks[self.k]
        if tok.kind == "bad":
            if tok.text == "/":
                raise self.fail(f"'/' is not allowed in a dimension of type {self.text!r}: a dimension is an "
                                "integer; divide with '//'", tok.start, tok.end, hint=_DIM_HINT)
            raise self.fail(f"unexpected character {tok.text!r} in type {self.text!r}", tok.start, tok.end,
                            hint="a type is an element type, optionally with dimensions: f32, f32[n], f32[m, k]")
        self.k += 1
        return tok

    def parse(self) -> tuple[DType, Shape]:
        tok = self.take()
        if tok.kind == "end":
            raise self.fail("empty type: expected an element type such as 'f32', optionally with dimensions "
                            "such as 'f32[n]'", 0, len(self.text), hint=f"element types: {_DTYPES}")
        if tok.kind != "name":
            raise self.fail(f"type {self.text!r} must start with an element type such as 'f32', not {tok.describe()}",
                            tok.start, tok.end, hint=f"element types: {_DTYPES}")
        dtype = self.dtype(tok)
        tok = self.take()
        if tok.kind == "end":
            return dtype, ()
        if tok.text != "[":
            raise self.fail(f"unexpected {tok.describe()} after the element type in {self.text!r}; expected '[' "
                            "(dimensions) or the end of the type", tok.start, tok.end)
        dims = []
        while True:
            start = self.peek().start
            dim = self.sum()
            if dim.is_const and dim.const < 0:
                raise self.fail(f"dimension {dim} is negative in type {self.text!r}", start, self.toks[self.k - 1].end)
            dims.append(dim)
            if len(dims) > MAX_RANK:
                raise self.fail(f"type {self.text!r} has more than {MAX_RANK} dimensions; Hologram supports at most "
                                f"{MAX_RANK}", start, self.toks[self.k - 1].end)
            tok = self.take()
            if tok.text == "]":
                break
            if tok.text != ",":
                raise self.fail(f"expected ',' or ']' after a dimension in type {self.text!r}, got {tok.describe()}",
                                tok.start, tok.end)
        tok = self.take()
        if tok.kind != "end":
            raise self.fail(f"unexpected {tok.describe()} after ']' in type {self.text!r}", tok.start, len(self.text))
        return dtype, tuple(dims)

    def dtype(self, tok: _Tok) -> DType:
        try:
            return DType.parse(tok.text)
        except ValueError:
            if _COMPLEX.fullmatch(tok.text):  # no near name fits: c64 is not u64
                raise self.fail(f"complex element type {tok.text!r} is not supported: the element types are "
                                f"{in_words(d.value for d in DType)}", tok.start, tok.end,
                                hint="pass a complex array as two real arrays, x.real and x.imag "
                                     "(np.ascontiguousarray each)") from None
            alias = _DTYPE_ALIASES.get(tok.text) or _DTYPE_ALIASES.get(tok.text.lower())
            suggestion = (f"; did you mean {alias.value!r}?" if alias
                          else did_you_mean(tok.text, (d.value for d in DType)))
            raise self.fail(f"unknown element type {tok.text!r}{suggestion}", tok.start, tok.end,
                            hint=f"element types: {_DTYPES}") from None

    def in_range(self, value: Affine, start: int) -> Affine:
        """`value`, the part of the type from `start` to the last token taken, when its
        integers fit in 64 bits. Checked as each part is built, so none grows past that."""
        if all(_I64_MIN <= k <= _I64_MAX for k in (value.const, *(c for _, c in value.terms))):
            return value
        end = self.toks[self.k - 1].end
        raise self.fail(f"{self.text[start:end]!r} in type {shorten(self.text, 60)} is {value}, beyond 64 bits",
                        start, end, hint=_RANGE_HINT)

    def sum(self) -> Affine:
        start = self.peek().start
        value = self.product()
        while self.peek().text in ("+", "-"):
            op = self.take().text
            rhs = self.product()
            value = self.in_range(value + rhs if op == "+" else value - rhs, start)
        return value

    def product(self) -> Affine:
        """Products and floor divisions, as Python reads them (left to right): affine when a
        factor is a constant, else a derived dimension (hologram.core.dims: `m*n`, `(n + 1)//2`)."""
        start = self.peek().start
        value = self.unary()
        while self.peek().text in ("*", "//"):
            op = self.take().text
            rhs = self.unary()
            end = self.toks[self.k - 1].end
            if op == "//":
                if not rhs.is_const or rhs.const <= 0:
                    raise self.fail(f"in type {self.text!r}, '//' divides by a positive integer", start, end,
                                    hint=_DIM_HINT)
                result = DimAlgebra().floordiv(value, rhs.const)
            else:
                result = DimAlgebra().mul(value, rhs)
            if self.affine_only and any(is_derived(n) for n in result.symbols):
                what = "divides" if op == "//" else "multiplies shape symbols together"
                raise self.fail(f"dimension {self.text[start:end]!r} in type {self.text!r} is not affine: it {what}",
                                start, end, hint=_INPUT_HINT)
            value = self.in_range(result, start)
        return value

    def unary(self) -> Affine:
        if self.peek().text in ("+", "-"):
            start = self.peek().start
            negate = self.take().text == "-"
            value = self.unary()
            return self.in_range(-value, start) if negate else value
        tok = self.take()
        if tok.kind == "int":
            return Affine.of(self.literal(tok))
        if tok.kind == "name":
            if tok.text in RESERVED:
                raise self.fail(f"shape symbol {tok.text!r} in type {self.text!r} is reserved: it is "
                                f"{RESERVED[tok.text]} in kernel bodies", tok.start, tok.end,
                                hint="choose another name for the dimension")
            return Affine.of(tok.text)
        if tok.text == "(":
            value = self.sum()
            close = self.take()
            if close.text != ")":
                raise self.fail(f"expected ')' in type {self.text!r}, got {close.describe()}", close.start, close.end)
            return value
        raise self.fail(f"expected a dimension in type {self.text!r}, got {tok.describe()}", tok.start,
                        max(tok.end, tok.start + 1), hint=_DIM_HINT)

    def literal(self, tok: _Tok) -> int:
        """An integer token, at most 2**63 - 1. A longer digit string is refused before
        int() reads it: past 4300 digits Python refuses it with a ValueError."""
        digits = tok.text.lstrip("0") or "0"
        if len(digits) <= _I64_DIGITS and int(digits) <= _I64_MAX:
            return int(digits)
        shown = digits if len(digits) <= 40 else f"{digits[:17]}...{digits[-17:]} ({len(digits)} digits)"
        raise self.fail(f"the integer {shown} in type {shorten(self.text, 60)} does not fit in 64 bits", tok.start,
                        tok.end, hint=_RANGE_HINT)


# --- documents ----------------------------------------------------------------------


def kernels_from_mapping(doc: Located | Mapping[str, Any], file: str = "<mapping>", *,
                         keys: Mapping[str, BodyKey] = MappingProxyType({})) -> list[KernelDef]:
    """The kernels of a document, given as a `Located` tree (what the translators build)
    or as a plain mapping (`{"kernel": {"name": ..., ...}}`; positions are then unknown
    and body errors point into the body text itself, named `file`). `keys`: the document
    keys plugins handle in place of `body` (`Translator.parse`'s `keys`); without them a
    key such as `circuit` is an unknown key."""
    try:
        root = doc if isinstance(doc, Located) else located_from_python(doc, file)
    except RecursionError:
        raise DocumentError(f"{file}: the document is nested too deeply (or contains itself)") from None
    words = _Words.of(root)
    if not root.is_table:
        raise DocumentError(f"expected {_a(words.table)} with a 'kernel' or 'kernels' key at the top of the "
                            f"document, got {_a(root.kind)}", root.span)
    _check_keys(root, TOP_KEYS, "at the top level of the document")
    top = root.value
    if "kernel" in top and "kernels" in top:
        second = max(top["kernel"], top["kernels"], key=lambda v: _position(v.key_span or v.span))
        raise DocumentError("a document has either one 'kernel' or a 'kernels' array, not both",
                            second.key_span or second.span, hint="move the single kernel into the 'kernels' array")
    if "kernel" in top:
        one = top["kernel"]
        if not one.is_table:
            raise DocumentError(f"'kernel' must be {_a(words.table)} of kernel keys, got {_a(one.kind)}", one.span,
                                hint=f"several kernels go in {_a(words.array)} named 'kernels'")
        entries = [(one, "[kernel]" if words.table == "table" else "'kernel'")]
    elif "kernels" in top:
        many = top["kernels"]
        if not many.is_array:
            raise DocumentError(f"'kernels' must be {_a(words.array)} of {words.table}s, one per kernel, got "
                                f"{_a(many.kind)}", many.span,
                                hint="in TOML, start each kernel with [[kernels]] (double brackets); "
                                     "a single kernel can be a [kernel] table")
        if not many.value:
            raise DocumentError("'kernels' is empty: expected at least one kernel", many.span)
        entries = [(k, f"kernel #{i + 1}") for i, k in enumerate(many.value)]
    else:
        raise DocumentError(f"no kernel in this document: expected a 'kernel' {words.table} or a 'kernels' "
                            f"{words.array}", root.span,
                            hint='a document starts with [kernel] (TOML), kernel: (YAML) or {"kernel": ...} (JSON)')
    kernels: list[KernelDef] = []
    seen: dict[str, Located] = {}
    claimed = {k: b for k, b in keys.items() if k not in KERNEL_KEYS}  # never a key of the schema's own
    for table, where in entries:
        kdef = _kernel(table, where, words, file, claimed)
        if kdef.name in seen:
            first = seen[kdef.name]
            raise DocumentError(f"duplicate kernel name {kdef.name!r}", table.value["name"].span,
                                hint=f"the first kernel named {kdef.name!r} is at {first.span}")
        seen[kdef.name] = table.value["name"]
        kernels.append(kdef)
    return kernels


@attrs.frozen
class _Words:
    """The document format's own words for a mapping and a sequence."""

    table: str
    array: str

    @staticmethod
    def of(root: Located) -> "_Words":
        yaml, json = _Words("mapping", "sequence"), _Words("object", "array")
        # a TOML document is always a table; a top-level array is JSON's
        by_kind = {"mapping": yaml, "sequence": yaml, "object": json, "array": json}
        return by_kind.get(root.kind, _Words("table", "array"))


def _position(span: Span) -> tuple[int, int]:
    return span.line, span.col


def _a(word: str) -> str:
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def _check_keys(table: Located, allowed: tuple[str, ...] | Mapping[str, str], where: str) -> None:
    for key, value in table.value.items():
        if key not in allowed:
            raise DocumentError(f"unknown key {key!r} {where}{did_you_mean(key, allowed)}",
                                value.key_span or value.span, hint=f"expected one of: {', '.join(allowed)}")


def _kernel(table: Located, where: str, words: _Words, file: str, claimed: Mapping[str, BodyKey]) -> KernelDef:
    if not table.is_table:
        raise DocumentError(f"{where} must be {_a(words.table)} of kernel keys ({', '.join(KERNEL_KEYS)}), got "
                            f"{_a(table.kind)}", table.span)
    keys = table.value
    name = keys.get("name")
    if name is not None and name.is_string and IDENTIFIER.match(name.value):
        where = f"kernel {name.value!r}"
    _check_keys(table, {**KERNEL_KEYS, **{k: b.summary for k, b in claimed.items()}}, f"in {where}")
    body_key = _body_key(table, claimed)
    interface = body_key is not None and body_key.interface
    for key in REQUIRED:
        if key in ("inputs", "outputs") and interface:
            if key in keys:
                raise DocumentError(f"{where} takes its inputs and outputs from {body_key.key!r}: remove {key!r}",
                                    keys[key].key_span or keys[key].span,
                                    hint=f"{body_key.key!r} is {body_key.summary}")
        elif key not in keys and not (key == "body" and body_key is not None):
            others = "".join(f"; or {k!r}, {b.summary}" for k, b in claimed.items()) if key == "body" else ""
            raise DocumentError(f"{where} is missing the required key {key!r}", table.span,
                                hint=f"{key!r} is {KERNEL_KEYS[key]}{others}")
    name = _string(keys["name"], "name", where)
    if not IDENTIFIER.match(name.value):
        raise DocumentError(f"invalid kernel name {name.value!r}: expected an identifier (a letter or '_', then "
                            "letters, digits or '_')", name.span)
    version = _string(keys["version"], "version", where)
    if not SEMVER.match(version.value):
        raise DocumentError(f"invalid version {version.value!r} for {where}: expected a semantic version "
                            "MAJOR.MINOR.PATCH such as \"1.0.0\"", version.span,
                            hint='a pre-release may follow a hyphen: "1.0.0-rc.1"; numbers have no leading zeros')
    summary = _string(keys["summary"], "summary", where).value if "summary" in keys else ""
    inputs = outputs = ()
    if not interface:
        inputs = _params(keys["inputs"], "input", where, words)
        outputs = _params(keys["outputs"], "output", where, words)
        if not outputs:
            raise DocumentError(f"{where} declares no outputs; a kernel needs at least one", keys["outputs"].span,
                                hint=f"outputs is {KERNEL_KEYS['outputs']}")
        _check_param_names(keys["inputs"], keys["outputs"], inputs + outputs)
    key = "body" if body_key is None else body_key.key
    body = _string(keys[key], key, where, body_key.summary if body_key else None)
    reassociate = _boolean(keys["reassociate"], "reassociate", where).value if "reassociate" in keys else False
    kdef = KernelDef(name.value, version.value, summary, inputs, outputs, body.value,
                     _origin(body, file), table.span, reassociate)
    return kdef if body_key is None else _handed_over(body_key, kdef)


def _body_key(table: Located, claimed: Mapping[str, BodyKey]) -> BodyKey | None:
    """The plugin key that holds this kernel's body instead of `body`, if any; a kernel
    has one body."""
    used = [k for k in table.value if k in claimed or k == "body"]
    if len(used) > 1:
        second = max((table.value[k] for k in used), key=lambda v: _position(v.key_span or v.span))
        raise DocumentError(f"a kernel has one body: {' and '.join(map(repr, used))} cannot both be given",
                            second.key_span or second.span, hint="keep the one that holds this kernel")
    return claimed.get(used[0]) if used and used[0] != "body" else None


def _handed_over(body_key: BodyKey, header: KernelDef) -> KernelDef:
    """The kernel `body_key`'s plugin makes of `header` (its body: the key's string)."""
    try:
        kdef = body_key.build(header)
    except HologramError:
        raise
    except Exception as exc:  # a plugin's bug must not look like a crash of ours
        raise PluginError(f"the handler of document key {body_key.key!r} failed on kernel {header.name!r}: "
                          f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(kdef, KernelDef):
        raise PluginError(f"the handler of document key {body_key.key!r} returned {type(kdef).__name__}; "
                          "expected hologram.dsl.document.KernelDef")
    return kdef


def _boolean(value: Located, key: str, where: str) -> Located:
    if not isinstance(value.value, bool):
        raise DocumentError(f"'{key}' of {where} must be a boolean (true or false), got {_a(value.kind)}",
                            value.span, hint=f"{key!r} is {KERNEL_KEYS[key]}")
    return value


def _string(value: Located, key: str, where: str, summary: str | None = None) -> Located:
    if not value.is_string:
        scalar = not (value.is_table or value.is_array)
        raise DocumentError(f"'{key}' of {where} must be a string, got {_a(value.kind)}", value.span,
                            hint=f"{key!r} is {summary or KERNEL_KEYS[key]}" + ("; quote it" if scalar else ""))
    return value


def _params(table: Located, role: str, where: str, words: _Words) -> tuple[ParamSpec, ...]:
    if not table.is_table:
        raise DocumentError(f"'{role}s' of {where} must be {_a(words.table)} of names to type strings, got "
                            f"{_a(table.kind)}", table.span, hint=f"'{role}s' is {KERNEL_KEYS[role + 's']}")
    specs = []
    for name, value in table.value.items():
        key = value.key_span or value.span
        _check_name(name, role, key)
        if not value.is_string:
            raise DocumentError(f"the type of {role} {name!r} must be a string such as \"f32[n]\", got "
                                f"{_a(value.kind)}", value.span)
        dtype, shape = parse_type(value.value, value.span, value.sub_span, affine_only=role == "input")
        specs.append(ParamSpec(name, dtype, shape, _join(key, value.span)))
    return tuple(specs)


def _check_name(name: str, role: str, span: Span) -> None:
    if not IDENTIFIER.match(name):
        raise DocumentError(f"invalid {role} name {name!r}: expected an identifier (a letter or '_', then "
                            "letters, digits or '_')", span)
    if name in RESERVED:
        raise DocumentError(f"{role} name {name!r} is reserved: it is {RESERVED[name]} in kernel bodies", span,
                            hint=f"rename the {role}, e.g. {name}_ or {name}_{'in' if role == 'input' else 'out'}")


def _check_param_names(inputs: Located, outputs: Located, specs: tuple[ParamSpec, ...]) -> None:
    """Inputs, outputs and shape symbols share the body's namespace."""
    for name, value in outputs.value.items():
        if name in inputs.value:
            first = inputs.value[name]
            raise DocumentError(f"{name!r} is declared both as an input and as an output", value.key_span or value.span,
                                hint=f"the input is declared at {first.key_span or first.span}")
    declared = {**{n: ("input", v) for n, v in inputs.value.items()},
                **{n: ("output", v) for n, v in outputs.value.items()}}
    for spec in specs:
        role, typ = declared[spec.name]
        for symbol in sorted({s for dim in spec.shape for s in dim.symbols}):
            if symbol in declared:
                other, where = declared[symbol]
                dims = typ.value.find("[")
                at = re.search(rf"(?<![A-Za-z0-9_]){symbol}(?![A-Za-z0-9_])", typ.value[dims:])
                span = typ.sub_span(dims + at.start(), dims + at.end()) if at else typ.span
                raise DocumentError(f"shape symbol {symbol!r} in the type of {role} {spec.name!r} has the same name "
                                    f"as {other} {symbol!r}", span,
                                    hint=f"{other} {symbol!r} is declared at {where.key_span or where.span}; "
                                         "rename the parameter or the dimension")


def _join(key: Span, value: Span) -> Span:
    """`x = "f32[n]"` as one span when the key and its value share a line."""
    if key.file == value.file and key.line == value.line and value.col >= key.col:
        return Span(key.file, key.line, key.col, value.end_line, value.end_col, source=key.source)
    return key


def _origin(body: Located, file: str) -> BodyOrigin:
    if body.src is None:  # a plain mapping: the body is its own source
        return BodyOrigin(file, body.value, tuple((k + 1, 0) for k in range(body.value.count("\n") + 1)))
    return BodyOrigin(body.src.file, body.src.text, body.line_starts())


def located_from_python(data: Any, file: str) -> Located:
    """A plain Python value (mappings, lists, strings, numbers) as a `Located` tree;
    without source text every position is line 1, column 1 of `file`."""
    span = Span(file, 1, 1)
    kinds = ((bool, "boolean"), (str, "string"), (int, "integer"), (float, "float"),
             (Mapping, "table"), ((list, tuple), "array"), (type(None), "null"))

    def build(value: Any, key: bool) -> Located:
        word = next((w for t, w in kinds if isinstance(value, t)), type(value).__name__)
        if isinstance(value, Mapping):
            value = {str(k): build(v, True) for k, v in value.items()}
        elif isinstance(value, (list, tuple)):
            value = tuple(build(v, False) for v in value)
        return Located(word, value, span, span if key else None)

    return build(data, False)
