"""The standard library (`kernels/` of the repository) as the bundle `stdlib`.

A plugin module like any other (entry point `builtin_bundles`), shipping its bundle the
way docs/plugins.md tells third parties to (hologram.bundles.shipping): an installed
wheel carries it beside this module, built by setup.py; a source checkout (an editable
install) has `kernels/` instead and builds it at the first load into the cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from hologram.bundles.shipping import bundle_ref
from hologram.core.distribution import hologram_version
from hologram.core.hookspecs import BundleRef, hookimpl

NAME = "stdlib"
HERE = Path(__file__).resolve().parent
CHECKOUT_KERNELS = HERE.parent.parent / "kernels"  # hologram/bundles/ -> the repository root


@hookimpl
def hologram_register_bundles(register: Callable[[BundleRef], None]) -> None:
    ref = bundle_ref(NAME, hologram_version(), HERE, CHECKOUT_KERNELS)
    if ref is not None:
        register(ref)
