"""The plugin's Python API: circuits parsed, canonicalized, run in numpy, compiled.

Documents and `.sigil` files go through `hologram.compile` / `compile_file` as any
kernel does; these are for working with circuits directly (and for the tests, which
compile a circuit as written beside its canonical form, or on a narrow buffer).
"""

from __future__ import annotations

import numpy as np

from hologram_sigil.canon import Report
from hologram_sigil.canon import canonicalize as _canonicalize
from hologram_sigil.circuit import WIDTH, Node, format_circuit
from hologram_sigil.model import run
from hologram_sigil.syntax import parse_circuit
from hologram_sigil.translator import kernel_def, own_origin

__all__ = ["parse", "canonicalize", "run_model", "kernel_source", "compile_circuit"]


def parse(circuit: str | Node, file: str = "<circuit>") -> Node:
    """The circuit `circuit` (text, or an already parsed circuit), checked; CompileError
    with the line and column of a mistake (in `file`, the name errors give the text)."""
    if not isinstance(circuit, str):
        return circuit
    return parse_circuit(circuit, own_origin(circuit, file))


def canonicalize(circuit: str | Node) -> tuple[Node, Report]:
    """The canonical form of a circuit and what it took (`report.note()`: "4 ops -> 1 op ...");
    `format_circuit` (hologram_sigil.circuit) writes it as text."""
    return _canonicalize(parse(circuit))


def run_model(circuit: str | Node, buffer: np.ndarray) -> np.ndarray:
    """The class buffer (float32[96, width]) after `circuit`, computed by the numpy model."""
    return run(parse(circuit), buffer)


def kernel_source(circuit: str | Node, name: str = "circuit", version: str = "1.0.0") -> str:
    """A TOML kernel document holding the circuit (in its canonical spelling, as written
    otherwise): what a `circuit` key looks like, for a document of your own."""
    text = format_circuit(parse(circuit))
    return (f'[kernel]\nname = "{name}"\nversion = "{version}"\ncircuit = """\n{text}\n"""\n')


def compile_circuit(circuit: str | Node, name: str = "circuit", *, canonical: bool = True, width: int = WIDTH,
                    backend: str | None = None, opt: str | None = None):
    """The circuit as a `hologram.Kernel` `y = k(x)` over float32[96, width] buffers.

    canonical  compile the canonical form (as documents do), else the circuit as written
    width      elements per class; 3072 is the class buffer, a narrower one is for tests
    backend, opt  as for `hologram.compile`
    """
    from hologram.translator import ArgumentError, compile_definition

    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ArgumentError(f"width={width!r}: expected a positive number of elements per class")
    text = circuit if isinstance(circuit, str) else format_circuit(circuit)
    origin = own_origin(text, "<circuit>")
    node = parse_circuit(text, origin) if isinstance(circuit, str) else circuit
    kdef = kernel_def(node, name=name, version="1.0.0", summary="", origin=origin, span=origin.span(1, 1),
                      width=width, canonical=canonical)
    return compile_definition(kdef, backend=backend, opt=opt)
