"""Calls with loop dimensions: a kernel maps over its arguments' leading dimensions.

A kernel declared on `f32[n]` called with an array of shape `(4, 7, n)` computes every
one of the 28 items, as a numpy gufunc with core signature `(n)->(n)` does: an
argument's dimensions beyond its declared rank are its *loop dimensions*; those of all
arguments broadcast together (numpy's rules) into the call's loop shape, which leads
every output's shape. A scalar parameter given an array takes its dimensions as loop
dimensions too. The whole batch runs in one launch of the kernel's program rewritten by
hologram.passes.isa_batch, prepared once per pattern (which arguments carry which loop
dimensions) and backend.

Nothing is copied: an argument with the whole loop shape is read where it lies, one with
a broadcast part of it through a small table of item numbers (numpy's broadcasting,
without materializing it), one with none is shared by every item.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from hologram.call.args import check_array, is_device_array
from hologram.compiler.signature import Param, Signature
from hologram.core.errors import ArgumentError
from hologram.core.values import Value


class LoopCall(Value):
    """What one call with loop dimensions binds: the loop shape, each input's core value
    (for binding the shape symbols), and the program's pattern: inputs with the whole
    loop shape (`full`), with a broadcast part of it (`tabled`, with their item tables)."""

    __slots__ = ("shape", "values", "full", "tabled")
    shape: tuple[int, ...]
    values: Mapping[str, Any]
    full: frozenset[str]
    tabled: Mapping[str, tuple[np.ndarray, int]]  # name -> (its item per batch index, its item count)

    def __init__(self, shape: tuple[int, ...], values: Mapping[str, Any], full: frozenset[str],
                 tabled: Mapping[str, tuple[np.ndarray, int]]) -> None:
        self._init(shape=shape, values=values, full=full, tabled=tabled)

    @property
    def count(self) -> int:
        return math.prod(self.shape)

    def pattern(self) -> tuple[frozenset[str], frozenset[str]]:
        return self.full, frozenset(self.tabled)


class Core(Value):
    """An argument seen through its declared (core) dimensions, for binding symbols."""

    __slots__ = ("shape",)
    shape: tuple[int, ...]

    def __init__(self, shape: tuple[int, ...]) -> None:
        object.__setattr__(self, "shape", shape)


def loop_rank(p: Param, value: Any) -> int:
    """How many loop dimensions `value` brings to input `p` (0 when none, or when it is no
    array: the usual checks then judge it)."""
    if not isinstance(value, np.ndarray) and not is_device_array(value):
        return 0
    return max(value.ndim - len(p.shape), 0) if p.kind == "array" else value.ndim


def loop_call(sig: Signature, values: Mapping[str, Any], cast: bool) -> LoopCall | None:
    """The call's loop dimensions, or None when no argument has any (the ordinary call)."""
    ranks = {p.name: loop_rank(p, values[p.name]) for p in sig.inputs}
    if not any(ranks.values()):
        return None
    name = sig.name
    checked: dict[str, np.ndarray] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    for p in sig.inputs:
        if not ranks[p.name]:
            continue
        checked[p.name] = a = check_array(name, p, values[p.name], cast, ranks[p.name])
        shapes[p.name] = a.shape[:ranks[p.name]]
    try:
        shape = np.broadcast_shapes(*shapes.values())
    except ValueError:
        listed = ", ".join(f"{n!r} {s}" for n, s in shapes.items())
        raise ArgumentError(f"{name}(): the loop dimensions of the arguments do not broadcast: {listed}",
                            hint="loop dimensions (those before each argument's declared ones) follow numpy's "
                                 "broadcasting: equal, 1, or missing") from None
    full, tabled = set(), {}
    out = dict(values)
    out.update(checked)
    for n, own in shapes.items():
        padded = (1,) * (len(shape) - len(own)) + own
        if padded == shape:
            full.add(n)
        elif math.prod(own) == 1 and isinstance(checked[n], np.ndarray):
            # loop dimensions of 1: one item, shared by all, as a view without them (a device array has no
            # views: it is read through a table below, as any broadcast argument is)
            out[n] = checked[n].reshape(checked[n].shape[ranks[n]:])
        else:
            items = np.arange(math.prod(own), dtype=np.int64).reshape(padded)
            tabled[n] = (np.ascontiguousarray(np.broadcast_to(items, shape)).reshape(-1), math.prod(own))
    return LoopCall(tuple(int(d) for d in shape), out, frozenset(full), tabled)


def core_views(sig: Signature, call: LoopCall) -> dict[str, Any]:
    """Each array input as its core shape (what binds the shape symbols)."""
    out: dict[str, Any] = {}
    for p in sig.inputs:
        if p.kind != "array":
            continue
        v = call.values[p.name]
        if isinstance(v, np.ndarray) or is_device_array(v):
            out[p.name] = Core(v.shape[v.ndim - len(p.shape):]) if v.ndim >= len(p.shape) else v
        else:
            out[p.name] = v
    return out


def output_shapes(call: LoopCall, cores: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:
    return [call.shape + c for c in cores]
