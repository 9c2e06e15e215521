"""`hologram diff-test`: the differential harness on the command line.

    hologram diff-test [--backends interp,cpu_llvm] [--opt O0,O2] [--examples N] [--seed S]
                       [--kind kernels|programs|both] [--out DIR]
    hologram diff-test --replay DIR/kernel-cpu_llvm-O2-0123abcd.toml [--backends B,...] [--opt O2]

A progress bar while it runs, then a table (kind, opt, backend, examples, passed, failed,
not covered), the reproducer of every failure with the command that replays it, and
what each backend declined (not covered: a backend that runs part of the ISA does not
declare what the program needs, or refused it with UnsupportedProgram), with the reason
whole. Exit status 1 when
anything failed, 2 for usage errors; an example not covered is not a failure.

`--replay FILE` of a file with no `.npz` beside it (a user's own kernel file) draws
`--examples` calls from its signature at `--seed` (default 0), printed, and holds every
backend to the reference interpreter.

The harness (hologram.testing.difftest) is built on hypothesis, which is in the `test`
extra, not a run-time dependency: it is imported only when the command runs, and a
missing hypothesis is an error that says how to install it (docs/decisions.md, "The CLI
without the test extra"). Nothing here may import it at start-up: every `hologram`
command builds this parser.
"""

from __future__ import annotations

import argparse
import os
from types import ModuleType
from typing import Any

from hologram.cli.options import count_of
from hologram.core.errors import HologramError, PluginError

KIND_CHOICES = {"kernels": ("kernels",), "programs": ("programs",), "both": ("kernels", "programs")}


# testing.difftest.DEFAULT_OUT, spelled again so that `--help` needs no hypothesis
# (tests/cli/test_cli_without_test_extra.py holds the two equal)
DEFAULT_OUT = "difftest-failures"
TEST_EXTRA_INSTALL = "pip install 'hologram-kernels[test]'"


def without_test_extra(exc: ModuleNotFoundError, command: str, why: str) -> HologramError:
    """The error for `command` when importing the test kit failed for want of hypothesis;
    any other missing module is a bug of ours, raised as it is."""
    if (exc.name or "").partition(".")[0] != "hypothesis":
        raise exc  # a module of ours that fails to import is a bug to surface, not to explain away
    return HologramError(f"{command} needs hypothesis, which is not installed: {why}",
                         hint=f"{TEST_EXTRA_INSTALL} installs it (the `test` extra)")


def harness() -> ModuleType:
    """hologram.testing.difftest, or an error saying how to install hypothesis."""
    try:
        from hologram.testing import difftest
    except ModuleNotFoundError as exc:
        raise without_test_extra(exc, "hologram diff-test",
                                 "the differential harness generates its examples with it") from None
    return difftest


def _backends(text: str) -> list[str]:
    names = [b.strip() for b in text.split(",") if b.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected backend names separated by commas, e.g. interp,cpu_llvm")
    return names


def _opts(text: str) -> list[str]:
    from hologram.registry.pipelines import parse_opt

    try:
        names = [parse_opt(o, "--opt") for o in text.split(",") if o.strip()]
    except PluginError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None
    if not names:
        raise argparse.ArgumentTypeError("expected optimization levels separated by commas, e.g. O0,O2")
    return list(dict.fromkeys(names))


def cmd_difftest(args: argparse.Namespace) -> int:
    from rich.console import Console

    difftest = harness()
    console = Console(highlight=False)
    if args.replay:
        return _replay(console, args)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from hologram.registry.lookups import list_backends

    backends = args.backends or list_backends()
    kinds = KIND_CHOICES[args.kind]
    with Progress(TextColumn("{task.description:>9}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        tasks = {k: bar.add_task(k, total=args.examples) for k in kinds}
        report = difftest.run_difftest(backends, args.examples, args.seed, kinds, args.out,
                                       progress=lambda kind, done, total: bar.update(tasks[kind], completed=done),
                                       opts=args.opt or difftest.OPTS)
    _summary(console, report)
    return 0 if report.ok else 1


def _summary(console: Any, report: Any) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"diff-test (seed {report.seed})", title_justify="left")
    for col, justify in (("kind", "left"), ("opt", "left"), ("backend", "left"), ("examples", "right"),
                         ("passed", "right"), ("failed", "right"), ("not covered", "right")):
        table.add_column(col, justify=justify)
    for r in report.rows:
        table.add_row(r.kind, r.opt, r.backend, str(r.examples), str(r.passed),
                      Text(str(r.failed), style="bold red" if r.failed else "green"),
                      Text(str(r.not_covered), style="yellow" if r.not_covered else ""))
    console.print(table)
    declined = [r for r in report.rows if r.not_covered]
    if declined:
        print("not covered by the backend (its capabilities leave the program out: not a failure):")
        for r in declined:
            print(f"  {r.backend} at {r.opt}: {r.not_covered} of {r.examples} {r.kind}, the first because")
            print(wrapped(r.not_covered_reason or "", console.width, "    "))
    from hologram.testing.difftest import replay_command  # harness() has imported it

    failed = [r for r in report.rows if r.reproducer]
    if failed:
        print("reproducers (shrunk):")
        for r in failed:
            first = (r.message or "").strip().splitlines()[:1]
            print(f"  {r.reproducer} ({r.backend} at {r.opt})\n    {first[0] if first else ''}")
            if r.culprit:
                print(f"    bisected to pass {r.culprit!r}: it passes with only the passes before it")
            print(f"    replay: {replay_command(r.reproducer, r.backend, r.opt)}")


def wrapped(text: str, width: int, indent: str) -> str:
    """`text` wrapped to `width` columns under `indent`, each of its lines on its own:
    a refusal's reason is shown whole, never cut to a table cell."""
    import textwrap

    return "\n".join(textwrap.fill(line, max(width, 40), initial_indent=indent, subsequent_indent=indent + "  ",
                                    break_long_words=False, break_on_hyphens=False)
                     for line in text.splitlines() if line.strip())


def _replay(console: Any, args: argparse.Namespace) -> int:
    from rich.markup import escape

    from hologram.testing.difftest import NotCovered, replay, stored_inputs  # harness() has imported it

    path, opts = args.replay, args.opt
    if opts and len(opts) > 1:
        print("hologram diff-test: --replay takes one --opt level")
        return 2
    seed = 0 if args.seed is None else args.seed
    if stored_inputs(path) is None and os.path.isfile(path):
        npz = path.rsplit(".", 1)[0] + ".npz"
        print(f"{path}: no inputs beside it ({npz}): {args.examples} calls drawn from its signature at seed {seed}, "
              f"each backend held to the reference interpreter (the same calls again: --seed {seed})")
    verdict = replay(path, args.backends, opts[0] if opts else None, seed=seed, examples=args.examples)
    for backend, message in verdict.items():
        if message is None:
            console.print(f"{escape(backend)}: [green]passes[/green] {escape(path)}")
        elif isinstance(message, NotCovered):
            console.print(f"{escape(backend)}: [yellow]not covered[/yellow] {escape(path)} (the backend's "
                          "capabilities leave it out: not a failure)")
            print(wrapped(message.reason, console.width, "    "))
        else:
            console.print(f"{escape(backend)}: [bold red]fails[/bold red] {escape(path)}")
            print(message)
    return 1 if any(isinstance(m, str) for m in verdict.values()) else 0


def add_difftest(sub: Any) -> None:
    p = sub.add_parser("diff-test", help="run generated kernels and programs on backends against the oracle",
                       description="Differential testing: generated kernels are held to the numpy oracle on every "
                       "backend; generated ISA programs are compared with the reference interpreter. Failures "
                       "are shrunk and written as reproducers.")
    p.add_argument("--backends", type=_backends, metavar="B1,B2",
                   help="comma-separated backend names (default: every available backend)")
    p.add_argument("--opt", type=_opts, metavar="O0,O2",
                   help="optimization levels to run every example at (default O0,O2); with --replay, one level "
                   "(default: the one it failed at)")
    p.add_argument("--examples", type=count_of("examples"), default=100, metavar="N",
                   help="examples per kind (default 100); with --replay of a file without inputs, the calls drawn")
    p.add_argument("--seed", type=int, default=None,
                   help="make the run repeatable (default: a random seed, printed; with --replay, 0)")
    p.add_argument("--kind", choices=tuple(KIND_CHOICES), default="both", help="what to generate (default both)")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help=f"where reproducers go (default ./{DEFAULT_OUT})")
    p.add_argument("--replay", metavar="PATH",
                   help="run one reproducer (.toml, .py or .hasm) again instead; a kernel file with no .npz of "
                   "inputs beside it runs on inputs drawn from its signature")
    p.set_defaults(func=cmd_difftest)
