"""Lanes inside a uniform loop: the layout that vectorizes a stage whose lanes all run
the same counted loop (mixed into StageEmitter).

The lowering's commonest reduction stage (hologram/lower/loops.py, split.py) is

        <prologue>            straight-line, at most one `@%p BRA done` with p uniform
    top:
        <body>                straight-line
        LOOP %c, top          c uniform
    done:
        <epilogue>            straight-line, then EXIT

The plain layout runs each lane's whole loop before the next lane starts, so the lane
loop holds the counted loop: nothing vectorizes across lanes, and each lane walks its
own column of a row-major matrix (`x.T @ v`, `x.sum(axis=0)`, a slice of a split
reduction). Here the counted loop goes outside and the lanes inside: per block one lane
loop for the prologue, then per trip one lane loop over the body, then one for the
epilogue. Every lane makes the same trips (the count and the guard are *uniform*:
computed from immediates, shape symbols, scalar parameters and block-wide specials
only), so each lane runs its own instructions in their order; only the interleaving of
different lanes' memory accesses changes, which the ISA leaves to the backend (lanes
are unordered; a program depending on the order is racy, docs/isa.md). A stage with a
checked access is not taken (which lane's error comes first would change), nor one with
reductions, shared memory, pools, the phase, calls or barriers, nor one whose loop body
reads nothing at consecutive addresses in neighbouring lanes (a lane walking its own
contiguous row, `A @ x`, vectorizes better along the row, as it is).

Registers fall in four classes:

- uniform: every write is a pure op of uniform operands, one value for the whole block:
  a block slot, copied into the lane's turn slot when its turn starts and back after
  each lane loop (the last lane's value, every lane's);
- local: in every region that touches it, written before it is read (a loaded value, an
  address): a turn slot only, which LLVM promotes to a plain value;
- rematerialized: last written in the prologue, by a pure op of specials, symbols,
  immediates, rematerialized registers and uniform ones not written again before the
  epilogue (`%j = %gid.x`, a row offset), and not written again before the epilogue
  either: recomputed at the start of each later turn, so addresses are affine in the
  lane index and the vectorizer makes vector loads of them;
- carried (the rest: an accumulator): one slot per lane of the block.
"""

from __future__ import annotations

import attrs
from llvmlite import ir

from hologram.backend import OPCODES, DType, Imm, Instr, Reg, Special, lead_lane_axes

from .codegen_types import I64, at, const, i64, reg_type

# Specials with one value for every lane of a block.
_UNIFORM_SPECIALS = ("ntid.", "nctaid.", "gdim.", "ctaid.")


@attrs.frozen
class Interchange:
    """Where the regions of an interchangeable stage start and end (indices into the
    stage's instruction list, labels removed), and its registers' classes."""

    guard: int | None  # the `@%p BRA done` in the prologue
    top: int  # the loop's first instruction
    loop: int  # the LOOP
    end: int  # the EXIT (or the end of the body)
    uniform: frozenset[str]
    local: frozenset[str]
    remat: tuple[int, ...]  # prologue instructions recomputed at later turns

    @property
    def regions(self) -> tuple[tuple[int, int], ...]:
        """(start, stop) of prologue (before and after the guard), body and epilogue."""
        first = ((0, self.guard), (self.guard + 1, self.top)) if self.guard is not None else ((0, self.top),)
        return (*first, (self.top, self.loop), (self.loop + 1, self.end))


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
    if len(loops) != 1 or lead_lane_axes(stage) or not stage.domain:
        return None
    loop = loops[0]
    counter = items[loop][1].srcs[0] if items[loop][1].srcs else None
    top = labels.get(items[loop][1].target)
    if top is None or top > loop or not isinstance(counter, Reg):
        return None
    guard, end = None, len(items)
    for pc, (_, ins) in enumerate(items):
        if ins.op == "BRA":
            if guard is not None or pc >= top or ins.pred is None or labels.get(ins.target) != loop + 1:
                return None
            guard = pc
        elif ins.op == "EXIT":
            if pc <= loop or pc != len(items) - 1:
                return None
            end = pc
        elif ins.op != "LOOP" and (ins.pred is not None or ins.checked or not (_pure(ins) or ins.op in ("LDG", "STG"))):
            return None
    written: dict[str, list[int]] = {}
    for pc, (_, ins) in enumerate(items):
        if ins.dst is not None:
            written.setdefault(ins.dst.name, []).append(pc)
    uniform = set(written) | {counter.name}

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
    guard_reg = items[guard][1].pred.reg.name if guard is not None else None
    if counter.name not in uniform or (guard_reg is not None and guard_reg not in uniform):
        return None
    if not _reads_across_lanes(items, top, loop):
        return None
    bounds = Interchange(guard, top, loop, end, frozenset(), frozenset(), ()).regions
    local = {r for r in written if r not in uniform and _written_first(items, bounds, r)}
    remat: list[int] = []
    rematerialized: set[str] = set()

    def kept(name: str, pc: int) -> bool:  # no write of `name` from pc on until the epilogue
        return all(w <= pc or w > loop for w in written.get(name, ()))

    for pc in range(top):
        ins = items[pc][1]
        name = ins.dst.name if ins.dst is not None else None
        if name is None or name in uniform or not _pure(ins) or not kept(name, pc):
            continue
        if all(not isinstance(o, Reg) or o.name in rematerialized or (o.name in uniform and kept(o.name, pc))
               for o in _operands(ins)):
            remat.append(pc)
            rematerialized.add(name)
    return Interchange(guard, top, loop, end, frozenset(uniform), frozenset(local - rematerialized), tuple(remat))


def _reads_across_lanes(items: list[tuple[int, Instr]], top: int, loop: int) -> bool:
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

    for pc, (_, ins) in enumerate(items[:loop]):
        if pc >= top and ins.op in ("LDG", "STG") and ins.addr.index is not None and of(ins.addr.index) == 1:
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
        return it is not None and name not in it.uniform and name not in it.local and \
            name not in {self.items[pc][1].dst.name for pc in it.remat}

    def _interchanged(self) -> None:
        """The block's lanes inside the stage's counted loop (the module docstring)."""
        b, it = self.b, self.interchange
        if not hasattr(self, "turn_slot"):
            self.turn_slot = {name: self.alloca(reg_type(self.reg_types[name]), f"turn.{name}")
                              for name in self.reg_types if not self.carried(name)}
            self.block_slot = {name: self.alloca(reg_type(self.reg_types[name]), f"uniform.{name}")
                               for name in it.uniform}
        for name, slot in self.block_slot.items():
            b.store(const(0, self.reg_types[name]), slot)
        self._turns(None, 0, 0)  # every lane starts with its registers at zero
        regions = it.regions
        done = self.new_block("interchange.done")
        epilogue = self.new_block("interchange.epilogue")
        for start, stop in regions[:-2]:
            self._turns(start, stop, start)
            if stop == it.guard:
                pred = self.items[it.guard][1].pred
                p = self.read(pred.reg, DType.BOOL)  # the turn slot: every lane's value
                after = self.new_block("interchange.guarded")
                b.cbranch(p, after, epilogue) if pred.negate else b.cbranch(p, epilogue, after)
                b.position_at_end(after)
        trip = self.new_block("interchange.trip")
        b.branch(trip)
        b.position_at_end(trip)
        self._turns(*regions[-2], it.top)
        k, loop = self.items[it.loop]
        counter = loop.srcs[0].name
        ct = self.reg_types[counter]
        rt = reg_type(ct)
        slot = self.block_slot[counter]
        c = b.load(slot, typ=rt)
        above = b.icmp_signed if ct.is_signed else b.icmp_unsigned
        again, leave = self.new_block("interchange.again"), self.new_block("interchange.leave")
        b.cbranch(above(">", c, ir.Constant(rt, 1)), again, leave)
        b.position_at_end(again)
        b.store(b.sub(c, ir.Constant(rt, 1)), slot)
        self.poll_cancel(k)
        b.branch(trip)
        b.position_at_end(leave)  # c <= 1: the decrement stops at the type's minimum
        lowest = ir.Constant(rt, int(ct.min))
        b.store(b.select(b.icmp_unsigned("==", c, lowest), c, b.sub(c, ir.Constant(rt, 1))), slot)
        b.branch(epilogue)
        b.position_at_end(epilogue)
        self._turns(*regions[-1], regions[-1][0])
        b.branch(done)
        b.position_at_end(done)
        b.branch(self.block_latch)

    def _turns(self, start: int | None, stop: int, region: int) -> None:
        """One turn per lane of the block (z, y, x loops, x innermost) running the
        instructions [start, stop); `start` None resets the lanes' registers instead.
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
            for pc in range(start, stop):
                self.straight(self.items[pc][1], self.items[pc][0])
        b.branch(outer)
        b.position_at_end(after)
        if start is not None:
            for name, slot in self.block_slot.items():
                b.store(b.load(self.turn_slot[name]), slot)
