"""hologram.core.forks: a lock another thread holds when the process forks is free in the
child (issue 21: the child of a fork during a compile hung at its first new kernel)."""

from __future__ import annotations

import gc
import os
import threading
import time
import warnings

import pytest

from hologram.core import forks
from hologram.core.lru import LRUCache

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() here")


class Owner:
    def __init__(self, factory=threading.Lock):
        self.lock = factory()
        forks.renew_in_child(self, "lock", factory)


def fork_and_check(check) -> int:
    """Fork; the child exits 0 when `check()` is true within 5 s; the exit code (or -1: hung)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+: fork() with threads
        pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if check() else 1)
        except BaseException:  # noqa: BLE001 - the child must leave here, whatever happened
            os._exit(2)
    for _ in range(2000):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.005)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return -1


def held_elsewhere(*locks):
    """A thread holding `locks` until the returned event is set."""
    taken, release = threading.Event(), threading.Event()

    def hold():
        for lock in locks:
            lock.acquire()
        taken.set()
        release.wait()
        for lock in reversed(locks):
            lock.release()
    t = threading.Thread(target=hold)
    t.start()
    taken.wait()
    return release, t


@pytest.mark.parametrize("factory", [threading.Lock, threading.RLock])
def test_a_lock_held_by_another_thread_is_free_in_the_child(factory):
    owner, cache = Owner(factory), LRUCache(4)
    release, t = held_elsewhere(owner.lock, cache._lock)
    try:
        code = fork_and_check(lambda: owner.lock.acquire(timeout=5) and cache.get("k") is None)
    finally:
        release.set()
        t.join()
    assert code == 0
    assert owner.lock.acquire(blocking=False)  # the parent's lock is the parent's: untouched
    owner.lock.release()


def test_an_owner_that_died_is_forgotten():
    owner = Owner()
    key = (id(owner), "lock")
    assert key in forks._RENEWED
    del owner
    gc.collect()
    assert key not in forks._RENEWED
