"""Circuits in bundles: a folder holding a `.sigil` file and a TOML document with a
`circuit` key builds (the notes in the table and the manifest), byte-identically twice,
and loads into kernels that compute what the numpy model does."""

from __future__ import annotations

import numpy as np
import pytest

import hologram
from hologram.bundles.build import build
from hologram.bundles.load import library, read_bundle
from hologram.cli.main import main
from hologram.isa.encoding import program_hash
from hologram.registry import plugins
from hologram.testing import assert_close
from hologram_sigil import run_model

SOFTMAX = ("reduce_max@c00->c01 . split_sub@c02[c00,c01] . merge_exp@c02[c02] . reduce_sum@c02->c04 . "
           "split_div@c03[c02,c04]")
SEEDS = "copy@c05->c06 . mark@c21 . copy@c05->c06 . mark@c21"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.delenv("HOLOGRAM_PLUGINS", raising=False)
    monkeypatch.setenv("COLUMNS", "250")
    plugins.reset()
    src = tmp_path / "src"
    src.mkdir()
    (src / "softmax.sigil").write_text(f'kernel softmax 1.0.0 "softmax of c00 into c03"\n  {SOFTMAX}\n')
    (src / "seeds.toml").write_text(f'[kernel]\nname = "seeds"\nversion = "2.0.0"\ncircuit = """\n{SEEDS}\n"""\n')
    (src / "plain.toml").write_text('[kernel]\nname = "plain"\nversion = "1.0.0"\ninputs = { x = "f32[n]" }\n'
                                    'outputs = { y = "f32[n]" }\nbody = "y = 2 * x"\n')
    yield src
    plugins.reset()


def test_a_folder_of_circuits_builds_and_loads(folder, tmp_path, capsys):
    out = tmp_path / "circuits-1.0.0.hgb"
    assert main(["bundle", "build", str(folder), "--name", "circuits", "--version", "1.0.0", "--native", "none",
                 "--no-cache", "-o", str(out)]) == 0
    table = capsys.readouterr().out
    seeds_row = next(line for line in table.splitlines() if "seeds" in line)
    softmax_row = next(line for line in table.splitlines() if "softmax" in line)
    assert "circuit: 4 ops -> 1 op (75% reduction)" in seeds_row
    assert "circuit: 5 ops -> 5 ops" in softmax_row
    assert "notes" in table  # the column, there only when a translator noted something
    lib = hologram.load_bundle(out)
    assert sorted(lib) == ["plain", "seeds", "softmax"]
    x = np.random.default_rng(1).standard_normal((96, 3072)).astype(np.float32)
    assert np.array_equal(lib.seeds(x), run_model(SEEDS, x))
    assert_close(lib.softmax(x), run_model(SOFTMAX, x), ulps=8)
    assert lib.softmax.summary == "softmax of c00 into c03" and lib.seeds.version == "2.0.0"
    assert main(["bundle", "inspect", str(out), "--kernel", "seeds"]) == 0
    assert "notes = circuit: 4 ops -> 1 op (75% reduction)" in capsys.readouterr().out
    assert main(["bundle", "inspect", str(out), "--kernel", "softmax", "--emit", "source"]) == 0
    assert SOFTMAX in capsys.readouterr().out


def test_builds_are_deterministic_and_the_kernels_match_the_documents(folder):
    a = build([folder], "circuits", "1.0.0", cache_dir=False, jobs=1, native="none")
    b = build([folder], "circuits", "1.0.0", cache_dir=False, jobs=2, native="none")  # in worker processes
    assert a.data == b.data
    entries = {k.entry.name: k.entry for k in a.kernels}
    assert entries["seeds"].stats["notes"] == [["circuit", "4 ops -> 1 op (75% reduction)"]]
    assert "notes" not in entries["plain"].stats
    shipped = library(read_bundle(a.data), backend="interp")
    for name, member in (("softmax", "softmax.sigil"), ("seeds", "seeds.toml")):
        # compiled under the member's name, as the bundle compiles it: the same program
        compiled = hologram.compile((folder / member).read_text(), format=member.split(".")[1],
                                    file=f"sources/{member}")
        assert program_hash(shipped[name].program) == program_hash(compiled.program)
        assert shipped[name].signature == compiled.signature
        assert shipped[name].kdef.notes == compiled.kdef.notes  # the source, translated again when asked


def test_the_build_cache_knows_which_plugins_read_the_documents(folder, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    seeds = folder / "seeds.toml"
    first = build([seeds], "circuits", "1.0.0", cache_dir=cache, jobs=1, native="none")
    again = build([seeds], "circuits", "1.0.0", cache_dir=cache, jobs=1, native="none")
    assert all(k.cached for k in again.kernels) and again.data == first.data
    # without the plugin the same text means something else (an unknown key): not a cache hit
    monkeypatch.setenv("HOLOGRAM_PLUGINS", "-sigil")
    plugins.reset()
    with pytest.raises(hologram.errors.HologramError, match="unknown key 'circuit'"):
        build([seeds], "circuits", "1.0.0", cache_dir=cache, jobs=1, native="none")
