"""libc's `sigaction` through ctypes, for the native signal handlers of cancel.py (SIGINT)
and fault_guard.py (SIGBUS). Linux on 64-bit machines only: the layout of
`struct sigaction` is glibc's and musl's there; elsewhere `SIGACTION` is None and
neither handler is installed."""

from __future__ import annotations

import ctypes
import sys
from typing import Any

SA_SIGINFO, SA_ONSTACK = 0x4, 0x08000000  # Linux's values


class SigAction(ctypes.Structure):
    """glibc's and musl's `struct sigaction` on 64-bit Linux."""

    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16), ("flags", ctypes.c_int),
                ("restorer", ctypes.c_void_p)]


def _libc_sigaction() -> Any:
    """libc's `sigaction(signum, new, old)`, taking addresses (the cheapest ctypes call)."""
    if not sys.platform.startswith("linux") or ctypes.sizeof(ctypes.c_void_p) != 8:
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).sigaction
    except (OSError, AttributeError):  # pragma: no cover - no dlopen(NULL) or no sigaction
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    return fn


SIGACTION = _libc_sigaction()
