"""Object code into memory, ready to call: a small static linker for x86-64 ELF.

What the code generator's objects need is little: their sections (text and constant
pools) laid out in one mapping, the relocations LLVM emits for position-independent
code applied (PC32 into the constant pools, PLT32 calls to a few libc/libm functions
such as memset and fma, a GOT slot for the runtime's cancel flag, cancel.SYMBOLS), and
the stage symbols' addresses. Doing that here, in ~1 ms of
Python, rather than in an MCJIT engine means a process that runs cached or shipped
object code never imports llvmlite.binding (~22 ms) nor builds a target machine: the
start-up a bundle promises (docs/bundles.md, "Start-up").

The layout: executable sections first, then (page-aligned) read-only ones, then
writable ones, each kept at its alignment; an external function gets a 14-byte stub
(`jmp *0(%rip)` followed by its address) beside the text, so a 32-bit call displacement
always reaches it; a GOT-relative reference gets an 8-byte slot among the read-only
data. The mapping is written while writable, then its pages are made read+execute,
read-only and read-write as the sections ask: never writable and executable at once.

Anything outside that (another architecture or object format, a relocation kind not
listed in `_KINDS`, a common or TLS symbol, a symbol this process does not export)
raises `Unsupported`, and the backend hands the object to MCJIT instead (jit.py),
which handles all of LLVM's output. Object code that is malformed (sections or symbols
outside the file) raises RuntimeError before anything is mapped.
"""

from __future__ import annotations

import collections
import ctypes
import mmap
import struct
import sys
from typing import Any

from . import cancel, cpu

# Counters by event ("optimize", "emit" in jit.py, "load" here and there): a test-visible
# record of the work done, so tests can prove a warm start never ran LLVM's optimizer.
STATS: collections.Counter[str] = collections.Counter()

PAGE = mmap.PAGESIZE
_EXEC, _WRITE, _ALLOC = 0x4, 0x1, 0x2  # SHF_EXECINSTR, SHF_WRITE, SHF_ALLOC
_PROGBITS, _SYMTAB, _RELA, _NOBITS, _REL = 1, 2, 4, 8, 9
_UNDEF, _ABS, _COMMON = 0, 0xFFF1, 0xFFF2
_STT_SECTION, _STT_TLS = 3, 6
# relocation kind -> (width, pc-relative, via GOT slot, via stub when external)
_KINDS = {1: (8, False, False, False),   # R_X86_64_64        S + A
          2: (4, True, False, False),    # R_X86_64_PC32      S + A - P
          4: (4, True, False, True),     # R_X86_64_PLT32     L + A - P
          9: (4, True, True, False),     # R_X86_64_GOTPCREL  G + A - P
          24: (8, True, False, False),   # R_X86_64_PC64      S + A - P
          41: (4, True, True, False),    # R_X86_64_GOTPCRELX
          42: (4, True, True, False)}    # R_X86_64_REX_GOTPCRELX
_STUB = b"\xff\x25\x00\x00\x00\x00"  # jmp *0(%rip), then the 8-byte target


class Unsupported(Exception):
    """This loader cannot take the object (MCJIT can)."""


class Loaded:
    """Object code in memory. It owns the machine code: keep it alive as long as any
    address from `addresses` may be called (dropping it unmaps or frees the code)."""

    __slots__ = ("addresses", "_keep")

    def __init__(self, addresses: dict[str, int], keep: Any):
        self.addresses = addresses
        self._keep = keep  # the mapping, or the MCJIT engine

    def __repr__(self) -> str:
        return f"Loaded({len(self.addresses)} symbols)"


try:
    _PROCESS: ctypes.CDLL | None = ctypes.CDLL(None)  # the process's own symbols (dlopen(NULL))
except OSError:  # pragma: no cover - platforms without dlopen(NULL)
    _PROCESS = None


def process_symbol(name: str) -> int:
    """The address of `name` among the process's symbols (libc, libm), or 0."""
    if _PROCESS is None:
        return 0
    try:
        return ctypes.cast(getattr(_PROCESS, name), ctypes.c_void_p).value or 0
    except AttributeError:
        return 0


def supported() -> bool:
    """Whether this loader can run here: x86-64 Linux (ELF, System V ABI)."""
    return sys.platform.startswith("linux") and cpu.arch() == "x86_64" and _PROCESS is not None


# ------------------------------------------------------------------------- reading
def _sections(obj: bytes) -> list[tuple[int, ...]]:
    """The section headers: (name, type, flags, addr, offset, size, link, info, align, entsize)."""
    if obj[:4] != b"\x7fELF":
        raise Unsupported("not ELF")
    if obj[4:6] != b"\x02\x01":
        raise Unsupported("not 64-bit little-endian")
    kind, machine = struct.unpack_from("<HH", obj, 16)
    if kind != 1 or machine != 62:  # ET_REL, EM_X86_64
        raise Unsupported("not an x86-64 relocatable object")
    (shoff,) = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    if shentsize < 64 or shoff + shentsize * shnum > len(obj):
        raise RuntimeError("malformed object code: its section table lies outside the file")
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize) for i in range(shnum)]
    for i, s in enumerate(sections):
        if s[1] != _NOBITS and s[4] + s[5] > len(obj):
            raise RuntimeError(f"malformed object code: section {i} lies outside the file")
        if s[8] > PAGE or (s[8] & (s[8] - 1)):
            raise Unsupported(f"section {i} asks for alignment {s[8]}")
    return sections


def _symbols(obj: bytes, sections: list[tuple[int, ...]]) -> list[tuple[str, int, int, int]]:
    """The symbol table: (name, info, section index, value) per symbol."""
    tables = [s for s in sections if s[1] == _SYMTAB]
    if len(tables) != 1:
        raise RuntimeError("malformed object code: expected one symbol table")
    _, _, _, _, offset, size, link, _, _, entsize = tables[0]
    if entsize != 24 or link >= len(sections):
        raise RuntimeError("malformed object code: a symbol table of an unknown shape")
    strtab, strsize = sections[link][4], sections[link][5]
    out = []
    for at in range(offset, offset + size - size % 24, 24):
        st_name, info, _, shndx, value, _ = struct.unpack_from("<IBBHQQ", obj, at)
        if st_name >= strsize:
            raise RuntimeError("malformed object code: a symbol name outside the string table")
        end = obj.find(b"\0", strtab + st_name, strtab + strsize)
        if end < 0:
            raise RuntimeError("malformed object code: an unterminated symbol name")
        out.append((obj[strtab + st_name:end].decode("utf-8", "replace"), info, shndx, value))
    return out


# ------------------------------------------------------------------------- linking
def link(obj: bytes, wanted: list[str]) -> Loaded:
    """Lay out, relocate and map `obj`; Unsupported when it needs what this loader lacks,
    RuntimeError when it is malformed or does not define a symbol of `wanted`."""
    try:
        return _link(bytes(obj), wanted)
    except (struct.error, IndexError, ValueError, OverflowError) as e:
        raise RuntimeError(f"malformed object code: {e}") from None


def _link(obj: bytes, wanted: list[str]) -> Loaded:
    sections = _sections(obj)
    symbols = _symbols(obj, sections)
    relocations = [(i, s) for i, s in enumerate(sections) if s[1] in (_RELA, _REL)]
    if any(s[1] == _REL for _, s in relocations):
        raise Unsupported("REL relocations")
    loaded = [i for i, s in enumerate(sections) if s[2] & _ALLOC and s[5]]
    for i in loaded:
        if sections[i][1] not in (_PROGBITS, _NOBITS) and sections[i][2] & _EXEC:
            raise Unsupported(f"executable section {i} of type {sections[i][1]}")

    # every relocation, checked, and the stubs and GOT slots they need
    relocs = []
    stubs: dict[int, int] = {}  # symbol index -> stub number
    slots: dict[int, int] = {}  # symbol index -> GOT slot number
    for _, (_, _, _, _, offset, size, link_, target, _, entsize) in relocations:
        if target not in loaded:
            continue  # relocations of what is not loaded (debug sections)
        if entsize != 24 or link_ >= len(sections) or sections[link_][1] != _SYMTAB:
            raise RuntimeError("malformed object code: a relocation table of an unknown shape")
        for at in range(offset, offset + size - size % 24, 24):
            r_offset, r_info, addend = struct.unpack_from("<QQq", obj, at)
            sym, kind = r_info >> 32, r_info & 0xFFFFFFFF
            if kind not in _KINDS:
                raise Unsupported(f"relocation kind {kind}")
            if sym >= len(symbols):
                raise RuntimeError("malformed object code: a relocation names no symbol")
            width, _, got, stub = _KINDS[kind]
            if r_offset + width > sections[target][5]:
                raise RuntimeError("malformed object code: a relocation outside its section")
            if got:
                slots.setdefault(sym, len(slots))
            elif stub and symbols[sym][2] == _UNDEF:
                stubs.setdefault(sym, len(stubs))
            relocs.append((target, r_offset, kind, sym, addend))

    # layout: text and stubs, then read-only data and GOT slots, then writable data
    place: dict[int, int] = {}
    size = 0
    regions = []
    for region, flagged in (("rx", lambda f: f & _EXEC), ("r", lambda f: not f & (_EXEC | _WRITE)),
                            ("rw", lambda f: f & _WRITE and not f & _EXEC)):
        start = size = -(-size // PAGE) * PAGE
        for i in loaded:
            if flagged(sections[i][2]):
                align = max(sections[i][8], 1)
                size = -(-size // align) * align
                place[i] = size
                size += sections[i][5]
        if region == "rx":
            size = -(-size // 16) * 16
            stub_at, size = size, size + 16 * len(stubs)
        elif region == "r":
            size = -(-size // 8) * 8
            got_at, size = size, size + 8 * len(slots)
        regions.append((region, start, size))
    total = max(-(-size // PAGE) * PAGE, PAGE)

    memory = mmap.mmap(-1, total, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    anchor = ctypes.c_char.from_buffer(memory)  # pins the mapping; its address is the image base
    base = ctypes.addressof(anchor)
    try:
        image = bytearray(total)
        for i in loaded:
            if sections[i][1] == _PROGBITS:
                image[place[i]:place[i] + sections[i][5]] = obj[sections[i][4]:sections[i][4] + sections[i][5]]

        def address(sym: int) -> int:
            name, info, shndx, value = symbols[sym]
            if info & 0xF == _STT_TLS or shndx == _COMMON:
                raise Unsupported(f"symbol {name!r} is thread-local or common")
            if shndx == _UNDEF:
                found = cancel.SYMBOLS.get(name) or process_symbol(name)
                if not found:
                    raise Unsupported(f"symbol {name!r} is not in this process")
                return found
            if shndx == _ABS:
                return value
            if shndx not in place:
                raise Unsupported(f"symbol {name!r} lies in a section that is not loaded")
            return base + place[shndx] + value

        for sym, k in stubs.items():
            struct.pack_into("<6sQ", image, stub_at + 16 * k, _STUB, address(sym))
        for sym, k in slots.items():
            struct.pack_into("<Q", image, got_at + 8 * k, address(sym))
        for target, r_offset, kind, sym, addend in relocs:
            width, pcrel, got, stub = _KINDS[kind]
            at = place[target] + r_offset
            if got:
                s = base + got_at + 8 * slots[sym]
            elif sym in stubs:
                s = base + stub_at + 16 * stubs[sym]
            else:
                s = address(sym)
            value = s + addend - (base + at if pcrel else 0)
            if width == 4:
                if not -(1 << 31) <= value < (1 << 31):
                    raise Unsupported("a 32-bit displacement out of range")
                struct.pack_into("<i", image, at, value)
            else:
                struct.pack_into("<Q", image, at, value & (1 << 64) - 1)

        addresses = {}
        defined = {name: (shndx, value) for name, info, shndx, value in symbols
                   if info >> 4 != 0 and shndx in place}  # global and weak symbols
        for name in wanted:
            if name not in defined:
                raise RuntimeError(f"symbol {name!r} is not defined by the object code")
            shndx, value = defined[name]
            addresses[name] = base + place[shndx] + value

        memory[:] = bytes(image)
        STATS["load"] += 1
        protect = {"rx": mmap.PROT_READ | mmap.PROT_EXEC, "r": mmap.PROT_READ,
                   "rw": mmap.PROT_READ | mmap.PROT_WRITE}
        for region, start, end in regions:
            pages = -(-end // PAGE) * PAGE - start
            if pages > 0 and _mprotect(base + start, pages, protect[region]) != 0:
                raise Unsupported(f"mprotect refused ({region}): errno {ctypes.get_errno()}")
    except BaseException:
        anchor = None  # the export ends with it, so the mapping can close
        memory.close()
        raise
    return Loaded(addresses, (memory, anchor))


def _mprotect(address: int, length: int, prot: int) -> int:
    fn = _PROCESS.mprotect  # type: ignore[union-attr]
    fn.restype, fn.argtypes = ctypes.c_int, (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    return fn(address, length, prot)
