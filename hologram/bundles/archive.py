"""The bundle archive: a deterministic zip written, and an untrusted one read safely.

Writing: members in a fixed order (`bundle.toml` first, the rest sorted, `RECORD` last),
a fixed timestamp and mode, no compression. Stored members make the bytes depend on
nothing but the contents: deflate's output differs between zlib builds (zlib, zlib-ng),
which would break "the same sources give the same bundle on any machine".

Reading: every member name is a relative POSIX path without `..`, unique; every member
is within the size limits, read with a cap whatever its header claims (a zip bomb
stops at the cap), its CRC checked by zipfile and its sha256 and size by `RECORD`, which
must list exactly the other members. Anything else is a `BundleError` naming the member.
"""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from typing import Mapping

from hologram.bundles.manifest import MANIFEST
from hologram.core.errors import BundleError

RECORD = "RECORD"
MAX_BUNDLE_BYTES = 1 << 30  # a bundle file
MAX_MEMBER_BYTES = 256 << 20  # one member, uncompressed
MAX_TOTAL_BYTES = 1 << 30  # all members, uncompressed
MAX_MEMBERS = 65536
_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can say
_MEMBER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*(?:/[A-Za-z0-9_][A-Za-z0-9_.+-]*)*$")


def member_problem(name: str) -> str | None:
    """Why `name` may not be a member's name, or None."""
    if not _MEMBER.match(name) or len(name) > 512:
        return ("not a relative path of letters, digits and _ . + - "
                "(no absolute path, no '..', no backslash, no empty or hidden component)")
    return None


# ----------------------------------------------------------------------------- writing
def record(members: Mapping[str, bytes]) -> bytes:
    """The RECORD of `members`: one `name,sha256,size` line each, sorted by name."""
    return "".join(f"{n},{hashlib.sha256(d).hexdigest()},{len(d)}\n" for n, d in sorted(members.items())).encode()


def write(members: Mapping[str, bytes]) -> bytes:
    """The archive of `members` (their names checked), with its RECORD."""
    for name in members:
        bad = member_problem(name)
        if bad is not None or name == RECORD:
            raise BundleError(f"cannot store a member named {name!r}: {bad or 'reserved'}")
    order = sorted(members, key=lambda n: (n != MANIFEST, n))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name, data in [*((n, members[n]) for n in order), (RECORD, record(members))]:
            info = zipfile.ZipInfo(name, _DATE)
            info.create_system = 3  # unix: the mode below is read the same everywhere
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_STORED
            zf.writestr(info, data)
    return buf.getvalue()


# ----------------------------------------------------------------------------- reading
def read(data: bytes, where: str = "bundle") -> dict[str, bytes]:
    """The members of the archive `data`, every check above passed; BundleError otherwise.
    `where` names the bundle in messages."""
    return read_with_digests(data, where)[0]


def read_with_digests(data: bytes, where: str = "bundle") -> tuple[dict[str, bytes], dict[str, str]]:
    """`read`, and the sha256 of every member as RECORD gives it (and the bytes match),
    so a reader holding digests of its own compares strings instead of hashing again."""
    if len(data) > MAX_BUNDLE_BYTES:
        raise BundleError(f"{where}: {len(data):,} bytes, over the limit of {MAX_BUNDLE_BYTES:,}")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise BundleError(f"{where}: not a bundle (not a readable zip archive: {exc})") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS:
            raise BundleError(f"{where}: {len(infos):,} members, over the limit of {MAX_MEMBERS:,}")
        members: dict[str, bytes] = {}
        total = 0
        for info in infos:
            name = info.filename
            bad = member_problem(name)
            if bad is not None:
                raise BundleError(f"{where}: member {name!r}: {bad}")
            if name in members:
                raise BundleError(f"{where}: member {name!r} appears twice")
            if info.file_size > MAX_MEMBER_BYTES:
                raise BundleError(f"{where}: member {name!r} is {info.file_size:,} bytes, over the limit of "
                                  f"{MAX_MEMBER_BYTES:,}")
            members[name] = body = _read_capped(zf, info, where)
            total += len(body)
            if total > MAX_TOTAL_BYTES:
                raise BundleError(f"{where}: its members hold over {MAX_TOTAL_BYTES:,} bytes")
    digests = _check_record(members, where)
    del members[RECORD]
    return members, digests


def _read_capped(zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> bytes:
    name = info.filename
    try:
        with zf.open(info) as fh:
            body = fh.read(MAX_MEMBER_BYTES + 1)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, OSError, ValueError, EOFError,
            RuntimeError) as exc:  # RuntimeError: an encrypted member
        raise BundleError(f"{where}: member {name!r} cannot be read: {exc}") from None
    except Exception as exc:  # zlib.error and friends from a corrupt stream
        raise BundleError(f"{where}: member {name!r} cannot be read: {type(exc).__name__}: {exc}") from None
    if len(body) > MAX_MEMBER_BYTES:
        raise BundleError(f"{where}: member {name!r} expands past the limit of {MAX_MEMBER_BYTES:,} bytes")
    if len(body) != info.file_size:
        raise BundleError(f"{where}: member {name!r} holds {len(body):,} bytes, its header says {info.file_size:,}")
    return body


def _check_record(members: dict[str, bytes], where: str) -> dict[str, str]:
    if RECORD not in members:
        raise BundleError(f"{where}: no {RECORD} member (the hashes of the others)")
    listed: dict[str, tuple[str, int]] = {}
    for i, line in enumerate(members[RECORD].decode("utf-8", "replace").splitlines(), 1):
        parts = line.split(",")
        if len(parts) != 3 or not re.fullmatch(r"[0-9a-f]{64}", parts[1]) or not parts[2].isdigit():
            raise BundleError(f"{where}: {RECORD} line {i}: expected name,sha256,size")
        if parts[0] in listed:
            raise BundleError(f"{where}: {RECORD} lists {parts[0]!r} twice")
        listed[parts[0]] = (parts[1], int(parts[2]))
    others = set(members) - {RECORD}
    for name in sorted(others - listed.keys()):
        raise BundleError(f"{where}: member {name!r} is not in {RECORD}")
    for name in sorted(listed.keys() - others):
        raise BundleError(f"{where}: {RECORD} lists {name!r}, which the archive does not hold")
    for name in sorted(others):
        digest, size = listed[name]
        body = members[name]
        if len(body) != size or hashlib.sha256(body).hexdigest() != digest:
            raise BundleError(f"{where}: member {name!r} does not match its hash in {RECORD} (altered or corrupt)")
    return {name: listed[name][0] for name in others}
