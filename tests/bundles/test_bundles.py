"""Bundles: built once, byte for byte the same anywhere, loaded with no compiler work,
found by name and version, and every kind of damage refused (docs/bundles.md)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from repo_paths import KERNELS

import hologram as hg
from hologram.bundles import archive
from hologram.bundles.build import build
from hologram.bundles.load import discover, library, load_bundle, open_bundle, read_bundle
from hologram.bundles.manifest import MANIFEST, parse, to_toml
from hologram.bundles.shipping import bundle_ref
from hologram.core.errors import BundleError
from hologram.core.hookspecs import BundleRef, hookimpl
from hologram.isa.encoding import program_hash
from hologram.testing import kernels

TINY = '''
[[kernels]]
name = "vadd"
version = "1.0.0"
summary = "elementwise sum"
inputs = { x = "f32[n]", y = "f32[n]" }
outputs = { z = "f32[n]" }
body = "z = x + y"

[[kernels]]
name = "stats"
version = "2.1.0"
inputs = { x = "f64[m, n]" }
outputs = { lo = "f64[m]", total = "f64" }
body = """
lo = min(x, axis=1)
total = sum(x)
"""
'''


def tiny(folder: Path, name: str = "tiny", version: str = "1.0.0", text: str = TINY, **kw) -> Path:
    """A bundle of TINY's kernels; vadd carries the bundle's version, so a library loaded by
    name says which file it came from."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tiny.toml").write_text(text.replace('version = "1.0.0"', f'version = "{version}"', 1))
    out = folder / f"{name}-{version}.hgb"
    build([folder / "tiny.toml"], name, version, out, cache_dir=False, jobs=1, **{"native": "none", **kw})
    return out


# ------------------------------------------------------------------- round trip
def test_the_standard_library_round_trips(tmp_path):
    report = build([KERNELS], "stdlib", "1.0.0", tmp_path / "stdlib-1.0.0.hgb", cache_dir=False, jobs=1, native="none")
    lib = load_bundle(tmp_path / "stdlib-1.0.0.hgb")
    assert sorted(lib) == sorted(k.entry.name for k in report.kernels)
    for path in sorted(KERNELS.glob("*.toml")):
        # under the bundle's member name, which the programs' sites name (docs/isa.md, "Sites")
        for name, compiled in hg.compile_all(path.read_text(), file=f"sources/{path.name}").items():
            shipped = lib[name]
            assert program_hash(shipped.program) == program_hash(compiled.program), name
            assert shipped.signature == compiled.signature and shipped.version == compiled.version
            assert shipped.summary == compiled.summary and shipped.emit("asm") == compiled.emit("asm")
            assert shipped.emit("ir") == compiled.emit("ir")
    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    e = np.exp(x - x.max())
    np.testing.assert_allclose(lib.softmax(x), e / e.sum(), rtol=1e-6)
    np.testing.assert_allclose(lib.softmax.on("interp")(x), e / e.sum(), rtol=1e-6)


def test_a_shipped_kernel_behaves_like_a_compiled_one(tmp_path):
    lib = load_bundle(tiny(tmp_path))
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    lo, total = lib.stats(x)
    assert lo.tolist() == [0, 4, 8] and total == 66
    assert lib["vadd"].summary == "elementwise sum" and lib.stats.version == "2.1.0"
    with pytest.raises(hg.errors.EmptyReductionError):  # the manifest keeps the checks a call makes
        lib.stats(np.zeros((2, 0)))
    z = np.empty(5, np.float32)
    assert lib.vadd(np.ones(5, np.float32), y=np.ones(5, np.float32), out=z) is z and (z == 2).all()
    assert "sum" in lib.stats.emit("ast")  # the source, translated when asked
    assert lib.vadd.kdef.name == "vadd" and lib.vadd.ir is None
    assert set(lib.stats.stats(m=4, n=8)) == {"O0", "O1", "O2"}
    assert lib.on("interp").vadd.backend.name == "interp"


def test_loading_imports_no_front_end_and_runs_no_pass(tmp_path):
    path = tiny(tmp_path)
    code = textwrap.dedent(f"""
        import sys
        import numpy as np
        import hologram as hg
        from hologram.lower import stages
        from hologram.passes import manager

        def refuse(*a, **k):
            raise AssertionError("loading a bundle compiled something")
        stages.lower = manager.Pipeline.run_ir = manager.Pipeline.run_isa = refuse
        lib = hg.load_bundle({str(path)!r})
        assert (lib.vadd(np.ones(3, np.float32), np.ones(3, np.float32)) == 2).all()
        front = sorted(m for m in sys.modules if m == "lark" or m.startswith(("lark.", "hologram.dsl.parser",
                                                                           "hologram.dsl.analyze")))
        print(front)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# ------------------------------------------------------------------ determinism
def test_builds_in_different_folders_and_times_are_equal_bytes(tmp_path, monkeypatch):
    a, b = tmp_path / "one" / "src", tmp_path / "two" / "deeper" / "src"
    for folder in (a, b):
        shutil.copytree(KERNELS, folder)
    monkeypatch.chdir(tmp_path / "one")
    first = build(["src"], "stdlib", "1.0.0", cache_dir=False, jobs=1, native="none").data
    (b / "softmax.toml").touch()  # another mtime, another folder, another working directory
    monkeypatch.chdir(b.parent)
    second = build([str(b)], "stdlib", "1.0.0", cache_dir=False, jobs=2, native="none").data
    assert first == second
    (tmp_path / "x.hgb").write_bytes(first)
    infos = zipfile.ZipFile(tmp_path / "x.hgb").infolist()
    assert infos[0].filename == MANIFEST and infos[-1].filename == archive.RECORD
    assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
    assert not any(i.filename.startswith("/") or str(tmp_path) in i.filename for i in infos)


GATHER = '''[kernel]
name = "gather"
version = "1.0.0"
inputs = { x = "f32[n]", idx = "i32[k]" }
outputs = { y = "f32[k]" }
body = """
y[i] = x[idx[i]]
y2 = xx
"""
'''


def test_run_time_errors_of_a_bundled_kernel_name_its_member_never_a_path(tmp_path):
    """The sites a program keeps for run-time errors name the bundle's member, so two
    checkouts build the same bytes; build-time messages still name the file as given."""
    src = tmp_path / "deep" / "src"
    src.mkdir(parents=True)
    (src / "g.toml").write_text(GATHER.replace("y2 = xx\n", ""))
    data = build([src], "g", "1.0.0", cache_dir=False, jobs=1, native="none").data
    assert str(tmp_path).encode() not in data
    k = library(read_bundle(data), backend="interp")["gather"]
    with pytest.raises(hg.errors.ExecutionError) as info:
        k(np.zeros(3, np.float32), np.array([0, 3], np.int32))
    assert str(info.value).startswith("sources/g.toml:7:8: error:"), str(info.value)
    (src / "g.toml").write_text(GATHER)  # xx is unknown: a compile error at build time
    with pytest.raises(hg.errors.HologramError, match=re.escape(f"{src / 'g.toml'}:8:6: error: unknown name 'xx'")):
        build([src], "g", "1.0.0", cache_dir=False, jobs=1, native="none")


def test_the_build_cache_compiles_only_what_changed(tmp_path):
    src, cache = tmp_path / "src", tmp_path / "cache"
    shutil.copytree(KERNELS, src)
    first = build([src], "stdlib", "1.0.0", cache_dir=cache, jobs=1, native="none")
    assert not any(k.cached for k in first.kernels)
    again = build([src], "stdlib", "1.0.0", cache_dir=cache, jobs=1, native="none")
    assert all(k.cached for k in again.kernels) and again.data == first.data
    (src / "axpy.toml").write_text((src / "axpy.toml").read_text().replace('version = "1.0.0"', 'version = "1.0.1"'))
    third = build([src], "stdlib", "1.0.0", cache_dir=cache, jobs=1, native="none")
    assert {k.entry.name for k in third.kernels if not k.cached} == {"axpy"}
    assert read_bundle(third.data).manifest.kernel("axpy").version == "1.0.1"


def test_the_manifest_round_trips_awkward_strings(tmp_path):
    text = TINY.replace('summary = "elementwise sum"', 'summary = "quotes \\" back\\\\slash \\t tab \\u007f del é"')
    m = open_bundle(tiny(tmp_path, text=text)).manifest
    assert m.kernel("vadd").summary == 'quotes " back\\slash \t tab \x7f del é'
    assert parse(to_toml(m).encode()) == m


# -------------------------------------------------------------- finding by name
def test_names_resolve_to_the_highest_matching_version(tmp_path, monkeypatch, register_plugin):
    for v in ("1.0.0", "1.2.0", "2.0.0-rc.1"):
        tiny(tmp_path / "path", "mylib", v)
    monkeypatch.setenv("HOLOGRAM_BUNDLE_PATH", str(tmp_path / "path") + ":" + str(tmp_path / "missing"))
    assert [f.version for f in sorted(discover("mylib"), key=lambda f: f.version)] == ["1.0.0", "1.2.0", "2.0.0-rc.1"]
    assert _version(load_bundle("mylib")) == "2.0.0-rc.1"
    assert _version(load_bundle("mylib", version=">=1,<2")) == "1.2.0"
    assert _version(load_bundle("mylib", version="~=1.0.0")) == "1.0.0"
    with pytest.raises(BundleError, match="no version of bundle 'mylib' matches '>=3'") as info:
        load_bundle("mylib", version=">=3")
    assert "1.2.0" in info.value.hint
    with pytest.raises(BundleError, match="not a PEP 440 specifier"):
        load_bundle("mylib", version="newest")
    with pytest.raises(BundleError, match="no bundle named 'other'"):
        load_bundle("other")
    with pytest.raises(BundleError, match="version= selects"):
        load_bundle(tmp_path / "path" / "mylib-1.0.0.hgb", version="1")

    shipped = tiny(tmp_path / "plugin", "pluglib", "0.3.0")

    class Plugin:
        @hookimpl
        def hologram_register_bundles(self, register):
            register(BundleRef("pluglib", str(shipped)))
    register_plugin(Plugin(), "pluglib_plugin")
    found = discover("pluglib")
    assert [(f.version, f.origin) for f in found] == [("0.3.0", "a plugin")]
    assert sorted(load_bundle("pluglib")) == ["stats", "vadd"]


def _version(lib) -> str:
    return lib.vadd.version  # tiny() writes the bundle's version there


# ----------------------------------------------------------------------- the CLI
def test_the_bundle_commands(tmp_path, monkeypatch, run_cli):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(KERNELS, tmp_path / "kernels")
    code, out, err = run_cli("bundle", "build", "kernels", "--name", "stdlib", "--version", "1.0.0", "--jobs", "1",
                             "--native", "none")
    assert code == 0, err
    assert "softmax" in out and "→" in out and "wrote stdlib-1.0.0.hgb: 19 kernels" in out
    code, out, _ = run_cli("bundle", "verify", "stdlib-1.0.0.hgb")
    assert code == 0 and "19 kernels verified" in out
    code, out, _ = run_cli("bundle", "inspect", "stdlib-1.0.0.hgb")
    assert code == 0 and "stdlib 1.0.0: format 3, ISA 1" in out and "layernorm" in out
    code, out, _ = run_cli("bundle", "inspect", "stdlib-1.0.0.hgb", "--kernel", "softmax", "--emit", "asm")
    assert code == 0 and out.startswith(".program softmax")
    code, out, _ = run_cli("bundle", "inspect", "stdlib-1.0.0.hgb", "--kernel", "softmax", "--emit", "source")
    assert code == 0 and 'name = "softmax"' in out
    code, _, err = run_cli("bundle", "inspect", "stdlib-1.0.0.hgb", "--kernel", "softmx")
    assert code == 2 and "did you mean 'softmax'" in err
    (tmp_path / "kernels" / "relu.toml").unlink()
    (tmp_path / "kernels" / "axpy.toml").write_text(
        (tmp_path / "kernels" / "axpy.toml").read_text().replace("alpha * x + y", "alpha * x - y"))
    assert run_cli("bundle", "build", "kernels", "--name", "stdlib", "--version", "1.1.0", "--jobs", "1",
                   "--native", "none")[0] == 0
    code, out, _ = run_cli("bundle", "diff", "stdlib-1.0.0.hgb", "stdlib-1.1.0.hgb")
    assert code == 0 and "- relu(" in out and "~ axpy: program" in out and "softmax" not in out
    monkeypatch.setenv("HOLOGRAM_BUNDLE_PATH", str(tmp_path))
    code, out, _ = run_cli("bundle", "list")
    assert code == 0 and "stdlib 1.0.0" in out and "stdlib 1.1.0" in out
    data = bytearray((tmp_path / "stdlib-1.1.0.hgb").read_bytes())
    data[len(data) // 2] ^= 0x10
    (tmp_path / "bad.hgb").write_bytes(bytes(data))
    code, _, err = run_cli("bundle", "verify", "bad.hgb")
    assert code == 1 and "bad.hgb" in err and "internal error" not in err
    code, _, err = run_cli("bundle", "build", "kernels", "--name", "../x", "--version", "1.0.0")
    assert code == 1 and "bundle name '../x'" in err
    code, _, err = run_cli("bundle", "build", "kernels", "--name", "x", "--version", "1.0")
    assert code == 1 and "semantic version" in err
    code, _, err = run_cli("bundle", "build", "kernels", "--name", "x", "--version", "1.0.0", "--jobs", "0")
    assert code == 1 and "jobs=0" in err
    code, _, err = run_cli("bundle", "build", "kernels", "--name", "x", "--version", "1.0.0", "--native", "none",
                           "-o", str(tmp_path / "missing" / "x.hgb"))
    assert code == 1 and f"cannot write {tmp_path / 'missing' / 'x.hgb'}" in err


# ----------------------------------------------------------------- bad bundles
def test_a_bundle_that_is_not_one_is_refused(tmp_path):
    good = tiny(tmp_path).read_bytes()
    members = archive.read(good)
    cases = {
        "not a readable zip archive": b"hello",
        "no bundle.toml member": archive.write({k: v for k, v in members.items() if k != MANIFEST}),
        "bundle format 4 is a newer format": archive.write(
            {**members, MANIFEST: members[MANIFEST].replace(b"format = 3", b"format = 4")}),
        r"bundle format 2 is not the one this hologram reads \(3\)\n  hint: rebuild .*format 3 adds each kernel's IR":
            archive.write(
            {**members, MANIFEST: members[MANIFEST].replace(b"format = 3", b"format = 2")}),
        "ISA version 9, newer than": archive.write(
            {**members, MANIFEST: members[MANIFEST].replace(b"isa = 1", b"isa = 9")}),
        "unknown field 'extra'": archive.write({**members, MANIFEST: members[MANIFEST] + b"extra = 1\n"}),
        "is not in RECORD": _rezip(good, rename={"ir/vadd.ir": "ir/vadd2.ir"}),
        "appears twice": _rezip(good, duplicate="ir/vadd.ir"),
        "not a relative path": _rezip(good, rename={"ir/vadd.ir": "../vadd.ir"}),
        "not stored plainly": _rezip(good, compression=zipfile.ZIP_DEFLATED),
        "a comment, trailing bytes": _rezip(good, comment=b"hello"),
        "no end record where a bundle ends": good + b"\0",
        "local header disagrees": _local_name_changed(good, b"ir/vadd.ir"),
        "CRC-32 does not match": good.replace(b"kernels", b"kernelz", 1),
    }
    for expected, data in cases.items():
        with pytest.raises(BundleError, match=expected):
            library(read_bundle(data, "b.hgb"))


def _local_name_changed(data: bytes, name: bytes) -> bytes:
    """`data` with the last letter of `name` upper-cased in its local header only."""
    at = next(i for i in range(30, len(data)) if data.startswith(name, i) and data[i - 30:i - 26] == b"PK\x03\x04")
    end = at + len(name) - 1
    return data[:end] + data[end:end + 1].upper() + data[end + 1:]


def _rezip(data: bytes, rename: dict | None = None, duplicate: str | None = None,
           compression: int = zipfile.ZIP_STORED, comment: bytes = b"") -> bytes:
    """The archive's members written again as they are, renamed or one of them twice, or
    compressed, or with an archive comment (RECORD unchanged)."""
    import io
    import warnings

    src = zipfile.ZipFile(io.BytesIO(data))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as out, warnings.catch_warnings():
        out.comment = comment
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate: that is the point
        for info in src.infolist():
            body = src.read(info)
            out.writestr((rename or {}).get(info.filename, info.filename), body)
            if info.filename == duplicate:
                out.writestr(info.filename, body + b"x")
    return buf.getvalue()


# -------------------------------------------------------------------- the stdlib
def test_a_checkout_builds_the_stdlib_bundle_at_its_first_load(tmp_path, monkeypatch):
    from hologram.bundles import stdlib
    from hologram.registry import plugins

    monkeypatch.setenv("HOLOGRAM_CACHE_DIR", str(tmp_path / "cache"))
    plugins.reset()  # the stdlib registers its path when plugins load: under this cache
    assert not list(stdlib.HERE.glob("stdlib-*.hgb"))  # a source checkout: kernels/, no packaged bundle
    (found,) = discover("stdlib")
    assert found.make is not None and not Path(found.path).exists()
    lib = load_bundle("stdlib")
    assert Path(found.path).is_file() and sorted(lib) == sorted(p.stem for p in KERNELS.glob("*.toml"))
    assert load_bundle("stdlib").softmax.signature == lib.softmax.signature  # the file, not another build
    docs = tmp_path / "kernels"
    shutil.copytree(KERNELS, docs)
    same = bundle_ref("stdlib", "1.0.0", tmp_path, docs)
    (docs / "vadd.toml").write_text((docs / "vadd.toml").read_text() + "\n# edited\n")
    ref = bundle_ref("stdlib", "1.0.0", tmp_path, docs)
    edited = Path(ref.path)
    assert same.path != ref.path and Path(same.path).name == edited.name == "stdlib-1.0.0.hgb"  # another digest
    ref.make()
    assert open_bundle(edited).manifest.kernel("vadd").source_sha256 != \
        open_bundle(found.path).manifest.kernel("vadd").source_sha256



# ------------------------------------------------------------------- native code
NATIVE_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import hologram as hg
    from hologram_cpu_llvm import jit

    lib = hg.load_bundle(sys.argv[1], trust_native=sys.argv[2] == "trust")
    x = np.linspace(-1, 1, 33, dtype=np.float32)
    lo, total = lib.stats(np.arange(6.0).reshape(2, 3))
    ok = (lib.vadd(x, x) == 2 * x).all() and lo.tolist() == [0, 3] and total == 15
    print(json.dumps([bool(ok), jit.STATS["optimize"], jit.STATS["emit"], jit.STATS["load"]]))
""")


def _native_run(path: Path, trust: bool, cache: Path) -> list:
    env = {**os.environ, "HOLOGRAM_CACHE_DIR": str(cache), "HOLOGRAM_BACKEND": "cpu_llvm"}
    done = subprocess.run([sys.executable, "-c", NATIVE_CHILD, str(path), "trust" if trust else "no"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_native_code_is_used_only_when_trusted_and_only_on_a_cpu_that_runs_it(tmp_path):
    jit = pytest.importorskip("hologram_cpu_llvm.jit")
    from hologram_cpu_llvm import cpu

    levels = jit.level_targets()
    if not levels or not jit.has_features(cpu.X86_64_LEVELS[levels[0]]):
        pytest.skip("no x86-64 level this CPU runs")
    path = tiny(tmp_path, native=levels[0])
    m = open_bundle(path).manifest
    assert [(n.backend, n.target) for n in m.native] == [("cpu_llvm", levels[0])] and "vadd" in m.native[0].kernels
    assert m.native[0].features == tuple(sorted(cpu.X86_64_LEVELS[levels[0]]))
    assert {"native/cpu_llvm/" + levels[0] + "/vadd.o", m.native[0].index} <= set(open_bundle(path).members)
    # trusted: the shipped objects load, LLVM never runs; a fresh cache each time
    assert _native_run(path, True, tmp_path / "c1") == [True, 0, 0, 2]
    # a file given by path is not trusted by default: compiled here
    ok, optimized, emitted, _ = _native_run(path, False, tmp_path / "c2")
    assert ok and optimized == emitted == 2
    # objects for a CPU this one is not (a feature it lacks): compiled here, never run
    members = archive.read(path.read_bytes())
    members[MANIFEST] = members[MANIFEST].replace(b'features = ["cx16"', b'features = ["a-feature-no-cpu-has", "cx16"')
    other = tmp_path / "other.hgb"
    other.write_bytes(archive.write(members))
    ok, optimized, emitted, _ = _native_run(other, True, tmp_path / "c3")
    assert ok and optimized == emitted == 2
    with pytest.raises(BundleError, match="cannot build native code for x86-64-v9"):
        tiny(tmp_path / "bad", native="x86-64-v9")


def test_names_with_dashes_and_pre_releases_are_found(tmp_path, monkeypatch):
    for v in ("1.0.0", "1.1.0-rc.2"):
        tiny(tmp_path, "my-lib-2", v)
    monkeypatch.setenv("HOLOGRAM_BUNDLE_PATH", str(tmp_path))
    assert sorted(f.version for f in discover("my-lib-2")) == ["1.0.0", "1.1.0-rc.2"]
    assert {f.name for f in discover() if f.origin != "a plugin"} == {"my-lib-2"}  # (the stdlib is a plugin's)
    assert load_bundle("my-lib-2").vadd.version == "1.1.0-rc.2"  # pre-releases count, the highest wins
    assert load_bundle("my-lib-2", version="<1.1").vadd.version == "1.0.0"


@pytest.mark.parametrize("given, semver", [("1.2.0", "1.2.0"), ("1.2.0rc1", "1.2.0-rc.1"), ("1.2.0a2", "1.2.0-alpha.2"),
                                           ("1.2.0b3.dev4", "1.2.0-beta.3.dev.4"), ("1.2.0+abc.5", "1.2.0+abc.5")])
def test_a_wheel_version_becomes_the_bundle_version_it_stands_for(given, semver):
    from packaging.version import Version

    from hologram.bundles.manifest import SEMVER
    from hologram.bundles.shipping import semver_of

    assert semver_of(given) == semver and SEMVER.match(semver) and Version(semver) == Version(given)


@pytest.mark.parametrize("given", ["1.2", "1!1.2.0", "1.2.0.post1", "latest"])
def test_a_wheel_version_with_no_semver_spelling_stops_the_build(given):
    from hologram.bundles.shipping import semver_of

    with pytest.raises(SystemExit, match="version"):
        semver_of(given)


# ------------------------------------------------------------ generated kernels
def _outcome(kernel, args: dict) -> object:
    """What a call gives: the outputs' bytes, or the error class it raised."""
    try:
        out = kernel(**args)
    except hg.errors.HologramError as exc:
        return type(exc)
    outs = out if isinstance(out, tuple) else (out,)
    return [(np.asarray(o).dtype.str, np.asarray(o).shape, np.asarray(o).tobytes()) for o in outs]


@settings(max_examples=12, deadline=None)
@given(case=kernels())
def test_generated_kernels_run_the_same_from_a_bundle(case):
    """Any kernel the generators draw (every dtype, shapes in several symbols, reductions
    whose extents the manifest must spell and parse back) survives the trip: the same
    program, the same interface, bit for bit the same results or the same error. (The
    document is compiled under the bundle's member name, which the program's sites name.)"""
    compiled = hg.compile(case.source, backend="interp", file="sources/case.toml")
    with tempfile.TemporaryDirectory() as folder:
        doc = Path(folder) / "case.toml"
        doc.write_text(case.source)
        report = build([doc], "case", "1.0.0", cache_dir=False, jobs=1, native="none")
    shipped = library(read_bundle(report.data), backend="interp")[compiled.name]
    assert program_hash(shipped.program) == program_hash(compiled.program)
    assert shipped.signature == compiled.signature
    assert shipped._c.reductions == compiled._c.reductions  # the checks a call makes
    assert _outcome(shipped, case.args) == _outcome(compiled, case.args)


DIMS = ("n", "n + 2", "2*m", "m - 1", "3")


@st.composite
def identityless_reductions(draw) -> tuple[str, dict]:
    """A document reducing with min/max/argmin/argmax over a 2-D input whose dimensions
    are affine in two symbols (the extents a call checks, which the manifest spells), and
    inputs of sizes that include empty extents."""
    kind = draw(st.sampled_from(["min", "max", "argmin", "argmax"]))
    rows, cols = draw(st.sampled_from(DIMS)), draw(st.sampled_from(DIMS))
    axis = draw(st.sampled_from([None, 0, 1]))
    out_shape = {None: "", 0: f"[{cols}]", 1: f"[{rows}]"}[axis]
    out_type = ("i64" if kind.startswith("arg") else "f64") + out_shape
    call = f"{kind}(x)" if axis is None else f"{kind}(x, axis={axis})"
    text = (f'[kernel]\nname = "r"\nversion = "1.0.0"\ninputs = {{ x = "f64[{rows}, {cols}]" }}\n'
            f'outputs = {{ y = "{out_type}" }}\nbody = "y = {call}"\n')
    n, m = draw(st.integers(0, 3)), draw(st.integers(1, 3))
    size = {"n": n, "n + 2": n + 2, "2*m": 2 * m, "m - 1": m - 1, "3": 3}
    x = draw(st.lists(st.floats(-9, 9), min_size=size[rows] * size[cols], max_size=size[rows] * size[cols]))
    return text, {"x": np.array(x, np.float64).reshape(size[rows], size[cols])}


@settings(max_examples=25, deadline=None)
@given(doc=identityless_reductions())
def test_the_checks_a_call_makes_survive_the_manifest(doc):
    text, args = doc
    compiled = hg.compile(text, backend="interp")
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "r.toml").write_text(text)
        report = build([Path(folder) / "r.toml"], "r", "1.0.0", cache_dir=False, jobs=1, native="none")
    shipped = library(read_bundle(report.data), backend="interp")["r"]
    assert shipped._c.reductions == compiled._c.reductions and compiled._c.reductions
    assert _outcome(shipped, args) == _outcome(compiled, args)


DERIVED = '''
[[kernels]]
name = "evens"
version = "1.0.0"
inputs = { x = "i8[n]" }
outputs = { y = "i8[(n + 1)//2]" }
body = "y = x[::2]"

[[kernels]]
name = "flat"
version = "1.0.0"
inputs = { x = "f32[k, n]" }
outputs = { y = "f32[k*n]", d = "f32[(n + 1)//2 + 1]" }
body = """
y = cumsum(x)
d[j] = f32(j)
"""
'''


def test_derived_dimensions_survive_the_manifest(tmp_path):
    """A dimension that is not affine (a floor division, a product) is a derived symbol; the
    manifest spells it so that loading reads back the program's own shape."""
    lib = load_bundle(tiny(tmp_path, text=DERIVED))
    assert lib.evens(np.arange(5, dtype=np.int8)).tolist() == [0, 2, 4]
    y, d = lib.flat(np.ones((2, 3), np.float32))
    assert y.shape == (6,) and d.tolist() == [0, 1, 2]
    for name in ("evens", "flat"):
        assert lib[name].signature == hg.compile(DERIVED)[name].signature
