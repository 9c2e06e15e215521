"""The public compile API: kernel documents into callable kernels.

    source text --translator--> KernelDefs --driver--> Compiled --> Kernel (prepared on a
    backend at its first call)

The passes are a `Pipeline` (hologram.registry.pipelines): `opt=` names one (O0, O1, O2),
`passes=` lists pass names instead; by default HOLOGRAM_OPT, else O2.

Compilation is cached in process, by content:
- a document by (translator, source text, file name, pipeline): compiling the same text
  again returns the same artifacts without re-parsing;
- a kernel by (its `KernelIR` value, pipeline), in hologram.compiler.driver;
- the pipeline's passes by their input (see hologram.passes.manager).
Backends cache prepared executables by program hash (see hologram.backend.Backend).
Every one of these is bounded; `clear_cache()` empties them all (docs/api.md, "Caching").
"""

from __future__ import annotations

import functools
import os
from types import MappingProxyType
from typing import Sequence

from hologram.call.kernel import Kernel, Library, forget_unpickled
from hologram.compiler.driver import Compiled, compile_kdef, compile_program
from hologram.core import trace
from hologram.core.errors import ArgumentError, DocumentError, HologramError, PluginError
from hologram.core.files import read_text_file
from hologram.core.hookspecs import BodyKey, Translator
from hologram.dsl.document import KernelDef
from hologram.passes import manager
from hologram.passes.manager import Pipeline
from hologram.registry import pipelines
from hologram.registry.lookups import backends, body_keys, find_translator, get_backend, translator_for_path

__all__ = ["compile", "compile_file", "compile_all", "compile_file_all", "clear_cache"]

CACHE_SIZE = 256  # documents kept
TRANSLATIONS = 64  # @hologram.kernel functions translated with their decorator's arguments (compile_api.decorator)
MAX_DOCUMENT_BYTES = 16 << 20  # compile_file refuses a bigger file (the largest in this repository: 2 KB)


Passes = Sequence[str] | str | None


def compile(text: str, format: str = "toml", file: str = "<string>", backend: str | None = None,
            opt: str | None = None, passes: Passes = None) -> Kernel | Library:
    """Compile a kernel document: a `Kernel` when it holds one kernel, else a `Library`.

    format   a translator name (`toml`, `yaml`, `json`, or a plugin's) or an extension
    file     the name errors point at
    backend  run on this backend (checked now); None: HOLOGRAM_BACKEND or the best available,
             chosen at the first call
    opt      the optimization level: "O0" (no passes), "O1" or "O2"; None: HOLOGRAM_OPT, else "O2"
    passes   run exactly these passes (names, or one comma-separated string) instead of a
             level, in the order their constraints give
    """
    return _single(compile_all(text, format=format, file=file, backend=backend, opt=opt, passes=passes))


def compile_file(path: str | os.PathLike, backend: str | None = None, opt: str | None = None,
                 passes: Passes = None) -> Kernel | Library:
    """Compile a kernel file, its format chosen by extension among the registered translators."""
    return _single(compile_file_all(path, backend=backend, opt=opt, passes=passes))


def compile_all(text: str, format: str = "toml", file: str = "<string>", backend: str | None = None,
                opt: str | None = None, passes: Passes = None) -> Library:
    """Like `compile`, but always a `Library` (also for one kernel)."""
    if not isinstance(text, str):
        raise DocumentError(f"compile() expects the document text as str, got {type(text).__name__}",
                            hint="use compile_file(path) for a file")
    if not isinstance(file, str):
        raise DocumentError(f"compile() expects file to be a str (the name errors point at), got {type(file).__name__}")
    pipeline = pipelines.resolve(opt, passes)
    return _library(find_translator(format), text, file, backend, pipeline)


def compile_file_all(path: str | os.PathLike, backend: str | None = None, opt: str | None = None,
                     passes: Passes = None) -> Library:
    """Like `compile_file`, but always a `Library` (also for one kernel)."""
    try:
        file = os.fsdecode(path)
    except TypeError:
        raise DocumentError(f"compile_file() expects a path, got {type(path).__name__}") from None
    translator = translator_for_path(file)
    pipeline = pipelines.resolve(opt, passes)
    return _library(translator, read_text_file(file, MAX_DOCUMENT_BYTES, DocumentError), file, backend, pipeline)


def clear_cache() -> None:
    """Forget everything compiled in this process: documents, programs, the passes'
    results, and what every loaded backend prepared (through its optional
    `clear_cache()`; the cpu_llvm disk cache stays). Kernels still referenced keep
    their own program and executable. docs/api.md, "Caching", lists every cache."""
    compile_document.cache_clear()
    decorated.cache_clear()
    compile_program.cache_clear()
    forget_unpickled()
    manager.clear_cache()
    for backend in backends().built():  # a backend never used has nothing cached
        name = backend.name
        try:
            backend.clear_cache()
        except Exception as exc:  # a plugin's bug must not look like a crash of ours
            raise PluginError(f"backend {name!r} failed to clear its cache: {type(exc).__name__}: {exc}") from exc


# ----------------------------------------------------------------------------- internals
def _single(lib: Library) -> Kernel | Library:
    return next(iter(lib.values())) if len(lib) == 1 else lib


def _library(translator: Translator, text: str, file: str, backend: str | None, pipeline: Pipeline) -> Library:
    if backend is not None:
        get_backend(backend)  # an unknown or unavailable backend is an error now, not at the first call
    with trace.span(f"compile {os.path.basename(file)}", "compile", file=file, translator=translator.name,
                    pipeline=pipeline.name) as info:
        compiled = trace.cached(info, compile_document, translator, text, file, pipeline,
                                tuple(body_keys().items()))
    return Library({c.signature.name: Kernel(c, backend) for c in compiled})


@functools.lru_cache(maxsize=CACHE_SIZE)
def compile_document(translator: Translator, text: str, file: str, pipeline: Pipeline,
                     keys: tuple[tuple[str, BodyKey], ...] | None = None) -> tuple[Compiled, ...]:
    """Every kernel of one document through `pipeline` (cached by all the arguments: `keys`,
    the document keys in effect (None: the registered ones), since what a document means
    depends on which plugins claim its keys)."""
    kdefs = translate(translator, text, file, keys)
    if not kdefs:
        raise DocumentError(f"{file}: no kernels in this document", hint=translator.no_kernels_hint())
    seen: set[str] = set()
    compiled = []
    for kdef in kdefs:
        if kdef.name in seen:
            raise DocumentError(f"duplicate kernel name {kdef.name!r}", span=kdef.span)
        seen.add(kdef.name)
        compiled.append(compile_kdef(kdef, pipeline))
    return tuple(compiled)


@functools.lru_cache(maxsize=TRANSLATIONS)
def decorated(translator: Translator, text: str, file: str, line: int,
              options: tuple[tuple[str, object], ...]) -> KernelDef | None:
    """The kernel of the function starting at `line` of the running module `text`, with the
    decorator's arguments `options` (`Translator.decorated`, for `@hologram.kernel`);
    None when no decorated function starts there. A plugin's failure is a PluginError."""
    if translator.decorated is None:
        raise PluginError(f"translator {translator.name!r} does not translate decorated functions (its "
                          "Translator has no `decorated`)", hint="install hologram-translator-python")
    try:
        with trace.span("translate", "compile", translator=translator.name):
            kdef = translator.decorated(text, file, line, dict(options))
    except HologramError:
        raise
    except Exception as exc:  # a translator plugin's bug must not look like a crash of ours
        raise PluginError(f"translator {translator.name!r} failed on {file}: {type(exc).__name__}: {exc}") from exc
    if kdef is not None and not isinstance(kdef, KernelDef):
        raise PluginError(f"translator {translator.name!r} returned {type(kdef).__name__} for {file}:{line}; "
                          "expected hologram.translator.KernelDef")
    return kdef


def compile_definition(kdef: KernelDef, *, backend: str | None = None, opt: str | None = None,
                       passes: Passes = None) -> Kernel:
    """A translator's kernel definition compiled as a document's kernel is: a `Kernel`
    (backend, opt, passes as for `compile`)."""
    if not isinstance(kdef, KernelDef):
        raise ArgumentError(f"compile_definition takes a KernelDef, got {type(kdef).__name__}")
    pipeline = pipelines.resolve(opt, passes)
    if backend is not None:
        get_backend(backend)  # an unknown or unavailable backend is an error now, not at the first call
    return Kernel(compile_kdef(kdef, pipeline), backend)


def translate(translator: Translator, text: str, file: str,
              keys: tuple[tuple[str, BodyKey], ...] | None = None) -> list[KernelDef]:
    """The kernel definitions `translator` reads in `text`, with the document keys plugins
    handle (`circuit`, ...; by default the registered ones) in effect; a plugin's failure
    is a PluginError."""
    try:
        with trace.span("translate", "compile", translator=translator.name):
            kdefs = list(translator.read(text, file, body_keys() if keys is None else MappingProxyType(dict(keys))))
    except HologramError:
        raise
    except Exception as exc:  # a translator plugin's bug must not look like a crash of ours
        raise PluginError(f"translator {translator.name!r} failed on {file}: {type(exc).__name__}: {exc}") from exc
    for k in kdefs:
        if not isinstance(k, KernelDef):
            raise PluginError(f"translator {translator.name!r} returned {type(k).__name__} for {file}; "
                              "expected hologram.dsl.document.KernelDef")
    return kdefs
