"""Small records a process keeps for the next one, in a folder only this user can write.

What one process learned about bytes it read (the verifier passed this program, this
manifest parses to that document) is kept under the cache root, named by the bytes'
sha256, so a later process that reads the same bytes skips the work. The records sit
beside cpu_llvm's object cache, whose entries are native code a process runs as it
finds them: anyone who can write there can already run code in the user's processes,
so a record gives nobody a power they lack. That holds only for a folder nobody else
can write, so a record is read only from a folder owned by this user and writable by
nobody else; from any other folder, or when a record is not a regular file or is
larger than its reader allows, there is no record (every failure is a miss, and the
work is done as if there had been none). Writers publish atomically: a reader sees a
whole record or none.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from hologram.core.files import UnreadableFileError, cache_root, read_regular_file

_HEX = frozenset("0123456789abcdef")


def folder(kind: str) -> Path:
    """Where records of `kind` ('verdicts', 'manifests') live."""
    return cache_root() / kind


def private(path: Path) -> bool:
    """Whether `path` is a folder of this user's that nobody else can write."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    mine = not hasattr(os, "getuid") or st.st_uid == os.getuid()
    return stat.S_ISDIR(st.st_mode) and mine and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def path(kind: str, sha256: str, suffix: str) -> Path:
    """The record of `kind` for the bytes whose digest is `sha256` (a ValueError for
    anything but 64 lowercase hex digits: never a path of another's choosing)."""
    if len(sha256) != 64 or not _HEX.issuperset(sha256):
        raise ValueError(f"not a sha256 digest: {sha256!r}")
    return folder(kind) / f"{sha256}{suffix}"


def read(kind: str, sha256: str, suffix: str, limit: int) -> bytes | None:
    """The record's bytes, or None: no record, an unbelievable folder, or no regular
    file of at most `limit` bytes."""
    try:
        where = path(kind, sha256, suffix)
        if not private(where.parent):
            return None
        return read_regular_file(where, limit)
    except (OSError, UnreadableFileError, ValueError):
        return None


def write(kind: str, sha256: str, suffix: str, data: bytes) -> None:
    """Publish the record atomically; failing to write is no error (the next process
    does the work again)."""
    import tempfile  # only when recording: a process that finds its records never imports it

    try:
        where = path(kind, sha256, suffix)
        where.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not private(where.parent):
            return  # a record there would never be believed
        fd, tmp = tempfile.mkstemp(dir=where.parent, prefix=f".{kind}-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, where)
        except BaseException:
            os.unlink(tmp)
            raise
    except (OSError, ValueError):
        pass
