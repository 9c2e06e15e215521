"""The public API of translator plugins: everything a `Translator` may use.

A translator plugin (docs/plugins.md, "Translators") imports hologram through this module
alone; tests/test_layout.py holds the in-repository ones (hologram_python, hologram_sigil,
the hgk example) to it, imports by string included. The one exception is the module a
plugin's generated-cases hook (`Translator.cases`, called only by `hologram diff-test`)
lives in, named `cases`: its contract is written in the test kit's types
(`hologram.testing.KernelCase`, `hologram.testing.bounds`), so it imports
`hologram.testing` too.

    from hologram.translator import DocumentError, KernelDef, Translator, hookimpl

    @hookimpl
    def hologram_register_translators(register):
        register(Translator("hgk", (".hgk",), parse_hgk, api=API))

What is here, by where it comes from:

- the hook and what to register: `hookimpl`, `Translator` (its `parse(text, file, keys)`
  is the form `API` names), `BodyKey` (a document key handled in place of `body`);
- the kernel a translator produces: `KernelDef`, `ParamSpec`, `BodyOrigin` (body lines to
  file lines and columns), type strings (`parse_type`, `type_str`, `DType`, `Affine`,
  `Shape`), the schema's own checks (`kernels_from_mapping`, `IDENTIFIER`, `SEMVER`);
- document positions: `SourceText` (offsets to lines and columns), `Located` (a value
  with its key's and value's spans, what `kernels_from_mapping` reads), `Span`;
- the diagnostics: `HologramError`, `DocumentError`, `CompileError`, `PluginError`,
  `ArgumentError`, `did_you_mean`; the body language's hints for Python statements it
  has not (`STATEMENT_HINTS`);
- what a plugin's own tools need: `read_text_file` (a source file, bounded, as
  `compile_file` reads one), `check_definition` (the front end over a definition: its
  body's errors now), `compile_definition` (a definition as a `hologram.Kernel`), and
  `semantics` (numpy's meaning of every operator and function: `ORACLE[name](*args)`,
  `reduce(kind, row)`).

Every name is imported when first used (PEP 562), so importing this module, as every
translator plugin's registration does in every process, costs nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hologram.core import semantics
    from hologram.core.errors import (ArgumentError, CompileError, DocumentError, HologramError, PluginError, Span,
                                      did_you_mean)
    from hologram.core.files import read_text_file
    from hologram.core.hookspecs import BodyKey, Translator, hookimpl
    from hologram.core.types import Affine, DType, Shape, type_str
    from hologram.dsl.document import BodyOrigin, KernelDef, ParamSpec
    from hologram.dsl.parser import STATEMENT_HINTS
    from hologram.dsl.positions import Located, SourceText
    from hologram.dsl.schema import IDENTIFIER, SEMVER, kernels_from_mapping, parse_type
    from hologram.compile_api.compile import compile_definition

# The form of `Translator.parse` this API describes: `parse(text, file, keys)`. A plugin
# declares it with `Translator(..., api=API)`; without it, parse is called in the
# deprecated first form, `parse(text, file)`.
API = 2

# public name -> the module that defines it (the module itself for `semantics`)
_HOME = {
    **dict.fromkeys(("hookimpl", "Translator", "BodyKey"), "hologram.core.hookspecs"),
    **dict.fromkeys(("KernelDef", "ParamSpec", "BodyOrigin"), "hologram.dsl.document"),
    **dict.fromkeys(("kernels_from_mapping", "parse_type", "IDENTIFIER", "SEMVER"), "hologram.dsl.schema"),
    **dict.fromkeys(("DType", "Affine", "Shape", "type_str"), "hologram.core.types"),
    **dict.fromkeys(("SourceText", "Located"), "hologram.dsl.positions"),
    **dict.fromkeys(("HologramError", "DocumentError", "CompileError", "PluginError", "ArgumentError", "Span",
                     "did_you_mean"), "hologram.core.errors"),
    "STATEMENT_HINTS": "hologram.dsl.parser",  # the body's parser: lark loads with it
    "read_text_file": "hologram.core.files",
    "compile_definition": "hologram.compile_api.compile",
    "semantics": "hologram.core.semantics",
}


def check_definition(kdef: KernelDef) -> None:
    """Run the front end over `kdef`: the CompileError (or DocumentError) its body would
    raise when compiled, pointing into the translator's file, raised now."""
    from hologram.dsl.analyze import to_ir

    to_ir(kdef)


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'hologram.translator' has no attribute {name!r}")
    module = importlib.import_module(home)
    value = module if name == "semantics" else getattr(module, name)
    globals()[name] = value  # found once: later lookups do not come back here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = ["API", "check_definition", *_HOME]
