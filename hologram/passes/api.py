"""What an optimizer pass is: a named, pure function of one pipeline value.

A pass runs at one of two levels:

- `"ir"`:  `run(kir: KernelIR) -> KernelIR`, between the front end and the lowering;
- `"isa"`: `run(program: Program) -> Program`, between the lowering and the verifier
  (the verifier checks every pass's output, so an ISA pass cannot smuggle in an
  unsafe program).

A pass must be pure: equal inputs give equal outputs, and it may not keep state between
calls. The pass manager relies on that to cache a pipeline's result by content.

Plugins register passes through the `hologram_register_passes(register)` hook; the
built-in ones are registered the same way by `hologram.passes.builtin`.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import attrs

LEVELS = ("ir", "isa")
PIPELINES = ("O0", "O1", "O2")
_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")


def _check_name(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if not isinstance(value, str) or not _NAME.match(value):
        raise ValueError(f"pass {attribute.name} {value!r} is not a lower-case identifier (a-z, 0-9, _ and -)")


def _check_names(instance: Any, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    for v in value:
        _check_name(instance, attribute, v)


@attrs.frozen
class Pass:
    """One optimizer pass.

    name       unique among registered passes; what `--passes` and `--after` take
    level      "ir" or "isa"
    run        the transformation (see the module docstring for its signature)
    before     passes this one must run before (when both are in a pipeline)
    after      passes this one must run after (when both are in a pipeline)
    pipelines  the named pipelines that include it: a subset of ("O1", "O2"); empty
               means it runs only when asked for by name
    summary    one line for `hologram plugins` and the docs
    """

    name: str = attrs.field(validator=_check_name)
    level: str = attrs.field(validator=attrs.validators.in_(LEVELS))
    run: Callable[[Any], Any] = attrs.field(validator=attrs.validators.is_callable())
    before: tuple[str, ...] = attrs.field(default=(), converter=tuple, validator=_check_names)
    after: tuple[str, ...] = attrs.field(default=(), converter=tuple, validator=_check_names)
    pipelines: tuple[str, ...] = attrs.field(default=("O1", "O2"), converter=tuple,
                                             validator=attrs.validators.deep_iterable(
                                                 attrs.validators.in_(("O1", "O2"))))
    summary: str = ""
