"""Source sites in programs (docs/isa.md, "Sites"; docs/hasm.md): the text form, the binary
encoding's format 3, the verifier's `site` rule and the builder's compaction."""

from __future__ import annotations

import struct
import zlib
from unittest import mock

import attrs
import pytest

from hologram.core.errors import ISAError, Site, VerifyError
from hologram.isa import encoding
from hologram.isa.asm import format_program, parse_program
from hologram.isa.builder import compact_sites
from hologram.isa.encoding import decode, encode
from hologram.isa.program import Instr, without_sites
from hologram.verify.verifier import verify

TEXT = '''.program g
.isa 1
.symbols k n
.param in x: f32[n]
.param in idx: i64[k]
.param out y: f32[k]
.site 0 "kernels/g.toml" 7:8-17 "y[i] = x[idx[i]]"
.site 1 "sources/\\u00e9 \\"q\\".toml" 12:1-2 ""

.stage y domain [k] block [256]
    .reg %i, %r0: i64
    .reg %f0: f32
    MOV.i64     %i, %gid.x
    LDG.i64     %r0, [idx + %i]
    LDG.f32.chk %f0, [x + %r0] site 0
    LDG.f32.chk %f0, [x + %r0 + 1] site 1
    STG.f32     [y + %i], %f0
    EXIT
'''


def test_the_text_form_round_trips_sites():
    p = parse_program(TEXT)
    assert p.sites == (Site("kernels/g.toml", 7, 8, 17, "y[i] = x[idx[i]]"), Site('sources/é "q".toml', 12, 1, 2, ""))
    assert [it.site for it in p.stages[0].body if isinstance(it, Instr)] == [None, None, 0, 1, None, None]
    assert format_program(p) == TEXT
    assert verify(p) is p


@pytest.mark.parametrize("edit, message", [
    ('.site 0 "kernels', '.site 1 "kernels'),  # numbered out of order
    ("site 1\n", "site 1 7\n"),
    ("7:8-17", "7:8 17"),
])
def test_malformed_site_text_is_an_isa_error(edit, message):
    with pytest.raises(ISAError):
        parse_program(TEXT.replace(edit, message, 1))


def test_a_site_after_the_first_stage_is_refused():
    with pytest.raises(ISAError, match="belongs in the program header"):
        parse_program(TEXT + '.site 2 "f" 1:1-2 "t"\n')


def test_format_3_round_trips_and_older_programs_keep_their_bytes():
    p = parse_program(TEXT)
    data = encode(p)
    assert data[4] == 3 and decode(data) == p
    bare = attrs.evolve(p, sites=(), stages=tuple(attrs.evolve(s, body=tuple(
        attrs.evolve(it, site=None) if isinstance(it, Instr) else it for it in s.body)) for s in p.stages))
    assert encode(bare)[4] == 1  # no sites, no flags: the format before sites, the same bytes as before
    assert encode(attrs.evolve(bare, reassociate=True))[4] == 2
    assert encode(attrs.evolve(p, reassociate=True))[4] == 3


def _rewrite_format(data: bytes, fmt: int) -> bytes:
    body = bytearray(data[:-4])
    body[4] = fmt
    return bytes(body) + struct.pack("<I", zlib.crc32(bytes(body)))


def test_a_site_in_an_older_format_is_refused():
    p = parse_program(TEXT)
    sites_only_on_instructions = attrs.evolve(p, sites=())  # encodes (the verifier refuses it)
    data = encode(sites_only_on_instructions)
    with pytest.raises(ISAError):
        decode(_rewrite_format(data, 2))
    with pytest.raises(ISAError):
        decode(_rewrite_format(data, 1))


def test_format_3_without_sites_is_not_canonical():
    p = parse_program(TEXT)
    bare = attrs.evolve(p, sites=(), stages=tuple(attrs.evolve(s, body=tuple(
        attrs.evolve(it, site=None) if isinstance(it, Instr) else it for it in s.body)) for s in p.stages))
    with mock.patch.object(encoding, "_has_sites", lambda program: True):
        data = encode(bare)  # format 3, flags 0, an empty site table
    assert data[4] == 3
    with pytest.raises(ISAError, match="not in canonical form"):
        decode(data)


def test_the_encoder_version_tables_know_format_3():
    assert encoding.FORMAT_VERSION == 3 and encoding.FORMAT_VERSIONS == (1, 2, 3)


@pytest.mark.parametrize("change, message", [
    (lambda p: attrs.evolve(p, sites=p.sites[:1]), r"site 1 is not among the program's 1 site\(s\)"),
    (lambda p: attrs.evolve(p, sites=(Site("f", 0, 1, 2, ""), p.sites[1])), r"site 0 \(0:1-2\) is not a position"),
    (lambda p: attrs.evolve(p, sites=(Site("f", 3, 5, 5, ""), p.sites[1])), r"site 0 \(3:5-5\) is not a position"),
])
def test_the_verifier_checks_sites(change, message):
    with pytest.raises(VerifyError, match=message) as info:
        verify(change(parse_program(TEXT)))
    assert info.value.rule == "site"


def test_compact_sites_keeps_the_named_ones_in_order_of_first_use():
    p = parse_program(TEXT)
    extra = attrs.evolve(p, sites=(Site("unused", 1, 1, 2, ""),) + p.sites, stages=tuple(
        attrs.evolve(s, body=tuple(attrs.evolve(it, site=2 if it.site == 0 else None) if isinstance(it, Instr) and
                                   it.site is not None else it for it in s.body)) for s in p.stages))
    compact = compact_sites(extra)
    assert compact.sites == (p.sites[1],)
    assert [it.site for it in compact.stages[0].body if isinstance(it, Instr)] == [None, None, 0, None, None, None]
    assert compact_sites(compact) is compact


def test_one_hash_identifies_the_program_and_without_its_sites_what_it_computes():
    p = parse_program(TEXT)
    moved = attrs.evolve(p, sites=tuple(attrs.evolve(s, file="elsewhere.py", line=s.line + 3) for s in p.sites))
    assert encoding.program_hash(moved) != encoding.program_hash(p)
    assert encoding.program_hash(without_sites(moved)) == encoding.program_hash(without_sites(p))
    bare = parse_program(TEXT.replace(" site 0", "").replace(" site 1", "").replace(
        '.site 0 "kernels/g.toml" 7:8-17 "y[i] = x[idx[i]]"\n', "").replace(
        '.site 1 "sources/\\u00e9 \\"q\\".toml" 12:1-2 ""\n', ""))
    assert not bare.sites and without_sites(p) == bare and without_sites(bare) is bare
    other = parse_program(TEXT.replace("[x + %r0 + 1]", "[x + %r0]"))
    assert encoding.program_hash(without_sites(other)) != encoding.program_hash(without_sites(p))
    assert not hasattr(encoding, "code_hash")  # one hash: caches, bundles and twins all name programs by it
