"""Where a compile runs: in this process, or in the compile worker (compile_worker.py).

Every LLVM optimization leaves ~75 KB in the process that ran it (llvmlite's pass
builder; docs/cpu-llvm.md, "What memory a compile leaves"). So a process compiles its
first `in_process_limit()` modules itself, with no latency added for the common case of
a few kernels, and hands every later one to a worker process, whose leak ends when it
is replaced after WORKER_COMPILES compiles. The worker is started WORKER_HEAD_START
compiles before the limit, so its start-up overlaps theirs.

What can go wrong, and what happens:
- the worker dies during a compile (killed, or LLVM crashed on the module): the compile
  is sent once more to a new worker; if that one dies too, the module is what kills LLVM
  and RuntimeError says so, rather than crashing this process by trying it here;
- that new worker cannot start either (no interpreter, an import error, another LLVM:
  its host key differs): this compile and every later one run in this process, with one
  warning;
- the worker's own code fails (FAILED): this compile runs in this process;
- the caller is interrupted while it waits (Ctrl-C): the worker is stopped, since its
  answer would now arrive out of turn.

One worker serves the process; compiles from several threads take turns on it (LLVM
serializes them in-process anyway). A forked child does not share its parent's worker:
it starts its own when it needs one.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading
import warnings
import weakref
from typing import Sequence

from hologram.backend import renew_in_child, trace
from hologram.errors import HologramWarning

from . import jit
from .compile_worker import (COMPILE, FAILED, OBJECT, READY, REJECTED, Closed, CompileRequest, compile_here,
                             read_frame, write_frame)
from .loader import STATS

ENV_IN_PROCESS = "HOLOGRAM_COMPILES_IN_PROCESS"
# 32 modules x ~75 KB: ~2.5 MB kept for good by the in-process compiles, ~2.5 KB per kernel
# over 1,000 distinct kernels (docs/cpu-llvm.md has the measurement).
DEFAULT_IN_PROCESS = 32
# The worker is started this many compiles before the limit: its start-up (~0.3-0.5 s,
# most of it imports) then overlaps theirs (~50 ms each) instead of delaying the first
# compile it serves.
WORKER_HEAD_START = 8
# A worker is replaced after this many compiles: ~20 MB of leak at most, against ~0.3 s
# to start a new one (off the caller's path: it starts when the old one retires).
WORKER_COMPILES = 256


def in_process_limit() -> int:
    """How many compiles a process runs itself before the worker takes over:
    `$HOLOGRAM_COMPILES_IN_PROCESS` if it is a non-negative integer, else 32."""
    value = os.environ.get(ENV_IN_PROCESS, "")
    try:
        limit = int(value)
    except ValueError:
        return DEFAULT_IN_PROCESS
    return limit if limit >= 0 else DEFAULT_IN_PROCESS


class WorkerGone(Exception):
    """The worker process ended, or its pipes broke, before it answered."""


class _Worker:
    """One compile worker process; `compile` is called by one thread at a time."""

    def __init__(self, command: Sequence[str]) -> None:
        # The caller's import path, so the worker finds the same hologram and plugins.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self.process = subprocess.Popen(list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.ready = False
        self.compiles = 0

    def handshake(self) -> None:
        """Wait for READY and check the worker builds for this host with this LLVM;
        WorkerGone (with the reason) when it does not."""
        try:
            kind, payload = read_frame(self.process.stdout)
        except (Closed, OSError) as e:
            raise WorkerGone(f"it exited before answering ({self._status()})") from e
        if kind != READY:
            raise WorkerGone(f"it answered {kind!r} instead of READY")
        if payload.decode() != jit.host().key:
            raise WorkerGone(f"it builds for {payload.decode()!r}, this process for {jit.host().key!r}")
        self.ready = True

    def compile(self, request: CompileRequest) -> tuple[bytes, bytes]:
        """(reply kind, payload) for `request`; WorkerGone if the worker ends first."""
        try:
            write_frame(self.process.stdin, COMPILE, request.encode())
            reply = read_frame(self.process.stdout)
        except (Closed, OSError) as e:
            raise WorkerGone(f"it ended during a compile ({self._status()})") from e
        self.compiles += 1
        return reply

    def _status(self) -> str:
        try:
            code = self.process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            return "still running"
        return f"exit status {code}"

    def stop(self) -> None:
        """End the worker: closing its input is its order to exit; kill it if it does not."""
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def worker_command() -> list[str]:
    """How the worker is started: this interpreter, without the working directory on its
    path (`-P`: it may hold anything named hologram)."""
    return [sys.executable, "-P", "-m", "hologram_cpu_llvm.compile_worker"]


class Router:
    """Sends each compile where it belongs; `ROUTER` is the process's one instance.
    `command` starts a worker (tests substitute broken ones)."""

    def __init__(self, command: Sequence[str] | None = None) -> None:
        self._command = command
        self._lock = threading.Lock()
        renew_in_child(self, "_lock")
        self.in_process = 0  # compiles this process ran itself, so far
        self.refused: str | None = None  # why the worker could not start: then never again
        self._worker: _Worker | None = None
        self._inherited: list[_Worker] = []  # a parent's workers, in a forked child: never touched
        _ROUTERS.add(self)

    def compile(self, request: CompileRequest) -> bytes:
        """Object code for `request`; RuntimeError when LLVM rejects the module."""
        with self._lock:
            limit = in_process_limit()
            here = self.refused is not None or self.in_process < limit
            if here:
                self.in_process += 1
                if self.in_process >= limit - WORKER_HEAD_START and self.refused is None:
                    self._start()  # ready by the time the limit is reached
            else:
                with trace.span("llvm compile in the worker", "prepare"):
                    obj = self._in_worker(request)
                if obj is not None:
                    STATS["optimize"] += 1  # this process's compiles, wherever they ran
                    STATS["emit"] += 1
                    STATS["worker"] += 1
                    return obj
        return compile_here(request)

    def _start(self) -> _Worker | None:
        if self._worker is None:
            try:
                self._worker = _Worker(self._command or worker_command())
            except OSError as e:
                self._refuse(f"it could not be started: {e}")
        return self._worker

    def _refuse(self, reason: str) -> None:
        self.refused = reason
        warnings.warn(f"cpu_llvm: the compile worker is not used ({reason}); every compile runs in this "
                      f"process, which keeps ~75 KB of each (docs/cpu-llvm.md, \"What memory a compile "
                      f"leaves\")", HologramWarning, stacklevel=2)

    def _in_worker(self, request: CompileRequest) -> bytes | None:
        """The worker's object code; None when this process must compile it instead."""
        for attempt in (1, 2):
            worker = self._start()
            if worker is None:
                return None
            try:
                if not worker.ready:
                    worker.handshake()
                kind, payload = worker.compile(request)
            except WorkerGone as e:
                self._retire()
                if attempt == 1:
                    continue  # killed, say: a new worker gets the module
                if not worker.ready:
                    self._refuse(f"a new one failed to start: {e}")
                    return None
                raise RuntimeError(f"two compile workers in turn died compiling this module (the second: "
                                   f"{e}); LLVM crashes on it") from None
            except BaseException:  # interrupted: its answer would come out of turn
                self._retire()
                raise
            if worker.compiles >= WORKER_COMPILES:
                self._retire()
                self._start()  # its successor starts now, off the next compile's path
            if kind == OBJECT:
                return payload
            if kind == REJECTED:
                raise RuntimeError(payload.decode())
            if kind != FAILED:
                self._retire()  # out of step with the protocol
            return None
        return None

    def _retire(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.stop()

    def stop(self) -> None:
        """End the worker, if one runs (`clear_cache()`); the next compile past the limit
        starts a new one."""
        with self._lock:
            self._retire()

    def _at_exit(self) -> None:
        # A daemon thread may be compiling: then the lock is not waited for, and the
        # worker ends when this process's exit closes its input.
        if self._lock.acquire(blocking=False):
            try:
                self._retire()
            finally:
                self._lock.release()

    def worker_pid(self) -> int | None:
        """The running worker's process id (for tests and diagnostics)."""
        worker = self._worker
        return None if worker is None else worker.process.pid

    def _forget_after_fork(self) -> None:
        # The child's copy of the parent's worker is the parent's: stopping it would
        # close the parent's worker, and sharing its pipes would interleave frames. It
        # is kept, untouched, so that no finalizer acts on it.
        if self._worker is not None:
            self._inherited.append(self._worker)
            self._worker = None


_ROUTERS: weakref.WeakSet[Router] = weakref.WeakSet()


def _forget_workers_after_fork() -> None:
    for router in list(_ROUTERS):
        router._forget_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers_after_fork)
ROUTER = Router()
atexit.register(ROUTER._at_exit)


def compile_object(module_ir: str, level: int = jit.OPT_LEVEL, support: Sequence[str] = (),
                   target: str | None = None) -> bytes:
    """`jit.compile_object` (`target` None) or `jit.compile_object_for` (`target` a
    level or `host`), run wherever the policy above says; RuntimeError when LLVM
    rejects the module."""
    return ROUTER.compile(CompileRequest(module_ir, level, tuple(support), target))


def stop_worker() -> None:
    """End the compile worker, returning its memory (`hologram.clear_cache()`)."""
    ROUTER.stop()
