"""What the generated kernels and the host agree on, without LLVM (the launch path reads
it; importing it never imports llvmlite): the error words a kernel writes, and the
kernels of a module with their launch shapes.

A kernel that fails claims `err[0]` with a compare-and-swap from 0 to its code (the
first failing thread wins), then writes `err[1..3]`: the stage index, the instruction
(body) index and the offending value. The codes and their decoding are the SDK's
(hologram/backend/error_record.py), shared with cpu_llvm.
"""

from __future__ import annotations

import attrs

from hologram.backend.error_record import (  # noqa: F401  (re-exported: codegen writes them)
    ERR_CLASS, ERR_OOB_GLOBAL, ERR_OOB_POOL, ERR_OOB_SHARED, ERR_POOL_FREE, ERR_POOL_FULL, ERR_RECURSION, ERROR_WORDS,
)


@attrs.frozen
class KernelEntry:
    """One kernel of a program's module: its PTX name, its stage, and its launch shape:
    the stage's block over the stage's grid, or, for a stage's `.init` stores (`init`),
    one thread, launched before the stage's kernel."""

    name: str
    stage_index: int
    block: tuple[int, int, int]
    init: bool = False


def kernel_shapes(program) -> tuple[tuple[int, tuple[int, int, int], bool], ...]:
    """(stage index, block, init) of each kernel of `program`'s module, in launch order:
    per stage, a one-thread kernel of its `.init` stores when it has any, then the
    stage's own. What the code generator emits and what shipped or cached code must list."""
    shapes = []
    for index, stage in enumerate(program.stages):
        if stage.inits:
            shapes.append((index, (1, 1, 1), True))
        shapes.append((index, tuple(stage.block) + (1,) * (3 - len(stage.block)), False))
    return tuple(shapes)


def lists_kernels_of(program, kernels) -> bool:
    """Whether `kernels` (KernelEntry) have `program`'s kernel shapes, with distinct names."""
    return (tuple((k.stage_index, tuple(k.block), k.init) for k in kernels) == kernel_shapes(program)
            and len({k.name for k in kernels}) == len(kernels))
