"""Which lanes touch which elements: the race check that decides whether two backends'
answers for a fuzzed program may be compared at all.

A verified program is memory-safe, not necessarily deterministic: two lanes of one stage
may store to the same element, or one may load what another stores, and then the answer
depends on the order lanes run in, which the ISA leaves to the backend (the interpreter
runs them one by one, cpu_llvm vectorizes and threads them). The program fuzzer compares
backends only for launches without such races.

`find_race` runs a program on the reference backend (`difftest_checks.REFERENCE`, found
through the registry) with every global and shared memory access reported (the SDK's
trace hook, `Backend.observe` with an `AccessObserver`: lane, element, load/store/reduce)
and returns the first conflict:

- global memory: within one stage, an element stored (or reduced into) by one lane and
  accessed by another; or reduced into and also loaded or stored plainly (the merge
  order of reductions against plain accesses is the backend's);
- shared memory: the same within one block and one barrier epoch (accesses separated by
  a BarSync every lane reached are ordered).

Several lanes reducing into one element is not a race: that is what reductions are for
(their float results are order-dependent, which the precision levels account for).
`tests/testing/test_fuzz.py` checks that a racy and a race-free program are told apart.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from hologram.core.errors import HologramError, PluginError
from hologram.isa.program import Program


class _Race(Exception):
    """Raised from inside the reference backend at the first conflicting access, to stop it."""


class _Element:
    """Who touched one element: the first lane of each kind, and whether others did."""

    __slots__ = ("lanes",)

    def __init__(self) -> None:
        self.lanes: dict[str, Any] = {}  # kind -> a lane's gid, or `_MANY`


_MANY = object()


class _Recorder:
    """An `AccessObserver` that raises `_Race` at the first conflict."""

    def __init__(self) -> None:
        self.name = ""
        self.elements: dict[tuple, _Element] = {}
        self.epochs: dict[tuple[int, ...], int] = {}  # lane gid -> BarSyncs passed

    def stage(self, name: str) -> None:
        self.name, self.elements, self.epochs = name, {}, {}

    def access(self, gid: tuple[int, ...], ctaid: tuple[int, ...], kind: str, space: str, buffer: str,
               index: int, k: int) -> None:
        where: tuple = (buffer, index)
        if space == "shared":
            where = ("shared", ctaid, self.epochs.get(gid, 0), buffer, index)
        el = self.elements.get(where)
        if el is None:
            el = self.elements[where] = _Element()
        prev = el.lanes.get(kind)
        el.lanes[kind] = gid if prev is None or prev == gid else _MANY
        if self._conflict(el):
            raise _Race(f"stage '{self.name}': {space} '{buffer}'[{index}] is accessed by several lanes and "
                        f"written by one of them (lane gid={gid} at instruction {k}, a {kind})")

    @staticmethod
    def _conflict(el: _Element) -> bool:
        lanes = el.lanes
        writers = [lanes[k] for k in ("store", "reduce") if k in lanes]
        if not writers:
            return False
        if "reduce" in lanes and ("store" in lanes or "load" in lanes):
            return True  # a reduction against a plain access: merge order decides
        if "store" not in lanes:
            return False  # reductions alone combine
        touching = [lanes[k] for k in ("store", "load") if k in lanes]
        return any(t is _MANY for t in touching) or len(set(touching)) > 1

    def barrier(self, gid: tuple[int, ...], ctaid: tuple[int, ...]) -> None:
        self.epochs[gid] = self.epochs.get(gid, 0) + 1


def find_race(program: Program, buffers: Mapping[str, np.ndarray], scalars: Mapping[str, Any],
              symbols: Mapping[str, int]) -> str | None:
    """The first race of this launch (see the module docstring), or None when every
    stage ran without one. The launch runs on copies of `buffers`; a HologramError the
    program raises ends the trace there (what ran until then is judged)."""
    from hologram.registry.lookups import get_backend
    from hologram.testing.difftest_checks import REFERENCE

    reference = get_backend(REFERENCE)
    copies = {k: np.array(v, copy=True) for k, v in buffers.items()}
    try:
        observed = reference.observe(reference.prepare(program), copies, dict(scalars), dict(symbols), _Recorder())
    except _Race as race:
        return str(race)
    except HologramError:
        return None  # refused before any lane ran, or failed after the accesses judged so far
    if not observed:
        raise PluginError(f"the reference backend {REFERENCE!r} does not report memory accesses "
                          "(Backend.observe): the race check needs it")
    return None
