"""Stopping a native launch with Ctrl-C: a flag stage code polls, and the SIGINT hook
that sets it (docs/cpu-llvm.md, "Stopping a launch").

Python runs its signal handlers in the main thread, between bytecodes; a thread inside
native code runs none, so on its own Ctrl-C would wait for the launch to end (forever,
for a loop of 2**62 trips). So a tiny native handler, `hologram_on_sigint` (compiled into
every kernel's object code as support code, like the launch entry point), is put in
front of Python's C-level handler: it sets the flag byte and calls Python's handler,
which then raises KeyboardInterrupt as usual once the main thread is back in Python.
Stage code polls the flag (a relaxed load of one byte: at every back-edge of a loop that
holds loops, every 1024th of an innermost loop, and after every block); a launch of the
main thread stops at the first poll that finds it set and returns ERR_CANCELLED, which
the runtime raises as KeyboardInterrupt. Launches of other threads go on: Python
interrupts only its main thread, and so does this.

The block the code reads (`CANCEL_SYMBOL`, bound by the loader and registered with
MCJIT): byte 0, the flag; word 1, the handler the hook chains to; word 2, the main
thread's id, `threading.get_ident()` (the launch entry point marks the main thread's
launches with it).

The hook is (re)installed by `arm()`, when a program is prepared or a launcher made and
at every launch that may run long (runtime.Geometry.long): only over a handler that is
a function (never over SIG_IGN or SIG_DFL: then Ctrl-C is not Python's to turn into
KeyboardInterrupt), and after the first time only over the handler it chained to
(Python's, which `signal.signal` and asyncio reinstall), never over another library's,
which may chain to this one. Linux only (the layout of `struct sigaction`); elsewhere a
launch runs to its end.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
from typing import Any

from .abi import CANCEL_MAIN_THREAD, CANCEL_PREVIOUS, CANCEL_SYMBOL, CANCELLABLE
from .signals import SIGACTION, SigAction

_BLOCK = (ctypes.c_int64 * 8)()  # lives as long as the process: native code reads it
ADDRESS = ctypes.addressof(_BLOCK)
_FLAG = ctypes.c_uint8.from_address(ADDRESS)
_PREVIOUS = ctypes.c_uint64.from_address(ADDRESS + CANCEL_PREVIOUS)
_MAIN = ctypes.c_uint64.from_address(ADDRESS + CANCEL_MAIN_THREAD)
SYMBOLS = {CANCEL_SYMBOL: ADDRESS}  # what object code may reference besides libc and libm
HANDLER = "hologram_on_sigint"

_IR = f"""
@{CANCEL_SYMBOL} = external global i8

; a SIGINT: raise the flag, then call the handler this one was put in front of (with the
; three arguments of an SA_SIGINFO handler; a plain one ignores the last two)
define void @{HANDLER}(i32 %sig, ptr %info, ptr %context) {{
entry:
  store atomic volatile i8 1, ptr @{CANCEL_SYMBOL} monotonic, align 1
  %at = getelementptr i8, ptr @{CANCEL_SYMBOL}, i64 {CANCEL_PREVIOUS}
  %previous = load volatile i64, ptr %at, align 8
  %function = icmp ugt i64 %previous, 1
  br i1 %function, label %chain, label %done

chain:
  %fn = inttoptr i64 %previous to ptr
  call void %fn(i32 %sig, ptr %info, ptr %context)
  br label %done

done:
  ret void
}}
"""


def ir() -> str:
    """The hook's LLVM IR (support code compiled into every kernel's object code)."""
    return _IR



# What `arm` reads the installed handler into: shared by every thread, as all of them
# read the same action into it (the install copies it first).
_INSTALLED = SigAction()
_INSTALLED_AT = ctypes.addressof(_INSTALLED)
_STATE: dict[str, Any] = {}  # "handler": the hook's address, "keep": what holds its code
_SIGINT = int(signal.SIGINT)


def adopt(address: int, keep: Any) -> None:
    """Use the hook at `address` (in a kernel's object code, which `keep` holds alive for
    the rest of the process: a signal may call it at any time) if none is in use yet."""
    if address and "handler" not in _STATE:
        _STATE.update(keep=keep, handler=address)


def arm() -> None:
    """Put the hook in front of the process's SIGINT handler, or back there after
    `signal.signal` replaced it (see the module docstring); ~1 µs (a `sigaction` call)."""
    handler = _STATE.get("handler")
    if handler is None or SIGACTION is None or SIGACTION(_SIGINT, None, _INSTALLED_AT) != 0:
        return
    installed = _INSTALLED.handler or 0
    if installed == handler or installed <= 1:  # hooked already; SIG_DFL or SIG_IGN
        return
    if _PREVIOUS.value and installed != _PREVIOUS.value:  # another library's handler: it decides
        return
    hook = SigAction.from_buffer_copy(_INSTALLED)  # its flags and mask, our handler
    hook.handler = handler
    _PREVIOUS.value = installed
    SIGACTION(_SIGINT, ctypes.addressof(hook), None)


def begin() -> int:
    """At the start of a launch: the mark for its error slots (err[3]): CANCELLABLE on the
    main thread, whose launch Ctrl-C stops, with a flag left from an earlier Ctrl-C
    (one that came while no launch ran) dropped; 0 on any other thread."""
    if threading.get_ident() != _MAIN.value:
        return 0
    if _FLAG.value:
        _FLAG.value = 0
    return CANCELLABLE


def _forked() -> None:
    """In a child the forking thread is the only one, and the main thread (Python runs
    signal handlers there), whichever thread it was in the parent."""
    _MAIN.value = threading.get_ident()


_MAIN.value = threading.main_thread().ident or 0  # the thread Python runs signal handlers in
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
