"""Kernel IR: a typed dataflow graph of array computations (tensor-expression form).

A kernel is a list of *statements*, each defining one named array:

- `Compute(target, vars, body)`: `target[vars...] = body` for every index in the target's
  shape. `body` is a scalar `Expr` over the index variables `vars` (one per dimension).
- `Accumulate(target, vars, extents, key, value)`: `target[key] += value` for every point
  of the domain `vars x extents`; the target starts at zero (a scatter-add; `resonance`).
- `OnlineMaxSum(target, max_target, axes, value)`: two 0-d arrays at once, `max_target =
  max(value)` and `target = sum(exp(value - max_target))` over the domain `axes`, in one
  pass over the data (a reassociation: only in kernels that opt in; passes/ir_online.py).
- `Scan(target, vars, var, kind, value)`: an inclusive prefix sum or product along one
  index variable: `target[.., var, ..]` is `kind` over `value` at every `var' <= var`, the
  other variables held (numpy's `cumsum`/`cumprod` along an axis). `value` is in the
  target's dtype; how precisely the prefixes accumulate is the lowering's business.

Scalar expressions are one frozen, hashable value class `Expr(op, dtype, srcs, arg)`, in
the style of tinygrad's UOp: passes match on `op` and rebuild with `attrs.evolve` or
`Expr(...)`. Every `Expr` carries its result dtype; shapes live on `TensorDecl`.

Ops (see `OPS`):
    CONST     arg = Python value (bool/int/float), already representable in dtype
    IDX       arg = index-variable name; dtype i64
    SYM       arg = shape-symbol name; dtype i64
    SCALAR    arg = scalar-parameter name
    LOAD      arg = tensor name; srcs = one i64 index expression per dimension
    <unary>   srcs = (x,)          CAST: srcs = (x,), dtype = target type
    <binary>  srcs = (a, b)        comparisons have dtype bool
    WHERE     srcs = (cond, a, b)  FMA: srcs = (a, b, c)
    REDUCE    arg = (op, ((var, extent: Affine), ...)); srcs = (body,)
              op in sum prod min max argmin argmax; argmin/argmax give the flat index
              (row-major over the listed vars) as i64
    <atlas>   ATLAS_CLASS MIRROR DEGREE NEIGHBOR IS_UNITY BOUND_MAP (see docs/atlas.md)

Semantics are numpy's (the oracle), with the DSL's defined answers where numpy is
platform-defined: integer FLOORDIV/MOD by zero give 0, integer overflow wraps, shift
amounts are masked to the bit width, float->int CAST saturates (NaN -> 0), MIN/MAX
propagate NaN.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import attrs

from hologram.core.errors import Site
from hologram.core.instructions import ir_ops
from hologram.core.types import Affine, DType, Shape, type_str

# The IR ops that lower to one instruction are the op table's (`lowers`); these are the
# IR's own, which the lowering expands (SIGN, ISNAN, CAST, comparisons, WHERE).
_DIRECT = ir_ops()
UNARY_OPS = frozenset({"SIGN", "ISNAN", "CAST"} | {op for op, spec in _DIRECT.items()
                                                   if spec.arity == 1 and spec.group != "atlas"})
COMPARISONS = frozenset({"CMPEQ", "CMPNE", "CMPLT", "CMPLE", "CMPGT", "CMPGE"})
BINARY_OPS = COMPARISONS | {op for op, spec in _DIRECT.items() if spec.arity == 2 and spec.group != "atlas"}
TERNARY_OPS = frozenset({"WHERE"} | {op for op, spec in _DIRECT.items() if spec.arity == 3 and spec.group != "atlas"})
ATLAS_OPS = frozenset(op for op, spec in _DIRECT.items() if spec.group == "atlas")
LEAF_OPS = frozenset({"CONST", "IDX", "SYM", "SCALAR"})
REDUCE_KINDS = ("sum", "prod", "min", "max", "argmin", "argmax")
OPS = UNARY_OPS | BINARY_OPS | TERNARY_OPS | ATLAS_OPS | LEAF_OPS | {"LOAD", "REDUCE"}


def _arg_key(arg: Any) -> Any:
    """How `arg` compares: a float by its exact value, so `-0.0` and `0.0` (equal to
    Python, different to IEEE: `x + -0.0` is not `x + 0.0`) are different constants,
    and NaN equals NaN (so an expression holding one still equals itself)."""
    return ("float", arg.hex()) if isinstance(arg, float) else arg


@attrs.frozen(cache_hash=True)
class Expr:
    op: str
    dtype: DType
    srcs: tuple["Expr", ...] = ()
    arg: Any = attrs.field(default=None, eq=_arg_key)
    # LOAD: the index of the access's source location in `KernelIR.sites` (the lowering puts
    # it on the checked instruction, so a run-time error names the document line). Not part
    # of equality: equal loads from two lines may be merged, and either line is a true answer.
    site: int | None = attrs.field(default=None, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"unknown IR op {self.op!r}")

    # -- constructors -----------------------------------------------------
    @staticmethod
    def const(value: bool | int | float, dtype: DType) -> "Expr":
        return Expr("CONST", dtype, (), value)

    @staticmethod
    def idx(var: str) -> "Expr":
        return Expr("IDX", DType.I64, (), var)

    @staticmethod
    def load(tensor: str, dtype: DType, index: tuple["Expr", ...], site: int | None = None) -> "Expr":
        return Expr("LOAD", dtype, tuple(index), tensor, site)

    # -- traversal --------------------------------------------------------
    def walk(self) -> Iterator["Expr"]:
        """Every node of the DAG once, children before parents."""
        seen: set[int] = set()
        stack: list[tuple[Expr, bool]] = [(self, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                yield node
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((s, False) for s in reversed(node.srcs))

    def replace(self, fn: Callable[["Expr"], "Expr | None"]) -> "Expr":
        """Bottom-up rewrite: `fn(node)` returns a replacement or None to keep the node."""
        memo: dict[Expr, Expr] = {}
        for node in self.walk():
            srcs = tuple(memo[s] for s in node.srcs)
            # by identity: comparing a rebuilt source with its original recurses down to the
            # first difference, as deep as the expression (a fused chain: past Python's stack)
            same = all(a is b for a, b in zip(srcs, node.srcs))
            rebuilt = node if same else attrs.evolve(node, srcs=srcs)
            new = fn(rebuilt)
            memo[node] = rebuilt if new is None else new
        return memo[self]

    def free_vars(self) -> frozenset[str]:
        """Index variables used and not bound by a REDUCE inside this expression."""
        bound: set[str] = set()
        used: set[str] = set()
        for n in self.walk():
            if n.op == "IDX":
                used.add(n.arg)
            elif n.op == "REDUCE":
                bound.update(v for v, _ in n.arg[1])
        # a reduce var is never reused as an outer var (the front end names them uniquely)
        return frozenset(used - bound)

    def loads(self) -> frozenset[str]:
        return frozenset(n.arg for n in self.walk() if n.op == "LOAD")

    def __str__(self) -> str:
        return format_expr(self)


def format_expr(e: Expr, names: dict[Expr, str] | None = None) -> str:
    """Text form of `e`; nodes in `names` print as their name (shared subexpressions)."""
    names = names or {}

    def fmt(n: Expr) -> str:
        if n in names:
            return names[n]
        op = n.op
        if op == "CONST":
            return f"{n.arg!r}:{n.dtype}"
        if op in ("IDX", "SYM"):
            return str(n.arg)
        if op == "SCALAR":
            return f"${n.arg}"
        if op == "LOAD":
            return f"{n.arg}[{', '.join(fmt(s) for s in n.srcs)}]"
        if op == "CAST":
            return f"{n.dtype}({fmt(n.srcs[0])})"
        if op == "REDUCE":
            kind, axes = n.arg
            dom = ", ".join(f"{v}<{ext}" for v, ext in axes)
            return f"{kind}[{dom}]({fmt(n.srcs[0])}):{n.dtype}"
        return f"{op.lower()}({', '.join(fmt(s) for s in n.srcs)}):{n.dtype}"

    return fmt(e)


def shared_subexpressions(*roots: Expr) -> list[Expr]:
    """Compound nodes reachable more than once from `roots`, children first. Printing
    these once keeps the text form linear in the size of the DAG (not of the tree)."""
    uses: dict[Expr, int] = {}
    order: list[Expr] = []
    for root in roots:
        for node in root.walk():
            if node not in uses:
                uses[node] = 0
                order.append(node)
            for s in node.srcs:
                uses[s] = uses.get(s, 0) + 1
    for root in roots:
        uses[root] = uses.get(root, 0) + 1
    return [n for n in order if uses[n] > 1 and not _is_simple(n)]


def _is_simple(n: Expr) -> bool:
    """Leaves, loads, and ops over only those: cheap enough to repeat in text."""
    flat = LEAF_OPS | {"LOAD"}
    return n.op in flat or all(s.op in flat for s in n.srcs) and n.op != "REDUCE"


def format_statement(st: "Statement") -> str:
    roots = statement_exprs(st)
    names: dict[Expr, str] = {}
    lets: list[str] = []
    for n in shared_subexpressions(*roots):
        text = format_expr(n, names)
        names[n] = f"%{len(names)}"
        lets.append(f"    where {names[n]} = {text}")
    if isinstance(st, Compute):
        lhs = f"{st.target}[{', '.join(st.vars)}]" if st.vars else st.target
        head = f"{lhs} = {format_expr(st.body, names)}"
    elif isinstance(st, OnlineMaxSum):
        dom = ", ".join(f"{v}<{e}" for v, e in st.axes)
        head = f"{st.max_target}, {st.target} = online_max_sum_exp[{dom}]({format_expr(st.value, names)})"
    elif isinstance(st, Scan):
        head = f"{st.target}[{', '.join(st.vars)}] = cum{st.kind}[{st.var}]({format_expr(st.value, names)})"
    else:
        dom = ", ".join(f"{v}<{e}" for v, e in zip(st.vars, st.extents))
        head = f"{st.target}[{format_expr(st.key, names)}] += {format_expr(st.value, names)}  for {dom}"
        head += "  (resonance)" if st.resonance else ""
    return "\n".join([head, *lets])


@attrs.frozen
class TensorDecl:
    """A named array (or scalar, when `shape == ()`) of a kernel.

    kind: 'input' (caller-supplied array), 'scalar' (caller-supplied scalar value),
    'output' (returned / written through `out=`), 'temp' (internal).
    """

    name: str
    dtype: DType
    shape: Shape
    kind: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name}: {type_str(self.dtype, self.shape)}"


@attrs.frozen
class Compute:
    """`target[vars] = body`. `site` is the index in `KernelIR.sites` of the document
    text the statement computes (the user's statement, or the expression a hidden
    temporary holds), so a message about the statement can quote the user's words."""

    target: str
    vars: tuple[str, ...]
    body: Expr
    site: int | None = attrs.field(default=None, eq=False, repr=False)

    def __str__(self) -> str:
        return format_statement(self)


@attrs.frozen
class Accumulate:
    """`target[key] += value` over the domain `vars x extents`; `key` is the flat element
    index, which the lowering checks (a per-dimension miss is already -1 in it). `resonance`
    marks the Atlas's 96-bin form, whose key is a class (ResAccum); `site` is the index in
    `KernelIR.sites` of the statement's target, for run-time errors."""

    target: str
    vars: tuple[str, ...]
    extents: tuple[Affine, ...]
    key: Expr
    value: Expr
    resonance: bool = False
    site: int | None = attrs.field(default=None, eq=False, repr=False)

    def __str__(self) -> str:
        return format_statement(self)


@attrs.frozen
class OnlineMaxSum:
    target: str
    max_target: str
    axes: tuple[tuple[str, Affine], ...]
    value: Expr

    def __str__(self) -> str:
        return format_statement(self)


SCAN_KINDS = ("sum", "prod")


@attrs.frozen
class Scan:
    """`target[vars] = kind(value at var' <= var)`: an inclusive scan along `var` (one of
    `vars`, which range over the target's shape, as a Compute's do). `site` as a
    Compute's."""

    target: str
    vars: tuple[str, ...]
    var: str
    kind: str
    value: Expr
    site: int | None = attrs.field(default=None, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.kind not in SCAN_KINDS or self.var not in self.vars:
            raise ValueError(f"bad scan: cum{self.kind} along {self.var!r} of {self.vars}")

    def __str__(self) -> str:
        return format_statement(self)


Statement = Compute | Accumulate | OnlineMaxSum | Scan


def defines(st: Statement) -> tuple[str, ...]:
    """The arrays `st` assigns."""
    return (st.max_target, st.target) if isinstance(st, OnlineMaxSum) else (st.target,)


def map_statement(st: Statement, fn: Callable[[Expr], Expr]) -> Statement:
    """`st` with `fn` applied to each of its expressions (`st` itself when none changes)."""
    if isinstance(st, Compute):
        body = fn(st.body)
        return st if body is st.body else attrs.evolve(st, body=body)
    if isinstance(st, (OnlineMaxSum, Scan)):
        value = fn(st.value)
        return st if value is st.value else attrs.evolve(st, value=value)
    key, value = fn(st.key), fn(st.value)
    return st if key is st.key and value is st.value else attrs.evolve(st, key=key, value=value)


def statement_exprs(st: Statement) -> tuple[Expr, ...]:
    """The expressions of `st`, in field order."""
    if isinstance(st, Compute):
        return (st.body,)
    if isinstance(st, (OnlineMaxSum, Scan)):
        return (st.value,)
    return (st.key, st.value)


@attrs.frozen
class KernelIR:
    """A whole kernel. `params` are the call signature in order (inputs and scalars);
    `outputs` in declaration order; `temps` internal arrays; `body` in execution order.
    `symbols` are the shape symbols, each bound at call time from some param's shape.
    `reassociate` is the kernel's opt-in to reordering float sums, products, minima and
    maxima (docs/dsl.md, "Opting in to reassociation"). `sites` are where its accesses
    are written (the text form leaves them out)."""

    name: str
    version: str
    params: tuple[TensorDecl, ...]
    outputs: tuple[TensorDecl, ...]
    temps: tuple[TensorDecl, ...]
    body: tuple[Statement, ...]
    symbols: tuple[str, ...] = ()
    reassociate: bool = False
    # source locations of accesses (`Expr.site`, `Accumulate.site` index it). Part of
    # equality, so a cache keyed by the IR never hands one file's locations to another.
    sites: tuple[Site, ...] = ()

    def decl(self, name: str) -> TensorDecl:
        for d in self.params + self.outputs + self.temps:
            if d.name == name:
                return d
        raise KeyError(name)

    def __str__(self) -> str:
        return format_kernel(self)


def format_kernel(k: KernelIR) -> str:
    lines = [f"kernel {k.name} {k.version}"]
    if k.symbols:
        lines.append(f"  symbols {', '.join(k.symbols)}")
    if k.reassociate:
        lines.append("  reassociate")
    for d in k.params + k.outputs + k.temps:
        lines.append(f"  {d}")
    for st in k.body:
        lines.extend(f"  {line}" for line in format_statement(st).splitlines())
    return "\n".join(lines)
