"""Is a Program built from the right Python values? The check every consumer runs first.

attrs does not enforce annotations, so a pass or plugin can build `Instr(dtype="f32")`
or put a string where a tuple belongs. `structure_problem(p)` walks the whole value
against the table below and describes the first field holding the wrong kind of thing;
the verifier, the encoder and the formatter refuse such programs with that description
instead of failing somewhere inside. Past this check every field has its declared type.
"""

from __future__ import annotations

import weakref
from typing import Any

import attrs

from hologram.core.errors import Site
from hologram.core.types import Affine, DType
from hologram.isa.program import (Addr, BufferParam, Imm, Init, Instr, Label, MemDecl, Pred, Program, Reg, RegDecl,
                                  ScalarParam, Special, Stage, Sym)

# The ISA classes convert numpy scalars to Python ones when built (types.python_scalar),
# so a numpy value here was set past the constructor: refused, since the backends read
# such values differently (the interpreter refused numpy offsets that cpu_llvm ran).
INT = "int"  # a Python int, not bool
VALUE = "value"  # an immediate: a Python bool, int or float


def _seq(spec: Any) -> tuple:
    return ("seq", spec)


OPERAND = (Reg, Special, Imm, Sym)
SCHEMA: dict[type, dict[str, Any]] = {
    Program: {"name": str, "params": _seq((BufferParam, ScalarParam)), "temps": _seq(BufferParam),
              "symbols": _seq(str), "stages": _seq(Stage), "isa_version": INT, "reassociate": bool,
              "sites": _seq(Site)},
    Site: {"file": str, "line": INT, "col": INT, "end_col": INT, "text": str},
    BufferParam: {"name": str, "dtype": DType, "shape": _seq(Affine), "role": str},
    ScalarParam: {"name": str, "dtype": DType},
    Affine: {"const": INT, "terms": _seq(("pair", str, INT))},
    Stage: {"name": str, "domain": _seq(Affine), "block": _seq(INT), "regs": _seq(RegDecl),
            "shared": _seq(MemDecl), "pools": _seq(MemDecl), "inits": _seq(Init), "body": _seq((Instr, Label))},
    RegDecl: {"name": str, "dtype": DType},
    MemDecl: {"name": str, "dtype": DType, "size": INT},
    Init: {"buffer": str, "offset": INT, "value": VALUE},
    Label: {"name": str},
    Instr: {"op": str, "dtype": (DType, None), "dst": (Reg, None), "srcs": _seq(OPERAND), "addr": (Addr, None),
            "target": (str, None), "mod": (str, None), "dtype2": (DType, None), "count": (INT, None),
            "pred": (Pred, None), "checked": bool, "site": (INT, None)},
    Reg: {"name": str}, Special: {"name": str}, Sym: {"name": str}, Imm: {"value": VALUE},
    Addr: {"buffer": str, "index": (Reg, None), "offset": INT},
    Pred: {"reg": Reg, "negate": bool},
}


def _name(spec: Any) -> str:
    if isinstance(spec, tuple) and spec and spec[0] == "seq":
        return f"a tuple of {_name(spec[1])}"
    if isinstance(spec, tuple) and spec and spec[0] == "pair":
        return f"({_name(spec[1])}, {_name(spec[2])}) pairs"
    if isinstance(spec, tuple):
        return " or ".join(_name(s) for s in spec)
    return {INT: "int", VALUE: "bool/int/float", None: "None"}.get(spec, getattr(spec, "__name__", str(spec)))


def _problem(value: Any, spec: Any, path: str) -> str | None:
    if isinstance(spec, tuple) and spec and spec[0] == "seq":
        if not isinstance(value, tuple):
            return f"{path} should be {_name(spec)}, not {type(value).__name__}"
        for k, v in enumerate(value):
            if (bad := _problem(v, spec[1], f"{path}[{k}]")) is not None:
                return bad
        return None
    if isinstance(spec, tuple) and spec and spec[0] == "pair":
        if not (isinstance(value, tuple) and len(value) == 2):
            return f"{path} should be a pair, not {value!r}"
        return _problem(value[0], spec[1], f"{path}[0]") or _problem(value[1], spec[2], f"{path}[1]")
    options = spec if isinstance(spec, tuple) else (spec,)
    for opt in options:
        if opt is None and value is None:
            return None
        if opt == INT and type(value) is int:
            return None
        if opt == VALUE and type(value) in (bool, int, float):
            return None
        if isinstance(opt, type) and isinstance(value, opt):
            fields = SCHEMA.get(opt)
            if fields is None or (opt is Stage and value in _WELL_TYPED_STAGES):
                return None
            for f in attrs.fields(opt):
                if (bad := _problem(getattr(value, f.name), fields[f.name], f"{path}.{f.name}")) is not None:
                    return bad
            if opt is Stage:
                _WELL_TYPED_STAGES.add(value)
            return None
    return f"{path} should be {_name(spec)}, not {value!r}"


class ByIdentity:
    """A weak set of Programs (or Stages), by identity: a well-typed one is immutable all
    the way down (frozen classes, tuples and scalars), so a verdict about it holds for its
    whole life and need not be recomputed (a walk of a big program takes milliseconds)."""

    def __init__(self) -> None:
        self._by_id: weakref.WeakValueDictionary[int, object] = weakref.WeakValueDictionary()

    def __contains__(self, p: object) -> bool:
        return p is not None and self._by_id.get(id(p)) is p

    def add(self, p: object) -> None:
        self._by_id[id(p)] = p


_WELL_TYPED = ByIdentity()  # the verifier, the encoder and the formatter all ask
# Passes rebuild a Program around the stages they did not change, and the verifier
# checks one stage at a time in a Program of its own: stages keep their verdict too.
_WELL_TYPED_STAGES = ByIdentity()


def built_well_typed(p: Program) -> Program:
    """Record that `p` is well typed without walking it: for `decode`, whose readers
    construct every field with its declared type (a big program's walk takes tens of
    milliseconds of a bundle load)."""
    _WELL_TYPED.add(p)
    return p


def structure_problem(p: object) -> str | None:
    """A description of the first ill-typed field of `p` (`stages[0].body[3].dtype
    should be DType or None, not 'f32'`), or None when every field is well typed."""
    if p in _WELL_TYPED:
        return None
    bad = _problem(p, Program, "program")
    if bad is None and isinstance(p, Program):
        _WELL_TYPED.add(p)
    return bad
