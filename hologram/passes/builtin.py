"""The built-in passes, registered like any plugin's (entry point `builtin_passes`)."""

from __future__ import annotations

import importlib
from typing import Callable

from ..core.hookspecs import hookimpl
from .api import Pass

# Each module exports `PASSES: tuple[Pass, ...]`, registered in this order.
BUILTIN_MODULES: tuple[str, ...] = ("ir_fold", "ir_rewrite", "ir_cleanup", "ir_fuse", "ir_online", "isa_passes")


@hookimpl
def hologram_register_passes(register: Callable[[Pass], None]) -> None:
    for module in BUILTIN_MODULES:
        for p in importlib.import_module(f"{__package__}.{module}").PASSES:
            register(p)
