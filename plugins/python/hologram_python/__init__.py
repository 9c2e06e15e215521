"""hologram-translator-python: kernels written as Python functions.

Registers the `python` translator (`.py` files: every function decorated with
`@hologram.kernel`, read with `ast`, never run) and the `hologram translate` command.
Nothing heavy is imported here: every plugin module is imported at the first look-up of
any kind (a process that loads a bundle imports this one too), so the translator and the
command load their modules when first used. docs/python-kernels.md describes the mapping.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from hologram.translator import API, Translator, hookimpl

__version__ = "0.1.0"


def parse_python(text: str, file: str, keys: Mapping[str, Any]) -> Sequence[Any]:
    """Every `@hologram.kernel` function of a Python module, as `KernelDef`s. (`keys`, the
    document keys other plugins handle, never apply: a function's kernel has no such key.)"""
    from hologram_python.translate import translate_module

    return translate_module(text, file)


def decorated_python(text: str, file: str, line: int, options: Mapping[str, Any]) -> Any:
    """The kernel of the `@hologram.kernel` function starting at `line` of a running module,
    with the decorator's arguments as the call received them."""
    from hologram_python.translate import translate_function

    return translate_function(text, file, line, options)


def claims_python(text: str) -> bool:
    """Whether a module holds a `@hologram.kernel` function (a bundle build skips the
    other .py files of a folder)."""
    from hologram_python.module import has_kernels

    return has_kernels(text)


@hookimpl
def hologram_register_translators(register: Callable[[Translator], None]) -> None:
    register(Translator("python", (".py",), parse_python, claims=claims_python, api=API, decorated=decorated_python,
                        declaring="decorate a function with @hologram.kernel (docs/python-kernels.md)"))


@hookimpl
def hologram_register_commands(cli: Any) -> None:
    p = cli.add_parser("translate", help="write the kernels of a Python module as a kernel document (TOML)",
                       description="Translate every @hologram.kernel function of FILE.py into a TOML kernel "
                                   "document: one [kernel], or [[kernels]] when there are several. Compiling "
                                   "the document gives the same programs as compiling the functions.")
    p.add_argument("file", help="a Python module with @hologram.kernel functions")
    p.add_argument("-o", "--output", help="the document to write (default: print it)")

    def run(args: Any) -> int:
        from hologram_python.command import translate_command

        return translate_command(args.file, args.output)

    p.set_defaults(func=run)
