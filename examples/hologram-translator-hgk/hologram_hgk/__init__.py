"""hologram-translator-hgk: kernels in a compact line format."""

from typing import Mapping

from hologram.translator import (API, BodyKey, BodyOrigin, DocumentError, KernelDef, ParamSpec, Span, Translator,
                                 hookimpl, parse_type)


def parse_hgk(text: str, file: str, keys: Mapping[str, BodyKey]) -> list[KernelDef]:
    # (`keys`: document keys other plugins handle in TOML, YAML and JSON kernels; not .hgk's)
    lines = text.splitlines()

    def span(row: int, col: int = 1, end: int | None = None) -> Span:  # row counts from 0
        return Span(file, row + 1, col, row + 1, end, source=text)

    head = lines[0].split() if lines else []
    if len(head) != 3 or head[0] != "kernel":
        raise DocumentError("expected 'kernel NAME VERSION' on the first line", span(0))
    if "---" not in lines:
        raise DocumentError("expected a '---' line before the body", span(len(lines) - 1))
    sep = lines.index("---")
    params: dict[str, list[ParamSpec]] = {"in": [], "out": []}
    for row in range(1, sep):
        role, _, decl = lines[row].strip().partition(" ")
        name, colon, type_text = decl.partition(":")
        if role not in params or not colon:
            raise DocumentError("expected 'in NAME: TYPE' or 'out NAME: TYPE'", span(row))
        col = lines[row].index(":") + 2  # where the type starts, for the error underline
        dtype, shape = parse_type(type_text.strip(), span(row, col, len(lines[row]) + 1))
        params[role].append(ParamSpec(name.strip(), dtype, shape, span(row)))
    # body line k is file line sep + 1 + k, at column offset 0
    origin = BodyOrigin(file, text, tuple((row + 1, 0) for row in range(sep + 1, len(lines))))
    body = "\n".join(lines[sep + 1:])
    return [KernelDef(head[1], head[2], "", tuple(params["in"]), tuple(params["out"]), body, origin, span(0))]


@hookimpl
def hologram_register_translators(register):
    register(Translator("hgk", (".hgk",), parse_hgk, api=API))
