"""Kernel documents: the schema, the TOML/YAML/JSON translators and source positions.

Every error must be a DocumentError pointing at the right file:line:col with the right
text underlined; every body character must map back to the file character it came from;
no input, however malformed, may raise anything else.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterator

import pluggy
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from hologram.core import hookspecs
from hologram.core.errors import DocumentError, Span
from hologram.core.types import Affine, DType
from hologram.dsl import builtin
from hologram.dsl.document import KernelDef
from hologram.dsl.locators import json_places
from hologram.dsl.positions import SourceText
from hologram.dsl.schema import RESERVED, kernels_from_mapping, parse_type
from hologram.dsl.translators import parse_json, parse_toml, parse_yaml
from hologram.dsl.yaml_scalars import yaml_scalar_chars

from repo_paths import DOCS

PARSERS: dict[str, Callable[[str, str], list[KernelDef]]] = {"toml": parse_toml, "yaml": parse_yaml, "json": parse_json}

SOFTMAX_TOML = '''\
[kernel]
name = "softmax"
version = "1.0.0"
summary = "Numerically stable softmax of a vector"
inputs  = { x = "f32[n]" }
outputs = { y = "f32[n]" }
body = """
m = max(x)
e = exp(x - m)
y = e / sum(e)
"""
'''

SOFTMAX_YAML = '''\
kernel:
  name: softmax
  version: 1.0.0
  summary: Numerically stable softmax of a vector
  inputs: {x: "f32[n]"}
  outputs:
    y: f32[n]
  body: |
    m = max(x)
    e = exp(x - m)
    y = e / sum(e)
'''

SOFTMAX_JSON = '''\
{"kernel": {
  "name": "softmax",
  "version": "1.0.0",
  "summary": "Numerically stable softmax of a vector",
  "inputs": {"x": "f32[n]"},
  "outputs": {"y": "f32[n]"},
  "body": "m = max(x)\\ne = exp(x - m)\\ny = e / sum(e)\\n"
}}
'''

MULTI_TOML = '''\
[[kernels]]
name = "gemm"
version = "1.2.0-rc.1"
inputs  = { alpha = "f32", a = "f32[m, k]", b = "f32[k, n]" }
outputs = { c = "f32[m, n]" }
body = "c[i, j] = alpha * sum(a[i, p] * b[p, j], p)"

[[kernels]]
name = "stencil"
version = "0.1.0"
inputs.x = "u8[4, n - 2]"
outputs.y = "f64[2*n + 1]"
body = \'\'\'
y[i] = f64(i)
\'\'\'
'''

MULTI_YAML = '''\
kernels:
- name: gemm
  version: 1.2.0-rc.1
  inputs: {alpha: f32, a: "f32[m, k]", b: "f32[k, n]"}
  outputs: {c: "f32[m, n]"}
  body: "c[i, j] = alpha * sum(a[i, p] * b[p, j], p)"
- name: stencil
  version: 0.1.0
  inputs:
    x: u8[4, n - 2]
  outputs:
    y: f64[2*n + 1]
  body: |
    y[i] = f64(i)
'''

MULTI_JSON = json.dumps({"kernels": [
    {"name": "gemm", "version": "1.2.0-rc.1",
     "inputs": {"alpha": "f32", "a": "f32[m, k]", "b": "f32[k, n]"}, "outputs": {"c": "f32[m, n]"},
     "body": "c[i, j] = alpha * sum(a[i, p] * b[p, j], p)"},
    {"name": "stencil", "version": "0.1.0", "inputs": {"x": "u8[4, n - 2]"},
     "outputs": {"y": "f64[2*n + 1]"}, "body": "y[i] = f64(i)\n"},
]}, indent=2)

VALID = [("toml", SOFTMAX_TOML), ("yaml", SOFTMAX_YAML), ("json", SOFTMAX_JSON),
         ("toml", MULTI_TOML), ("yaml", MULTI_YAML), ("json", MULTI_JSON)]


def essence(k: KernelDef) -> tuple:
    """A kernel without its positions."""
    params = lambda ps: tuple((p.name, p.dtype, p.shape) for p in ps)  # noqa: E731
    return k.name, k.version, k.summary, params(k.inputs), params(k.outputs), k.body


def char_at(span: Span) -> str:
    """The file character a span starts at ('' past the end of its line)."""
    line = span.source.splitlines()[span.line - 1]
    return line[span.col - 1:span.col]


def underlined(span: Span) -> str:
    line = span.source.splitlines()[span.line - 1]
    end = span.end_col if span.end_line in (None, span.line) and span.end_col else len(line) + 1
    return line[span.col - 1:max(end, span.col + 1) - 1]


def error(fmt: str, text: str, file: str | None = None) -> DocumentError:
    with pytest.raises(DocumentError) as info:
        PARSERS[fmt](text, file or f"doc.{fmt}")
    return info.value


def assert_exact(k: KernelDef) -> None:
    """Every character of the body maps to the identical character of the file."""
    for n, line in enumerate(k.body.split("\n"), start=1):
        for col, ch in enumerate(line, start=1):
            assert char_at(k.origin.span(n, col)) == ch, (n, col, line)


# --- valid documents --------------------------------------------------------------------


def test_softmax_is_the_same_kernel_in_every_format():
    kernels = [PARSERS[fmt](text, f"softmax.{fmt}") for fmt, text in VALID[:3]]
    assert [len(ks) for ks in kernels] == [1, 1, 1]
    first = essence(kernels[0][0])
    assert all(essence(ks[0]) == first for ks in kernels)
    n = Affine.of("n")
    assert first == ("softmax", "1.0.0", "Numerically stable softmax of a vector",
                     (("x", DType.F32, (n,)),), (("y", DType.F32, (n,)),),
                     "m = max(x)\ne = exp(x - m)\ny = e / sum(e)\n")


def test_several_kernels_per_file_in_every_format():
    results = [[essence(k) for k in PARSERS[fmt](text, "multi")] for fmt, text in VALID[3:]]
    assert results[0] == results[1] == results[2]
    gemm, stencil = results[0]
    m, k, n = (Affine.of(s) for s in "mkn")
    assert gemm[:2] == ("gemm", "1.2.0-rc.1") and gemm[2] == ""
    assert gemm[3] == (("alpha", DType.F32, ()), ("a", DType.F32, (m, k)), ("b", DType.F32, (k, n)))
    assert stencil[3] == (("x", DType.U8, (Affine.of(4), n - 2)),)
    assert stencil[4] == (("y", DType.F64, (2 * n + 1,)),)


@pytest.mark.parametrize("text", [
    # sub-tables and dotted keys
    '[kernel]\nname = "k"\nversion = "1.0.0"\nbody = "y = x"\n[kernel.inputs]\nx = "f32[n]"\n[kernel.outputs]\ny = "f32[n]"\n',
    '[kernel]\nname = "k"\nversion = "1.0.0"\ninputs.x = "f32[n]"\noutputs.y = "f32[n]"\nbody = "y = x"\n',
    'kernel.name = "k"\nkernel.version = "1.0.0"\nkernel.inputs = { x = "f32[n]" }\nkernel.outputs = { y = "f32[n]" }\n'
    'kernel.body = "y = x"\n',
    'kernel = { name = "k", version = "1.0.0", inputs = { x = "f32[n]" }, outputs = { y = "f32[n]" }, body = "y = x" }\n',
    'kernels = [\n  { name = "k", version = "1.0.0", inputs = { x = "f32[n]" }, outputs = { y = "f32[n]" }, body = "y = x" },\n]\n',
    '[[kernels]]\nname = "k"\nversion = "1.0.0"\nbody = "y = x"\n[kernels.inputs]\nx = "f32[n]"\n[kernels.outputs]\ny = "f32[n]"\n',
])
def test_toml_spellings_of_one_kernel(text):
    k, = parse_toml(text, "k.toml")
    n = Affine.of("n")
    assert essence(k) == ("k", "1.0.0", "", (("x", DType.F32, (n,)),), (("y", DType.F32, (n,)),), "y = x")
    assert char_at(k.origin.span(1, 1)) == "y" and char_at(k.inputs[0].span) == "x"


def test_plain_python_mappings():
    doc = {"kernel": {"name": "k", "version": "1.0.0", "inputs": {}, "outputs": {"y": "i32[4]"},
                      "body": "a = 1\ny[i] = i32(i) + a"}}
    k, = kernels_from_mapping(doc, file="<k>")
    assert essence(k)[4] == (("y", DType.I32, (Affine.of(4),)),)
    span = k.origin.span(2, 8, 11)  # positions point into the body itself
    assert (span.file, span.line, span.col, underlined(span)) == ("<k>", 2, 8, "i32")
    with pytest.raises(DocumentError, match="did you mean 'version'"):
        kernels_from_mapping({"kernel": {**doc["kernel"], "verison": "1"}})


def test_yaml_anchors_aliases_and_merge_keys():
    text = '''\
kernels:
- &base
  name: a
  version: 1.0.0
  inputs: &io {x: "f32[n]"}
  outputs: {y: "f32[n]"}
  body: y = x
- <<: *base
  name: b
  inputs: *io
'''
    a, b = parse_yaml(text, "k.yaml")
    assert essence(a)[1:] == essence(b)[1:] and (a.name, b.name) == ("a", "b")
    assert b.inputs[0].span.line == 5  # an alias points at its anchor


@pytest.mark.parametrize("text, dtype, shape", [
    ("f32", DType.F32, ()),
    ("bool", DType.BOOL, ()),
    ("f32[n]", DType.F32, ("n",)),
    ("f32[m, k]", DType.F32, ("m", "k")),
    ("u8[4, n - 2]", DType.U8, (4, Affine.of("n") - 2)),
    ("f32[2*n + 1]", DType.F32, (2 * Affine.of("n") + 1,)),
    ("  i64 [ n*3 , 0 ]  ", DType.I64, (3 * Affine.of("n"), 0)),
    ("f16[(n + 1)*2 - n]", DType.F16, (Affine.of("n") + 2,)),
    ("u64[n - n + 7, -m + 2*k]", DType.U64, (7, 2 * Affine.of("k") - Affine.of("m"))),
    ("i8[pi, e]", DType.I8, ("pi", "e")),  # constants are not reserved
    ("f64[1, 2, 3, 4, 5]", DType.F64, (1, 2, 3, 4, 5)),
    # the 64-bit extremes
    ("f32[09223372036854775807]", DType.F32, (2**63 - 1,)),
    ("f32[n - 9223372036854775807 - 1, 9223372036854775807*n]", DType.F32,
     (Affine.of("n") - 2**63, (2**63 - 1) * Affine.of("n"))),
])
def test_parse_type(text, dtype, shape):
    assert parse_type(text) == (dtype, tuple(Affine.of(d) for d in shape))


def test_every_example_in_the_documents_guide_parses():
    guide = (DOCS / "documents.md").read_text()
    examples = re.findall(r"```(toml|yaml|json)\n(.*?)```", guide, re.S)
    assert {fmt for fmt, _ in examples} == set(PARSERS)
    for fmt, text in examples:
        assert PARSERS[fmt](text, f"guide.{fmt}")


def test_translators_are_registered_through_the_hook():
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(builtin)
    found: list[hookspecs.Translator] = []
    pm.hook.hologram_register_translators(register=found.append)
    assert {t.name: t.extensions for t in found} == {"toml": (".toml",), "yaml": (".yaml", ".yml"),
                                                     "json": (".json",)}
    assert all(essence(t.parse(text, "x")[0]) == essence(parse_toml(SOFTMAX_TOML, "x")[0])
               for t in found for fmt, text in VALID[:3] if t.name == fmt)


def test_reserved_names_are_the_function_vocabulary_and_the_keywords():
    functions = pytest.importorskip("hologram.dsl.functions")
    keywords = {name for name, what in RESERVED.items() if what == "a keyword"}
    assert keywords == {"and", "or", "not", "true", "false", "True", "False"}
    builtins = {name for name, what in RESERVED.items() if what == "a built-in"}
    # the analyzer reads len(x) as a shape, any() and all() as counts: none is in the function table
    assert builtins == {"len", "any", "all"} and not builtins & set(functions.FUNCTIONS)
    assert set(functions.FUNCTIONS) == set(RESERVED) - keywords - builtins


# --- errors -----------------------------------------------------------------------------

SCALE = '''\
[kernel]
name = "scale"
version = "1.0.0"
summary = "y = alpha * x"
inputs = { alpha = "f32", x = "f32[n]" }
outputs = { y = "f32[n]" }
body = """
y = alpha * x
"""
'''


def edit(old: str, new: str, text: str = SCALE) -> str:
    assert old in text
    return text.replace(old, new, 1)


# (format, document, line or (line, column), underlined text, message fragment); without a
# column, the column is where the underlined text first occurs on that line.
ERRORS = [
    # syntax
    ("toml", edit('"scale"', "scale"), 2, "s", "invalid TOML: invalid value"),
    ("toml", edit("[kernel]", "[kernel"), (1, 8), "", "invalid TOML: expected ']' at the end of a table declaration"),
    ("toml", edit('version = "1.0.0"\n', 'version = "1.0.0"\nname = "again"\n'), (4, 15), "", "invalid TOML: cannot overwrite a value"),
    ("toml", edit("\n", "\r\n").replace('"scale"', "scale"), 2, "s", "invalid TOML: invalid value"),
    ("yaml", SOFTMAX_YAML.replace("  version", " version"), 3, "v", "invalid YAML: expected <block end>"),
    ("yaml", SOFTMAX_YAML.replace("{x: ", "{x: 'f32[n]}"), (11, 20), "", "invalid YAML: found unexpected end of stream"),
    ("yaml", SOFTMAX_YAML.replace("softmax", "soft\x07max"), 2, "\x07", "invalid YAML: special characters"),
    ("json", SOFTMAX_JSON.replace('"1.0.0",', '"1.0.0",,'), (3, 22), ",", "invalid JSON: expecting property name"),
    ("json", SOFTMAX_JSON.replace('"softmax"', "'softmax'"), 2, "'", "invalid JSON"),
    # structure
    ("toml", edit('name = "scale"', 'nmae = "scale"'), 2, "nmae", "unknown key 'nmae' in [kernel]; did you mean 'name'?"),
    ("toml", edit("summary", "summery"), 4, "summery", "unknown key 'summery' in kernel 'scale'; did you mean 'summary'?"),
    ("toml", edit("[kernel]", "[kernal]"), 1, "kernal", "unknown key 'kernal' at the top level of the document; did you mean 'kernel'?"),
    ("toml", SCALE + "[kernels]\n", 10, "kernels", "either one 'kernel' or a 'kernels' array, not both"),
    ("toml", "# nothing here\n", 1, "#", "no kernel in this document"),
    ("toml", edit("[kernel]", "[kernels]"), 1, "[kernels]", "'kernels' must be an array of tables"),
    ("toml", "kernels = []\n", 1, "[]", "'kernels' is empty"),
    ("toml", "kernel = 3\n", 1, "3", "'kernel' must be a table of kernel keys, got an integer"),
    ("toml", "kernels = [1]\n", 1, "1", "kernel #1 must be a table"),
    ("toml", edit('body = """\ny = alpha * x\n"""\n', ""), 1, "[kernel]", "kernel 'scale' is missing the required key 'body'"),
    ("toml", edit('inputs = { alpha = "f32", x = "f32[n]" }\n', ""), 1, "[kernel]", "missing the required key 'inputs'"),
    ("yaml", SOFTMAX_YAML.replace("  version: 1.0.0\n", ""), 2, "name: softmax", "missing the required key 'version'"),
    ("json", SOFTMAX_JSON.replace('  "name": "softmax",\n', ""), (1, 12), "{", "missing the required key 'name'"),
    # value types
    ("toml", edit('"scale"', "5"), 2, "5", "'name' of [kernel] must be a string, got an integer"),
    ("toml", edit('"1.0.0"', "1.0"), 3, "1.0", "'version' of kernel 'scale' must be a string, got a float"),
    ("toml", edit('"y = alpha * x"', '["a"]'), 4, '["a"]', "'summary' of kernel 'scale' must be a string, got an array"),
    ("toml", edit('{ alpha = "f32", x = "f32[n]" }', '"x"'), 5, '"x"', "'inputs' of kernel 'scale' must be a table"),
    ("toml", edit('{ y = "f32[n]" }', '["y"]'), 6, '["y"]', "'outputs' of kernel 'scale' must be a table"),
    ("toml", edit('body = """\ny = alpha * x\n"""', "body = 3"), 7, "3", "'body' of kernel 'scale' must be a string"),
    ("toml", edit('"f32[n]" }', '3 }'), (5, 31), "3", "the type of input 'x' must be a string"),
    ("yaml", SOFTMAX_YAML.replace("version: 1.0.0", "version: 1.0"), 3, "1.0", "must be a string, got a float"),
    ("yaml", SOFTMAX_YAML.replace("inputs: {", "inputs: [").replace('"}', '"]'), 5, '[x: "f32[n]"]', "must be a mapping"),
    ("json", SOFTMAX_JSON.replace('"1.0.0"', "1"), 3, "1", "must be a string, got a number"),
    ("json", SOFTMAX_JSON.replace('{"x": "f32[n]"}', "null"), 5, "null", "must be an object of names to type strings, got a null"),
    ("yaml", "- 1\n", 1, "- 1", "expected a mapping with a 'kernel' or 'kernels' key at the top of the document, got a sequence"),
    ("yaml", "# only a comment\n", 1, "#", "empty YAML document"),
    ("json", "[]", 1, "[]", "expected an object with a 'kernel' or 'kernels' key at the top of the document, got an array"),
    # names
    ("toml", edit('"scale"', '"2fast"'), 2, '"2fast"', "invalid kernel name '2fast': expected an identifier"),
    ("toml", edit("x = ", "x-y = "), 5, "x-y", "invalid input name 'x-y'"),
    ("toml", edit("{ y =", '{ "my out" ='), 6, '"my out"', "invalid output name 'my out'"),
    ("toml", edit("alpha =", "sum ="), 5, "sum", "input name 'sum' is reserved: it is a reduction"),
    ("toml", edit("{ y =", "{ f32 ="), 6, "f32", "output name 'f32' is reserved: it is a type name"),
    ("toml", edit("alpha =", "and ="), 5, "and", "input name 'and' is reserved: it is a keyword"),
    ("toml", edit("{ y =", "{ x ="), (6, 13), "x", "'x' is declared both as an input and as an output"),
    ("toml", edit('alpha = "f32"', 'n = "i64"'), (5, 32), "n", "shape symbol 'n' in the type of input 'x' has the same name as input 'n'"),
    ("toml", MULTI_TOML.replace('"stencil"', '"gemm"'), 9, '"gemm"', "duplicate kernel name 'gemm'"),
    ("yaml", MULTI_YAML.replace("stencil", "gemm"), 7, "gemm", "duplicate kernel name 'gemm'"),
    ("yaml", SOFTMAX_YAML.replace("  summary:", "  name: again\n  summary:"), 4, "name", "duplicate key 'name'"),
    ("json", SOFTMAX_JSON.replace('"summary"', '"name"'), 4, '"name"', "duplicate key 'name'"),
    # versions
    ("toml", edit('"1.0.0"', '"1.0"'), 3, '"1.0"', "invalid version '1.0' for kernel 'scale': expected a semantic version"),
    ("toml", edit('"1.0.0"', '"01.0.0"'), 3, '"01.0.0"', "invalid version"),
    ("toml", edit('"1.0.0"', '"v1.0.0"'), 3, '"v1.0.0"', "invalid version"),
    ("toml", edit('"1.0.0"', '"1.0.0-"'), 3, '"1.0.0-"', "invalid version"),
    # type strings: the offending part of the string is underlined
    ("toml", edit('"f32[n]" }', '"f23[n]" }'), 5, "f23", "unknown element type 'f23'; did you mean 'f32'?"),
    ("toml", edit('"f32[n]" }', '"float32[n]" }'), 5, "float32", "unknown element type 'float32'; did you mean 'f32'?"),
    ("toml", edit('"f32[n]" }', '"c64[n]" }'), 5, "c64", "complex element type 'c64' is not supported"),
    ("toml", edit('"f32[n]" }', '"complex128[n]" }'), 5, "complex128", "complex element type 'complex128'"),
    ("toml", edit('"f32[n]" }', '"f32[n" }'), (5, 37), '"', "expected ',' or ']' after a dimension in type 'f32[n', got the end"),
    ("toml", edit('"f32[n]" }', '"f32[]" }'), 5, "]", "expected a dimension in type 'f32[]', got ']'"),
    ("toml", edit('"f32[n]" }', '"f32[n,]" }'), 5, "]", "expected a dimension"),
    ("toml", edit('"f32[n]" }', '"f32[n*m]" }'), 5, "n*m", "dimension 'n*m' in type 'f32[n*m]' is not affine"),
    ("toml", edit('"f32[n]" }', '"f32[2, 2*n*m + 1]" }'), 5, "2*n*m", "is not affine"),
    ("toml", edit('"f32[n]" }', '"f32[-1]" }'), 5, "-1", "dimension -1 is negative"),
    ("toml", edit('"f32[n]" }', '"f32[3 - 5]" }'), 5, "3 - 5", "dimension -2 is negative"),
    # integers past 64 bits: the verifier refused them without a position (found by fuzzing)
    ("toml", edit('"f32[n]" }', '"f32[99999999999999999999999]" }'), 5, "99999999999999999999999",
     "the integer 99999999999999999999999 in type 'f32[99999999999999999999999]' does not fit in 64 bits"),
    ("toml", edit('"f32[n]" }', '"f32[n, 2 + 9223372036854775808*n]" }'), 5, "9223372036854775808",
     "the integer 9223372036854775808 in type"),
    ("toml", edit('"f32[n]" }', '"f32[' + "9" * 5000 + ']" }'), 5, "9" * 5000,
     "the integer 99999999999999999...99999999999999999 (5000 digits) in type"),
    ("toml", edit('"f32[n]" }', '"f32[4, 4294967296*4294967296]" }'), 5, "4294967296*4294967296",
     "'4294967296*4294967296' in type 'f32[4, 4294967296*4294967296]' is 18446744073709551616, beyond 64 bits"),
    ("toml", edit('"f32[n]" }', '"f32[n - 9223372036854775807 - 2]" }'), 5, "n - 9223372036854775807 - 2",
     "is n - 9223372036854775809, beyond 64 bits"),
    ("toml", edit('"f32[n]" }', '"f32[-(-9223372036854775807 - 1)]" }'), 5, "-(-9223372036854775807 - 1)",
     "is 9223372036854775808, beyond 64 bits"),
    ("toml", edit('"f32[n]" }', '"f32[n/2]" }'), 5, "/", "'/' is not allowed in a dimension"),
    ("toml", edit('"f32[n]" }', '"f32[n // 2]" }'), 5, "n // 2", "dimension 'n // 2' in type 'f32[n // 2]' is not affine"),
    ("toml", edit('{ y = "f32[n]" }', '{ y = "f32[n // 0]" }'), 6, "n // 0", "'//' divides by a positive integer"),
    ("toml", edit('"f32[n]" }', '"f32[n]x" }'), (5, 38), "x", "unexpected 'x' after ']'"),
    ("toml", edit('"f32[n]" }', '"f32 n" }'), (5, 36), "n", "unexpected 'n' after the element type"),
    ("toml", edit('"f32[n]" }', '"[n]" }'), 5, "[", "must start with an element type"),
    ("toml", edit('"f32[n]" }', '"f32[n$]" }'), 5, "$", "unexpected character '$'"),
    ("toml", edit('"f32[n]" }', '"f32[(n + 1]" }'), 5, "]", "expected ')'"),
    ("toml", edit('"f32[n]" }', '"" }'), (5, 32), '"', "empty type"),
    ("toml", edit('"f32[n]" }', '"f32[sum]" }'), 5, "sum", "shape symbol 'sum' in type 'f32[sum]' is reserved"),
    ("toml", edit('"f32[n]" }', "'f32[n * m]' }"), 5, "n * m", "is not affine"),
    ("yaml", SOFTMAX_YAML.replace('{x: "f32[n]"}', '{x: "f32[n*m]"}'), 5, "n*m", "is not affine"),
    ("yaml", SOFTMAX_YAML.replace('"f32[n]"', "'f32[n,,]'"), (5, 22), ",", "expected a dimension"),
    ("json", SOFTMAX_JSON.replace('{"x": "f32[n]"}', '{"x": "f32[\\u006e*m]"}'), 5, "\\u006e*m", "is not affine"),
    ("toml", MULTI_TOML.replace("u8[4, n - 2]", "u8[4, n - two*m]"), 11, "two*m", "dimension 'two*m'"),
    # outputs
    ("toml", edit('{ y = "f32[n]" }', "{}"), 6, "{}", "kernel 'scale' declares no outputs"),
]


@pytest.mark.parametrize("fmt, text, line, underline, fragment", ERRORS)
def test_document_errors(fmt, text, line, underline, fragment):
    err = error(fmt, text)
    line, col = line if isinstance(line, tuple) else (line, None)
    source_line = text.splitlines()[line - 1]
    col = col or source_line.index(underline) + 1
    assert (err.span.file, err.span.line, err.span.col) == (f"doc.{fmt}", line, col), err.render()
    assert fragment in err.message, err.render()
    if underline:
        assert underlined(err.span) == underline, err.render()
    rendered = str(err)
    assert rendered.startswith(f"doc.{fmt}:{line}:{col}: error: ")
    assert f"{line:>4} | {source_line}" in rendered and "^" in rendered


def test_an_error_renders_like_a_compiler_diagnostic():
    err = error("toml", edit('"f32[n]" }', '"f23[n]" }'), file="kernels/scale.toml")
    assert str(err) == (
        "kernels/scale.toml:5:32: error: unknown element type 'f23'; did you mean 'f32'?\n"
        '   5 | inputs = { alpha = "f32", x = "f23[n]" }\n'
        "     |                                ^^^\n"
        "  hint: element types: bool, i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64")


def test_a_complex_type_is_refused_as_complex_not_as_a_near_name():
    err = error("toml", edit('"f32[n]" }', '"c64[n]" }'))
    assert err.message == ("complex element type 'c64' is not supported: the element types are bool, i8, i16, i32, "
                           "i64, u8, u16, u32, u64, f16, f32 and f64")
    assert err.hint == "pass a complex array as two real arrays, x.real and x.imag (np.ascontiguousarray each)"


def test_toml_syntax_errors_count_lines_like_the_file():
    """The TOML reader works on a CRLF-folded view of the text; spans refer to the file."""
    text = "\ufeff" + edit('"scale"', "scale").replace("\n", "\r\n")
    err = error("toml", text)
    assert (err.span.line, err.span.col, underlined(err.span)) == (2, 8, "s")


@pytest.mark.parametrize("fmt, text", [
    ("toml", "a = " + "[" * 1500 + "]" * 1500),
    ("yaml", "a: " + "[" * 900 + "]" * 900),
    ("yaml", "a: " + "{a: " * 100000),
    ("json", '{"a": ' + "[" * 100000 + "]" * 100000 + "}"),
])
def test_deeply_nested_documents(fmt, text):
    err = error(fmt, text)
    assert "nested too deeply" in err.message and err.span.line == 1


@pytest.mark.parametrize("fmt, text", [("toml", "a = " + "1" * 5000), ("json", '{"a": ' + "1" * 5000 + "}")])
def test_numbers_beyond_the_digit_limit(fmt, text):
    err = error(fmt, text)
    assert "5000 digits" in err.message and err.span.col == text.index("1") + 1


@pytest.mark.parametrize("text, fragment, line", [
    ("a: &a [*a]\n", "contains an alias of itself", 1),
    ("? [a]\n: 1\n", "a key must be a string, not a sequence", 1),
    ("a: {<<: 5}\n", "merge key ('<<') needs a mapping", 1),
    ('a: "\\U00110000"\n', "beyond U+10FFFF", 1),
    ("a: *nothing\n", "invalid YAML: found undefined alias", 1),
    ("a: 1\n---\nb: 2\n", "invalid YAML: expected a single document in the stream, but found another document", 2),
])
def test_yaml_specific_errors(text, fragment, line):
    err = error("yaml", text)
    assert fragment in err.message and err.span.line == line, err.render()


def test_text_must_be_a_string():
    with pytest.raises(DocumentError, match="expected the document's text as a str, got bytes"):
        parse_toml(b"[kernel]", "b.toml")


def test_parse_type_without_a_document_points_into_the_type():
    with pytest.raises(DocumentError) as info:
        parse_type("f32[m, n*k]", affine_only=True)
    span = info.value.span
    assert (span.col, span.end_col, underlined(span)) == (8, 11, "n*k")


# --- positions: BodyOrigin is exact -------------------------------------------------------

KERNEL_HEAD = 'name = "k"\nversion = "1.0.0"\ninputs = {}\noutputs = { y = "f32" }\n'


@pytest.mark.parametrize("body_toml, first_line, col_offset", [
    ('body = """\ny = 1\nz = 2"""', 7, 0),                 # newline after """ trimmed
    ('body = """y = 1\nz = 2"""', 6, 10),                   # content starts on the same line
    ("body = '''\ny = 1\nz = 2'''", 7, 0),
    ("body = '''  y = 1\nz = 2'''", 6, 10),
    ('body   =   "y = 1"', 6, 12),
    ("body = 'y = 1'", 6, 8),
    ('body = """\\\n     y = 1\n"""', 7, 5),                 # line-ending backslash trims the indentation
])
def test_toml_body_origins(body_toml, first_line, col_offset):
    text = "[kernel]\n" + KERNEL_HEAD + body_toml + "\n"
    for variant in (text, text.replace("\n", "\r\n"), "\ufeff" + text):
        k, = parse_toml(variant, "b.toml")
        assert k.origin.lines[0] == (first_line, col_offset)
        assert_exact(k)


def test_toml_escapes_keep_later_lines_exact():
    k, = parse_toml('[kernel]\n' + KERNEL_HEAD + 'body = """\na = "\\t"\nb = 2 \\u0041\ny = 3\n"""\n', "e.toml")
    assert k.body == 'a = "\t"\nb = 2 A\ny = 3\n'
    assert [char_at(k.origin.span(n, 1)) for n in (1, 2, 3)] == ["a", "b", "y"]
    assert k.origin.lines[:3] == ((7, 0), (8, 0), (9, 0))


@pytest.mark.parametrize("body_yaml, body", [
    ("body: |\n    y = 1\n      z = 2\n", "y = 1\n  z = 2\n"),
    ("body: |-\n    y = 1\n\n    z = 2\n\n", "y = 1\n\nz = 2"),
    ("body: |+\n    y = 1\n\n", "y = 1\n\n"),
    ("body: |2\n      y = 1\n    z = 2\n", "  y = 1\nz = 2\n"),
    ("body: &b !!str |\n    y = 1\n", "y = 1\n"),
    ("body: y = 1", "y = 1"),
    ("body:   'y = ''1'''", "y = '1'"),
    ('body: "y = 1\\n  z = 2"', "y = 1\n  z = 2"),
    ("body: y = 1\n\n    z = 2\n", "y = 1\nz = 2"),
    ("body: >\n    y = 1\n\n    z = 2\n", "y = 1\nz = 2\n"),
])
def test_yaml_body_origins(body_yaml, body):
    text = "kernel:\n" + "".join("  " + line + "\n" for line in KERNEL_HEAD.replace(" = ", ": ").splitlines()) + "  " + body_yaml
    text = text.replace("{ y: ", "{y: ")
    k, = parse_yaml(text, "b.yaml")
    assert k.body == body
    for n, line in enumerate(body.split("\n"), start=1):
        if line:
            assert char_at(k.origin.span(n, 1)) == line[0] or line[0] == "'", (n, line)
    if "'" not in body_yaml and "\\" not in body_yaml:
        assert_exact(k)


def test_json_body_lines_start_after_each_escape():
    k, = parse_json(SOFTMAX_JSON, "s.json")
    assert k.origin.lines == ((7, 11), (7, 23), (7, 39), (7, 55))
    assert_exact(k)
    err_span = k.origin.span(2, 5, 8)
    assert underlined(err_span) == "exp"


BODY_CHARS = "abcxyz019 =+-*/()[],.#_<>:%&|^~!?@$;"
body_lines = st.text(alphabet=BODY_CHARS, max_size=25)
first_lines = st.text(alphabet=BODY_CHARS.replace(" ", ""), min_size=1, max_size=25)


@given(lines=st.lists(body_lines, min_size=1, max_size=6), literal=st.booleans(), same_line=st.booleans(),
       pad=st.integers(0, 4), many=st.booleans())
def test_toml_multiline_body_positions_are_exact(lines, literal, same_line, pad, many):
    body = "\n".join(lines)
    quote = "'''" if literal else '"""'
    head = "[[kernels]]" if many else "[kernel]"
    text = (f"# generated\n{head}\n{KERNEL_HEAD}{' ' * pad}body{' ' * pad} = {quote}"
            f"{'' if same_line else chr(10)}{body}{quote}\n")
    k, = parse_toml(text, "g.toml")
    assert k.body == (body[1:] if same_line and body.startswith("\n") else body)
    assert_exact(k)


@given(first=first_lines, rest=st.lists(body_lines, max_size=6), indent=st.integers(1, 6), nest=st.integers(0, 4),
       chomp=st.sampled_from(["", "-", "+"]), many=st.booleans())
def test_yaml_block_body_positions_are_exact(first, rest, indent, nest, chomp, many):
    body = "\n".join([first, *rest])
    keys = KERNEL_HEAD.replace(" = ", ": ").replace("{ y: ", "{y: ").splitlines()
    pad = " " * (nest + 2)
    if many:
        text = "kernels:\n" + " " * nest + "- " + keys[0] + "\n" + "".join(pad + key + "\n" for key in keys[1:])
    else:
        text = "kernel:\n" + "".join(pad + key + "\n" for key in keys)
    text += pad + f"body: |{chomp}\n" + "".join(pad + " " * indent + line + "\n" for line in body.split("\n"))
    k, = parse_yaml(text, "g.yaml")
    assert k.body.rstrip() == body.rstrip()
    assert_exact(k)


# Characters str.splitlines (and so Span.excerpt) breaks lines at, which a kernel body,
# split at "\n" only, keeps inside a line: columns after one are not exact.
OTHER_BREAKS = set("\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


@given(lines=st.lists(st.text(max_size=12), min_size=1, max_size=5))
def test_json_body_line_starts_are_exact(lines):
    body = "\n".join(line.replace("\n", " ").replace("\r", " ") for line in lines)
    text = json.dumps({"kernel": {"name": "k", "version": "1.0.0", "inputs": {}, "outputs": {"y": "f32"},
                                  "body": body}}, ensure_ascii=False)
    k, = parse_json(text, "g.json")
    assert k.body == body
    for n, line in enumerate(body.split("\n"), start=1):
        if line and not set(line) & OTHER_BREAKS:
            encoded = json.dumps(line, ensure_ascii=False)[1:-1]
            assert char_at(k.origin.span(n, 1)) == encoded[0]
            if encoded == line:  # nothing escaped: every column is exact
                assert all(char_at(k.origin.span(n, c)) == ch for c, ch in enumerate(line, start=1))


# --- the JSON locator: every value found, every string decoded as the parser did -------------
# (TOML's reader keeps positions itself: tests/dsl/test_toml_reader.py holds it to tomllib)


def walk(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    yield path, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        yield from walk(v, path + (k,))


def check_json_places(text: str) -> None:
    data = json.loads(text)
    places = json_places(SourceText.of(text, "j"))
    for path, value in walk(data):
        place = places[path]
        assert json.loads(text[place.value[0]:place.value[1]]) == value
        if place.key is not None:
            assert json.loads(text[place.key[0]:place.key[1]]) == path[-1]
        if isinstance(value, str):
            assert place.text == value


def test_json_locator():
    for text in (SOFTMAX_JSON, MULTI_JSON, json.dumps({"a": ["\ud83d\ude00 \\ \"", 1e-3, None, True, {"": []}]}),
                 '{"s": "\\ud83d\\ude00 \\ud800 x", "n": -0.5e+3, "t" :\t[ ] }'):
        check_json_places(text)


def yaml_strings(node: Any) -> Iterator[Any]:
    if isinstance(node, yaml.ScalarNode):
        if node.tag.endswith(":str"):
            yield node
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from yaml_strings(item)
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            yield from yaml_strings(k)
            yield from yaml_strings(v)


@pytest.mark.parametrize("text", [
    "a: |\n  l1\n    l2\n\n  l3\n", "a: |-\n  l1\n\n\n", "a: |+\n  l1\n\n\n", "a: |2\n    l1\n  l2\n",
    "a:\n  b: |1\n    x\n   y\nc: 1\n", "a: >\n  l1\n  l2\n\n  l3\n    more\n  l4\n", "a: plain\n  multi\n\n  para\n",
    "a: 'single ''q''\n  next'\n", 'a: "dq \\t \\u00e9 \\\n   joined\n\n  x \\" y"\n', "- |\n x\n- >\n  y\n  z\n",
    "a: |  # comment\n  c\n", "a: |\r\n  crlf\r\n  two\r\n", "a: ''\n", "a: |\n", "a: x \u2028 y\n",
    "{a: b c,\n  d: [e, 'f', \"g\"]}\n", "? complex key\n: v\n",
])
def test_yaml_scalar_replay_matches_pyyaml(text):
    for node in yaml_strings(yaml.compose(text, Loader=yaml.SafeLoader)):
        assert yaml_scalar_chars(text, node) is not None, node


# --- fuzz: nothing but DocumentError --------------------------------------------------------

STRUCTURE = list("[]{}\"'=:,.-#|>&*!\n \t\\\r") + ["\"\"\"", "'''", "kernel", "\u2028", "\x00", "- ", ": "]


def parse_or_document_error(fmt: str, text: str) -> None:
    try:
        PARSERS[fmt](text, "fuzz")
    except DocumentError as err:
        err.render()


@given(text=st.text(max_size=200))
def test_arbitrary_text_raises_only_document_errors(text):
    for fmt in PARSERS:
        parse_or_document_error(fmt, text)


@given(pieces=st.lists(st.sampled_from(STRUCTURE + list("abn01")), max_size=60))
def test_structural_noise_raises_only_document_errors(pieces):
    text = "".join(pieces)
    for fmt in PARSERS:
        parse_or_document_error(fmt, text)


@st.composite
def mutated_documents(draw: st.DrawFn) -> tuple[str, str]:
    fmt, text = draw(st.sampled_from(VALID))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = draw(st.sampled_from(STRUCTURE + ["f32", "n*m", "1.0", "name", "inputs", "x", "["]))
        if op == "insert":
            text = text[:at] + piece + text[at:]
        elif op == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 8)):]
        else:
            text = text[:at] + piece + text[at + len(piece):]
    return fmt, text


@given(doc=mutated_documents())
def test_mutated_documents_raise_only_document_errors(doc):
    fmt, text = doc
    parse_or_document_error(fmt, text)
    if fmt == "json":
        try:
            json.loads(text)
        except ValueError:
            return
        try:
            check_json_places(text)
        except DocumentError as err:
            assert "duplicate key" in err.message
    else:
        try:
            node = yaml.compose(text, Loader=yaml.SafeLoader)
        except (yaml.YAMLError, ValueError):
            return
        for scalar in yaml_strings(node) if node is not None else ():
            if scalar.style in ("|", '"') or "\t" not in scalar.value:
                assert yaml_scalar_chars(text, scalar) is not None, scalar
