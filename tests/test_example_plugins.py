"""examples/hologram-translator-hgk and examples/hologram-backend-lanes: the plugin guide's
translator and backend, shipped as packages, work from outside.

Both are built and installed with pip (no network: `--no-index`, the dev environment's
setuptools) into a temporary directory, and a fresh `hologram` process with that
directory on its path finds them through their entry points. In process, the modules
are registered on the plugin manager as docs/plugins.md ("Testing a plugin") shows;
`lanes` is held bit for bit to the reference interpreter on the elementwise standard
library kernels and on generated kernels, and must refuse, by name, what it cannot run.
The code docs/plugins.md and docs/backends.md show is checked to be the packages' code.

examples/hologram-kernels-example, a library of kernels shipped as the bundle
`examplekernels`: its wheel, built offline, carries the bundle compiled, and a fresh
process loads it from there without compiling anything; from its checkout, the bundle is
built into the cache at its first load.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import hologram
from hologram.bundles.load import resolve
from hologram.bundles.shipping import bundle_ref
from hologram.core.errors import ArgumentError, CompileError, DocumentError, ExecutionError, HologramError, PluginError
from hologram.isa.asm import format_program, parse_program
from hologram.registry import plugins
from hologram.testing import kernels
from hologram.verify.verifier import verify

from repo_paths import DOCS, EXAMPLES, KERNELS, ROOT
from stdlib_cases import ELEMENTWISE_STDLIB, elementwise_args, outputs

HGK_DIR = EXAMPLES / "hologram-translator-hgk"
LANES_DIR = EXAMPLES / "hologram-backend-lanes"
BUNDLE_DIR = EXAMPLES / "hologram-kernels-example"
GUIDE = (DOCS / "plugins.md").read_text()
BACKEND_GUIDE = (DOCS / "backends.md").read_text()



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


# ------------------------------------------------------------------- the guide's code
def _guide_block(header: str, guide: str = GUIDE) -> str:
    start = guide.index(f"```python\n# {header}\n") + len(f"```python\n# {header}\n")
    return guide[start:guide.index("```", start)]


def test_the_guide_shows_the_translator_package_verbatim():
    assert _guide_block("hologram_hgk/__init__.py") == (HGK_DIR / "hologram_hgk" / "__init__.py").read_text()


def test_the_guide_shows_the_backend_object_as_the_package_defines_it():
    source = (LANES_DIR / "hologram_lanes" / "__init__.py").read_text()
    shown = _guide_block("hologram_lanes/__init__.py (the backend object)", BACKEND_GUIDE)
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
    args = elementwise_args(k)
    for got, want in zip(outputs(k.on("lanes")(*args)), outputs(k.on("interp")(*args))):
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
    for g, w in zip(outputs(got), outputs(want)):
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
                               "`ReduceAdd.f32 [total], %f0`: ReduceAdd.f32 is not declared")
    assert "kernel.on('interp')" in e.value.hint


def test_lanes_launch_checks_its_arguments_and_bounds(registered):
    backend = hologram.get_backend("lanes")
    k = hologram.compile_file(KERNELS / "vadd.toml")
    exe = backend.prepare(k.program)
    x, y, z = np.ones(4, np.float32), np.ones(4, np.float32), np.zeros(4, np.float32)
    backend.launch(exe, {"x": x, "y": y, "z": z}, {}, {"n": 4})
    np.testing.assert_array_equal(z, [2, 2, 2, 2])
    with pytest.raises(ArgumentError, match=r"buffer 'x': expected 4 elements, got 3 \(shape \(3,\)\)"):
        backend.launch(exe, {"x": np.ones(3, np.float32), "y": y, "z": z}, {}, {"n": 4})
    with pytest.raises(ArgumentError, match="buffer 'y': expected dtype f32, got float64"):
        backend.launch(exe, {"x": x, "y": np.ones(4), "z": z}, {}, {"n": 4})
    with pytest.raises(ArgumentError, match="'z' overlaps 'x'"):
        backend.launch(exe, {"x": x, "y": y, "z": x}, {}, {"n": 4})
    with pytest.raises(ArgumentError, match=r"shape symbol 'n' = 9223372036854775808 is outside the range"):
        backend.launch(exe, {"x": x, "y": y, "z": z}, {}, {"n": 2**63})
    with pytest.raises(ArgumentError, match=r"shape symbol 'n' must be bound to an integer"):
        backend.launch(exe, {"x": x, "y": y, "z": z}, {}, {})
    shifted = parse_program(format_program(k.program).replace(
        "LDG.f32     %f1, [y + %i0]", "LDG.f32.chk %f1, [y + %i0 + 1]"))  # checked: reads y[4] in the last lane
    with pytest.raises(ExecutionError, match=r"`LDG.f32.chk %f1, \[y \+ %i0 \+ 1\]`: index 4 is out of bounds "
                                             r"for a buffer of 4 elements"):
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
    assert "ReduceAdd.f32 is not declared" in refused.stderr
    assert "internal error" not in refused.stderr


# ------------------------------------------------------------ kernels shipped as a bundle
def test_the_guide_shows_the_bundle_hook_as_the_package_defines_it():
    shown = _guide_block("hologram_kernels_example/__init__.py (the hook)")
    assert shown in (BUNDLE_DIR / "hologram_kernels_example" / "__init__.py").read_text()


def _examplekernels_agree_with_numpy(lib) -> None:
    """Each of the example's kernels, on every backend that declares it, against its numpy
    meaning."""
    rng = np.random.default_rng(11)
    x = (3 * rng.standard_normal(1000)).astype(np.float32)
    x[:5] = [np.nan, -0.0, np.inf, -np.inf, 1.0]
    a, b = (rng.standard_normal(1000).astype(np.float32) for _ in range(2))
    m = rng.standard_normal((7, 300)).astype(np.float32)
    t = np.float32(0.3)
    checks = {"clamp01": lambda k: np.testing.assert_array_equal(k(x), np.clip(x, 0, 1)),
              "lerp": lambda k: np.testing.assert_array_equal(k(a, b, t), a + t * (b - a)),  # + - * are exact
              "rms": lambda k: np.testing.assert_allclose(k(m), np.sqrt(np.mean(m * m, axis=1)), rtol=1e-5)}
    for backend in hologram.list_backends():
        for name, check in checks.items():
            kernel = getattr(lib, name)
            if hologram.get_backend(backend).capabilities.uncovered(kernel.program) is None:
                check(kernel.on(backend))


LOAD_INSTALLED = textwrap.dedent("""
    import sys
    import numpy as np
    import hologram
    from hologram.bundles.load import resolve
    from hologram.lower import stages
    from hologram.passes import manager

    def refuse(*a, **k):
        raise AssertionError("loading the bundle compiled something")
    stages.lower = manager.Pipeline.run_ir = manager.Pipeline.run_isa = refuse
    found = resolve("examplekernels")
    assert found.make is None and found.path == sys.argv[1], found  # the wheel's file, nothing to build
    lib = hologram.load_bundle("examplekernels")
    assert sorted(lib) == ["clamp01", "lerp", "rms"], sorted(lib)
    _examplekernels_agree_with_numpy(lib)
    print(sorted(m for m in sys.modules if m == "lark" or m.startswith(("lark.", "hologram.dsl.parser",
                                                                       "hologram.dsl.analyze"))))
""")


def test_the_kernels_example_wheel_carries_its_bundle_and_a_fresh_process_loads_it_compiling_nothing(tmp_path):
    source, wheels, site = tmp_path / "src", tmp_path / "wheels", tmp_path / "site"
    shutil.copytree(BUNDLE_DIR, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    # the README's offline build, as it is written there (`.` the package, `-w dist` the wheel folder)
    offline = next(line for line in (BUNDLE_DIR / "README.md").read_text().splitlines()
                   if line.startswith("pip wheel") and "--no-index" in line)
    args = [str(source) if a == "." else str(wheels) if a == "dist" else a for a in offline.split()[2:]]
    pip = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", *args], capture_output=True, text=True,
                         timeout=300)
    assert pip.returncode == 0, offline + "\n" + pip.stdout + pip.stderr
    (wheel,) = wheels.glob("*.whl")
    assert wheel.name == "hologram_kernels_example-0.1.0-py3-none-any.whl"  # ISA programs, no machine code
    with zipfile.ZipFile(wheel) as z:
        assert "hologram_kernels_example/examplekernels-0.1.0.hgb" in z.namelist(), z.namelist()
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target",
                          str(site), str(wheel)], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    packaged = site / "hologram_kernels_example" / "examplekernels-0.1.0.hgb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOLOGRAM_")}
    env.update(PYTHONPATH=str(site), COLUMNS="200", HOLOGRAM_CACHE_DIR=str(tmp_path / "cache"))

    listed = _run(["bundle", "list", "examplekernels"], env).stdout
    assert listed.split() == ["examplekernels", "0.1.0", str(packaged), "(a", "plugin)"], listed

    script = inspect.getsource(_examplekernels_agree_with_numpy) + LOAD_INSTALLED  # the same check, out of process
    done = subprocess.run([sys.executable, "-c", script, str(packaged)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "[]"  # no front end imported, loading or calling
    assert not (tmp_path / "cache" / "bundles").exists()  # nothing built into the cache


def test_the_kernels_example_readme_says_what_a_kernel_name_may_hold():
    """Its "Making it yours" says which characters a kernel name refuses: each is refused."""
    rule = re.search(r"a kernel's name is an identifier \(([^)]*)\)", (BUNDLE_DIR / "README.md").read_text())
    assert rule, "the README says what a kernel's name may be"
    refused = re.findall(r"`(.)`", rule.group(1).partition("refuses")[2])
    assert refused
    document = (BUNDLE_DIR / "kernels" / "clamp01.toml").read_text()
    for char in refused:
        with pytest.raises(DocumentError, match="invalid kernel name"):
            hologram.compile(document.replace('"clamp01"', f'"clamp{char}01"'))
    assert hologram.compile(document.replace('"clamp01"', '"_clamp_01"')).name == "_clamp_01"


def test_the_kernels_example_from_its_checkout_builds_its_bundle_into_the_cache_at_first_load(
        fresh_plugins, register_plugin, tmp_path, monkeypatch):
    monkeypatch.setenv("HOLOGRAM_CACHE_DIR", str(tmp_path / "cache"))
    example = register_plugin(_load(BUNDLE_DIR, "hologram_kernels_example"), "examplekernels")
    assert not list(example.HERE.glob("*.hgb"))  # a checkout carries the documents, not the bundle
    found = resolve("examplekernels")
    path = Path(found.path)
    assert found.make is not None and path.parent.parent == tmp_path / "cache" / "bundles" and not path.exists()
    lib = hologram.load_bundle("examplekernels")
    assert path.is_file() and sorted(lib) == ["clamp01", "lerp", "rms"]
    _examplekernels_agree_with_numpy(lib)
    built = path.stat().st_mtime_ns
    hologram.load_bundle("examplekernels")
    assert path.stat().st_mtime_ns == built  # built once, then loaded as it is

    edited = tmp_path / "kernels"
    shutil.copytree(BUNDLE_DIR / "kernels", edited)
    assert Path(bundle_ref(example.NAME, example.__version__, tmp_path, edited).path) == path  # the same documents
    (edited / "lerp.toml").write_text((edited / "lerp.toml").read_text().replace("a + t * (b - a)", "fma(t, b - a, a)"))
    assert Path(bundle_ref(example.NAME, example.__version__, tmp_path, edited).path) != path  # a new bundle
