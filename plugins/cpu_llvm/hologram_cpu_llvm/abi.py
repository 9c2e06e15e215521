"""What generated code and the runtime agree on, without LLVM: error codes a stage
writes, and which reduction a stage performs into a buffer (the identity its partials
start from). codegen writes code to this contract; runtime.py and backend.py read it
when they link object code, so a process that only loads code never imports llvmlite.
"""

from __future__ import annotations

from hologram.backend import Instr, Stage
# The error codes a stage writes to err[0] (err[3]: the offending value) are the SDK's,
# which also decodes a record into the interpreter's words; re-exported for codegen.
from hologram.backend.error_record import (  # noqa: F401
    ERR_BARRIER, ERR_CANCELLED, ERR_CLASS, ERR_OOB_GLOBAL, ERR_OOB_POOL, ERR_OOB_SHARED, ERR_POOL_FREE,
    ERR_POOL_FULL, ERR_RECURSION, ERR_SCRATCH, ERROR_KINDS,
)
from hologram.errors import VerifyError

# Cancellation (cancel.py, docs/cpu-llvm.md "Stopping a launch"): stage code polls the
# byte at CANCEL_SYMBOL, an external global the loader binds to the runtime's block
# (byte 0: the flag a SIGINT sets; word 1: the handler the hook chains to; word 2: the
# main thread's id, `threading.get_ident()`). A launch whose err[3] holds CANCELLABLE
# when a stage is called (the main thread's) stops at a poll that finds the flag set,
# with ERR_CANCELLED.
CANCEL_SYMBOL = "hologram_cancel"
CANCEL_PREVIOUS, CANCEL_MAIN_THREAD = 8, 16  # byte offsets in the block
CANCELLABLE = 1

# The SIGBUS guard (fault_guard.py, docs/streaming.md "Reading mapped pages in place"):
# its handler reads the block at FAULT_GUARD_SYMBOL, an external global the loader binds
# like the cancel block: word 0, the handler it chains to; word 1, the page size; word 2,
# the siginfo being chained (a cycle back into the handler takes the default action);
# at byte 64 a `struct sigaction` of the default action; from byte GUARD_SLOTS,
# GUARD_SLOT_COUNT watched ranges of four i64 each (start, end, faulted, unused), a
# slot with start 0 free.
FAULT_GUARD_SYMBOL = "hologram_fault_guard"
GUARD_PREVIOUS, GUARD_PAGE, GUARD_CHAINING, GUARD_DEFAULT_ACTION = 0, 8, 16, 64
GUARD_SLOTS, GUARD_SLOT_BYTES, GUARD_SLOT_COUNT = 256, 32, 64

REDUCE_OPS = ("ReduceAdd", "ReduceMin", "ReduceMax", "ReduceMul", "ResAccum")


def reduce_buffers(stage: Stage) -> tuple[str, ...]:
    """The global buffers written by Reduce*/ResAccum, in order of first appearance."""
    out: dict[str, None] = {}
    for item in stage.body:
        if isinstance(item, Instr) and item.op in REDUCE_OPS and item.addr is not None:
            out.setdefault(item.addr.buffer, None)
    return tuple(out)


def reduce_op(stage: Stage, buffer: str) -> tuple[str, object]:
    """(opcode, dtype) of the reductions into `buffer` in `stage`: what the runtime needs
    to pre-fill a partial with the identity. Mixing reduction opcodes on one buffer in
    one stage is refused here, since one identity could not serve both."""
    ops = {(i.op if i.op != "ResAccum" else "ReduceAdd", i.dtype) for i in stage.body
           if isinstance(i, Instr) and i.op in REDUCE_OPS and i.addr is not None and i.addr.buffer == buffer}
    if len({op for op, _ in ops}) != 1:
        raise VerifyError(f"cpu_llvm: stage '{stage.name}': buffer '{buffer}' is reduced with "
                          f"{' and '.join(sorted({op for op, _ in ops}))} in one stage; expected one reduction kind")
    return next(iter(ops))
