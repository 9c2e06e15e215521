"""Binary encoding: exact round trip, determinism, and decode of any bytes -> ISAError only."""

from __future__ import annotations

import math
import struct
import zlib
from unittest import mock

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hologram.core.errors import ISAError
from hologram.core.types import Affine, DType
from hologram.isa import encoding
from hologram.isa.asm import format_program, parse_program
from hologram.isa.encoding import FORMAT_VERSION, MAGIC, decode, encode, program_hash
from hologram.isa.program import BufferParam, Imm, Instr, Program, Reg, RegDecl, Stage
from hologram.registry.lookups import get_backend
from hologram.testing.isa_strategies import programs
from hologram.verify.verifier import verify

SAMPLE = parse_program("""
.program sample
.symbols n
.param a: f32
.param in x: f32[n - 2, 2*n]
.param out s: f64[]
.temp t: i8[n]
.stage main domain [n] block [8]
    .reg %i, %h: i64
    .reg %v: f32
    .reg %p: bool
    .shared sh: f32[8]
    .pool pl: f32[4]
    .init s[0] = -0.0
    MOV.i64 %i, %gid.x
    SET.lt.i64 %p, %i, 3
    @!%p BRA skip
    LDG.f32.chk %v, [x + %i - 1]
    MAD.f32 %v, $a, %v, nan
    CVT.f32.i64 %v, %i
    PoolAlloc %h, pl, 2
    PoolFree %h
skip:
    EXIT
""")


def _with_crc(body: bytes) -> bytes:
    return body + struct.pack("<I", zlib.crc32(body))


@given(programs())
def test_binary_round_trip_is_exact(p):
    data = encode(p)
    assert decode(data) == p
    assert encode(decode(data)) == data


@given(programs())
@settings(max_examples=10)
def test_encoding_is_deterministic(p):
    copy = parse_program(format_program(p))
    assert encode(copy) == encode(p)
    assert program_hash(copy) == program_hash(p)


def test_layout_header_and_checksum():
    data = encode(SAMPLE)
    assert data[:4] == MAGIC and data[4] == 1 and data[5] == 2  # format 1 (no flags), zigzag(ISA 1)
    assert struct.unpack("<I", data[-4:])[0] == zlib.crc32(data[:-4])
    length, pos, shift = 0, 6, 0
    while True:  # payload length varint
        b = data[pos]
        length |= (b & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not b & 0x80:
            break
    assert pos + length + 4 == len(data)


def test_program_hash_is_sha256_of_the_encoding():
    import hashlib

    h = program_hash(SAMPLE)
    assert h == hashlib.sha256(encode(SAMPLE)).hexdigest() and len(h) == 64


def test_distinct_immediates_encode_distinctly():
    def prog(v):
        return Program("p", (), stages=(Stage("s", (Affine.of(1),), (1,), (RegDecl("r", DType.F64),),
                                              body=(Instr("MOV_IMM", DType.F64, Reg("r"), (Imm(v),)),)),))

    blobs = {encode(prog(v)) for v in (0.0, -0.0, 0, False, math.nan, -math.nan, 1, 1.0, True)}
    assert len(blobs) == 9
    for v in (math.nan, -0.0, 2**200, -(2**70)):
        assert decode(encode(prog(v))) == prog(v)


def test_every_prefix_is_rejected():
    data = encode(SAMPLE)
    for n in range(len(data)):
        with pytest.raises(ISAError):
            decode(data[:n])


def test_every_single_bit_flip_is_rejected():
    data = encode(SAMPLE)
    for i in range(len(data)):
        for bit in range(8):
            bad = bytearray(data)
            bad[i] ^= 1 << bit
            with pytest.raises(ISAError):
                decode(bytes(bad))


@pytest.mark.parametrize("mutate, message", [
    (lambda d: b"XXXX" + d[4:], "bad magic"),
    (lambda d: d[:4] + bytes([FORMAT_VERSION + 1]) + d[5:], f"unsupported encoding format version {FORMAT_VERSION + 1}"),
    (lambda d: d[:-1] + bytes([d[-1] ^ 1]), "checksum mismatch"),
    (lambda d: _with_crc(d[:5] + bytes([4]) + d[6:-4]), "unsupported ISA version 2"),
    (lambda d: _with_crc(d[:-4] + b"\x00"), "disagrees"),
    (lambda d: b"", "shorter than any encoding"),
])
def test_decode_reasons(mutate, message):
    with pytest.raises(ISAError, match=message):
        decode(mutate(encode(SAMPLE)))


def test_non_canonical_spelling_is_rejected():
    # the same program with its (one-byte) string count written as a two-byte varint
    data = encode(Program("p", ()))
    head, payload = data[:6], data[7:-4]
    assert data[6] == len(payload)
    forged = _with_crc(head + bytes([len(payload) + 1]) + bytes([payload[0] | 0x80, 0]) + payload[1:])
    with pytest.raises(ISAError, match="canonical"):
        decode(forged)


def test_decode_rejects_non_bytes():
    with pytest.raises(ISAError, match="expects bytes"):
        decode("not bytes")  # type: ignore[arg-type]


def test_encode_rejects_values_it_cannot_represent():
    bad = Program("p", (BufferParam("x", "f32", (), "in"),))  # type: ignore[arg-type]
    with pytest.raises(ISAError, match=r"program.params\[0\].dtype should be DType, not 'f32'"):
        encode(bad)
    with pytest.raises(ISAError, match="expects a Program"):
        encode("p")  # type: ignore[arg-type]


@given(st.binary(max_size=300))
def test_random_bytes_raise_isa_error_only(data):
    with pytest.raises(ISAError):
        decode(data)


@given(st.binary(max_size=200))
def test_random_bytes_after_a_valid_header(tail):
    head = MAGIC + bytes([FORMAT_VERSION, 2])
    try:
        decode(_with_crc(head + tail))
    except ISAError:
        pass


@given(st.data())
@settings(max_examples=200)
def test_structural_corruption_with_a_valid_checksum(data):
    """Mutations the checksum cannot see (it was recomputed) must still fail cleanly,
    or decode to a program that re-encodes to exactly the same bytes."""
    body = bytearray(encode(SAMPLE)[:-4])
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(5, len(body) - 1))
        action = data.draw(st.sampled_from(["set", "delete", "insert"]))
        if action == "set":
            body[i] = data.draw(st.integers(0, 255))
        elif action == "delete":
            del body[i]
        else:
            body.insert(i, data.draw(st.integers(0, 255)))
    blob = _with_crc(bytes(body))
    try:
        p = decode(blob)
    except ISAError:
        return
    assert encode(p) == blob


def test_numpy_integers_in_fields_are_accepted():
    import numpy as np

    from hologram.isa.program import MemDecl
    from hologram.verify.verifier import verify

    p = Program("p", (), stages=(Stage("s", (Affine(np.int64(4)),), (np.int64(4),), (RegDecl("r", DType.F32),),
                                       shared=(MemDecl("sh", DType.F32, np.int64(4)),),
                                       body=(Instr("MOV_IMM", DType.F32, Reg("r"), (Imm(np.float32(0.5)),)),
                                             Instr("EXIT"))),))
    assert verify(p) is p
    assert decode(encode(p)) == p
    assert parse_program(format_program(p)) == p


# ------------------------------------------------------- one program, one encoding
# A dimension's terms are canonical (sorted by symbol, each once, non-zero coefficients):
# Affine canonicalizes in its constructor, and decode refuses bytes that spell a
# dimension any other way. Before, `n` spelled `-1*n + 2*n` decoded as such; the verifier
# read it as `2*n` (Poly.of kept the last term) while the runtimes sized buffers as `n`.
DOUBLED = parse_program("""
.program doubled
.symbols n
.param in x: f32[2*n]
.param out y: f32[2*n]
.stage s domain [2*n] block [32]
    .reg %i: i64
    .reg %v: f32
    MOV.i64 %i, %gid.x
    LDG.f32 %v, [x + %i]
    STG.f32 [y + %i], %v
    EXIT
""")


def _spelled(p: Program, spell, buffers_only: bool = False) -> bytes:
    """`p` encoded with each dimension's terms written as `spell(dim)` returns them (a
    forger's encoder: the real one writes canonical terms only); with `buffers_only`,
    only the dimensions of buffer shapes."""
    def affine(self, a):
        self.svarint(a.const)
        self.seq(spell(a), lambda t: (self.str(t[0]), self.svarint(t[1])))

    def buffer(self, b):  # as _Writer.buffer
        self.str(b.name)
        self.dtype(b.dtype)
        self.str(b.role)
        self.seq(b.shape, lambda a: affine(self, a))

    with mock.patch.object(encoding._Writer, *(("buffer", buffer) if buffers_only else ("affine", affine))):
        return encode(p)


def test_affine_is_canonical_by_construction():
    n = Affine.of("n")
    assert Affine(0, (("n", -1), ("n", 2))) == n and hash(Affine(0, (("n", -1), ("n", 2)))) == hash(n)
    assert Affine(3, (("n", 0),)) == Affine(3) and Affine(0, (("n", 2), ("n", -2))).is_const
    assert Affine(1, (("n", 1), ("m", 2))).terms == (("m", 2), ("n", 1))
    numpy_coefficient = Affine(0, (("n", np.int64(2)),))
    assert numpy_coefficient.terms == (("n", 2),) and type(numpy_coefficient.terms[0][1]) is int
    assert Affine(0, (("n", 1), ("m", 2), ("n", -1))) == Affine.of("m") * 2
    # equal programs: one encoding, one hash
    zero_domain = (Affine(0, (("n", 2), ("m", 0))),)
    zero_term = attrs.evolve(DOUBLED, stages=(attrs.evolve(DOUBLED.stages[0], domain=zero_domain),))
    assert zero_term == DOUBLED and encode(zero_term) == encode(DOUBLED)
    assert program_hash(zero_term) == program_hash(DOUBLED)


def test_affine_leaves_malformed_terms_to_the_structure_check():
    assert Affine(0, [("n", 1)]).terms == [("n", 1)]  # type: ignore[arg-type]
    with pytest.raises(ISAError, match=r"terms should be a tuple"):
        listed = Affine(0, [("n", 1)])  # type: ignore[arg-type]
        encode(Program("p", (BufferParam("x", DType.F32, (listed,), "in"),), symbols=("n",)))
    with pytest.raises(ISAError, match=r"terms\[0\]\[1\] should be int, not 'x'"):
        encode(Program("p", (BufferParam("x", DType.F32, (Affine(0, (("n", "x"),)),), "in"),), symbols=("n",)))


@pytest.mark.parametrize("spelling", [
    (("n", -1), ("n", 2)),  # n, read by the verifier as 2*n before
    (("n", 1), ("n", 0)),
    (("n", 1), ("m", 0)),
    (("m", 0), ("n", 1)),
])
def test_non_canonical_dimension_is_refused(spelling):
    data = _spelled(DOUBLED, lambda a: spelling if a.terms == (("n", 2),) else a.terms)
    with pytest.raises(ISAError, match="not in canonical form"):
        decode(data)


@pytest.mark.parametrize("backend", ["interp", "cpu_llvm"])
def test_forged_doubled_shape_cannot_reach_a_backend(backend):
    """The fuzzer's reproducer: `x, y: f32[2*n]` re-encoded with shape `-1*n + 2*n`
    passed verify(decode(...)); then cpu_llvm copied 2*n elements between arrays of n
    (`free(): invalid pointer` at n = 3e6) and interp raised. Here the arrays are views
    inside guard regions, so an access beyond them lands in the guard (and is seen)
    instead of crashing the test process."""
    data = _spelled(DOUBLED, lambda a: (("n", -1), ("n", 2)), buffers_only=True)
    try:
        program = verify(decode(data))
    except ISAError as e:
        assert "not in canonical form" in str(e)
        return
    b, n = get_backend(backend), 1000
    xs, ys = np.full(3 * n, 7.0, np.float32), np.zeros(3 * n, np.float32)
    b.launch(b.prepare(program), {"x": xs[:n], "y": ys[n:2 * n]}, {}, {"n": n})
    assert not ys[2 * n:].any(), "the launch wrote past the end of y"


@st.composite
def _respelling(draw, terms: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """Terms summing to the same dimension: coefficients split, zero terms, any order."""
    out: list[tuple[str, int]] = []
    for name, c in terms:
        pieces = draw(st.lists(st.integers(-3, 3), max_size=2))
        out += [(name, k) for k in pieces] + [(name, c - sum(pieces))]
    out += [(name, 0) for name in draw(st.lists(st.sampled_from(["m", "n", "q"]), max_size=1))]
    return tuple(draw(st.permutations(out)))


@given(programs(max_stages=1, max_instructions=8), st.data())
@settings(max_examples=60)
def test_decode_accepts_only_the_canonical_encoding(p, data):
    """Every spelling of `p`'s dimensions either is `encode(p)` or is refused; what
    decodes re-encodes to exactly its bytes (one program, one encoding)."""
    blob = _spelled(p, lambda a: data.draw(_respelling(a.terms)))
    try:
        q = decode(blob)
    except ISAError as e:
        assert "canonical" in str(e)
        return
    assert blob == encode(p) and q == p and encode(q) == blob


@given(programs(max_stages=1, max_instructions=12), st.data())
@settings(max_examples=60)
def test_mutated_encodings_decode_only_to_their_own_bytes(p, data):
    body = bytearray(encode(p)[:-4])
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(5, len(body) - 1))
        body[i] = data.draw(st.integers(0, 255))
    blob = _with_crc(bytes(body))
    try:
        q = decode(blob)
    except ISAError:
        return
    assert encode(q) == blob
