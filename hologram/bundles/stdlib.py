"""The standard library (`kernels/` of the repository) as the bundle `stdlib`.

A plugin module like any other (entry point `builtin_bundles`). An installed wheel
carries the bundle, built when the wheel was (setup.py's build step), beside this module;
a source checkout (an editable install) has `kernels/` instead, and builds the bundle on
first use into the cache, under a digest of the documents so an edited kernel gives a
new bundle. `hologram.load_bundle("stdlib")` works either way.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

from hologram.core.files import cache_root
from hologram.bundles.manifest import hologram_version
from hologram.core.hookspecs import BundleRef, hookimpl

NAME = "stdlib"
HERE = Path(__file__).resolve().parent
CHECKOUT_KERNELS = HERE.parent.parent / "kernels"  # hologram/bundles/ -> the repository root


def shipped() -> Path | None:
    """The bundle a wheel carries, or None."""
    found = sorted(HERE.glob(f"{NAME}-*.hgb"))
    return found[-1] if found else None


def documents(folder: Path = CHECKOUT_KERNELS) -> list[Path]:
    return sorted(p for p in folder.glob("*.toml") if p.is_file()) if folder.is_dir() else []


def checkout_bundle(version: str, folder: Path = CHECKOUT_KERNELS) -> tuple[Path, Callable[[], None]]:
    """Where a source checkout's stdlib bundle lives in the cache (under the documents'
    digest), and the function that builds it there."""
    digest = hashlib.sha256()
    for doc in documents(folder):
        digest.update(doc.name.encode() + b"\0" + doc.read_bytes() + b"\0")
    path = cache_root() / "bundles" / digest.hexdigest()[:16] / f"{NAME}-{version}.hgb"

    def make() -> None:
        from hologram.bundles.build import build  # the compiler, only for this first build

        path.parent.mkdir(parents=True, exist_ok=True)
        build([folder], NAME, version, path, jobs=1)
    return path, make


@hookimpl
def hologram_register_bundles(register: Callable[[BundleRef], None]) -> None:
    packaged = shipped()
    if packaged is not None:
        register(BundleRef(NAME, str(packaged)))
    elif documents():
        path, make = checkout_bundle(hologram_version())
        register(BundleRef(NAME, str(path), make))
