"""ELF64 relocatable objects, read and checked before anything links them.

cpu_llvm links object code itself (loader.py) and checks shipped code before it uses it
(`cpu.object_problem`, `hologram bundle verify`); both read the object here. A linker
follows offsets, sizes, indexes and alignments blindly (MCJIT asserts and takes the
process down, a symbol outside its section becomes a jump into unmapped memory, a
zero-filled section's size becomes an allocation), so `read` refuses, with `Malformed`,
any object in which one of them points where it must not:

- the header: 64-bit, little-endian, ELF version 1, a relocatable object; the section
  table inside the file, of 64-byte entries, section 0 the null section, fewer than
  0xFF00 sections (no extended numbering), the section names in a string table;
- every section with bytes in the file lies inside it, and no two of them, the ELF
  header or the section table share a byte; every alignment is 0 or a power of two up
  to `MAX_ALIGNMENT`; zero-filled (NOBITS) sections hold `MAX_ZERO_FILL` bytes in all
  (the file's size bounds the rest); an executable section has its bytes in the file;
- every string table ends in NUL, so every name in it ends;
- exactly one symbol table, of 24-byte entries, its names in a string table; every
  symbol's name inside that table, and every symbol defined in a section inside it:
  the section index in range (or undefined, absolute, common), value + size within the
  section's size;
- for x86-64, every relocation table is of RELA form (the psABI's only one), of 24-byte
  entries, against the symbol table, for a section with bytes; every relocation names a
  symbol of the table, is of a kind a relocatable x86-64 object uses (so its width is
  known), and patches bytes inside its section.

What is read is then certain to stay inside the file and inside each section: the
loader's own limits (relocation kinds it does not apply, thread-local symbols, other
machines) are `loader.Unsupported`, decided after this check.
"""

from __future__ import annotations

import struct
from typing import Iterable

MAX_ALIGNMENT = 4096  # bytes: a page, what an anonymous mapping's start guarantees
MAX_ZERO_FILL = 64 << 20  # bytes of zero-filled sections in one object, in all

EM_X86_64 = 62
SHT_NULL, SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOBITS, SHT_REL = 0, 1, 2, 3, 4, 8, 9
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 0x1, 0x2, 0x4
SHN_UNDEF, SHN_LORESERVE, SHN_ABS, SHN_COMMON = 0, 0xFF00, 0xFFF1, 0xFFF2
STT_FUNC, STT_SECTION, STT_TLS = 2, 3, 6
# x86-64 relocation kind -> bytes it patches, for the kinds a relocatable object may hold
# (the psABI's table, less the kinds only a dynamic linker sees)
X86_64_WIDTHS = {0: 0, 1: 8, 2: 4, 3: 4, 4: 4, 9: 4, 10: 4, 11: 4, 12: 2, 13: 2, 14: 1, 15: 1, 16: 8, 17: 8,
                 18: 8, 19: 4, 20: 4, 21: 4, 22: 4, 23: 4, 24: 8, 25: 8, 26: 4, 27: 8, 28: 8, 29: 8, 30: 8,
                 31: 8, 32: 4, 33: 8, 34: 4, 35: 0, 41: 4, 42: 4}

_SECTION = struct.Struct("<IIQQQQIIQQ")
_SYMBOL = struct.Struct("<IBBHQQ")
_RELA = struct.Struct("<QQq")


class Malformed(RuntimeError):
    """The object code is not well formed; nothing may link it."""

    def __init__(self, what: str):
        super().__init__(f"malformed object code: {what}")


class Section:
    """One section header; `name` is read from the section-name table."""

    __slots__ = ("index", "name", "type", "flags", "offset", "size", "link", "info", "align", "entsize")

    def __init__(self, index: int, fields: tuple[int, ...]):
        self.index = index
        (self.name, self.type, self.flags, _, self.offset, self.size, self.link, self.info, self.align,
         self.entsize) = fields

    @property
    def in_file(self) -> bool:
        """Whether its bytes are in the file (not the null section, not zero-filled)."""
        return self.type not in (SHT_NULL, SHT_NOBITS)


class Symbol:
    """One symbol: `info` holds its binding (high nibble) and type (low nibble)."""

    __slots__ = ("name", "info", "shndx", "value", "size")

    def __init__(self, name: str, info: int, shndx: int, value: int, size: int):
        self.name, self.info, self.shndx, self.value, self.size = name, info, shndx, value, size


class Relocation:
    """One RELA entry: patch `width` bytes at `offset` of section `target`."""

    __slots__ = ("target", "offset", "kind", "symbol", "addend")

    def __init__(self, target: int, offset: int, kind: int, symbol: int, addend: int):
        self.target, self.offset, self.kind, self.symbol, self.addend = target, offset, kind, symbol, addend


class Object:
    """A checked object: `relocations` only for x86-64, whose relocation kinds are known
    here (None for another machine)."""

    __slots__ = ("machine", "sections", "symbols", "relocations")

    def __init__(self, machine: int, sections: list[Section], symbols: list[Symbol],
                 relocations: list[Relocation] | None):
        self.machine, self.sections, self.symbols, self.relocations = machine, sections, symbols, relocations


def is_elf64(obj: bytes) -> bool:
    """Whether `obj` says it is a 64-bit little-endian ELF file (the form `read` reads)."""
    return bytes(obj[:6]) == b"\x7fELF\x02\x01"


def read(obj: bytes) -> Object:
    """`obj` read and checked (see the module docstring); Malformed when it is not well formed."""
    obj = bytes(obj)
    try:
        machine, sections = _header(obj)
        symbols = _symbols(obj, sections)
        relocations = _relocations(obj, sections, len(symbols)) if machine == EM_X86_64 else None
    except struct.error as e:  # a read past the end that the checks above should have caught
        raise Malformed(str(e)) from None
    return Object(machine, sections, symbols, relocations)


def _header(obj: bytes) -> tuple[int, list[Section]]:
    if len(obj) < 64 or not is_elf64(obj) or obj[6] != 1:
        raise Malformed("not a 64-bit little-endian ELF file")
    kind, machine, version = struct.unpack_from("<HHI", obj, 16)
    if kind != 1 or version != 1:
        raise Malformed(f"not a relocatable object (type {kind}, version {version})")
    (shoff,) = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", obj, 0x3A)
    if shentsize != _SECTION.size:
        raise Malformed(f"section headers of {shentsize} bytes (ELF64's are {_SECTION.size})")
    if not 0 < shnum < SHN_LORESERVE:
        raise Malformed(f"{shnum} sections (extended section numbering is not read)")
    table_end = shoff + shnum * shentsize
    if table_end > len(obj):
        raise Malformed(f"its section table [{shoff}, {table_end}) lies outside the file of {len(obj)} bytes")
    sections = [Section(i, _SECTION.unpack_from(obj, shoff + i * shentsize)) for i in range(shnum)]
    if sections[0].type != SHT_NULL:
        raise Malformed("section 0 is not the null section")
    spans = [(0, 64, "the ELF header"), (shoff, table_end, "the section table")]
    zero_fill = 0
    for s in sections[1:]:
        if s.align > MAX_ALIGNMENT or s.align & (s.align - 1):
            raise Malformed(f"section {s.index} asks for alignment {s.align}; expected a power of two up to "
                            f"{MAX_ALIGNMENT}")
        if s.type == SHT_NOBITS:
            zero_fill += s.size
            if zero_fill > MAX_ZERO_FILL:
                raise Malformed(f"its zero-filled sections hold more than {MAX_ZERO_FILL} bytes (section {s.index}: "
                                f"{s.size})")
        elif s.in_file and s.size:
            if s.offset + s.size > len(obj):
                raise Malformed(f"section {s.index} [{s.offset}, {s.offset + s.size}) lies outside the file of "
                                f"{len(obj)} bytes")
            spans.append((s.offset, s.offset + s.size, f"section {s.index}"))
        if s.flags & SHF_EXECINSTR and s.type != SHT_PROGBITS:
            raise Malformed(f"section {s.index} is executable but of type {s.type}, not code from the file")
        if s.type == SHT_STRTAB and (s.size == 0 or obj[s.offset + s.size - 1] != 0):
            raise Malformed(f"string table {s.index} does not end in NUL")
    spans.sort()
    for (_, end, first), (start, _, second) in zip(spans, spans[1:]):
        if start < end:
            raise Malformed(f"{first} and {second} share bytes")
    names = sections[shstrndx] if shstrndx != SHN_UNDEF and shstrndx < shnum else None
    if shstrndx != SHN_UNDEF and (names is None or names.type != SHT_STRTAB):
        raise Malformed(f"its section names are in section {shstrndx}, which is no string table")
    for s in sections:
        s.name = _string(obj, names, s.name, f"section {s.index}'s name") if names is not None else ""
    return machine, sections


def _string(obj: bytes, table: Section, at: int, what: str) -> str:
    """The NUL-terminated string at `at` of string `table` (which ends in NUL: checked)."""
    if at >= table.size:
        raise Malformed(f"{what} lies outside its string table (offset {at} of {table.size})")
    start = table.offset + at
    return obj[start:obj.index(b"\0", start)].decode("utf-8", "replace")


def _symbols(obj: bytes, sections: list[Section]) -> list[Symbol]:
    tables = [s for s in sections if s.type == SHT_SYMTAB]
    if len(tables) != 1:
        raise Malformed(f"{len(tables)} symbol tables; expected one")
    table = tables[0]
    if table.entsize != _SYMBOL.size or table.size % _SYMBOL.size:
        raise Malformed(f"symbol table {table.index}: {table.size} bytes of {table.entsize}-byte entries (ELF64's "
                        f"are {_SYMBOL.size})")
    if table.link >= len(sections) or sections[table.link].type != SHT_STRTAB:
        raise Malformed(f"symbol table {table.index} names section {table.link} for its names, which is no string "
                        f"table")
    count = table.size // _SYMBOL.size
    if table.info > count:
        raise Malformed(f"symbol table {table.index} says {table.info} of its {count} symbols are local")
    strings = sections[table.link]
    out = []
    for k, at in enumerate(range(table.offset, table.offset + table.size, _SYMBOL.size)):
        st_name, info, _, shndx, value, size = _SYMBOL.unpack_from(obj, at)
        name = _string(obj, strings, st_name, f"symbol {k}'s name")
        if SHN_UNDEF < shndx < SHN_LORESERVE:
            if shndx >= len(sections) or sections[shndx].type == SHT_NULL:
                raise Malformed(f"symbol {name!r} (entry {k}) is defined in section {shndx}, which does not exist")
            if value + size > sections[shndx].size:
                raise Malformed(f"symbol {name!r} (entry {k}) [{value}, {value + size}) lies outside its "
                                f"section {shndx} of {sections[shndx].size} bytes")
        elif shndx not in (SHN_UNDEF, SHN_ABS, SHN_COMMON):
            raise Malformed(f"symbol {name!r} (entry {k}) has the reserved section index {shndx:#x}")
        out.append(Symbol(name, info, shndx, value, size))
    return out


def _relocations(obj: bytes, sections: list[Section], nsymbols: int) -> list[Relocation]:
    symtab = next(s.index for s in sections if s.type == SHT_SYMTAB)
    out = []
    for table in sections:
        if table.type == SHT_REL:
            raise Malformed(f"section {table.index} holds REL relocations (x86-64 uses RELA only)")
        if table.type != SHT_RELA:
            continue
        if table.entsize != _RELA.size or table.size % _RELA.size:
            raise Malformed(f"relocation table {table.index}: {table.size} bytes of {table.entsize}-byte entries "
                            f"(ELF64's are {_RELA.size})")
        if table.link != symtab:
            raise Malformed(f"relocation table {table.index} names section {table.link} as its symbol table, not "
                            f"{symtab}")
        if not 0 < table.info < len(sections) or not sections[table.info].in_file:
            raise Malformed(f"relocation table {table.index} is for section {table.info}, which has no bytes to "
                            f"patch")
        target = sections[table.info]
        for at in range(table.offset, table.offset + table.size, _RELA.size):
            offset, info, addend = _RELA.unpack_from(obj, at)
            symbol, kind = info >> 32, info & 0xFFFFFFFF
            width = X86_64_WIDTHS.get(kind)
            if width is None:
                raise Malformed(f"a relocation of kind {kind}, which is not one of a relocatable x86-64 object's")
            if symbol >= nsymbols:
                raise Malformed(f"a relocation names symbol {symbol}, of {nsymbols}")
            if offset + width > target.size:
                raise Malformed(f"a relocation outside its section: {width} bytes at offset {offset} of section "
                                f"{target.index} ({target.name or 'unnamed'}, {target.size} bytes)")
            out.append(Relocation(target.index, offset, kind, symbol, addend))
    return out


def functions(checked: Object, names: Iterable[str]) -> dict[str, tuple[int, int]]:
    """(section, offset) of each of `names`: a global or weak function symbol defined
    once, in an executable section, with code at its address. RuntimeError when one is
    not defined, Malformed when one is not such a function."""
    sections, defined = checked.sections, {}
    for s in checked.symbols:
        if s.info >> 4 != 0 and s.shndx != SHN_UNDEF:  # global and weak definitions
            if s.name in defined:
                raise Malformed(f"symbol {s.name!r} is defined twice")
            defined[s.name] = s
    out = {}
    for name in names:
        s = defined.get(name)
        if s is None:
            raise RuntimeError(f"symbol {name!r} is not defined by the object code")
        if s.info & 0xF != STT_FUNC or not SHN_UNDEF < s.shndx < SHN_LORESERVE \
                or not sections[s.shndx].flags & SHF_EXECINSTR or s.value >= sections[s.shndx].size:
            raise Malformed(f"symbol {name!r} is not a function in the object's code")
        out[name] = (s.shndx, s.value)
    return out
