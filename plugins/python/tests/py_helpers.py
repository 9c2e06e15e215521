"""Helpers for the Python translator's tests: a module's text translated, compiled, or
written to a file and imported (so `@hologram.kernel` reads it as it reads any module)."""

from __future__ import annotations

import importlib.util
import itertools
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from hologram.core.errors import HologramError
from hologram.dsl.document import KernelDef
from hologram_python.translate import translate_module

HEADER = "import numpy as np\nimport hologram as hg\nfrom hologram.types import *\n"
_COUNT = itertools.count()


def source(body: str) -> str:
    """A module: the usual imports, then `body` (dedented)."""
    return HEADER + textwrap.dedent(body).lstrip("\n")


def translate(body: str, file: str = "k.py") -> list[KernelDef]:
    return translate_module(source(body), file)


def one(body: str) -> KernelDef:
    (kdef,) = translate(body)
    return kdef


def error(body: str, kind: type[HologramError] = HologramError) -> HologramError:
    """The error translating and compiling the module raises."""
    from hologram.compiler.driver import compile_kdef
    from hologram.registry.pipelines import resolve

    with pytest.raises(kind) as info:
        for kdef in translate(body):
            compile_kdef(kdef, resolve("O0"))
    return info.value


def load(tmp_path: Path, body: str, raw: bool = False) -> ModuleType:
    """`body` written as a module file and imported: its kernels compiled by the decorator."""
    name = f"pykernels_{next(_COUNT)}"
    path = tmp_path / f"{name}.py"
    path.write_text(body if raw else source(body))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # pickling finds the module's kernels by name
    spec.loader.exec_module(module)
    return module


def underline(err: HologramError) -> str:
    """The text the error's span underlines on its line."""
    span = err.span
    line = span.source.splitlines()[span.line - 1]
    return line[span.col - 1:span.end_col - 1]
