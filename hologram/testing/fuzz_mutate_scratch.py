"""The program mutator's scratch mutation (issue 21): a stage's block scratch taken to its
limits (docs/isa.md, "Block scratch"). Just under, the program must verify and run on
both backends without a crash; just over, the verifier must refuse it (the oracle checks
that no verified program is past the limit).

`m_scratch` picks a stage and a lever: the block (the most lanes it can have, the rest of
the budget then filled with a pool), padding pools, padding shared arrays, or padding
registers in the largest block (which count only across a barrier, so one BarSync is put
first when the stage has none). Going under, a stage already past the limit first has its block halved until
its lanes fit (issue 21's reproducers among the seeds come back as large-block programs
that verify). It is one of `fuzz_mutate_programs.MUTATORS`.
"""

from __future__ import annotations

import math
from typing import Iterator

import attrs
import numpy as np

from hologram.core.types import DType
from hologram.isa.program import Instr, MemDecl, Program, RegDecl, Stage
from hologram.testing.fuzz_common import pick
from hologram.verify.decl_rules import (MAX_BLOCK_SCRATCH_BYTES, MAX_BLOCK_THREADS, MAX_POOL_ELEMENTS,
                                        MAX_SHARED_BYTES, MAX_SHARED_ELEMENTS, REGISTER_BYTES, block_scratch)

Rng = np.random.Generator
_LARGEST_BLOCKS = {1: (MAX_BLOCK_THREADS,), 2: (32, 32), 3: (16, 8, 8)}
MAX_PADDING_REGISTERS = 1024


def _fresh(stage: Stage, prefix: str) -> Iterator[str]:
    """Names `prefix0`, `prefix1`, ... that the stage does not use."""
    taken = {r.name for r in stage.regs} | {m.name for m in stage.shared + stage.pools}
    k = 0
    while True:
        if f"{prefix}{k}" not in taken:
            yield f"{prefix}{k}"
        k += 1


def _elements(room: int, unit: int, over: bool) -> int:
    """Elements of `unit` bytes that fill `room` bytes: the most that fit, or one more."""
    return room // unit + (1 if over else 0)


def _pad_pools(rng: Rng, stage: Stage, over: bool) -> tuple[Stage, str]:
    t = pick(rng, list(DType))
    scratch = block_scratch(stage)
    count = _elements(MAX_BLOCK_SCRATCH_BYTES - scratch.total, scratch.lanes * t.itemsize, over)
    pools = stage.pools + _declarations(_fresh(stage, "scratch_pl"), t, count, MAX_POOL_ELEMENTS)
    return attrs.evolve(stage, pools=pools), f"pools of {t.name.lower()}"


def _pad_shared(rng: Rng, stage: Stage, over: bool) -> tuple[Stage, str]:
    t = pick(rng, list(DType))
    scratch = block_scratch(stage)
    room = min(MAX_SHARED_BYTES - scratch.shared, MAX_BLOCK_SCRATCH_BYTES - scratch.total)
    count = _elements(room, t.itemsize, over)
    shared = stage.shared + _declarations(_fresh(stage, "scratch_sh"), t, count, MAX_SHARED_ELEMENTS)
    return attrs.evolve(stage, shared=shared), f"shared arrays of {t.name.lower()}"


def _declarations(names: Iterator[str], dtype: DType, count: int, cap: int) -> tuple[MemDecl, ...]:
    """`count` elements of `dtype` as arrays of at most `cap` elements each."""
    return tuple(MemDecl(next(names), dtype, min(cap, count - start)) for start in range(0, count, cap))


def _pad_registers(rng: Rng, stage: Stage, over: bool) -> tuple[Stage, str]:
    """Registers to the limit across a barrier (one put first if the stage has none),
    or, when that barrier alone would take a full stage past it, a few registers more
    without one (where they count for nothing)."""
    barred = stage
    if not any(isinstance(i, Instr) and i.op == "BarSync" for i in stage.body):
        barred = attrs.evolve(stage, body=(Instr("BarSync"),) + stage.body)
    if over or block_scratch(barred).total <= MAX_BLOCK_SCRATCH_BYTES:
        stage = barred
    scratch = block_scratch(stage)
    count = _elements(MAX_BLOCK_SCRATCH_BYTES - scratch.total, scratch.lanes * REGISTER_BYTES, over) \
        if stage is barred else int(rng.integers(1, 64))
    count = min(count, MAX_PADDING_REGISTERS)  # more costs the verifier and LLVM seconds, not coverage
    names = _fresh(stage, "scratch_r")
    regs = stage.regs + tuple(RegDecl(next(names), pick(rng, list(DType))) for _ in range(max(0, count)))
    return attrs.evolve(stage, regs=regs), "registers across a barrier" if stage is barred else "registers"


_LEVERS = {"block": _pad_pools, "pools": _pad_pools, "shared": _pad_shared, "registers": _pad_registers}


def _halve_block(stage: Stage) -> Stage:
    """`stage` with its block halved (its largest axis first) until its lanes' pools and
    registers fit the limit, or the block is one lane."""
    while block_scratch(stage).total - block_scratch(stage).shared > MAX_BLOCK_SCRATCH_BYTES - MAX_SHARED_BYTES \
            and math.prod(stage.block) > 1:
        axis = max(range(len(stage.block)), key=lambda a: stage.block[a])
        stage = attrs.evolve(stage, block=stage.block[:axis] + ((stage.block[axis] + 1) // 2,) + stage.block[axis + 1:])
    return stage


def m_scratch(rng: Rng, p: Program) -> tuple[Program, str] | None:
    """A stage's block scratch brought to the limit (half the time one element past it)."""
    if not p.stages:
        return None
    s = int(rng.integers(len(p.stages)))
    stage = p.stages[s]
    try:
        if block_scratch(stage).lanes < 1:
            return None
    except (TypeError, AttributeError, ValueError):  # an earlier mutation broke a declaration
        return None
    over = bool(rng.random() < 0.5)
    lever = pick(rng, list(_LEVERS))
    if lever in ("block", "registers"):  # the most lanes that fit (registers: a few hundred fill them)
        stage = attrs.evolve(stage, block=_LARGEST_BLOCKS.get(len(stage.domain), stage.block))
    if lever in ("block", "registers") or not over:
        stage = _halve_block(stage)
    stage, what = _LEVERS[lever](rng, stage, over)
    scratch = block_scratch(stage)
    stages = p.stages[:s] + (stage,) + p.stages[s + 1:]
    return attrs.evolve(p, stages=stages), \
        f"scratch:{lever} stage {s} {'over' if over else 'under'} the limit with {what}: {scratch.total:,} bytes " \
        f"({scratch.shared:,} shared) in {math.prod(stage.block)}-lane blocks"
