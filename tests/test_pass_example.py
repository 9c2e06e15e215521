"""examples/hologram-pass-example: a pass shipped as its own distribution works from outside.

The package is built and installed with pip (no network: `--no-index`, the dev
environment's setuptools) into a temporary directory, and a fresh `hologram` process
with that directory on its path finds it through its entry point: it is listed by
`hologram plugins`, runs in O2 between `strength` and `cse` as its ordering asks, and
shows in `--after neg-cancel` and `--emit stats`. In process, the pass is held to
bit-for-bit equality with the unoptimized kernel on IEEE special values.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import hologram
from hologram.registry.lookups import list_backends
from hologram.registry.pipelines import resolve
from hologram.testing.difftest import run_difftest

from repo_paths import EXAMPLES

EXAMPLE = EXAMPLES / "hologram-pass-example"

KERNEL = """\
[kernel]
name = "negs"
version = "1.0.0"
summary = "negations that cancel"
inputs  = { a = "f32[n]", b = "f32[n]" }
outputs = { y = "f32[n]", z = "f32[n]" }
body = '''
y = (a - -b) * ((-a) * (-b))
z = (-a) / (-b) + (a + -b) + (-a + b)
'''
"""


def _load_example():
    spec = importlib.util.spec_from_file_location(
        "hologram_pass_example", os.path.join(EXAMPLE, "hologram_pass_example", "__init__.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def example_plugin(register_plugin):
    return register_plugin(_load_example(), "test-pass-example")


SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.5, 3.0e38, -3.0e38, 1e-45, -1e-45, 1.17e-38,
                     0.1, 7.0], np.float32)


def test_neg_cancel_is_exact_on_ieee_special_values(example_plugin):
    a, b = (x.ravel() for x in np.meshgrid(SPECIALS, SPECIALS))
    plain = hologram.compile(KERNEL, opt="O0")
    assert "neg" in plain.emit("ir")
    only = hologram.compile(KERNEL, passes=["neg-cancel"])
    assert "neg(" not in only.emit("ir")
    for backend in list_backends():
        want = plain.on(backend)(a, b)
        for got in (only.on(backend)(a, b), hologram.compile(KERNEL, opt="O2").on(backend)(a, b)):
            for w, g in zip(want, got):
                # bit for bit, except a NaN's sign and payload (IEEE leaves them open)
                same = (w.view(np.uint32) == g.view(np.uint32)) | (np.isnan(w) & np.isnan(g))
                assert same.all(), (backend, a[~same], b[~same], w[~same], g[~same])


def test_generated_kernels_agree_with_the_oracle_with_the_pass_in_o2(example_plugin, tmp_path):
    assert "neg-cancel" in resolve("O2").names
    report = run_difftest(["interp"], examples=30, seed=4, kinds=("kernels",), opts=("O2",), out_dir=str(tmp_path))
    assert report.ok, report.rows[0].message


def _run(args: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run([sys.executable, "-m", "hologram", *args], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_installed_through_its_entry_point_it_is_listed_and_runs_where_its_ordering_puts_it(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    site = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", str(site), str(source)], capture_output=True, text=True,
                         timeout=120)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert any(p.name.startswith("hologram_pass_example-0.1.0") for p in site.iterdir())
    env = dict(os.environ, PYTHONPATH=str(site), COLUMNS="200")
    env.pop("HOLOGRAM_PLUGINS", None)
    env.pop("HOLOGRAM_OPT", None)

    listing = _run(["plugins"], env)
    assert re.search(r"pass_example\s+.*hologram-pass-example 0\.1\.0.*pass neg-cancel \(ir; O2\).*ok", listing)
    order = re.findall(r"^\W*([a-z][a-z0-9_-]*)\s+│\s+(?:ir|isa)\s", listing, re.M)
    assert order.index("strength") < order.index("neg-cancel") < order.index("cse"), order

    kfile = tmp_path / "negs.toml"
    kfile.write_text(KERNEL)
    before = _run(["compile", str(kfile), "--emit", "ir", "--opt", "O2", "--after", "strength"], env)
    after = _run(["compile", str(kfile), "--emit", "ir", "--opt", "O2", "--after", "neg-cancel"], env)
    assert "neg(" in before and "neg(" not in after
    assert "neg(" in _run(["compile", str(kfile), "--emit", "ir", "--opt", "O1"], env)  # O2 only

    stats = _run(["compile", str(kfile), "--emit", "stats"], env)
    ops = re.search(r"IR ops\s+│\s+(\d+)\s+│\s+(\d+)\s+│\s+(\d+)", stats)
    assert ops and int(ops.group(3)) < int(ops.group(2)), stats  # O2 (with neg-cancel) below O1
