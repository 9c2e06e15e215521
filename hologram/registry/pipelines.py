"""Pipelines from what is registered: `opt=` and `passes=` resolved to a `Pipeline`.

- `O0` runs no pass, `O1`/`O2` the registered passes whose `pipelines` name them,
  `custom` the passes named explicitly (`--passes a,b,c`); each in the order
  hologram.passes.manager gives them.
- Without either, the level HOLOGRAM_OPT names, else O2.

Pipelines are built once per registry (a plugin registered later gives new ones).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, Callable, Sequence

from hologram.core import forks
from hologram.core.errors import PluginError, did_you_mean, in_words, meant
from hologram.passes.api import PIPELINES, Pass
from hologram.passes.manager import Pipeline, order
from hologram.registry import lookups
from hologram.registry import plugins

ENV_OPT = "HOLOGRAM_OPT"
DEFAULT_OPT = "O2"


def registered() -> tuple[Pass, ...]:
    """Every registered pass, in registration order (already validated by the registry)."""
    return tuple(p for p in lookups.passes() if isinstance(p, Pass))


_BUILT: list[Any] = [None, {}]  # [the registry pipelines were built from, {key: Pipeline}]
_BUILT_LOCK = threading.Lock()
forks.renew_in_child(sys.modules[__name__], "_BUILT_LOCK")


def _memo(key: Any, build: Callable[[tuple[Pass, ...]], Pipeline]) -> Pipeline:
    reg = plugins.registry(("pass",))
    with _BUILT_LOCK:
        if _BUILT[0] is not reg:
            _BUILT[0], _BUILT[1] = reg, {}
        found = _BUILT[1].get(key)
    if found is None:
        found = build(registered())
        with _BUILT_LOCK:
            if _BUILT[0] is reg:
                _BUILT[1][key] = found
    return found


def _split(name: str, ordered: tuple[Pass, ...]) -> Pipeline:
    return Pipeline(name, tuple(p for p in ordered if p.level == "ir"), tuple(p for p in ordered if p.level == "isa"))


def _named(level: str) -> Pipeline:
    if level == "O0":
        return Pipeline("O0")
    return _memo(level, lambda found: _split(level, order([p for p in found if level in p.pipelines])))


def _custom(names: tuple[str, ...]) -> Pipeline:
    def build(found: tuple[Pass, ...]) -> Pipeline:
        table = {p.name: p for p in found}
        for n in names:
            if n not in table:
                hint = f"registered passes: {', '.join(table)}" if table else "no passes are registered"
                raise PluginError(f"unknown pass {n!r}{did_you_mean(n, table)}", hint=hint)
        wanted = set(names)
        return _split("custom", order([p for p in found if p.name in wanted]))
    return _memo(("custom", names), build)


def parse_opt(opt: str, source: str | None = "opt=") -> str:
    """'O0', 'O1' or 'O2' from `opt` (any case; surrounding blanks ignored). `source`
    says where the value came from, for the error."""
    where = f"{source}: " if source else ""
    if not isinstance(opt, str):
        raise PluginError(f"{where}an optimization level is a string such as 'O2', got {type(opt).__name__}")
    level = opt.strip().upper()
    if level not in PIPELINES:  # the levels in the message: argparse shows no hint
        raise PluginError(f"{where}unknown optimization level {opt!r}{meant(level, PIPELINES)}: the levels are "
                          f"{in_words(PIPELINES)}")
    return level


def resolve(opt: str | None = None, passes: Sequence[str] | str | None = None) -> Pipeline:
    """The pipeline to compile with: the passes named in `passes` (a sequence, or one
    comma-separated string) when given, in constraint order; else the named pipeline
    `opt`, else the one HOLOGRAM_OPT names, else O2."""
    if passes is not None:
        if isinstance(passes, str):
            passes = passes.split(",")
        names = []
        for n in passes:
            if not isinstance(n, str):
                raise PluginError(f"pass names are strings, got {type(n).__name__}")
            n = n.strip()
            if n and n not in names:
                names.append(n)
        return _custom(tuple(names))
    if opt is None:
        env = os.environ.get(ENV_OPT, "").strip()
        return _named(parse_opt(env, ENV_OPT) if env else DEFAULT_OPT)
    return _named(parse_opt(opt))
