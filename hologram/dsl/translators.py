"""The builtin translators: TOML, YAML and JSON kernel documents to `KernelDef`s.

Registered by hologram.dsl.builtin (entry point `builtin_translators` in the `hologram`
group), which imports this module at the first document. Each translator reads its
format into one format-neutral `Located` tree (`positions.py`: every value with its
source position), turning syntax errors into `DocumentError`s with a span, and hands
that tree to the one schema all formats share (`schema.kernels_from_mapping`). TOML is
read in one pass by a reader that keeps positions (`toml_reader.py`); YAML by PyYAML's
node API (positions of its own, strings' characters replayed by `yaml_scalars.py`);
JSON by `json` (C, the syntax errors' wording), its positions found by `locators.py`.
"""

from __future__ import annotations

import contextlib
import json
import re
from types import MappingProxyType
from typing import Any, Callable, Iterator, Mapping

import attrs
import yaml

from hologram.core.errors import DocumentError, Span
from hologram.core.hookspecs import BodyKey
from hologram.dsl.document import KernelDef
from hologram.dsl.locators import json_places
from hologram.dsl.positions import Located, Path, Place, SourceText
from hologram.dsl.schema import kernels_from_mapping
from hologram.dsl.toml_reader import read_toml
from hologram.dsl.yaml_scalars import yaml_scalar_chars


NO_KEYS: Mapping[str, BodyKey] = MappingProxyType({})


def parse_toml(text: str, file: str = "<toml>", keys: Mapping[str, BodyKey] = NO_KEYS) -> list[KernelDef]:
    """The kernels of a TOML document; DocumentError (with a span) on anything malformed.
    `keys`: the document keys plugins handle in place of `body` (Translator.parse)."""
    src = _source(text, file)
    with _nesting(src):
        return kernels_from_mapping(read_toml(src), keys=keys)


def parse_yaml(text: str, file: str = "<yaml>", keys: Mapping[str, BodyKey] = NO_KEYS) -> list[KernelDef]:
    """The kernels of a YAML document (one document; PyYAML's node API, nothing is
    constructed but strings, numbers, mappings and sequences)."""
    src = _source(text, file)
    with _nesting(src):
        _check_flow_depth(src)
        try:
            node = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.MarkedYAMLError as err:
            raise _yaml_error(err, src) from None
        except yaml.reader.ReaderError as err:
            code = err.character if isinstance(err.character, int) else ord(err.character[:1] or "\0")
            raise DocumentError(f"invalid YAML: {err.reason} (found U+{code:04X})", src.span(err.position)) from None
        except (yaml.YAMLError, ValueError) as err:  # ValueError: a \U escape beyond U+10FFFF
            raise _value_error("YAML", err, src) from None
        if node is None:
            raise DocumentError("empty YAML document: expected a 'kernel' mapping or a 'kernels' sequence",
                                src.span(0))
        return kernels_from_mapping(_YamlBuilder(src).build(node), keys=keys)


def parse_json(text: str, file: str = "<json>", keys: Mapping[str, BodyKey] = NO_KEYS) -> list[KernelDef]:
    """The kernels of a JSON document (an object with a "kernel" or "kernels" key)."""
    src = _source(text, file)
    bom = 1 if text.startswith("\ufeff") else 0
    with _nesting(src):
        try:
            data = json.loads(text[bom:])
        except json.JSONDecodeError as err:
            raise DocumentError(f"invalid JSON: {_lower(err.msg)}", src.span(err.pos + bom)) from None
        except ValueError as err:
            raise _value_error("JSON", err, src) from None
        return kernels_from_mapping(located_from_data(data, _locate(json_places, src), src, json_kind), keys=keys)


# --- syntax errors ------------------------------------------------------------------


def _source(text: str, file: str) -> SourceText:
    if not isinstance(text, str):
        raise DocumentError(f"{file}: expected the document's text as a str, got {type(text).__name__}")
    return SourceText.of(text, file)


@contextlib.contextmanager
def _nesting(src: SourceText) -> Iterator[None]:
    """Every parser here recurses per nesting level; a pathological document is an error."""
    try:
        yield
    except RecursionError:
        raise DocumentError("the document is nested too deeply", src.span(0)) from None


_YAML_MAX_DEPTH = 1000  # PyYAML's composer recurses out well before this


def _check_flow_depth(src: SourceText) -> None:
    """PyYAML's scanner is quadratic in the depth of flow collections ([ and {), so a
    pathologically nested document is refused before it is scanned. Brackets are counted
    everywhere, quoted or not: only a document PyYAML could not compose anyway is refused."""
    depth = 0
    for at, c in ((m.start(), m.group()) for m in re.finditer(r"[][{}]", src.text)):
        depth = depth + 1 if c in "[{" else max(depth - 1, 0)
        if depth > _YAML_MAX_DEPTH:
            raise DocumentError("the document is nested too deeply", src.span(at),
                                hint=f"more than {_YAML_MAX_DEPTH} nested [ or {{")


def _locate(locator: Callable[[Any], dict[Path, Place]], text: Any) -> dict[Path, Place]:
    """Run a locator over text its parser accepted. A locator that trips over a construct
    it does not know costs positions, never the document: everything then points at the
    top of the file (the fuzz tests run the locators bare, so such trips are found)."""
    try:
        return locator(text)
    except (IndexError, KeyError, ValueError):
        return {}


def _lower(message: str) -> str:
    return message[:1].lower() + message[1:]


def _yaml_error(err: yaml.MarkedYAMLError, src: SourceText) -> DocumentError:
    mark = err.problem_mark or err.context_mark
    message, hint = err.problem or err.context or "malformed document", None
    if err.context and err.problem:
        if err.context.startswith("while"):  # where PyYAML was, worth a hint
            line, col = src.pos(err.context_mark.index) if err.context_mark else (1, 1)
            hint = f"{err.context} at line {line}, column {col}"
        else:  # the first half of the sentence ("expected a single document ..., but found ...")
            message = f"{err.context}, {err.problem}"
    return DocumentError(f"invalid YAML: {message}", src.span(mark.index if mark is not None else 0), hint=hint)


def _value_error(fmt: str, err: Exception, src: SourceText) -> DocumentError:
    """A parser's ValueError: an oversized integer or escape; point at the culprit if we can."""
    digits = re.search(r"\d{4300,}", src.text)
    if digits and "digits" in str(err):
        return DocumentError(f"invalid {fmt}: a number has {len(digits.group())} digits, more than Python "
                             "converts (4300)", src.span(digits.start(), digits.end()))
    for escape in re.finditer(r"\\U([0-9A-Fa-f]{8})", src.text):
        if int(escape.group(1), 16) > 0x10FFFF:
            return DocumentError(f"invalid {fmt}: escape {escape.group()} is beyond U+10FFFF",
                                 src.span(escape.start(), escape.end()))
    return DocumentError(f"invalid {fmt}: {err}", src.span(0))


# --- parsed values to Located trees ---------------------------------------------------


def json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    for types, word in ((str, "string"), ((int, float), "number"), (dict, "object"),
                        (list, "array"), (type(None), "null")):
        if isinstance(value, types):
            return word
    return type(value).__name__


def located_from_data(data: Any, places: Mapping[Path, Place], src: SourceText,
                      kind: Callable[[Any], str]) -> Located:
    """Pair parsed `data` with the positions a locator found for each path. A path the
    locator missed takes its parent's position; a string whose decoding the locator did
    not reproduce keeps only its start."""

    def build(value: Any, path: Path, parent: Place) -> Located:
        place = places.get(path)
        here = place or parent
        if isinstance(value, dict):
            inner: Any = {k: build(v, path + (k,), here) for k, v in value.items()}
        elif isinstance(value, list):
            inner = tuple(build(v, path + (i,), here) for i, v in enumerate(value))
        else:
            inner = value
        exact = place is not None and isinstance(value, str) and place.text == value
        key = src.span(*place.key) if place is not None and place.key is not None else None
        return Located(kind(value), inner, src.span(*here.value), key, place.chars if exact else None, src)

    return build(data, (), Place(None, (0, 0)))


_YAML_KINDS = {f"tag:yaml.org,2002:{tag}": word for tag, word in (
    ("str", "string"), ("int", "integer"), ("float", "float"), ("bool", "boolean"),
    ("null", "null"), ("timestamp", "timestamp"), ("binary", "binary"))}
_YAML_MERGE = "tag:yaml.org,2002:merge"


class _YamlBuilder:
    """Composed YAML nodes to `Located` values. Shared (aliased) nodes are built once, so
    alias bombs stay linear; an alias cycle is an error."""

    def __init__(self, src: SourceText):
        self.src = src
        self.done: dict[int, Located] = {}
        self.open: set[int] = set()

    def span(self, node: Any) -> Span:
        return self.src.span(node.start_mark.index, node.end_mark.index)

    def build(self, node: Any) -> Located:
        if id(node) in self.done:
            return self.done[id(node)]
        if id(node) in self.open:
            raise DocumentError("this YAML node contains an alias of itself", self.span(node),
                                hint="kernel documents cannot be recursive")
        self.open.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            kind = _YAML_KINDS.get(node.tag, f"value tagged {node.tag}")
            chars = yaml_scalar_chars(self.src.text, node) if kind == "string" else None
            located = Located(kind, node.value, self.span(node), None, chars, self.src)
        elif isinstance(node, yaml.SequenceNode):
            located = Located("sequence", tuple(self.build(x) for x in node.value), self.span(node), src=self.src)
        else:
            located = Located("mapping", self.mapping(node), self.span(node), src=self.src)
        self.open.discard(id(node))
        self.done[id(node)] = located
        return located

    def mapping(self, node: Any) -> dict[str, Located]:
        own: dict[str, Located] = {}
        merged: dict[str, Located] = {}  # from '<<' merge keys: earlier sources win, own keys win over all
        for key, value in node.value:
            if key.tag == _YAML_MERGE:
                for source in value.value if isinstance(value, yaml.SequenceNode) else [value]:
                    table = self.build(source)
                    if not table.is_table:
                        raise DocumentError("a merge key ('<<') needs a mapping or a sequence of mappings, "
                                            f"got {'an' if table.kind[0] in 'aeiou' else 'a'} {table.kind}",
                                            table.span)
                    for k, v in table.value.items():
                        merged.setdefault(k, v)
                continue
            if not isinstance(key, yaml.ScalarNode):
                raise DocumentError("a key must be a string, not a "
                                    f"{'mapping' if isinstance(key, yaml.MappingNode) else 'sequence'}",
                                    self.span(key))
            if key.value in own:
                first = own[key.value].key_span
                raise DocumentError(f"duplicate key {key.value!r}", self.span(key),
                                    hint=f"first given at {first}; each key may appear once per mapping")
            own[key.value] = attrs.evolve(self.build(value), key_span=self.span(key))
        return {**merged, **own}
