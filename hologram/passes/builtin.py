"""The built-in passes, registered like any plugin's (entry point `builtin_passes`).

The pass modules are imported by the hook, not with this module: every plugin module is
imported whenever any kind of plugin is looked up, but a process that only loads bundles
never asks for passes, so this hook is never called there (hologram.registry.plugins,
`collected`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from hologram.core.hookspecs import hookimpl

if TYPE_CHECKING:
    from hologram.passes.api import Pass


@hookimpl
def hologram_register_passes(register: Callable[[Pass], None]) -> None:
    from hologram.passes import ir_cleanup, ir_fold, ir_fuse, ir_online, ir_rewrite, isa_passes

    # each module exports `PASSES: tuple[Pass, ...]`, registered in this order
    for module in (ir_fold, ir_rewrite, ir_cleanup, ir_fuse, ir_online, isa_passes):
        for p in module.PASSES:
            register(p)
