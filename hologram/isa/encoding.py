"""The binary encoding of Atlas programs (`.hbc`): compact, deterministic, checksummed.

    magic "\\x89HBC" | format version u8 | ISA version varint | payload length varint |
    payload | crc32 (u32 little-endian) of every byte before it

The payload is a string table (every name once, in first-use order) followed by the
program, with names as varint indices into the table, integers as LEB128 varints
(signed ones zigzag-mapped), floats as their 8 IEEE-754 bytes, and every list prefixed by
its length. docs/hasm.md gives the layout byte by byte.

`decode` accepts exactly what `encode` produces: anything else (truncated, bit-flipped,
another format version, trailing bytes, a non-canonical spelling of a valid program)
raises ISAError with the reason. It never raises anything else and never reads past the
input, so it is safe on untrusted bytes (bundles).
"""

from __future__ import annotations

import hashlib
import struct
import weakref
import zlib
from typing import Callable, Sequence, TypeVar

import numpy as np

from hologram.core.errors import ISAError, Site
from hologram.core.types import Affine, DType
from hologram.isa.program import (ISA_VERSION, SPECIALS, Addr, BufferParam, Imm, Init, Instr, Label, MemDecl, Operand,
                                  Pred, Program, Reg, RegDecl, ScalarParam, Special, Stage, Sym)
from hologram.isa.structure import built_well_typed, structure_problem

MAGIC = b"\x89HBC"
# Format 2 adds one field, the program flags; a program without flags is written in
# format 1, so every encoding (and hash) from before format 2 is unchanged. Format 3 adds
# the source-site table (after the temporaries) and an instruction's site (F_SITE), and
# always writes the flags; a program without sites is written in format 1 or 2 as before.
FORMAT_VERSION = 3
FORMAT_VERSIONS = (1, 2, 3)
PROGRAM_REASSOCIATE = 1 << 0
_PROGRAM_FLAGS_ALL = PROGRAM_REASSOCIATE
SUPPORTED_ISA_VERSIONS = (ISA_VERSION,)

# Frozen code tables: a code means the same thing in every file ever written, whatever
# order the Python enums and tuples are declared in.
DTYPE_CODES = ("bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "f32", "f64")
SPECIAL_CODES = tuple(f"{k}.{a}" for k in ("tid", "ntid", "ctaid", "nctaid", "gid", "gdim") for a in "xyz")
assert set(SPECIAL_CODES) == set(SPECIALS)
_DTYPE_CODE = {DType(name): k for k, name in enumerate(DTYPE_CODES)}
_SPECIAL_CODE = {name: k for k, name in enumerate(SPECIAL_CODES)}

OP_REG, OP_SPECIAL, OP_SYM, V_FALSE, V_TRUE, V_INT, V_FLOAT = range(7)
PARAM_BUFFER, PARAM_SCALAR = 0, 1
ITEM_LABEL, ITEM_INSTR = 0, 1
# Instruction field-presence flags, in the order the fields follow.
F_DTYPE, F_DTYPE2, F_MOD, F_DST, F_ADDR, F_INDEX, F_TARGET, F_COUNT, F_PRED, F_NEGATE, F_CHECKED, F_SITE = (
    1 << k for k in range(12))
_FLAGS_ALL = (1 << 12) - 1
_MAX_VARINT_BYTES = 1024  # room for any integer a program can sensibly hold (7168 bits)
_HEADER_MIN = len(MAGIC) + 1 + 1 + 1 + 4

T = TypeVar("T")


# ============================================================================ encode
class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()
        self.strings: dict[str, int] = {}

    def uvarint(self, n: int) -> None:
        if 0 <= n < 0x80:  # most counts, string indices and flags: one byte
            self.out.append(n)
            return
        while True:
            byte, n = n & 0x7F, n >> 7
            self.out.append(byte | (0x80 if n else 0))
            if not n:
                return

    def svarint(self, n: int) -> None:
        n = int(n)  # numpy integers too (structure_problem admitted only integers)
        self.uvarint(n << 1 if n >= 0 else ((-n) << 1) - 1)

    def str(self, s: str) -> None:
        k = self.strings.get(s)
        if k is None:
            k = self.strings[s] = len(self.strings)
        self.uvarint(k)

    def dtype(self, d: DType) -> None:
        self.out.append(_DTYPE_CODE[d])

    def seq(self, items: Sequence[T], put: Callable[[T], None]) -> None:
        self.uvarint(len(items))
        for x in items:
            put(x)

    def affine(self, a: Affine) -> None:
        self.svarint(a.const)
        self.seq(a.terms, lambda t: (self.str(t[0]), self.svarint(t[1])))

    def value(self, v: bool | int | float) -> None:
        if isinstance(v, (bool, np.bool_)):
            self.out.append(V_TRUE if v else V_FALSE)
        elif isinstance(v, (int, np.integer)):
            self.out.append(V_INT)
            self.svarint(v)
        else:
            self.out.append(V_FLOAT)
            self.out += struct.pack("<d", float(v))

    def operand(self, o: Operand) -> None:
        if isinstance(o, Reg):
            self.out.append(OP_REG)
            self.str(o.name)
        elif isinstance(o, Special):
            self.out += bytes((OP_SPECIAL, _SPECIAL_CODE[o.name]))
        elif isinstance(o, Sym):
            self.out.append(OP_SYM)
            self.str(o.name)
        else:
            self.value(o.value)

    def buffer(self, b: BufferParam) -> None:
        self.str(b.name)
        self.dtype(b.dtype)
        self.str(b.role)
        self.seq(b.shape, self.affine)

    def param(self, p: BufferParam | ScalarParam) -> None:
        if isinstance(p, BufferParam):
            self.out.append(PARAM_BUFFER)
            self.buffer(p)
        else:
            self.out.append(PARAM_SCALAR)
            self.str(p.name)
            self.dtype(p.dtype)

    def instr(self, i: Instr) -> None:
        a, pred = i.addr, i.pred
        flags = ((F_DTYPE if i.dtype is not None else 0) | (F_DTYPE2 if i.dtype2 is not None else 0)
                 | (F_MOD if i.mod is not None else 0) | (F_DST if i.dst is not None else 0)
                 | (F_ADDR | (F_INDEX if a.index is not None else 0) if a is not None else 0)
                 | (F_TARGET if i.target is not None else 0) | (F_COUNT if i.count is not None else 0)
                 | (F_PRED | (F_NEGATE if pred.negate else 0) if pred is not None else 0)
                 | (F_CHECKED if i.checked else 0) | (F_SITE if i.site is not None else 0))
        self.str(i.op)
        self.uvarint(flags)
        if i.dtype is not None:
            self.dtype(i.dtype)
        if i.dtype2 is not None:
            self.dtype(i.dtype2)
        if i.mod is not None:
            self.str(i.mod)
        if i.dst is not None:
            self.str(i.dst.name)
        self.seq(i.srcs, self.operand)
        if a is not None:
            self.str(a.buffer)
            if a.index is not None:
                self.str(a.index.name)
            self.svarint(a.offset)
        if i.target is not None:
            self.str(i.target)
        if i.count is not None:
            self.svarint(i.count)
        if i.pred is not None:
            self.str(i.pred.reg.name)
        if i.site is not None:
            self.svarint(i.site)

    def site(self, s: Site) -> None:
        self.str(s.file)
        self.svarint(s.line)
        self.svarint(s.col)
        self.svarint(s.end_col)
        self.str(s.text)

    def item(self, it: Instr | Label) -> None:
        if isinstance(it, Label):
            self.out.append(ITEM_LABEL)
            self.str(it.name)
        else:
            self.out.append(ITEM_INSTR)
            self.instr(it)

    def stage(self, s: Stage) -> None:
        mem = lambda m: (self.str(m.name), self.dtype(m.dtype), self.svarint(m.size))  # noqa: E731
        self.str(s.name)
        self.seq(s.domain, self.affine)
        self.seq(s.block, self.svarint)
        self.seq(s.regs, lambda r: (self.str(r.name), self.dtype(r.dtype)))
        self.seq(s.shared, mem)
        self.seq(s.pools, mem)
        self.seq(s.inits, lambda i: (self.str(i.buffer), self.svarint(i.offset), self.value(i.value)))
        self.seq(s.body, self.item)


def encode(p: Program) -> bytes:
    """The canonical bytes of `p` (the same program always gives the same bytes)."""
    if not isinstance(p, Program):
        raise ISAError(f"encode expects a Program, got {type(p).__name__}")
    bad = structure_problem(p)
    if bad is not None:
        raise ISAError(f"cannot encode a malformed program: {bad}")
    flags = PROGRAM_REASSOCIATE if p.reassociate else 0
    fmt = 3 if _has_sites(p) else 2 if flags else 1
    body = _Writer()
    body.str(p.name)
    body.seq(p.symbols, body.str)
    if fmt >= 2:
        body.uvarint(flags)
    body.seq(p.params, body.param)
    body.seq(p.temps, body.buffer)
    if fmt >= 3:
        body.seq(p.sites, body.site)
    body.seq(p.stages, body.stage)
    payload = _Writer()
    payload.seq(list(body.strings), lambda s: (payload.uvarint(len(b := s.encode("utf-8", "surrogatepass"))),
                                               payload.out.extend(b)))
    payload.out += body.out
    head = _Writer()
    head.out += MAGIC
    head.out.append(fmt)
    head.svarint(p.isa_version)
    head.uvarint(len(payload.out))
    data = bytes(head.out + payload.out)
    return data + struct.pack("<I", zlib.crc32(data))


def _has_sites(p: Program) -> bool:
    return bool(p.sites) or any(isinstance(it, Instr) and it.site is not None for s in p.stages for it in s.body)


# program -> its hash, by identity (a Program is immutable): `decode` has the bytes, and a
# backend's `prepare` then needs the hash of the program it returned (a big program's
# encoding takes milliseconds). An entry goes when its program does.
_HASHES: dict[int, tuple[weakref.ref, str]] = {}


def program_hash(p: Program) -> str:
    """sha256 (hex) of the program's encoding: its identity for caches and bundles."""
    known = _HASHES.get(id(p))
    if known is not None and known[0]() is p:
        return known[1]
    digest = hashlib.sha256(encode(p)).hexdigest()
    _remember(p, digest)
    return digest


def _remember(p: Program, digest: str) -> None:
    key = id(p)
    _HASHES[key] = (weakref.ref(p, lambda _: _HASHES.pop(key, None)), digest)


# ============================================================================ decode
class _Reader:
    def __init__(self, data: bytes, pos: int, end: int):
        self.data, self.pos, self.end = data, pos, end
        self.strings: list[str] = []
        self.format = data[4]

    def fail(self, why: str) -> ISAError:
        return ISAError(f"corrupt program encoding at byte {self.pos}: {why}")

    def byte(self) -> int:
        if self.pos >= self.end:
            raise self.fail("unexpected end of data")
        self.pos += 1
        return self.data[self.pos - 1]

    def take(self, n: int) -> bytes:
        if n > self.end - self.pos:
            raise self.fail(f"needs {n} bytes, only {self.end - self.pos} left")
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def uvarint(self) -> int:
        n = shift = 0
        for _ in range(_MAX_VARINT_BYTES):
            b = self.byte()
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return n
        raise self.fail("integer too long")

    def svarint(self) -> int:
        n = self.uvarint()
        return -((n + 1) >> 1) if n & 1 else n >> 1

    def count(self) -> int:
        n = self.uvarint()
        if n > self.end - self.pos:  # every element takes at least one byte
            raise self.fail(f"list of {n} elements in {self.end - self.pos} bytes")
        return n

    def seq(self, get: Callable[[], T]) -> tuple[T, ...]:
        return tuple(get() for _ in range(self.count()))

    def str(self) -> str:
        k = self.uvarint()
        if k >= len(self.strings):
            raise self.fail(f"string index {k} outside the table of {len(self.strings)}")
        return self.strings[k]

    def dtype(self) -> DType:
        b = self.byte()
        if b >= len(DTYPE_CODES):
            raise self.fail(f"unknown type code {b}")
        return DType(DTYPE_CODES[b])

    def affine(self) -> Affine:
        const = self.svarint()
        terms = self.seq(lambda: (self.str(), self.svarint()))
        dim = Affine(const, terms)
        if dim.terms != terms:  # the constructor canonicalized: these bytes spell it another way
            raise self.fail(f"dimension {dim} is not in canonical form (terms sorted by symbol, "
                            "each symbol once, no zero coefficient)")
        return dim

    def value(self, tag: int | None = None) -> bool | int | float:
        tag = self.byte() if tag is None else tag
        if tag in (V_FALSE, V_TRUE):
            return tag == V_TRUE
        if tag == V_INT:
            return self.svarint()
        if tag == V_FLOAT:
            return struct.unpack("<d", self.take(8))[0]
        raise self.fail(f"unknown value tag {tag}")

    def operand(self) -> Operand:
        tag = self.byte()
        if tag == OP_REG:
            return Reg(self.str())
        if tag == OP_SPECIAL:
            code = self.byte()
            if code >= len(SPECIAL_CODES):
                raise self.fail(f"unknown special register code {code}")
            return Special(SPECIAL_CODES[code])
        if tag == OP_SYM:
            return Sym(self.str())
        return Imm(self.value(tag))

    def buffer(self) -> BufferParam:
        name, dtype, role = self.str(), self.dtype(), self.str()
        return BufferParam(name, dtype, self.seq(self.affine), role)

    def param(self) -> BufferParam | ScalarParam:
        tag = self.byte()
        if tag == PARAM_BUFFER:
            return self.buffer()
        if tag == PARAM_SCALAR:
            return ScalarParam(self.str(), self.dtype())
        raise self.fail(f"unknown parameter tag {tag}")

    def instr(self) -> Instr:
        op = self.str()
        flags = self.uvarint()
        if flags & ~_FLAGS_ALL or (flags & F_INDEX and not flags & F_ADDR) or (flags & F_NEGATE and not flags & F_PRED) \
                or (flags & F_SITE and self.format < 3):
            raise self.fail(f"invalid instruction flags 0x{flags:x}")
        opt = lambda bit, get: get() if flags & bit else None  # noqa: E731
        dtype, dtype2, mod = opt(F_DTYPE, self.dtype), opt(F_DTYPE2, self.dtype), opt(F_MOD, self.str)
        dst = opt(F_DST, lambda: Reg(self.str()))
        srcs = self.seq(self.operand)
        addr = opt(F_ADDR, lambda: Addr(self.str(), opt(F_INDEX, lambda: Reg(self.str())), self.svarint()))
        target, count = opt(F_TARGET, self.str), opt(F_COUNT, self.svarint)
        pred = opt(F_PRED, lambda: Pred(Reg(self.str()), bool(flags & F_NEGATE)))
        site = opt(F_SITE, self.svarint)
        return Instr(op, dtype, dst, srcs, addr, target, mod, dtype2, count, pred, bool(flags & F_CHECKED), site)

    def site(self) -> Site:
        return Site(self.str(), self.svarint(), self.svarint(), self.svarint(), self.str())

    def item(self) -> Instr | Label:
        tag = self.byte()
        if tag == ITEM_LABEL:
            return Label(self.str())
        if tag == ITEM_INSTR:
            return self.instr()
        raise self.fail(f"unknown stage item tag {tag}")

    def stage(self) -> Stage:
        mem = lambda: MemDecl(self.str(), self.dtype(), self.svarint())  # noqa: E731
        return Stage(self.str(), self.seq(self.affine), self.seq(self.svarint),
                     self.seq(lambda: RegDecl(self.str(), self.dtype())), self.seq(mem), self.seq(mem),
                     self.seq(lambda: Init(self.str(), self.svarint(), self.value())), self.seq(self.item))


def decode(data: bytes) -> Program:
    """The program encoded in `data`; ISAError saying what is wrong with anything else."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ISAError(f"decode expects bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) < _HEADER_MIN:
        raise ISAError(f"not a Hologram program: {len(data)} bytes is shorter than any encoding")
    if data[:4] != MAGIC:
        raise ISAError(f"not a Hologram program: bad magic {data[:4]!r} (expected {MAGIC!r})")
    if data[4] not in FORMAT_VERSIONS:
        raise ISAError(f"unsupported encoding format version {data[4]}; this Hologram reads versions "
                       f"{', '.join(map(str, FORMAT_VERSIONS))}"
                       + (" (written by a newer Hologram?)" if data[4] > FORMAT_VERSION else ""))
    body = len(data) - 4
    if struct.unpack("<I", data[body:])[0] != zlib.crc32(data[:body]):
        raise ISAError("corrupt program encoding: checksum mismatch (the data was truncated or altered)")
    r = _Reader(data, 5, body)
    isa = r.svarint()
    if isa not in SUPPORTED_ISA_VERSIONS:
        raise ISAError(f"unsupported ISA version {isa}; this Hologram runs ISA version(s) "
                       f"{', '.join(map(str, SUPPORTED_ISA_VERSIONS))}")
    length = r.uvarint()
    if length != body - r.pos:
        raise r.fail(f"payload length {length} disagrees with the {body - r.pos} bytes present")
    try:
        r.strings = list(r.seq(lambda: r.take(r.uvarint()).decode("utf-8", "surrogatepass")))
    except UnicodeDecodeError as e:
        raise r.fail(f"a name is not valid UTF-8 ({e.reason})") from None
    name = r.str()
    symbols = r.seq(r.str)
    flags = r.uvarint() if data[4] >= 2 else 0
    if flags & ~_PROGRAM_FLAGS_ALL:
        raise r.fail(f"unknown program flags 0x{flags & ~_PROGRAM_FLAGS_ALL:x}")
    if data[4] == 2 and not flags:
        raise r.fail("format 2 with no program flags (a program without flags is written in format 1)")
    params = r.seq(r.param)
    temps = r.seq(r.buffer)
    sites = r.seq(r.site) if data[4] >= 3 else ()
    prog = built_well_typed(Program(name, params, temps, symbols, r.seq(r.stage), isa,
                                    bool(flags & PROGRAM_REASSOCIATE), sites))
    if r.pos != body:
        raise r.fail(f"{body - r.pos} unexpected bytes after the program")
    if encode(prog) != data:  # one program, one encoding: hashes of equal programs agree
        raise ISAError("corrupt program encoding: valid structure but not in canonical form")
    _remember(prog, hashlib.sha256(data).hexdigest())
    return prog
