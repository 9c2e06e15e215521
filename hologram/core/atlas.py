"""The Atlas: 96 resonance classes, their graph, mirror involution and unity positions.

A class is `24*h2 + 8*d + l` with `h2 in 0..3`, `d in 0..2`, `l in 0..7`. Read it as
six coordinates: the three bits of `l` (e1 e2 e3), the low bit of `h2` (e6), the high bit
of `h2` (e7) and the ternary modality `d` (0 neutral, 1 produce, 2 consume).

Edges (256 in all), built explicitly below:
- flipping one of the four bits e1 e2 e3 e6 (96 * 4 / 2 = 192 edges);
- changing the modality between neutral and non-neutral: d=0 <-> d=1 and d=0 <-> d=2
  with every other coordinate equal (64 edges).
So neutral classes (d=0, 32 of them) have degree 6 and the others (64) degree 5.
`mirror` flips e7: a fixed-point-free involution (48 pairs) and never an edge.
The two unity positions are the classes with l=0, d=0, e6=0: classes 0 and 48 (a mirror pair).

Byte -> class: `h2 = (b7<<1)|b6`, `l = (b3<<2)|(b2<<1)|b1`, and `d` from (b4, b5):
(0,0) -> 0, (1,0) -> 1, (0,1) -> 2, and (1,1) folds onto 0, i.e. `d` is the sign of
`b4 - b5` (produce and consume cancel). Bit 0 does not take part.

Functions on values outside the domain (a class not in 0..95, or a neighbour index not
below the degree) answer -1 (`mirror`, `neighbor`), 0 (`degree`) or False (`is_unity`);
they never raise, so they are total on every integer input. Documented in docs/atlas.md.
"""

from __future__ import annotations

import numpy as np

NUM_CLASSES = 96
PAGES = 48
BYTES_PER_PAGE = 256
CLASS_STRIDE = PAGES * BYTES_PER_PAGE  # 12288
PHASE_MODULUS = 768


def class_of(h2: int, d: int, l: int) -> int:
    return 24 * h2 + 8 * d + l


def coords(c: int) -> tuple[int, int, int]:
    """(h2, d, l) of a class."""
    return c // 24, (c % 24) // 8, c % 8


def byte_class(b: int) -> int:
    b &= 0xFF
    h2 = ((b >> 7) & 1) << 1 | ((b >> 6) & 1)
    l = ((b >> 3) & 1) << 2 | ((b >> 2) & 1) << 1 | ((b >> 1) & 1)
    b4, b5 = (b >> 4) & 1, (b >> 5) & 1
    d = {(0, 0): 0, (1, 0): 1, (0, 1): 2, (1, 1): 0}[(b4, b5)]
    return class_of(h2, d, l)


def _build_graph() -> tuple[tuple[int, ...], ...]:
    adj: list[set[int]] = [set() for _ in range(NUM_CLASSES)]
    for c in range(NUM_CLASSES):
        h2, d, l = coords(c)
        for bit in range(3):  # e1 e2 e3
            adj[c].add(class_of(h2, d, l ^ (1 << bit)))
        adj[c].add(class_of(h2 ^ 1, d, l))  # e6
        if d == 0:
            adj[c].update((class_of(h2, 1, l), class_of(h2, 2, l)))
        else:
            adj[c].add(class_of(h2, 0, l))
    return tuple(tuple(sorted(a)) for a in adj)


NEIGHBORS: tuple[tuple[int, ...], ...] = _build_graph()
MIRROR: tuple[int, ...] = tuple(class_of(h2 ^ 2, d, l) for h2, d, l in map(coords, range(NUM_CLASSES)))
UNITY: frozenset[int] = frozenset(c for c in range(NUM_CLASSES) if coords(c)[1] == 0 and coords(c)[2] == 0
                                  and coords(c)[0] & 1 == 0)
BYTE_CLASS: tuple[int, ...] = tuple(byte_class(b) for b in range(256))


def _valid(c: int) -> bool:
    return 0 <= c < NUM_CLASSES


def mirror(c: int) -> int:
    return MIRROR[c] if _valid(c) else -1


def degree(c: int) -> int:
    return len(NEIGHBORS[c]) if _valid(c) else 0


def neighbor(c: int, k: int) -> int:
    """The k-th neighbour of c in ascending order, or -1."""
    if not _valid(c) or not 0 <= k < len(NEIGHBORS[c]):
        return -1
    return NEIGHBORS[c][k]


def is_unity(c: int) -> bool:
    return c in UNITY


def bound_map(c: int, page: int, byte: int) -> int:
    """Linear address of (class, page, byte) in the 96 x 48 x 256 Atlas memory view."""
    return c * CLASS_STRIDE + page * BYTES_PER_PAGE + byte


# Lookup tables as numpy arrays, for vectorized oracles and code generators.
BYTE_CLASS_TABLE = np.array(BYTE_CLASS, dtype=np.int64)
MIRROR_TABLE = np.array(MIRROR, dtype=np.int64)
DEGREE_TABLE = np.array([len(n) for n in NEIGHBORS], dtype=np.int64)
NEIGHBOR_TABLE = np.array([list(n) + [-1] * (6 - len(n)) for n in NEIGHBORS], dtype=np.int64)  # 96 x 6
UNITY_TABLE = np.array([c in UNITY for c in range(NUM_CLASSES)], dtype=bool)
