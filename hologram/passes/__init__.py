"""The optimizer: passes over the kernel IR and the ISA program, and the manager that
orders and runs them (see docs/passes.md).

`from hologram.passes import Pass` (what a plugin registers) imports hologram.passes.api
when first asked for, so importing a submodule (the built-in passes' plugin module, which
every process that looks up a plugin imports) costs nothing more."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hologram.passes.api import LEVELS, PIPELINES, Pass

__all__ = ["LEVELS", "PIPELINES", "Pass"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'hologram.passes' has no attribute {name!r}")
    from hologram.passes import api

    return getattr(api, name)
