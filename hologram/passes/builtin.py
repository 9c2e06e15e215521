"""The built-in passes, registered like any plugin's (entry point `builtin_passes`)."""

from __future__ import annotations

from typing import Callable

from hologram.core.hookspecs import hookimpl
from hologram.passes import ir_cleanup, ir_fold, ir_fuse, ir_online, ir_rewrite, isa_passes
from hologram.passes.api import Pass

# Each module exports `PASSES: tuple[Pass, ...]`, registered in this order.
BUILTIN_MODULES = (ir_fold, ir_rewrite, ir_cleanup, ir_fuse, ir_online, isa_passes)


@hookimpl
def hologram_register_passes(register: Callable[[Pass], None]) -> None:
    for module in BUILTIN_MODULES:
        for p in module.PASSES:
            register(p)
