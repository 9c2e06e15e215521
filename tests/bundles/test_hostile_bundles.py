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

[[kernels]]
name = "rows"
version = "1.0.0"
inputs = { x = "f64[m, k]", y = "f32[m, j]" }
outputs = { lo = "f64[m]", at = "i64[m]" }
body = """
lo = min(x, axis=1)
at = argmax(y, axis=1)
"""
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


# -------------------------------------------------------------- the reader's limits
def _overlapping_zip(count: int, pad: int) -> bytes:
    """A stored zip of `count` members, each one's bytes running to the end of the data:
    every later member's header and bytes are inside every earlier one's, so the members
    together claim ~count²·pad/2 bytes of a file of ~count·pad."""
    import binascii
    import struct

    region, offsets = b"", []
    for i in reversed(range(count)):  # built back to front: a member's bytes are what follows its header
        name = f"m{i:05d}".encode()
        body = b"\0" * pad + region
        header = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0, binascii.crc32(body), len(body),
                             len(body), len(name), 0) + name
        region = header + body
        offsets.append(len(header) + len(body))
    starts = [len(region) - n for n in reversed(offsets)]
    directory = b""
    for i, at in enumerate(starts):
        name = f"m{i:05d}".encode()
        size = len(region) - at - 30 - len(name)
        crc = binascii.crc32(region[at + 30 + len(name):])
        directory += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0, crc, size, size, len(name),
                                 0, 0, 0, 0, 0, at) + name
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, len(directory), len(region), 0)
    return region + directory + end


def test_overlapping_members_are_refused_before_any_is_copied():
    import tracemalloc

    data = _overlapping_zip(300, 1000)  # ~310 KB claiming ~46 MB
    tracemalloc.start()
    try:
        with pytest.raises(BundleError, match="members 'm00000' and 'm00001' overlap in the file"):
            archive.read(data, "overlap.hgb")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * len(data), f"reading a {len(data):,}-byte archive allocated {peak:,} bytes"


@pytest.mark.parametrize("manifest, message", [
    ("opt = " + "[" * 5000 + "]" * 5000, "nested deeper than a TOML reader follows"),
    ("opt = " + "[" * 40 + "]" * 40, "nested deeper than 16 levels"),
    ("isa = " + "9" * 5000, "not a TOML document this hologram reads"),
    ("isa = " + "9" * 4000, "isa: 13288-bit integer, out of range"),
])
def test_a_manifest_shaped_to_break_the_reader_is_a_bundle_error(intact, tmp_path, manifest, message):
    key = manifest.split(" =")[0]
    bad = rewritten(intact, tmp_path / "bad.hgb",
                    manifest=lambda text: re.sub(rf"(?m)^{key} = .*$", lambda _: manifest, text, count=1))
    with pytest.raises(BundleError, match=message):
        open_bundle(bad)


def test_a_native_index_shaped_to_break_the_reader_is_a_bundle_error():
    from hologram.bundles.manifest import NativeTarget, read_index

    target = NativeTarget("cpu_llvm", "x86-64-v3", "t", "c", (), "tc", ("k",), "0" * 64)
    for index, message in [(b"[" * 100_000 + b"]" * 100_000, "nested deeper than a JSON reader follows"),
                           (b'{"k": ' + b"[" * 40 + b"]" * 40 + b"}", "nested deeper than 16 levels")]:
        with pytest.raises(BundleError, match=message):
            read_index(index, target)


# ----------------------------------------------- the manifest's facts and the program
def _reductions(replacement: str) -> Callable[[str], str]:
    """A manifest edit: largest's reductions list replaced (vadd's is the empty one)."""
    def edit(text: str) -> str:
        assert text.count('reductions = [\n  { kind = "max", axes = [["r0", "n"]] },\n]') == 1
        return text.replace('reductions = [\n  { kind = "max", axes = [["r0", "n"]] },\n]', replacement)
    return edit


def test_a_manifest_that_drops_a_reduction_the_program_makes_is_refused(intact, tmp_path):
    """max of an empty array is an EmptyReductionError, as numpy's; with the reduction
    dropped from the manifest the call returned -inf, the seed of the program's fold."""
    with pytest.raises(hg.errors.EmptyReductionError):
        load_bundle(intact).largest(np.zeros(0, np.float32))
    bad = rewritten(intact, tmp_path / "bad.hgb", manifest=_reductions("reductions = []"))
    for backend in hg.list_backends():
        with pytest.raises(BundleError, match="stage 'm' folds ReduceMax.f32 into m, seeded with -inf, over n: "
                                              "an extent the manifest's reductions do not list"):
            load_bundle(bad, backend=backend).largest(np.zeros(0, np.float32))
    # listing it over another extent is no better
    other = rewritten(intact, tmp_path / "other.hgb",
                      manifest=_reductions('reductions = [\n  { kind = "max", axes = [["r0", "1"]] },\n]'))
    with pytest.raises(BundleError, match="over n: an extent the manifest's reductions do not list"):
        load_bundle(other).largest(np.zeros(0, np.float32))


@pytest.mark.parametrize("kept, unlisted", [("", "folds %acc in the loop loop_r00,"),  # the min's
                                             ('{ kind = "min", axes = [["r0", "k"]] }',
                                              "folds %best in the loop loop_r10,")])  # the argmax's
def test_a_manifest_that_drops_a_per_row_reduction_is_refused(intact, tmp_path, kept, unlisted):
    """A lane's loop folding a min (or an argmax's best value) seeded with its identity:
    an empty row would give inf (or index 0) instead of EmptyReductionError."""
    x, y = np.zeros((2, 0)), np.zeros((2, 0), np.float32)
    with pytest.raises(hg.errors.EmptyReductionError):
        load_bundle(intact).rows(x, y)

    def drop(text: str) -> str:
        listed = ('reductions = [\n  { kind = "min", axes = [["r0", "k"]] },\n'
                  '  { kind = "argmax", axes = [["r1", "j"]] },\n]')
        assert listed in text
        return text.replace(listed, f"reductions = [{kept}]")
    bad = rewritten(intact, tmp_path / "bad.hgb", manifest=drop)
    with pytest.raises(BundleError, match=f"stage '[a-z]+' {unlisted} over [jk]: an extent the manifest's"):
        load_bundle(bad).rows(x, y)


@pytest.mark.parametrize("reductions, message", [
    ('[\n  { kind = "sum", axes = [["r0", "n"]] },\n]', "kind: 'sum' is not a reduction without an identity"),
    ('[\n  { kind = "max", axes = [["r0", "q"]] },\n]', "extent q names 'q', not one of the kernel's symbols \\(n\\)"),
])
def test_a_manifest_reduction_a_call_cannot_check_is_refused_at_load(intact, tmp_path, reductions, message):
    """Before, a `sum` made every empty call fail, and an unknown symbol raised KeyError at the call."""
    bad = rewritten(intact, tmp_path / "bad.hgb", manifest=_reductions(f"reductions = {reductions}"))
    with pytest.raises(BundleError, match=message):
        load_bundle(bad)


def test_finding_a_programs_folds_follows_each_register_once():
    """A trip count computed through a chain of registers each used twice: followed
    naively, 2^30 paths; each definition's value is computed once."""
    from hologram.bundles.folds import identityless_folds

    chain = "\n".join(f"    ADD.i64     %r{k + 1}, %r{k}, %r{k}" for k in range(30))
    regs = ", ".join(f"%r{k}" for k in range(31))
    asm = f""".program deep
.isa 1
.symbols n
.param in x: f32[n]
.param out y: f32[n]

.stage y domain [n] block [1]
    .reg {regs}, %c, %i: i64
    .reg %acc, %v: f32
    MOV.i64     %r0, $n
{chain}
    MOV.i64     %c, %r30
    MOV_IMM.f32 %acc, -inf
    MOV_IMM.i64 %i, 0
top:
    LDG.f32     %v, [x + %i]
    MAX.f32     %acc, %acc, %v
    LOOP        %c, top
    EXIT
"""
    (fold,) = identityless_folds(parse_program(asm))
    assert fold[1] == "folds %acc in the loop top," and str(fold[2]) == f"{2 ** 30}*n"


# ------------------------------------------------------------- the verifier's limits
def _sixteen_shared_arrays(asm: str) -> str:
    """vadd's program with 16 unused shared f64[65536] arrays: 8 MiB of block scratch, which
    verified before the scratch limit and took cpu_llvm's stack down at the first call."""
    head, stage, rest = asm.partition("\n.stage ")
    line, _, body = rest.partition("\n")
    pads = "".join(f"    .shared pad{k}: f64[65536]\n" for k in range(16))
    return f"{head}\n.stage {line}\n{pads}{body}"


def test_a_program_past_the_scratch_limit_is_refused_by_bundle_verify_and_at_its_call(intact, tmp_path, run_cli):
    bad = rewritten(intact, tmp_path / "bad.hgb", {"vadd": _sixteen_shared_arrays})
    code, out, err = run_cli("bundle", "verify", str(bad))
    assert code != 0 and "shared" in out + err and "limit" in out + err
    for backend in hg.list_backends():
        lib = load_bundle(bad, backend=backend)
        with pytest.raises(hg.errors.HologramError, match="limit"):
            lib.vadd(np.ones(4, np.float32), np.ones(4, np.float32))
