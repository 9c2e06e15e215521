"""The disk cache of what `prepare` builds: per program and target, the PTX, the cubin
(when nvJitLink made one) and the stage kernels' names and blocks, so that a later
process prepares the program without LLVM or nvJitLink (it still verifies it).

The key, as cpu_llvm keys its objects (plugins/cpu_llvm, cache.py): everything the code
depends on besides the program, so that a change to any of it is a miss, never a stale
hit — the program's hash, the target, the toolchain (llvmlite's release, which fixes its
LLVM, and nvJitLink's version) and a digest of this package's sources (the code
generator and its ABI: editing any invalidates every entry, without a manual bump).

An entry is one file `<sha256(key)[:40]>.hgcubin` under `$HOLOGRAM_CACHE_DIR/cuda` (else
the user cache directory's `hologram/cuda`):

    magic   b"HGCUDA\\x00\\x01"
    header  one line of JSON: the full key, the kernels, the PTX's and cubin's lengths
            and the sha256 of both
    body    the PTX (utf-8), then the cubin

Anything that does not parse exactly, has another key or fails the checksum is deleted
and read as a miss; anything at the path that is not a regular file of at most
`MAX_ENTRY_BYTES` likewise. Reading, the atomic publish and those misses are the SDK's
disk cache (hologram/backend/disk_cache.py, cpu_llvm's too); this module has the format.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from importlib import metadata
from pathlib import Path

import attrs

from hologram.backend import disk_cache, user_cache_root

from .abi import KINDS, KernelEntry

MAGIC = b"HGCUDA\x00\x01"
SUFFIX = ".hgcubin"
MAX_ENTRY_BYTES = 64 << 20  # a stdlib kernel's PTX and cubin are a few KB


@attrs.frozen
class Entry:
    """What one target of one program needs: its PTX, its cubin (b"" when none was
    assembled) and its kernels."""

    ptx: str
    cubin: bytes
    kernels: tuple[KernelEntry, ...]


def default_cache_dir() -> Path:
    env = os.environ.get("HOLOGRAM_CACHE_DIR")
    return (Path(env).expanduser() if env else user_cache_root()) / "cuda"


@functools.cache
def sources_digest() -> str:
    """A digest of this package's sources: what the cached code depends on besides its
    program and toolchain."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def cache_key(program_hash: str, target: str, nvjitlink: str | None) -> str:
    """The key of `program_hash`'s code for `target`, built by this package's sources with
    this llvmlite and nvJitLink `nvjitlink` (None: PTX only, a different entry)."""
    return (f"hologram cuda; program {program_hash}; target {target}; llvmlite {metadata.version('llvmlite')}; "
            f"nvjitlink {nvjitlink or 'none'}; sources {sources_digest()}")


def encode_entry(key: str, entry: Entry) -> bytes:
    ptx = entry.ptx.encode()
    kernels = [[k.name, k.stage_index, list(k.block), k.kind] for k in entry.kernels]
    header = {"key": key, "kernels": kernels, "ptx": len(ptx),
              "cubin": len(entry.cubin), "sha256": hashlib.sha256(ptx + entry.cubin).hexdigest()}
    return MAGIC + json.dumps(header, sort_keys=True, separators=(",", ":")).encode() + b"\n" + ptx + entry.cubin


def decode_entry(key: str, data: bytes) -> Entry | None:
    """The entry in `data` if it is intact and stored under exactly `key`, else None."""
    if not data.startswith(MAGIC) or b"\n" not in data:
        return None
    line, body = data[len(MAGIC):].split(b"\n", 1)
    try:
        header = json.loads(line)
        if header["key"] != key or len(body) != header["ptx"] + header["cubin"]:
            return None
        if hashlib.sha256(body).hexdigest() != header["sha256"]:
            return None
        kernels = tuple(KernelEntry(str(n), int(i), tuple(int(x) for x in b), str(kind))
                        for n, i, b, kind in header["kernels"])
        if any(len(k.block) != 3 or k.kind not in KINDS for k in kernels):
            return None
        return Entry(body[:header["ptx"]].decode(), bytes(body[header["ptx"]:]), kernels)
    except (ValueError, KeyError, TypeError, AttributeError):  # not our JSON, or not its shape
        return None


class DiskCache(disk_cache.DiskCache[Entry]):
    """Entries under `root`, one file per key, in this module's format; the SDK's disk
    cache (hologram/backend/disk_cache.py) reads, publishes and discards them, every
    failure a miss."""

    suffix, max_entry_bytes = SUFFIX, MAX_ENTRY_BYTES
    encode, decode = staticmethod(encode_entry), staticmethod(decode_entry)
