"""The object fuzzer's mutator: real kernels' object code, damaged one structure at a time.

A trusted bundle ships object code that cpu_llvm links with its own loader (its
`elf.py` checks the form, `loader.py` links), which promises to refuse whatever is
malformed before anything is mapped, and never to hand an object it refused to MCJIT
(docs/bundles.md, "Native code"). The seeds are the objects cpu_llvm builds for a few
kernels (`seed_objects`: softmax, a sum, an integer kernel, gemm) for a CPU level this
machine runs; a mutant applies one to three mutators, each editing one structure of the
ELF64 x86-64 relocatable object through its own small field writer (not the checker's
reader, so the two cannot share a misreading):

| structure | mutators |
|---|---|
| ELF header | section table moved past the end or onto the header, its entry size changed, its count grown or shrunk, the section-name table's index out of range; the file truncated |
| section header | offset or size past the end of the file, the bytes of another section or of the section table overlapped, alignment not a power of two or past the limit, a type or flag changed (executable bytes that are zero-filled, code that is not executable), link and info out of range |
| zero-filled section | a NOBITS section added past the size limit (up to 2^64 - 1) |
| symbol | value or size past its section, section index out of range or reserved, name past its string table |
| relocation | offset past its section, symbol index past the table, a kind the loader does not link |
| string table | its last byte no longer NUL |
| import | a function the object imports renamed to one no process exports |
| issue 21 | the reproducers `ISSUE_21` names, as they were reported |

Each mutator says whether its damage must be refused (`refuse`) or is harmless (a larger
alignment within the limit, a zero-filled section within it, an unused section added):
the oracle (fuzz_object_oracle.py) holds a refused mutant to "refused", and a harmless
one to "refused, or loaded and computing what the interpreter computes". A mutator
never moves code or data within bounds (a symbol to another instruction, a relocation to
another field): that changes what trusted code means, which no form check can see.
"""

from __future__ import annotations

import functools
import struct
from typing import Any, Callable

import attrs
import numpy as np

from hologram.testing.fuzz_common import pick
from hologram.testing.fuzz_object_oracle import ObjectCase

Rng = np.random.Generator

# ELF64 layouts: the header's section-table fields, a section header, a symbol, a RELA entry
E_SHOFF, E_SHENTSIZE, E_SHNUM, E_SHSTRNDX = 0x28, 0x3A, 0x3C, 0x3E
SH_FIELDS = {"name": (0, "<I"), "type": (4, "<I"), "flags": (8, "<Q"), "offset": (24, "<Q"), "size": (32, "<Q"),
             "link": (40, "<I"), "info": (44, "<I"), "align": (48, "<Q"), "entsize": (56, "<Q")}
ST_FIELDS = {"name": (0, "<I"), "info": (4, "<B"), "shndx": (6, "<H"), "value": (8, "<Q"), "size": (16, "<Q")}
R_FIELDS = {"offset": (0, "<Q"), "info": (8, "<Q")}
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOBITS = 1, 2, 3, 4, 8
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 0x1, 0x2, 0x4
# what the loader promises (hologram_cpu_llvm.elf): restated, so a changed limit fails a test
MAX_ALIGNMENT = 4096
MAX_ZERO_FILL = 64 << 20
_WIDTH = {1: 8, 24: 8}  # relocation kind -> bytes written (the others the loader links: 4)
_UNLINKED_KINDS = (0, 3, 5, 10, 11, 16, 37, 43, 200, 0xFFFFFFFF)  # kinds the loader does not link


@attrs.frozen
class Section:
    index: int
    header: int  # where its header is in the file
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    align: int
    entsize: int


def _get(obj: bytes, at: int, fmt: str) -> int:
    return struct.unpack_from(fmt, obj, at)[0]


def _put(obj: bytes, at: int, fmt: str, value: int) -> bytes:
    out = bytearray(obj)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


def sections(obj: bytes) -> list[Section]:
    """The section headers of an intact object."""
    shoff, shnum = _get(obj, E_SHOFF, "<Q"), _get(obj, E_SHNUM, "<H")
    out = []
    for i in range(shnum):
        at = shoff + 64 * i
        fields = {k: _get(obj, at + off, fmt) for k, (off, fmt) in SH_FIELDS.items() if k != "name"}
        out.append(Section(i, at, **fields))
    return out


def section_named(obj: bytes, name: str) -> Section:
    """The section called `name` (`.text`, `.symtab`, ...)."""
    names = sections(obj)[_get(obj, E_SHSTRNDX, "<H")]
    for s in sections(obj):
        start = names.offset + _get(obj, s.header, "<I")
        if obj[start:obj.index(b"\0", start)].decode() == name:
            return s
    raise KeyError(name)


def set_section(obj: bytes, section: int, field: str, value: int) -> bytes:
    off, fmt = SH_FIELDS[field]
    return _put(obj, sections(obj)[section].header + off, fmt, value)


def symbols(obj: bytes) -> list[tuple[int, str, int, int, int, int]]:
    """(index, name, section index, value, size, where its entry is) per symbol."""
    table = next(s for s in sections(obj) if s.type == SHT_SYMTAB)
    strtab = sections(obj)[table.link].offset
    out = []
    for k in range(table.size // 24):
        at = table.offset + 24 * k
        start = strtab + _get(obj, at, "<I")
        name = obj[start:obj.index(b"\0", start)].decode()
        out.append((k, name, _get(obj, at + 6, "<H"), _get(obj, at + 8, "<Q"), _get(obj, at + 16, "<Q"), at))
    return out


def set_symbol(obj: bytes, name_or_index: str | int, field: str, value: int) -> bytes:
    found = next(s for s in symbols(obj) if name_or_index in (s[0], s[1]))
    off, fmt = ST_FIELDS[field]
    return _put(obj, found[5] + off, fmt, value)


def relocations(obj: bytes) -> list[tuple[Section, int, int, int, int]]:
    """(its table, where the entry is, offset, kind, symbol index) per RELA entry."""
    out = []
    for table in sections(obj):
        if table.type == SHT_RELA:
            for at in range(table.offset, table.offset + table.size, 24):
                info = _get(obj, at + 8, "<Q")
                out.append((table, at, _get(obj, at, "<Q"), info & 0xFFFFFFFF, info >> 32))
    return out


def add_section(obj: bytes, type_: int, flags: int, size: int, align: int = 8) -> bytes:
    """`obj` with one more section header (no name, no bytes in the file): the section
    table is copied, grown, to the end of the file."""
    shoff, shnum = _get(obj, E_SHOFF, "<Q"), _get(obj, E_SHNUM, "<H")
    table = obj[shoff:shoff + 64 * shnum]
    header = struct.pack("<IIQQQQIIQQ", 0, type_, flags, 0, 0, size, 0, 0, align, 0)
    start = -(-len(obj) // 8) * 8
    out = obj + bytes(start - len(obj)) + table + header
    return _put(_put(out, E_SHOFF, "<Q", start), E_SHNUM, "<H", shnum + 1)


# ------------------------------------------------------------- the reproducers' mutations
def misplace_relocation(obj: bytes, section: str = ".text", past: int = 1) -> bytes:
    """The first relocation of `section` moved `past` bytes beyond the section's end."""
    target = section_named(obj, section).index
    table, at, _, kind, _ = next(r for r in relocations(obj) if r[0].info == target)
    return _put(obj, at, "<Q", sections(obj)[target].size - _WIDTH.get(kind, 4) + past)


def set_alignment(obj: bytes, section: str, align: int) -> bytes:
    return set_section(obj, section_named(obj, section).index, "align", align)


def move_symbol(obj: bytes, name: str, value: int) -> bytes:
    return set_symbol(obj, name, "value", value)


def add_zero_fill(obj: bytes, size: int) -> bytes:
    """A writable zero-filled (NOBITS) section of `size` bytes added."""
    return add_section(obj, SHT_NOBITS, SHF_ALLOC | SHF_WRITE, size)


def first_function(obj: bytes) -> str:
    """The first global symbol of `.text` (a stage, in cpu_llvm's objects)."""
    text = section_named(obj, ".text").index
    return next(name for _, name, shndx, _, _, at in symbols(obj) if shndx == text and _get(obj, at + 4, "<B") >> 4)


# Issue 21's reproducers, which took the process down before the loader checked objects:
# a relocation outside .text with .text asking for alignment 8192 (MCJIT's assertion,
# exit -6), a stage symbol at 2^40 (a call into unmapped memory), zero-filled sections of
# 2 GiB (6.2 GB of memory, 11 s) and 2^44 bytes (a raw OSError).
ISSUE_21: dict[str, Callable[[bytes], bytes]] = {
    "relocation-outside-and-alignment-8192":
        lambda o: set_alignment(misplace_relocation(o, ".text", 4096), ".text", 8192),
    "stage-symbol-at-2**40": lambda o: move_symbol(o, first_function(o), 1 << 40),
    "zero-fill-2GiB": lambda o: add_zero_fill(o, 2 << 30),
    "zero-fill-2**44": lambda o: add_zero_fill(o, 1 << 44),
}


# ------------------------------------------------------------------ random mutators
# Each takes (rng, obj) and returns (the mutant, what was done, whether it must be refused).
Mutator = Callable[[Rng, bytes], tuple[bytes, str, bool]]


def _big(rng: Rng, low: int) -> int:
    """A value from `low` up: just past it mostly, sometimes far (to 2^64 - 1)."""
    return pick(rng, [low, low + 1, low + int(rng.integers(1, 4096)), 1 << 32, 1 << 40, (1 << 63) - 1,
                      (1 << 64) - 1, max(low, int(rng.integers(low, 1 << 62, dtype=np.uint64)))])


def _some_section(rng: Rng, obj: bytes, keep: Callable[[Section], bool]) -> Section:
    return pick(rng, [s for s in sections(obj) if keep(s)])


def m_section_outside(rng: Rng, obj: bytes) -> tuple[bytes, str, bool]:
    s = _some_section(rng, obj, lambda s: s.type not in (0, SHT_NOBITS) and s.size)
    field = pick(rng, ["offset", "size"])
    value = _big(rng, len(obj) - (s.size if field == "offset" else s.offset) + 1)
    return set_section(obj, s.index, field, value), f"section {s.index}'s {field} {value}: past the file", True


def m_section_overlap(rng: Rng, obj: bytes) -> tuple[bytes, str, bool]:
    s = _some_section(rng, obj, lambda s: s.type not in (0, SHT_NOBITS) and s.size)
    others = [o for o in sections(obj) if o.index != s.index and o.type not in (0, SHT_NOBITS) and o.size]
    shoff, shnum = _get(obj, E_SHOFF, "<Q"), _get(obj, E_SHNUM, "<H")
    spans = [(o.offset, o.size) for o in others] + [(0, 64), (shoff, 64 * shnum)]
    start, size = pick(rng, spans)
    at = max(0, min(start + int(rng.integers(size)) - int(rng.integers(s.size)), len(obj) - s.size))
    if not (at < start + size and start < at + s.size):
        at = start  # the clamp moved it clear: onto the span's start
    return set_section(obj, s.index, "offset", at), f"section {s.index} moved to {at}, onto [{start}, +{size})", True


def m_alignment(rng: Rng, obj: bytes) -> tuple[bytes, str, bool]:
    s = _some_section(rng, obj, lambda s: s.index)
    bad = rng.random() < 0.5 or s.align > MAX_ALIGNMENT or s.align & (s.align - 1)
    if bad:
        value = pick(rng, [3, 6, 24, 4097, MAX_ALIGNMENT * 2, 1 << 20, 1 << 63, (1 << 64) - 1,
                           int(rng.integers(3, 1 << 16)) | 1 | (1 << 17)])
    else:  # larger, still a power of two within the limit: the loader must lay it out so
        value = max(s.align, 1) << int(rng.integers(0, 13 - max(s.align, 1).bit_length() + 1))
        value = min(value, MAX_ALIGNMENT)
    return set_section(obj, s.index, "align", value), f"section {s.index}'s alignment {value}", bad


def m_zero_fill(rng: Rng, obj: bytes) -> tuple[bytes, str, bool]:
    bad = rng.random() < 0.5
    size = _big(rng, MAX_ZERO_FILL + 1) if bad else pick(rng, [0, 1, 4096, int(rng.integers(1, 1 << 20))])
    return add_zero_fill(obj, size), f"a zero-filled section of {size} bytes added", bad


def m_section_kind(rng: Rng, obj: bytes) -> tuple[bytes, str, bool]:
    text = section_named(obj, ".text")
    what = pick(rng, ["nobits-code", "not-executable", "symtab-link", "rela-link", "rela-info", "symtab-entsize",
                      "rela-entsize", "second-symtab"])
    rela = next(s for s in sections(obj) if s.type == SHT_RELA)
    table = next(s for s in sections(obj) if s.type == SHT_SYMTAB)
    shnum = _get(obj, E_SHNUM, "<H")
    if what == "nobits-code":
        return set_section(obj, text.index, "type", SHT_NOBITS), "the code made zero-filled", True
    if what == "not-executable":
        return set_section(obj, text.index, "flags", text.flags & ~SHF_EXECINSTR), "the code not executable", True
    if what == "symtab-link":  # to a section that is no string table, or past the table
        value = pick(rng, [text.index, shnum, 0xFFFF, 0xFFFFFFFF])
        return set_section(obj, table.index, "link", value), f"the symbol table's strings in section {value}", True
    if what in ("rela-link", "rela-info"):
        value = pick(rng, [shnum, shnum + 7, 0xFFFFFFFF] + ([0] if what == "rela-info" else [text.index]))
        field = what.split("-")[1]
        return set_section(obj, rela.index, field, value), f"section {rela.index}'s {field} {value}", True
    if what in ("symtab-entsize", "rela-entsize"):
        s = table if what == "symtab-entsize" else rela
        value = pick(rng, [0, 8, 16, 23, 25, 48, (1 << 64) - 1])
        return set_section(obj, s.index, "entsize", value), f"section {s.index}'s entry size {value}", True
    other = _some_section(rng, obj, lambda s: s.index and s.type not in (SHT_SYMTAB, SHT_NOBITS)
                          and s.index != table.link)
    return set_section(obj, other.index, "type", SHT_SYMTAB), f"section {other.index} made a second symbol table", \
        True


def m_header(rng: Rng, obj: bytes) -> tuple[bytes, str, bool]:
    shoff, shnum = _get(obj, E_SHOFF, "<Q"), _get(obj, E_SHNUM, "<H")
    what = pick(rng, ["shoff", "shoff-header", "shentsize", "shnum-more", "shnum-fewer", "shstrndx", "truncate"])
    if what == "shoff":
        value = _big(rng, len(obj) - 64 * shnum + 1)
        return _put(obj, E_SHOFF, "<Q", value), f"the section table at {value}: past the file", True
    if what == "shoff-header":
        value = int(rng.integers(0, 64))
        return _put(obj, E_SHOFF, "<Q", value), f"the section table at {value}: onto the ELF header", True
    if what == "shentsize":
        value = pick(rng, [0, 32, 63, 65, 128, 0xFFFF])
        return _put(obj, E_SHENTSIZE, "<H", value), f"the section table's entry size {value}", True
    if what == "shnum-more":
        value = shnum + int(rng.integers(1, 64)) if rng.random() < 0.7 else 0xFFFF
        return _put(obj, E_SHNUM, "<H", value), f"the section count {value} (was {shnum})", True
    if what == "shnum-fewer":  # the symbol table drops out
        value = int(rng.integers(0, next(s.index for s in sections(obj) if s.type == SHT_SYMTAB) + 1))
        return _put(obj, E_SHNUM, "<H", value), f"the section count {value} (was {shnum})", True
    if what == "shstrndx":
        value = pick(rng, [shnum, shnum + 1, 0xFFFF, section_named(obj, ".text").index])
        return _put(obj, E_SHSTRNDX, "<H", value), f"the section-name table's index {value}", True
    at = int(rng.integers(0, len(obj)))
    return obj[:at], f"truncated to {at} bytes (of {len(obj)})", True


def m_symbol(rng: Rng, obj: bytes) -> tuple[bytes, str, bool]:
    table = sections(obj)
    index, name, shndx, value, size, _ = pick(rng, [s for s in symbols(obj) if 0 < s[2] < len(table)])
    where = table[shndx].size
    what = pick(rng, ["value", "value", "size", "shndx", "name"])
    if what == "value":
        new = _big(rng, where - size + 1)
    elif what == "size":
        new = _big(rng, where - value + 1)
    elif what == "shndx":
        new = pick(rng, [len(table), len(table) + 3, 0xFF00, 0xFF1F, 0xFFFF, int(rng.integers(len(table), 0xFF00))])
    else:
        strtab = next(s for s in table if s.type == SHT_SYMTAB).link
        new = _big(rng, table[strtab].size) & 0xFFFFFFFF or table[strtab].size
    return set_symbol(obj, index, what, new), f"symbol {index} ({name!r}): {what} {new}", True


def m_relocation(rng: Rng, obj: bytes) -> tuple[bytes, str, bool]:
    table, at, offset, kind, sym = pick(rng, relocations(obj))
    target = sections(obj)[table.info]
    count = next(s for s in sections(obj) if s.type == SHT_SYMTAB).size // 24
    what = pick(rng, ["offset", "offset", "symbol", "kind"])
    if what == "offset":
        new = _big(rng, target.size - _WIDTH.get(kind, 4) + 1)
        return _put(obj, at, "<Q", new), f"a relocation of section {target.index} at offset {new}", True
    if what == "symbol":
        new = pick(rng, [count, count + 1, 0xFFFFFFFF, int(rng.integers(count, 1 << 32))])
        return _put(obj, at + 8, "<Q", new << 32 | kind), f"a relocation against symbol {new} (of {count})", True
    new = pick(rng, _UNLINKED_KINDS)
    return _put(obj, at + 8, "<Q", sym << 32 | new), f"a relocation of kind {new} (was {kind})", True


def m_string_table(rng: Rng, obj: bytes) -> tuple[bytes, str, bool]:
    s = _some_section(rng, obj, lambda s: s.type == SHT_STRTAB and s.size)
    end = s.offset + s.size - 1
    value = pick(rng, [ord("A"), 0xFF, int(rng.integers(1, 256))])
    return _put(obj, end, "<B", value), f"string table {s.index} ends in byte {value}, not NUL", True


# same-length names no process exports, some of them attributes of ctypes' CDLL, which an
# attribute look-up (rather than dlsym) would have found
_NOT_EXPORTED = ("_handle", "_name", "__init__", "_FuncPtr", "__class__", "__dict__", "__doc__", "__module__")


def m_import(rng: Rng, obj: bytes) -> tuple[bytes, str, bool]:
    """A function the object imports renamed in place to one no process exports (a
    name sharing its bytes may change too: refused either way)."""
    index, name, _, _, _, entry = pick(rng, [s for s in symbols(obj) if s[2] == 0 and s[1]])
    new = pick(rng, [n for n in _NOT_EXPORTED if len(n) == len(name)] + ["_" * len(name), "\x7f" + name[1:]])
    table = next(s for s in sections(obj) if s.type == SHT_SYMTAB)
    at = sections(obj)[table.link].offset + _get(obj, entry, "<I")
    return obj[:at] + new.encode("latin-1") + obj[at + len(name):], f"import {name!r} renamed {new!r}", True


def m_issue_21(rng: Rng, obj: bytes) -> tuple[bytes, str, bool]:
    name = pick(rng, list(ISSUE_21))
    return ISSUE_21[name](obj), f"issue 21's reproducer {name}", True


def m_unused_section(rng: Rng, obj: bytes) -> tuple[bytes, str, bool]:
    """A section no symbol or relocation uses: harmless."""
    type_ = pick(rng, [SHT_PROGBITS, SHT_NOBITS, 0x70000001, 0x6FFFFFF5])
    return add_section(obj, type_, 0, 0, pick(rng, [0, 1, 8])), f"an empty section of type {type_:#x} added", False


MUTATORS: tuple[Mutator, ...] = (m_section_outside, m_section_overlap, m_alignment, m_zero_fill, m_section_kind,
                                 m_header, m_symbol, m_relocation, m_string_table, m_import, m_issue_21,
                                 m_unused_section)


def mutate(rng: Rng, obj: bytes) -> tuple[bytes, tuple[str, ...], bool]:
    """Up to three mutators applied to `obj`: (the mutant, what each did, whether it must
    be refused). The chain ends at the first damage that must be refused, so no later
    mutator can repair it, and each acts on an object still well formed."""
    done: list[str] = []
    for _ in range(int(rng.integers(1, 4))):
        mutator = pick(rng, MUTATORS)
        obj, what, bad = mutator(rng, obj)
        done.append(f"{mutator.__name__[2:]}: {what}")
        if bad:
            return obj, tuple(done), True
    return obj, tuple(done), False


def mutant(rng: Rng, seeds: tuple[tuple[str, bytes, dict[str, Any]], ...]) -> ObjectCase:
    """One case: a seed's object, mutated."""
    name, program, native = pick(rng, seeds)
    obj, done, refuse = mutate(rng, native["object"])
    return ObjectCase(name, done, int(rng.integers(1 << 31)), program, {**native, "object": obj}, refuse)


# ------------------------------------------------------------------------ seeds
# Kernels whose object code is the seeds: exponentials and a float reduction (softmax),
# a scalar result (total), integer tables (hist), a tiled contraction with a scalar (gemm).
SEED_DOCUMENT = '''
[[kernels]]
name = "softmax"
version = "1.0.0"
inputs = { x = "f32[n]" }
outputs = { y = "f32[n]" }
body = """
m = max(x)
e = exp(x - m)
y = e / sum(e)
"""

[[kernels]]
name = "total"
version = "1.0.0"
inputs = { x = "f64[n]" }
outputs = { t = "f64" }
body = "t = sum(x * x)"

[[kernels]]
name = "hist"
version = "1.0.0"
inputs = { data = "u8[n]" }
outputs = { hist = "i64[96]" }
body = "hist = resonance(atlas_class(data), 1)"

[[kernels]]
name = "gemm"
version = "1.0.0"
inputs = { alpha = "f32", a = "f32[m, k]", b = "f32[k, n]" }
outputs = { c = "f32[m, n]" }
body = "c[i, j] = alpha * sum(a[i, p] * b[p, j], p)"
'''


def native_target() -> str | None:
    """A CPU level of this architecture that this CPU runs (what a bundle built here for
    `--native auto` ships and this machine uses), or None where cpu_llvm ships no code."""
    from hologram.registry.lookups import backends

    backend = backends().get("cpu_llvm")
    if backend is None:
        return None
    runs = [t for t in backend.native_targets() if t != "host" and backend.runs_native(t)]
    return runs[-1] if runs else None


@functools.cache
def seed_objects() -> tuple[tuple[str, bytes, dict[str, Any]], ...]:
    """(kernel, its encoded program, what cpu_llvm's `compile_native` made of it) per
    kernel of SEED_DOCUMENT; empty where cpu_llvm builds no object code this CPU runs."""
    target = native_target()
    if target is None:
        return ()
    import hologram as hg
    from hologram.isa.encoding import encode
    from hologram.testing.run import fresh_backend

    backend = fresh_backend("cpu_llvm", cache_dir=False)
    return tuple((name, encode(k.program), backend.compile_native(k.program, target))
                 for name, k in sorted(hg.compile_all(SEED_DOCUMENT).items()))
