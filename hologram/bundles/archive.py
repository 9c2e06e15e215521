"""The bundle archive: a deterministic zip written, and an untrusted one read safely.

Writing: members in a fixed order (`bundle.toml` first, the rest sorted, `RECORD` last),
a fixed timestamp and mode, no compression. Stored members make the bytes depend on
nothing but the contents: deflate's output differs between zlib builds (zlib, zlib-ng),
which would break "the same sources give the same bundle on any machine".

Reading is this module's own, and strict: a bundle is what `write` makes, so the reader
takes exactly that shape of zip and refuses the rest, rather than everything zipfile
would try to open (deflate, bzip2, lzma, encryption, zip64, data descriptors, multi-disk
archives) on bytes anyone may have written; it also spares a loading process importing
zipfile and its compressors (~4 ms). The end record must end the file and its central
directory must end where the end record starts; each member must be stored (not
compressed), unencrypted, with its sizes and CRC in the central directory and a local
header that names it the same, its bytes inside the file before the directory and no
other member's (overlapping members are refused before anything is copied). Every
member name is a relative POSIX path without `..`, unique; every member is within the
size limits, its CRC checked, and its sha256 and size checked by `RECORD`, which must
list exactly the other members. Anything else is a `BundleError` naming the member.
"""

from __future__ import annotations

import binascii
import hashlib
import io
import re
import struct
from typing import Iterator, Mapping

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
    import zipfile  # building only: the reader below needs none of it

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
    members: dict[str, bytes] = {}
    total = 0
    for name, body in _entries(data, where):
        bad = member_problem(name)
        if bad is not None:
            raise BundleError(f"{where}: member {name!r}: {bad}")
        if name in members:
            raise BundleError(f"{where}: member {name!r} appears twice")
        members[name] = body
        total += len(body)
        if total > MAX_TOTAL_BYTES:
            raise BundleError(f"{where}: its members hold over {MAX_TOTAL_BYTES:,} bytes")
    digests = _check_record(members, where)
    del members[RECORD]
    return members, digests


_END = struct.Struct("<IHHHHIIH")  # end of central directory record, 22 bytes
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")  # central directory header, 46 bytes
_LOCAL = struct.Struct("<IHHHHHIIIHH")  # local file header, 30 bytes
_ENCRYPTED, _DESCRIPTOR = 0x1, 0x8  # general purpose flags this reader refuses


def _entries(data: bytes, where: str) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of each member of a stored zip, in directory order (see the module
    docstring for what is refused). The whole directory is checked before any member's
    bytes are copied: members whose ranges overlap (a zip can point many directory
    entries into the same bytes, so a small file would copy out far more than it holds)
    are refused first, and then the members together hold at most the file's size."""
    def refuse(why: str) -> BundleError:
        return BundleError(f"{where}: not a bundle (not a readable zip archive: {why})")

    end = len(data) - _END.size
    if end < 0 or data[end:end + 4] != b"PK\x05\x06":
        raise refuse("no end record where a bundle ends (a comment, trailing bytes, or not a zip)")
    _, disk, cd_disk, here, count, cd_size, cd_offset, comment = _END.unpack_from(data, end)
    if disk or cd_disk or here != count or comment:
        raise refuse("a multi-disk archive or one with a comment")
    if count > MAX_MEMBERS:
        raise BundleError(f"{where}: {count:,} members, over the limit of {MAX_MEMBERS:,}")
    if cd_offset + cd_size != end:
        raise refuse("its central directory does not end where the end record begins")
    spans = []  # (local header offset, data start, size, crc, name) of each member
    at = cd_offset
    for _ in range(count):
        if at + _CENTRAL.size > end:
            raise refuse("its central directory is cut short")
        (sig, _, _, flags, method, _, _, crc, csize, size, nlen, xlen, clen, _, _, _,
         offset) = _CENTRAL.unpack_from(data, at)
        raw = data[at + _CENTRAL.size:at + _CENTRAL.size + nlen]
        at += _CENTRAL.size + nlen + xlen + clen
        if sig != 0x02014B50 or at > end:
            raise refuse("a malformed central directory entry")
        name = raw.decode("ascii", "replace")
        if size > MAX_MEMBER_BYTES:
            raise BundleError(f"{where}: member {name!r} is {size:,} bytes, over the limit of {MAX_MEMBER_BYTES:,}")
        if method != 0 or flags & (_ENCRYPTED | _DESCRIPTOR) or csize != size:
            raise BundleError(f"{where}: member {name!r} cannot be read: not stored plainly (compression method "
                              f"{method}, flags {flags:#x}); a bundle's members are stored")
        if offset + _LOCAL.size > cd_offset:
            raise BundleError(f"{where}: member {name!r} cannot be read: its local header lies outside the data")
        lsig, _, _, lmethod, _, _, _, _, _, lnlen, lxlen = _LOCAL.unpack_from(data, offset)
        start = offset + _LOCAL.size + lnlen + lxlen
        if lsig != 0x04034B50 or lmethod != 0 or data[offset + _LOCAL.size:offset + _LOCAL.size + lnlen] != raw:
            raise BundleError(f"{where}: member {name!r} cannot be read: its local header disagrees with the "
                              f"central directory")
        if start + size > cd_offset:
            raise BundleError(f"{where}: member {name!r} holds {max(0, cd_offset - start):,} bytes, its header "
                              f"says {size:,}")
        spans.append((offset, start, size, crc, name))
    _refuse_overlaps(spans, where)
    for _, start, size, crc, name in spans:
        body = data[start:start + size]
        if binascii.crc32(body) != crc:
            raise BundleError(f"{where}: member {name!r} cannot be read: its CRC-32 does not match")
        yield name, body


def _refuse_overlaps(spans: list[tuple[int, int, int, int, str]], where: str) -> None:
    """Each member (its local header, name, extra field and bytes) owns its own range of
    the file: `write` never makes two share one."""
    ordered = sorted(spans)
    for (offset, start, size, _, name), (next_offset, _, _, _, next_name) in zip(ordered, ordered[1:]):
        if max(start + size, offset + _LOCAL.size) > next_offset:
            raise BundleError(f"{where}: not a bundle (members {name!r} and {next_name!r} overlap in the file: "
                              f"a bundle's members each have their own bytes)")


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
