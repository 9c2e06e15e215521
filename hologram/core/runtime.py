"""The runtime API: compile kernel documents into callable kernels.

    source text --translator--> KernelDefs --to_ir--> KernelIR --lower--> Program --verify-->
    Kernel (prepared on a backend at its first call)

Compilation is cached in process at two levels, both by content:
- a document by (translator, source text, file name): compiling the same text again
  returns the same artifacts without re-parsing;
- a kernel's program by its `KernelIR` value (frozen, structurally hashed): the same
  kernel reached from another file or format is lowered and verified once.
Backends cache prepared executables by program hash (see hologram.core.backend).
"""

from __future__ import annotations

import functools
import os

from .. import dsl
from ..dsl.document import KernelDef
from .errors import DocumentError, HologramError, PluginError
from .hookspecs import Translator
from .ir import KernelIR
from .isa import Program
from .kernel import Compiled, Kernel, Library
from .lower import lower
from .plugins import find_translator, get_backend, list_backends, translator_for_path
from .verifier import verify

__all__ = ["compile", "compile_file", "compile_all", "compile_file_all", "get_backend", "list_backends",
           "Kernel", "Library", "clear_cache"]

CACHE_SIZE = 256


def compile(text: str, format: str = "toml", file: str = "<string>", backend: str | None = None) -> Kernel | Library:
    """Compile a kernel document: a `Kernel` when it holds one kernel, else a `Library`.

    format   a translator name (`toml`, `yaml`, `json`, or a plugin's) or an extension
    file     the name errors point at
    backend  run on this backend (checked now); None: HOLOGRAM_BACKEND or the best available,
             chosen at the first call
    """
    return _single(compile_all(text, format=format, file=file, backend=backend))


def compile_file(path: str | os.PathLike, backend: str | None = None) -> Kernel | Library:
    """Compile a kernel file, its format chosen by extension among the registered translators."""
    return _single(compile_file_all(path, backend=backend))


def compile_all(text: str, format: str = "toml", file: str = "<string>", backend: str | None = None) -> Library:
    """Like `compile`, but always a `Library` (also for one kernel)."""
    if not isinstance(text, str):
        raise DocumentError(f"compile() expects the document text as str, got {type(text).__name__}",
                            hint="use compile_file(path) for a file")
    if not isinstance(file, str):
        raise DocumentError(f"compile() expects file to be a str (the name errors point at), got {type(file).__name__}")
    return _library(find_translator(format), text, file, backend)


def compile_file_all(path: str | os.PathLike, backend: str | None = None) -> Library:
    """Like `compile_file`, but always a `Library` (also for one kernel)."""
    try:
        file = os.fsdecode(path)
    except TypeError:
        raise DocumentError(f"compile_file() expects a path, got {type(path).__name__}") from None
    translator = translator_for_path(file)
    try:
        with open(file, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise DocumentError(f"cannot read {file}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise DocumentError(f"cannot read {file}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return _library(translator, text, file, backend)


def clear_cache() -> None:
    """Forget every compiled document and program (backends keep their own caches)."""
    _compile_document.cache_clear()
    _compile_program.cache_clear()


# ----------------------------------------------------------------------------- internals
def _single(lib: Library) -> Kernel | Library:
    return next(iter(lib.values())) if len(lib) == 1 else lib


def _library(translator: Translator, text: str, file: str, backend: str | None) -> Library:
    if backend is not None:
        get_backend(backend)  # an unknown or unavailable backend is an error now, not at the first call
    compiled = _compile_document(translator, text, file)
    return Library({c.kir.name: Kernel(c, backend) for c in compiled})


@functools.lru_cache(maxsize=CACHE_SIZE)
def _compile_document(translator: Translator, text: str, file: str) -> tuple[Compiled, ...]:
    kdefs = _translate(translator, text, file)
    if not kdefs:
        raise DocumentError(f"{file}: no kernels in this document",
                            hint="declare one with [kernel] or several with [[kernels]]")
    seen: set[str] = set()
    compiled = []
    for kdef in kdefs:
        if kdef.name in seen:
            raise DocumentError(f"duplicate kernel name {kdef.name!r}", span=kdef.span)
        seen.add(kdef.name)
        kir = dsl.to_ir(kdef)  # hologram.dsl loads the analyzer at the first compile
        compiled.append(Compiled(kdef, kir, _compile_program(kir)))
    return tuple(compiled)


def _translate(translator: Translator, text: str, file: str) -> list[KernelDef]:
    try:
        kdefs = list(translator.parse(text, file))
    except HologramError:
        raise
    except Exception as exc:  # a translator plugin's bug must not look like a crash of ours
        raise PluginError(f"translator {translator.name!r} failed on {file}: {type(exc).__name__}: {exc}") from exc
    for k in kdefs:
        if not isinstance(k, KernelDef):
            raise PluginError(f"translator {translator.name!r} returned {type(k).__name__} for {file}; "
                              "expected hologram.dsl.document.KernelDef")
    return kdefs


@functools.lru_cache(maxsize=CACHE_SIZE)
def _compile_program(kir: KernelIR) -> Program:
    return verify(lower(kir))
