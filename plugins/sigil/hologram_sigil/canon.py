"""Canonicalization: rewrite rules applied to a fixed point (docs/sigil.md, "Canonical form").

Every rule keeps the circuit's meaning exactly, bit for bit (up to the payload of a NaN):
it moves no rounding, so a canonical circuit and the one written give the same buffer
on every backend and in the numpy model. A pass applies, in turn:

- parallel blocks: their branches canonicalized; a branch that overwrites nothing the
  others read runs before them, one that reads nothing the others write runs after them
  (`flatten`: side by side is one after the other, in that order); what is left is a
  cycle, such as `copy@a->b || copy@b->a`, which is `swap@a<->b` (`exchange`);
- spelling: `copy@a->a`, `swap@a<->a` are dropped (`identity`); `swap@b<->a` is written
  `swap@a<->b`, `merge_add`/`merge_mul` sources in class order, `merge_neg@a[a]` is
  `mark@a` (`spelling`); `merge_min@d[a,a]`, `merge_max@d[a,a]` copy a (`idempotent merge`);
- pairs: two generators with nothing between them that touches the second (so it could
  be moved next to the first) combine: `mark@a . mark@a` and `swap@a<->b . swap@a<->b`
  vanish (`involution`), `copy@a->b . copy@a->b` is one copy (`idempotent copy`),
  `copy@a->b . copy@b->a` is the first (`copy back`), `quote@a . evaluate@a` is the quote
  (`restore after save`), `evaluate@a . quote@a` the evaluate (`save after restore`);
- `dead write`: a generator none of whose results is read before being overwritten (the
  buffer is read at the end, quote slots are not) is dropped;
- `commute`: independent generators are put in one order (the lexicographic normal form
  of the circuit's dependence order: the smallest ready generator first), so circuits
  that differ only in the order of independent steps have one canonical form.

The loop ends when a pass changes nothing. Every rule but `commute` makes the circuit
smaller (fewer generators, blocks or non-canonical spellings) and `commute` is
idempotent, so it ends.
"""

from __future__ import annotations

import collections
import heapq
from typing import Sequence

import attrs

from hologram_sigil.circuit import CLASSES, COMMUTATIVE, KINDS, Gen, Node, Par, Seq, count_ops, format_circuit

Step = Gen | Par
ALL_CLASSES = (1 << CLASSES) - 1  # the buffer: what the kernel returns
EVERYTHING = (1 << (2 * CLASSES)) - 1  # classes and quote slots: what a parallel branch may leave for later


@attrs.frozen
class Report:
    """What canonicalization did: generators before and after, and how often each rule fired."""

    before: int
    after: int
    rules: tuple[tuple[str, int], ...]

    def note(self) -> str:
        """`4 ops -> 1 op (75% reduction)`: what a kernel compiled from the circuit notes."""
        text = f"{self.before} op{'' if self.before == 1 else 's'} -> {self.after} op{'' if self.after == 1 else 's'}"
        if self.before == self.after:
            return text
        return f"{text} ({round(100 * (self.before - self.after) / self.before)}% reduction)"

    def fired(self) -> str:
        """`involution 1, idempotent copy 1`: how often each rule fired (or `none`)."""
        return ", ".join(f"{name} {n}" for name, n in self.rules) or "none"


def canonicalize(node: Node) -> tuple[Node, Report]:
    """The canonical form of `node` and what it took."""
    counts: collections.Counter[str] = collections.Counter()
    steps = _fixpoint(_steps(node), counts, ALL_CLASSES)
    order = [r for r in _RULES if counts[r]]
    return _node(steps), Report(count_ops(node), sum(_size(s) for s in steps), tuple((r, counts[r]) for r in order))


_RULES = ("identity", "spelling", "idempotent merge", "flatten", "exchange", "involution", "idempotent copy",
          "copy back", "restore after save", "save after restore", "dead write", "commute")


# ------------------------------------------------------------------- representation
def _steps(node: Node) -> list[Step]:
    """`node` as a flat list of generators and parallel blocks (sequencing is associative,
    `id` is no step; a block inside a block is one block: their writes are disjoint)."""
    if isinstance(node, Gen):
        return [node]
    if isinstance(node, Seq):
        return [s for child in node.steps for s in _steps(child)]
    branches: list[Node] = []
    for b in node.branches:
        inner = _steps(b)
        if len(inner) == 1 and isinstance(inner[0], Par):
            branches.extend(inner[0].branches)
        else:
            branches.append(_node(inner))
    return [Par(tuple(branches), node.at)]


def _node(steps: Sequence[Step]) -> Node:
    return steps[0] if len(steps) == 1 else Seq(tuple(steps))


def _size(node: Node) -> int:
    return count_ops(node)


_MASKS: dict[Node, tuple[int, int]] = {}


def _masks(node: Node) -> tuple[int, int]:
    """(reads, writes) of `node` as bit sets over the resources (classes, then quote slots)."""
    found = _MASKS.get(node)
    if found is None:
        if isinstance(node, Gen):
            found = (sum(1 << r for r in node.reads), sum(1 << r for r in node.writes))
        else:
            found = (0, 0)
            for child in node.steps if isinstance(node, Seq) else node.branches:
                r, w = _masks(child)
                found = (found[0] | r, found[1] | w)
        if len(_MASKS) > 1 << 16:
            _MASKS.clear()
        _MASKS[node] = found
    return found


def _independent(a: Node, b: Node) -> bool:
    (ra, wa), (rb, wb) = _masks(a), _masks(b)
    return not (wa & (rb | wb)) and not (wb & ra)


# ------------------------------------------------------------------------- the loop
def _fixpoint(steps: list[Step], counts: collections.Counter[str], live: int) -> list[Step]:
    """`steps` rewritten until no rule applies; `live`: the resources read after them."""
    while True:
        new: list[Step] = []
        for s in steps:
            new.extend(_block(s, counts) if isinstance(s, Par) else [s])
        new = _spell(new, counts)
        new = _pairs(new, counts)
        new = _dead(new, counts, live)
        new = _commute(new, counts)
        if new == steps:
            return new
        steps = new


def _block(par: Par, counts: collections.Counter[str]) -> list[Step]:
    """A parallel block with canonical branches, as few of them as its dependences allow."""
    # a branch's quote may be evaluated after the block: within it, every resource is live
    branches = [b for b in (_node(_fixpoint(_steps(b), counts, EVERYTHING)) for b in par.branches) if _size(b)]
    first: list[Step] = []
    last: list[Step] = []
    while len(branches) > 1:  # a branch that may run before (or after) the others leaves the block
        early = next((b for b in branches if all(not _masks(b)[1] & _masks(o)[0] for o in branches if o is not b)),
                     None)
        late = None if early else next(
            (b for b in branches if all(not _masks(b)[0] & _masks(o)[1] for o in branches if o is not b)), None)
        if early is None and late is None:
            break
        branches.remove(early or late)
        counts["flatten"] += 1
        (first if early else last).extend(_steps(early or late))
    if len(branches) == 2 and all(isinstance(b, Gen) and b.kind == "copy" for b in branches):
        a, b = branches
        if a.classes == b.classes[::-1]:
            counts["exchange"] += 1
            branches = [Gen("swap", "", tuple(sorted(a.classes)), a.at)]
    if len(branches) > 1:
        middle: list[Step] = [Par(tuple(sorted(branches, key=_key)), par.at)]
    else:
        middle = [s for b in branches for s in _steps(b)]
    return first + middle + last[::-1]


def _spell(steps: list[Step], counts: collections.Counter[str]) -> list[Step]:
    out: list[Step] = []
    for s in steps:
        if not isinstance(s, Gen):
            out.append(s)
            continue
        c = s.classes
        if s.kind in ("copy", "swap") and c[0] == c[1]:
            counts["identity"] += 1
            continue
        spelled = s
        if s.kind == "swap" and c[0] > c[1]:
            spelled = attrs.evolve(s, classes=(c[1], c[0]))
        elif s.kind == "merge" and s.variant in COMMUTATIVE and c[1] > c[2]:
            spelled = attrs.evolve(s, classes=(c[0], c[2], c[1]))
        elif s.kind == "merge" and s.variant == "neg" and c[0] == c[1]:
            spelled = Gen("mark", "", (c[0],), s.at)
        elif s.kind == "merge" and s.variant in ("min", "max") and c[1] == c[2]:
            counts["idempotent merge"] += 1
            out.extend([] if c[0] == c[1] else [Gen("copy", "", (c[1], c[0]), s.at)])
            continue
        if spelled != s:
            counts["spelling"] += 1
        out.append(spelled)
    return out


def _pair(first: Step, second: Step) -> tuple[str, list[Step]] | None:
    """The rule combining `first . second` (adjacent, or with only generators between that
    `second` commutes with), and what replaces them; None when none applies."""
    if not (isinstance(first, Gen) and isinstance(second, Gen)):
        return None
    a, b = first, second
    if a == b and a.kind in ("mark", "swap"):
        return "involution", []
    if a == b and a.kind == "copy":
        return "idempotent copy", [a]
    if a.kind == b.kind == "copy" and a.classes == b.classes[::-1]:
        return "copy back", [a]
    if a.classes == b.classes and (a.kind, b.kind) == ("quote", "evaluate"):
        return "restore after save", [a]
    if a.classes == b.classes and (a.kind, b.kind) == ("evaluate", "quote"):
        return "save after restore", [a]
    return None


def _pairs(steps: list[Step], counts: collections.Counter[str]) -> list[Step]:
    steps = list(steps)
    j = 0
    while j < len(steps):
        i = j - 1
        while i >= 0 and _independent(steps[i], steps[j]):
            i -= 1
        fired = _pair(steps[i], steps[j]) if i >= 0 else None
        if fired is None:
            j += 1
            continue
        rule, replacement = fired
        counts[rule] += 1
        del steps[j]
        steps[i:i + 1] = replacement
        j = i  # the step now at i may combine with one before it
    return steps


def _dead(steps: list[Step], counts: collections.Counter[str], live: int) -> list[Step]:
    kept: list[Step] = []
    for s in reversed(steps):
        if isinstance(s, Par):
            branches = [b for b in s.branches if _masks(b)[1] & live]
            counts["dead write"] += sum(_size(b) for b in s.branches if not _masks(b)[1] & live)
            if not branches:
                continue
            s = Par(tuple(branches), s.at) if len(branches) > 1 else branches[0]
        reads, writes = _masks(s)
        if not writes & live:
            counts["dead write"] += _size(s)
            continue
        live = (live & ~writes) | reads
        kept.extend(reversed(_steps(s)))
    return kept[::-1]


def _key(node: Node) -> tuple:
    """The order of independent steps: by the first resource written, then kind, then text."""
    _, writes = _masks(node)
    first = (writes & -writes).bit_length() - 1
    if isinstance(node, Gen):
        return (first, KINDS.index(node.kind), node.variant, node.classes)
    return (first, len(KINDS), "", format_circuit(node))


def _commute(steps: list[Step], counts: collections.Counter[str]) -> list[Step]:
    """The lexicographic normal form: repeatedly take, of the steps whose predecessors in
    the dependence order are all taken, the one of least key."""
    preds: list[set[int]] = []
    last_write: dict[int, int] = {}
    readers: dict[int, list[int]] = collections.defaultdict(list)
    for j, s in enumerate(steps):
        reads, writes = _masks(s)
        mine: set[int] = set()
        for r in _bits(reads):
            if r in last_write:
                mine.add(last_write[r])
        for r in _bits(writes):
            if r in last_write:
                mine.add(last_write[r])
            mine.update(readers[r])
        for r in _bits(reads):
            readers[r].append(j)
        for r in _bits(writes):
            last_write[r] = j
            readers[r] = []
        mine.discard(j)
        preds.append(mine)
    waiting = [len(p) for p in preds]
    succs: list[list[int]] = [[] for _ in steps]
    for j, p in enumerate(preds):
        for i in p:
            succs[i].append(j)
    ready = [(_key(steps[j]), j) for j in range(len(steps)) if not waiting[j]]
    heapq.heapify(ready)
    order = []
    while ready:
        _, j = heapq.heappop(ready)
        order.append(j)
        for k in succs[j]:
            waiting[k] -= 1
            if not waiting[k]:
                heapq.heappush(ready, (_key(steps[k]), k))
    if order != list(range(len(steps))):
        counts["commute"] += 1
    return [steps[j] for j in order]


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out
