"""What a pipeline bought, as a table: the metrics of `stats.measure` side by side per
pipeline, with the change from the first to the last and the sizes it is evaluated at.

    format_stats({"O0": s0, "O2": s2}, example_sizes(program))  # a rich Table
    render(table)                                                # as plain text
"""

from __future__ import annotations

from typing import Mapping

from hologram.core.types import Affine
from hologram.isa.program import BufferParam, Program
from hologram.passes.stats import QUOTIENTS, Formula, Stats

__all__ = ["reduction", "example_sizes", "format_stats", "render"]


def reduction(before: int, after: int) -> str:
    """`75% reduction`, `no change`, or `12% increase`."""
    if before == after:
        return "no change"
    if before == 0:
        return "new"
    pct = round(100 * (before - after) / before)
    return f"{pct}% reduction" if after < before else f"{-pct}% increase"


METRICS = (("stages", "stages"), ("IR ops", "ir_ops"), ("instructions", "instructions"),
           ("registers", "registers"), ("bytes read", "bytes_read"), ("bytes written", "bytes_written"))


# The sizes `example_sizes` tries for each shape symbol, nearest 1024 first: a dimension of
# at least NONDEGENERATE elements is a fair example of the kernel's byte traffic.
DEFAULT_SIZE = 1024
SIZE_CHOICES = (1024, 512, 2048, 256, 4096, 128, 64, 32, 16, 8, 4, 2, 1)
NONDEGENERATE = 256
MAX_SEARCHED_SYMBOLS = 4  # 13**4 assignments; past that, every symbol is DEFAULT_SIZE


def example_sizes(program: Program) -> dict[str, int]:
    """Values for the program's shape symbols at which to compare byte counts: 1024 each
    unless a dimension (of a parameter, a temporary or a stage domain) would then be
    small or empty, as `f32[n - w + 1]` is at n = w = 1024. Then the assignment from
    SIZE_CHOICES that makes the smallest dimension largest (up to NONDEGENERATE), nearest
    1024 otherwise: n = 1024, w = 512 there. A kernel with more than
    MAX_SEARCHED_SYMBOLS symbols keeps 1024 for each."""
    import itertools
    import math

    names = program.symbols
    buffers = [b for b in (*program.params, *program.temps) if isinstance(b, BufferParam)]
    dims = [Affine.of(d) for b in buffers for d in b.shape]
    dims += [Affine.of(d) for stage in program.stages for d in stage.domain]
    dims = [d for d in dims if d.terms]  # constant dimensions do not depend on the choice

    def score(values: tuple[int, ...]) -> tuple[int, float]:
        bound = dict(zip(names, values))
        smallest = min((d.evaluate(bound) for d in dims), default=NONDEGENERATE)
        return min(smallest, NONDEGENERATE), -sum(abs(math.log2(v / DEFAULT_SIZE)) for v in values)

    default = (DEFAULT_SIZE,) * len(names)
    if score(default)[0] >= NONDEGENERATE or len(names) > MAX_SEARCHED_SYMBOLS:
        return dict(zip(names, default))
    best = max(itertools.product(SIZE_CHOICES, repeat=len(names)), key=score)  # max keeps the first best
    return dict(zip(names, best))


def format_stats(rows: Mapping[str, Stats], symbols: Mapping[str, int] | None = None, title: str | None = None):
    """A rich Table: one row per metric, one column per pipeline (in `rows` order), and the
    change from the first to the last column (`4 -> 1 (75% reduction)`). Byte counts
    print symbolically; their percentages are taken at `symbols` (default: every symbol
    1024; `example_sizes(program)` picks sizes where no dimension is degenerate), stated
    in the caption."""
    from rich.table import Table

    names = list(rows)
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    for n in names:
        table.add_column(n, justify="right")
    if len(names) > 1:
        table.add_column(f"{names[0]} -> {names[-1]}", justify="right")
    syms = sorted(set().union(*(getattr(s, f).symbols for s in rows.values() for f in ("bytes_read",
                                                                                           "bytes_written"))))
    at = {s: DEFAULT_SIZE for s in syms if s not in QUOTIENTS}  # quotients follow from the others
    at.update(symbols or {})
    bounds = False
    for label, field in METRICS:
        values = [getattr(rows[n], field) for n in names]
        cells = [str(v) for v in values]
        if field.startswith("bytes"):
            cells = [c if rows[n].bytes_exact else f"<= {c}" for n, c in zip(names, cells)]
            bounds |= not all(rows[n].bytes_exact for n in names)
        if len(names) > 1:
            first, last = (v.evaluate(at) if isinstance(v, Formula) else v for v in (values[0], values[-1]))
            cells.append(f"{first} -> {last} ({reduction(first, last)})")
        table.add_row(label, *cells)
    shown = {s: v for s, v in at.items() if s in syms}
    notes = ["bytes: per launch, no cache reuse"]
    if shown:
        notes.append("change at " + ", ".join(f"{s}={v}" for s, v in shown.items()))
    if bounds:
        notes.append("<=: an upper bound (a branch skips accesses)")
    table.caption = "; ".join(notes)
    return table


def render(table: object, width: int = 120) -> str:
    """A rich renderable as plain text."""
    import io

    from rich.console import Console

    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, highlight=False).print(table)
    return buf.getvalue()
