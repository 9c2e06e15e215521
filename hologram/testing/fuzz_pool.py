"""Fuzz cases run in worker processes: a crash, a hang or a runaway allocation costs one
case and a worker restart, never the fuzzing run.

The parent hands each case (a picklable value with a `kind`) to an idle worker. The worker
runs the kind's checker (`HANDLERS`: a "module:function" the worker imports), which announces every phase before starting it
(`phase(name, timeout_is_defect)`), and sends back the `CaseResult`. The parent waits on
all workers at once; a worker that dies (a segfault is exit signal 11) or overruns the
current phase's budget is killed and replaced, and its case gets a result naming the
phase: a `crash` problem always, a `timeout` problem when the phase said a timeout there
is a defect (the verifier must finish; a long loop may legitimately keep the interpreter
busy).

Workers are fresh interpreters (`python -m hologram.testing.fuzz_pool FD`, talking over a
socket pair: no inherited LLVM or thread state, and unlike multiprocessing's spawn no
re-import of the caller's main module), limit their address space and core dumps, use a
private cpu_llvm disk cache directory, and are replaced after `recycle_after` cases to
bound the memory compiled kernels keep. A worker's stderr goes to a file whose tail a
crash report quotes (glibc's "free(): invalid pointer" says more than the signal).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Iterable, Iterator, Mapping

from hologram.testing.fuzz_common import CRASH, HARNESS, TIMEOUT, CaseResult, Problem

# kind -> "module:function" of the checker, imported in the worker only
HANDLERS = {
    "program": "hologram.testing.fuzz_program_oracle:check_program_case",
    "document": "hologram.testing.fuzz_document_oracle:check_document_case",
    "object": "hologram.testing.fuzz_object_oracle:check_object_case",
}
DEFAULT_BUDGET = 20.0  # seconds per phase, unless `budgets` names the phase
ADDRESS_SPACE_LIMIT = 8 << 30  # per worker


def _limit_resources() -> None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return
    for limit, value in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_AS, ADDRESS_SPACE_LIMIT)):
        try:
            soft, hard = resource.getrlimit(limit)
            if hard == resource.RLIM_INFINITY or value <= hard:
                resource.setrlimit(limit, (value, hard))
        except (ValueError, OSError):
            pass


def _worker_main(conn: Connection) -> None:
    """A worker's loop: receive ("module:function", case), run that checker, send the result."""
    _limit_resources()
    import importlib

    handlers: dict[str, Callable] = {}
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        spec, case = message

        def phase(name: str, timeout_is_defect: bool = True) -> None:
            conn.send(("phase", name, timeout_is_defect))

        try:
            if spec not in handlers:
                module, _, func = spec.partition(":")
                handlers[spec] = getattr(importlib.import_module(module), func)
            result = handlers[spec](case, phase)
        except BaseException as exc:  # noqa: BLE001 - the harness reports, the run goes on
            if isinstance(exc, KeyboardInterrupt):
                return
            result = CaseResult("harness-error", (Problem(HARNESS, "worker", traceback.format_exc(limit=8)),))
        conn.send(("done", result))


class _Worker:
    def __init__(self, env: Mapping[str, str]):
        ours, theirs = socket.socketpair()
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "hologram.testing.fuzz_pool", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),), env={**os.environ, **env}, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=self.log)
        theirs.close()
        self.conn = Connection(ours.detach())
        self.case: Any = None
        self.phase = "start"
        self.defect_on_timeout = True
        self.deadline = 0.0
        self.done = 0

    def alive(self) -> bool:
        return self.process.poll() is None

    def stderr_tail(self, limit: int = 1500) -> str:
        try:
            self.log.seek(0)
            text = self.log.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""
        return text[-limit:]

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:  # pragma: no cover - a kill that did not take
            pass
        self.conn.close()
        self.log.close()


class WorkerPool:
    """`run(cases)` yields (case, CaseResult) in completion order.

    workers        processes (default: 2)
    budgets        phase name -> seconds (DEFAULT_BUDGET otherwise)
    env            environment variables for the workers
    recycle_after  replace a worker after this many cases
    handlers       kind -> "module:function" of its checker (default HANDLERS)
    """

    def __init__(self, workers: int = 2, budgets: Mapping[str, float] | None = None,
                 env: Mapping[str, str] | None = None, recycle_after: int = 150,
                 handlers: Mapping[str, str] | None = None):
        self.size = max(1, workers)
        self.handlers = dict(HANDLERS if handlers is None else handlers)
        self.budgets = dict(budgets or {})
        self.env = dict(env or {})
        self.recycle_after = recycle_after
        self._workers: list[_Worker] = []

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        for w in self._workers:
            try:
                w.conn.send(None)
            except (OSError, ValueError):
                pass
        for w in self._workers:
            try:
                w.process.wait(2)
            except subprocess.TimeoutExpired:
                pass
            w.kill()
        self._workers = []

    def _budget(self, phase: str) -> float:
        return self.budgets.get(phase, self.budgets.get("default", DEFAULT_BUDGET))

    def _start(self, w: _Worker | None, kind: str, case: Any) -> _Worker:
        if w is None or w.done >= self.recycle_after or not w.alive():
            if w is not None:
                try:
                    w.conn.send(None)
                except (OSError, ValueError):
                    pass
                w.kill()
                self._workers.remove(w)
            w = _Worker(self.env)
            self._workers.append(w)
        w.case, w.phase, w.defect_on_timeout = (kind, case), "start", True
        # starting a worker (imports) is not the case's time
        w.deadline = time.monotonic() + self._budget("start") + 30.0
        w.conn.send((self.handlers[kind], case))
        return w

    def run(self, cases: Iterable[tuple[str, Any]]) -> Iterator[tuple[Any, CaseResult]]:
        pending = iter(cases)
        idle: list[_Worker | None] = list(self._workers) + [None] * (self.size - len(self._workers))
        busy: list[_Worker] = []
        exhausted = False
        while True:
            while idle and not exhausted:
                nxt = next(pending, None)
                if nxt is None:
                    exhausted = True
                    break
                busy.append(self._start(idle.pop(), *nxt))
            if not busy:
                return
            timeout = max(0.0, min(w.deadline for w in busy) - time.monotonic())
            ready = wait([w.conn for w in busy], timeout)
            now = time.monotonic()
            for w in list(busy):
                result = None
                if w.conn in ready:
                    result = self._receive(w, now)
                elif now >= w.deadline:
                    result = self._timed_out(w)
                if result is not None:
                    busy.remove(w)
                    case = w.case[1]
                    if not w.alive() or result.outcome in ("crash", "timeout"):
                        w.kill()
                        self._workers.remove(w)
                        idle.append(None)
                    else:
                        w.done += 1
                        idle.append(w)
                    yield case, result

    def _receive(self, w: _Worker, now: float) -> CaseResult | None:
        try:
            message = w.conn.recv()
        except (EOFError, OSError):
            try:
                code = w.process.wait(5)
            except subprocess.TimeoutExpired:
                code = None
            how = f"signal {-code} ({signal.Signals(-code).name})" if code is not None and code < 0 \
                else f"exit code {code}"
            tail = w.stderr_tail()
            return CaseResult("crash", (Problem(CRASH, w.phase, f"the worker died with {how} in phase '{w.phase}'"
                                                               + (f"; its stderr ends:\n{tail}" if tail else "")),))
        if message[0] == "phase":
            _, w.phase, w.defect_on_timeout = message
            w.deadline = now + self._budget(w.phase)
            return None
        return message[1]

    def _timed_out(self, w: _Worker) -> CaseResult:
        budget = self._budget(w.phase)
        w.kill()
        problems = (Problem(TIMEOUT, w.phase, f"phase '{w.phase}' did not finish within {budget:g} s"),) \
            if w.defect_on_timeout else ()
        return CaseResult("timeout", problems)


if __name__ == "__main__":
    _worker_main(Connection(int(sys.argv[1])))
