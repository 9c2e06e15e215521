"""A kernel's interface, read from its IR as the front end built it: what a call takes
and returns (`Signature`, its `Param`s), how a call binds shape symbols when that is a
look-up (`direct_binding`), and which reductions a call must check for empty extents
(`identityless_reductions`). A `Compiled` kernel carries these; the call path checks
arguments against them (hologram.call.args)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from hologram.core.types import Affine, DType, Shape, type_str
from hologram.core.values import Value

if TYPE_CHECKING:
    from hologram.ir import KernelIR


class Param(Value):
    """An input or output of a kernel call. kind: 'array', 'scalar' or 'output'."""

    __slots__ = ("name", "dtype", "shape", "kind")
    name: str
    dtype: DType
    shape: Shape
    kind: str

    def __init__(self, name: str, dtype: DType, shape: Shape, kind: str) -> None:
        self._init(name=name, dtype=dtype, shape=shape, kind=kind)

    @property
    def type(self) -> str:
        return type_str(self.dtype, self.shape)

    def __str__(self) -> str:
        return f"{self.name}: {self.type}"


class Signature(Value):
    """What a kernel takes and returns: `softmax(x: f32[n]) -> y: f32[n]`."""

    __slots__ = ("name", "inputs", "outputs", "symbols")
    name: str
    inputs: tuple[Param, ...]
    outputs: tuple[Param, ...]
    symbols: tuple[str, ...]

    def __init__(self, name: str, inputs: tuple[Param, ...], outputs: tuple[Param, ...],
                 symbols: tuple[str, ...] = ()) -> None:
        self._init(name=name, inputs=inputs, outputs=outputs, symbols=symbols)

    @staticmethod
    def of(kir: KernelIR) -> "Signature":
        ins = tuple(Param(d.name, d.dtype, d.shape, "scalar" if d.kind == "scalar" else "array") for d in kir.params)
        outs = tuple(Param(d.name, d.dtype, d.shape, "output") for d in kir.outputs)
        return Signature(kir.name, ins, outs, kir.symbols)

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.outputs)

    def __str__(self) -> str:
        ins = ", ".join(map(str, self.inputs))
        outs = ", ".join(map(str, self.outputs))
        return f"{self.name}({ins}) -> {outs if len(self.outputs) == 1 else f'({outs})'}"


def direct_binding(params: Sequence[Param]) -> tuple[tuple[str, int, str | None, int], ...] | None:
    """When every array dim is a constant or a bare symbol (the common case), binding is a
    lookup: (param, dim, symbol or None, constant) per dim. None when some dim needs
    solving (`n - 2`, `2*n`): then `bind_symbols` does the general work."""
    plan = []
    for p in params:
        if p.kind == "scalar":
            continue
        for i, d in enumerate(p.shape):
            a = Affine.of(d)
            if a.is_const:
                plan.append((p.name, i, None, a.const))
            elif a.const == 0 and len(a.terms) == 1 and a.terms[0][1] == 1:
                plan.append((p.name, i, a.terms[0][0], 0))
            else:
                return None
    return tuple(plan)


_NO_IDENTITY = frozenset({"min", "max", "argmin", "argmax"})


def identityless_reductions(kir: KernelIR) -> tuple[tuple[str, tuple], ...]:
    """The (kind, axes) of every min/max/argmin/argmax in `kir` (a Kernel finds them once,
    so a call only evaluates their extents)."""
    from hologram.ir import statement_exprs  # compiling imported it already; loading a bundle never asks

    found: dict[tuple[str, tuple], None] = {}
    for st in kir.body:
        for e in statement_exprs(st):
            for node in e.walk():
                if node.op == "REDUCE" and node.arg[0] in _NO_IDENTITY:
                    found[node.arg] = None
    return tuple(found)
