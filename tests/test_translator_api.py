"""hologram.translator, the public API of translator plugins: every name it promises is
there, each the object its home module defines; importing it costs nothing; and the
plugin-side tools it adds (check_definition, compile_definition) do what they say."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import numpy as np
import pytest

from hologram.core.errors import ArgumentError, CompileError
from hologram.dsl.translators import parse_toml
import hologram.translator as api

DOC = '''[kernel]
name = "scale"
version = "1.0.0"
inputs = { x = "f32[n]" }
outputs = { y = "f32[n]" }
body = "y = x * 2"
'''


def test_every_name_is_its_homes():
    for name in api.__all__:
        value = getattr(api, name)
        home = api._HOME.get(name)
        if home is not None:
            module = importlib.import_module(home)
            assert value is (module if name == "semantics" else getattr(module, name)), name
    assert api.API == 2 and api.Translator.__module__ == "hologram.core.hookspecs"
    assert set(api.__all__) <= set(dir(api))
    with pytest.raises(AttributeError, match="no attribute 'compile_kdef'"):
        api.compile_kdef  # noqa: B018 - the runtime's own is not part of the API


def test_importing_it_loads_nothing_of_the_compiler():
    """Every translator plugin's registration imports it, in every process (bundle loads
    too): the names load when first used."""
    code = ("import json, sys\nfrom hologram.translator import API, BodyKey, Translator, hookimpl\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('hologram.dsl', 'hologram.registry', "
            "'hologram.compiler', 'hologram.call', 'hologram.compile_api', 'hologram.streaming', 'lark')))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_compile_definition_makes_a_kernel_of_a_definition():
    (kdef,) = parse_toml(DOC, "scale.toml")
    k = api.compile_definition(kdef, backend="interp", opt="O0")
    assert k.name == "scale" and k.backend.name == "interp"
    np.testing.assert_array_equal(k(np.arange(3, dtype=np.float32)), [0, 2, 4])
    with pytest.raises(ArgumentError, match="takes a KernelDef, got str"):
        api.compile_definition(DOC)


def test_check_definition_raises_the_bodys_errors_now():
    (kdef,) = parse_toml(DOC.replace("x * 2", "x * w"), "scale.toml")
    with pytest.raises(CompileError, match="unknown name 'w'") as info:
        api.check_definition(kdef)
    assert (info.value.span.file, info.value.span.line) == ("scale.toml", 6)
    api.check_definition(parse_toml(DOC, "scale.toml")[0])
