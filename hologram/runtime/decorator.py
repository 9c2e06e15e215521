"""`@hologram.kernel`: a Python function, translated from its source, as a `Kernel`.

    import hologram as hg
    from hologram.types import f32

    @hg.kernel
    def softmax(x: f32["n"]) -> f32["n"]:
        e = np.exp(x - x.max())
        return e / e.sum()

The function is never called. Its module's text (from `linecache`, so a notebook cell
works as a file does) goes to whatever translator is registered for the `python` format
(the plugin hologram-translator-python), which returns every decorated function of the
module as a `KernelDef`; this one is the definition that starts at the function's first
line. It is compiled as a document's kernel is (errors point into the .py file) and the
result is an ordinary `Kernel`: `.on()`, `.map()`, `.stats()`, `.emit()`, pickling.
"""

from __future__ import annotations

import inspect
import linecache
from typing import Any, Callable, Sequence

from hologram.core.errors import DocumentError, PluginError
from hologram.core.hookspecs import Translator
from hologram.dsl.document import KernelDef
from hologram.runtime import pipelines
from hologram.runtime.compile import translated
from hologram.runtime.driver import compile_kdef
from hologram.runtime.kernel import Kernel
from hologram.runtime.lookups import body_keys, find_translator, get_backend

FORMAT = "python"
DISTRIBUTION = "hologram-translator-python"


def kernel(fn: Callable | None = None, /, *, name: str | None = None, version: str | None = None,
           reassociate: bool | None = None, backend: str | None = None, opt: str | None = None,
           passes: Sequence[str] | str | None = None) -> Any:
    """Compile a Python function into a `Kernel`, as a decorator: `@hologram.kernel` or
    `@hologram.kernel(version="1.2.0", backend="interp")`.

    name, version, reassociate  the document's keys (read from the decorator's source,
                                so written as literals)
    backend, opt, passes        as for hologram.compile
    """
    def decorate(f: Callable) -> Kernel:
        return _compile_function(f, backend, opt, passes)

    return decorate if fn is None else decorate(fn)


def python_translator() -> Translator:
    """The translator of the `python` format; a PluginError naming the distribution to
    install when there is none."""
    try:
        return find_translator(FORMAT)
    except PluginError:
        raise PluginError("@hologram.kernel needs the translator of Python functions, which is not installed",
                          hint=f"pip install {DISTRIBUTION}") from None


def _compile_function(fn: Callable, backend: str | None, opt: str | None,
                      passes: Sequence[str] | str | None) -> Kernel:
    if not inspect.isfunction(fn):
        raise DocumentError(f"@hologram.kernel decorates a function (def ...), not {type(fn).__name__}")
    code = fn.__code__
    kdef = _definition(python_translator(), code.co_filename, code.co_firstlineno,
                       max((line for *_, line in code.co_lines() if line is not None), default=code.co_firstlineno),
                       fn.__name__, fn.__globals__)
    pipeline = pipelines.resolve(opt, passes)
    if backend is not None:
        get_backend(backend)  # an unknown or unavailable backend is an error now, as for compile()
    return Kernel(compile_kdef(kdef, pipeline), backend)


def _definition(translator: Translator, file: str, first: int, last: int, name: str,
                module_globals: dict) -> KernelDef:
    """The definition of the function whose source spans lines first..last of `file`."""
    linecache.checkcache(file)
    text = "".join(linecache.getlines(file, module_globals))
    if not text:
        raise DocumentError(f"cannot read the source of {name}() (from {file}): @hologram.kernel translates a "
                            "function's source", hint="define the function in a file or a notebook cell")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    for kdef in translated(translator, text, file, tuple(body_keys().items())):
        if first <= kdef.span.line <= last:
            return kdef
    raise DocumentError(f"{file}:{first}: {name}() is not decorated with @hologram.kernel in its source",
                        hint="the translator reads the functions decorated with @hologram.kernel (or @hg.kernel); "
                             "hologram.kernel(f) on an undecorated function is not one")
