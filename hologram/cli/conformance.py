"""`hologram conformance`: the conformance kit (hologram.testing.conformance) on the
command line.

    hologram conformance --backend NAME [--examples N] [--seed S] [--out DIR] [--json]

Prints the coverage table (per area: declared, passed, failed, not declared), then each
failure with its message and, with `--verbose`, each item the backend does not declare
with the reason. Exit status 1 when anything failed, 2 for usage errors; what a backend
does not declare is never a failure. Like diff-test, it needs the `test` extra
(hypothesis, for the generated kernels), imported only when the command runs.
"""

from __future__ import annotations

import argparse
from typing import Any

from hologram.cli.difftest import DEFAULT_OUT, without_test_extra, wrapped
from hologram.cli.tables import print_json, print_table


def _examples(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a number of examples >= 0, got {text!r}")
    return n


def cmd_conformance(args: argparse.Namespace) -> int:
    from rich.console import Console

    try:
        from hologram.testing.conformance import NOT_DECLARED, run_conformance
    except ModuleNotFoundError as exc:
        raise without_test_extra(exc, "hologram conformance", "the generated kernels are drawn with it") from None
    from hologram.registry.lookups import get_backend

    get_backend(args.backend)  # an unknown or unavailable backend is an error before anything runs
    report = run_conformance(args.backend, args.examples, args.seed, args.out)
    if args.json:
        print_json({"backend": report.backend, "reference": report.reference, "seed": report.seed,
                    "examples": report.examples, "ok": report.ok,
                    "areas": [dict(zip(("area", "declared", "passed", "failed", "not declared"), row))
                              for row in report.table()],
                    "checks": [{"area": c.area, "item": c.item, "status": c.status, "message": c.message}
                               for c in report.checks]})
        return 0 if report.ok else 1
    console = Console(highlight=False)
    print_table(console, (("area", "left"), ("declared", "right"), ("passed", "right"), ("failed", "right"),
                          ("not declared", "right")),
                [(area, *map(str, counts)) for area, *counts in report.table()],
                title=f"conformance of {report.backend} against {report.reference} (seed {report.seed}, "
                      f"{report.examples} generated examples)")
    for c in report.failures:
        print(f"failed: {c.area}: {c.item}")
        print(wrapped(c.message or "", console.width, "    "))
    undeclared = report.not_declared()
    if undeclared and args.verbose:
        print(f"not declared by {report.backend} (not failures):")
        for c in undeclared:
            print(f"  {c.area}: {c.item}")
            print(wrapped(c.message or "", console.width, "      "))
    elif undeclared:
        print(f"{len(undeclared)} items not declared by {report.backend} (--verbose lists them): not failures")
    print("conformance: " + ("ok" if report.ok else f"{len(report.failures)} failed"))
    return 0 if report.ok else 1


def add_conformance(sub: Any) -> None:
    p = sub.add_parser("conformance", help="hold a backend to the reference semantics for everything it declares",
                       description="The conformance kit: every instruction, dtype, conversion, memory space, "
                       "control form, barrier, reduction and stage shape the backend's capabilities declare, "
                       "then generated kernels and programs, each against the reference interpreter. What it "
                       "does not declare is reported, never failed.")
    p.add_argument("--backend", required=True, metavar="NAME", help="the registered backend to test")
    p.add_argument("--examples", type=_examples, default=5, metavar="N",
                   help="generated kernels and programs, and random values per instruction beyond the edge "
                   "values (default 5; 0: the fixed programs only)")
    p.add_argument("--seed", type=int, default=0, help="the seed the random values and examples come from (default 0)")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                   help=f"where a failing generated example's reproducer goes (default ./{DEFAULT_OUT})")
    p.add_argument("--verbose", action="store_true", help="list every item the backend does not declare, and why")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.set_defaults(func=cmd_conformance)
