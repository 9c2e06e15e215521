"""Persistent pools of worker threads for running native stage chunks in parallel.

`native(size)` is what launches use: workers that never hold the GIL (native_pool.py),
a parallel launch in ~1 µs. Where it cannot be built (no pthreads), `pool(size)` serves:
Python threads, since native stage functions are called through ctypes CFUNCTYPE
pointers, which release the GIL for the duration of the call. Its workers are started
once and then sleep on one shared queue; a `run` of any number of tasks posts a part in
it to as many workers as it can use, and the caller and those workers claim the tasks
one at a time from a shared counter, as the native pool's threads claim chunks; then the
caller takes back the posts no worker has picked up (all busy with another `run`) and
waits on its own completion queue for the workers that took part, so concurrent `run`s
from several Python threads do not interfere.
A handoff costs two GIL transfers between sleeping threads (~60 µs here). After a fork
the threads are gone: both pools notice and restart them. No pool has more than
`max_threads()` threads (THREADS_PER_CPU per CPU); a larger count asked for is capped,
with a warning where it is configured (docs/cpu-llvm.md, "Threads").
"""

from __future__ import annotations

import itertools
import os
import queue
import sys
import threading
import warnings
from typing import Any, Callable, Sequence

from hologram.backend import renew_in_child, trace

from . import native_pool
from .native_pool import NativePool

Task = Callable[[], None]


def timed(task: Task, times: Any, i: int) -> Task:
    """`task`, recording (thread ident, start, end) into `times[3i:3i + 3]` as the native
    pool's workers do (a traced launch on the Python pool, or chunks run on the caller)."""
    def run() -> None:
        t0 = trace.now()
        try:
            task()
        finally:
            times[3 * i:3 * i + 3] = [threading.get_ident(), t0, trace.now()]
    return run


THREADS_PER_CPU = 4  # the cap on threads per launch, per CPU


def max_threads() -> int:
    """The most threads a launch uses: THREADS_PER_CPU x the CPU count. Beyond the CPU
    count threads only take turns, and every one is an OS thread with its own stack, so
    `HOLOGRAM_NUM_THREADS=100000` must not start a hundred thousand of them."""
    return THREADS_PER_CPU * (os.cpu_count() or 1)


def capped(n: int, source: str) -> int:
    """`n`, or `max_threads()` with a RuntimeWarning when `n` is more. `source` names
    where `n` came from ("HOLOGRAM_NUM_THREADS", "num_threads") for the warning."""
    cap = max_threads()
    if n <= cap:
        return n
    warnings.warn(f"cpu_llvm: {source}={n} is more than {cap} ({THREADS_PER_CPU} per CPU); using {cap} threads",
                  RuntimeWarning, stacklevel=3)
    return cap


def thread_count() -> int:
    """`$HOLOGRAM_NUM_THREADS` if it is a positive integer (capped by `max_threads()`),
    else the number of CPUs."""
    env = os.environ.get("HOLOGRAM_NUM_THREADS", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n > 0:
            return capped(n, "HOLOGRAM_NUM_THREADS")
    return os.cpu_count() or 1


class ThreadPool:
    """`size` workers including the caller: `size - 1` daemon threads are started."""

    def __init__(self, size: int):
        if size < 1:
            raise ValueError(f"a thread pool needs at least one thread, got {size}")
        self.size = size
        self._pid = -1
        self._lock = threading.Lock()
        renew_in_child(self, "_lock")
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()

    def _ensure_started(self) -> None:
        if self._pid == os.getpid():
            return
        with self._lock:
            if self._pid == os.getpid():
                return
            self._tasks = queue.SimpleQueue()  # a forked child must not share the parent's
            for i in range(self.size - 1):
                threading.Thread(target=_work, args=(self._tasks,), name=f"hologram-cpu-{i + 1}",
                                 daemon=True).start()
            self._pid = os.getpid()

    def run(self, tasks: Sequence[Task]) -> None:
        """Run every task, any number of them, and return when all are done: the caller
        and up to `size - 1` workers take the tasks one at a time, in order, until none
        is left (which thread runs which is left to timing). The first exception in task
        order is re-raised, after all have finished."""
        if not tasks:
            return
        errors: list[BaseException | None] = [None] * len(tasks)
        claim = itertools.count().__next__  # atomic under the GIL: each index handed out once

        def drain() -> None:
            while (i := claim()) < len(tasks):
                try:
                    tasks[i]()
                except Exception as e:  # noqa: BLE001 - reported after the others finish
                    errors[i] = e
                except BaseException as e:  # Ctrl-C: this thread claims no more
                    errors[i] = e
                    return

        helpers = min(self.size, len(tasks)) - 1
        if helpers:
            self._ensure_started()
            done: queue.SimpleQueue = queue.SimpleQueue()
            posts = [_Post(drain, done) for _ in range(helpers)]
            for post in posts:
                self._tasks.put(post)
        drain()
        if helpers:
            # A post no worker has taken yet is taken back here, so that it never runs:
            # the caller waits only for the workers that took part.
            for _ in range(sum(not post.take() for post in posts)):
                done.get()
        for e in errors:
            if e is not None:
                raise e


class _Post:
    """A worker's part in one `run`: to drain its tasks, unless the caller took it back."""

    __slots__ = ("drain", "done", "_taken")

    def __init__(self, drain: Task, done: queue.SimpleQueue) -> None:
        self.drain, self.done = drain, done
        self._taken = threading.Lock()

    def take(self) -> bool:
        """True for whoever calls this first (the worker that takes part, or the caller
        taking the post back), False for the other."""
        return self._taken.acquire(blocking=False)


def _work(tasks: queue.SimpleQueue) -> None:
    while True:
        post = tasks.get()
        if post.take():
            try:
                post.drain()  # keeps what its tasks raise for the caller
            finally:
                post.done.put(None)


_POOLS: dict[int, ThreadPool] = {}
_POOLS_LOCK = threading.Lock()
renew_in_child(sys.modules[__name__], "_POOLS_LOCK")


def pool(size: int) -> ThreadPool:
    """The process-wide pool of `size` threads (created on first use; never more than
    `max_threads()`, whatever a backend's `num_threads` was set to)."""
    size = min(size, max_threads())
    p = _POOLS.get(size)
    if p is None:
        with _POOLS_LOCK:
            p = _POOLS.setdefault(size, ThreadPool(size))
    return p


_NATIVE: dict[int, NativePool] = {}


def native(size: int) -> NativePool | None:
    """The process-wide native pool of `size` threads (at most `max_threads()`), or None
    (size 1, or no native pool on this platform)."""
    size = min(size, max_threads())
    if size < 2 or not native_pool.available():
        return None
    p = _NATIVE.get(size)
    if p is None:
        with _POOLS_LOCK:
            p = _NATIVE.setdefault(size, NativePool(size))
    return p
