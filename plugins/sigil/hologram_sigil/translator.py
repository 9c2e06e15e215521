"""Circuits as kernel definitions: `.sigil` files, and the `circuit` key of kernel documents.

Either way a circuit becomes the kernel `y = circuit(x)` over `f32[96, 3072]` class
buffers, compiled from its canonical form (canon.py) and written as a kernel body
(lower.py). Its `notes` say what canonicalization did ("4 ops -> 1 op ..."), which
`hologram compile --emit stats` and the bundle build table print.
"""

from __future__ import annotations

import os
from typing import Mapping

from hologram.translator import (IDENTIFIER, BodyKey, BodyOrigin, DocumentError, DType, KernelDef, ParamSpec, Span,
                                 parse_type)
from hologram_sigil.canon import canonicalize
from hologram_sigil.circuit import CLASSES, WIDTH, Node, generators
from hologram_sigil.lower import lower
from hologram_sigil.syntax import parse_circuit, parse_file

EXTENSION = ".sigil"
DEFAULT_VERSION = "1.0.0"  # a .sigil file without a `kernel` header line
STRING_NAME = "circuit"  # the kernel of a bare circuit compiled from a string (no file name to take)


def parse_sigil(text: str, file: str, keys: Mapping[str, BodyKey]) -> list[KernelDef]:
    """The kernels of a `.sigil` file: one bare circuit, named after the file, or kernels
    each introduced by a `kernel NAME [VERSION] ["summary"]` line. (`keys`, the document
    keys plugins handle, are a document's: a circuit file has none.)"""
    origin = own_origin(text, file)
    kernels = parse_file(text, origin)
    out = []
    for k in kernels:
        if k.name is None:
            name, span = _file_kernel_name(file, text), Span(file, 1, 1, source=text)
        else:
            name, span = k.name, k.span
        out.append(kernel_def(k.circuit, name=name, version=k.version or DEFAULT_VERSION, summary=k.summary,
                              origin=origin, span=span))
    return out


def circuit_key(header: KernelDef) -> KernelDef:
    """The `circuit` key of a TOML, YAML or JSON kernel: `header.body` holds the circuit,
    `header.origin` where it sits in the document (hologram.core.hookspecs.BodyKey)."""
    node = parse_circuit(header.body, header.origin)
    return kernel_def(node, name=header.name, version=header.version, summary=header.summary, origin=header.origin,
                      span=header.span, reassociate=header.reassociate)


def kernel_def(node: Node, *, name: str, version: str, summary: str, origin: BodyOrigin, span: Span,
               width: int = WIDTH, canonical: bool = True, reassociate: bool = False) -> KernelDef:
    """The kernel `y = circuit(x)` over f32[96, width] buffers. `canonical`: compile the
    circuit's canonical form (what documents always do) and note what that took;
    `width` other than 3072 is for tests (a narrow buffer the interpreter runs fast)."""
    notes: tuple[tuple[str, str], ...] = ()
    if canonical:
        node, report = canonicalize(node)
        notes = (("circuit", report.note()),)
    body = lower(node, width)
    start = next((g.at for g in generators(node) if g.at is not None), (1, 1, None))
    lines = []
    for at in body.lines:  # each statement points at the generator it comes from, the last at the circuit
        where = origin.span(*(at or start)[:2])
        lines.append((where.line, where.col - 1))
    dtype, shape = parse_type(f"f32[{CLASSES}, {width}]")
    assert dtype is DType.F32
    params = (ParamSpec("x", dtype, shape, span),), (ParamSpec("y", dtype, shape, span),)
    # the body's temporaries (r3, s4) are the lowering's names, not the circuit writer's
    return KernelDef(name, version, summary, *params, body.text, BodyOrigin(origin.file, origin.source, tuple(lines)),
                     span, reassociate, notes, authored_temporaries=False)


def own_origin(text: str, file: str) -> BodyOrigin:
    """Positions in `text` as positions in `file` itself (a `.sigil` file, a string)."""
    return BodyOrigin(file, text, tuple((k + 1, 0) for k in range(text.count("\n") + 1)))


def _file_kernel_name(file: str, text: str) -> str:
    base = os.path.basename(file)
    if base.startswith("<"):  # hologram.compile(text, format="sigil"): no file to name it after
        return STRING_NAME
    stem = base[: -len(EXTENSION)] if base.lower().endswith(EXTENSION) else os.path.splitext(base)[0]
    if not IDENTIFIER.match(stem):
        raise DocumentError(f"the kernel is named after its file, and {stem!r} is not an identifier",
                            Span(file, 1, 1, source=text),
                            hint="rename the file, or give the kernel a name on a first line: kernel NAME 1.0.0")
    return stem
