"""The SIGBUS guard: a native handler under which launches read a file mapping's pages
in place, even if the file is truncated meanwhile (hologram.backend.fault_guard;
docs/streaming.md, "Reading mapped pages in place").

Touching a page of a shared file mapping past the end of its file raises SIGBUS
(`si_code` BUS_ADRERR, `si_addr` the address), and the faulting load runs again when a
handler returns. `hologram_on_sigbus` (support code compiled into every kernel's object,
like the Ctrl-C hook of cancel.py) looks the address up among the *watched* ranges; for
one inside a range it maps a private page of zeros over the faulting page
(`mmap(MAP_FIXED | MAP_ANONYMOUS)`, one system call), records the fault in the range's
slot and returns: the load runs again and reads zeros. The caller asks the slot after
the launch and raises its error instead of trusting the result. Every other SIGBUS
(another address, another `si_code`, one sent with `kill`, or a page the handler could
not replace) goes to the handler installed before this one, called with the same three
arguments; when that was SIG_DFL or SIG_IGN the handler puts SIG_DFL back and raises
the signal again, so the process dies of it as it would have without the guard (a fault
cannot be ignored). A chained handler that calls this one back with the same siginfo (a
cycle, which `engage` avoids) also gets the default action.

The handler only loads words, makes the `mmap`, `sigaction` and `raise` system calls
(async-signal-safe) and stores a word: it takes no lock and allocates nothing, so it may
interrupt any code on any thread, the pool's workers included. The block it reads
(abi.FAULT_GUARD_SYMBOL, bound by the loader and registered with MCJIT) is written by
Python: a range is published by storing its end, then its start (a slot whose start is
0 is free), and withdrawn by storing 0 to its start before its pages are unmapped, so
a fault at a reused address is never taken for the stream's. Aligned 8-byte stores are
atomic on the machines this runs on (x86-64 Linux; the loader links nothing else).

Installed while someone uses it (`engage` ... `disengage`, counted): in front of the
handler in place then (faulthandler's, say), which is put back after the last user.
When another handler was installed over this one while it was in use and not taken off
since, it may chain here, so this one is not put in front of it again (that would make
a cycle): `engage` says False and the stream reads with `pread`.
"""

from __future__ import annotations

import ctypes
import mmap
import signal
import threading
from typing import Any

from hologram.backend import FaultGuard, Watch

from .abi import (
    FAULT_GUARD_SYMBOL, GUARD_CHAINING, GUARD_DEFAULT_ACTION, GUARD_PAGE, GUARD_PREVIOUS, GUARD_SLOT_BYTES,
    GUARD_SLOT_COUNT, GUARD_SLOTS,
)
from .signals import SA_ONSTACK, SA_SIGINFO, SIGACTION, SigAction

HANDLER = "hologram_on_sigbus"
_WORDS = (GUARD_SLOTS + GUARD_SLOT_COUNT * GUARD_SLOT_BYTES) // 8
_BLOCK = (ctypes.c_uint64 * _WORDS)()  # lives as long as the process: native code reads it
ADDRESS = ctypes.addressof(_BLOCK)
SYMBOLS = {FAULT_GUARD_SYMBOL: ADDRESS}  # what object code may reference besides libc and libm
_PREVIOUS = ctypes.c_uint64.from_address(ADDRESS + GUARD_PREVIOUS)
ctypes.c_uint64.from_address(ADDRESS + GUARD_PAGE).value = mmap.PAGESIZE
# the bytes at GUARD_DEFAULT_ACTION stay zero: a `struct sigaction` of SIG_DFL
assert GUARD_DEFAULT_ACTION + ctypes.sizeof(SigAction) <= GUARD_SLOTS

BUS_ADRERR = 2  # si_code of an access past the end of a mapped file (Linux)
# mmap's arguments for the page of zeros (Linux's values)
_PROT_READ, _MAP_ZEROS = 0x1, 0x02 | 0x10 | 0x20  # MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS

_IR = f"""
@{FAULT_GUARD_SYMBOL} = external global i8
declare ptr @mmap(ptr, i64, i32, i32, i32, i64)
declare i32 @sigaction(i32, ptr, ptr)
declare i32 @raise(i32)

define internal ptr @word(i64 %at) alwaysinline {{
  %p = getelementptr i8, ptr @{FAULT_GUARD_SYMBOL}, i64 %at
  ret ptr %p
}}

; siginfo_t on Linux: si_code is the i32 at byte 8, si_addr the pointer at byte 16
define void @{HANDLER}(i32 %sig, ptr %info, ptr %context) {{
entry:
  %pcode = getelementptr i8, ptr %info, i64 8
  %code = load i32, ptr %pcode, align 4
  %past_end = icmp eq i32 %code, {BUS_ADRERR}
  br i1 %past_end, label %search, label %chain

search:
  %paddr = getelementptr i8, ptr %info, i64 16
  %addr = load i64, ptr %paddr, align 8
  br label %slot

slot:
  %i = phi i64 [ 0, %search ], [ %next, %miss ]
  %off = mul i64 %i, {GUARD_SLOT_BYTES}
  %at = add i64 %off, {GUARD_SLOTS}
  %pstart = call ptr @word(i64 %at)
  %start = load atomic volatile i64, ptr %pstart acquire, align 8
  %pend = getelementptr i8, ptr %pstart, i64 8
  %end = load atomic volatile i64, ptr %pend acquire, align 8
  %used = icmp ne i64 %start, 0
  %from = icmp uge i64 %addr, %start
  %to = icmp ult i64 %addr, %end
  %after = and i1 %used, %from
  %inside = and i1 %after, %to
  br i1 %inside, label %replace, label %miss

miss:
  %next = add i64 %i, 1
  %more = icmp ult i64 %next, {GUARD_SLOT_COUNT}
  br i1 %more, label %slot, label %chain

replace:
  %ppage = call ptr @word(i64 {GUARD_PAGE})
  %page = load i64, ptr %ppage, align 8
  %mask = sub i64 0, %page
  %base = and i64 %addr, %mask
  %where = inttoptr i64 %base to ptr
  %got = call ptr @mmap(ptr %where, i64 %page, i32 {_PROT_READ}, i32 {_MAP_ZEROS}, i32 -1, i64 0)
  %placed = icmp eq ptr %got, %where
  br i1 %placed, label %record, label %chain

record:
  %pfaulted = getelementptr i8, ptr %pstart, i64 16
  store atomic volatile i64 1, ptr %pfaulted release, align 8
  ret void

chain:
  %pchaining = call ptr @word(i64 {GUARD_CHAINING})
  %chaining = load atomic volatile i64, ptr %pchaining monotonic, align 8
  %this = ptrtoint ptr %info to i64
  %cycle = icmp eq i64 %chaining, %this
  %pprevious = call ptr @word(i64 {GUARD_PREVIOUS})
  %previous = load atomic volatile i64, ptr %pprevious monotonic, align 8
  %function = icmp ugt i64 %previous, 1
  %no_cycle = xor i1 %cycle, true
  %call_it = and i1 %function, %no_cycle
  br i1 %call_it, label %call, label %default

call:
  store atomic volatile i64 %this, ptr %pchaining monotonic, align 8
  %fn = inttoptr i64 %previous to ptr
  call void %fn(i32 %sig, ptr %info, ptr %context)
  store atomic volatile i64 0, ptr %pchaining monotonic, align 8
  ret void

default:
  %dfl = call ptr @word(i64 {GUARD_DEFAULT_ACTION})
  call i32 @sigaction(i32 %sig, ptr %dfl, ptr null)
  call i32 @raise(i32 %sig)
  ret void
}}
"""


def ir() -> str | None:
    """The handler's LLVM IR (support code compiled into every kernel's object code), or
    None where it cannot be installed (not Linux on a 64-bit machine)."""
    return _IR if SIGACTION is not None else None


_SIGBUS = int(signal.SIGBUS) if hasattr(signal, "SIGBUS") else 0
_LOCK = threading.Lock()
_STATE: dict[str, Any] = {}  # "handler": its address, "keep": what holds its code


class _Use:
    """Who uses the handler (under _LOCK): how many, what it was put in front of, and
    whether another handler may chain to it (installed over it, and not taken off)."""

    users = 0
    saved: SigAction | None = None
    displaced = False
    free = list(range(GUARD_SLOT_COUNT - 1, -1, -1))


def adopt(address: int, keep: Any) -> None:
    """Use the handler at `address` (in a kernel's object code, which `keep` holds alive
    for the rest of the process: a signal may call it at any time) if none is in use yet."""
    if address and "handler" not in _STATE and SIGACTION is not None and _SIGBUS:
        _STATE.update(keep=keep, handler=address)


def guard() -> FaultGuard | None:
    """The guard, once a loaded object has handed over its handler (`adopt`); None before,
    and where signals cannot be handled this way."""
    handler = _STATE.get("handler")
    return _NativeGuard(handler) if handler is not None else None


def _installed() -> SigAction:
    current = SigAction()
    if SIGACTION(_SIGBUS, None, ctypes.addressof(current)) != 0:  # pragma: no cover - SIGBUS is valid
        raise OSError(ctypes.get_errno(), "sigaction(SIGBUS) failed")
    return current


class _NativeGuard(FaultGuard):
    def __init__(self, handler: int):
        self.handler = handler

    def engage(self) -> bool:
        with _LOCK:
            current = _installed()
            if (current.handler or 0) == self.handler:
                _Use.displaced = False  # whatever was over it has taken itself off
            elif _Use.users or _Use.displaced:
                return False  # replaced while in use, or a handler over it may chain to it
            else:
                hook = SigAction()
                hook.handler = self.handler
                hook.flags = SA_SIGINFO | SA_ONSTACK  # faulthandler's alternate stack, when it has one
                _PREVIOUS.value = current.handler or 0
                _Use.saved = current
                if SIGACTION(_SIGBUS, ctypes.addressof(hook), None) != 0:  # pragma: no cover
                    return False
            _Use.users += 1
            return True

    def disengage(self) -> None:
        with _LOCK:
            _Use.users -= 1
            if _Use.users:
                return
            if (_installed().handler or 0) != self.handler:
                _Use.displaced = True
            elif _Use.saved is not None:
                SIGACTION(_SIGBUS, ctypes.addressof(_Use.saved), None)

    def watch(self, address: int, size: int) -> Watch:
        with _LOCK:
            assert _Use.users, "watch() needs the guard engaged"
            if not _Use.free:
                raise RuntimeError(f"more than {GUARD_SLOT_COUNT} mapped ranges are watched at once (one or two "
                                   "per streamed memmap)")
            slot = _Use.free.pop()
        words = (ctypes.c_uint64 * 3).from_address(ADDRESS + GUARD_SLOTS + slot * GUARD_SLOT_BYTES)
        words[2] = 0
        words[1] = address + size
        words[0] = address  # published last: the range is watched from here
        return _NativeWatch(slot, words)


class _NativeWatch(Watch):
    def __init__(self, slot: int, words: Any):
        self.slot, self.words = slot, words

    def faulted(self) -> bool:
        return bool(self.words[2])

    def close(self) -> bool:
        if self.words is None:
            raise RuntimeError("this watch was closed already")
        faulted = self.faulted()
        self.words[0] = 0  # withdrawn before the caller unmaps the range
        self.words = None
        with _LOCK:
            _Use.free.append(self.slot)
        return faulted

