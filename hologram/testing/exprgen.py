"""Random well-typed DSL expressions and their numpy oracle.

The pieces `hologram.testing.cases` builds kernels from:

- `VOCABULARY`: every DSL operator and function, with the dtype kinds each argument
  accepts, how it is written, and where a weak literal may stand;
- `Node`: an expression tree; `render(node)` is its DSL text; `symbol(name)` is a shape
  symbol used as a value, a weak int like numpy's `len(x)`;
- `infer(name, args)`: the result dtype, asked of numpy itself (NEP 50, Python literals
  weak), or None when numpy or a DSL rule rejects the operands (`-` on bool, `&` on
  floats, integer `**` with a negative or large literal exponent, a literal that does not fit an
  integer operand, negative shift or Atlas literals);
- `Builder`: draws random trees of a target shape over a pool of leaves (inputs,
  temporaries, index-notation loads), repairing rejected operand combinations with
  explicit casts instead of generating them;
- `evaluate(node, env)`: the oracle's value, step by step in the dtypes numpy picks, with
  the accuracy contract of each step propagated (`hologram.testing.bounds`).

Shapes are symbolic while generating: dims are labels (`'n'`, `'m'`, `'1'`) and two
shapes combine by numpy broadcasting; in index notation every load is a function over
the statement's index variables.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Mapping, Protocol, Sequence

import attrs
import numpy as np
from hypothesis import strategies as st

from hologram.core import semantics as oracle
from hologram.core.errors import ExecutionError
from hologram.core.types import DType
from hologram.isa.opcodes import OPCODES
from hologram.testing import bounds, values
from hologram.testing.bounds import Val
from hologram.testing.scan_forms import render_scan, scan_forms

__all__ = ["OpSpec", "VOCABULARY", "VALUE_TESTS", "GROUPS", "GenConfig", "Node", "Builder", "Env", "Engine", "render", "literal",
           "symbol", "infer", "weak_result", "evaluate", "strong", "reachable", "contains", "reduce_dtype"]

Literal = bool | int | float
ALL_KINDS = "biuf"


# --------------------------------------------------------------------------- vocabulary
@attrs.frozen
class OpSpec:
    """One DSL operation for the generator.

    kinds     per argument, the dtype kinds it accepts (b bool, i signed, u unsigned, f float)
    template  how it is written; `{0}` etc. are the rendered arguments
    literals  argument positions that may be a weak Python literal
    group     a family name, to select parts of the vocabulary in a GenConfig
    """

    name: str
    kinds: tuple[str, ...]
    template: str
    literals: tuple[int, ...] = ()
    group: str = "arith"

    @property
    def arity(self) -> int:
        return len(self.kinds)


def _binary(sym: str, kinds: str, group: str) -> OpSpec:
    return OpSpec(sym, (kinds, kinds), f"({{0}} {sym} {{1}})", (0, 1), group)


def _call(name: str, *kinds: str, literals: tuple[int, ...] = (), group: str = "math") -> OpSpec:
    return OpSpec(name, kinds, f"{name}({', '.join(f'{{{i}}}' for i in range(len(kinds)))})", literals, group)


def _instruction_calls() -> list[OpSpec]:
    """The DSL functions that are one instruction, from the op table: each argument of the
    kinds the table gives, a weak literal allowed after the first; 'transcendental' those
    of an approximated (or a transcendental-group) instruction, else 'math'."""
    return [_call(f.name, *[f.kinds] * spec.arity, literals=tuple(range(1, spec.arity)),
                  group="transcendental" if spec.approx or spec.group == "transcendental" else "math")
            for spec in OPCODES.values() for f in spec.dsl]

VOCABULARY: dict[str, OpSpec] = {op.name: op for op in (
    *(_binary(s, k, "arith") for s, k in (("+", "biuf"), ("-", "iuf"), ("*", "biuf"), ("/", "iuf"),
                                         ("//", "iuf"), ("%", "iuf"), ("**", "iuf"))),
    OpSpec("neg", ("iuf",), "(-{0})", (), "arith"), OpSpec("pos", ("iuf",), "(+{0})", (), "arith"),
    *(_binary(s, "biuf", "compare") for s in ("==", "!=", "<", "<=", ">", ">=")),
    _binary("and", "b", "logic"), _binary("or", "b", "logic"), OpSpec("not", ("b",), "(not {0})", (), "logic"),
    *(_binary(s, "biu", "bitwise") for s in ("&", "|", "^")), OpSpec("~", ("biu",), "(~{0})", (), "bitwise"),
    _binary("<<", "iu", "bitwise"), _binary(">>", "iu", "bitwise"),
    *_instruction_calls(),
    _call("gelu", "f", group="transcendental"),
    *(_call(name, "iuf") for name in "round sign isnan relu".split()),
    _call("clip", "iuf", "iuf", "iuf", literals=(1, 2)), _call("fma", "f", "f", "f", literals=(1, 2)),
    _call("where", "b", "biuf", "biuf", literals=(1, 2), group="select"),
    *(_call(name, "iu", group="atlas") for name in ("atlas_class", "mirror", "degree", "is_unity")),
    _call("neighbor", "iu", "iu", literals=(1,), group="atlas"),
    _call("bound_map", "iu", "iu", "iu", literals=(1, 2), group="atlas"),
)}
# The value tests (a bool of each element's class): isnan, and every bool-valued
# instruction the op table gives a DSL function (hologram.testing.value_test_cases)
VALUE_TESTS = ("isnan", *(f.name for spec in OPCODES.values() if spec.result == "bool" for f in spec.dsl))
REDUCTIONS = oracle.REDUCTIONS
SCAN_KINDS = tuple(oracle.SCANS.values())
ATLAS_OPS = frozenset(n for n, op in VOCABULARY.items() if op.group == "atlas")
GROUPS = frozenset(op.group for op in VOCABULARY.values())

# Literals the generator writes, with their DSL spelling. Constants are weak like literals.
INT_LITERALS = (0, 1, 2, 3, 5, 7, 8, 31, 64, 100, 127, 255, 1000, -1, -2, -128)
FLOAT_LITERALS = (("0.5", 0.5), ("2.0", 2.0), ("1.5", 1.5), ("0.1", 0.1), ("1e-3", 1e-3), ("100.0", 100.0),
                  ("1e10", 1e10), ("-0.0", -0.0), ("pi", math.pi), ("e", math.e), ("inf", math.inf),
                  ("nan", math.nan), ("-1.5", -1.5))


@attrs.frozen
class GenConfig:
    """What generated kernels may contain.

    dtypes      input dtypes (DSL names)
    ops         operation names from VOCABULARY the expressions may use
    reductions  reduction kinds (empty: none)
    scans       scan kinds, "sum" (cumsum) and "prod" (cumprod) (empty: none)
    max_depth   expression depth
    max_temps   temporaries per kernel before the outputs
    max_n, max_m, max_k   largest runtime sizes of the shape symbols (n may be 0)
    literals, casts       whether weak literals and explicit casts appear
    """

    dtypes: tuple[str, ...] = tuple(d.value for d in DType)
    ops: frozenset[str] = frozenset(VOCABULARY)
    reductions: tuple[str, ...] = REDUCTIONS
    scans: tuple[str, ...] = SCAN_KINDS
    max_depth: int = 3
    max_temps: int = 2
    max_n: int = 6
    max_m: int = 3
    max_k: int = 3
    literals: bool = True
    casts: bool = True

    def without(self, *groups: str) -> "GenConfig":
        """The same config without the operations of these groups (e.g. 'transcendental')."""
        return attrs.evolve(self, ops=frozenset(n for n in self.ops if VOCABULARY[n].group not in groups))

    def only(self, *groups: str) -> "GenConfig":
        return attrs.evolve(self, ops=frozenset(n for n in self.ops if VOCABULARY[n].group in groups))


# ------------------------------------------------------------------------------ nodes
@attrs.frozen(eq=False)
class Node:
    """An expression tree node.

    op      'input' | 'lit' | 'sym' | 'load' | 'cast' | 'reduce' | 'ireduce' | 'transpose' (of an
            input: `x.T`) | 'matmul' (`a @ b`) | 'scan' (`cumsum(x, axis=k)`) | a VOCABULARY name
    dtype   numpy dtype of the value (None for a weak literal; for a weak shape-symbol
            value its kind: int64, or float64 for `n / m`)
    shape   symbolic shape: dims as labels ('n', 'm', '1'); index-notation nodes use the
            index variables of their domain
    attr    input name | (literal value, spelling) | cast dtype | reduce (kind, axis,
            keepdims) | ireduce (kind, vars) | load (name, index text, index function) |
            sym (symbol name) | scan (kind, axis or None)
    weak    a shape-symbol value or an operator on weak values only (`n`, `n // 2`,
            `1 / n`): a Python scalar at run time, as `len(x)` is in numpy (NEP 50), so
            it takes a typed operand's dtype; evaluated in int64/float64 as the DSL does
    text    how a shape-symbol value is spelled, when not by its name: `len(x)`,
            `x.shape[-1]`; a cast's or scan's spelling: "np" (`np.f(x)`), "astype"/"method" (`x.f()`)
    """

    op: str
    dtype: np.dtype | None
    shape: tuple[str, ...] = ()
    args: tuple["Node", ...] = ()
    attr: Any = None
    weak: bool = False
    text: str | None = None

    @property
    def is_literal(self) -> bool:
        return self.op == "lit"


def symbol(name: str, text: str | None = None) -> Node:
    """A shape symbol used as a value: a weak int (numpy's `len(x)`), spelled `text`
    (`len(x)`, `x.shape[0]`) or by its name."""
    return Node("sym", np.dtype(np.int64), (), (), name, weak=True, text=text)


def render(node: Node) -> str:
    """The DSL text of an expression (fully parenthesized, so precedence never matters)."""
    if node.op == "input":
        return node.attr
    if node.op == "lit":
        return node.attr[1]
    if node.op == "sym":
        return node.text or node.attr
    if node.op == "load":
        return node.attr[1]
    if node.op == "cast":
        if node.text == "np":
            return f"np.{np.dtype(node.attr).name}({render(node.args[0])})"
        if node.text == "astype":
            return f"{render(node.args[0])}.astype(np.{np.dtype(node.attr).name})"
        return f"{DType.from_numpy(node.attr)}({render(node.args[0])})"
    if node.op == "reduce":
        kind, axis, keepdims = node.attr
        extra = "" if axis is None else f", axis={axis}" + (", keepdims=true" if keepdims else "")
        return f"{kind}({render(node.args[0])}{extra})"
    if node.op == "ireduce":
        kind, names = node.attr
        return f"{kind}({render(node.args[0])}, {node.text or ', '.join(names)})"  # text: `d in range(1, 4)`
    if node.op == "transpose":
        return f"{render(node.args[0])}.T"
    if node.op == "scan":
        return render_scan(*node.attr, render(node.args[0]), node.text)
    if node.op == "matmul":
        return f"({render(node.args[0])} @ {render(node.args[1])})"
    return VOCABULARY[node.op].template.format(*(render(a) for a in node.args))


def _literal_text(value: Literal) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"({value})" if value < 0 else str(value)
    for text, v in FLOAT_LITERALS:
        if v == value or (math.isnan(v) and math.isnan(value)):
            if math.copysign(1, v) == math.copysign(1, value):
                return f"({text})" if text.startswith("-") else text
    return repr(value)


def literal(value: Literal) -> Node:
    return Node("lit", None, (), (), (value, _literal_text(value)))


# ---------------------------------------------------------------------------- typing
@functools.lru_cache(maxsize=65536)
def _infer_cached(name: str, sig: tuple) -> np.dtype | None:
    # literals travel as (type, value): 0, False and 0.0 are equal keys otherwise
    args = [np.zeros((), d) if isinstance(d, np.dtype) else d[1] for d in sig]
    try:
        with np.errstate(all="ignore"):
            return np.asarray(oracle.ORACLE[name](*args)).dtype
    except (TypeError, ValueError, OverflowError, ExecutionError):
        return None


def _fits(value: Literal, dt: np.dtype) -> bool:
    """A weak literal combined with an operand of dtype `dt` is accepted (NEP 50): an
    integer literal must fit an integer operand's range."""
    if dt.kind in "iu" and isinstance(value, int) and not isinstance(value, bool):
        info = np.iinfo(dt)
        return info.min <= value <= info.max
    return True


def _weak_value(node: Node) -> tuple[type, Literal]:
    # a weak shape-symbol value goes to numpy as a Python scalar of its kind, as len(x)
    return (int, 1) if node.dtype.kind in "iu" else (float, 1.0)


def infer(name: str, args: Sequence[Node]) -> np.dtype | None:
    """numpy's result dtype for DSL operation `name` on these operands, or None when numpy
    or the DSL rejects the combination."""
    spec = VOCABULARY[name]
    strong = [a.dtype for a in args if not (a.is_literal or a.weak)]
    if all(a.is_literal for a in args):
        return None  # an all-literal operation would be constant-folded with Python typing
    for a, kinds in zip(args, spec.kinds):
        if a.is_literal:
            v = a.attr[0]
            kind = "b" if isinstance(v, bool) else "i" if isinstance(v, int) else "f"
            if kind not in kinds and not (kind == "i" and "u" in kinds):
                return None
            if not all(_fits(v, d) for d in strong):
                return None
        elif a.dtype.kind not in kinds:
            return None
    if name in ("<<", ">>") + tuple(ATLAS_OPS) and any(a.is_literal and a.attr[0] < 0 for a in args):
        return None
    if not strong:  # weak values alone: numpy on the Python scalars len() would give
        sig = tuple((type(a.attr[0]), a.attr[0]) if a.is_literal else a.dtype for a in args)
    else:
        sig = tuple((type(a.attr[0]), a.attr[0]) if a.is_literal else _weak_value(a) if a.weak else a.dtype
                    for a in args)
    dt = _infer_cached(name, sig)
    if name in ("**", "power") and dt is not None and dt.kind in "iu":
        exp = args[1]  # a literal exponent of an integer power must be >= 0 (small: it must not overflow wildly)
        if exp.is_literal and not (type(exp.attr[0]) is int and 0 <= exp.attr[0] <= 4):
            return None
    return dt


# operators whose result on weak values alone stays weak (Python's int or float, as
# `len(x) // 2`); comparisons give a bool and functions a typed result, as in the DSL.
# `**` stays weak only when exact (an integer power): a float one carries a contract.
WEAK_OPERATORS = frozenset(n for n, op in VOCABULARY.items() if op.group in ("arith", "bitwise"))


def weak_result(name: str, args: Sequence[Node], dt: np.dtype) -> bool:
    """Whether `name` on `args` (result dtype `dt`) is a weak shape-symbol value."""
    if not any(a.weak for a in args) or any(not (a.weak or a.is_literal) for a in args):
        return False
    return name in WEAK_OPERATORS and dt.kind in "if" and (name != "**" or dt.kind == "i")


# ------------------------------------------------------------------------ generation
def _broadcast(*shapes: tuple[str, ...]) -> tuple[str, ...] | None:
    rank = max((len(s) for s in shapes), default=0)
    out: list[str] = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0} - {"1"}
        if len(dims) > 1:
            return None
        out.append(dims.pop() if dims else "1")
    return tuple(out)


def _fits_in(shape: tuple[str, ...], target: tuple[str, ...]) -> bool:
    return len(shape) <= len(target) and _broadcast(shape, target) == target


class Builder:
    """Draws expression trees over a pool of leaves (inputs, temporaries, loads)."""

    def __init__(self, draw: Callable, cfg: GenConfig, leaves: list[Node], index_mode: bool = False):
        self.draw, self.cfg, self.leaves, self.index_mode = draw, cfg, leaves, index_mode
        self.ops = sorted(cfg.ops)

    def expr(self, shape: tuple[str, ...], depth: int) -> Node:
        draw = self.draw
        if depth <= 0 or draw(st.integers(0, 3)) == 0:
            return self.leaf(shape)
        choice = ("op",) * 6 + ("cast", "reduce", "scan")
        choice = choice[draw(st.integers(0, len(choice) - 1))]
        if choice == "cast" and self.cfg.casts:
            child, dt = self.expr(shape, depth - 1), self._dtype(ALL_KINDS)
            # the DSL's `f32(x)`, or numpy's `np.float32(x)` / `x.astype(np.float32)` (of a name)
            style = self.draw(st.sampled_from(("dsl", "np", "astype") if child.op == "input" else ("dsl", "np")))
            return Node("cast", dt, child.shape, (child,), dt, text=style)
        if choice == "reduce" and self.cfg.reductions and not self.index_mode:
            return self.reduction(shape, depth)
        if choice == "scan" and self.cfg.scans and not self.index_mode:
            return self.scan(shape, depth)
        if not self.ops:
            return self.leaf(shape)
        return self.operation(draw(st.sampled_from(self.ops)), shape, depth)

    def _dtype(self, kinds: str) -> np.dtype:
        picks = [d for d in self.cfg.dtypes if values.as_dtype(d).kind in kinds] or \
                [d.value for d in DType if d.np.kind in kinds]
        return values.as_dtype(self.draw(st.sampled_from(picks)))

    def leaf(self, shape: tuple[str, ...]) -> Node:
        fits = [n for n in self.leaves if _fits_in(n.shape, shape)]
        if fits:
            return self.draw(st.sampled_from(fits))
        # nothing broadcastable to `shape`: reduce some leaf to a scalar (targets are
        # chosen among the leaves' shapes, so this needs reductions to be enabled)
        kinds = self.cfg.reductions or ("sum",)
        return self._reduce(self.draw(st.sampled_from(kinds)), self.draw(st.sampled_from(self.leaves)), None, False)

    def literal_for(self, partner: np.dtype) -> Node:
        if partner.kind == "b" and self.draw(st.booleans()):
            value = self.draw(st.booleans())
            python = self.draw(st.booleans())  # `True` as well as `true`: both are the DSL's
            return Node("lit", None, (), (), (value, str(value) if python else _literal_text(value)))
        if partner.kind == "f" or self.draw(st.integers(0, 3)) == 0:
            return literal(self.draw(st.sampled_from(FLOAT_LITERALS))[1])
        info = np.iinfo(partner) if partner.kind in "iu" else np.iinfo(np.int64)
        return literal(self.draw(st.sampled_from([v for v in INT_LITERALS if info.min <= v <= info.max])))

    def operation(self, name: str, shape: tuple[str, ...], depth: int) -> Node:
        spec = VOCABULARY[name]
        args: list[Node] = [self.expr(shape, depth - 1)]
        for pos in range(1, spec.arity):
            if self.cfg.literals and pos in spec.literals and self.draw(st.integers(0, 2)) == 0:
                args.append(self.literal_for(args[0].dtype))
            else:
                args.append(self.expr(shape, depth - 1))
        if 0 in spec.literals and args[1].is_literal and self.draw(st.booleans()):
            args.reverse()  # the literal on the left: `2 - x`, `1 << x`
        return self.combine(name, args)

    def combine(self, name: str, args: Sequence[Node]) -> Node:
        """`name` applied to `args`, with operands cast where numpy or the DSL rejects
        them as they are (the first operand alone if even that fails)."""
        args = list(args)
        if (name in ("**", "power") and not args[0].is_literal and args[0].dtype.kind != "f"
                and (args[1].is_literal or self.draw(st.booleans()))):
            args[1] = literal(self.draw(st.integers(0, 3)))  # else an array exponent, negative ones included
        dt = infer(name, args)
        if dt is None:
            args = self._repair(VOCABULARY[name], args)
            dt = infer(name, args)
        if dt is None:
            return next(a for a in args if not a.is_literal)
        return Node(name, dt, _broadcast(*(a.shape for a in args if not a.is_literal)), tuple(args),
                    weak=weak_result(name, args, dt))

    def require(self, node: Node, leaf: Node) -> Node:
        """`node`, combined with `leaf` by a drawn binary operation unless it already uses it
        (index notation needs every target and reduced variable on the right-hand side)."""
        if contains(node, leaf):
            return node
        return self.combine(self.draw(st.sampled_from(("+", "*", "maximum", "minimum"))), [node, leaf])

    def _repair(self, spec: OpSpec, args: list[Node]) -> list[Node]:
        """Cast operands to one dtype the operation accepts; replace misfit literals."""
        kinds = spec.kinds[-1] if spec.name != "where" else spec.kinds[1]
        target = self._dtype(kinds)
        fixed = []
        for pos, (a, k) in enumerate(zip(args, spec.kinds)):
            want = target if (spec.name != "where" or pos > 0) else np.dtype(bool)
            if a.is_literal:
                safe = {"b": True, "i": 1, "u": 1, "f": 0.5}[want.kind]
                fixed.append(a if _fits(a.attr[0], want) and _literal_kind_ok(a, want) else literal(safe))
            elif a.dtype != want:
                fixed.append(Node("cast", want, a.shape, (a,), want))
            else:
                fixed.append(a)
        if spec.name in ("**", "power") and target.kind != "f" and (fixed[0].is_literal or fixed[1].is_literal):
            fixed = [next(a for a in fixed if not a.is_literal), literal(self.draw(st.integers(0, 3)))]
        if spec.name in ("<<", ">>") + tuple(ATLAS_OPS):  # literals there must be non-negative ints
            fixed = [literal(abs(int(a.attr[0])) % 8) if a.is_literal else a for a in fixed]
        return fixed

    def reduction(self, shape: tuple[str, ...], depth: int) -> Node:
        kind = self.draw(st.sampled_from(self.cfg.reductions))
        wider = [s for s in reachable([l.shape for l in self.leaves]) if s]
        child = self.expr(self.draw(st.sampled_from(wider or [shape])), depth - 1)
        rank = len(child.shape)
        options: list[tuple[int | None, bool]] = [(None, False)]
        for axis in range(-rank, rank):
            for keep in (False, True):
                out = _reduced_shape(child.shape, axis, keep)
                if _fits_in(out, shape):
                    options.append((axis, keep))
        axis, keep = self.draw(st.sampled_from(options))
        return self._reduce(kind, child, axis, keep)

    def scan(self, shape: tuple[str, ...], depth: int) -> Node:
        """cumsum or cumprod of an expression, in a form that fits `shape` (scan_forms);
        the expression itself when none does (a scalar)."""
        child = self.expr(shape, depth - 1)
        forms = scan_forms(child.shape, shape, _fits_in)
        if not forms:
            return child
        (axis, out), kind = self.draw(st.sampled_from(forms)), self.draw(st.sampled_from(self.cfg.scans))
        style = self.draw(st.sampled_from(("dsl", "np", "method") if child.op == "input" else ("dsl", "np")))
        return Node("scan", reduce_dtype(kind, child.dtype), out, (child,), (kind, axis), text=style)

    def _reduce(self, kind: str, child: Node, axis: int | None, keepdims: bool) -> Node:
        dt = reduce_dtype(kind, child.dtype)
        return Node("reduce", dt, _reduced_shape(child.shape, axis, keepdims), (child,), (kind, axis, keepdims))


def contains(node: Node, part: Node) -> bool:
    """Whether `part` occurs in `node`: the same node, or the same input or load."""
    if node is part or (node.op == part.op == "input" and node.attr == part.attr):
        return True
    if node.op == part.op == "load" and node.attr[1] == part.attr[1]:
        return True
    return any(contains(a, part) for a in node.args)


def _literal_kind_ok(lit: Node, dt: np.dtype) -> bool:
    """A literal of a kind that stays meaningful next to an operand of dtype `dt`."""
    v = lit.attr[0]
    if dt.kind == "b":
        return isinstance(v, bool)
    if dt.kind in "iu":
        return isinstance(v, int) and not isinstance(v, bool)
    return not isinstance(v, bool)


def _reduced_shape(shape: tuple[str, ...], axis: int | None, keepdims: bool) -> tuple[str, ...]:
    if axis is None:
        return ("1",) * len(shape) if keepdims else ()
    a = axis % len(shape)
    return shape[:a] + (("1",) if keepdims else ()) + shape[a + 1:]


@functools.lru_cache(maxsize=None)
def reduce_dtype(kind: str, dt: np.dtype) -> np.dtype:
    """numpy's result dtype of reduction `kind` over an array of dtype `dt`."""
    return oracle.reduce(kind, np.zeros(1, dt)).dtype


def reachable(shapes: Sequence[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Shapes an expression over leaves of these shapes can have: each leaf's, pairwise
    broadcasts, and the scalar shape."""
    out = {()} | set(shapes) | {_broadcast(a, b) for a in shapes for b in shapes}
    return sorted(s for s in out if s is not None)


# ---------------------------------------------------------------------- evaluation
class Engine(Protocol):
    """How `evaluate` computes each step. The default engine is `hologram.testing.bounds`
    (the oracle with its contract); a test may substitute another to replay a case, e.g.
    a simulated backend that perturbs every step within the contract."""

    def apply(self, name: str, args: Sequence["Val | Literal"], *, dtype: Any = None) -> Val: ...

    def reduce(self, kind: str, a: Val, axis: Any = None, keepdims: bool = False) -> Val: ...

    def scan(self, kind: str, a: Val, axis: int | None = None) -> Val: ...

    def resonance(self, classes: Val, values: "Val | Literal") -> Val: ...

    def scatter_add(self, shape: tuple[int, ...], dtype: Any, index: tuple[Val, ...], values: "Val | Literal") -> Val:
        ...


class Env:
    """Concrete values for evaluation: inputs and temporaries by name (as Vals), the
    shape-symbol sizes, for index notation the index-variable grids, and the engine."""

    def __init__(self, names: Mapping[str, Val], sizes: Mapping[str, int],
                 grids: Mapping[str, np.ndarray] | None = None, engine: Engine = bounds):
        self.names, self.sizes, self.grids, self.engine = dict(names), dict(sizes), dict(grids or {}), engine


def evaluate(node: Node, env: Env) -> "Val | Literal":
    """The oracle's value of `node` with its contract (a weak literal or shape-symbol value
    stays a Python scalar)."""
    if node.op == "lit":
        return node.attr[0]
    if node.op == "sym":
        return env.sizes[node.attr]
    if node.op == "input":
        return env.names[node.attr]
    if node.op == "load":
        return Val.exact(node.attr[2](env))
    args = [evaluate(a, env) for a in node.args]
    if node.op == "cast":
        return env.engine.apply("cast", args, dtype=node.attr)
    if node.op == "reduce":
        kind, axis, keepdims = node.attr
        return env.engine.reduce(kind, strong(args[0]), axis, keepdims)
    if node.op == "scan":
        kind, axis = node.attr
        return env.engine.scan(kind, strong(args[0]), axis)
    if node.op == "transpose":
        v = strong(args[0])
        return Val(*(np.transpose(f) for f in (v.v, v.err, v.ulps, v.fuzzy)))
    if node.op == "matmul":
        return _matmul(strong(args[0]), strong(args[1]), node.dtype, env.engine)
    if node.op == "ireduce":
        kind, names = node.attr
        val = strong(args[0])
        full = len(env.grids)
        axes = tuple(list(env.grids).index(n) - full for n in names)
        val = val.broadcast_to(np.broadcast_shapes(val.shape, *(g.shape for g in env.grids.values())))
        return env.engine.reduce(kind, val, axes, keepdims=True)
    if node.weak:  # Python's arithmetic on len() results, in int64 (wrapping) / float64 as the DSL
        return env.engine.apply(node.op, [strong(a) for a in args]).v.item()
    try:
        return env.engine.apply(node.op, args)
    except OverflowError:
        return env.engine.apply(node.op, _fitted(node, args))


def matmul(a: Node, b: Node) -> Node | None:
    """`a @ b` when the shapes chain, as numpy's matmul takes them: 1-D and 2-D operands,
    and leading batch dimensions that broadcast (`(2, m, n) @ (n, m)`), else None."""
    sa, sb = a.shape, b.shape
    if not sa or not sb or sa[-1] != (sb[-2] if len(sb) >= 2 else sb[-1]):
        return None
    batch = _broadcast(sa[:-2], sb[:-2])
    if batch is None:
        return None
    shape = batch + (sa[-2:-1] if len(sa) >= 2 else ()) + (sb[-1:] if len(sb) >= 2 else ())
    return Node("matmul", np.result_type(a.dtype, b.dtype), shape, (a, b))


def _matmul(a: Val, b: Val, dtype: np.dtype, engine: "Engine") -> Val:
    """numpy's matmul with the contract of its sums: the products broadcast over (batches,
    rows, k, columns), summed over k, cast to the operands' promoted dtype; a 1-D operand's
    dimension is dropped from the result."""
    av = a if a.v.ndim >= 2 else a.reshape((1,) + a.shape)
    bv = b if b.v.ndim >= 2 else b.reshape(b.shape + (1,))
    batch = np.broadcast_shapes(av.shape[:-2], bv.shape[:-2])
    (m, k), n = av.shape[-2:], bv.shape[-1]
    full = batch + (m, k, n)
    factors = [av.reshape(av.shape + (1,)).broadcast_to(full),
               bv.reshape(bv.shape[:-2] + (1,) + bv.shape[-2:]).broadcast_to(full)]
    terms = engine.apply("*", factors)
    total = engine.reduce("sum", terms, len(batch) + 1, False)
    if terms.dtype.kind == "f":
        # A product of finite factors that overflows the type: a fused multiply-add (the
        # tiled f32 contraction's, as BLAS's) keeps it exact, so `inf + -inf` need not
        # happen and the sum's inf or NaN is not pinned down (docs/decisions.md)
        with np.errstate(invalid="ignore"):
            kept = np.isinf(terms.v) & np.isfinite(factors[0].v) & np.isfinite(factors[1].v)
        total = Val(total.v, total.err, total.ulps, total.fuzzy | np.any(kept, axis=len(batch) + 1))
    if total.dtype != dtype:
        total = engine.apply("cast", [total], dtype=dtype)
    shape = batch + ((m,) if a.v.ndim >= 2 else ()) + ((n,) if b.v.ndim >= 2 else ())
    return total.reshape(shape)


def strong(x: "Val | Literal") -> Val:
    """A value as the array numpy makes of it: a Python scalar (a weak literal or
    shape-symbol value) becomes a 0-d int64, float64 or bool array."""
    return x if isinstance(x, Val) else Val.exact(np.asarray(x))


def _fitted(node: Node, args: Sequence["Val | Literal"]) -> list["Val | Literal"]:
    """numpy raises OverflowError for a Python int that does not fit an integer operand's
    type (`x_i8 + 300`); a weak shape-symbol value there is defined by the DSL (docs/dsl.md,
    decision 21): compared exactly, else converted to the operation's type as a cast does
    (an integer wraps). Literals that do not fit are never generated."""
    if node.op in ("==", "!=", "<", "<=", ">", ">="):
        return [strong(a) if type(a) is int else a for a in args]
    if node.dtype.kind in "iu":
        return [int(np.asarray(a).astype(node.dtype)) if type(a) is int else a for a in args]
    return [Val.exact(np.asarray(a).astype(node.dtype)) if type(a) is int else a for a in args]


