"""How the kernel generator writes scans (`cumsum`, `cumprod`): which forms fit a shape,
and their text. `exprgen.Builder.scan` draws one; `exprgen.evaluate` computes it with
the engine's `scan` (`bounds.scan`: each prefix held to the contract of a reduction of
its terms).

Shapes are the generator's symbolic ones (dims are labels: 'n', 'm', '1'). A scan along
an axis keeps its operand's shape; a scan without one is over the flattened operand, a
1-D array of the product of its dimensions: one of them when the others are 1, or `m*n`
(a derived dimension, hologram.core.dims) for two symbols.
"""

from __future__ import annotations

from typing import Callable

Shape = tuple[str, ...]

__all__ = ["flattened", "scan_forms", "render_scan"]


def flattened(shape: Shape) -> Shape | None:
    """The shape of an operand of `shape` flattened: its one dimension that is not 1, or
    the product of two symbols (`m*n`, a derived dimension); else None."""
    dims = [d for d in shape if d != "1"]
    if len(dims) == 2 and all(d.isidentifier() for d in dims):
        return ("*".join(sorted(dims)),)
    return (dims[0],) if len(dims) == 1 else ("1",) if not dims else None


def scan_forms(operand: Shape, target: Shape, fits: Callable[[Shape, Shape], bool]) -> list[tuple[int | None, Shape]]:
    """(axis, result shape) of every scan of an operand of shape `operand` whose result
    fits (broadcasts to) `target`: each axis, negative ones too, and None (flattened)."""
    rank = len(operand)
    forms: list[tuple[int | None, Shape]] = [(a, operand) for a in range(-rank, rank) if fits(operand, target)]
    flat = flattened(operand)
    if flat is not None and fits(flat, target):
        forms.append((None, flat))
    return forms


def render_scan(kind: str, axis: int | None, operand: str, style: str | None) -> str:
    """`cumsum(x, axis=1)`, `np.cumsum(x)` (style "np") or `x.cumsum(axis=1)` ("method",
    for an operand that is a name)."""
    extra = "" if axis is None else f"axis={axis}"
    if style == "method":
        return f"{operand}.cum{kind}({extra})"
    return f"{'np.' if style == 'np' else ''}cum{kind}({operand}{', ' if extra else ''}{extra})"
