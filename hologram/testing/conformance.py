"""The conformance kit: a backend held to the reference semantics for everything it
declares (docs/backends.md, "Conformance").

    report = run_conformance("mybackend")          # a registered backend, by name
    assert report.ok, report.format()
    print(report.format())                          # the coverage table, then the failures

The reference is the interpreter (`difftest_checks.REFERENCE`). The kit runs, on the
backend and on the reference, every program of `conformance_cases` its `capabilities`
cover (each instruction of the op table at each dtype, conversions, memory, control,
barriers, reductions, pools, stage shapes: seconds, with the data fixed), then the
generated kernels and programs of the differential harness (`examples` of each, drawn
from `seed`), and compares what each wrote at the precision the program pins down
(`precision`; bitwise where the kit chose data no order can change). An item the
declaration leaves out is *not declared*, never run: a partial backend is described, not
failed. The table gives, per area, how many items are declared, passed, failed and not
declared; `hologram conformance --backend NAME` prints it (exit status 1 on a failure).

In a backend package's own CI, with the package installed:

    from hologram.testing.conformance import run_conformance

    def test_conforms():
        report = run_conformance("mybackend", examples=5)
        assert report.ok, report.format()
"""

from __future__ import annotations

import tempfile
from typing import Any, Iterable, Mapping

import attrs
import numpy as np

from hologram.core.errors import UnsupportedProgram
from hologram.isa.program import BufferParam
from hologram.testing.conformance_cases import (AREAS, Case, NotDeclared, hand_written_cases, instruction_cases,
                                                stage_shape_cases)
from hologram.testing.difftest_checks import launch_on_copies
from hologram.testing.precision import EXACT, compare_outputs, precision

__all__ = ["PASSED", "FAILED", "NOT_DECLARED", "Check", "ConformanceReport", "run_conformance", "run_cases",
           "DEFAULT_EXAMPLES"]

PASSED, FAILED, NOT_DECLARED = "passed", "failed", "not declared"
DEFAULT_EXAMPLES = 5  # generated kernels and programs, and random values per instruction: seconds


@attrs.frozen
class Check:
    """One item: `ADD.f32`, `CVT.f16.i64`, `domain [n = 7, m = 5] block [3, 2]`..."""

    area: str
    item: str
    status: str
    message: str | None = None


@attrs.frozen
class ConformanceReport:
    backend: str
    reference: str
    checks: tuple[Check, ...]
    seed: int = 0
    examples: int = DEFAULT_EXAMPLES

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def failures(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status == FAILED)

    def table(self) -> list[tuple[str, int, int, int, int]]:
        """(area, declared, passed, failed, not declared) per area, in AREAS order."""
        rows = []
        for area in AREAS:
            mine = [c for c in self.checks if c.area == area]
            if not mine:
                continue
            count = {s: sum(c.status == s for c in mine) for s in (PASSED, FAILED, NOT_DECLARED)}
            rows.append((area, count[PASSED] + count[FAILED], count[PASSED], count[FAILED], count[NOT_DECLARED]))
        return rows

    def not_declared(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status == NOT_DECLARED)

    def format(self) -> str:
        """The table, then every failure with its message, as plain text."""
        head = ("area", "declared", "passed", "failed", "not declared")
        rows = [head, *((a, *map(str, counts)) for a, *counts in self.table())]
        widths = [max(len(r[k]) for r in rows) for k in range(len(head))]
        lines = [f"conformance of {self.backend!r} against {self.reference!r} (seed {self.seed}, "
                 f"{self.examples} generated examples)"]
        lines += ["  ".join(cell.ljust(w) if k == 0 else cell.rjust(w) for k, (cell, w) in enumerate(zip(r, widths)))
                  for r in rows]
        for c in self.failures:
            lines.append(f"FAILED {c.area}: {c.item}\n  " + (c.message or "").replace("\n", "\n  "))
        return "\n".join(lines)


# ------------------------------------------------------------------------- running
def _guarded(backend: Any, case: Case) -> tuple[dict[str, np.ndarray], str | None]:
    """The case on `backend`, on copies of its buffers (`launch_on_copies`), where anything
    but a HologramError (a bug in the backend) is an error too."""
    try:
        return launch_on_copies(backend, case.program, case.buffers, case.scalars, case.symbols)
    except (KeyboardInterrupt, SystemExit, MemoryError, UnsupportedProgram):
        raise
    except Exception as exc:  # noqa: BLE001 - the backend failed, not the kit
        return {}, f"unexpected {type(exc).__name__}: {exc}"


def run_cases(backend: Any, reference: Any, cases: Iterable[Case]) -> list[Check]:
    """Each case on both backends, judged per item."""
    checks = []
    for case in cases:
        why = backend.capabilities.uncovered(case.program)
        if why is not None:  # a program the declaration leaves out is never run
            checks += [Check(case.area, item, NOT_DECLARED, why) for item in case.items]
            continue
        want, want_err = _guarded(reference, case)
        if want_err is not None:  # every case is written to run: this one is wrong, not the backend
            checks += [Check(case.area, item, FAILED, f"the kit's program fails on the reference: {want_err}")
                       for item in case.items]
            continue
        try:
            got, got_err = _guarded(backend, case)
        except UnsupportedProgram as exc:
            checks += [Check(case.area, item, FAILED, f"declared, but prepare refused it: {exc.render()}")
                       for item in case.items]
            continue
        if got_err is not None:
            checks += [Check(case.area, item, FAILED, f"the reference ran it; the backend gave {got_err}")
                       for item in case.items]
            continue
        levels = {name: EXACT for name in case.buffers} if case.exact else precision(case.program)
        params = {p.name: p for p in case.program.params if isinstance(p, BufferParam)}
        for item, outputs in case.items.items():
            failures = compare_outputs([params[o] for o in outputs], levels, want, got)
            checks.append(Check(case.area, item, FAILED if failures else PASSED, "\n".join(failures) or None))
    return checks


def _missing(items: Iterable[NotDeclared]) -> list[Check]:
    return [Check(m.area, m.item, NOT_DECLARED, m.reason) for m in items]


def _generated(backend: str, examples: int, seed: int, out_dir: str | None) -> list[Check]:
    """The differential harness's generated kernels and programs on `backend` (O0): each
    example a check, its verdict the harness's."""
    from hologram.testing.difftest import run_difftest

    with tempfile.TemporaryDirectory(prefix="hologram-conformance-") as scratch:
        report = run_difftest([backend], examples=examples, seed=seed, opts=("O0",), out_dir=out_dir or scratch)
    checks = []
    for row in report.rows:
        area = f"generated {row.kind}"
        one = row.kind[:-1]
        checks += [Check(area, f"passing {one} {k + 1}", PASSED) for k in range(row.passed)]
        checks += [Check(area, f"failing {one} {k + 1}", FAILED,
                         (row.message or "") + (f"\nreproducer: {row.reproducer}" if row.reproducer else ""))
                   for k in range(row.failed)]
        checks += [Check(area, f"undeclared {one} {k + 1}", NOT_DECLARED, row.not_covered_reason)
                   for k in range(row.not_covered)]
    return checks


def run_conformance(backend: str, examples: int = DEFAULT_EXAMPLES, seed: int = 0, out_dir: str | None = None,
                    reference: str | None = None) -> ConformanceReport:
    """Hold the registered backend `backend` to `reference` (default: the interpreter)
    on every item it declares (module docstring). `examples` generated kernels and
    programs (and as many random values per instruction beyond the edge values), from
    `seed`; a failing generated example's reproducer is written to `out_dir` (none kept
    by default)."""
    from hologram.registry.lookups import get_backend
    from hologram.testing.difftest_checks import REFERENCE

    reference = reference or REFERENCE
    be, ref = get_backend(backend), get_backend(reference)
    caps = be.capabilities
    rng = np.random.default_rng(seed)
    checks: list[Check] = []
    for build in (lambda: instruction_cases(caps, rng, examples), lambda: hand_written_cases(caps),
                  lambda: stage_shape_cases(caps)):
        cases, missing = build()
        checks += run_cases(be, ref, cases) + _missing(missing)
    if examples:
        checks += _generated(backend, examples, seed, out_dir)
    order = {area: k for k, area in enumerate(AREAS)}
    return ConformanceReport(backend, reference, tuple(sorted(checks, key=lambda c: order[c.area])), seed, examples)


def declared_items(report: ConformanceReport) -> Mapping[str, tuple[str, ...]]:
    """The items run, by area (for a backend author's look at what a report covered)."""
    out: dict[str, list[str]] = {}
    for c in report.checks:
        if c.status != NOT_DECLARED:
            out.setdefault(c.area, []).append(c.item)
    return {k: tuple(v) for k, v in out.items()}
