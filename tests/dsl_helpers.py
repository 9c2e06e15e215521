"""Helpers for the front-end tests: build a KernelDef directly, without a translator.

`make_def(body, inputs, outputs)` declares parameters from short type strings (`"f32"`,
`"f32[n]"`, `"u8[4, n - 2]"`, `"f32[2*n + 1]"`) and maps body line k to file line k,
column offset 0 (or `line_offset` / `col_offset` to test the mapping).
"""

from __future__ import annotations

from typing import Mapping

from hologram.core.errors import Span
from hologram.core.types import ALL_TYPES, DType, Shape
from hologram.dsl.analyze import to_ir
from hologram.dsl.document import BodyOrigin, KernelDef, ParamSpec
from hologram.dsl.schema import parse_type as schema_parse_type
from hologram.ir import Compute, KernelIR

FILE = "<test>"
# Every element type by its DSL name, and numpy's dtype by that name.
TYPES = [str(d) for d in ALL_TYPES]
NP = {str(d): d.np for d in ALL_TYPES}


def parse_type(text: str) -> tuple[DType, Shape]:
    """`f32[m, 2*n + 1]` -> (DType.F32, (m, 2*n + 1)), as a document's type string reads
    (products and `//` too, as an output's type may have them); test input only."""
    return schema_parse_type(text)


def make_def(body: str, inputs: Mapping[str, str] | None = None, outputs: Mapping[str, str] | None = None,
             *, line_offset: int = 0, col_offset: int = 0, name: str = "k") -> KernelDef:
    inputs = {"x": "f32[n]"} if inputs is None else inputs
    outputs = {"y": "f32[n]"} if outputs is None else outputs
    lines = body.split("\n")
    source = "\n".join([""] * line_offset + [" " * col_offset + line for line in lines])
    origin = BodyOrigin(FILE, source, tuple((k + 1 + line_offset, col_offset) for k in range(len(lines))))
    decl = Span(FILE, 1, 1)
    ins = tuple(ParamSpec(n, *parse_type(t), decl) for n, t in inputs.items())
    outs = tuple(ParamSpec(n, *parse_type(t), decl) for n, t in outputs.items())
    return KernelDef(name, "1.0.0", "", ins, outs, body, origin, decl)


def compile_ir(body: str, inputs: Mapping[str, str] | None = None,
               outputs: Mapping[str, str] | None = None) -> KernelIR:
    return to_ir(make_def(body, inputs, outputs))


def statements(body: str, inputs=None, outputs=None) -> list[str]:
    """The IR statements of a kernel, as text."""
    return [str(s) for s in compile_ir(body, inputs, outputs).body]


def last(body: str, inputs=None, outputs=None) -> str:
    """The text of the last IR statement."""
    return statements(body, inputs, outputs)[-1]


def dtype_of(name: str, kir: KernelIR) -> DType:
    return kir.decl(name).dtype


def compute(kir: KernelIR, target: str) -> Compute:
    return next(s for s in kir.body if s.target == target)


# A two-kernel document (a Library): a vector add and a scale, f32 and f64.
TWO_KERNELS = '''
[[kernels]]
name = "vadd"
version = "1.0.0"
inputs  = { x = "f32[n]", y = "f32[n]" }
outputs = { z = "f32[n]" }
body = "z = x + y"

[[kernels]]
name = "scale"
version = "1.0.0"
inputs  = { a = "f64", x = "f64[n]" }
outputs = { y = "f64[n]" }
body = "y = a * x"
'''


def document(body: str, inputs: Mapping[str, str], outputs: Mapping[str, str], name: str = "k") -> str:
    """A one-kernel TOML document; the body starts on file line 7."""
    table = lambda d: "{ " + ", ".join(f'{k} = "{v}"' for k, v in d.items()) + " }"  # noqa: E731
    return (f'[kernel]\nname = "{name}"\nversion = "1.0.0"\ninputs = {table(inputs)}\noutputs = {table(outputs)}\n'
            f'body = """\n{body}\n"""\n')
