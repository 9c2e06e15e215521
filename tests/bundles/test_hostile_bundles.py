"""Bundles made by hand to lie: a program that writes what its interface calls an input,
a manifest that disagrees with its program, archives and manifests shaped to exhaust the
reader. Each is refused with a BundleError before anything runs (docs/bundles.md, "What
loading checks"); every hash in them is made to agree, as an attacker would."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import hologram as hg
from hologram.bundles import archive
from hologram.bundles.build import build
from hologram.bundles.load import library, load_bundle, open_bundle, read_bundle
from hologram.bundles.manifest import MANIFEST
from hologram.core.errors import BundleError
from hologram.isa.asm import parse_program
from hologram.isa.encoding import encode

DOCUMENT = '''
[[kernels]]
name = "vadd"
version = "1.0.0"
inputs = { x = "f32[n]", y = "f32[n]" }
outputs = { z = "f32[n]" }
body = "z = x + y"

[[kernels]]
name = "largest"
version = "1.0.0"
inputs = { x = "f32[n]" }
outputs = { m = "f32" }
body = "m = max(x)"
'''


@pytest.fixture(scope="module")
def intact(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("intact")
    (folder / "k.toml").write_text(DOCUMENT)
    out = folder / "k-1.0.0.hgb"
    build([folder / "k.toml"], "k", "1.0.0", out, cache_dir=False, jobs=1, native="none")
    return out


def rewritten(intact: Path, out: Path, programs: dict[str, Callable[[str], str]] | None = None,
              manifest: Callable[[str], str] = lambda text: text) -> Path:
    """`intact` with kernels' programs rewritten (as .hasm text) and its manifest edited,
    every hash made to agree: what someone who can write the file can make."""
    members = archive.read(intact.read_bytes())
    text = members[MANIFEST].decode()
    for kernel, edit in (programs or {}).items():
        asm = load_bundle(intact)[kernel].emit("asm")
        data = encode(parse_program(edit(asm)))
        members[f"programs/{kernel}.hbc"] = data
        text = re.sub(rf'(program = "programs/{kernel}.hbc"\nprogram_sha256 = )"[0-9a-f]+"',
                      rf'\1"{hashlib.sha256(data).hexdigest()}"', text)
    members[MANIFEST] = manifest(text).encode()
    out.write_bytes(archive.write(members))
    return out


# ------------------------------------------------------------- the interface's roles
def _writes_its_input(asm: str) -> str:
    """vadd's program with x declared inout, and z's value stored into x as well."""
    assert ".param in x: f32[n]" in asm and "STG.f32     [z + %i0], %f0" in asm
    return asm.replace(".param in x", ".param inout x").replace(
        "STG.f32     [z + %i0], %f0", "STG.f32     [z + %i0], %f0\n    STG.f32     [x + %i0], %f0")


def test_a_program_that_writes_an_input_is_refused_before_it_runs(intact, tmp_path):
    bad = rewritten(intact, tmp_path / "bad.hgb", {"vadd": _writes_its_input})
    for backend in hg.list_backends():
        x, y = np.ones(4, np.float32), np.ones(4, np.float32)
        lib = load_bundle(bad, backend=backend)
        with pytest.raises(BundleError, match="x is an input in the manifest.*declares it 'inout'.*caller's array"):
            lib.vadd(x, y)
        assert (x == 1).all(), f"{backend} wrote the caller's input"
    with pytest.raises(BundleError, match="declares it 'inout'"):
        library(open_bundle(bad), verify_now=True)


def test_an_output_the_program_may_read_is_refused(intact, tmp_path):
    bad = rewritten(intact, tmp_path / "bad.hgb", {"vadd": lambda asm: asm.replace(".param out z", ".param inout z")})
    with pytest.raises(BundleError, match="z is an output in the manifest \\(role 'out'\\).*'inout'"):
        library(open_bundle(bad), verify_now=True)
