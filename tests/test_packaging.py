"""The plain install brings backends, and `make test` proves it from wheels.

The full check is `.ci/wheels.sh` (run by `make test` and `make wheel-check`): it builds
the wheels (hologram-kernels and every plugin folder's) and installs them into a fresh venv without extras. These tests keep
the declarations it relies on from drifting.
"""

from __future__ import annotations

import re
import subprocess
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


def test_make_test_runs_the_wheel_check():
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe and "bash .ci/wheels.sh" in recipe.group(1)
    assert "make test" in (ROOT / ".ci" / "run").read_text()


# ------------------------------------------------ a plugin folder needs no edit elsewhere
PLUGIN_FOLDERS = sorted(p.parent.relative_to(ROOT).as_posix() for p in ROOT.glob("plugins/*/pyproject.toml"))


def test_the_plugins_depend_on_the_root_distribution_every_one():
    for folder in PLUGIN_FOLDERS:
        assert "hologram-kernels" in _dependencies(ROOT / folder / "pyproject.toml"), folder


def test_the_makefile_installs_every_plugin_folder_found_not_listed():
    made = subprocess.run(["make", "--dry-run", "--always-make", "venv", "PYTHON=python3"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    install = next(line for line in made.stdout.splitlines() if "pip install" in line and " -e " in line)
    assert sorted(re.findall(r"-e (plugins/[\w-]+)", install)) == PLUGIN_FOLDERS, install
    makefile = (ROOT / "Makefile").read_text()
    assert not [f for f in PLUGIN_FOLDERS if f in makefile], "the Makefile names a plugin folder: derive it"


def test_the_wheel_check_builds_every_plugin_folder_found_not_listed():
    listed = subprocess.run(["bash", ".ci/wheels.sh", "--plugins"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == PLUGIN_FOLDERS
    script = (ROOT / ".ci" / "wheels.sh").read_text()
    assert not [f for f in PLUGIN_FOLDERS if f in script], ".ci/wheels.sh names a plugin folder: derive it"
    assert '"${PLUGINS[@]}"' in script and '"${PLUGINS[@]/#/$WORK/src/}"' in script  # copied, then built


def test_pytest_collects_every_plugin_folders_tests():
    paths = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["testpaths"]
    assert "plugins/*/tests" in paths and not [p for p in paths if p.startswith("plugins/") and "*" not in p]
