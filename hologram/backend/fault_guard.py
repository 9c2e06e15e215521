"""Reading file-mapped memory in place without dying of SIGBUS: the capability a backend
may offer (`Backend.fault_guard`), and what `hologram.stream` asks of it.

A page of a shared file mapping past the end of its file raises SIGBUS when touched,
and the faulting load runs again after any handler returns, so neither Python (whose
handlers run later, between bytecodes) nor a handler that only records the fault can
let the process live. A fault guard is native code that can: for a fault inside an
address range the caller is *watching*, it puts a page of zeros where the file's page
was and records the fault; the load then reads zeros, the computation finishes with
wrong values, and the caller, which asks `Watch.faulted()` before it trusts them,
raises its own error instead. Faults anywhere else go to whatever handled SIGBUS
before (faulthandler's report, or the default action: the process dies, as without the
guard). cpu_llvm's is in hologram_cpu_llvm/fault_guard.py (docs/streaming.md, "Reading
mapped pages in place").
"""

from __future__ import annotations

import abc


class Watch(abc.ABC):
    """One watched address range, from `FaultGuard.watch` until `close`."""

    @abc.abstractmethod
    def faulted(self) -> bool:
        """Whether a page of the range faulted (and reads zeros now) since the watch began."""

    @abc.abstractmethod
    def close(self) -> bool:
        """Stop watching (before the range is unmapped: its addresses may be reused by
        another mapping, whose faults are not the caller's); returns `faulted()`."""


class FaultGuard(abc.ABC):
    """The process-wide SIGBUS handler of a backend, put in place while someone uses it."""

    @abc.abstractmethod
    def engage(self) -> bool:
        """Put the handler in place for one more user (in front of the one installed now,
        which it chains to), or keep it there; False, with nothing changed, when it
        cannot be put in place safely (then read the mapping some other way)."""

    @abc.abstractmethod
    def disengage(self) -> None:
        """One user fewer; after the last, the handler it was put in front of is back
        (unless another was installed over it since, which then stays in place)."""

    @abc.abstractmethod
    def watch(self, address: int, size: int) -> Watch:
        """Watch `size` bytes at `address` (the guard engaged): the pages of a mapping the
        caller made and will unmap only after closing the watch."""
