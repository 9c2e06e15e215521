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

from hologram.backend import DType, gathered_sums
from hologram.backend.error_record import (  # noqa: F401  (re-exported: codegen writes them)
    ERR_CLASS, ERR_OOB_GLOBAL, ERR_OOB_POOL, ERR_OOB_SHARED, ERR_POOL_FREE, ERR_POOL_FULL, ERR_RECURSION, ERROR_WORDS,
)


# Threads of a stage's sums kernel (one block: it folds the stage's per-block partials).
SUM_THREADS = 256
PARTIAL_BYTES = 8  # a per-block partial's slot in the launch's scratch memory (f32 or f64)


def tree_sums(program, stage) -> tuple:
    """The full float sums of `stage` this backend adds as trees (docs/gpu.md, "Full
    float sums"): the SDK's `gathered_sums` at f32 and f64, in a stage without BarSync.
    The tree runs after the lane's end, where every thread of the block must arrive; a
    stage with barriers has threads that exit early (so as not to hold a barrier), so
    its sums stay atomics, one contribution at a time."""
    if any(getattr(i, "op", None) == "BarSync" for i in stage.body):
        return ()
    return gathered_sums(program, stage, (DType.F32, DType.F64))


@attrs.frozen
class KernelEntry:
    """One kernel of a program's module: its PTX name, its stage, its launch shape, and
    its kind: `stage` (the stage's block over the stage's grid), `init` (the stage's
    `.init` stores, one thread, launched before it) or `sums` (SUM_THREADS threads in one
    block, launched after it: its full float sums folded and merged into memory)."""

    name: str
    stage_index: int
    block: tuple[int, int, int]
    kind: str = "stage"


KINDS = ("init", "stage", "sums")


def kernel_shapes(program) -> tuple[tuple[int, tuple[int, int, int], str], ...]:
    """(stage index, block, kind) of each kernel of `program`'s module, in launch order:
    per stage, a one-thread kernel of its `.init` stores when it has any, the stage's
    own, then the one that folds its full float sums when it has any. What the code
    generator emits and what shipped or cached code must list."""
    shapes = []
    for index, stage in enumerate(program.stages):
        if stage.inits:
            shapes.append((index, (1, 1, 1), "init"))
        shapes.append((index, tuple(stage.block) + (1,) * (3 - len(stage.block)), "stage"))
        if tree_sums(program, stage):
            shapes.append((index, (SUM_THREADS, 1, 1), "sums"))
    return tuple(shapes)


def lists_kernels_of(program, kernels) -> bool:
    """Whether `kernels` (KernelEntry) have `program`'s kernel shapes, with distinct names."""
    return (tuple((k.stage_index, tuple(k.block), k.kind) for k in kernels) == kernel_shapes(program)
            and len({k.name for k in kernels}) == len(kernels))
