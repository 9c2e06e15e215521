"""The compile worker: a separate Python process that runs LLVM for cpu_llvm.

Why it exists (docs/cpu-llvm.md, "What memory a compile leaves"): every LLVM
optimization through llvmlite leaves ~75 KB in the process that ran it, which nothing
can free. A process that compiles many distinct kernels hands the later ones to this
worker (offload.py decides when), which optimizes and emits the object code and is
replaced after `offload.WORKER_COMPILES` compiles, so the leak ends with it.

The protocol, over the worker's stdin and stdout: frames of one kind byte, a
little-endian u64 length and the payload. The worker first sends READY (payload: its
`jit.Host.key`, which must equal the caller's for the code to be the same); then, per
COMPILE request (a JSON `CompileRequest`), one OBJECT (the object code), REJECTED (LLVM
refused the module: the message of jit's RuntimeError) or FAILED (anything else: a
traceback). End of input is the order to exit.

This module imports no llvmlite at its top level: the caller imports it for the frame
format only. Run as `python -m hologram_cpu_llvm.compile_worker`.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import sys
import traceback
from typing import BinaryIO

import attrs

READY, COMPILE, OBJECT, REJECTED, FAILED = b"R", b"C", b"O", b"J", b"F"
_HEADER = struct.Struct("<cQ")


class Closed(EOFError):
    """The other end closed the pipe (between frames or inside one)."""


@attrs.frozen
class CompileRequest:
    """One module to compile: what `jit.compile_object` (`target` None: this CPU) or
    `jit.compile_object_for` (`target` a level name or `host`) take."""

    module_ir: str
    level: int
    support: tuple[str, ...] = ()
    target: str | None = None

    def encode(self) -> bytes:
        return json.dumps(attrs.asdict(self)).encode()

    @classmethod
    def decode(cls, payload: bytes) -> "CompileRequest":
        fields = json.loads(payload)
        return cls(fields["module_ir"], int(fields["level"]), tuple(fields["support"]), fields["target"])


def write_frame(stream: BinaryIO, kind: bytes, payload: bytes) -> None:
    stream.write(_HEADER.pack(kind, len(payload)))
    stream.write(payload)
    stream.flush()


def read_frame(stream: BinaryIO) -> tuple[bytes, bytes]:
    """(kind, payload); Closed at the end of the stream."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise Closed("the pipe closed")
    kind, size = _HEADER.unpack(header)
    payload = stream.read(size)
    if len(payload) < size:
        raise Closed("the pipe closed inside a frame")
    return kind, payload


def compile_here(request: CompileRequest) -> bytes:
    """Compile `request` in this process (the worker's job; the caller's before the limit,
    or when the worker cannot serve). RuntimeError when LLVM rejects the module."""
    from . import jit

    if request.target is None:
        return jit.compile_object(request.module_ir, level=request.level, support=request.support)
    return jit.compile_object_for(request.module_ir, jit.target(request.target), level=request.level,
                                  support=request.support)


def serve(requests: BinaryIO, replies: BinaryIO) -> None:
    """Answer compile requests until `requests` ends."""
    from . import jit

    write_frame(replies, READY, jit.host().key.encode())
    while True:
        try:
            kind, payload = read_frame(requests)
        except Closed:
            return
        if kind != COMPILE:
            write_frame(replies, FAILED, f"unknown request kind {kind!r}".encode())
            continue
        try:
            write_frame(replies, OBJECT, compile_here(CompileRequest.decode(payload)))
        except RuntimeError as e:  # LLVM's verdict on the module, as the caller would have had it
            write_frame(replies, REJECTED, str(e).encode())
        except Exception:  # a bug here: the caller compiles in its own process instead
            write_frame(replies, FAILED, traceback.format_exc().encode())


def main() -> None:
    # Ctrl-C in a terminal reaches the whole process group: the caller decides what an
    # interrupted compile means (it stops this worker), so the worker ignores it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The frames own the real stdout; anything else that writes to fd 1 (a library's
    # print, LLVM) goes to stderr instead of corrupting them.
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, replies)


if __name__ == "__main__":
    main()
