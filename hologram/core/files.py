"""Reading files we did not write: only regular files, only up to a size.

A path can name something that is not a file at all. Opening a FIFO for reading blocks
until a writer appears (forever, for a planted cache entry); reading a character device
such as /dev/zero never ends (a MemoryError, after eating the machine's memory); a
sparse file can claim a terabyte. `read_regular_file` opens without blocking, asks the
*opened* descriptor what it is (so a symlink swapped between a check and the open
cannot fool it), refuses anything but a regular file, refuses one larger than the
caller's limit, and never reads more than limit + 1 bytes even if the file grows while
it is read. The cpu_llvm disk cache, `compile_file` and bundles all read through it.
`user_cache_root` is where the caches live.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class UnreadableFileError(OSError):
    """The path names something other than a regular file, or a file over the size
    limit. An OSError, so callers that already treat I/O failures as "cannot read"
    need no new case; `str()` is the reason, without the path."""


def read_regular_file(path: str | os.PathLike, limit: int) -> bytes:
    """The contents of the regular file at `path` (symlinks followed), at most `limit`
    bytes. Raises UnreadableFileError for anything else, OSError when it cannot be
    opened or read."""
    # O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting;
    # it changes nothing for a regular file. Windows has no FIFOs and no such flag.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _KINDS if test(info.st_mode)), "a special file")
            raise UnreadableFileError(f"not a regular file ({kind})")
        if info.st_size > limit:
            raise UnreadableFileError(f"{info.st_size} bytes, more than the {limit} bytes allowed")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(limit + 1 - total, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise UnreadableFileError(f"more than the {limit} bytes allowed (it grew while being read)")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text_file(path: str, limit: int, error: type[Exception]) -> str:
    """A document's text: a regular file of at most `limit` bytes, UTF-8, with universal
    newlines (as text mode reads it, so spans count lines the same way). Anything else is
    `error("cannot read PATH: why")`."""
    try:
        data = read_regular_file(path, limit)
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"cannot read {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def cache_root() -> Path:
    """The folder Hologram's caches share: HOLOGRAM_CACHE_DIR, else `user_cache_root()`."""
    env = os.environ.get("HOLOGRAM_CACHE_DIR")
    return Path(env).expanduser() if env else user_cache_root()


def user_cache_root() -> Path:
    """Where Hologram's caches live unless HOLOGRAM_CACHE_DIR says: the platform's user
    cache directory + `hologram` (each cache takes a folder in it)."""
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "hologram"
