"""Locks a forked child gets back free.

`fork()` copies the calling thread only, with every lock as it was: a lock another
thread held at that moment stays held in the child, by a thread that does not exist
there, and the child's first attempt to take it waits forever (`multiprocessing` forks
by default on Linux with Python 3.11-3.13; a fork while another thread compiled a kernel
hung the child at its first new kernel, issue 21). The locks of hologram guard caches
and lazily built state whose Python-level updates are each complete under the GIL, so
the child can simply start with fresh ones: `renew_in_child(owner, "attr")` registers
`owner.attr`, and after a fork the child replaces it with `factory()`.

State a lock cannot make consistent (LLVM in the middle of a compile, thread pools whose
workers the child lacks) is handled where it lives: the cpu_llvm JIT makes a fork wait
for a compile to finish, and its pools notice a new process and start new workers.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Callable

_RENEWED: dict[tuple[int, str], tuple[weakref.ref, Callable[[], Any]]] = {}


def renew_in_child(owner: Any, attr: str, factory: Callable[[], Any] = threading.Lock) -> None:
    """After a fork, the child replaces `owner.<attr>` (a lock) with `factory()`, for as
    long as `owner` (a module, or an object that allows weak references) lives."""
    key = (id(owner), attr)
    _RENEWED[key] = (weakref.ref(owner, lambda _, key=key: _RENEWED.pop(key, None)), factory)


def _after_fork_in_child() -> None:
    for (_, attr), (ref, factory) in list(_RENEWED.items()):
        owner = ref()
        if owner is not None:
            setattr(owner, attr, factory())


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
