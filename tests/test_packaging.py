"""The plain install brings backends, and `make test` proves it from wheels.

The full check is `.ci/wheels.sh` (run by `make test` and `make wheel-check`): it builds
the three wheels and installs them into a fresh venv without extras. These tests keep
the declarations it relies on from drifting.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from repo_paths import ROOT



def _dependencies(pyproject: Path) -> dict[str, Requirement]:
    project = tomllib.loads(pyproject.read_text())["project"]
    return {Requirement(d).name: Requirement(d) for d in project["dependencies"]}


def test_the_root_distribution_depends_on_the_interpreter_everywhere():
    interp = _dependencies(ROOT / "pyproject.toml")["hologram-backend-interp"]
    assert interp.marker is None and not interp.extras


# (sys_platform, platform_machine, implementation) -> whether llvmlite has a wheel there
PLATFORMS = {
    ("linux", "x86_64", "CPython"): True, ("linux", "aarch64", "CPython"): True,
    ("darwin", "arm64", "CPython"): True, ("win32", "AMD64", "CPython"): True,
    ("darwin", "x86_64", "CPython"): False, ("win32", "ARM64", "CPython"): False,
    ("linux", "ppc64le", "CPython"): False, ("linux", "x86_64", "PyPy"): False,
}


@pytest.mark.parametrize("platform, wheel", PLATFORMS.items())
def test_the_native_backend_comes_where_llvmlite_has_wheels(platform, wheel):
    native = _dependencies(ROOT / "pyproject.toml")["hologram-backend-cpu-llvm"]
    sys_platform, machine, implementation = platform
    env = {"sys_platform": sys_platform, "platform_machine": machine, "platform_python_implementation": implementation}
    assert native.marker is not None and native.marker.evaluate(env) == wheel


def test_the_root_distribution_depends_on_the_python_translator_everywhere():
    python = _dependencies(ROOT / "pyproject.toml")["hologram-translator-python"]
    assert python.marker is None and not python.extras


def test_the_plugins_depend_on_the_root_distribution():
    for plugin in ("interp", "cpu_llvm", "python"):
        assert "hologram-kernels" in _dependencies(ROOT / "plugins" / plugin / "pyproject.toml")


def test_make_test_runs_the_wheel_check():
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe and "bash .ci/wheels.sh" in recipe.group(1)
    assert "make test" in (ROOT / ".ci" / "run").read_text()
