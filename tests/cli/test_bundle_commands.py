"""`hologram bundle` as a script sees it: piped output keeps every name whole (rows, not
a table folded to 80 columns), `--json` gives the same facts as data, and a build that
fails prints its error and nothing before it (docs/bundles.md, "Inspecting, verifying,
comparing, finding")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

LONG = "a_kernel_whose_name_is_longer_than_a_folded_table_column_allows"
DOCUMENT = f'''
[[kernels]]
name = "{LONG}"
version = "1.0.0"
inputs = {{ x = "f32[n]", y = "f32[n]" }}
outputs = {{ z = "f32[n]" }}
body = "z = x + y"

[[kernels]]
name = "largest"
version = "1.0.0"
inputs = {{ x = "f32[n]" }}
outputs = {{ m = "f32" }}
body = "m = max(x)"
'''


@pytest.fixture(autouse=True)
def narrow(fresh_plugins, monkeypatch, tmp_path):
    monkeypatch.delenv("COLUMNS", raising=False)  # what a pipe gets: rich assumes 80 columns
    monkeypatch.delenv("HOLOGRAM_DEBUG", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def built(tmp_path, run_cli) -> tuple[Path, str]:
    """mylib 1.0.0 built by the command, and what it printed."""
    folder = tmp_path / "documents_in_a_folder_with_a_long_name"
    folder.mkdir()
    (folder / "kernels_with_long_names_in_a_long_file_name.toml").write_text(DOCUMENT)
    code, out, err = run_cli("bundle", "build", str(folder), "--name", "mylib", "--version", "1.0.0", "--native",
                             "none", "--no-cache", "--jobs", "1")
    assert code == 0, err
    return tmp_path / "mylib-1.0.0.hgb", out


@pytest.fixture
def bundle(built) -> Path:
    return built[0]


def test_piped_tables_are_rows_that_keep_every_name_whole(built, run_cli):
    lines = built[1].splitlines()
    assert lines[0] == "mylib 1.0.0 (O2)"
    assert lines[1].split("\t") == ["kernel", "stages", "instructions", "bytes per launch", "native", "build"]
    row = next(ln.split("\t") for ln in lines if ln.startswith(LONG))
    assert len(row) == 6 and row[4] == "-" and row[3] == "8*n read + 4*n written"
    code, out, _ = run_cli("bundle", "inspect", "mylib-1.0.0.hgb")
    assert code == 0
    rows = [ln.split("\t") for ln in out.splitlines()[1:]]
    assert rows[0] == ["kernel", "version", "signature", "stages", "instructions", "native", "source"]
    assert {r[0]: (r[2], r[6]) for r in rows[1:]} == {
        LONG: ("(x: f32[n], y: f32[n]) -> z: f32[n]", "sources/kernels_with_long_names_in_a_long_file_name.toml"),
        "largest": ("(x: f32[n]) -> m: f32", "sources/kernels_with_long_names_in_a_long_file_name.toml")}


def test_every_bundle_command_prints_json(bundle, run_cli, tmp_path, monkeypatch):
    code, out, _ = run_cli("bundle", "inspect", str(bundle), "--json")
    manifest = json.loads(out)
    assert code == 0 and (manifest["name"], manifest["version"]) == ("mylib", "1.0.0")
    largest = next(k for k in manifest["kernels"] if k["name"] == "largest")
    assert largest["reductions"] == [{"kind": "max", "axes": [["r0", "n"]]}] and largest["native"] == []
    code, out, _ = run_cli("bundle", "inspect", str(bundle), "--kernel", "largest", "--json")
    assert code == 0 and json.loads(out) == largest
    code, _, err = run_cli("bundle", "inspect", str(bundle), "--kernel", "largest", "--json", "--emit", "asm")
    assert code == 2 and "--json prints a kernel's manifest entry" in err
    code, out, _ = run_cli("bundle", "verify", str(bundle), "--json")
    assert code == 0 and json.loads(out) == {"ok": True, "path": str(bundle), "name": "mylib", "version": "1.0.0",
                                             "kernels": 2, "native_objects_checked": 0}
    code, out, _ = run_cli("bundle", "build", str(tmp_path / "documents_in_a_folder_with_a_long_name"), "--name",
                           "mylib", "--version", "1.1.0", "--native", "none", "--jobs", "1", "--json")
    built = json.loads(out)
    assert code == 0 and built["output"] == "mylib-1.1.0.hgb" and sorted(k["name"] for k in built["kernels"]) == \
        sorted([LONG, "largest"]) and all(k["cached"] in (True, False) and k["stages"] >= 1 for k in built["kernels"])
    code, out, _ = run_cli("bundle", "diff", str(bundle), "mylib-1.1.0.hgb", "--json")
    assert code == 0 and json.loads(out) == {"old": {"name": "mylib", "version": "1.0.0"},
                                             "new": {"name": "mylib", "version": "1.1.0"},
                                             "added": {}, "removed": {}, "changed": {}}
    monkeypatch.setenv("HOLOGRAM_BUNDLE_PATH", str(tmp_path))
    code, out, _ = run_cli("bundle", "list", "mylib", "--json")
    assert code == 0 and json.loads(out) == [
        {"name": "mylib", "version": v, "path": str(tmp_path / f"mylib-{v}.hgb"), "origin": "HOLOGRAM_BUNDLE_PATH",
         "trusted": False, "built": True} for v in ("1.0.0", "1.1.0")]


def test_a_failed_build_prints_its_error_and_nothing_before_it(tmp_path, run_cli):
    (tmp_path / "bad.toml").write_text('[kernel]\nname = "bad"\nversion = "1.0.0"\ninputs = { x = "f32[n]" }\n'
                                       'outputs = { y = "f32[n]" }\nbody = "y = x +"\n')
    code, out, err = run_cli("bundle", "build", "bad.toml", "--name", "x", "--version", "1.0.0", "--no-cache")
    assert code == 1 and out == ""
    assert err.startswith("bad.toml:6:16: error: unexpected end of input"), repr(err)


def test_list_shows_what_the_files_hold(bundle, run_cli, tmp_path, monkeypatch):
    import shutil

    shelf = tmp_path / "shelf"
    shelf.mkdir()
    shutil.copy(bundle, shelf / "mylib-1.0.0.hgb")
    shutil.copy(bundle, shelf / "mylib-9.9.9.hgb")
    monkeypatch.setenv("HOLOGRAM_BUNDLE_PATH", str(shelf))
    code, out, err = run_cli("bundle", "list", "mylib")
    assert code == 0 and out.split() == ["mylib", "1.0.0", str(shelf / "mylib-1.0.0.hgb"), "(HOLOGRAM_BUNDLE_PATH)"]
    assert "hologram: warning: bundle skipped: " + str(shelf / "mylib-9.9.9.hgb") + ": named mylib 9.9.9, but it " \
        "holds the bundle mylib 1.0.0" in err
