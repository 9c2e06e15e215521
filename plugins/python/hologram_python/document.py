"""Kernel definitions written as a TOML kernel document (`hologram translate`).

The document has the keys the schema reads back (docs/documents.md): one `[kernel]`, or
`[[kernels]]` when there are several, each with its type strings and its body as the
translator made it (constants folded, `return e` as `out = e`). Compiling the document
gives the programs the functions give, but for their sites (which name this file).
"""

from __future__ import annotations

from typing import Sequence

from hologram.translator import KernelDef, ParamSpec, type_str


def to_toml(kdefs: Sequence[KernelDef], source: str | None = None) -> str:
    """The document holding `kdefs`; `source` names the file they came from, in a comment."""
    out = []
    if source is not None:
        out.append(f"# Translated from {source} by `hologram translate`: edit the Python, then translate again.\n")
    header = "[kernel]" if len(kdefs) == 1 else "[[kernels]]"
    for k, kdef in enumerate(kdefs):
        if k or source is not None:
            out.append("\n")
        out.append(f"{header}\n")
        out.append(f"name = {_basic(kdef.name)}\n")
        out.append(f"version = {_basic(kdef.version)}\n")
        if kdef.summary:
            out.append(f"summary = {_basic(kdef.summary)}\n")
        if kdef.reassociate:
            out.append("reassociate = true\n")
        out.append(f"inputs = {_table(kdef.inputs)}\n")
        out.append(f"outputs = {_table(kdef.outputs)}\n")
        out.append(f"body = {_multiline(kdef.body)}\n")
    return "".join(out)


def _table(params: Sequence[ParamSpec]) -> str:
    if not params:
        return "{}"
    return "{ " + ", ".join(f"{p.name} = {_basic(type_str(p.dtype, p.shape))}" for p in params) + " }"


def _control(c: str) -> bool:
    return (ord(c) < 0x20 and c not in "\t\n") or ord(c) == 0x7F


def _escape(text: str, quote: bool) -> str:
    out = []
    for c in text:
        if c == "\\":
            out.append("\\\\")
        elif c == '"' and quote:
            out.append('\\"')
        elif c == "\n" and quote:
            out.append("\\n")
        elif c == "\t" and quote:
            out.append("\\t")
        elif _control(c):
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return "".join(out)


def _basic(text: str) -> str:
    """A TOML basic string."""
    return f'"{_escape(text, True)}"'


def _multiline(body: str) -> str:
    """The body as a multi-line string: literal ('''...''', the text as it is) when it can
    be, else basic with escapes. The newline after the opening quotes is not part of it."""
    text = body if body.endswith("\n") else body + "\n"
    if "'''" not in text and not any(_control(c) for c in text):
        return f"'''\n{text}'''"
    return '"""\n' + _escape(text, False).replace('"', '\\"') + '"""'
