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
`MAX_ENTRY_BYTES` (a FIFO, a link to /dev/zero, a sparse terabyte). Reading, the atomic
publish (a temporary file and `os.replace`) and those misses are the SDK's disk cache
(hologram/backend/disk_cache.py); this module has the entry format.

The memory cache is `hologram.core.lru.LRUCache`: every operation holds its lock, so
launches from several threads may share it.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any, Hashable, TypeVar

from hologram.backend import LRUCache, Value, disk_cache, user_cache_root

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


class Entry(Value):
    """A cached object: its stage table and the object code."""

    __slots__ = ("meta", "obj")
    meta: Any
    obj: bytes

    def __init__(self, meta: Any, obj: bytes) -> None:
        self._init(meta=meta, obj=obj)


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


class DiskCache(disk_cache.DiskCache[Entry]):
    """Entries under `root`, one file per key, in this module's format; the SDK's disk
    cache (hologram/backend/disk_cache.py) reads, publishes and discards them, every
    failure a miss."""

    suffix, max_entry_bytes = SUFFIX, MAX_ENTRY_BYTES
    encode, decode = staticmethod(encode_entry), staticmethod(decode_entry)
