"""Worker threads that run stage chunks without the GIL: a parallel launch in ~1 µs.

The Python pool (threads.py) hands a chunk to a worker through queues, so the worker
must take the GIL to start and the caller to finish: two handoffs between sleeping
threads, ~60 µs on this 2-core VM, which made stages below ~130k lanes faster on one
thread. Here each worker is a Python thread that calls `hg_pool_worker(control)` once
and never comes back: native code that waits for a job in its control block, calls the
stage function, publishes that it is done, and waits again. The caller posts the job to
the workers, runs chunks itself and waits for the others, all inside one native call
(`hg_pool_run`), so neither side touches the GIL.

Chunks are claimed, not assigned (issue 25). A job may have any number of chunks (the
runtime makes a few per thread for a costly stage, runtime.chunk_count); the caller
and every worker that takes part claim them one at a time from a counter (an atomic
fetch-add) until none is left. A thread that loses its CPU to another process holds up
at most the one chunk it started, while the others take the rest; with one chunk per
thread, assigned, the caller waited out the whole of a preempted worker's share. The
chunk boundaries, and each chunk's partials and error slot, are fixed before the
launch, so results never depend on which thread ran which chunk.

Taking part: the job's bytes, and the counter (a cache line in `hg_pool_run`'s frame),
live only until `hg_pool_run` returns, so a worker touches them only after it *took
part* in the job: a compare-and-swap of word 5 from the previous job number to this one.
Once the counter is exhausted the caller does the same CAS for each worker it posted
to: if it wins, that worker had not started and never will (its CAS fails and it
touches nothing), so the caller does not wait for it; if it loses, the worker is in,
and the caller waits for its `done`, which the worker stores (release) after its last
chunk and its last touch of the counter, and the caller reads with acquire, so every
chunk's writes are visible when `hg_pool_run` returns. A worker that is preempted
before it takes part costs nothing; one preempted inside a chunk costs that chunk; one
preempted between taking part and its next claim (a few instructions) makes the caller
wait for nothing. The counter itself is monotonic: it only hands out each index once
(everything it could publish travels with the post or with `done`). While waiting the
caller spins, yielding its CPU every 256 polls.

Waiting: a worker spins (with the CPU's pause hint) for ~SPIN_ROUNDS polls after each
job, so back-to-back launches find it awake; then it sleeps on a pthread condition
variable until the next job.

Posting and sleeping pair up as in Dekker's algorithm: the caller stores the job
number, then reads the worker's `sleeping` flag; the worker, holding the mutex, sets
`sleeping`, then reads the job number (all sequentially consistent), so one of them
always sees the other and no wakeup is lost.

A launch is one *job* (bytes the caller keeps alive until `hg_pool_run` returns): the
stage function, the chunk count n, the bufs/syms/scalars pointers, the address of the
chunk times (0: not recorded), the number of workers to post it to (at most n - 1 and
the pool's workers), then per chunk (start, end, partials, err).

Chunk times are for tracing (hologram.core.trace): when the job names a buffer of three
i64 per chunk, `run_chunk` reads `clock_gettime(CLOCK_MONOTONIC)` (the clock of
`trace.now`, so the spans line up with the runtime's) before and after the
chunk and stores (`pthread_self()`, which is the thread's `threading.get_ident()`, start
ns, end ns) in the chunk's slot. The worker publishes its `done` with release order
after the store, so the caller reads complete records once `hg_pool_run` returns.
Untraced, it costs one load and a not-taken branch per chunk. Control block of a worker (i64 words; the mutex and condition
variable at byte offsets MUTEX and COND, with room for any platform's pthread types):

    0 job number posted    1 job number done    2 sleeping
    3 the job's address    4 the address of the job's claim counter
    5 job number taken (by the worker: it takes part; or by the caller: it will not)
    6 times the worker woke from its condition variable (for tests and curiosity)
    7 the last job number it had seen when it last went to sleep (for tests: `sleeping`
      with word 7 behind word 0 is a worker not yet woken for a job posted to it)

Worker and caller claim and run chunks the same way, `drain(job, counter)`.

The blocks are allocated with `malloc` and never freed: a worker polls its block until
the process ends, so it must outlive the interpreter's teardown.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
import threading
import time
from typing import Any, Callable, Sequence

from hologram.backend import FORK_GUARD, renew_in_child, trace

from . import cpu, loader

SPIN_ROUNDS = 1 << 17  # pause-hinted polls before a worker sleeps (a few ms)
_MUTEX, _COND, _BLOCK = 128, 256, 384  # byte offsets and the block's size
_PTHREAD = ("pthread_mutex_init", "pthread_cond_init", "pthread_mutex_lock", "pthread_mutex_unlock",
            "pthread_cond_wait", "pthread_cond_signal", "sched_yield", "pthread_self", "clock_gettime")
_CHUNKS = 7  # the job's header words; chunk k's four words start at _CHUNKS + 4k

_IR = r"""
declare i32 @pthread_mutex_lock(ptr)
declare i32 @pthread_mutex_unlock(ptr)
declare i32 @pthread_cond_wait(ptr, ptr)
declare i32 @pthread_cond_signal(ptr)
declare i32 @sched_yield()
declare i64 @pthread_self()
declare i32 @clock_gettime(i32, ptr)
PAUSE_DECL

define internal ptr @word(ptr %c, i64 %k) alwaysinline {
  %p = getelementptr i64, ptr %c, i64 %k
  ret ptr %p
}

; the monotonic clock in nanoseconds (struct timespec: two i64 on the 64-bit targets)
define internal i64 @now() {
  %ts = alloca [2 x i64], align 8
  call i32 @clock_gettime(i32 CLOCK_ID, ptr %ts)
  %s = load i64, ptr %ts
  %pns = getelementptr i64, ptr %ts, i64 1
  %ns = load i64, ptr %pns
  %s9 = mul i64 %s, 1000000000
  %t = add i64 %s9, %ns
  ret i64 %t
}

; chunk %k of %job: its stage function called on (start, end, bufs, syms, scalars,
; partials, err) = the job's words 7 + 4k, 7 + 4k + 1, 2, 3, 4, 7 + 4k + 2, 7 + 4k + 3;
; timed into the job's word 5 (three i64 per chunk) when that is not null
define internal void @run_chunk(ptr %job, i64 %k) {
entry:
  %f = load ptr, ptr %job
  %pbufs = call ptr @word(ptr %job, i64 2)
  %bufs = load ptr, ptr %pbufs
  %psyms = call ptr @word(ptr %job, i64 3)
  %syms = load ptr, ptr %psyms
  %pscal = call ptr @word(ptr %job, i64 4)
  %scalars = load ptr, ptr %pscal
  %ptimes = call ptr @word(ptr %job, i64 5)
  %times = load ptr, ptr %ptimes
  %k4 = mul i64 %k, 4
  %at = add i64 %k4, CHUNKS
  %q0 = call ptr @word(ptr %job, i64 %at)
  %start = load i64, ptr %q0
  %q1 = getelementptr i64, ptr %q0, i64 1
  %end = load i64, ptr %q1
  %q2 = getelementptr i64, ptr %q0, i64 2
  %partials = load ptr, ptr %q2
  %q3 = getelementptr i64, ptr %q0, i64 3
  %err = load ptr, ptr %q3
  %timed = icmp ne ptr %times, null
  br i1 %timed, label %clocked, label %plain

plain:
  call void %f(i64 %start, i64 %end, ptr %bufs, ptr %syms, ptr %scalars, ptr %partials, ptr %err)
  ret void

clocked:
  %t0 = call i64 @now()
  call void %f(i64 %start, i64 %end, ptr %bufs, ptr %syms, ptr %scalars, ptr %partials, ptr %err)
  %t1 = call i64 @now()
  %self = call i64 @pthread_self()
  %k3 = mul i64 %k, 3
  %r0 = getelementptr i64, ptr %times, i64 %k3
  store i64 %self, ptr %r0
  %r1 = getelementptr i64, ptr %r0, i64 1
  store i64 %t0, ptr %r1
  %r2 = getelementptr i64, ptr %r0, i64 2
  store i64 %t1, ptr %r2
  ret void
}

; Claims chunks of %job from the counter at %next (one atomic add each) and runs them
; until none is left. The counter is monotonic: it publishes nothing. The job's words
; were published with the post (the caller's seq_cst store of the job number, read by the
; worker before it took part), the counter's zero with them; and what the chunks write
; reaches the caller through the worker's `done` (release, after its last chunk and its
; last touch of the counter) or is the caller's own. Its only job is that every index
; below n is handed out exactly once.
define internal void @drain(ptr %job, ptr %next) {
entry:
  %pn = call ptr @word(ptr %job, i64 1)
  %n = load i64, ptr %pn
  br label %claim

claim:
  %k = atomicrmw add ptr %next, i64 1 monotonic, align 8
  %left = icmp slt i64 %k, %n
  br i1 %left, label %run, label %out

run:
  call void @run_chunk(ptr %job, i64 %k)
  br label %claim

out:
  ret void
}

define void @hg_pool_worker(ptr %c) {
entry:
  %pdone = call ptr @word(ptr %c, i64 1)
  %psleep = call ptr @word(ptr %c, i64 2)
  %mutex = getelementptr i8, ptr %c, i64 MUTEX
  %cond = getelementptr i8, ptr %c, i64 COND
  br label %wait

wait:
  ; job 0 is the zeroed block's: the first job to run is 1, even when it was posted
  ; before this thread got here
  %seen = phi i64 [ 0, %entry ], [ %job, %ran ]
  br label %poll

poll:
  %n = phi i64 [ 0, %wait ], [ %n1, %hint ]
  %posted = load atomic i64, ptr %c seq_cst, align 8
  %new = icmp ne i64 %posted, %seen
  br i1 %new, label %run, label %idle

idle:
  %n1 = add i64 %n, 1
  %hot = icmp slt i64 %n1, SPIN_ROUNDS
  br i1 %hot, label %hint, label %sleep

hint:
  PAUSE_CALL
  br label %poll

sleep:
  ; Dekker with the caller's post: `sleeping` up, then the job number read (both
  ; seq_cst), against the caller's job number stored, then `sleeping` read (both
  ; seq_cst): in the single order of seq_cst operations one pair comes first, so either
  ; this thread reads the new job number or the caller reads `sleeping` up and signals,
  ; which it does holding the mutex this thread holds until pthread_cond_wait releases
  ; it: no wakeup is lost
  call i32 @pthread_mutex_lock(ptr %mutex)
  %pslept = call ptr @word(ptr %c, i64 7)
  store atomic i64 %seen, ptr %pslept monotonic, align 8
  store atomic i64 1, ptr %psleep seq_cst, align 8
  br label %check

check:
  %again = load atomic i64, ptr %c seq_cst, align 8
  %woken = icmp ne i64 %again, %seen
  br i1 %woken, label %awake, label %block

block:
  call i32 @pthread_cond_wait(ptr %cond, ptr %mutex)
  br label %check

awake:
  ; `sleeping` is cleared before the wakeup is counted: whoever sees the count sees the
  ; flag down, so a stale flag is never taken for the next sleep
  store atomic i64 0, ptr %psleep seq_cst, align 8
  %pwakes = call ptr @word(ptr %c, i64 6)
  %wakes = load atomic i64, ptr %pwakes monotonic, align 8
  %wakes1 = add i64 %wakes, 1
  store atomic i64 %wakes1, ptr %pwakes seq_cst, align 8
  call i32 @pthread_mutex_unlock(ptr %mutex)
  br label %run

run:
  ; Take part in job %job, unless the caller got here first (it then runs this
  ; worker's share itself and never waits for it): whoever moves word 5 from the
  ; previous job number to this one wins, the other touches nothing of the job. The
  ; job number was read with seq_cst (acquire): the job's address, the counter's
  ; address and the counter's zero, stored before the caller posted, are visible. A job
  ; number seen late (the caller stole it, returned, and posted the next) fails the
  ; compare: word 5 has moved on.
  %job = phi i64 [ %posted, %poll ], [ %again, %awake ]
  %prev = sub i64 %job, 1
  %pclaim = call ptr @word(ptr %c, i64 5)
  %claim = cmpxchg ptr %pclaim, i64 %prev, i64 %job seq_cst seq_cst
  %mine = extractvalue { i64, i1 } %claim, 1
  br i1 %mine, label %work, label %ran

work:
  ; the caller cannot have returned: it waits for `done` of a worker whose word 5 it
  ; could not move, so the job and its counter live until the release store below,
  ; which orders every chunk's writes and this thread's last touch of the counter
  ; before the caller's acquire load that sees it
  %pjob = call ptr @word(ptr %c, i64 3)
  %jobp = load ptr, ptr %pjob
  %pnext = call ptr @word(ptr %c, i64 4)
  %next = load ptr, ptr %pnext
  call void @drain(ptr %jobp, ptr %next)
  store atomic i64 %job, ptr %pdone release, align 8
  br label %ran

ran:
  br label %wait
}

; the control block of worker %w >= 1
define internal ptr @block_of(ptr %blocks, i64 %w) alwaysinline {
  %w0 = sub i64 %w, 1
  %off = mul i64 %w0, BLOCK
  %c = getelementptr i8, ptr %blocks, i64 %off
  ret ptr %c
}

; Runs the n chunks of %job on this thread and the job's first `helpers` workers
; (header word 6; at most n - 1): posts the job to each, claims chunks with them from
; one counter until none is left, then, for each worker, either takes its part away
; (it had not started: it will never touch the job) or waits until it is done. Returns
; when every chunk has run, once.
define void @hg_pool_run(ptr %blocks, ptr %job) {
entry:
  ; The claim counter, on a cache line of its own in this frame: it lives exactly as
  ; long as the job (until this returns), and no worker can touch it after that (above)
  %line = alloca [8 x i64], align 64
  store i64 0, ptr %line
  %ph = call ptr @word(ptr %job, i64 6)
  %helpers = load i64, ptr %ph
  br label %post.head

post.head:
  %w = phi i64 [ 1, %entry ], [ %w1, %post.next ]
  %more = icmp sle i64 %w, %helpers
  br i1 %more, label %post, label %own

post:
  ; the job's and the counter's addresses, then the job number (seq_cst, so a release:
  ; a worker that reads the number reads these and the counter's zero)
  %c = call ptr @block_of(ptr %blocks, i64 %w)
  %w3 = call ptr @word(ptr %c, i64 3)
  store ptr %job, ptr %w3
  %w4 = call ptr @word(ptr %c, i64 4)
  store ptr %line, ptr %w4
  %old = load atomic i64, ptr %c monotonic, align 8
  %next = add i64 %old, 1
  store atomic i64 %next, ptr %c seq_cst, align 8
  ; Dekker's other half (the worker's `sleep`): job number stored, then `sleeping` read
  %psleep = call ptr @word(ptr %c, i64 2)
  %asleep = load atomic i64, ptr %psleep seq_cst, align 8
  %sleeping = icmp ne i64 %asleep, 0
  br i1 %sleeping, label %wake, label %post.next

wake:
  %mutex = getelementptr i8, ptr %c, i64 MUTEX
  %cond = getelementptr i8, ptr %c, i64 COND
  call i32 @pthread_mutex_lock(ptr %mutex)
  call i32 @pthread_cond_signal(ptr %cond)
  call i32 @pthread_mutex_unlock(ptr %mutex)
  br label %post.next

post.next:
  %w1 = add i64 %w, 1
  br label %post.head

own:
  call void @drain(ptr %job, ptr %line)
  br label %join.head

join.head:
  ; every chunk is claimed; some may still run on workers
  %j = phi i64 [ 1, %own ], [ %j1, %join.next ]
  %jmore = icmp sle i64 %j, %helpers
  br i1 %jmore, label %join, label %out

join:
  %cj = call ptr @block_of(ptr %blocks, i64 %j)
  %target = load atomic i64, ptr %cj monotonic, align 8
  %pdone = call ptr @word(ptr %cj, i64 1)
  %before = sub i64 %target, 1
  %pclaim = call ptr @word(ptr %cj, i64 5)
  %claim = cmpxchg ptr %pclaim, i64 %before, i64 %target seq_cst seq_cst
  %stolen = extractvalue { i64, i1 } %claim, 1
  br i1 %stolen, label %steal, label %spin

steal:
  ; that worker has not started and now never will: nothing to wait for (`done` kept
  ; in step for whoever reads the block)
  store atomic i64 %target, ptr %pdone release, align 8
  br label %join.next

spin:
  ; it took part: its `done` (release, after its last chunk) read with acquire
  %m = phi i64 [ 0, %join ], [ %m1, %spin.more ], [ %m1, %yield ]
  %d = load atomic i64, ptr %pdone acquire, align 8
  %ok = icmp eq i64 %d, %target
  br i1 %ok, label %join.next, label %spin.more

spin.more:
  %m1 = add i64 %m, 1
  PAUSE_CALL
  %low = and i64 %m1, 255
  %rest = icmp eq i64 %low, 0
  br i1 %rest, label %yield, label %spin

yield:
  call i32 @sched_yield()
  br label %spin

join.next:
  %j1 = add i64 %j, 1
  br label %join.head

out:
  ret void
}
"""


def _pause() -> tuple[str, str]:
    """The CPU's spin-wait hint: x86 `pause`, arm64 `yield`, else nothing."""
    machine = cpu.arch()
    if machine in ("x86_64", "amd64", "i686", "x86"):
        return "declare void @llvm.x86.sse2.pause()", "call void @llvm.x86.sse2.pause()"
    if machine in ("aarch64", "arm64"):
        return "declare void @llvm.aarch64.hint(i32)", "call void @llvm.aarch64.hint(i32 1)"
    return "", ""


_STATE: dict[str, object] = {}
_BUILD_LOCK = threading.Lock()
renew_in_child(sys.modules[__name__], "_BUILD_LOCK")
WORKER, RUN = "hg_pool_worker", "hg_pool_run"


def ir() -> str | None:
    """The worker's and dispatcher's LLVM IR for this machine, or None where pthreads
    (or a symbol of theirs) are missing, and the Python pool serves instead."""
    if os.name != "posix" or not all(loader.process_symbol(name) for name in _PTHREAD):
        return None
    decl, call = _pause()
    return (_IR.replace("PAUSE_DECL", decl).replace("PAUSE_CALL", call).replace("SPIN_ROUNDS", str(SPIN_ROUNDS))
            .replace("MUTEX", str(_MUTEX)).replace("COND", str(_COND)).replace("BLOCK", str(_BLOCK))
            .replace("CHUNKS", str(_CHUNKS)).replace("CLOCK_ID", str(time.CLOCK_MONOTONIC)))


def adopt(worker: int, run: int, keep: object) -> None:
    """Use the worker and dispatcher at these addresses (built from `ir()` into a
    kernel's object code, which `keep` holds alive: workers run it until the process
    ends) if none are in use yet: a parallel launch then needs no LLVM."""
    with _BUILD_LOCK:
        if "ok" not in _STATE:
            _STATE["ok"] = _finish(worker, run, keep)


def _build() -> dict[str, object] | None:
    """The worker and dispatcher, compiled here by MCJIT on first need unless adopted."""
    ok = _STATE.get("ok")  # set last, once: launches read it without the lock
    if ok is None:
        with _BUILD_LOCK:
            if "ok" not in _STATE:
                _STATE["ok"] = _finish(None, None, None)
            ok = _STATE["ok"]
    return _STATE if ok else None


def _finish(worker: int | None, run: int | None, keep: object) -> bool:
    if ir() is None:
        return False
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
    if worker is None or run is None:
        # Compiled straight by MCJIT, as the trampoline is: no pass pipeline, and not
        # counted in jit.STATS (which counts kernel compilations).
        import llvmlite.binding as llvm

        with FORK_GUARD:  # the import too: a fork must not land inside it (hologram.core.forks)
            from . import jit

            module = llvm.parse_assembly(ir())
            module.verify()
            keep = llvm.create_mcjit_compiler(module, jit.target_machine())
            keep.finalize_object()
            worker, run = keep.get_function_address(WORKER), keep.get_function_address(RUN)
    _STATE.update(keep=keep, libc=libc, data=_data_address(),
                  worker=ctypes.CFUNCTYPE(None, ctypes.c_void_p)(worker),
                  run=ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(run))
    return True


def available() -> bool:
    return _build() is not None


class NativePool:
    """`size` threads including the caller: `size - 1` native workers, started at the
    first `run` (and again in a forked child, whose parent's threads are gone)."""

    def __init__(self, size: int):
        if size < 2:
            raise ValueError(f"a native pool runs chunks on workers besides the caller: size {size} < 2")
        self.size = size
        self._pid = -1
        self._blocks = 0
        self._busy = threading.Lock()  # held by the one launch using the workers
        renew_in_child(self, "_busy")  # a child forked during a launch has no workers to wait for

    def _ensure_started(self, state: dict) -> None:
        """Workers for this process (called holding `_busy`)."""
        if self._pid == os.getpid():
            return
        libc = state["libc"]
        workers = self.size - 1
        raw = libc.malloc(_BLOCK * workers + 64)
        if not raw:
            raise MemoryError("cpu_llvm: cannot allocate the thread pool's control blocks")
        blocks = (raw + 63) & ~63
        ctypes.memset(blocks, 0, _BLOCK * workers)
        for w in range(workers):
            c = blocks + w * _BLOCK
            libc.pthread_mutex_init(ctypes.c_void_p(c + _MUTEX), None)
            libc.pthread_cond_init(ctypes.c_void_p(c + _COND), None)
            threading.Thread(target=state["worker"], args=(c,), name=f"hologram-cpu-{w + 1}", daemon=True).start()
        self._blocks = blocks
        self._pid = os.getpid()

    def run(self, fn: ctypes._CFuncPtr, address: int, bufs: bytes, syms: bytes, scalars: bytes,
            chunks: Sequence[tuple[int, int, bytes | None, int]], times: Any = None) -> None:
        """Call `fn(start, end, bufs, syms, scalars, partials, err)` (the stage function
        at `address`; `err` the address of the chunk's four error words) once per
        chunk, any number of them: this thread and up to
        `size - 1` workers claim them one at a time until none is left; return when all
        are done. Which thread runs which chunk is left to timing, so each chunk writes
        only its own partials and error slot. While another Python thread's launch holds
        the workers, the chunks run one after another here instead. `times`, a ctypes
        array of three i64 per chunk, receives (thread ident, start ns, end ns) of each
        chunk (for tracing; None: not timed)."""
        def here() -> None:
            for k, (start, end, partials, err) in enumerate(chunks):
                t0 = trace.now() if times is not None else 0
                fn(start, end, bufs, syms, scalars, partials, err)
                if times is not None:
                    times[3 * k:3 * k + 3] = [threading.get_ident(), t0, trace.now()]

        if len(chunks) < 2 or not self._busy.acquire(blocking=False):
            return here()
        try:
            state = _build()
            assert state is not None
            try:
                self._ensure_started(state)
            except (RuntimeError, MemoryError):  # no thread or memory to be had
                return here()
            at = state["data"]
            words = [address, len(chunks), at(bufs), at(syms), at(scalars),
                     0 if times is None else ctypes.addressof(times), min(len(chunks), self.size) - 1]
            for start, end, partials, err in chunks:
                words += [start, end, 0 if partials is None else at(partials), err]
            job = struct.pack(f"<{len(words)}q", *words)
            state["run"](self._blocks, at(job))
        finally:
            self._busy.release()


def _data_address() -> Callable[[bytes], int]:
    """`data -> address of its bytes`: CPython keeps them at a fixed offset in the object
    (checked here on a probe); elsewhere through ctypes, ~1 µs slower per call."""
    offset = bytes.__basicsize__ - 1
    probe = b"\x01hologram\x02"
    if ctypes.string_at(id(probe) + offset, len(probe)) == probe:
        return lambda data: id(data) + offset
    return lambda data: ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0
