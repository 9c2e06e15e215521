"""Compiled-code caches: a bounded in-memory LRU and a content-addressed disk cache.

A disk entry is one file, `<sha256(key)[:40]>.hgo`, holding

    magic  b"HGLLVM\\x00\\x01"          8 bytes
    u32    key length, then the key   (utf-8; the full key, so a hash collision or a
                                        file copied from another machine is detected)
    u64    meta length, u64 object length
    32     sha256(meta + object)
    meta   JSON: whatever the backend needs besides code (the stage table)
    object relocatable object code

Anything that does not parse exactly, has another key, or fails the checksum is deleted
and reported as a miss, so the caller rebuilds it: a corrupt cache costs a compile, never
a crash. So is anything at an entry's path that is not a regular file of at most
`MAX_ENTRY_BYTES` (a FIFO, which would block the reader forever; a link to /dev/zero,
which never ends; a sparse terabyte): entries are read through
`hologram.core.files.read_regular_file`, and the next `store` puts a real entry in its
place. Writes go to a temporary file in the same directory and are published with
`os.replace`, so a reader sees a whole entry or none, even with concurrent writers.

The memory cache is `hologram.core.lru.LRUCache`: every operation holds its lock, so
launches from several threads may share it.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from pathlib import Path
from typing import Any, Hashable, TypeVar

import attrs
from hologram.backend import LRUCache, UnreadableFileError, read_regular_file, user_cache_root

MAGIC = b"HGLLVM\x00\x01"
SUFFIX = ".hgo"
_HEAD = struct.Struct("<QQ32s")
# The largest of 2,251 entries in a developer's cache was 57 KB: a thousand times that
# is not something the code generator wrote.
MAX_ENTRY_BYTES = 64 << 20
MEMORY_ENTRIES = 256  # executables a backend keeps in memory (each holds its machine code)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class MemoryCache(LRUCache[K, V]):
    """Least-recently-used map of at most `size` entries, safe to share between threads."""

    def __init__(self, size: int = MEMORY_ENTRIES):
        super().__init__(size)


def default_cache_dir() -> Path:
    """`$HOLOGRAM_CACHE_DIR`, else the platform's user cache directory + hologram/cpu_llvm."""
    env = os.environ.get("HOLOGRAM_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return user_cache_root() / "cpu_llvm"


@attrs.frozen
class Entry:
    meta: Any
    obj: bytes


def encode_entry(key: str, entry: Entry) -> bytes:
    k = key.encode()
    meta = json.dumps(entry.meta, sort_keys=True, separators=(",", ":")).encode()
    digest = hashlib.sha256(meta + entry.obj).digest()
    return b"".join((MAGIC, struct.pack("<I", len(k)), k, _HEAD.pack(len(meta), len(entry.obj), digest),
                     meta, entry.obj))


def decode_entry(key: str, data: bytes) -> Entry | None:
    """The entry in `data` if it is intact and stored under exactly `key`, else None."""
    k = key.encode()
    if data[:8] != MAGIC or len(data) < 12:
        return None
    (klen,) = struct.unpack_from("<I", data, 8)
    at = 12 + klen
    if data[12:at] != k or len(data) < at + _HEAD.size:
        return None
    mlen, olen, digest = _HEAD.unpack_from(data, at)
    at += _HEAD.size
    if len(data) != at + mlen + olen:
        return None
    body = data[at:]
    if hashlib.sha256(body).digest() != digest:
        return None
    try:
        meta = json.loads(body[:mlen])
    except ValueError:  # unreachable unless a writer produced bad JSON under a good checksum
        return None
    return Entry(meta, bytes(body[mlen:]))


class DiskCache:
    """Entries under `root`, one file per key. Every failure is a miss: a cache that
    cannot be read or written (full disk, read-only home) only costs compile time."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / (hashlib.sha256(key.encode()).hexdigest()[:40] + SUFFIX)

    def load(self, key: str) -> Entry | None:
        path = self.path(key)
        try:
            data = read_regular_file(path, MAX_ENTRY_BYTES)
        except UnreadableFileError:  # not ours to read: out of the way, for the next store
            _unlink(path)
            return None
        except OSError:
            return None
        entry = decode_entry(key, data)
        if entry is None:
            _unlink(path)
        return entry

    def discard(self, key: str) -> None:
        _unlink(self.path(key))

    def store(self, key: str, entry: Entry) -> bool:
        """Publish `entry` atomically; True when it was written."""
        data = encode_entry(key, entry)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=SUFFIX, dir=self.root)
        except OSError:
            return False
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, self.path(key))
            return True
        except OSError:
            _unlink(Path(tmp))
            return False


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
