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

from typing import Callable, Mapping, Sequence

import pluggy

from hologram.core.values import Value

PROJECT = "hologram"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class BodyKey(Value):
    """A kernel-document key a translator handles in place of `body` (docs/plugins.md,
    "Document keys"): with it registered, `circuit = "..."` in a TOML, YAML or JSON
    kernel is accepted, and the schema hands the kernel over.

    `build(header) -> KernelDef`: `header` is the kernel as the document declares it, its
    `body` the key's string and its `origin` where that string sits in the file (so an
    error inside it points at the file's line and column, as body errors do); the result
    is the kernel to compile. `interface`: the key's value defines the inputs and outputs
    itself, so the document must not declare them. `summary` says what the value is, for
    the schema's hints."""

    __slots__ = ("key", "summary", "build", "interface")
    key: str
    summary: str
    build: Callable[[object], object]
    interface: bool

    def __init__(self, key: str, summary: str, build: Callable[[object], object], interface: bool = False) -> None:
        self._init(key=key, summary=summary, build=build, interface=interface)


# the form of `Translator.parse` this hologram calls by default and the newest it knows
# (docs/plugins.md, "Translators"): 1 `parse(text, file)`, 2 `parse(text, file, keys)`
TRANSLATOR_APIS = (1, 2)


class Translator(Value, uncompared=("cases",)):
    """Turns source text of one format into kernel definitions.

    parse(text, file, keys) -> list of KernelDef (hologram.translator); raises
    DocumentError with a span on malformed input. `keys` maps the document keys plugins
    handle in place of `body` (`BodyKey`, by name) to their handlers: hand them to
    `kernels_from_mapping` when the format is read through the schema. `api` is the form
    of `parse`: 2, as above; 1 (the default, deprecated) `parse(text, file)`, without
    the keys. `body_keys`: document keys this translator's plugin handles inside every
    kernel document (`BodyKey`). `cases(cfg)`, when given, is a hypothesis strategy of
    `hologram.testing.KernelCase`s written in what the plugin adds (documents with its
    keys, say), with their expected outputs: `hologram diff-test` mixes them into what
    it draws (called only there; import hypothesis in it). `claims(text)`, when given,
    says whether a file with one of the extensions holds kernels at all: a folder of
    sources (a bundle build) skips the files it does not claim, as the Python
    translator does a module without kernels; None claims every file. `declaring`,
    when given, says how a file of this format declares a kernel ("decorate a function
    with @hologram.kernel"): the hint when `parse` finds none. `decorated(text, file,
    line, options)`, when given (the `python` format's), is the kernel of the function
    whose definition starts at `line` of the running module `text`, with `options` (the
    keyword arguments name, version, reassociate as `@hologram.kernel` received them,
    those given) in place of whatever its decorator's source says."""

    __slots__ = ("name", "extensions", "parse", "body_keys", "cases", "claims", "declaring", "api", "decorated")
    name: str
    extensions: tuple[str, ...]
    parse: Callable[..., Sequence[object]]
    body_keys: tuple[BodyKey, ...]
    cases: Callable[[object], object] | None
    claims: Callable[[str], bool] | None
    declaring: str | None
    api: int
    decorated: Callable[[str, str, int, Mapping[str, object]], object] | None

    # the optional parts are keywords: a plugin names what it adds, so adding one here
    # never shifts another plugin's positional argument into the wrong field
    def __init__(self, name: str, extensions: tuple[str, ...], parse: Callable[..., Sequence[object]], *,
                 body_keys: tuple[BodyKey, ...] = (), cases: Callable[[object], object] | None = None,
                 claims: Callable[[str], bool] | None = None, declaring: str | None = None, api: int = 1,
                 decorated: Callable[[str, str, int, Mapping[str, object]], object] | None = None) -> None:
        self._init(name=name, extensions=extensions, parse=parse, body_keys=body_keys, cases=cases, claims=claims,
                   declaring=declaring, api=api, decorated=decorated)

    def with_extensions(self, extensions: tuple[str, ...]) -> Translator:
        """This translator, claiming `extensions` instead."""
        return Translator(self.name, extensions, self.parse, body_keys=self.body_keys, cases=self.cases,
                          claims=self.claims, declaring=self.declaring, api=self.api, decorated=self.decorated)

    def read(self, text: str, file: str, keys: Mapping[str, BodyKey]) -> Sequence[object]:
        """`parse` called in the form `api` declares."""
        if self.api == 1:
            return self.parse(text, file)
        return self.parse(text, file, keys)

    def no_kernels_hint(self) -> str:
        """The hint for a file of this format that declares no kernel."""
        return self.declaring or (f"a {self.name} document ({', '.join(self.extensions)}) must declare at least "
                                  "one kernel, as the plugin that reads it documents")


class BundleRef(Value, uncompared=("make",)):
    """A bundle a plugin ships: `name` resolvable by `hologram.load_bundle(name)`.

    `path` is the `.hgb` file, named `NAME-VERSION.hgb` (the file's manifest must say
    the same). A file the plugin's installed package carries is trusted: its native code
    may run. `make`, when given, builds the bundle at its first load instead (a package
    used from its source checkout), into a cache folder anyone able to write it could
    fill: that file is never trusted, is held to `sources` (the folder of documents it
    is built from: its source members must be those files) and is built again when
    missing, damaged or different. `make()` writes `path` and returns None, or returns
    the bundle's bytes when `path` cannot be written (the load then uses them)."""

    __slots__ = ("name", "path", "make", "sources")
    name: str
    path: str
    make: Callable[[], bytes | None] | None
    sources: str | None

    def __init__(self, name: str, path: str, make: Callable[[], bytes | None] | None = None,
                 sources: str | None = None) -> None:
        self._init(name=name, path=path, make=make, sources=sources)


@hookspec
def hologram_register_translators(register: Callable[[Translator], None]) -> None:
    """Register source-format translators (TOML, YAML, JSON, ...)."""


@hookspec
def hologram_register_passes(register: Callable[[object], None]) -> None:
    """Register optimizer passes (IR or ISA level)."""


@hookspec
def hologram_register_backends(register: Callable[[object], None]) -> None:
    """Register backend objects: instances of subclasses of hologram.backend.Backend (docs/backends.md)."""


@hookspec
def hologram_register_bundles(register: Callable[[BundleRef], None]) -> None:
    """Register precompiled bundles shipped by the plugin."""


class CollectionAdapter(Value):
    """Kernels called with another library's lazy collections (docs/plugins.md,
    "Collections"): `claims(value)` says whether an argument is one of them (cheaply, without
    importing that library); `call(kernel, values, out, cast, mapped)` then takes the whole
    call, its arguments bound to the kernel's inputs by name (`mapped`: it came through
    `kernel.map`), and returns what the call returns, e.g. lazy arrays (hologram.dask)."""

    __slots__ = ("name", "claims", "call")
    name: str
    claims: Callable[[object], bool]
    call: Callable[..., object]

    def __init__(self, name: str, claims: Callable[[object], bool], call: Callable[..., object]) -> None:
        self._init(name=name, claims=claims, call=call)


@hookspec
def hologram_register_collections(register: Callable[[CollectionAdapter], None]) -> None:
    """Register adapters for lazy collections a kernel may be called with (Dask arrays)."""


@hookspec
def hologram_register_commands(cli: object) -> None:
    """Add subcommands to the `hologram` CLI. `cli` is the argparse subparsers object:
    `p = cli.add_parser("name", help=...)`, then `p.set_defaults(func=handler)` where
    `handler(args) -> int` returns the exit status."""
