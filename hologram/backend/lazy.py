"""Backends registered by name and built at their first use.

A plugin's `hologram_register_backends` hook may register a `LazyBackend` in place of
an instance: the backend's name, its priority and where its class is. Nothing of the
backend is imported until it is asked for, so a process that runs kernels on cpu_llvm
never imports the GPU backends (nor opens a GPU to ask whether it can run):
`LazyBackend("wgpu", "hologram_wgpu.backend:WgpuBackend", priority=5)`.

`BackendTable` is the registry's `backends` mapping: it holds instances and lazy
entries together, and builds an entry when its name is looked up (`table["wgpu"]`,
`"wgpu" in table`, `.get`). Iterating it, or asking its length, builds every entry;
`by_priority()` orders the names by what the entries declare, building none. An entry
whose build fails (its module does not import, its class raises, or the instance is not
the backend it was declared as) is dropped from the table with the reason, which
`failure(name)` gives, and the table's `on_failure` callback is told (the plugin
manager reports the plugin as failed, as when its hook raises).
"""

from __future__ import annotations

import importlib
import sys
import threading
from typing import TYPE_CHECKING, Callable, Iterator, Mapping

from hologram.core.errors import PluginError
from hologram.core.forks import renew_in_child

if TYPE_CHECKING:
    from hologram.backend.base import Backend


# what a built entry is held to (the registry's test of a backend) and who is told of a
# failure: (the backend's name, the plugin that registered it, the exception)
Check = Callable[[object], "Backend"]
OnFailure = Callable[[str, str, Exception], None]

_BUILDING = threading.RLock()  # one build per entry, whatever the threads asking
renew_in_child(sys.modules[__name__], "_BUILDING", threading.RLock)


class LazyBackend:
    """A backend known by name and priority, built by `load` at its first use: a
    "module:Class" string (the class is called without arguments) or a callable
    returning the instance. The built backend must have this name and priority (checked
    when built). `backend()` builds it once; every later call returns that instance,
    whichever registry asks (a plugin's hook is called once per plugin manager)."""

    __slots__ = ("name", "priority", "load", "_built")

    def __init__(self, name: str, load: str | Callable[[], Backend], priority: int | float):
        self.name = name
        self.load = load
        self.priority = priority
        self._built: Backend | None = None

    def backend(self, check: Check) -> Backend:
        """The instance, built (and held to `check`, the registry's test of a backend) at
        the first call; raises what building it raised."""
        with _BUILDING:
            if self._built is None:
                backend = check(self._construct())
                if backend.name != self.name or backend.priority != self.priority:
                    raise PluginError(f"registered as backend {self.name!r} of priority {self.priority}, it built "
                                      f"backend {backend.name!r} of priority {backend.priority}")
                self._built = backend
            return self._built

    @property
    def built(self) -> Backend | None:
        return self._built

    def _construct(self) -> Backend:
        if callable(self.load):
            return self.load()
        module, sep, attribute = self.load.partition(":")
        obj = importlib.import_module(module)
        for part in attribute.split("."):
            obj = getattr(obj, part)
        return obj()

    def __repr__(self) -> str:
        return f"LazyBackend({self.name!r}, {self.load!r}, priority={self.priority!r})"


class BackendTable(Mapping[str, "Backend"]):
    """name -> Backend, each lazy entry built when its name is first looked up."""

    def __init__(self, entries: Mapping[str, tuple[str, Backend | LazyBackend]], check: Check,
                 on_failure: OnFailure | None = None):
        self._entries = dict(entries)  # name -> (the plugin that registered it, instance or LazyBackend)
        self._check = check
        self._on_failure = on_failure
        self._failures: dict[str, str] = {}

    def __getitem__(self, name: str) -> Backend:
        plugin, entry = self._entries[name]
        if not isinstance(entry, LazyBackend):
            return entry
        try:
            return entry.backend(self._check)
        except Exception as exc:
            if self._entries.pop(name, None) is not None:
                self._failures[name] = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
                if self._on_failure is not None:
                    self._on_failure(name, plugin, exc)
            raise KeyError(name) from None

    def __contains__(self, name: object) -> bool:
        try:
            self[name]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        for name in list(self._entries):
            name in self  # noqa: B015 - built now, so an entry that fails to build is not listed
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(list(iter(self)))

    def by_priority(self) -> list[str]:
        """The names, highest declared priority first (ties by name), none built."""
        return sorted(self._entries, key=lambda n: (-self._entries[n][1].priority, n))

    def built(self) -> list[Backend]:
        """The backends built so far (those this process used); none is built now."""
        found = (e.built if isinstance(e, LazyBackend) else e for _, e in self._entries.values())
        return [b for b in found if b is not None]

    def failure(self, name: str) -> str | None:
        """Why the entry `name` was dropped when built, or None."""
        return self._failures.get(name)
