"""The dist-info reader that stands in for importlib.metadata on the run-time path."""

import sys
from importlib import metadata

import pytest

from hologram.core import distribution


def _dist(root, folder, entry_points=None, name=None, version="1.0"):
    d = root / folder
    d.mkdir()
    meta = "METADATA" if folder.endswith(".dist-info") else "PKG-INFO"
    (d / meta).write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nName: not-a-header\n")
    if entry_points is not None:
        (d / "entry_points.txt").write_text(entry_points)


@pytest.fixture
def path(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    monkeypatch.setattr(sys, "path", [str(first), str(tmp_path / "missing"), str(tmp_path / "a.zip"), str(second)])
    (tmp_path / "a.zip").write_bytes(b"PK")
    return first, second


def test_entry_points_of_one_group_with_their_distribution(path):
    first, second = path
    _dist(first, "my_plugin-2.0.dist-info", "# a comment\n[console_scripts]\nx = a:b\n\n[hologram]\n"
          "; another\nmine = my_plugin.sub:hooks.obj [extra]\n other=other_mod\n[later]\ny = z\n",
          name="my-plugin", version="2.0")
    _dist(second, "plain.egg-info", "[hologram]\nplain = plain_mod\n", name="plain", version="0.3")
    _dist(second, "no_eps-1.dist-info", None, name="no-eps")
    eps = distribution.entry_points("hologram")
    assert eps == [
        distribution.EntryPoint("mine", "my_plugin.sub:hooks.obj", "hologram", "my-plugin", "2.0"),
        distribution.EntryPoint("other", "other_mod", "hologram", "my-plugin", "2.0"),
        distribution.EntryPoint("plain", "plain_mod", "hologram", "plain", "0.3"),
    ]
    assert distribution.entry_points("later")[0].value == "z"
    assert distribution.entry_points("nothing") == []


def test_the_first_distribution_of_a_name_on_the_path_wins(path):
    first, second = path
    _dist(first, "My.Plugin.egg-info", "[hologram]\nmine = new\n", name="My.Plugin", version="2.0")
    _dist(second, "my_plugin-1.0.dist-info", "[hologram]\nmine = old\n", name="my-plugin", version="1.0")
    assert [e.value for e in distribution.entry_points("hologram")] == ["new"]
    assert distribution.version_of("my-plugin") == "2.0"
    assert distribution.version_of("MY_PLUGIN") == "2.0"
    assert distribution.version_of("absent") is None


def test_load_follows_the_attribute_path():
    ep = distribution.EntryPoint("x", "os.path:join.__name__", "g")
    assert ep.load() == "join"
    assert distribution.EntryPoint("x", "json", "g").load() is __import__("json")
    with pytest.raises(ModuleNotFoundError):
        distribution.EntryPoint("x", "not_a_module_anywhere", "g").load()


def test_agrees_with_importlib_metadata_here():
    mine = sorted((e.name, e.value, e.distribution, e.version) for e in distribution.entry_points("hologram"))
    theirs = sorted((e.name, e.value, e.dist.metadata["Name"], e.dist.version)
                    for e in metadata.entry_points(group="hologram"))
    assert mine == theirs
    assert distribution.version_of("numpy") == metadata.version("numpy")
    assert distribution.hologram_version() == metadata.version("hologram-kernels")
