"""What several `hologram` commands share: --opt / --passes, usage errors, the console."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from hologram.core.errors import HologramError, PluginError
from hologram.passes.manager import Pipeline
from hologram.registry import pipelines


class UsageError(HologramError):
    """The command line asks for something that cannot be: exit status 2."""


def rich_console() -> Any:
    from rich.console import Console
    return Console(highlight=False)


def count_of(what: str) -> Callable[[str], int]:
    """An argparse type: a whole number >= 1 of `what` ("examples", "calls")."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            n = 0
        if n < 1:
            raise argparse.ArgumentTypeError(f"expected a number of {what} >= 1, got {text!r}")
        return n
    return parse


def opt_level(text: str) -> str:
    try:
        return pipelines.parse_opt(text, None)  # argparse names the option
    except PluginError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def pass_names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected pass names separated by commas, e.g. fold,cse,dce")
    return names


def pipeline_of(args: argparse.Namespace) -> Pipeline:
    """The pipeline --opt / --passes (else HOLOGRAM_OPT, else O2) ask for; an unknown pass
    or a bad HOLOGRAM_OPT is a usage error."""
    try:
        return pipelines.resolve(args.opt, args.passes)
    except PluginError as exc:
        raise UsageError(exc.message, hint=exc.hint) from None


def add_opt(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--opt", metavar="LEVEL", type=opt_level,
                   help="optimization level O0 (no passes), O1 or O2 (default: HOLOGRAM_OPT, else O2)")
    g.add_argument("--passes", metavar="A,B,...", type=pass_names,
                   help="run exactly these passes (in the order their constraints give) instead of a level")
