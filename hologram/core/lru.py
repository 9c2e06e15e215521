"""`LRUCache`: the bounded, thread-safe map behind the backends' in-process caches.

An `OrderedDict` used as an LRU is not safe across threads even under the GIL: a `get`
that finds a key and its `move_to_end` are two calls, and another thread may evict the
key between them (the interpreter's cache raised KeyError twice in 780k calls from 8
threads). Every operation here holds one lock, so a lookup, its promotion and an
eviction are each atomic. Building a missing value is the caller's business and is done
outside the lock: two threads may build the same value once each, and the second `put`
wins, which is harmless for caches of pure functions of their key.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, Hashable, TypeVar

from hologram.core import forks

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRUCache(Generic[K, V]):
    """Least-recently-used map of at most `size` entries (`size` >= 1)."""

    def __init__(self, size: int):
        if size < 1:
            raise ValueError(f"an LRU cache needs room for at least one entry, got size {size}")
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()
        forks.renew_in_child(self, "_lock")

    def get(self, key: K) -> V | None:
        """The value under `key` (now the most recently used), or None."""
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        """Store `value` as the most recently used entry, evicting the least recently
        used ones beyond `size`."""
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
