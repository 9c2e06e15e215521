"""Lanes inside uniform loops: the layout that vectorizes a stage whose lanes all run
the same counted loops (mixed into StageEmitter).

The lowering's commonest reduction stages (hologram/lower/loops.py, split.py) are

        <straight-line code>  at most one `@%p BRA done` with p uniform
    top:
        <body>                straight-line
        LOOP %c, top          c uniform
    done:
        <straight-line code>  ... then more such loops, one after another, then EXIT

The plain layout runs each lane's whole code before the next lane starts, so the lane
loop holds the counted loops: nothing vectorizes across lanes, and each lane walks its
own column of a row-major matrix (`x.T @ v`, `x.sum(axis=0)`, a slice of a split
reduction and its combination with the tail). Here the counted loops go outside and the
lanes inside: per block one lane loop for each straight-line run, and per trip of each
loop one lane loop over its body. Every lane makes the same trips (counts and guards are
*uniform*: computed from immediates, shape symbols, scalar parameters and block-wide
specials only), so each lane runs its own instructions in their order; only the
interleaving of different lanes' memory accesses changes, which the ISA leaves to the
backend (lanes are unordered; a program depending on the order is racy, docs/isa.md).
A stage with a checked access is not taken (which lane's error comes first would
change), nor one with reductions, shared memory, pools, the phase, calls, barriers or
nested loops, nor one whose loop bodies read nothing at consecutive addresses in
neighbouring lanes (a lane walking its own contiguous row, `A @ x`, vectorizes better
along the row, as it is).

Registers fall in four classes:

- uniform: every write is a pure op of uniform operands, one value for the whole block:
  a block slot, copied into the lane's turn slot when its turn starts and back after
  each lane loop (the last lane's value, every lane's);
- local: in every region that touches it, written before it is read (a loaded value, an
  address): a turn slot only, which LLVM promotes to a plain value;
- rematerialized: written before the first loop by a pure op of specials, symbols,
  immediates, rematerialized registers and uniform ones, not read or written before
  that, and none of them written again until the last loop is done (`%j = %gid.x`, a
  row offset): recomputed at the start of each later turn, so addresses are affine in
  the lane index and the vectorizer makes vector loads of them;
- carried (the rest: an accumulator): one slot per lane of the block.
"""

from __future__ import annotations

import attrs
from llvmlite import ir

from hologram.backend import OPCODES, DType, Imm, Instr, Reg, Special, lead_lane_axes

from .codegen_types import I64, at, const, i64, reg_type

# Trips of a loop each lane runs in one turn while more are left: a turn's fixed cost
# (the lane loops' setup, the uniform registers in and out) spread over more work when a
# block has few lanes (16 outputs of `x.T @ v`).
TRIPS_PER_TURN = 4
# Specials with one value for every lane of a block.
_UNIFORM_SPECIALS = ("ntid.", "nctaid.", "gdim.", "ctaid.")


@attrs.frozen
class Interchange:
    """An interchangeable stage: its steps in order (indices into the stage's instruction
    list, labels removed) and its registers' classes. A step is `("run", start, stop)`,
    straight-line code; `("guard", pc)`, a uniform `@%p BRA` past the next loop; or
    `("loop", top, pc)`, a loop's body from its first instruction to its LOOP."""

    steps: tuple[tuple, ...]
    uniform: frozenset[str]
    local: frozenset[str]
    remat: tuple[int, ...]  # instructions before the first loop recomputed at later turns
    rematerialized: frozenset[str]  # the registers they write


def _pure(ins: Instr) -> bool:
    spec = OPCODES[ins.op]
    return spec.space is None and not spec.effects


def _operands(ins: Instr) -> list:
    out = list(ins.srcs)
    if ins.addr is not None and ins.addr.index is not None:
        out.append(ins.addr.index)
    return out


def plan(items: list[tuple[int, Instr]], labels: dict[str, int], stage) -> Interchange | None:
    """The interchange of a stage of the module docstring's shape, or None."""
    loops = [pc for pc, (_, i) in enumerate(items) if i.op == "LOOP"]
    if not loops or lead_lane_axes(stage) or not stage.domain:
        return None
    tops, counters, last = [], [], -1
    for pc in loops:
        ins = items[pc][1]
        top = labels.get(ins.target)
        if top is None or not last < top <= pc or not ins.srcs or not isinstance(ins.srcs[0], Reg):
            return None  # loops one after another, none inside another
        tops.append(top)
        counters.append(ins.srcs[0].name)
        last = pc
    guards: dict[int, int] = {}  # loop index -> its guard's pc
    end = len(items)
    for pc, (_, ins) in enumerate(items):
        if ins.op == "BRA":
            k = next((k for k, top in enumerate(tops) if pc < top), None)  # the loop it may skip
            if k is None or k in guards or ins.pred is None or labels.get(ins.target) != loops[k] + 1 \
                    or (k and pc < loops[k - 1]):
                return None
            guards[k] = pc
        elif ins.op == "EXIT":
            if pc != len(items) - 1 or pc < loops[-1]:
                return None
            end = pc
        elif ins.op != "LOOP" and (ins.pred is not None or ins.checked or not (_pure(ins) or ins.op in ("LDG", "STG"))):
            return None
    steps: list[tuple] = []
    pos = 0
    for k, (top, loop) in enumerate(zip(tops, loops)):
        if k in guards:
            steps += [("run", pos, guards[k]), ("guard", guards[k])]
            pos = guards[k] + 1
        steps += [("run", pos, top), ("loop", top, loop)]
        pos = loop + 1
    steps.append(("run", pos, end))
    steps = [s for s in steps if s[0] != "run" or s[1] < s[2]]
    written: dict[str, list[int]] = {}
    for pc, (_, ins) in enumerate(items):
        if ins.dst is not None:
            written.setdefault(ins.dst.name, []).append(pc)
    uniform = set(written) | set(counters)

    def is_uniform(o) -> bool:
        if isinstance(o, Reg):
            return o.name in uniform
        return not isinstance(o, Special) or o.name.startswith(_UNIFORM_SPECIALS)

    changed = True
    while changed:
        changed = False
        for ins in (i for _, i in items if i.dst is not None and i.dst.name in uniform):
            if not _pure(ins) or not all(map(is_uniform, _operands(ins))):
                uniform.discard(ins.dst.name)
                changed = True
    if not set(counters) <= uniform or any(items[g][1].pred.reg.name not in uniform for g in guards.values()):
        return None
    if not _reads_across_lanes(items, tops, loops):
        return None
    bounds = [(s[1], s[2]) for s in steps if s[0] != "guard"]  # every run and loop body
    local = {r for r in written if r not in uniform and _written_first(items, bounds, r)}
    remat: list[int] = []
    rematerialized: set[str] = set()

    def kept(name: str, pc: int) -> bool:  # no write of `name` after pc until the last loop is done
        return all(w <= pc or w > loops[-1] for w in written.get(name, ()))

    first_read: dict[str, int] = {}
    for pc, (_, ins) in enumerate(items):
        for o in _operands(ins):
            if isinstance(o, Reg):
                first_read.setdefault(o.name, pc)
    for pc in range(tops[0]):
        ins = items[pc][1]
        name = ins.dst.name if ins.dst is not None else None
        # its only value until the last loop is done: no other write before, none read before
        if name is None or name in uniform or not _pure(ins) or not kept(name, pc) \
                or min(written[name]) != pc or first_read.get(name, pc) < pc:
            continue
        if all(not isinstance(o, Reg) or o.name in rematerialized or (o.name in uniform and kept(o.name, pc))
               for o in _operands(ins)):
            remat.append(pc)
            rematerialized.add(name)
    return Interchange(tuple(steps), frozenset(uniform), frozenset(local - rematerialized), tuple(remat),
                       frozenset(rematerialized))


def _reads_across_lanes(items: list[tuple[int, Instr]], tops: list[int], loops: list[int]) -> bool:
    """Whether the loop body reads or writes memory at consecutive addresses in
    consecutive lanes (x-neighbours): then the layout pays, a vector access per trip. A
    lane walking its own contiguous row (`x[i, p]` over p) vectorizes best as it is.
    Each register's stride in `gid.x` is followed through moves, adds and multiplies by
    1, from its latest write in program order: 0 (the same in every x-lane), 1, or None
    (anything else)."""
    stride: dict[str, int | None] = {}

    def of(o) -> int | None:
        if isinstance(o, Reg):
            return stride.get(o.name, 0)
        if isinstance(o, Special):
            return 1 if o.name in ("gid.x", "tid.x") else 0
        return 0

    bodies = [range(top, loop) for top, loop in zip(tops, loops)]
    for pc, (_, ins) in enumerate(items[:loops[-1]]):
        if ins.op in ("LDG", "STG") and ins.addr.index is not None and of(ins.addr.index) == 1 and \
                any(pc in body for body in bodies):
            return True
        if ins.dst is None:
            continue
        srcs = [of(o) for o in ins.srcs]
        if ins.op in ("MOV", "CVT") and ins.dtype.is_int:
            out = srcs[0]
        elif ins.op == "ADD" and None not in srcs and sum(srcs) <= 1:
            out = sum(srcs)
        elif ins.op == "SUB" and srcs[1] == 0:
            out = srcs[0]
        elif ins.op == "MUL" and srcs.count(0) == 2:
            out = 0
        elif ins.op == "MUL" and 0 in srcs and any(isinstance(o, Imm) and o.value == 1 for o in ins.srcs):
            out = max(srcs)
        elif ins.op == "LDG":  # the same element in every x-lane, or anything
            out = 0 if ins.addr.index is None or of(ins.addr.index) == 0 else None
        else:
            out = 0 if all(x == 0 for x in srcs) else None
        stride[ins.dst.name] = out
    return False


def _written_first(items: list[tuple[int, Instr]], regions, name: str) -> bool:
    """Whether every region that touches register `name` writes it before reading it (the
    LOOP reads its counter, which is uniform, never local)."""
    for start, stop in regions:
        for pc in range(start, stop):
            ins = items[pc][1]
            if any(isinstance(o, Reg) and o.name == name for o in _operands(ins)) or \
                    (ins.pred is not None and ins.pred.reg.name == name):
                return False
            if ins.dst is not None and ins.dst.name == name:
                break
    return True


class InterchangedLoop:
    """The layout itself; uses StageEmitter's builder, blocks, storage and emitters."""

    interchange: Interchange | None

    def carried(self, name: str) -> bool:
        """Whether register `name` needs a slot per lane of the block."""
        it = self.interchange
        return it is not None and name not in it.uniform | it.local | it.rematerialized

    def _interchanged(self) -> None:
        """The block's lanes inside the stage's counted loops (the module docstring)."""
        b, it = self.b, self.interchange
        self.turn_slot = {name: self.alloca(reg_type(self.reg_types[name]), f"turn.{name}")
                          for name in self.reg_types if not self.carried(name)}
        self.block_slot = {name: self.alloca(reg_type(self.reg_types[name]), f"uniform.{name}")
                           for name in it.uniform}
        for name, slot in self.block_slot.items():
            b.store(const(0, self.reg_types[name]), slot)
        self._turns(None, 0, 0)  # every lane starts with its registers at zero
        skip = None  # where a taken guard goes: past its loop
        for step in it.steps:
            if step[0] == "run":
                self._turns(step[1], step[2], step[1])
            elif step[0] == "guard":
                pred = self.items[step[1]][1].pred
                p = self.read(pred.reg, DType.BOOL)  # the turn slot: every lane's value
                skip, go = self.new_block("interchange.skip"), self.new_block("interchange.go")
                b.cbranch(p, go, skip) if pred.negate else b.cbranch(p, skip, go)
                b.position_at_end(go)
            else:
                after = self._uniform_loop(*step[1:])
                if skip is not None:
                    b.position_at_end(skip)
                    b.branch(after)
                    skip = None
                b.position_at_end(after)
        b.branch(self.block_latch)

    def _uniform_loop(self, top: int, pc: int) -> ir.Block:
        """The trips of one loop, TRIPS_PER_TURN in each lane's turn while more than that
        are left, then one; returns the block after the loop."""
        b = self.b
        k, loop = self.items[pc]
        counter = loop.srcs[0].name
        ct = self.reg_types[counter]
        rt = reg_type(ct)
        slot = self.block_slot[counter]
        above = b.icmp_signed if ct.is_signed else b.icmp_unsigned
        trip, trips, one, after = (self.new_block(f"interchange.{x}") for x in ("trip", "trips", "one", "after"))
        b.branch(trip)
        b.position_at_end(trip)
        b.cbranch(above(">", b.load(slot, typ=rt), ir.Constant(rt, TRIPS_PER_TURN)), trips, one)
        b.position_at_end(trips)  # c > TRIPS_PER_TURN: none of these trips' LOOPs leaves
        self._turns(top, pc, top, TRIPS_PER_TURN, counter)
        c = b.load(slot, typ=rt)
        b.store(b.sub(c, ir.Constant(rt, 1)), slot)
        self.poll_cancel(k)
        b.branch(trip)
        b.position_at_end(one)
        self._turns(top, pc, top)
        c = b.load(slot, typ=rt)
        again, leave = self.new_block("interchange.again"), self.new_block("interchange.leave")
        b.cbranch(above(">", c, ir.Constant(rt, 1)), again, leave)
        b.position_at_end(again)
        b.store(b.sub(c, ir.Constant(rt, 1)), slot)
        b.branch(one)  # at most TRIPS_PER_TURN trips are left
        b.position_at_end(leave)  # c <= 1: the decrement stops at the type's minimum
        lowest = ir.Constant(rt, int(ct.min))
        b.store(b.select(b.icmp_unsigned("==", c, lowest), c, b.sub(c, ir.Constant(rt, 1))), slot)
        b.branch(after)
        return after

    def _turns(self, start: int | None, stop: int, region: int, repeat: int = 1, counter: str | None = None) -> None:
        """One turn per lane of the block (z, y, x loops, x innermost) running the
        instructions [start, stop), `repeat` times with `counter` decremented between
        (a loop body's trips); `start` None resets the lanes' registers instead.
        Turn slots of uniform registers start from the block slots and go back to them
        after the last turn; rematerialized registers defined before `region` are
        recomputed first."""
        b, it = self.b, self.interchange
        counters = [self.alloca(I64, f"turn.t{a}") for a in range(3)]
        after = self.new_block("turns.after")
        outer = after
        for a in reversed(range(3)):
            if a >= self.rank:
                continue
            b.store(i64(0), counters[a])
            head, body, latch = (self.new_block(f"turns.{a}.{x}") for x in ("head", "body", "latch"))
            b.branch(head)
            b.position_at_end(head)
            b.cbranch(b.icmp_signed("<", b.load(counters[a]), self.counts[a]), body, outer)
            b.position_at_end(latch)
            b.store(b.add(b.load(counters[a]), i64(1)), counters[a])
            b.branch(head)
            b.position_at_end(body)
            outer = latch
        tid = [b.load(counters[a]) if a < self.rank else i64(0) for a in range(3)]
        lane = b.add(b.mul(b.add(b.mul(tid[2], self.counts[1]), tid[1]), self.counts[0]), tid[0])
        self._specials(tid)
        self.reg_ptr = {name: at(b, arr, lane, reg_type(self.reg_types[name]))
                        for name, arr in self.reg_arrays.items() if self.carried(name)}
        self.reg_ptr |= self.turn_slot
        if start is None:
            for name, ptr in self.reg_ptr.items():
                if self.carried(name):
                    b.store(const(0, self.reg_types[name]), ptr)
        else:
            for name, slot in self.block_slot.items():
                b.store(b.load(slot), self.turn_slot[name])
            for pc in it.remat:
                if pc < region:
                    self.straight(self.items[pc][1], self.items[pc][0])
            for trip in range(repeat):
                if trip:  # the LOOP between two trips, which cannot leave (the caller made sure)
                    rt = reg_type(self.reg_types[counter])
                    slot = self.turn_slot[counter]
                    b.store(b.sub(b.load(slot, typ=rt), ir.Constant(rt, 1)), slot)
                for pc in range(start, stop):
                    self.straight(self.items[pc][1], self.items[pc][0])
        b.branch(outer)
        b.position_at_end(after)
        if start is not None:
            for name, slot in self.block_slot.items():
                b.store(b.load(self.turn_slot[name]), slot)
