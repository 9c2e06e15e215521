"""The plugin manager: finds plugins, calls their hooks, collects what they register.

Plugins are modules named by entry points of the group `hologram` (the in-repo
translators and backends included: the runtime never imports them by name). Loading is
forgiving: a plugin that fails to import, implements a hook that does not exist, or
whose hook raises is reported (a `PluginWarning`, and a row with its error in
`plugin_report()` / `hologram plugins`) and skipped; it never takes Hologram down.

`HOLOGRAM_PLUGINS` restricts which entry points load, as a comma-separated list:

    unset or empty        every installed plugin
    interp,my_translator  only these (plus `builtin_translators`, `builtin_passes`,
                          `builtin_bundles` and `builtin_dask`, always)
    -cpu_llvm             everything except these
    interp,-builtin_translators
                          exclusions win; naming `-builtin_translators` is the only
                          way to drop the TOML/YAML/JSON translators, `-builtin_passes`
                          the only way to drop the built-in optimizer passes

A manager is built once per value of `HOLOGRAM_PLUGINS` and cached (`reset()` drops
the cache, for tests). What the plugins registered is collected into a `Registry`
lazily, and collected again whenever a plugin is registered or unregistered, so
`plugin_manager().register(obj, name=...)` is all a test needs to add a plugin.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import warnings
from types import FunctionType, MappingProxyType, MethodType, ModuleType
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import pluggy

from hologram.backend import API_VERSION, Backend, Capabilities
from hologram.backend.lazy import BackendTable, LazyBackend
from hologram.core import distribution, forks, hookspecs
from hologram.core.distribution import EntryPoint
from hologram.core.errors import PluginError, did_you_mean
from hologram.core.hookspecs import TRANSLATOR_APIS, BodyKey, BundleRef, CollectionAdapter, Translator
from hologram.core.values import Value

if TYPE_CHECKING:
    from hologram.passes.api import Pass

GROUP = "hologram"
ENV = "HOLOGRAM_PLUGINS"
BUILTIN = "builtin_translators"
BUILTINS = frozenset({BUILTIN, "builtin_passes", "builtin_bundles", "builtin_dask"})  # loaded even when HOLOGRAM_PLUGINS lists others


class PluginWarning(UserWarning):
    """A plugin could not be loaded or misbehaved and was skipped."""


# ----------------------------------------------------------------------------- values
class PluginInfo(Value):
    """One row of `plugin_report()`.

    status: 'ok', 'failed' (import error, bad hook, a hook raised), 'disabled' (left
    out by HOLOGRAM_PLUGINS) or 'missing' (named in HOLOGRAM_PLUGINS, not installed).
    registered: what the plugin provided, e.g. ('translator toml (.toml)', 'backend interp').
    """

    __slots__ = ("name", "distribution", "version", "registered", "status", "error")
    name: str
    distribution: str | None
    version: str | None
    registered: tuple[str, ...]
    status: str
    error: str | None

    def __init__(self, name: str, distribution: str | None, version: str | None, registered: tuple[str, ...],
                 status: str, error: str | None = None) -> None:
        self._init(name=name, distribution=distribution, version=version, registered=registered, status=status,
                   error=error)

    @property
    def origin(self) -> str:
        """`hologram-backend-interp 0.1.0`, or '-' for a plugin registered in code."""
        if self.distribution is None:
            return self.version or "-"
        return f"{self.distribution} {self.version}" if self.version else self.distribution


class Registry(Value):
    """Everything the loaded plugins registered, by kind. Names are unique per kind:
    when two plugins claim one name the first (in load order) keeps it and the second
    is reported as failed."""

    __slots__ = ("translators", "extensions", "body_keys", "backends", "passes", "bundles", "collections", "report")
    translators: Mapping[str, Translator]
    extensions: Mapping[str, Translator]  # '.toml' -> translator
    body_keys: Mapping[str, BodyKey]  # 'circuit' -> what handles it in kernel documents
    backends: BackendTable  # name -> Backend, built at its first look-up
    passes: tuple[Pass, ...]  # in registration order
    bundles: Mapping[str, BundleRef]
    collections: Mapping[str, CollectionAdapter]  # lazy collections a kernel may be called with
    report: tuple[PluginInfo, ...]

    def __init__(self, translators: Mapping[str, Translator], extensions: Mapping[str, Translator],
                 body_keys: Mapping[str, BodyKey], backends: BackendTable, passes: tuple[Pass, ...],
                 bundles: Mapping[str, BundleRef], collections: Mapping[str, CollectionAdapter],
                 report: tuple[PluginInfo, ...]) -> None:
        self._init(translators=translators, extensions=extensions, body_keys=body_keys, backends=backends,
                   passes=passes, bundles=bundles, collections=collections, report=report)


class Selection(Value):
    """A parsed HOLOGRAM_PLUGINS value. `include is None` means every plugin."""

    __slots__ = ("include", "exclude")
    include: frozenset[str] | None
    exclude: frozenset[str]

    def __init__(self, include: frozenset[str] | None, exclude: frozenset[str]) -> None:
        self._init(include=include, exclude=exclude)

    @staticmethod
    def parse(value: str | None) -> "Selection":
        names = [n.strip() for n in (value or "").split(",") if n.strip()]
        include = frozenset(n for n in names if not n.startswith("-"))
        exclude = frozenset(n[1:].strip() for n in names if n.startswith("-"))
        return Selection(include | BUILTINS if include else None, exclude)

    def allows(self, name: str) -> bool:
        return name not in self.exclude and (self.include is None or name in self.include)

    @property
    def wanted(self) -> frozenset[str]:
        """Plugins asked for by name (excluding one that is not installed is no news)."""
        return (self.include or frozenset()) - BUILTINS


# ------------------------------------------------------------------ registration kinds
def _describe_translator(t: Translator) -> str:
    keys = "".join(f"; key {k.key}" for k in t.body_keys)
    return f"translator {t.name} ({', '.join(t.extensions)}{keys})"


def _check_translator(obj: Any) -> Translator:
    if not isinstance(obj, Translator):
        raise PluginError(f"registered {type(obj).__name__!s} as a translator; expected hologram.core.hookspecs.Translator")
    if not obj.name or not isinstance(obj.name, str):
        raise PluginError("registered a translator without a name")
    exts = tuple(normalize_extension(e) for e in obj.extensions)
    if obj.api not in TRANSLATOR_APIS:
        raise PluginError(f"translator {obj.name!r} declares api={obj.api!r}; this hologram calls parse in the "
                          f"forms {', '.join(map(str, TRANSLATOR_APIS))} (docs/plugins.md, \"Translators\")")
    if obj.api == 1:
        warnings.warn(f"translator {obj.name!r} takes parse(text, file), which is deprecated: declare api=2 and "
                      "take parse(text, file, keys), the document keys plugins handle (docs/plugins.md, "
                      "\"Translators\")", DeprecationWarning, stacklevel=2)
    if obj.decorated is not None and not callable(obj.decorated):
        raise PluginError(f"translator {obj.name!r} has decorated={obj.decorated!r}; expected a callable or None")
    for key in obj.body_keys:
        if not isinstance(key, BodyKey) or not isinstance(key.key, str) or not key.key.isidentifier():
            raise PluginError(f"translator {obj.name!r} declares a document key {key!r}; expected a "
                              "hologram.core.hookspecs.BodyKey named by an identifier")
    return obj.with_extensions(exts)


def _check_backend(obj: Any) -> Backend | LazyBackend:
    """A backend instance, or a LazyBackend (whose instance is held to this when built)."""
    if isinstance(obj, LazyBackend):
        if not isinstance(obj.name, str) or not obj.name:
            raise PluginError(f"registered {obj!r}: a lazy backend needs a name")
        if not isinstance(obj.priority, (int, float)) or isinstance(obj.priority, bool):
            raise PluginError(f"lazy backend {obj.name!r} has priority {obj.priority!r}; expected a number")
        if not callable(obj.load) and not (isinstance(obj.load, str) and _MODULE_CLASS.fullmatch(obj.load)):
            raise PluginError(f"lazy backend {obj.name!r} has load={obj.load!r}; expected a 'module:Class' string "
                              "or a callable returning the backend")
        return obj
    if not isinstance(obj, Backend):
        raise PluginError(f"registered {type(obj).__name__} as a backend; expected an instance of a subclass of "
                          f"hologram.backend.Backend (the backend SDK, API version {API_VERSION}: docs/backends.md)")
    if not isinstance(getattr(obj, "name", None), str) or not obj.name:
        raise PluginError(f"backend {type(obj).__name__} has no name")
    if not isinstance(getattr(obj, "priority", None), (int, float)) or isinstance(obj.priority, bool):
        raise PluginError(f"backend {obj.name!r} has priority {getattr(obj, 'priority', None)!r}; expected a number")
    if not isinstance(obj.capabilities, Capabilities):
        raise PluginError(f"backend {obj.name!r} declares capabilities {obj.capabilities!r}; expected a "
                          "hologram.backend.Capabilities")
    return obj


_MODULE_CLASS = re.compile(r"[\w.]+:[\w.]+")


def _check_bundle(obj: Any) -> BundleRef:
    if not isinstance(obj, BundleRef):
        raise PluginError(f"registered {type(obj).__name__} as a bundle; expected hologram.core.hookspecs.BundleRef")
    return obj


def _check_collection(obj: Any) -> CollectionAdapter:
    if not isinstance(obj, CollectionAdapter):
        raise PluginError(f"registered {type(obj).__name__} as a collection adapter; expected "
                          "hologram.core.hookspecs.CollectionAdapter")
    if not callable(obj.claims) or not callable(obj.call):
        raise PluginError(f"collection adapter {obj.name!r} needs callables claims and call")
    return obj


def _check_pass(obj: Any) -> Pass:
    from hologram.passes.api import LEVELS, Pass  # the optimizer's API: imported when passes register

    if not isinstance(obj, Pass):
        raise PluginError(f"registered {type(obj).__name__} as a pass; expected hologram.passes.Pass")
    # Pass validates its fields when built; these catch one altered behind attrs' back
    if obj.level not in LEVELS:
        raise PluginError(f"pass {obj.name!r} has level {obj.level!r}; expected one of {', '.join(LEVELS)}")
    bad = [p for p in obj.pipelines if p not in ("O1", "O2")]
    if bad:
        raise PluginError(f"pass {obj.name!r} names pipelines {', '.join(map(repr, bad))}; expected O1 and/or O2")
    return obj


def _describe_pass(p: Pass) -> str:
    return f"pass {p.name} ({p.level}; {', '.join(p.pipelines) or 'by name only'})"


class _Kind(Value):
    """A register-style hook: what it registers (`noun`), how each object is checked,
    named and described in the report."""

    __slots__ = ("hook", "noun", "check", "key", "describe")
    hook: str
    noun: str
    check: Callable[[Any], Any]
    key: Callable[[Any], str]
    describe: Callable[[Any], str]

    def __init__(self, hook: str, noun: str, check: Callable[[Any], Any], key: Callable[[Any], str],
                 describe: Callable[[Any], str]) -> None:
        self._init(hook=hook, noun=noun, check=check, key=key, describe=describe)


# The register-style hooks, in the order they are called for each plugin.
KINDS: tuple[_Kind, ...] = (
    _Kind("hologram_register_translators", "translator", _check_translator, lambda t: t.name, _describe_translator),
    _Kind("hologram_register_backends", "backend", _check_backend, lambda b: b.name, lambda b: f"backend {b.name}"),
    _Kind("hologram_register_passes", "pass", _check_pass, lambda p: p.name, _describe_pass),
    _Kind("hologram_register_bundles", "bundle", _check_bundle, lambda b: b.name, lambda b: f"bundle {b.name}"),
    _Kind("hologram_register_collections", "collection", _check_collection, lambda c: c.name,
          lambda c: f"collections {c.name}"),
)
KIND = {k.noun: k for k in KINDS}
NOUNS = frozenset(KIND)
COMMANDS_HOOK = "hologram_register_commands"


def normalize_extension(ext: str) -> str:
    ext = ext.strip().lower()
    return ext if ext.startswith(".") else "." + ext


# --------------------------------------------------------------------- the manager
class HologramPluginManager(pluggy.PluginManager):
    """pluggy's manager for project `hologram`, which also remembers where each plugin
    came from, the plugins that could not load, and the collected `Registry`."""

    def __init__(self, selection: Selection = Selection(None, frozenset())):
        super().__init__(hookspecs.PROJECT)
        self._marker = hookspecs.PROJECT + "_impl"  # the attribute pluggy's HookimplMarker sets
        self.add_hookspecs(hookspecs)
        self.selection = selection
        self._origins: dict[str, tuple[str | None, str | None]] = {}
        self._failures: list[PluginInfo] = []
        self._tables: dict[str, list[tuple[str, Any]]] = {}  # noun -> (plugin name, object), collected kinds
        self._vetted: set[str] = set()  # plugins whose hooks were checked against the specs
        self._registries: dict[frozenset[str], Registry] = {}  # by the kinds they hold
        self._commands: dict[str, tuple[str, ...]] = {}  # plugin -> the subcommands it added
        self._lock = threading.RLock()
        forks.renew_in_child(self, "_lock", threading.RLock)

    # registering anything invalidates what was collected
    def register(self, plugin: Any, name: str | None = None) -> str | None:
        with self._lock:
            self._forget()
            return super().register(plugin, name)

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        # pluggy looks at every name of a plugin through inspect.getattr_static (~10 µs
        # each, ~2.5 ms for the installed plugins' modules at every start); a module's
        # attribute that is no function or method carrying our marker is no hook, and is
        # passed over here by a dict look-up. Anything else is pluggy's to judge.
        if type(plugin) is ModuleType:
            found = plugin.__dict__.get(name)
            if not isinstance(found, (FunctionType, MethodType)) or not hasattr(found, self._marker):
                return None
        return super().parse_hookimpl_opts(plugin, name)

    def unregister(self, plugin: Any = None, name: str | None = None) -> Any:
        with self._lock:
            self._forget()
            return super().unregister(plugin, name)

    def _forget(self) -> None:
        self._tables.clear()
        self._vetted.clear()
        self._registries.clear()

    @property
    def registry(self) -> Registry:
        """Everything every plugin registers."""
        return self.collected(NOUNS)

    def collected(self, nouns: Iterable[str]) -> Registry:
        """What the plugins register of the kinds `nouns` ('backend', 'pass', ...); the
        other tables are empty. A kind's hooks are called the first time it is asked for:
        loading a bundle asks for backends, so the passes are never registered, nor their
        modules imported (docs/plugins.md, "When hooks are called")."""
        wanted = frozenset(nouns)
        with self._lock:
            for kind in KINDS:
                if kind.noun in wanted and kind.noun not in self._tables:
                    self._collect_kind(kind)
            found = self._registries.get(wanted)
            if found is None:
                found = self._registries[wanted] = self._assemble(wanted)
            return found

    # -- loading -----------------------------------------------------------------
    def load_entry_points(self, entry_points: Iterable[EntryPoint] | None = None) -> None:
        """Load and register every allowed entry point of group `hologram`."""
        eps = distribution.entry_points(GROUP) if entry_points is None else entry_points
        seen: dict[str, EntryPoint] = {}
        for ep in sorted(eps, key=lambda e: e.name):
            origin = _dist_of(ep)
            if ep.name in seen:
                # the same distribution found twice on sys.path (an egg-info in the cwd)
                if seen[ep.name].value != ep.value:
                    self._fail(ep.name, origin, f"entry point name already used by {seen[ep.name].value!r}")
                continue
            seen[ep.name] = ep
            if not self.selection.allows(ep.name):
                self._failures.append(PluginInfo(ep.name, *origin, (), "disabled", f"left out by {ENV}"))
                continue
            try:
                plugin = ep.load()
            except (Exception, SystemExit) as exc:
                self._fail(ep.name, origin, f"failed to import {ep.value!r}: {type(exc).__name__}: {exc}")
                continue
            try:
                self.register(plugin, name=ep.name)
            except Exception as exc:  # pluggy's ValueError / PluginValidationError
                self._fail(ep.name, origin, f"cannot register {ep.value!r}: {exc}")
                continue
            self._origins[ep.name] = origin
        for name in sorted(self.selection.wanted - seen.keys()):
            msg = f"named in {ENV} but not installed{did_you_mean(name, seen)}"
            self._failures.append(PluginInfo(name, None, None, (), "missing", msg))
            warnings.warn(f"hologram: plugin {name!r} {msg}", PluginWarning, stacklevel=2)

    def _fail(self, name: str, origin: tuple[str | None, str | None], error: str) -> None:
        self._failures.append(PluginInfo(name, *origin, (), "failed", error))
        warnings.warn(f"hologram: plugin {name!r} skipped: {error}", PluginWarning, stacklevel=3)

    # -- collecting --------------------------------------------------------------
    def _collect_kind(self, kind: _Kind) -> None:
        """Call `kind`'s hook of every plugin, in load order; a plugin whose hook raises,
        registers a bad object or claims a name another plugin holds is unregistered,
        and whatever it registered of other kinds is dropped with it."""
        table: list[tuple[str, Any]] = []
        for name, plugin in list(self.list_name_plugin()):
            if plugin is None or not self._vet(name, plugin):  # blocked, or just failed
                continue
            staged: list[Any] = []
            try:
                for impl in getattr(self.hook, kind.hook).get_hookimpls():
                    if impl.plugin is plugin:
                        impl.function(**{a: _stager(kind, staged) for a in impl.argnames})
                owners = {kind.key(obj): by for by, obj in table}
                keys = [kind.key(obj) for obj in staged]
                for key in keys:
                    if key in owners or keys.count(key) > 1:
                        raise PluginError(f"{kind.noun} {key!r} is already registered by plugin "
                                          f"{owners.get(key, name)!r}")
            except Exception as exc:
                self._drop(name, plugin, exc)
                continue
            table += [(name, obj) for obj in staged]
        self._tables[kind.noun] = table

    def _vet(self, name: str, plugin: Any) -> bool:
        """Whether `plugin` implements only hooks that exist (checked once; else dropped)."""
        if name in self._vetted:
            return True
        for caller in self.get_hookcallers(plugin) or ():
            if not caller.has_spec():
                known = [k.hook for k in KINDS] + [COMMANDS_HOOK]
                self._drop(name, plugin, PluginError(f"implements unknown hook {caller.name!r}"
                                                     f"{did_you_mean(caller.name, known)}"))
                return False
        self._vetted.add(name)
        return True

    def _drop(self, name: str, plugin: Any, exc: Exception) -> None:
        error = exc.message if isinstance(exc, PluginError) else f"{type(exc).__name__}: {exc}"
        origin = self._origins.get(name) or (None, _module_version(plugin))
        super().unregister(plugin)  # not self.unregister: that would forget every kind collected
        self._fail(name, origin, error)
        for noun, table in self._tables.items():
            self._tables[noun] = [(by, obj) for by, obj in table if by != name]
        self._registries.clear()

    def _backend_failed(self, name: str, plugin_name: str, exc: Exception) -> None:
        """A lazy backend failed to build: its plugin is dropped, as when its hook raises."""
        with self._lock:
            plugin = self.get_plugin(plugin_name)
            if plugin is not None:
                error = exc.message if isinstance(exc, PluginError) else f"{type(exc).__name__}: {exc}"
                self._drop(plugin_name, plugin, PluginError(f"backend {name!r} failed to load: {error}"))

    def _assemble(self, nouns: frozenset[str]) -> Registry:
        accepted = {k.noun: self._tables.get(k.noun, []) if k.noun in nouns else [] for k in KINDS}
        rows = []
        for name, plugin in list(self.list_name_plugin()):
            if plugin is None:
                continue
            things = tuple(k.describe(obj) for k in KINDS for by, obj in accepted[k.noun] if by == name)
            if any(c.name == COMMANDS_HOOK for c in self.get_hookcallers(plugin) or ()):
                things += ("commands",)
            rows.append(PluginInfo(name, *(self._origins.get(name) or (None, _module_version(plugin))), things, "ok"))

        def table(noun: str) -> Mapping[str, Any]:
            return MappingProxyType({KIND[noun].key(obj): obj for _, obj in accepted[noun]})

        translators = table("translator")
        extensions: dict[str, Translator] = {}
        keys: dict[str, BodyKey] = {}
        for t in translators.values():
            for ext in t.extensions:
                extensions.setdefault(ext, t)
            for key in t.body_keys:
                keys.setdefault(key.key, key)
        return Registry(
            translators=translators,
            extensions=MappingProxyType(extensions),
            body_keys=MappingProxyType(keys),
            backends=BackendTable({b.name: (by, b) for by, b in accepted["backend"]}, _check_backend,
                                  self._backend_failed),
            passes=tuple(obj for _, obj in accepted["pass"]),
            bundles=table("bundle"),
            collections=table("collection"),
            report=tuple(rows) + tuple(self._failures),
        )

    def commands_of(self, plugin: str) -> tuple[str, ...]:
        """The subcommands `plugin` added through `call_commands` (none before it ran)."""
        return self._commands.get(plugin, ())

    def call_commands(self, cli: Any) -> list[str]:
        """Let every plugin add CLI subcommands; returns the errors of those that raised
        (each also warned about) so the CLI can go on without them."""
        self.registry  # collecting unregisters plugins that failed: they add no commands
        errors = []
        for impl in reversed(self.hook.hologram_register_commands.get_hookimpls()):
            before = set(getattr(cli, "choices", ()))
            try:
                impl.function(**{a: cli for a in impl.argnames})
                self._commands[impl.plugin_name] = tuple(c for c in getattr(cli, "choices", ()) if c not in before)
            except Exception as exc:
                msg = f"plugin {impl.plugin_name!r} failed to add its commands: {type(exc).__name__}: {exc}"
                warnings.warn(f"hologram: {msg}", PluginWarning, stacklevel=2)
                errors.append(msg)
        return errors


def _stager(kind: _Kind, staged: list[Any]) -> Callable[[Any], None]:
    def register(obj: Any) -> None:
        staged.append(kind.check(obj))
    register.__name__ = f"register_{kind.noun}"
    return register


def _dist_of(ep: EntryPoint) -> tuple[str | None, str | None]:
    """The distribution an entry point came from, when it says (ours do; one made by
    hand, or by importlib.metadata, does not)."""
    return getattr(ep, "distribution", None), getattr(ep, "version", None)


def _module_version(plugin: Any) -> str | None:
    v = getattr(plugin, "__version__", None)
    return str(v) if v is not None else None


# ------------------------------------------------------------------------- the cache
_MANAGERS: dict[str, HologramPluginManager] = {}
_CACHE_LOCK = threading.Lock()
forks.renew_in_child(sys.modules[__name__], "_CACHE_LOCK")


def plugin_manager() -> HologramPluginManager:
    """The manager for the current HOLOGRAM_PLUGINS value (built and cached on first use)."""
    key = os.environ.get(ENV, "")
    pm = _MANAGERS.get(key)
    if pm is None:
        with _CACHE_LOCK:
            pm = _MANAGERS.get(key)
            if pm is None:
                pm = HologramPluginManager(Selection.parse(key))
                pm.load_entry_points()
                _MANAGERS[key] = pm
    return pm


def reset() -> None:
    """Forget every cached manager: the next call loads plugins afresh."""
    with _CACHE_LOCK:
        _MANAGERS.clear()


def registry(nouns: Iterable[str] = NOUNS) -> Registry:
    """What the plugins register (of the kinds `nouns` only, when given: see `collected`)."""
    return plugin_manager().collected(nouns)


def plugin_report() -> tuple[PluginInfo, ...]:
    """Every plugin seen: loaded ones in load order, then failed, disabled and missing ones."""
    return registry().report
