"""Moving chunks of rows between storage and a fixed pool: sources, sinks, the pipeline.

A **source** gives one chunk of an input's rows at a time, a **sink** takes one chunk
of an output's rows:

| kind | source | sink |
|---|---|---|
| an array in a shared file mapping (`np.memmap` modes r, r+, w+, and views of one), the kernels' backend with a fault guard (cpu_llvm) | its file mapped by the stream a window at a time, read in place (hologram.streaming.mapped) | `pwrite` from a pool buffer |
| the same, a backend without one (interp) | `pread` into a pool buffer | `pwrite` from a pool buffer |
| the same when no descriptor of the mapped file can be had (no `/proc`, an mmap that keeps none) | copied from the mapping into a pool buffer, then the rows' pages released (`madvise(MADV_DONTNEED)`) | the kernel writes the mapping, then the pages are released (dirty pages of a shared mapping stay in the page cache) |
| any other array (a copy-on-write memmap too) | the rows in place, zero-copy | the rows in place |
| an iterable of arrays | copied into a pool buffer, re-cut to the chunk size | - |

Mapped pages count in a process's resident set; pages in the page cache that it reads
with `pread` do not. So a memmap is read and written through its file, never by
touching the caller's mapping's pages (a window the stream maps itself is unmapped
after its chunks, and the windows in flight fit the pool's budget), and the process's peak RSS is
the pool's size plus what it had.
The descriptor is the file's name reopened when it still names the mapped file, else
one this process holds on it (an `mmap.mmap` keeps its own), so a renamed or deleted
file is read and written the same way (hologram.call.mapping).

A page of a mapping past the end of its file is a SIGBUS when touched, which kills the
process. Through a descriptor, a file that ends early is a short read and a write that
fails (a full disk) an `OSError`: both are `StreamError`s naming the argument and the
file. A window read in place is watched by the backend's fault guard, so a truncation
under the kernel is the same `StreamError` (hologram.streaming.mapped). A file already shorter than its mapping is refused before any chunk is read,
whichever way the array would be read (a copy-on-write memmap, read in place, too).

`run_chunks` runs one pass: a reader thread fills the next slot of the pool while the
caller computes on the current one, and a writer thread writes the previous slot's
outputs back (file I/O releases the GIL, and so do backend launches). Slots go round:
reader -> compute -> writer -> reader. An error in any of the three stops the others
and is raised in the caller's thread.
"""

from __future__ import annotations

import mmap
import os
import queue
import threading
from abc import ABC, abstractmethod
from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence

import numpy as np

from hologram.call.mapping import Extent, Mapped, extent, file_size, mapped, mmap_behind, open_file
from hologram.core.errors import ArgumentError, StreamError

ALIGN = 64  # bytes: each pool buffer starts on a cache line


# ----------------------------------------------------------------------------- files
def _pread(fd: int, view: memoryview, pos: int) -> int:
    """Read `view` from `pos` of the file: the bytes read, fewer at its end."""
    done = 0
    while done < len(view):
        k = os.preadv(fd, [view[done:]], pos + done) if hasattr(os, "preadv") else _seek_read(fd, view[done:],
                                                                                            pos + done)
        if k <= 0:
            break
        done += k
    return done


def _advise(fd: int, pos: int, size: int, advice: str) -> None:
    """posix_fadvise where the platform has it: advice, never a failure."""
    if hasattr(os, "posix_fadvise") and size > 0:
        try:
            os.posix_fadvise(fd, pos, size, getattr(os, advice))
        except OSError:
            pass


def _seek_read(fd: int, view: memoryview, pos: int) -> int:
    os.lseek(fd, pos, os.SEEK_SET)
    return os.readv(fd, [view])


def _pwrite(fd: int, view: memoryview, pos: int) -> None:
    done = 0
    while done < len(view):
        if hasattr(os, "pwritev"):
            k = os.pwritev(fd, [view[done:]], pos + done)
        else:
            os.lseek(fd, pos + done, os.SEEK_SET)
            k = os.writev(fd, [view[done:]])
        if k <= 0:
            raise OSError(f"the file took no bytes at position {pos + done}")
        done += k


def _release(a: np.ndarray, start: int, stop: int) -> None:
    """Drop rows [start, stop) of `a`, an array in a shared file mapping, from this
    process's pages (the file keeps their contents)."""
    mm = mmap_behind(a)
    if mm is None or not hasattr(mmap, "MADV_DONTNEED"):
        return
    base = np.frombuffer(mm, np.uint8).ctypes.data
    row = a.nbytes // max(len(a), 1)
    lo = a.ctypes.data - base + start * row
    hi = a.ctypes.data - base + stop * row
    lo -= lo % mmap.PAGESIZE
    if hi > lo:
        mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


# --------------------------------------------------------------------------- sources
class Source(ABC):
    """One streamed input: `rows` in all (None: unknown until read), each of `row_shape`
    and `dtype`; `pooled` when its chunks go through a pool buffer; `extent` the bytes
    it reads (None: chunks of an iterable, which no output can overlap)."""

    pooled = True
    blocks = True  # whether `read` may wait (for a disk, or for the caller's iterable)
    extent: Extent | None = None

    def __init__(self, name: str, dtype: np.dtype, row_shape: tuple[int, ...], rows: int | None):
        self.name, self.dtype, self.row_shape, self.rows = name, np.dtype(dtype), row_shape, rows

    @property
    def row_bytes(self) -> int:
        return int(np.prod(self.row_shape, dtype=np.int64)) * self.dtype.itemsize

    def begin(self) -> None:
        """Start a pass from row 0."""

    @abstractmethod
    def read(self, start: int, n: int, buf: np.ndarray | None) -> np.ndarray:
        """Rows [start, start + n) (fewer at the end), in `buf` when pooled."""

    def computed(self, start: int) -> None:
        """After the kernel ran on the chunk read at row `start` (or failed): raise what
        went wrong while it read the chunk, give back what only the chunk needed."""

    def end(self) -> None:
        """After a pass: anything left over is an error (an iterable longer than the arrays)."""

    def close(self) -> None:
        """Give back what the source holds (a file descriptor)."""


class ArraySource(Source):
    pooled = False
    blocks = False

    def __init__(self, name: str, array: np.ndarray):
        super().__init__(name, array.dtype, array.shape[1:], len(array))
        self.array, self.extent = array, extent(array)

    def read(self, start: int, n: int, buf: np.ndarray | None) -> np.ndarray:
        return self.array[start:start + n].view(np.ndarray)


class ReadAhead:
    """Asks the kernel to read the next `ahead` bytes of a file (`AHEAD` by default; two
    windows for hologram.streaming.mapped) into the page cache ahead of the reads. The
    reads of a stream are small (a chunk fits a slot of the pool, or a window) and one at
    a time, too few in flight to keep a disk busy (pages of the page cache that no
    process maps do not count in its RSS)."""

    AHEAD = 32 << 20

    def __init__(self, fd: int, pos: int, nbytes: int, ahead: int = AHEAD):
        self.fd, self.end, self.ahead = fd, pos + nbytes, ahead
        self.advised = 0  # the file position up to which the read-ahead was asked for
        _advise(fd, pos, nbytes, "POSIX_FADV_SEQUENTIAL")

    def before(self, at: int, size: int) -> None:
        """Before reading `size` bytes at `at`: ask for more when half the distance is left."""
        if at + size + self.ahead // 2 > self.advised and self.advised < self.end:
            lo = max(self.advised, at)
            self.advised = min(lo + self.ahead, self.end)
            _advise(self.fd, lo, self.advised - lo, "POSIX_FADV_WILLNEED")


class FileSource(Source):
    """A memmap's file read with `pread` into the pool, the file read ahead (`ReadAhead`)."""

    def __init__(self, name: str, array: np.ndarray, fd: int, pos: int, where: str):
        super().__init__(name, array.dtype, array.shape[1:], len(array))
        self.fd, self.pos, self.where = fd, pos, where
        self.extent = extent(array)
        self.ahead = ReadAhead(fd, pos, array.nbytes)

    def read(self, start: int, n: int, buf: np.ndarray | None) -> np.ndarray:
        n = min(n, self.rows - start)
        out = buf[:n]
        at = self.pos + start * self.row_bytes
        end = self.pos + self.rows * self.row_bytes
        self.ahead.before(at, n * self.row_bytes)
        view = memoryview(out.reshape(-1).view(np.uint8))
        try:
            done = _pread(self.fd, view, at)
        except OSError as exc:
            raise StreamError(f"{self.where}: reading the file failed: {exc}") from None
        if done < len(view):
            raise StreamError(f"{self.where}: {ended(end - at - done)} while streaming from it")
        return out

    def close(self) -> None:
        os.close(self.fd)


class MappedSource(Source):
    """A shared memmap read through its mapping, each chunk's pages released after."""

    def __init__(self, name: str, array: np.ndarray):
        super().__init__(name, array.dtype, array.shape[1:], len(array))
        self.array, self.extent = array, extent(array)

    def read(self, start: int, n: int, buf: np.ndarray | None) -> np.ndarray:
        n = min(n, self.rows - start)
        out = buf[:n]
        np.copyto(out, self.array[start:start + n])
        _release(self.array, start, start + n)
        return out


class IterSource(Source):
    """An iterable of arrays of rows, re-cut to the pass's chunk size. `first` is its
    first chunk, already taken (to learn the row shape) from `iterator`: a one-shot
    iterator goes on from there; anything else is iterated afresh by every pass.
    `convert(chunk, number)` checks a chunk and gives it as an array of rows."""

    def __init__(self, name: str, kernel: str, iterable: Iterable, iterator: Iterator, first: np.ndarray,
                 convert: Callable[[Any, int], np.ndarray]):
        super().__init__(name, first.dtype, first.shape[1:], None)
        self.kernel, self.iterable, self.convert = kernel, iterable, convert
        self.once = iterator is iterable
        self.it: Iterator | None = iterator
        self.left: np.ndarray | None = first
        self.count = 1
        self.passes = 0

    def begin(self) -> None:
        if self.passes and self.once:
            raise ArgumentError(f"stream({self.kernel}): input {self.name!r} is an iterator, which can be read "
                                "once, and this kernel reads its input more than once")
        if self.passes:
            self.it, self.left, self.count = iter(self.iterable), None, 0
        self.passes += 1

    def _next(self) -> np.ndarray | None:
        assert self.it is not None
        for chunk in self.it:
            a = self.convert(chunk, self.count)
            self.count += 1
            if len(a):
                return a
        return None

    def read(self, start: int, n: int, buf: np.ndarray | None) -> np.ndarray:
        assert buf is not None
        got = 0
        while got < n:
            if self.left is None or not len(self.left):
                self.left = self._next()
                if self.left is None:
                    break
            k = min(n - got, len(self.left))
            buf[got:got + k] = self.left[:k]
            self.left = self.left[k:]
            got += k
        return buf[:got]

    def end(self) -> None:
        if (self.left is not None and len(self.left)) or self._next() is not None:
            raise ArgumentError(f"stream({self.kernel}): input {self.name!r} has more rows than the other inputs")


# ---------------------------------------------------------------------------- sinks
class Sink:
    """One streamed output: `rows` rows of `row_shape` and `dtype`."""

    pooled = True
    blocks = True  # whether `write` may wait for a disk

    def __init__(self, name: str, array: np.ndarray):
        self.name, self.array = name, array
        self.dtype, self.row_shape, self.rows = array.dtype, array.shape[1:], len(array)

    @property
    def row_bytes(self) -> int:
        return int(np.prod(self.row_shape, dtype=np.int64)) * self.dtype.itemsize

    def target(self, start: int, n: int, buf: np.ndarray | None) -> np.ndarray:
        """Where the kernel writes rows [start, start + n)."""
        return buf[:n] if self.pooled else self.array[start:start + n].view(np.ndarray)

    def write(self, start: int, rows: np.ndarray) -> None:
        """After the kernel wrote `rows` (from `target`): put them where they belong."""

    def close(self) -> None:
        """Give back what the sink holds."""


class ArraySink(Sink):
    pooled = False
    blocks = False


class FileSink(Sink):
    def __init__(self, name: str, array: np.ndarray, fd: int, pos: int, where: str):
        super().__init__(name, array)
        self.fd, self.pos, self.where = fd, pos, where

    def write(self, start: int, rows: np.ndarray) -> None:
        try:
            _pwrite(self.fd, memoryview(rows.reshape(-1).view(np.uint8)), self.pos + start * self.row_bytes)
        except OSError as exc:
            raise StreamError(f"{self.where}: writing the file failed: {exc}") from None

    def close(self) -> None:
        os.close(self.fd)


class MappedSink(Sink):
    pooled = False

    def write(self, start: int, rows: np.ndarray) -> None:
        _release(self.array, start, start + len(rows))


def ended(missing: int) -> str:
    return f"the file ended {missing} bytes early"


def _check_length(where: str, size: int | None, m: Mapped, array: np.ndarray) -> None:
    """Refuse a file shorter than the part of it `array` maps: touching the mapping past
    the file's end is a SIGBUS."""
    end = m.pos + array.nbytes
    if size is not None and size < end:
        raise StreamError(f"{where}: {ended(end - size)}: it holds {size} bytes and the array reaches byte {end} "
                          "of it", hint="the file was truncated after it was mapped; map it again")


def _opened(kernel: str, what: str, array: np.ndarray, writing: bool) -> tuple[Mapped | None, int | None, str]:
    """The file mapping holding `array` (None: memory), a descriptor of its file when the
    mapping is shared and one can be had, and the words for errors about it. A file
    shorter than the array's extent is refused here, before anything is read."""
    m = mapped(array) if array.nbytes else None
    if m is None:
        return None, None, ""
    where = f"stream({kernel}): {what} ({m.path})"
    fd = open_file(m, writing, getattr(array, "filename", None)) if m.shared else None
    try:
        _check_length(where, os.fstat(fd).st_size if fd is not None else file_size(m), m, array)
    except BaseException:
        if fd is not None:
            os.close(fd)
        raise
    return m, fd, where


class ReadsInPlace(Protocol):
    """What reads a shared memmap's file in place (hologram.streaming.mapped.InPlace)."""

    def source(self, name: str, array: np.ndarray, fd: int, pos: int, where: str) -> Source | None:
        """The source, or None when it cannot read in place now (then `pread` does)."""


def source_for(kernel: str, name: str, array: np.ndarray, in_place: ReadsInPlace | None = None) -> Source:
    """How input `name` is read (the module docstring's table); with `in_place` (the
    kernels' backend has a fault guard), a shared memmap's file is mapped a window at a
    time and read in place (hologram.streaming.mapped)."""
    m, fd, where = _opened(kernel, f"input {name!r}", array, writing=False)
    found = in_place.source(name, array, fd, m.pos, where) if fd is not None and in_place is not None else None
    if found is not None:
        return found
    if fd is not None:
        return FileSource(name, array, fd, m.pos, where)
    if m is not None and m.shared:
        return MappedSource(name, array)
    return ArraySource(name, array)


def sink_for(kernel: str, name: str, array: np.ndarray) -> Sink:
    m, fd, where = _opened(kernel, f"out {name!r}", array, writing=True)
    if fd is not None:
        return FileSink(name, array, fd, m.pos, where)
    if m is not None and m.shared:
        return MappedSink(name, array)
    return ArraySink(name, array)


# ----------------------------------------------------------------------------- pool
class Pool:
    """`nbytes` allocated once and carved into slots of buffers for each pass."""

    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        self.memory = np.empty(nbytes, np.uint8)

    def slots(self, count: int, rows: int, parts: Sequence[tuple[str, np.dtype, tuple[int, ...]]]
              ) -> list[dict[str, np.ndarray]]:
        """`count` slots, each a buffer of `rows` rows per (name, dtype, row shape)."""
        out, at = [], 0
        for _ in range(count):
            slot = {}
            for name, dtype, shape in parts:
                size = rows * int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
                at += -at % ALIGN
                slot[name] = self.memory[at:at + size].view(dtype).reshape((rows, *shape))
                at += size
            out.append(slot)
        assert at <= self.nbytes, (at, self.nbytes)
        return out


def pool_size(count: int, rows: int, parts: Sequence[tuple[str, np.dtype, tuple[int, ...]]]) -> int:
    """The bytes `Pool.slots(count, rows, parts)` takes (alignment included)."""
    at = 0
    for _ in range(count):
        for _, dtype, shape in parts:
            at += -at % ALIGN
            at += rows * int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return at


# ---------------------------------------------------------------------------- a pass
Compute = Callable[[int, int, dict[str, np.ndarray], dict[str, np.ndarray]], None]


def run_chunks(sources: Sequence[Source], sinks: Sequence[Sink], chunk: int, total: int | None,
               slots: list[dict[str, np.ndarray]], compute: Compute) -> int:
    """One pass over the rows: `compute(start, n, inputs, outputs)` per chunk, inputs
    read ahead by a reader thread, outputs written back behind by a writer thread
    (module docstring), or all in the caller's thread when no source or sink waits for
    anything (`blocks`). Returns the number of rows."""
    if not any(s.blocks for s in (*sources, *sinks)):
        return _run_inline(sources, sinks, chunk, total, slots[0], compute)
    free: queue.Queue = queue.Queue()
    ready: queue.Queue = queue.Queue()
    written: queue.Queue = queue.Queue()
    for s in slots:
        free.put(s)
    failed: list[BaseException] = []
    stop = threading.Event()
    rows_seen = [0]

    def reader() -> None:
        try:
            for src in sources:
                src.begin()
            start = 0
            while total is None or start < total:
                slot = free.get()
                if slot is None or stop.is_set():
                    return
                want = chunk if total is None else min(chunk, total - start)
                n, views = _read_chunk(sources, start, want, slot)
                if n == 0:
                    break
                ready.put((start, n, slot, views))
                start += n
                if n < want:
                    break
            rows_seen[0] = start
            for src in sources:
                src.end()
        except BaseException as exc:  # raised again in the caller's thread
            failed.append(exc)
        finally:
            ready.put(None)

    def writer() -> None:
        while True:
            item = written.get()
            if item is None:
                return
            start, n, slot, outs = item
            try:
                if not stop.is_set():
                    for sink in sinks:
                        sink.write(start, outs[sink.name])
            except BaseException as exc:
                failed.append(exc)
                stop.set()
                free.put(None)
                continue
            free.put(slot)

    threads = [threading.Thread(target=reader, name="hologram-stream-reader", daemon=True),
               threading.Thread(target=writer, name="hologram-stream-writer", daemon=True)]
    for t in threads:
        t.start()
    try:
        while True:
            item = ready.get()
            if item is None or stop.is_set():
                break
            start, n, slot, views = item
            outs = {sink.name: sink.target(start, n, slot.get(sink.name)) for sink in sinks}
            _compute_chunk(sources, compute, start, n, views, outs)
            if sinks:
                written.put((start, n, slot, outs))
            else:
                free.put(slot)
    except BaseException:
        stop.set()
        raise
    finally:
        written.put(None)  # the writer finishes what it was given, then stops
        threads[1].join()
        free.put(None)  # a reader waiting for a slot sees the end
        threads[0].join()
    if failed:
        raise failed[0]
    return rows_seen[0]


def _read_chunk(sources: Sequence[Source], start: int, want: int, slot: dict[str, np.ndarray]
                ) -> tuple[int, dict[str, np.ndarray]]:
    """Rows [start, start + want) of every source (fewer at their end, the same number for all)."""
    views = {src.name: src.read(start, want, slot.get(src.name)) for src in sources}
    got = {len(v) for v in views.values()}
    if len(got) > 1:
        counts = ", ".join(f"{n!r} {start + len(v)}" for n, v in views.items())
        raise ArgumentError(f"the streamed inputs have different numbers of rows: {counts}")
    return (got.pop() if got else want), views


def _compute_chunk(sources: Sequence[Source], compute: Compute, start: int, n: int, views: dict[str, np.ndarray],
                   outs: dict[str, np.ndarray]) -> None:
    try:
        compute(start, n, views, outs)
    finally:  # a source's error (a file truncated under the kernel) explains the kernel's
        views.clear()  # no view of a window left: `computed` can unmap it now, before the next is mapped
        for src in sources:
            src.computed(start)


def _run_inline(sources: Sequence[Source], sinks: Sequence[Sink], chunk: int, total: int | None,
                slot: dict[str, np.ndarray], compute: Compute) -> int:
    """`run_chunks` in the caller's thread, one slot: for sources and sinks that never
    wait (arrays in memory), where a reader thread would have nothing to overlap.
    (Windows of a memmap read in place wait for the disk when they are mapped: they go
    through the reader thread, which maps the next while the kernel runs.)"""
    for src in sources:
        src.begin()
    start = 0
    while total is None or start < total:
        want = chunk if total is None else min(chunk, total - start)
        n, views = _read_chunk(sources, start, want, slot)
        if n == 0:
            break
        outs = {sink.name: sink.target(start, n, slot.get(sink.name)) for sink in sinks}
        _compute_chunk(sources, compute, start, n, views, outs)
        for sink in sinks:
            sink.write(start, outs[sink.name])
        start += n
        if n < want:
            break
    for src in sources:
        src.end()
    return start
