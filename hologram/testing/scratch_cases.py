"""Programs at the block scratch limit (docs/isa.md, "Block scratch"), and issue 21's
programs past it, for the verifier's and the backends' tests and the program fuzzer's
seeds.

`AT_LIMIT` are verified programs whose block scratch is exactly the limit (or whose
shared arrays are exactly theirs), in each lane layout cpu_llvm has: lane loops (no
barrier), region loops (barriers in straight-line code) and the barrier state machine
(a barrier in a loop). Each lane keeps its `x` value in its pools and shared arrays
across the barriers and stores what it reads back, so a block whose lanes' scratch
overlapped, or a scratch area not reset per block, gives a wrong `y`. `over(name)` is
the same program one element past the limit. `REPRODUCERS` are the four shapes issue 21
found smashing cpu_llvm's stack (a 48 MiB frame from a pool across a barrier in
1024-lane blocks, 8 MiB of shared arrays, ...), which the verifier now refuses.

Every program reads `x` and writes `y` (both `T[n]`) over the domain `[n]`.
"""

from __future__ import annotations

from typing import Callable

from hologram.core.types import DType
from hologram.isa.asm import parse_program
from hologram.isa.program import Program
from hologram.verify.decl_rules import MAX_BLOCK_SCRATCH_BYTES, MAX_SHARED_BYTES, REGISTER_BYTES


def scratch_program(name: str, dtype: DType = DType.F64, lanes: int = 1024, pools: tuple[int, ...] = (),
                    shared: tuple[int, ...] = (), barrier: str | None = None, padding: int = 0) -> Program:
    """A program whose stage has pools and shared arrays of these element counts, in
    blocks of `lanes`, with `barrier` None, "straight" (one BarSync in straight-line code)
    or "loop" (a BarSync in a loop of two trips: the state machine), and `padding` more
    registers than it uses. Each lane stores its x value in the last element of every
    pool and in its own slot of every shared array, and after the barrier adds up what
    it reads back from its pools and its mirror lane's (`ntid - 1 - tid`) shared slots."""
    t = dtype.name.lower()
    lines = [f".program {name}", ".symbols n", f".param in x: {t}[n]", f".param out y: {t}[n]",
             f".stage main domain [n] block [{lanes}]",
             "    .reg %i, %tid, %mirror: i64"]
    lines += [f"    .reg %h{k}: i64" for k in range(len(pools))]
    lines += ["    .reg %c: i64"] * (barrier == "loop")
    lines += [f"    .reg %pad{k}: i64" for k in range(padding)]
    lines += [f"    .reg %v, %w, %acc: {t}"]
    lines += [f"    .pool pl{k}: {t}[{size}]" for k, size in enumerate(pools)]
    lines += [f"    .shared sh{k}: {t}[{size}]" for k, size in enumerate(shared)]
    body = ["MOV.i64 %i, %gid.x", "MOV.i64 %tid, %tid.x", "SUB.i64 %mirror, %ntid.x, %tid",
            "SUB.i64 %mirror, %mirror, 1", f"LDG.{t} %v, [x + %i]", f"MOV.{t} %acc, %v"]
    for k, size in enumerate(pools):
        body += [f"PoolAlloc %h{k}, pl{k}, {size}", f"PoolStore.{t} [pl{k} + %h{k} + {size - 1}], %v"]
    body += [f"STS.{t} [sh{k} + %tid], %v" for k in range(len(shared))]
    if barrier == "straight":
        body.append("BarSync")
    elif barrier == "loop":
        body += ["MOV_IMM.i64 %c, 2", "AGAIN:", "BarSync", "LOOP %c, AGAIN"]
    for k, size in enumerate(pools):
        body += [f"PoolLoad.{t} %w, [pl{k} + %h{k} + {size - 1}]", f"ADD.{t} %acc, %acc, %w"]
    body += [f"PoolFree %h{k}" for k in reversed(range(len(pools)))]
    for k in range(len(shared)):
        body += [f"LDS.{t} %w, [sh{k} + %mirror]", f"ADD.{t} %acc, %acc, %w"]
    body += [f"STG.{t} [y + %i], %acc", "EXIT"]
    return parse_program("\n".join(lines + ["    " + b if not b.endswith(":") else b for b in body]) + "\n",
                         f"<scratch_cases:{name}>")


_U8 = DType.U8
_PER_LANE = MAX_BLOCK_SCRATCH_BYTES // 1024  # the bytes each lane of a 1024-lane block may hold
_SHARED = (MAX_SHARED_BYTES // 4 // 8,) * 4  # four f64 arrays filling the shared limit (1024 elements each)

# name -> (how to build it at the limit, how to build it one element past it)
_CASES: dict[str, tuple[Callable[[], Program], Callable[[], Program]]] = {
    # 32 KiB of shared arrays, as a GPU's workgroup memory holds
    "shared_at_limit": (
        lambda: scratch_program("shared_at_limit", shared=_SHARED, barrier="straight"),
        lambda: scratch_program("shared_over_limit", shared=_SHARED[:-1] + (_SHARED[-1] + 1,), barrier="straight")),
    # 1024 lanes x (a u8 pool and 7 registers) across a barrier, in region loops: the
    # pool's allocation stack alone was a 12 MiB frame before issue 21
    "pool_across_barrier": (
        lambda: scratch_program("pool_across_barrier", _U8, pools=(_PER_LANE - 7 * REGISTER_BYTES,),
                                barrier="straight"),
        lambda: scratch_program("pool_across_barrier_over", _U8, pools=(_PER_LANE - 7 * REGISTER_BYTES + 1,),
                                barrier="straight")),
    # the state machine, with 32 KiB of shared arrays, two pools and 9 registers a lane
    # (past it: one more register)
    "state_machine": (
        lambda: scratch_program("state_machine", pools=(60, 55), shared=_SHARED, barrier="loop"),
        lambda: scratch_program("state_machine_over", pools=(60, 55), shared=_SHARED, barrier="loop", padding=1)),
    # one-lane blocks without a barrier: 32 pools of f64[4096], 1 MiB for one lane
    "one_lane_pools": (
        lambda: scratch_program("one_lane_pools", lanes=1, pools=(4096,) * 32),
        lambda: scratch_program("one_lane_pools_over", lanes=1, pools=(4096,) * 32 + (1,))),
}
AT_LIMIT = tuple(_CASES)


def at_limit(name: str) -> Program:
    """The `AT_LIMIT` program `name`: verified, its block scratch exactly the limit
    (`shared_at_limit`: its shared arrays exactly theirs)."""
    return _CASES[name][0]()


def over(name: str) -> Program:
    """`at_limit(name)` one element (or one register) past its limit: refused."""
    return _CASES[name][1]()


# Issue 21's programs: each verified before the limit, and each killed cpu_llvm (SIGSEGV).
_REPRODUCERS: dict[str, Callable[[], Program]] = {
    "pool_f64_4096_barrier_1024_lanes": lambda: scratch_program("smash_pool_barrier", pools=(4096,),
                                                                barrier="straight"),
    "shared_16_f64_65536": lambda: scratch_program("smash_shared", lanes=1024, shared=(65536,) * 16,
                                                   barrier="straight"),
    "pool_f64_4096_state_machine": lambda: scratch_program("smash_state_machine", pools=(4096,), barrier="loop"),
    "pools_256_f64_4096_one_lane": lambda: scratch_program("smash_one_lane", lanes=1, pools=(4096,) * 256),
}
REPRODUCERS = tuple(_REPRODUCERS)


def reproducer(name: str) -> Program:
    """The `REPRODUCERS` program `name`: past the limit, refused by the verifier."""
    return _REPRODUCERS[name]()


def seeds() -> tuple[tuple[str, Program], ...]:
    """(name, program) seeds for the program fuzzer: the programs at the limit and the
    reproducers past it (a scratch mutation brings those back under)."""
    return tuple((f"scratch:{name}", at_limit(name)) for name in AT_LIMIT) + \
        tuple((f"scratch-reproducer:{name}", reproducer(name)) for name in REPRODUCERS)
