"""Kept manifests (hologram.bundles.manifest `_document`, hologram.core.records): the
document a bundle's TOML parses to is kept under the TOML's sha256, so a later load of
the same bytes neither imports nor runs the TOML parser; a kept document that is corrupt,
written for other bytes, or in a folder others can write is not believed, and what is
kept is checked field by field like a parsed one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hologram.bundles import manifest as manifest_module
from hologram.bundles.load import open_bundle
from hologram.core.errors import BundleError


@pytest.fixture(scope="module")
def bundle(tiny_bundle) -> Path:
    return tiny_bundle


@pytest.fixture
def parsed(monkeypatch) -> list[int]:
    """How many times the TOML parser ran."""
    runs: list[int] = []
    real = manifest_module._toml

    def counting(data: bytes) -> dict:
        runs.append(len(data))
        return real(data)

    monkeypatch.setattr(manifest_module, "_toml", counting)
    return runs


def _kept(cache: Path) -> Path:
    (path,) = (cache / "manifests").glob("*.json")
    return path


def test_a_second_load_reads_the_kept_document(bundle, cache, parsed):
    first = open_bundle(bundle).manifest
    assert len(parsed) == 1
    path = _kept(cache)
    head, sha, text = path.read_bytes().split(b"\n", 2)
    assert head == b"hologram manifest 1" and path.name == sha.decode() + ".json"
    assert json.loads(text)["name"] == "tiny"
    assert open_bundle(bundle).manifest == first
    assert len(parsed) == 1  # the kept document, not the parser


@pytest.mark.parametrize("damage", ["truncated", "other bytes", "not an object", "a folder", "others may write"])
def test_a_kept_document_not_to_be_believed_means_parsing(bundle, cache, parsed, damage):
    first = open_bundle(bundle).manifest
    path = _kept(cache)
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[:-10])
    elif damage == "other bytes":
        path.write_bytes(data.replace(path.stem.encode(), b"0" * 64, 1))
    elif damage == "not an object":
        path.write_bytes(data.split(b"\n", 2)[0] + b"\n" + path.stem.encode() + b"\n[1, 2]")
    elif damage == "a folder":
        path.unlink()
        path.mkdir()
    else:
        os.chmod(path.parent, 0o777)
    assert open_bundle(bundle).manifest == first
    assert len(parsed) == 2


def test_a_kept_document_is_checked_like_a_parsed_one(bundle, cache):
    open_bundle(bundle)
    path = _kept(cache)
    head, sha, text = path.read_bytes().split(b"\n", 2)
    doc = json.loads(text)
    doc["kernels"][0]["name"] = "../escape"
    path.write_bytes(head + b"\n" + sha + b"\n" + json.dumps(doc).encode())
    with pytest.raises(BundleError, match="name"):
        open_bundle(bundle)


def test_a_key_is_a_sha256_never_a_path(cache):
    data = b'format = 3\n'
    with pytest.raises(BundleError):
        manifest_module.parse(data, "../" * 20 + "etc/passwd")  # parsed (and refused: no fields), nothing kept
    assert not (cache / "manifests").exists()


def test_a_second_process_does_not_import_the_toml_parser(bundle, tmp_path):
    code = textwrap.dedent(f"""
        import json, sys
        import hologram

        hologram.load_bundle({str(bundle)!r})
        print(json.dumps("tomllib" in sys.modules))
    """)
    env = {**os.environ, "HOLOGRAM_CACHE_DIR": str(tmp_path / "cache")}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
            for _ in range(2)]
    assert [json.loads(r.stdout.strip().splitlines()[-1]) for r in runs] == [True, False]
