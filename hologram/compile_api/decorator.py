"""`@hologram.kernel`: a Python function, translated from its source, as a `Kernel`.

    import hologram as hg
    from hologram.types import f32

    @hg.kernel
    def softmax(x: f32["n"]) -> f32["n"]:
        e = np.exp(x - x.max())
        return e / e.sum()

The function is never called. Its module's text (from `linecache`, so a notebook cell
works as a file does) goes to whatever translator is registered for the `python` format
(the plugin hologram-translator-python), with the line the function starts at and the
arguments this call received (name, version, reassociate: values, whatever expression
wrote them), and the translator returns that function's `KernelDef`
(`Translator.decorated`). It is compiled as a document's kernel is (errors point into
the .py file) and the result is an ordinary `Kernel`: `.on()`, `.map()`, `.stats()`,
`.emit()`, pickling.
"""

from __future__ import annotations

import inspect
import linecache
from typing import Any, Callable, Mapping, Sequence

from hologram.call.kernel import Kernel
from hologram.compile_api.compile import compile_definition, decorated
from hologram.core.errors import DocumentError, PluginError
from hologram.core.hookspecs import Translator
from hologram.dsl.document import KernelDef
from hologram.registry.lookups import find_translator

FORMAT = "python"
DISTRIBUTION = "hologram-translator-python"


def kernel(fn: Callable | None = None, /, *, name: str | None = None, version: str | None = None,
           reassociate: bool | None = None, backend: str | None = None, opt: str | None = None,
           passes: Sequence[str] | str | None = None) -> Any:
    """Compile a Python function into a `Kernel`, as a decorator: `@hologram.kernel` or
    `@hologram.kernel(version="1.2.0", backend="interp")`.

    name, version, reassociate  the document's keys (None: the function's name, "0.0.0",
                                False), as this call receives them: any expression
    backend, opt, passes        as for hologram.compile
    """
    options = {k: v for k, v in (("name", name), ("version", version), ("reassociate", reassociate))
               if v is not None}

    def decorate(f: Callable) -> Kernel:
        return _compile_function(f, options, backend, opt, passes)

    return decorate if fn is None else decorate(fn)


def python_translator() -> Translator:
    """The translator of the `python` format; a PluginError naming the distribution to
    install when there is none."""
    try:
        return find_translator(FORMAT)
    except PluginError:
        raise PluginError("@hologram.kernel needs the translator of Python functions, which is not installed",
                          hint=f"pip install {DISTRIBUTION}") from None


def _compile_function(fn: Callable, options: Mapping[str, object], backend: str | None, opt: str | None,
                      passes: Sequence[str] | str | None) -> Kernel:
    if not inspect.isfunction(fn):
        raise DocumentError(f"@hologram.kernel decorates a function (def ...), not {type(fn).__name__}")
    code = fn.__code__
    kdef = _definition(python_translator(), code.co_filename, code.co_firstlineno, fn.__name__, fn.__globals__,
                       options)
    return compile_definition(kdef, backend=backend, opt=opt, passes=passes)


def _definition(translator: Translator, file: str, first: int, name: str, module_globals: dict,
                options: Mapping[str, object]) -> KernelDef:
    """The definition of the function whose source starts at line `first` of `file`, with
    the decorator's arguments `options`."""
    linecache.checkcache(file)
    text = "".join(linecache.getlines(file, module_globals))
    if not text:
        raise DocumentError(f"cannot read the source of {name}() (from {file}): @hologram.kernel translates a "
                            "function's source", hint="define the function in a file or a notebook cell")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    given = tuple(sorted(options.items()))
    try:
        hash(given)
    except TypeError:  # a list for a name, say: not cached; the schema says what it should be
        kdef = decorated.__wrapped__(translator, text, file, first, given)
    else:
        kdef = decorated(translator, text, file, first, given)
    if kdef is None:
        raise DocumentError(f"{file}:{first}: {name}() is not decorated with @hologram.kernel in its source",
                            hint="the translator reads the functions decorated with @hologram.kernel (or @hg.kernel); "
                                 "hologram.kernel(f) on an undecorated function is not one")
    return kdef
