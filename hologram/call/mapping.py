"""Where an array's bytes live: in this process's memory, or in a file through a mapping
(which file, which bytes of it, shared or copy-on-write); and a descriptor of that file,
to read and write those bytes without touching the mapping.

Two reasons to know. Two mappings of one file are two addresses for the same bytes,
so comparing addresses (`np.may_share_memory`) misses their overlap: an output written
through one changes an input read through the other. And a page of a mapping past the
end of its file (truncated after it was mapped) is a SIGBUS when touched, which kills
the process; `pread` and `pwrite` on a descriptor turn the same fault into an
`OSError` (or a short read) that can be reported.

The mapping behind an array is found through its `base` chain (an `mmap.mmap` object:
what `np.memmap` and `np.load(..., mmap_mode=...)` make, and any view of them), and the
file and position through `/proc/self/maps`, which names the mapped file's device,
inode and offset even when the file was renamed or deleted. Without `/proc` (not
Linux), an `np.memmap`'s own `filename` and `offset` say it.
"""

from __future__ import annotations

import mmap
import os
import weakref
from typing import Any

import numpy as np

from hologram.core.values import Value

FileId = tuple[int, int]  # (st_dev, st_ino)


_set = object.__setattr__  # an Extent's fields, set directly: one is built per array a call checks


class Extent(Value, uncompared=("path",)):
    """The bytes an array spans: [start, end) of the file `file` ((st_dev, st_ino)), or
    addresses of this process's memory when `file` is None. For a strided array, from
    its lowest byte to past its highest (so an overlap is conservative, as numpy's
    `may_share_memory` is)."""

    __slots__ = ("file", "start", "end", "path")
    file: FileId | None
    start: int
    end: int
    path: str  # the file's name, for messages

    def __init__(self, file: FileId | None, start: int, end: int, path: str = "") -> None:
        _set(self, "file", file)
        _set(self, "start", start)
        _set(self, "end", end)
        _set(self, "path", path)

    def overlaps(self, other: "Extent") -> bool:
        return self.file == other.file and self.start < other.end and other.start < self.end


class Mapped(Value):
    """A file mapping holding an array: `mm` the mmap object, `file` the mapped file,
    `pos` the file position of the array's lowest byte, `shared` whether the mapping is
    shared (its writes reach the file and the file's reach it) rather than
    copy-on-write, `path` the file's name as last known (for messages; it may have been
    renamed or deleted since)."""

    __slots__ = ("mm", "file", "pos", "shared", "path")
    mm: Any
    file: FileId
    pos: int
    shared: bool
    path: str

    def __init__(self, mm: Any, file: FileId, pos: int, shared: bool, path: str) -> None:
        self._init(mm=mm, file=file, pos=pos, shared=shared, path=path)


def byte_bounds(a: np.ndarray) -> tuple[int, int]:
    """The address of `a`'s lowest byte and one past its highest (numpy's byte_bounds)."""
    lo = hi = a.__array_interface__["data"][0]
    if not a.size:
        return lo, lo
    for n, stride in zip(a.shape, a.strides):
        if stride < 0:
            lo += (n - 1) * stride
        else:
            hi += (n - 1) * stride
    return lo, hi + a.itemsize


def mmap_behind(a: np.ndarray) -> Any:
    """The `mmap.mmap` whose memory `a` views, found through its `base` chain, or None."""
    b = a.base
    while b is not None:
        if isinstance(b, mmap.mmap):
            return b
        b = getattr(b, "base", None)
    return None


# Per mmap object: (the address its memory starts at, the file, the file position of
# that address, shared, path). A live mmap's mapping never moves (numpy's views of it
# forbid resizing), so this is read once.
_MAPPINGS: "weakref.WeakKeyDictionary[Any, tuple]" = weakref.WeakKeyDictionary()


def mapped(a: np.ndarray) -> Mapped | None:
    """The file mapping that holds `a`'s bytes, or None (memory, an anonymous mapping)."""
    mm = mmap_behind(a)
    if mm is None:
        return None
    found = _MAPPINGS.get(mm)
    if found is None:
        found = _describe(mm, a)
        if found is not None:  # None may depend on `a` (no /proc: only an np.memmap says), so ask again
            _MAPPINGS[mm] = found
    if found is None:
        return None
    base, file, pos, shared, path = found
    return Mapped(mm, file, pos + byte_bounds(a)[0] - base, shared, path)


def _describe(mm: Any, a: np.ndarray) -> tuple | None:
    try:
        base = np.frombuffer(mm, np.uint8).ctypes.data
    except (ValueError, TypeError, BufferError):  # a closed mapping
        return None
    entry = _maps_entry(base)
    if entry is not None:
        lo, offset, file, shared, path = entry
        return (base, file, offset + base - lo, shared, path) if file[1] else None
    if os.path.exists("/proc/self/maps"):
        return None  # the table says nothing of this address
    name = getattr(a, "filename", None)  # no /proc: an np.memmap says what it mapped
    if not isinstance(a, np.memmap) or not name:
        return None
    try:
        st = os.stat(name)
    except OSError:
        return None
    start = a.offset - a.offset % mmap.ALLOCATIONGRANULARITY  # where np.memmap began its mapping
    return base, (st.st_dev, st.st_ino), start, a.mode != "c", str(name)


def _maps_entry(address: int) -> tuple[int, int, FileId, bool, str] | None:
    """(the start of the mapping holding `address`, its file offset there, the file's
    (device, inode), shared, the file's name) from /proc/self/maps; None when the table
    is not there or says nothing of the address."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                if lo <= address < hi and len(parts) >= 5:
                    major, minor = (int(x, 16) for x in parts[3].split(":"))
                    path = parts[5].strip() if len(parts) > 5 else ""
                    return lo, int(parts[2], 16), (os.makedev(major, minor), int(parts[4])), parts[1][3] == "s", path
    except (OSError, ValueError, IndexError):
        return None
    return None


def extent(a: np.ndarray) -> Extent:
    """Where `a`'s bytes are: in a file (through a mapping) or in memory."""
    lo, hi = byte_bounds(a)
    m = mapped(a) if a.size else None
    if m is not None:
        return Extent(m.file, m.pos, m.pos + hi - lo, m.path)
    return Extent(None, lo, hi)


def may_share(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether writing one of the arrays may change the other: numpy's conservative
    `may_share_memory`, and for two arrays in file mappings, whether their bytes of the
    same file overlap (two mappings of a file are two addresses for it). The mapping
    table is read only when both arrays are mapped."""
    if not a.size or not b.size:
        return False
    if np.may_share_memory(a, b):
        return True
    if mmap_behind(a) is None or mmap_behind(b) is None:
        return False
    return extent(a).overlaps(extent(b))


def open_file(m: Mapped, writing: bool, name: str | None) -> int | None:
    """A new descriptor of the file `m` maps (read-only, or read-write when `writing`),
    or None when none can be had: by `name` (the memmap's `filename`) or the path the
    mapping table gives, when that is still the mapped file; else through a descriptor
    this process holds on it (an `mmap.mmap` keeps one of its own), which reaches a
    renamed or deleted file too. Every candidate is checked to be the mapped file."""
    flags = os.O_RDWR if writing else os.O_RDONLY
    for path in dict.fromkeys(p for p in (name, m.path) if p):
        fd = _open_checked(str(path), flags, m.file)
        if fd is not None:
            return fd
    try:
        held = os.listdir("/proc/self/fd")
    except OSError:
        return None
    for entry in held:
        try:
            st = os.stat(int(entry))
        except (OSError, ValueError):
            continue
        if (st.st_dev, st.st_ino) == m.file:
            fd = _open_checked(f"/proc/self/fd/{entry}", flags, m.file)
            if fd is not None:
                return fd
    return None


def _open_checked(path: str, flags: int, file: FileId) -> int | None:
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != file:
        os.close(fd)
        return None
    return fd


def file_size(m: Mapped) -> int | None:
    """The mapped file's size now, through the mmap's own descriptor (None when it has
    none: an mmap made with trackfd=False)."""
    try:
        return m.mm.size()
    except (OSError, ValueError):
        return None
