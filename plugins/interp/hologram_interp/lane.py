"""The state one lane carries while it runs: what decoded instructions (decode.py) read
and write, and what the machine (machine.py) creates per lane."""

from __future__ import annotations

import numpy as np


class PoolMem:
    """One lane's pool: its elements and the current top of its allocation stack."""

    __slots__ = ("data", "top")

    def __init__(self, data: np.ndarray):
        self.data, self.top = data, 0


class Lane:
    """The state of one lane: what decoded instructions read and write.

    regs        register file (registers, specials, launch constants: see decode.py)
    gid         global coordinates, for error messages
    stack       (return address, subroutine entry) of each active CALL
    phase       the Atlas phase counter, 0..767
    pools       this lane's pools; allocs the lane-wide allocation stack (pool, base)
    shared      the block's shared arrays (the same dict for every lane of the block)
    mem         the launch's global buffers, flat; reductions the stage's contributions
    """

    __slots__ = ("regs", "gid", "stack", "phase", "pools", "allocs", "shared", "mem", "reductions")

    def __init__(self, regs: dict, gid: tuple[int, ...], pools: dict[str, PoolMem],
                 shared: dict[str, np.ndarray], mem: dict[str, np.ndarray], reductions: dict):
        self.regs, self.gid, self.pools, self.shared = regs, gid, pools, shared
        self.mem, self.reductions = mem, reductions
        self.stack: list[tuple[int, int]] = []
        self.phase = 0
        self.allocs: list[tuple[str, int]] = []
