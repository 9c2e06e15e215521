"""Circuits as sources: `.sigil` files and the `circuit` key of TOML, YAML and JSON kernel
documents, with errors at the document's own line and column; registered exactly as a
third party's translator is (entry point `sigil`), listed by `hologram plugins`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import hologram
from hologram.cli.main import main
from hologram.core.errors import CompileError, DocumentError
from hologram.registry import plugins
from hologram_sigil import run_model

SEEDS = "copy@c05->c06 . mark@c21 . copy@c05->c06 . mark@c21"


@pytest.fixture
def x() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((96, 3072)).astype(np.float32)


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.delenv("HOLOGRAM_PLUGINS", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    plugins.reset()
    yield
    plugins.reset()


def test_the_circuit_key_in_every_format(x):
    toml = hologram.compile(f'[kernel]\nname = "seeds"\nversion = "1.0.0"\nsummary = "the seeds\' example"\n'
                            f'circuit = "{SEEDS}"\n')
    yaml = hologram.compile(f"kernel:\n  name: seeds\n  version: 1.0.0\n  circuit: {SEEDS}\n", format="yaml")
    doc = json.dumps({"kernels": [{"name": "seeds", "version": "1.0.0", "circuit": SEEDS},
                                  {"name": "other", "version": "2.0.0", "body": "y = x + 1",
                                   "inputs": {"x": "f32[n]"}, "outputs": {"y": "f32[n]"}}]})
    lib = hologram.compile(doc, format="json")
    for k in (toml, yaml, lib["seeds"]):
        assert str(k.signature) == "seeds(x: f32[96, 3072]) -> y: f32[96, 3072]"
        assert np.array_equal(k(x), run_model(SEEDS, x))
        assert k.kdef.notes == (("circuit", "4 ops -> 1 op (75% reduction)"),)
    assert toml.summary == "the seeds' example" and toml.version == "1.0.0"
    assert lib["other"](np.zeros(3, np.float32)).tolist() == [1, 1, 1]


def test_errors_in_the_circuit_point_into_the_document():
    toml = '[kernel]\nname = "k"\nversion = "1.0.0"\ncircuit = """\ncopy@c05->c06\n  . mark@c96\n"""\n'
    with pytest.raises(CompileError, match="there is no class c96") as e:
        hologram.compile(toml, file="k.toml")
    assert (e.value.span.file, e.value.span.line, e.value.span.col, e.value.span.end_col) == ("k.toml", 6, 10, 13)
    assert "   6 |   . mark@c96" in str(e.value)
    one_line = '[kernel]\nname = "k"\nversion = "1.0.0"\ncircuit = "mark@c01 . merg@c00[c01,c02]"\n'
    with pytest.raises(CompileError, match="unknown generator 'merg'") as e:
        hologram.compile(one_line, file="k.toml")
    assert (e.value.span.line, e.value.span.col) == (4, 23)
    yaml = "kernel:\n  name: k\n  version: 1.0.0\n  circuit: |\n    mark@c01\n    . copy@c01-c02\n"
    with pytest.raises(CompileError, match="unexpected character '-'") as e:
        hologram.compile(yaml, format="yaml", file="k.yaml")
    assert (e.value.span.line, e.value.span.col) == (6, 15)
    js = '{"kernel": {"name": "k", "version": "1.0.0",\n "circuit": "mark@c01 || mark@c01"}}'
    with pytest.raises(CompileError, match="c01 is written by two branches") as e:
        hologram.compile(js, format="json", file="k.json")
    assert (e.value.span.line, e.value.span.col) == (2, 26)


def test_the_schema_around_a_circuit():
    head = '[kernel]\nname = "k"\nversion = "1.0.0"\n'
    with pytest.raises(DocumentError, match="takes its inputs and outputs from 'circuit': remove 'inputs'") as e:
        hologram.compile(head + 'inputs = { x = "f32[96, 3072]" }\ncircuit = "mark@c01"\n')
    assert e.value.span.line == 4
    with pytest.raises(DocumentError, match="one body: 'circuit' and 'body' cannot both be given"):
        hologram.compile(head + 'circuit = "mark@c01"\nbody = "y = x"\n')
    with pytest.raises(DocumentError, match="missing the required key 'body'") as e:
        hologram.compile(head + 'inputs = {}\noutputs = { y = "f32" }\n')
    assert "'circuit', a sigil circuit" in e.value.hint
    with pytest.raises(DocumentError, match="'circuit' of kernel 'k' must be a string"):
        hologram.compile(head + "circuit = 3\n")
    with pytest.raises(DocumentError, match=r"unknown key 'circiut'.*did you mean 'circuit'"):
        hologram.compile(head + 'circiut = "mark@c01"\n')


def test_without_the_plugin_circuit_is_an_unknown_key(monkeypatch):
    doc = '[kernel]\nname = "k"\nversion = "1.0.0"\ncircuit = "mark@c01"\n'
    hologram.compile(doc)  # with the plugin; the document cache must not answer for the next compile
    monkeypatch.setenv("HOLOGRAM_PLUGINS", "-sigil")
    plugins.reset()
    with pytest.raises(DocumentError, match="unknown key 'circuit'"):
        hologram.compile(doc)
    with pytest.raises(hologram.errors.PluginError, match="no translator for extension .sigil"):
        hologram.compile_file("k.sigil")


def test_sigil_files(tmp_path, x):
    bare = tmp_path / "flip.sigil"
    bare.write_text("# one circuit: the kernel takes the file's name\nmark@c01\n  . mark@c02\n")
    k = hologram.compile_file(bare)
    assert (k.name, k.version, k.summary) == ("flip", "1.0.0", "")
    assert np.array_equal(k(x), run_model("mark@c01 . mark@c02", x))
    two = tmp_path / "two.sigil"
    two.write_text('kernel first 1.2.0 "a summary"\n  merge_exp@c03[c04]\n\nkernel second\n  reduce_sum@c00->c01\n')
    lib = hologram.compile_file(two)
    assert list(lib) == ["first", "second"]
    assert (lib.first.version, lib.first.summary, lib.second.version) == ("1.2.0", "a summary", "1.0.0")
    assert hologram.compile("swap@c01<->c02", format="sigil").name == "circuit"  # no file to take a name from
    bad = tmp_path / "bad-name.sigil"
    bad.write_text("mark@c01\n")
    with pytest.raises(DocumentError, match="'bad-name' is not an identifier"):
        hologram.compile_file(bad)
    wrong = tmp_path / "wrong.sigil"
    wrong.write_text("kernel w\n  mark@c01 .\n  swap@c01<->c01 . mark@c01[c02]\n")
    with pytest.raises(CompileError, match="mark takes one class") as e:
        hologram.compile_file(wrong)
    assert (e.value.span.file, e.value.span.line, e.value.span.col) == (str(wrong), 3, 25)
    dup = tmp_path / "dup.sigil"
    dup.write_text("kernel a\n mark@c01\nkernel a\n mark@c02\n")
    with pytest.raises(DocumentError, match="duplicate kernel name 'a'"):
        hologram.compile_file(dup)


def test_each_statement_points_at_its_generator(tmp_path):
    f = tmp_path / "where.sigil"
    f.write_text("kernel w\n  mark@c01\n  . merge_exp@c02[c01]\n")
    k = hologram.compile_file(f)
    ast = k.emit("ast")
    assert "L2 " in ast and "L3 " in ast  # the statements from mark (line 2) and merge_exp (line 3)


def test_the_cli(tmp_path, capsys):
    f = tmp_path / "seeds.sigil"
    f.write_text(SEEDS + "\n")
    assert main(["compile", str(f), "--emit", "stats"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("circuit: 4 ops -> 1 op (75% reduction)")
    assert main(["run", str(f)]) == 0
    assert "y = array(" in capsys.readouterr().out
    assert main(["plugins"]) == 0
    assert "translator sigil (.sigil; key circuit)" in capsys.readouterr().out
    assert main(["sigil", SEEDS]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"circuit    {SEEDS}", "canonical  copy@c05->c06",
        "           4 ops -> 1 op (75% reduction); rules: involution 1, idempotent copy 1"]
    assert main(["sigil", str(f), "--body"]) == 0
    out = capsys.readouterr().out
    assert "kernel     seeds.sigil" in out and "    y[c, i] = where(c == 6, x[5, i], x[c, i])" in out
    assert main(["sigil", "mark@c96"]) == 1
    assert "there is no class c96" in capsys.readouterr().err


def test_a_fresh_process_finds_the_plugin_by_its_entry_point(tmp_path):
    """Installed (here: editable), the distribution registers through the `hologram`
    entry-point group, like any third party's; loading a bundle imports nothing of it
    but its light hook module."""
    code = ("import hologram, sys; from hologram.registry.lookups import translators; "
            "t = translators()['sigil']; print(t.extensions, [k.key for k in t.body_keys]); "
            "print(sorted(m for m in sys.modules if m.startswith('hologram_sigil')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={k: v for k, v in os.environ.items() if k != "HOLOGRAM_PLUGINS"}).stdout.splitlines()
    assert out == ["('.sigil',) ['circuit']", "['hologram_sigil']"]
