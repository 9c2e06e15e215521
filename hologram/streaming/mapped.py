"""A memmap's file read in place: windows of its pages mapped by the stream and read by
the kernels where they lie in the page cache, under the backend's fault guard
(docs/streaming.md, "Reading mapped pages in place").

`pread` into the pool copies every byte once more than the kernel reads it, which holds
a warm `sum` to ~2.7 GB/s; reading the pages in place runs at the kernel's speed. The
user's own mapping is never touched (its pages would stay in the process's RSS): the
source maps a *window* of whole chunks of the file itself (`mmap` of its descriptor,
read-only, populated as it is mapped) and hands out a chunk of it at a time, and the
window is unmapped when the kernel has run on every chunk of it. A pass reading only
in place has chunks of up to `args.IN_PLACE_BYTES` (32 MiB), one window each: few
launches. The windows are mapped in the stream's reader thread (`blocks`: populating a
window waits for the disk when the file is not cached), so the next window's pages come
in while the kernel runs on the current one, and the file is read ahead two windows
further (`ReadAhead`, asynchronous: the disk always has reads in flight). The windows
alive at once are the chunks in flight (the pool's slots: two, three with outputs) at
most, and `chunk_rows` fits that many chunks in the pool's budget, each window at most
`InPlace.window_bytes` (half the budget, 32 MiB at most): the RSS stays within the pool
the caller chose.

A file truncated under the stream: a window is mapped only over bytes the file holds
(`fstat` first, else the same `StreamError` as a short `pread`). A truncation after that
makes the kernel's loads from the lost pages fault; the backend's `FaultGuard`, watching
the window, gives them zeros and records the fault, and `computed` raises that same
error for the chunk instead of letting its result through. Backends without a guard
(the interpreter) read with `pread` (io.FileSource).
"""

from __future__ import annotations

import mmap
import os
import threading
from typing import TYPE_CHECKING, Iterable

import attrs
import numpy as np

from hologram.backend.fault_guard import FaultGuard, Watch
from hologram.call.mapping import extent
from hologram.core.errors import StreamError
from hologram.streaming.args import IN_PLACE_BYTES
from hologram.streaming.io import ReadAhead, Source, ended

if TYPE_CHECKING:
    from hologram.call.kernel import Kernel

WINDOW_BYTES = IN_PLACE_BYTES  # the most a window maps (a pass reading only in place: one chunk)
AHEAD_WINDOWS = 2  # how far ahead of the window being mapped the file is read ahead


@attrs.frozen
class InPlace:
    """How a stream reads memmaps in place: the guard of its kernels' backend, and the
    most bytes one window maps."""

    guard: FaultGuard
    window_bytes: int

    def source(self, name: str, array: np.ndarray, fd: int, pos: int, where: str) -> Source | None:
        """A `WindowSource` for the memmap `array` (its file open as `fd`, the array at
        `pos`), or None when the guard cannot be engaged (another SIGBUS handler was
        put over it: hologram_cpu_llvm.fault_guard)."""
        return WindowSource(name, array, fd, pos, where, self) if self.guard.engage() else None


def in_place_reads(kernels: Iterable[Kernel], budget: int) -> InPlace | None:
    """The in-place reading for a stream running `kernels` (prepared here: a backend hands
    over its guard with its code) within `budget` bytes; None when their backend has no
    fault guard (then memmaps are read with `pread`)."""
    guards = [k.backend.fault_guard() for k in kernels]
    if not guards or any(g is None for g in guards):
        return None
    return InPlace(guards[0], max(min(WINDOW_BYTES, budget // 2), mmap.ALLOCATIONGRANULARITY))


@attrs.define
class _Window:
    """Rows [first, stop) of the file, mapped; `pending` chunks handed out and not yet
    computed on. It is unmapped once every chunk of it was handed out and computed on."""

    first: int
    stop: int
    memory: mmap.mmap | None
    rows: np.ndarray | None
    watch: Watch | None
    handed: int = 0  # the rows before this one have been handed out
    pending: int = 0


class WindowSource(Source):
    """A shared memmap's file mapped a window at a time and read in place (module docstring)."""

    pooled = False
    blocks = True  # mapping a window populates it, which waits for the disk when the file is not cached

    def __init__(self, name: str, array: np.ndarray, fd: int, pos: int, where: str, in_place: InPlace):
        super().__init__(name, array.dtype, array.shape[1:], len(array))
        self.fd, self.pos, self.where, self.extent = fd, pos, where, extent(array)
        self.guard, self.window_bytes = in_place.guard, in_place.window_bytes
        self.ahead = ReadAhead(fd, pos, array.nbytes, AHEAD_WINDOWS * self.window_bytes)
        self.windows: dict[int, _Window] = {}  # by their first row
        self.chunk_window: dict[int, _Window] = {}  # the window of each chunk handed out, by its first row
        self.lock = threading.Lock()  # the reader hands chunks out, the caller's thread gives them back

    def read(self, start: int, n: int, buf: np.ndarray | None) -> np.ndarray:
        n = min(n, self.rows - start)
        with self.lock:
            w = next((w for w in self.windows.values() if w.first <= start and start + n <= w.stop), None)
        if w is None:
            w = self._map(start, n)
        with self.lock:
            w.pending += 1
            w.handed = start + n
            self.chunk_window[start] = w
        assert w.rows is not None
        return w.rows[start - w.first:start - w.first + n]

    def _map(self, start: int, n: int) -> _Window:
        """A window from row `start` of as many whole chunks of `n` rows as fit."""
        chunks = max(self.window_bytes // max(n * self.row_bytes, 1), 1)
        stop = min(start + chunks * n, self.rows)
        at, size = self.pos + start * self.row_bytes, (stop - start) * self.row_bytes
        self._check_size(at, at + size)
        self.ahead.before(at, size)
        lead = at % mmap.ALLOCATIONGRANULARITY
        try:
            memory = mmap.mmap(self.fd, lead + size, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                               prot=mmap.PROT_READ, offset=at - lead)
        except (ValueError, OSError) as exc:  # ValueError: it shrank since the fstat (mmap checks too)
            self._check_size(at, at + size)
            raise StreamError(f"{self.where}: mapping the file failed: {exc}") from None
        flat = np.frombuffer(memory, np.uint8, size, lead)
        w = _Window(start, stop, memory, flat.view(self.dtype).reshape((stop - start, *self.row_shape)), None)
        w.watch = self.guard.watch(flat.ctypes.data, size)
        with self.lock:
            self.windows[start] = w
        return w

    def _check_size(self, at: int, stop: int) -> None:
        """The error a short `pread` of bytes [at, stop) gives, when the file ends before `stop`."""
        size = os.fstat(self.fd).st_size
        if size < stop:
            end = self.pos + self.rows * self.row_bytes
            raise StreamError(f"{self.where}: {ended(end - max(at, size))} while streaming from it")

    def computed(self, start: int) -> None:
        with self.lock:
            w = self.chunk_window.pop(start)
            w.pending -= 1
            done = not w.pending and w.handed >= w.stop
        assert w.watch is not None
        if w.watch.faulted():
            self._release(w)
            raise self._truncated(start)
        if done:
            self._release(w)

    def _truncated(self, start: int) -> StreamError:
        """The error for a chunk whose pages faulted: the file lost them under the kernel."""
        at, end = self.pos + start * self.row_bytes, self.pos + self.rows * self.row_bytes
        size = os.fstat(self.fd).st_size
        if size < end:
            return StreamError(f"{self.where}: {ended(end - max(at, size))} while streaming from it")
        return StreamError(f"{self.where}: the file was truncated while streaming from it (it has grown back since)")

    def _release(self, w: _Window) -> None:
        """Stop watching the window, then drop the mapping (unmapped with its last view)."""
        with self.lock:
            self.windows.pop(w.first, None)
        if w.watch is not None:
            w.watch.close()
            w.watch = None
        w.rows, memory, w.memory = None, w.memory, None
        try:
            memory.close()
        except BufferError:  # a view of it is still alive (the caller's last chunk): it unmaps with that
            pass

    def close(self) -> None:
        for w in list(self.windows.values()):
            self._release(w)
        self.guard.disengage()
        os.close(self.fd)
