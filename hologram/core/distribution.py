"""What the installed distributions say about themselves: versions and entry points.

Read straight from the `*.dist-info` and `*.egg-info` folders in the directories of
sys.path, as importlib.metadata reads them, without importing it: importlib.metadata
costs ~16 ms (email, csv, zipfile, ...), a third of `import numpy`, and every process
that loads a plugin or a bundle would pay it. Only what Hologram asks is read: the
entry points of one group, and a distribution's name and version. A distribution inside
a zip file on sys.path is not seen (pip, uv, conda and editable installs all write
folders). As in importlib.metadata, when one distribution is found twice (an
`.egg-info` of a source checkout in the working directory, say), the first on sys.path
wins.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from typing import Any, Iterator, NamedTuple

_SUFFIXES = (".dist-info", ".egg-info")


class EntryPoint(NamedTuple):
    """`name = value` in `group` of the distribution `distribution` (`version`)."""

    name: str
    value: str  # "module" or "module:attribute.path", extras dropped
    group: str
    distribution: str | None = None
    version: str | None = None

    def load(self) -> Any:
        """Import the module and follow the attribute path (what `value` names)."""
        module, _, attribute = self.value.partition(":")
        obj = importlib.import_module(module.strip())
        for part in filter(None, attribute.strip().split(".")):
            obj = getattr(obj, part)
        return obj


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _info_folders() -> Iterator[tuple[str, str]]:
    """(normalized name, folder) of every distribution on sys.path, the first of each name."""
    seen: set[str] = set()
    for entry in sys.path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:  # not a directory (a zip, a missing folder)
            continue
        for folder in names:
            if not folder.endswith(_SUFFIXES):
                continue
            key = _normalized(folder.rsplit(".", 1)[0].split("-", 1)[0])
            if key not in seen:
                seen.add(key)
                yield key, os.path.join(entry or ".", folder)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _name_and_version(folder: str) -> tuple[str | None, str | None]:
    """The Name and Version headers of a distribution's metadata."""
    text = _read(os.path.join(folder, "METADATA" if folder.endswith(".dist-info") else "PKG-INFO"))
    headers: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line; the description follows
        key, sep, value = line.partition(":")
        if sep and key in ("Name", "Version"):
            headers.setdefault(key, value.strip())
    return headers.get("Name"), headers.get("Version")


def entry_points(group: str) -> list[EntryPoint]:
    """Every entry point of `group` in the installed distributions."""
    found = []
    for _, folder in _info_folders():
        text = _read(os.path.join(folder, "entry_points.txt"))
        if f"[{group}]" not in text:
            continue
        name, version = _name_and_version(folder)
        section = None
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1].strip()
            elif section == group and "=" in line:
                key, _, value = line.partition("=")
                value = value.split("[", 1)[0].strip()  # `module:attr [extra]`: extras are not ours to check
                found.append(EntryPoint(key.strip(), value, group, name, version))
    return found


def version_of(distribution: str) -> str | None:
    """The installed version of `distribution`, or None when it is not installed."""
    want = _normalized(distribution)
    for key, folder in _info_folders():
        if key == want:
            return _name_and_version(folder)[1]
    return None


def hologram_version() -> str:
    """The installed hologram-kernels version ("0+unknown" for a source tree never installed)."""
    return version_of("hologram-kernels") or "0+unknown"
