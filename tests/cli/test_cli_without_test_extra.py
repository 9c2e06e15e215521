"""The CLI and the run-time path work without the `test` extra (hypothesis, pytest).

hypothesis and pytest stay in the `test` extra (docs/decisions.md, "The CLI without the
test extra"): only `hologram diff-test` needs them, and it says how to install them.
Each check runs a fresh interpreter whose path starts with a directory of stand-in
`hypothesis` and `pytest` packages that fail to import exactly as a missing package
does, so the environment is the editable one minus the extra.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from repo_paths import ROOT

BLOCKED = ("hypothesis", "pytest", "_pytest")


@pytest.fixture(scope="module")
def no_extra_env(tmp_path_factory) -> dict[str, str]:
    blocker = tmp_path_factory.mktemp("no-test-extra")
    for name in BLOCKED:
        (blocker / name).mkdir()
        (blocker / name / "__init__.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{name}'\", name={name!r})\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOLOGRAM_", "PYTEST_", "HYPOTHESIS_"))}
    env.update(PYTHONPATH=str(blocker), COLUMNS="200")
    return env


def _hologram(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hologram", *argv], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


def test_the_blocker_blocks(no_extra_env):
    done = subprocess.run([sys.executable, "-c", "import hypothesis"], capture_output=True, text=True,
                          env=no_extra_env)
    assert done.returncode == 1 and "No module named 'hypothesis'" in done.stderr


@pytest.mark.parametrize("argv, expected", [
    (("--help",), "diff-test"),
    (("diff-test", "--help"), "--examples"),
    (("fuzz", "--help"), "--programs"),
    (("plugins",), "interp"),
    (("run", "kernels/axpy.toml", "--bind", "n=4", "--input", "alpha=2"), "z = array("),
    (("compile", "kernels/sum.toml", "--emit", "asm"), ".program sum"),
])
def test_commands_run_without_hypothesis(no_extra_env, argv, expected):
    done = _hologram(no_extra_env, *argv)
    assert done.returncode == 0, done.stderr
    assert expected in done.stdout
    assert "internal error" not in done.stderr


def test_bench_runs_without_hypothesis(no_extra_env, tmp_path):
    done = _hologram(no_extra_env, "bench", "--quick", "--only", "axpy", "--repeat", "1", "--results-dir",
                     str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "performance targets" in done.stdout


@pytest.mark.parametrize("argv", [("diff-test", "--examples", "1"), ("fuzz", "--programs", "1", "--documents", "0")])
def test_test_kit_commands_say_how_to_install_what_they_need(no_extra_env, argv):
    done = _hologram(no_extra_env, *argv)
    assert done.returncode == 1
    assert "internal error" not in done.stderr
    assert f"hologram {argv[0]} needs hypothesis" in done.stderr
    assert "pip install 'hologram-kernels[test]'" in done.stderr


def test_import_and_kernel_calls_load_no_test_module(no_extra_env):
    """`import hologram`, compiling, and calling on every installed backend that declares
    the kernel import neither hypothesis nor pytest (the blocker would make them fail)."""
    code = ("import sys, numpy as np, hologram\n"
            "k = hologram.compile_file('kernels/softmax.toml')\n"
            "for b in hologram.list_backends():\n"
            "    if hologram.get_backend(b).capabilities.uncovered(k.program) is not None:\n"
            "        continue\n"
            "    y = k.on(b)(np.arange(8, dtype=np.float32))\n"
            "    assert abs(float(y.sum()) - 1) < 1e-5, (b, y)\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('hypothesis', 'pytest', '_pytest'))\n"
            "assert not bad, bad\n"
            "print('ok', *hologram.list_backends())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=no_extra_env, cwd=ROOT,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok") and "interp" in done.stdout


def test_the_cli_spells_the_harness_default_directory_alike():
    from hologram.cli import difftest as cli_difftest
    from hologram.testing import difftest

    assert cli_difftest.DEFAULT_OUT == difftest.DEFAULT_OUT
