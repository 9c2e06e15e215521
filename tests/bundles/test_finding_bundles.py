"""Finding a bundle by name: a file is held to its manifest (its name is no evidence of
what it holds), versions compare as the manifest spells them, and a Library says what
it is (docs/bundles.md, "Loading")."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

import hologram as hg
from hologram.bundles.build import build
from hologram.bundles.load import discover, load_bundle
from hologram.core.errors import BundleError, HologramWarning
from hologram.core.hookspecs import BundleRef, hookimpl

from dsl_helpers import document

DOCUMENT = document("z = x + y", {"x": "f32[n]", "y": "f32[n]"}, {"z": "f32[n]"}, name="vadd")


@pytest.fixture(scope="module")
def mylib(tmp_path_factory) -> Path:
    """mylib 1.0.0, built once."""
    folder = tmp_path_factory.mktemp("built")
    (folder / "v.toml").write_text(DOCUMENT)
    out = folder / "mylib-1.0.0.hgb"
    build([folder / "v.toml"], "mylib", "1.0.0", out, cache_dir=False, jobs=1, native="none")
    return out


@pytest.fixture
def shelf(tmp_path, monkeypatch) -> Path:
    """An empty folder on HOLOGRAM_BUNDLE_PATH."""
    folder = tmp_path / "shelf"
    folder.mkdir()
    monkeypatch.setenv("HOLOGRAM_BUNDLE_PATH", str(folder))
    return folder


def _skips(call) -> tuple[object, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message) for w in caught if issubclass(w.category, HologramWarning)]


def test_a_file_renamed_to_another_version_is_not_that_version(mylib, shelf):
    shutil.copy(mylib, shelf / "mylib-1.0.0.hgb")
    shutil.copy(mylib, shelf / "mylib-9.9.9.hgb")
    lib, skipped = _skips(lambda: load_bundle("mylib"))
    assert (lib.name, lib.version, lib.path) == ("mylib", "1.0.0", str(shelf / "mylib-1.0.0.hgb"))
    assert len(skipped) == 1 and "mylib-9.9.9.hgb: named mylib 9.9.9, but it holds the bundle mylib 1.0.0" in skipped[0]
    found, skipped = _skips(lambda: discover("mylib"))
    assert [(f.name, f.version) for f in found] == [("mylib", "1.0.0")] and len(skipped) == 1
    with pytest.raises(BundleError, match="no version of bundle 'mylib' matches '>=2'") as info:
        _skips(lambda: load_bundle("mylib", version=">=2"))
    assert "skipped, holding another bundle or version: " + str(shelf / "mylib-9.9.9.hgb") in info.value.hint


def test_a_file_renamed_to_another_bundle_is_not_that_bundle(mylib, shelf):
    shutil.copy(mylib, shelf / "otherlib-2.0.0.hgb")
    with pytest.raises(BundleError, match="no bundle named 'otherlib'") as info:
        _skips(lambda: load_bundle("otherlib"))
    assert "otherlib-2.0.0.hgb" in info.value.hint
    assert _skips(lambda: discover("otherlib"))[0] == []


@pytest.mark.parametrize("spelling", ["1!0.1", "1!1.0.0", "01.0.0", "1.0", "1.0.0.0", "v1.0.0"])
def test_a_version_no_manifest_can_hold_is_never_found(mylib, shelf, spelling):
    """An epoch or another spelling of a version: not a semantic version, so no bundle's
    (a manifest's version is one, and a file's name must be its manifest's); before,
    `1!0.1` won every query and `01.0.0` tied with 1.0.0, broken by file name order."""
    shutil.copy(mylib, shelf / "mylib-1.0.0.hgb")
    shutil.copy(mylib, shelf / f"mylib-{spelling}.hgb")
    lib, skipped = _skips(lambda: load_bundle("mylib"))
    assert lib.path == str(shelf / "mylib-1.0.0.hgb") and skipped == []
    assert [f.version for f in discover("mylib")] == ["1.0.0"]


def test_equal_versions_spelled_two_ways_in_one_folder_are_ambiguous(tmp_path, shelf):
    (tmp_path / "v.toml").write_text(DOCUMENT)
    for v in ("1.0.0-rc.1", "1.0.0-rc1"):  # two semantic versions, one PEP 440 version
        build([tmp_path / "v.toml"], "mylib", v, shelf / f"mylib-{v}.hgb", cache_dir=False, jobs=1, native="none")
    with pytest.raises(BundleError, match="hold the same version, spelled two ways"):
        load_bundle("mylib")


def test_the_first_folder_wins_between_equal_versions(mylib, shelf, tmp_path, monkeypatch):
    second = tmp_path / "second"
    second.mkdir()
    for folder in (second, shelf):
        shutil.copy(mylib, folder / "mylib-1.0.0.hgb")
    monkeypatch.setenv("HOLOGRAM_BUNDLE_PATH", f"{second}{__import__('os').pathsep}{shelf}")
    assert load_bundle("mylib").path == str(second / "mylib-1.0.0.hgb")


def test_a_library_says_what_it_is(mylib, shelf, register_plugin):
    lib = load_bundle(mylib)
    assert (lib.name, lib.version, lib.path, lib.trusted) == ("mylib", "1.0.0", str(mylib), False)
    assert repr(lib) == f"<Library mylib 1.0.0 ({mylib}; native code not trusted) of 1 kernel: vadd>"
    assert load_bundle(mylib, trust_native=True).on("interp").trusted  # kept by .on()
    shutil.copy(mylib, shelf / "mylib-1.0.0.hgb")
    assert load_bundle("mylib").trusted is False  # HOLOGRAM_BUNDLE_PATH: not trusted by default

    class Plugin:
        @hookimpl
        def hologram_register_bundles(self, register):
            register(BundleRef("pluglib", str(mylib.parent / "pluglib-1.0.0.hgb")))
    build([mylib.parent / "v.toml"], "pluglib", "1.0.0", mylib.parent / "pluglib-1.0.0.hgb", cache_dir=False,
          jobs=1, native="none")
    register_plugin(Plugin(), "pluglib_plugin")
    shipped = load_bundle("pluglib")
    assert (shipped.name, shipped.version, shipped.trusted) == ("pluglib", "1.0.0", True)  # in its package
    compiled = hg.compile_all(DOCUMENT)
    assert (compiled.name, compiled.version, compiled.path, compiled.trusted) == (None, None, None, False)
    assert repr(compiled) == "<Library of 1 kernel: vadd>"
    import pickle

    assert pickle.loads(pickle.dumps(lib)).version == "1.0.0"


def test_a_mistyped_name_gets_a_did_you_mean(mylib, shelf):
    shutil.copy(mylib, shelf / "mylib-1.0.0.hgb")
    with pytest.raises(BundleError, match="no bundle named 'mylb' .*; did you mean 'mylib'\\?") as info:
        load_bundle("mylb")
    assert "mylib" in info.value.hint
