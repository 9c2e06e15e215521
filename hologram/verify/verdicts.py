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

Who can write a verdict, and which are believed: hologram.core.records (a folder only
this user can write, `verdicts/` in the cache root). A verdict is a small file whose
content is its key spelled out: a file that is larger, or says anything else
(corrupt, truncated, written for another key) is no verdict, and the program is
verified. Only passes are recorded; every failure to read or write is a miss.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from hologram.core import records

FORMAT = b"hologram verdict 1"
_SOURCES = ("verify", "isa", "core")  # folders of the hologram package the verdict depends on
_MAX_BYTES = 256
_KIND, _SUFFIX = "verdicts", ".verdict"


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


def _content(program_sha256: str) -> bytes:
    return b"%s\n%s\n%s\n" % (FORMAT, program_sha256.encode("ascii"), verifier_digest().encode("ascii"))


def passed(program_sha256: str) -> bool:
    """Whether this verifier passed the program with that sha256 before (a verdict is on
    record, in a folder only this user can write, and says exactly that)."""
    found = records.read(_KIND, program_sha256, _SUFFIX, _MAX_BYTES)
    return found is not None and found == _content(program_sha256)


def record(program_sha256: str) -> None:
    """Record that this verifier passed the program with that sha256."""
    records.write(_KIND, program_sha256, _SUFFIX, _content(program_sha256))
