"""The error record of compiled backends: the codes generated code writes and their
decoding into the interpreter's words.

A backend that compiles the ISA to native or device code cannot raise where a check
fails; its code writes four i64 words instead, `[code, stage index, instruction index,
value]` (the instruction index counts stage body items, labels included, as the
verifier's and the interpreter's messages do), and the host turns the record into the
exception the interpreter would have raised (`execution_error`), less the lane, which
the record does not carry. cpu_llvm and cuda write these codes; a backend uses the ones
for the failures it can have. Nothing here imports LLVM: a launch path reads it.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from hologram.core import atlas
from hologram.core.errors import ExecutionError, out_of_bounds
from hologram.isa.program import Instr, Program

ERROR_WORDS = 4  # [code, stage, instruction, value]
ERR_OOB_GLOBAL = 1  # value: the index (checked LDG/STG/Reduce*/ResAccum)
ERR_OOB_SHARED = 2  # value: the index (checked LDS/STS)
ERR_OOB_POOL = 3  # value: the index (PoolLoad/PoolStore at or above the pool's top)
ERR_CLASS = 4  # value: the ResAccum class register's value (not in 0..95)
ERR_POOL_FULL = 5  # value: elements of the pool already in use
ERR_POOL_FREE = 6  # value: the handle PoolFree was given (not the most recent allocation)
ERR_BARRIER = 7  # instruction and value: two different barriers (body indices) lanes wait at
ERR_RECURSION = 8  # value: 0 (a CALL re-entering an active subroutine; the verifier forbids it)
ERR_SCRATCH = 9  # value: the bytes of scratch the stage could not allocate (instruction index -1)
ERR_CANCELLED = 10  # value: 0 (Ctrl-C stopped the launch)
ERROR_KINDS = {ERR_OOB_GLOBAL: "global", ERR_OOB_SHARED: "shared", ERR_OOB_POOL: "pool", ERR_CLASS: "class",
               ERR_POOL_FULL: "pool_full", ERR_POOL_FREE: "pool_free", ERR_BARRIER: "barrier",
               ERR_RECURSION: "recursion", ERR_SCRATCH: "scratch", ERR_CANCELLED: "cancelled"}


def execution_error(program: Program, record: Sequence[int], global_sizes: Mapping[str, int], *,
                    backend: str, reporter: str) -> BaseException:
    """The exception for an error record `[code, stage, instruction, value]` of a launch
    of `program`: an ExecutionError worded as the interpreter words it; a MemoryError
    when the stage could not allocate its scratch; KeyboardInterrupt (what Python raises
    for Ctrl-C elsewhere) for a launch Ctrl-C stopped. `global_sizes` maps the global
    buffers to their element counts; `backend` names the backend in the messages that
    are its own, `reporter` what wrote the record ("native code", "the device")."""
    code, stage_index, k, value = (int(v) for v in record)
    if code == ERR_CANCELLED:
        return KeyboardInterrupt()
    stages = program.stages
    body = stages[stage_index].body if 0 <= stage_index < len(stages) else ()
    if code == ERR_SCRATCH and body:
        return MemoryError(f"{backend}: stage '{stages[stage_index].name}' of program '{program.name}' could "
                           f"not allocate its {value:,} bytes of block scratch")
    if code == ERR_BARRIER and body:
        return ExecutionError(f"stage '{stages[stage_index].name}': lanes of a block wait at different "
                              f"barriers (instructions {min(k, value)}, {max(k, value)}); every live lane of a "
                              f"block must reach the same BarSync")
    if not 0 <= k < len(body) or not isinstance(body[k], Instr):
        return ExecutionError(f"program '{program.name}': {reporter} reported error {code} at stage "
                              f"{stage_index}, instruction {k} (value {value})")
    from hologram.isa.asm import format_instr  # the assembler's printer: only to describe an error

    stage, ins = stages[stage_index], body[k]
    where = f"stage '{stage.name}': instruction {k} `{format_instr(ins, align=False)}`"
    site = program.sites[ins.site] if ins.site is not None and 0 <= ins.site < len(program.sites) else None
    name = ins.addr.buffer if ins.addr is not None else None
    if code == ERR_OOB_GLOBAL and name is not None:
        size = global_sizes.get(name, "?")
        return ExecutionError.at(site, f"{where}: {out_of_bounds(value, f'global buffer {name!r}', size)}")
    if code == ERR_OOB_SHARED and name is not None:
        size = next((m.size for m in stage.shared if m.name == name), "?")
        return ExecutionError.at(site, f"{where}: {out_of_bounds(value, f'shared array {name!r}', size)}")
    if code == ERR_OOB_POOL and name is not None:
        return ExecutionError(f"{where}: index {value} is out of bounds for the allocated part of pool '{name}'")
    if code == ERR_CLASS:
        return ExecutionError.at(site, f"{where}: {value} is not an Atlas class (0..{atlas.NUM_CLASSES - 1})")
    if code == ERR_POOL_FULL:
        size = next((m.size for m in stage.pools if m.name == ins.target), "?")
        return ExecutionError(f"{where}: pool '{ins.target}' of {size} elements cannot allocate {ins.count} more "
                              f"({value} in use)")
    if code == ERR_POOL_FREE:
        return ExecutionError(f"{where}: PoolFree of handle {value}, but it is not the most recent allocation")
    if code == ERR_RECURSION:
        return ExecutionError(f"{where}: recursive call to '{ins.target}' (calls may not recurse)")
    return ExecutionError(f"{where}: {reporter} reported error {code} (value {value})")
