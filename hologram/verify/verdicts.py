"""Verdicts: which encoded programs this verifier has passed before, kept on disk.

A bundle's programs are untrusted input, decoded and verified before anything runs
them. A program passed once need not be verified again by the same verifier: a verdict
records "the program whose encoding has sha256 P passed the verifier whose sources
hash to V", and a later process that loads the same bytes reads the verdict instead of
importing and running the verifier (docs/decisions.md, "Start-up").

Keys and what invalidates them:

- P is the sha256 of the program's bytes as the bundle holds them (checked against the
  archive's RECORD by the caller before it asks), so a program whose bytes changed has
  another key and is verified again;
- V (`verifier_digest()`) hashes the sources of `hologram/verify`, `hologram/isa` and
  `hologram/core`: the verifier, the decoder and everything they rest on. Any edit of
  them, or an upgrade, makes every earlier verdict unreachable.

Who can write a verdict: the folder is `verdicts/` in the cache root
(HOLOGRAM_CACHE_DIR, else the user cache folder), beside cpu_llvm's object cache,
whose entries are native code a process runs as it finds it: anyone who can write
there can already run code in the user's processes, so a verdict gives nobody a power
they lack. Verdicts are read only from a folder owned by this user and writable by
nobody else (a shared or world-writable cache folder is never believed: the programs
are verified as if there were no verdicts). A verdict is a small file whose content is
its key spelled out: a file that is not a regular file, is larger, or says anything
else (corrupt, truncated, written for another key) is no verdict, and the program is
verified. Only passes are recorded; every failure to read or write is a miss.
"""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path

from hologram.core.files import UnreadableFileError, cache_root, read_regular_file

FORMAT = b"hologram verdict 1"
_SOURCES = ("verify", "isa", "core")  # folders of the hologram package the verdict depends on
_MAX_BYTES = 256
_HEX = frozenset("0123456789abcdef")


@functools.lru_cache(maxsize=1)
def verifier_digest() -> str:
    """sha256 of the sources of the verifier, the decoder and what they rest on."""
    import hashlib

    package = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for folder in _SOURCES:
        for name in sorted(os.listdir(package / folder)):
            if name.endswith(".py"):
                h.update(f"{folder}/{name}\0".encode())
                h.update((package / folder / name).read_bytes())
    return h.hexdigest()


def folder() -> Path:
    return cache_root() / "verdicts"


def _content(program_sha256: str) -> bytes:
    return b"%s\n%s\n%s\n" % (FORMAT, program_sha256.encode("ascii"), verifier_digest().encode("ascii"))


def _path(program_sha256: str) -> Path:
    # the program's digest names the file; the content holds the verifier's as well
    if len(program_sha256) != 64 or not _HEX.issuperset(program_sha256):
        raise ValueError(f"not a sha256 digest: {program_sha256!r}")  # never a path of another's choosing
    return folder() / f"{program_sha256}.verdict"


def _private(path: Path) -> bool:
    """Whether `path` is a folder of this user's that nobody else can write."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    mine = not hasattr(os, "getuid") or st.st_uid == os.getuid()
    return stat.S_ISDIR(st.st_mode) and mine and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def passed(program_sha256: str) -> bool:
    """Whether this verifier passed the program with that sha256 before (a verdict is on
    record, in a folder only this user can write, and says exactly that)."""
    if not _private(folder()):
        return False
    try:
        return read_regular_file(_path(program_sha256), _MAX_BYTES) == _content(program_sha256)
    except (OSError, UnreadableFileError, ValueError):
        return False


def record(program_sha256: str) -> None:
    """Record that this verifier passed the program with that sha256 (atomically: a
    reader sees the whole verdict or none). Failing to write is no error."""
    import tempfile  # only when recording: a process that finds its verdicts never imports it

    where = folder()
    try:
        path = _path(program_sha256)
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _private(where):
            return  # a verdict there would never be believed
        fd, tmp = tempfile.mkstemp(dir=where, prefix=".verdict-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_content(program_sha256))
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except (OSError, ValueError):
        pass
