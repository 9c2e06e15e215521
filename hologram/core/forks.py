"""Locks a forked child gets back free.

`fork()` copies the calling thread only, with every lock as it was: a lock another
thread held at that moment stays held in the child, by a thread that does not exist
there, and the child's first attempt to take it waits forever (`multiprocessing` forks
by default on Linux with Python 3.11-3.13; a fork while another thread compiled a kernel
hung the child at its first new kernel, issue 21). The locks of hologram guard caches
and lazily built state whose Python-level updates are each complete under the GIL, so
the child can simply start with fresh ones: `renew_in_child(owner, "attr")` registers
`owner.attr`, and after a fork the child replaces it with `factory()`.

State a fresh lock cannot make consistent is of two kinds. Work a child could neither
finish nor undo waits: `FORK_GUARD` is held around every call into a native compiler (LLVM,
for cpu_llvm and cuda) and every import of a heavy module made on first need (`with
FORK_GUARD: from . import jit`), and a fork waits until no thread holds it. Imports need
it because CPython gives a child the per-module import locks as they were: a child
forked while another thread was importing a module (the JIT's, which pulls in
llvmlite.binding, ~60 ms) hangs at its own import of that module. Thread pools, whose
workers the child lacks, notice a new process and start new workers where they live
(hologram_cpu_llvm.threads).

One lock, not one per kind of work: a thread that imports lazily while it holds the
LLVM lock (or calls LLVM while importing) could otherwise deadlock against a fork taking
the two in the other order. Module top-level code must never take it (an ordinary
import of that module in another thread could then wait on a thread that holds the
guard and waits on the module).
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


FORK_GUARD = threading.RLock()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=FORK_GUARD.acquire, after_in_parent=FORK_GUARD.release,
                        after_in_child=FORK_GUARD.release)
    os.register_at_fork(after_in_child=_after_fork_in_child)
