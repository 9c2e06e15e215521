"""examples/hologram-translator-hgk and examples/hologram-backend-lanes: the plugin guide's
translator and backend, shipped as packages, work from outside.

Both are built and installed with pip (no network: `--no-index`, the dev environment's
setuptools) into a temporary directory, and a fresh `hologram` process with that
directory on its path finds them through their entry points. In process, the modules
are registered on the plugin manager as docs/plugins.md ("Testing a plugin") shows;
`lanes` is held bit for bit to the reference interpreter on the elementwise standard
library kernels and on generated kernels, and must refuse, by name, what it cannot run.
The code docs/plugins.md shows is checked to be the packages' code.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import hologram
from hologram.core.errors import ArgumentError, CompileError, DocumentError, ExecutionError, HologramError, PluginError
from hologram.isa.asm import format_program, parse_program
from hologram.runtime import plugins
from hologram.testing import kernels
from hologram.verify.verifier import verify

from repo_paths import DOCS, EXAMPLES, KERNELS, ROOT

HGK_DIR = EXAMPLES / "hologram-translator-hgk"
LANES_DIR = EXAMPLES / "hologram-backend-lanes"
GUIDE = (DOCS / "plugins.md").read_text()

ELEMENTWISE_STDLIB = ("vadd", "vsub", "vmul", "vdiv", "axpy", "relu", "stencil3")


def _load(directory: Path, module: str):
    spec = importlib.util.spec_from_file_location(module, directory / module / "__init__.py")
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


@pytest.fixture
def registered(monkeypatch):
    """Both example plugins registered on a fresh plugin manager."""
    monkeypatch.delenv("HOLOGRAM_PLUGINS", raising=False)
    monkeypatch.delenv("HOLOGRAM_BACKEND", raising=False)
    plugins.reset()
    hgk, lanes = _load(HGK_DIR, "hologram_hgk"), _load(LANES_DIR, "hologram_lanes")
    manager = plugins.plugin_manager()
    manager.register(hgk, name="hgk")
    manager.register(lanes, name="lanes")
    yield hgk, lanes
    plugins.reset()


def _bits_equal(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal bit for bit, except a NaN's payload and sign (IEEE leaves them open)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if got.dtype.kind != "f":
        return bool(np.array_equal(got, want))
    unsigned = f"u{got.dtype.itemsize}"
    return bool(np.all((got.view(unsigned) == want.view(unsigned)) | (np.isnan(got) & np.isnan(want))))


def _outputs(result: object) -> tuple:
    return result if isinstance(result, tuple) else (result,)


# ------------------------------------------------------------------- the guide's code
def _guide_block(header: str) -> str:
    start = GUIDE.index(f"```python\n# {header}\n") + len(f"```python\n# {header}\n")
    return GUIDE[start:GUIDE.index("```", start)]


def test_the_guide_shows_the_translator_package_verbatim():
    assert _guide_block("hologram_hgk/__init__.py") == (HGK_DIR / "hologram_hgk" / "__init__.py").read_text()


def test_the_guide_shows_the_backend_object_as_the_package_defines_it():
    source = (LANES_DIR / "hologram_lanes" / "__init__.py").read_text()
    shown = _guide_block("hologram_lanes/__init__.py (the backend object)")
    for part in shown.split("\n\n\n"):
        assert part.strip() in source, part


# ----------------------------------------------------------------------- translator
def test_hgk_compiles_runs_and_points_errors_into_the_file(registered, tmp_path):
    source = tmp_path / "vadd.hgk"
    source.write_text((HGK_DIR / "vadd.hgk").read_text())
    k = hologram.compile_file(source)
    assert str(k.signature) == "vadd(x: f32[n], y: f32[n]) -> z: f32[n]"
    np.testing.assert_array_equal(k(np.ones(3, np.float32), np.full(3, 2, np.float32)), [3, 3, 3])
    source.write_text(source.read_text().replace("z = x + y", "z = w + y"))
    with pytest.raises(CompileError) as e:
        hologram.compile_file(source)
    assert str(e.value).startswith(f"{source}:6:5: error: unknown name 'w'")
    assert "   6 | z = w + y\n     |     ^" in str(e.value)
    text = (HGK_DIR / "vadd.hgk").read_text()
    with pytest.raises(DocumentError) as e:
        hologram.compile(text.replace("f32[n]", "f32[n", 1), format="hgk", file="bad.hgk")
    assert str(e.value).startswith("bad.hgk:2:")
    with pytest.raises(DocumentError, match="expected 'in NAME: TYPE' or 'out NAME: TYPE'"):
        hologram.compile(text.replace("in  y: f32[n]", "inout y: f32[n]"), format="hgk")
    with pytest.raises(DocumentError, match="expected a '---' line before the body"):
        hologram.compile("kernel k 1.0.0\n", format="hgk")
    with pytest.raises(DocumentError, match="expected 'kernel NAME VERSION'"):
        hologram.compile("", format="hgk")


# -------------------------------------------------------------------------- backend
def test_lanes_is_never_the_default_while_interp_is_installed(registered):
    assert "lanes" in hologram.list_backends()
    assert hologram.get_backend().name != "lanes" and hologram.get_backend("lanes").priority == 0


@pytest.mark.parametrize("name", ELEMENTWISE_STDLIB)
def test_lanes_runs_the_elementwise_stdlib_bit_for_bit_as_interp(registered, name):
    k = hologram.compile_file(KERNELS / f"{name}.toml")
    rng = np.random.default_rng(7)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3e38, -1.5], np.float32)
    args = []
    for p in k.signature.inputs:
        if p.kind == "scalar":
            args.append(p.dtype.np.type(-2.5))
        else:
            data = rng.standard_normal(1000).astype(p.dtype.np)
            data[:len(specials)] = specials.astype(p.dtype.np)
            args.append(rng.permutation(data))
    for got, want in zip(_outputs(k.on("lanes")(*args)), _outputs(k.on("interp")(*args))):
        assert _bits_equal(got, want)


WHERE_AND_CASTS = """
[kernel]
name = "mixed"
version = "1.0.0"
inputs  = { a = "i16[n]", b = "i16[n]", x = "f16[n]" }
outputs = { y = "f32[n]", z = "i16[n]", m = "bool[n]" }
body = '''
y = where(a > b, f32(x) * 3.0, f32(a) - f32(x))
z = (a * b + 7) ^ (a - b) & ~b
m = (x < 0.5) | (a == b)
'''
"""


def test_lanes_runs_where_casts_and_wrapping_integers_as_interp(registered):
    k = hologram.compile(WHERE_AND_CASTS)
    rng = np.random.default_rng(3)
    a, b = (rng.integers(-32768, 32767, 500, endpoint=True).astype(np.int16) for _ in range(2))
    b[:50] = a[:50]
    x = rng.standard_normal(500).astype(np.float16)
    for got, want in zip(k.on("lanes")(a, b, x), k.on("interp")(a, b, x)):
        assert _bits_equal(got, want)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # the registration is the same throughout
@given(kernels())
def test_lanes_agrees_with_interp_on_generated_kernels_or_refuses_by_name(registered, case):
    try:
        k = hologram.compile(case.source)
        want = k.on("interp")(**dict(case.inputs))
    except HologramError:
        return  # a case whose expected outcome is an error: the harness's business, not this backend's
    try:
        got = k.on("lanes")(**dict(case.inputs))
    except PluginError as e:
        assert re.match(r"backend 'lanes' cannot run program '\w+': stage '\w+': ", e.message), e.message
        return
    for g, w in zip(_outputs(got), _outputs(want)):
        assert _bits_equal(g, w), (case.source, g, w)


GRID = """\
.program grid
.isa 1
.symbols m n
.param in a: f32[n, m]
.param out y: f32[n, m]
.param out ids: i64[n, m]

.stage s domain [m, n] block [4, 3]
    .reg %i, %t: i64
    .reg %f: f32
    MAD.i64     %i, %gid.y, %gdim.x, %gid.x
    LDG.f32     %f, [a + %i]
    MAD.f32     %f, %f, 3.0, -1.0
    STG.f32     [y + %i], %f
    MAD.i64     %t, %ctaid.y, %nctaid.x, %ctaid.x
    MAD.i64     %t, %t, %ntid.y, %tid.y
    MAD.i64     %t, %t, %ntid.x, %tid.x
    STG.i64     [ids + %i], %t
    EXIT
"""


def test_lanes_gives_every_lane_its_specials_on_a_2d_domain_with_partial_blocks(registered):
    """A hand-written program (the lowering emits no MAD): each lane stores its block's
    number and its place in the block, from every special register, over a 10 x 7
    domain in 4 x 3 blocks (the last block partial on both axes)."""
    program = parse_program(GRID)
    verify(program)
    a = np.random.default_rng(5).standard_normal((7, 10)).astype(np.float32)
    results = []
    for name in ("lanes", "interp"):
        backend = hologram.get_backend(name)
        y, ids = np.zeros((7, 10), np.float32), np.zeros((7, 10), np.int64)
        backend.launch(backend.prepare(program), {"a": a, "y": y, "ids": ids}, {}, {"m": 10, "n": 7})
        results.append((y, ids))
    (y, ids), (want_y, want_ids) = results
    assert _bits_equal(y, want_y) and np.array_equal(ids, want_ids)
    assert ids[0, :6].tolist() == [0, 1, 2, 3, 12, 13] and ids[6, 9] == (2 * 3 + 2) * 12 + 0 * 4 + 1  # block (2, 2) of 3 x 3, lane (1, 0)


def test_lanes_refuses_what_it_cannot_run_naming_the_instruction(registered):
    k = hologram.compile_file(KERNELS / "sum.toml")
    with pytest.raises(PluginError) as e:
        k.on("lanes")(np.ones(4, np.float32))
    assert e.value.message == ("backend 'lanes' cannot run program 'sum': stage 'total': instruction 2 "
                               "`ReduceAdd.f32 [total], %f0`: ReduceAdd is not a straight-line, all-lanes "
                               "operation here")
    assert "kernel.on('interp')" in e.value.hint


def test_lanes_launch_checks_its_arguments_and_bounds(registered):
    backend = hologram.get_backend("lanes")
    k = hologram.compile_file(KERNELS / "vadd.toml")
    exe = backend.prepare(k.program)
    x, y, z = np.ones(4, np.float32), np.ones(4, np.float32), np.zeros(4, np.float32)
    backend.launch(exe, {"x": x, "y": y, "z": z}, {}, {"n": 4})
    np.testing.assert_array_equal(z, [2, 2, 2, 2])
    with pytest.raises(ArgumentError, match="buffer 'x': expected 4 writeable elements, got shape"):
        backend.launch(exe, {"x": np.ones(3, np.float32), "y": y, "z": z}, {}, {"n": 4})
    with pytest.raises(ArgumentError, match="buffer 'y': expected a C-contiguous numpy array of f32"):
        backend.launch(exe, {"x": x, "y": np.ones(4), "z": z}, {}, {"n": 4})
    with pytest.raises(ArgumentError, match="'z' overlaps 'x'"):
        backend.launch(exe, {"x": x, "y": y, "z": x}, {}, {"n": 4})
    with pytest.raises(ArgumentError, match=r"shape symbol 'n' = 9223372036854775808 is outside the range"):
        backend.launch(exe, {"x": x, "y": y, "z": z}, {}, {"n": 2**63})
    with pytest.raises(ArgumentError, match=r"shape symbol 'n' must be bound to an integer"):
        backend.launch(exe, {"x": x, "y": y, "z": z}, {}, {})
    shifted = parse_program(format_program(k.program).replace(
        "[y + %i0]", "[y + %i0 + 1]"))  # unverified: reads y[4] in the last lane
    with pytest.raises(ExecutionError, match=r"`LDG.f32 %f1, \[y \+ %i0 \+ 1\]`: index 4 is out of bounds for "
                                             r"a buffer of 4 elements"):
        backend.launch(backend.prepare(shifted), {"x": x, "y": y, "z": z}, {}, {"n": 4})


# ------------------------------------------------------------------ installed by pip
def _run(args: list[str], env: dict[str, str], status: int = 0) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "hologram", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    assert done.returncode == status, done.stdout + done.stderr
    return done


def test_installed_by_pip_they_are_listed_and_run(tmp_path):
    site = tmp_path / "site"
    sources = []
    for directory in (HGK_DIR, LANES_DIR):
        copy = tmp_path / directory.name
        shutil.copytree(directory, copy, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        sources.append(str(copy))
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", str(site), *sources], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOLOGRAM_")}
    env.update(PYTHONPATH=str(site), COLUMNS="200")

    listing = _run(["plugins"], env).stdout
    assert re.search(r"hgk\s+│ hologram-translator-hgk 0\.1\.0\s+│ translator hgk \(\.hgk\)\s+│ ok", listing), listing
    assert re.search(r"lanes\s+│ hologram-backend-lanes 0\.1\.0\s+│ backend lanes\s+│ ok", listing), listing
    assert re.search(r"│ lanes\s+│ 0\s+│ yes\s+│\s+│", listing), listing  # priority 0, available, not the default

    ran = _run(["run", str(HGK_DIR / "vadd.hgk"), "--backend", "lanes", "--bind", "n=4", "--seed", "3"], env).stdout
    reference = _run(["run", str(HGK_DIR / "vadd.hgk"), "--backend", "interp", "--bind", "n=4", "--seed", "3"], env)
    assert ran.startswith("vadd(x: f32[n], y: f32[n]) -> z: f32[n]  [backend lanes, n = 4, seed 3]")
    assert ran.splitlines()[1] == reference.stdout.splitlines()[1]

    refused = _run(["run", "kernels/sum.toml", "--backend", "lanes"], env, status=1)
    assert refused.stderr.startswith("hologram: error: backend 'lanes' cannot run program 'sum': stage 'total': ")
    assert "internal error" not in refused.stderr
