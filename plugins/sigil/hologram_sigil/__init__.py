"""hologram-translator-sigil: sigil circuits over the class buffer, compiled as kernels.

    merge_add@c00[c01,c02]                       c00 = c01 + c02
    copy@c05->c06 . mark@c21                     one after the other
    reduce_sum@c00->c01 || merge_exp@c02[c03]    side by side

A circuit is a kernel `y = circuit(x)` over f32[96, 3072] class buffers. It is read from
`.sigil` files and from the `circuit` key of TOML, YAML and JSON kernel documents
(docs/sigil.md). This module is what the `hologram` entry point names; it stays light
(every plugin module is imported when any plugin is first looked up, loading a bundle
too), so the parser and the compiler are imported only when a circuit is read.

    import hologram_sigil as sigil
    k = sigil.compile_circuit("copy@c05->c06 . mark@c21")    # a hologram.Kernel
    sigil.canonicalize("mark@c21 . mark@c21")               # (circuit, report)
    sigil.run_model("merge_exp@c01[c00]", buffer)            # the numpy model
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from hologram.translator import API, BodyKey, Translator, hookimpl

__version__ = "0.1.0"

CIRCUIT_KEY = "circuit"
CIRCUIT_SUMMARY = ('a sigil circuit over the class buffer, such as "copy@c05->c06 . mark@c21": the kernel '
                   "y = circuit(x) on f32[96, 3072] (docs/sigil.md)")

# the Python API (hologram_sigil.api), imported when first used
_API = ("compile_circuit", "parse", "canonicalize", "run_model", "kernel_source")


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module("hologram_sigil.api"), name)
    raise AttributeError(f"module 'hologram_sigil' has no attribute {name!r}")


def _lazy(module: str, function: str) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        return getattr(importlib.import_module(module), function)(*args)

    call.__name__ = function
    return call


@hookimpl
def hologram_register_translators(register: Callable[[Translator], None]) -> None:
    register(Translator(
        "sigil", (".sigil",), _lazy("hologram_sigil.translator", "parse_sigil"),
        body_keys=(BodyKey(CIRCUIT_KEY, CIRCUIT_SUMMARY, _lazy("hologram_sigil.translator", "circuit_key"),
                           interface=True),),
        cases=_lazy("hologram_sigil.cases", "difftest_cases"), api=API))


@hookimpl
def hologram_register_commands(cli: Any) -> None:
    importlib.import_module("hologram_sigil.command").add_command(cli)
