"""A content-addressed disk cache of what a backend builds, one file per key.

A backend subclasses `DiskCache` with its entry format (`encode`, `decode`), the file
suffix and the largest entry it ever writes; this class does the rest, the same for
every backend:

- an entry is the file `<sha256(key)[:40]><suffix>` under `root`;
- a read goes through `read_regular_file` (at most `max_entry_bytes`): anything at the
  path that is not a regular file of that size (a FIFO, which would block the reader
  forever; a link to /dev/zero; a sparse terabyte) is deleted and is a miss, and so is
  an entry `decode` refuses (corrupt, another key): the next `store` puts a real entry
  in its place;
- a write goes to a temporary file in the same folder, published with `os.replace`, so
  a reader sees a whole entry or none, even with concurrent writers;
- every failure is a miss: a cache that cannot be read or written (full disk, read-only
  home) costs only build time.

`decode` must check that an entry is whole and stored under exactly its key (a hash
collision, a file copied from elsewhere), returning None otherwise.
"""

from __future__ import annotations

import abc
import hashlib
import os
from pathlib import Path
from typing import Generic, TypeVar

from hologram.core.files import UnreadableFileError, read_regular_file

E = TypeVar("E")


class DiskCache(abc.ABC, Generic[E]):
    """Entries of type E under `root`, one file per key."""

    suffix: str = ".bin"  # the entries' file suffix (a backend's own: `.hgo`, `.hgcubin`)
    max_entry_bytes: int = 64 << 20  # anything larger at an entry's path is not an entry

    def __init__(self, root: Path):
        self.root = Path(root)

    @abc.abstractmethod
    def encode(self, key: str, entry: E) -> bytes:
        """The bytes of `entry` stored under `key`."""

    @abc.abstractmethod
    def decode(self, key: str, data: bytes) -> E | None:
        """The entry in `data` if it is intact and stored under exactly `key`, else None."""

    def path(self, key: str) -> Path:
        return self.root / (hashlib.sha256(key.encode()).hexdigest()[:40] + self.suffix)

    def load(self, key: str) -> E | None:
        path = self.path(key)
        try:
            data = read_regular_file(path, self.max_entry_bytes)
        except UnreadableFileError:  # not ours to read: out of the way, for the next store
            _unlink(path)
            return None
        except OSError:
            return None
        entry = self.decode(key, data)
        if entry is None:
            _unlink(path)
        return entry

    def discard(self, key: str) -> None:
        _unlink(self.path(key))

    def store(self, key: str, entry: E) -> bool:
        """Publish `entry` atomically; True when it was written."""
        import tempfile  # only a writer needs it (~3 ms of imports a process that only reads skips)

        data = self.encode(key, entry)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=self.suffix, dir=self.root)
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
