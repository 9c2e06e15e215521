"""What the plugins registered, looked up: translators by format or file extension,
backends by name or priority (HOLOGRAM_BACKEND), passes and bundles. The registry these
read is built and cached by hologram.registry.plugins."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping

import numpy as np

from hologram.backend.base import Backend
from hologram.backend.lazy import BackendTable
from hologram.core.errors import PluginError, did_you_mean
from hologram.core.hookspecs import BodyKey, BundleRef, CollectionAdapter, Translator
from hologram.registry.plugins import normalize_extension, registry

if TYPE_CHECKING:
    from hologram.passes.api import Pass

# Each look-up asks the registry for its own kind only: a plugin's hooks of the other
# kinds are not called for it (a process that loads a bundle never registers passes).


def translators() -> Mapping[str, Translator]:
    return registry(("translator",)).translators


def body_keys() -> Mapping[str, BodyKey]:
    """The document keys translator plugins handle in place of `body` ('circuit' -> ...)."""
    return registry(("translator",)).body_keys


def backends() -> BackendTable:
    """name -> Backend; a backend is built (its module imported) when its name is first
    looked up (hologram.backend.lazy)."""
    return registry(("backend",)).backends


def passes() -> tuple[Pass, ...]:
    return registry(("pass",)).passes


def bundles() -> Mapping[str, BundleRef]:
    return registry(("bundle",)).bundles


def collections() -> Mapping[str, CollectionAdapter]:
    return registry(("collection",)).collections


# Arguments no adapter is asked about: what a kernel call converts itself.
_PLAIN = (np.ndarray, np.generic, int, float, complex, str, bytes, type(None))


def collection_adapter(values: Iterable[object]) -> CollectionAdapter | None:
    """The adapter claiming one of `values` (a Dask array: hologram.dask), or None when
    every value is one the call takes itself. Plain values (arrays, numbers) never reach
    the registry, so an ordinary call pays one isinstance per argument."""
    odd = [v for v in values if not isinstance(v, _PLAIN)]
    if not odd:
        return None
    for adapter in collections().values():
        if any(adapter.claims(v) for v in odd):
            return adapter
    return None


# ------------------------------------------------------------------------- look-ups
def find_translator(format: str) -> Translator:
    """The translator named `format` (`toml`), or registered for that extension (`.toml`)."""
    if not isinstance(format, str):
        raise PluginError(f"a kernel format is a string such as 'toml', got {type(format).__name__}")
    reg = registry(("translator",))
    key = format.strip().lower()
    found = reg.translators.get(key) or reg.extensions.get(normalize_extension(key))
    if found is None:
        raise PluginError(f"unknown kernel format {format!r}{did_you_mean(key, reg.translators)}",
                          hint=_available("formats", reg.translators))
    return found


def translator_for_path(path: str) -> Translator:
    """The translator registered for `path`'s extension; the longest match wins, so a
    plugin may claim `.hg.toml` while the builtin keeps `.toml`."""
    reg = registry(("translator",))
    name = os.path.basename(path).lower()
    matches = [ext for ext in reg.extensions if name.endswith(ext) and len(name) > len(ext)]
    if not matches:
        ext = os.path.splitext(name)[1] or "(none)"
        raise PluginError(f"{path}: no translator for extension {ext}{did_you_mean(ext, reg.extensions)}",
                          hint=_available("extensions", reg.extensions))
    return reg.extensions[max(matches, key=len)]


def _available(what: str, names: Iterable[str]) -> str:
    names = sorted(names)
    return f"available {what}: {', '.join(names)}" if names else f"no {what} are registered (is hologram-kernels installed?)"


# ------------------------------------------------------------------------- backends
ENV_BACKEND = "HOLOGRAM_BACKEND"


def _is_available(b: Backend) -> bool:
    try:
        return bool(b.available())
    except Exception:  # a backend that cannot even tell is not available
        return False


def unavailable_reason(b: Backend) -> str | None:
    """What the backend says of why it is not available here (None: nothing, or it failed
    to say)."""
    try:
        reason = b.unavailable_reason()
    except Exception:  # a backend that cannot tell why says nothing
        return None
    return reason if isinstance(reason, str) and reason else None


def list_backends(available_only: bool = True) -> list[str]:
    """Backend names, highest priority first (ties by name). Every backend is built (and,
    with `available_only`, asked whether it can run here)."""
    table = backends()
    found = [table[name] for name in table.by_priority() if name in table]  # one that fails to build is left out
    return [b.name for b in found if not available_only or _is_available(b)]


def get_backend(name: str | None = None) -> Backend:
    """The backend `name`, else the one HOLOGRAM_BACKEND names, else the available
    backend of highest priority. PluginError (with the choices) when there is none."""
    if name is not None and not isinstance(name, str):
        raise PluginError(f"a backend name is a string such as 'interp', got {type(name).__name__}")
    table = backends()
    wanted = (name or os.environ.get(ENV_BACKEND, "")).strip()

    def built_by_priority() -> Iterator[Backend]:  # a backend is built (imported) when reached
        return (table[n] for n in table.by_priority() if n in table)

    def hint() -> str:  # only on a refusal: asking a GPU backend whether it can run opens its device
        choices = ", ".join(f"{b.name} (priority {b.priority}{'' if _is_available(b) else ', unavailable'})"
                            for b in built_by_priority())
        return f"available backends: {choices}" if choices else "no backend is installed; pip install hologram-backend-interp"

    if wanted:
        via = "" if name else f" (from {ENV_BACKEND})"
        found = table.get(wanted)  # builds that backend alone
        if found is None and table.failure(wanted) is not None:
            raise PluginError(f"backend {wanted!r}{via} failed to load: {table.failure(wanted)}", hint=hint())
        if found is None:
            raise PluginError(f"unknown backend {wanted!r}{via}{did_you_mean(wanted, table.by_priority())}",
                              hint=hint())
        if not _is_available(found):
            why = unavailable_reason(found)
            raise PluginError(f"backend {wanted!r}{via} is not available on this machine{f': {why}' if why else ''}",
                              hint=hint())
        return found
    # Highest priority first, stopping at the first that can run: a lower one is never probed.
    ready = next((b for b in built_by_priority() if _is_available(b)), None)
    if ready is None:
        raise PluginError("no backend is available", hint=hint())
    return ready
