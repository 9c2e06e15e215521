"""The hooks a Hologram plugin can implement, in the `register(...)` callback style.

A plugin is a module named by an entry point in the `hologram` group. It implements any
of these hooks with `@hologram.hookimpl`; each hook receives a `register` callable (or,
for commands, the CLI's subcommand registry) and calls it once per thing it provides:

    import hologram

    @hologram.hookimpl
    def hologram_register_backends(register):
        register(MyBackend())
"""

from __future__ import annotations

from typing import Callable, Sequence

import attrs
import pluggy

PROJECT = "hologram"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@attrs.frozen
class Translator:
    """Turns source text of one format into kernel definitions.

    parse(text, file) -> list of hologram.dsl.document.KernelDef; raises DocumentError
    with a span on malformed input. `claims(text)`, when given, says whether a file with
    one of the extensions holds kernels at all: a folder of sources (a bundle build)
    skips the files it does not claim, as the Python translator does a module without
    kernels; None claims every file."""

    name: str
    extensions: tuple[str, ...]
    parse: Callable[[str, str], Sequence[object]]
    claims: Callable[[str], bool] | None = None


@attrs.frozen
class BundleRef:
    """A bundle a plugin ships: `name` resolvable by `hologram.load_bundle(name)`.

    `path` is the `.hgb` file (named `NAME-VERSION.hgb`, so finding it by version reads
    no archive). `make`, when given, writes that file if it is missing: a package used
    from a source checkout builds its bundle on first use instead of shipping it."""

    name: str
    path: str
    make: Callable[[], None] | None = attrs.field(default=None, eq=False)


@hookspec
def hologram_register_translators(register: Callable[[Translator], None]) -> None:
    """Register source-format translators (TOML, YAML, JSON, ...)."""


@hookspec
def hologram_register_passes(register: Callable[[object], None]) -> None:
    """Register optimizer passes (IR or ISA level)."""


@hookspec
def hologram_register_backends(register: Callable[[object], None]) -> None:
    """Register backend objects implementing hologram.runtime.backend.Backend."""


@hookspec
def hologram_register_bundles(register: Callable[[BundleRef], None]) -> None:
    """Register precompiled bundles shipped by the plugin."""


@hookspec
def hologram_register_commands(cli: object) -> None:
    """Add subcommands to the `hologram` CLI. `cli` is the argparse subparsers object:
    `p = cli.add_parser("name", help=...)`, then `p.set_defaults(func=handler)` where
    `handler(args) -> int` returns the exit status."""
