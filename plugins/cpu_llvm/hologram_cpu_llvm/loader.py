"""Object code into memory, ready to call: a small static linker for x86-64 ELF.

What the code generator's objects need is little: their sections (text and constant
pools) laid out in one mapping, the relocations LLVM emits for position-independent
code applied (PC32 into the constant pools, PLT32 calls to a few libc/libm functions
such as memset and fma, GOT slots for the runtime's cancel flag and fault guard block,
cancel.SYMBOLS and fault_guard.SYMBOLS), and the stage symbols' addresses. Doing that
here, in ~1 ms of Python, rather than in an MCJIT engine means a process that runs cached or shipped
object code never imports llvmlite.binding (~22 ms) nor builds a target machine: the
start-up a bundle promises (docs/bundles.md, "Start-up").

The layout: executable sections first, then (page-aligned) read-only ones, then
writable ones, each kept at its alignment; an external function gets a 14-byte stub
(`jmp *0(%rip)` followed by its address) beside the text, so a 32-bit call displacement
always reaches it; a GOT-relative reference gets an 8-byte slot among the read-only
data. The mapping is written while writable, then its pages are made read+execute,
read-only and read-write as the sections ask: never writable and executable at once.

Every object is read and checked by elf.py first: one that is malformed (a section,
symbol or relocation outside the file or its section, an alignment or a zero-filled
size past the limits, ...) raises `elf.Malformed`, a RuntimeError, before anything is
mapped. A well-formed object that needs what this loader lacks (another architecture,
a relocation kind not listed in `_KINDS`, a common or TLS symbol, a symbol this process
does not export) raises `Unsupported`: the backend then hands code that this process's
LLVM made (a fresh compile, the disk cache) to MCJIT (jit.py), which handles all of
LLVM's output, and refuses shipped code (backend.py, `prepare_native`).
"""

from __future__ import annotations

import collections
import ctypes
import mmap
import struct
import sys
from typing import Any

from . import cancel, cpu, elf, fault_guard

# Counters by event ("optimize", "emit" in jit.py, "load" here and there): a test-visible
# record of the work done, so tests can prove a warm start never ran LLVM's optimizer.
STATS: collections.Counter[str] = collections.Counter()

PAGE = mmap.PAGESIZE
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
    """This loader cannot take the object, well formed as it is (MCJIT can)."""


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
    """The address of `name` among the process's symbols (libc, libm), or 0. Looked up by
    item, always dlsym: as an attribute, a name such as `_handle` or `__init__` would be
    the CDLL object's own."""
    if _PROCESS is None:
        return 0
    try:
        return ctypes.cast(_PROCESS[name], ctypes.c_void_p).value or 0
    except (AttributeError, ValueError, UnicodeError):  # not there; a name dlsym cannot take
        return 0


def supported() -> bool:
    """Whether this loader can run here: x86-64 Linux (ELF, System V ABI)."""
    return sys.platform.startswith("linux") and cpu.arch() == "x86_64" and _PROCESS is not None


# ------------------------------------------------------------------------- linking
def link(obj: bytes, wanted: list[str]) -> Loaded:
    """Lay out, relocate and map `obj`. RuntimeError (`elf.Malformed` among them) when it
    is not well formed or does not define a function of `wanted`; Unsupported when it is
    well formed but needs what this loader lacks."""
    obj = bytes(obj)
    checked = elf.read(obj)  # every malformed object is refused here, before any Unsupported
    if checked.machine != elf.EM_X86_64:
        raise Unsupported("not an x86-64 relocatable object")
    return _link(obj, checked, wanted)


def _link(obj: bytes, checked: elf.Object, wanted: list[str]) -> Loaded:
    sections, symbols = checked.sections, checked.symbols
    functions = elf.functions(checked, wanted)
    loaded = [s.index for s in sections if s.flags & elf.SHF_ALLOC and s.size]

    # the relocations of what is loaded (not of debug sections), and the stubs and GOT
    # slots they need; elf.read checked that each lies inside its section
    relocs = []
    stubs: dict[int, int] = {}  # symbol index -> stub number
    slots: dict[int, int] = {}  # symbol index -> GOT slot number
    for r in checked.relocations or ():
        if r.target not in loaded:
            continue
        if r.kind not in _KINDS:
            raise Unsupported(f"relocation kind {r.kind}")
        _, _, got, stub = _KINDS[r.kind]
        if got:
            slots.setdefault(r.symbol, len(slots))
        elif stub and symbols[r.symbol].shndx == elf.SHN_UNDEF:
            stubs.setdefault(r.symbol, len(stubs))
        relocs.append(r)

    # layout: text and stubs, then read-only data and GOT slots, then writable data
    place: dict[int, int] = {}
    size = 0
    regions = []
    for region, flagged in (("rx", lambda f: f & elf.SHF_EXECINSTR),
                            ("r", lambda f: not f & (elf.SHF_EXECINSTR | elf.SHF_WRITE)),
                            ("rw", lambda f: f & elf.SHF_WRITE and not f & elf.SHF_EXECINSTR)):
        start = size = -(-size // PAGE) * PAGE
        for i in loaded:
            if flagged(sections[i].flags):
                align = max(sections[i].align, 1)
                size = -(-size // align) * align
                place[i] = size
                size += sections[i].size
        if region == "rx":
            size = -(-size // 16) * 16
            stub_at, size = size, size + 16 * len(stubs)
        elif region == "r":
            size = -(-size // 8) * 8
            got_at, size = size, size + 8 * len(slots)
        regions.append((region, start, size))
    total = max(-(-size // PAGE) * PAGE, PAGE)

    try:  # zero-filled, so zero-filled sections cost nothing until touched
        memory = mmap.mmap(-1, total, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                           prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except OSError as e:
        raise RuntimeError(f"cannot map {total} bytes for the object code: {e.strerror}") from None
    anchor = ctypes.c_char.from_buffer(memory)  # pins the mapping; its address is the image base
    base = ctypes.addressof(anchor)
    try:
        for i in loaded:
            s = sections[i]
            if s.type != elf.SHT_NOBITS:
                memory[place[i]:place[i] + s.size] = obj[s.offset:s.offset + s.size]

        def address(sym: int) -> int:
            s = symbols[sym]
            if s.info & 0xF == elf.STT_TLS or s.shndx == elf.SHN_COMMON:
                raise Unsupported(f"symbol {s.name!r} is thread-local or common")
            if s.shndx == elf.SHN_UNDEF:
                found = cancel.SYMBOLS.get(s.name) or fault_guard.SYMBOLS.get(s.name) or process_symbol(s.name)
                if not found:
                    raise Unsupported(f"symbol {s.name!r} is not in this process")
                return found
            if s.shndx == elf.SHN_ABS:
                return s.value
            if s.shndx not in place:
                raise Unsupported(f"symbol {s.name!r} lies in a section that is not loaded")
            return base + place[s.shndx] + s.value

        for sym, k in stubs.items():
            struct.pack_into("<6sQ", memory, stub_at + 16 * k, _STUB, address(sym))
        for sym, k in slots.items():
            struct.pack_into("<Q", memory, got_at + 8 * k, address(sym))
        for r in relocs:
            width, pcrel, got, _ = _KINDS[r.kind]
            at = place[r.target] + r.offset
            if got:
                s = base + got_at + 8 * slots[r.symbol]
            elif r.symbol in stubs:
                s = base + stub_at + 16 * stubs[r.symbol]
            else:
                s = address(r.symbol)
            value = s + r.addend - (base + at if pcrel else 0)
            if width == 4:
                if not -(1 << 31) <= value < (1 << 31):
                    raise Unsupported("a 32-bit displacement out of range")
                struct.pack_into("<i", memory, at, value)
            else:
                struct.pack_into("<Q", memory, at, value & (1 << 64) - 1)

        addresses = {name: base + place[shndx] + value for name, (shndx, value) in functions.items()}
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
