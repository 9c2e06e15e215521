"""`hologram fuzz`: the program, document and object-code fuzzers on the command line.

    hologram fuzz [--programs N] [--documents N] [--objects N] [--seed S] [--workers W] [--scale ci|long]
                  [--out DIR]
    hologram fuzz --replay DIR/NAME.case.pkl

A summary per fuzzer (cases, outcomes, findings by kind), then the first findings not
known yet; each finding is written to DIR with a reproducer (docs/testing.md,
"Fuzzing"). Exit status 1 when there is a finding not known yet. Like diff-test, the
fuzzers belong to the test kit and are imported only when the command runs.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any, Callable, Sequence

from hologram.cli.difftest import without_test_extra


def add_fuzz(sub: Any) -> None:
    p = sub.add_parser("fuzz", help="fuzz Atlas programs, kernel documents and shipped object code; findings "
                                    "with reproducers",
                       description="Fuzz Atlas programs, kernel documents and the object code cpu_llvm ships "
                                   "(docs/testing.md, \"Fuzzing\").")
    p.add_argument("--programs", type=int, default=500, help="program mutants (0: none)")
    p.add_argument("--documents", type=int, default=500, help="document mutants (0: none)")
    p.add_argument("--objects", type=int, default=500, help="object-code mutants (0: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--scale", choices=("ci", "long"), default="long",
                   help="sizes of the pathological mutants (ranks, chains, nesting)")
    p.add_argument("--out", default="fuzz-findings", help="directory for the findings' files")
    p.add_argument("--replay", metavar="CASE", help="run a saved .case.pkl again")
    p.set_defaults(func=cmd_fuzz)


def cmd_fuzz(args: argparse.Namespace) -> int:
    try:
        from hologram.testing.fuzz import Finding, fuzz_documents, fuzz_objects, fuzz_programs, replay
    except ModuleNotFoundError as exc:
        raise without_test_extra(exc, "hologram fuzz", "the test kit it belongs to is built on it") from None
    if args.replay:
        found = replay(args.replay)
        print("\n\n".join(map(str, found)) or "no finding: the case passes now")
        return 1 if found else 0
    found: list[Finding] = []
    sized = {"scale": args.scale}  # the object mutations have no sizes to scale
    for name, count, run, extra in (("programs", args.programs, fuzz_programs, sized),
                                    ("documents", args.documents, fuzz_documents, sized),
                                    ("objects", args.objects, fuzz_objects, {})):
        if count <= 0:
            continue
        stats: dict = {}
        findings = run(count, args.seed, workers=args.workers, out_dir=args.out, stats=stats,
                       progress=_progress(name), **extra)
        print(_summary(name, findings, stats), flush=True)
        found += findings
    new = [f for f in found if f.known is None]
    for f in new[:20]:
        print("\n" + str(f))
    if found:
        print(f"\n{len(found)} findings ({len(new)} not known), written to {args.out}/")
    return 1 if new else 0


def _summary(name: str, findings: Sequence[Any], stats: dict) -> str:
    lines = [f"{name}: {stats.get('cases', 0)} cases in {stats.get('seconds', 0)} s; outcomes "
             f"{stats.get('outcomes', {})}; {stats.get('facts', {})}"
             + (f" (skipped: {stats['skipped']})" if "skipped" in stats else "")]
    groups = Counter((f.kind, f.phase, f.known) for f in findings)
    for (kind, phase, known), n in groups.most_common():
        lines.append(f"  {n:5d} x {kind} in {phase}" + (f"  (known: {known})" if known else ""))
    return "\n".join(lines)


def _progress(name: str) -> Callable[[int, int], None]:
    tty = sys.stderr.isatty()

    def show(done: int, planned: int) -> None:
        if tty:  # one line, rewritten
            print(f"\r{name}: {done}/{planned}", end="\n" if done == planned else "", file=sys.stderr, flush=True)
        elif done == planned or done % max(1, planned // 10) == 0:
            print(f"{name}: {done}/{planned}", file=sys.stderr, flush=True)
    return show
