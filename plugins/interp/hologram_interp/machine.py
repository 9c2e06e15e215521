"""The machine: runs decoded stages one lane at a time.

A stage's domain is tiled into blocks of `block` lanes per axis; the last block on an
axis is partial (lanes exist only inside the domain). Blocks run one after another, x
fastest. Inside a block every lane is a generator that yields when it reaches BarSync:
the block's live lanes are advanced round-robin until each one waits at the barrier (or
has exited), then all are released together. So a block's shared memory behaves as it
would on parallel hardware, for programs that synchronize correctly; racy programs get
the sequential, lane-order answer.

Reductions are gathered per (opcode, buffer, element) for the whole stage, combined
pairwise in lane order, and merged with memory when the stage ends.
"""

from __future__ import annotations

import itertools
from typing import Iterator, Mapping

import numpy as np

from hologram.backend import AXES, OPCODES, DType, const, convert, domain_extents, pairwise, trace
from hologram.errors import ExecutionError

from .decode import BARRIER, EXIT, Executable, StageCode, special_key
from .lane import Lane, PoolMem


def run(exe: Executable, mem: dict[str, np.ndarray], consts: dict[tuple[str, str], np.generic],
        symbols: Mapping[str, int]) -> None:
    """Run every stage of `exe` in order over the flat global buffers `mem`.

    consts holds the value of each shape symbol and scalar parameter, by `const_key`."""
    with np.errstate(all="ignore"):
        for stage in exe.stages:
            with trace.span(f"stage {stage.name}", "stage", kernel=exe.program.name, stage=stage.name):
                run_stage(stage, mem, consts, symbols)


def extents(stage: StageCode, symbols: Mapping[str, int]) -> tuple[int, int, int]:
    """The stage's domain under `symbols`, padded to three axes."""
    ext = domain_extents(stage, symbols)
    return ext + (1,) * (3 - len(ext))


def _keys(kind: str) -> tuple:
    return tuple(special_key(f"{kind}.{axis}") for axis in AXES)


TID, GID, CTAID, NTID, NCTAID, GDIM = map(_keys, ("tid", "gid", "ctaid", "ntid", "nctaid", "gdim"))


def run_stage(stage: StageCode, mem: dict[str, np.ndarray], consts: dict[tuple[str, str], np.generic],
              symbols: Mapping[str, int]) -> None:
    ext = extents(stage, symbols)
    for init in stage.inits:
        buf = mem[init.buffer]
        if not 0 <= init.offset < len(buf):
            raise ExecutionError(f"stage '{stage.name}': init of '{init.buffer}' at offset {init.offset} is out "
                                 f"of bounds ({len(buf)} elements)")
        buf[init.offset] = const(init.value, DType.from_numpy(buf.dtype))
    block = stage.block
    grid = tuple(-(-e // b) for e, b in zip(ext, block))
    base = dict(stage.regs)
    base.update(consts)
    for keys, values in ((GDIM, ext), (NTID, block), (NCTAID, grid)):
        base.update(zip(keys, map(np.int64, values)))
    if 0 in grid:  # no lanes (itertools.product would still build the other axes' ranges whole)
        return
    reductions: dict[tuple[str, str, int], list] = {}
    rank = len(stage.domain)
    for cz, cy, cx in itertools.product(*map(range, reversed(grid))):
        cta = (cx, cy, cz)
        block_regs = dict(base)
        block_regs.update(zip(CTAID, map(np.int64, cta)))
        shared = {m.name: np.zeros(m.size, m.dtype.np) for m in stage.shared}
        origin = tuple(c * b for c, b in zip(cta, block))
        # Lanes exist only inside the domain: the last block on an axis may be partial.
        spans = [range(min(b, e - o)) for b, e, o in zip(block, ext, origin)]
        lanes = []
        for tz, ty, tx in itertools.product(*reversed(spans)):
            gid = (origin[0] + tx, origin[1] + ty, origin[2] + tz)
            regs = dict(block_regs)
            regs.update(zip(TID, map(np.int64, (tx, ty, tz))))
            regs.update(zip(GID, map(np.int64, gid)))
            pools = {p.name: PoolMem(np.zeros(p.size, p.dtype.np)) for p in stage.pools}
            lanes.append(Lane(regs, gid[:rank], pools, shared, mem, reductions))
        run_block(stage, cta, lanes)
    merge(reductions, mem)


def execute(code: tuple, lane: Lane) -> Iterator[int]:
    """One lane from pc 0 to EXIT, yielding the pc of every BarSync it reaches."""
    pc = 0
    while True:
        nxt = code[pc](lane)
        if nxt is None:
            pc += 1
        elif nxt >= 0:
            pc = nxt
        elif nxt == EXIT:
            return
        else:
            assert nxt == BARRIER
            yield pc
            pc += 1


def run_block(stage: StageCode, cta: tuple[int, int, int], lanes: list[Lane]) -> None:
    live = [execute(stage.code, lane) for lane in lanes]
    while live:
        waiting = [(g, pc) for g in live if (pc := next(g, None)) is not None]
        barriers = sorted({stage.body_index[pc] for _, pc in waiting})
        if len(barriers) > 1:
            raise ExecutionError(f"stage '{stage.name}': lanes of block ctaid={cta[:len(stage.domain)]} wait at "
                                 f"different barriers (instructions {', '.join(map(str, barriers))}); every live "
                                 f"lane of a block must reach the same BarSync")
        live = [g for g, _ in waiting]


def merge(reductions: dict[tuple[str, str, int], list], mem: dict[str, np.ndarray]) -> None:
    """`mem = mem (op) combine(contributions)` for every reduced element."""
    for (op, name, i), values in reductions.items():
        buf = mem[name]
        combine = OPCODES[op].semantics(DType.from_numpy(buf.dtype))
        total = pairwise(combine, values)
        current = buf[i]
        if current.dtype != total.dtype:
            current = convert(current, DType.from_numpy(total.dtype))
        result = combine(current, total)
        buf[i] = result if result.dtype == buf.dtype else convert(result, DType.from_numpy(buf.dtype))
