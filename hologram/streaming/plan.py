"""How a kernel streams along one shape symbol: its IR read, sorted into passes over the data.

`streaming.kernels.plan(kir, symbol)` takes a kernel's IR as the front end built it and the symbol `S` to
stream along (the leading dimension of its big inputs) and returns a `Plan`: the
kernels to run, in order, each a `KernelIR` made from the kernel's own statements
(hologram.streaming.kernels builds them):

- a **pass** kernel runs once per chunk of rows: the kernel's *row* statements (those
  whose target has `S` as its first dimension; each row of the output reads only the same
  row of every streamed array) and, for each full reduction over `S` computed in this
  pass, the reduction over the chunk: its *partial* state (`Reduction`), which the
  runtime combines across chunks (hologram.streaming.reduce);
- a **small** kernel runs once between passes: the statements over the reductions'
  results (softmax's nothing, `mean`'s division by `n`, logsumexp's `m + log(s)`).

A reduction nested in an expression (`y = x - sum(x)`) is first hoisted into a
temporary of its own. Passes are as few as the dependencies allow: a reduction needs
every small value it reads computed by an earlier pass, a row statement likewise; the
sum of `exp(v - m)` after `m = max(v)` (softmax's and logsumexp's normalizer) is
computed in `m`'s pass, as the online max-and-sum (`online`). So `sum`, `mean`, `min`,
`max`, `argmax` and logsumexp read the data once, softmax twice, a variance twice (the
mean, then the squared deviations).

A scan along `S` (`cumsum(x)`) is a row statement with a carry: each chunk's scan
starts from the combination of every earlier chunk's values (`Reduction` of kind
`cumsum`/`cumprod`), so it streams in one pass, and any pass that needs its rows
computes them again with a carry of its own.

What stops a kernel is a `StreamError` naming the statement, with the document line of
the access when the IR knows it: a stencil (`x[i + 1]`), an array whose size depends on
`S` other than as its first dimension, a scatter into a streamed array, a reduction
over `S` whose value depends on the row, a small statement reading one element of a
streamed array.
"""

from __future__ import annotations

from typing import Iterator

import attrs

from hologram.core.dims import is_derived, parse_derived
from hologram.core.errors import Site, StreamError
from hologram.core.names import fresh_name
from hologram.core.types import Affine
from hologram.ir import (Accumulate, Compute, Expr, KernelIR, Scan, Statement, TensorDecl, defines, format_expr,
                         format_statement, statement_exprs)

ROW, REDUCE, SCATTER, SMALL = "row", "reduce", "scatter", "small"
KINDS = ("sum", "prod", "min", "max", "argmin", "argmax", "online", "scatter")


def base_symbols(a: Affine) -> set[str]:
    """The bound (identifier) symbols `a` depends on, through derived symbols too."""
    out: set[str] = set()
    stack = list(a.symbols)
    while stack:
        s = stack.pop()
        if is_derived(s):
            stack.extend(parse_derived(s).symbols)
        else:
            out.add(s)
    return out


@attrs.frozen
class Reduction:
    """A full reduction over the streamed dimension: `target` (a small tensor of
    `dtype`) is `kind` over every row. The pass kernel writes one chunk's partial state
    into its outputs `partials`: sum and prod of floats as f64, argmin/argmax as (index
    within the chunk, value), online as (the chunk's max, its sum of exp(v - max) in
    f64), scatter as the chunk's bins. `scale` are the reduction's dimensions after the
    streamed one (argmin and argmax add their product times the chunk's first row to
    the chunk's index); `companion` is online's max, defined with the sum."""

    kind: str
    target: str
    dtype: object  # DType
    partials: tuple[str, ...]
    scale: tuple[Affine, ...] = ()
    companion: str | None = None
    chained: bool = False


@attrs.frozen(repr=False)
class Step:
    """One kernel of a plan. `kind` is "pass" (run per chunk) or "small" (run once after
    pass `index`, 0: before the first). `params` maps each of `kir`'s parameters, in
    order, to what feeds it: (name, role, source) with role `stream` (the original
    input `source`, one chunk of rows), `input`/`scalar` (the original argument
    `source`), `small` (a small tensor computed before), `offset` (the chunk's first
    row), `symbol` (the value of the shape symbol `source` for the whole call), `carry`
    (the carry into the chunk of the scan whose target is `source`). `outputs` maps its
    outputs to (name, role, target): `row` (the original output, a chunk of rows),
    `partial` (a reduction's state, or a scan's total over the chunk) or `small` (a
    small tensor)."""

    kind: str
    index: int
    kir: KernelIR
    params: tuple[tuple[str, str, str], ...]
    outputs: tuple[tuple[str, str, str], ...]
    reductions: tuple[Reduction, ...] = ()

    def __repr__(self) -> str:
        count = len(self.kir.body)
        return f"<Step {self.kind} {self.index} ({self.kir.name}): {count} statement{'' if count == 1 else 's'}>"

    def __str__(self) -> str:
        """The step as a few lines: when it runs, what it reads that an earlier step
        computed, its statements (the IR's text), what it gives."""
        rows = [target for _, role, target in self.outputs if role == "row"]
        if self.kind == "pass":
            head = f"pass {self.index}, per chunk of rows" + (f", writing {', '.join(rows)}" if rows else "")
        else:
            head = f"once, {'before the first pass' if self.index == 0 else f'after pass {self.index}'}"
        lines = [f"{head}:"]
        earlier = [source for _, role, source in self.params if role == "small"]
        if earlier:
            lines.append(f"  reads {', '.join(earlier)} (computed before)")
        lines += [f"    {line}" for st in self.kir.body for line in format_statement(st).splitlines()]
        carried = [r for r in self.reductions if r.kind in ("cumsum", "cumprod")]
        reduced = [r for r in self.reductions if r not in carried]
        if reduced:
            lines.append(f"  reduces across chunks: {', '.join(map(_reduction_words, reduced))}")
        if carried:
            lines.append(f"  carries across chunks: {', '.join(map(_reduction_words, carried))}")
        small = [target for _, role, target in self.outputs if role == "small"]
        if small:
            lines.append(f"  gives {', '.join(small)}")
        return "\n".join(lines)


def _reduction_words(r: Reduction) -> str:
    if r.kind == "online":
        return f"{r.companion}, {r.target} (online max-and-sum)"
    return f"{r.target} ({r.kind})"


@attrs.frozen(repr=False)
class Plan:
    """A kernel streamed along `symbol`: its `steps` in order; `streamed` are the
    original inputs read a chunk of rows at a time, `row_outputs` the outputs written a
    chunk at a time, `small` every small tensor the steps compute (outputs among them
    are returned). `direct`: the one pass is the kernel itself, unchanged. `passes` is
    how many times the data is read."""

    symbol: str
    steps: tuple[Step, ...]
    streamed: tuple[str, ...]
    row_outputs: tuple[str, ...]
    direct: bool = False

    @property
    def passes(self) -> int:
        return sum(1 for s in self.steps if s.kind == "pass")

    def _summary(self) -> tuple[str, str]:
        passes = f"{self.passes} pass{'' if self.passes == 1 else 'es'}"
        rows = f"{', '.join(self.row_outputs)} a chunk at a time" if self.row_outputs else ""
        return passes, rows

    def __repr__(self) -> str:
        passes, rows = self._summary()
        streams = f"; streams {', '.join(self.streamed)}" if self.streamed else ""
        return (f"<Plan along {self.symbol}: {passes}, {len(self.steps)} step{'' if len(self.steps) == 1 else 's'}"
                f"{streams}{f'; writes {rows}' if rows else ''}>")

    def __str__(self) -> str:
        """The plan as text: what streams, then each step (`Step.__str__`)."""
        passes, rows = self._summary()
        first = self.steps[0].kir.name if self.steps else "the kernel"
        name = first if self.direct or not self.steps else first.rsplit("_", 1)[0]  # k_pass1 -> k
        head = f"{name} streamed along {self.symbol}: {passes} over {', '.join(self.streamed) or 'nothing'}"
        if rows:
            head += f"; {rows.replace(' a chunk', ' written a chunk')}"
        if self.direct:
            head += " (the kernel itself, unchanged)"
        return "\n".join([head, *map(str, self.steps)])


@attrs.frozen
class Info:
    """A statement's place in a plan: its role (row, reduce, scatter, small), the
    variable ranging over the streamed dimension (`svar`), whether that variable's
    value is used beyond indexing rows (`offset`: the pass kernel adds the chunk's
    first row), and whether a row statement is a scan along it (`scan`: each chunk's
    scan continues from the rows before it, a carry)."""

    role: str
    svar: str | None = None
    offset: bool = False
    scan: bool = False


class Names:
    """Fresh names, never clashing with the kernel's tensors, variables or symbols."""

    def __init__(self, kir: KernelIR):
        self.taken = {d.name for d in (*kir.params, *kir.outputs, *kir.temps)} | set(kir.symbols) | {kir.name}
        for st in kir.body:
            self.taken.update(_statement_vars(st))
            for e in statement_exprs(st):
                for n in e.walk():
                    if n.op == "REDUCE":
                        self.taken.update(v for v, _ in n.arg[1])
                    elif n.op == "IDX":
                        self.taken.add(n.arg)

    def __call__(self, base: str) -> str:
        return fresh_name(base, self.taken)


def _statement_vars(st: Statement) -> tuple[str, ...]:
    return getattr(st, "vars", ())


def statement_ranges(st: Statement, kir: KernelIR, decls: dict[str, TensorDecl]) -> dict[str, Affine]:
    """Every index variable of `st` with its extent: the target's dimensions (or an
    Accumulate's extents) and every reduction's axes inside it."""
    ranges: dict[str, Affine] = {}
    if isinstance(st, Accumulate):
        ranges.update(zip(st.vars, st.extents))
    elif isinstance(st, (Compute, Scan)):
        ranges.update(zip(st.vars, decls[st.target].shape))
    for e in statement_exprs(st):
        for n in e.walk():
            if n.op == "REDUCE":
                ranges.update((v, Affine.of(x)) for v, x in n.arg[1])
    return ranges


class Planner:
    """The analysis behind `plan` (module docstring)."""

    def __init__(self, kir: KernelIR, symbol: str):
        self.kir, self.S = kir, symbol
        self.name = kir.name
        self.decls: dict[str, TensorDecl] = {d.name: d for d in (*kir.params, *kir.outputs, *kir.temps)}
        self.names = Names(kir)
        self.streamed_tensors = self._streamed_tensors()

    # ------------------------------------------------------------------ errors
    def error(self, message: str, expr: Expr | None = None, hint: str | None = None,
              st: Statement | None = None) -> StreamError:
        """The error, at `expr`'s first access the document locates, else at the
        statement `st` (its own words, hologram.ir.Compute.site)."""
        site = self.site_of(expr) or self.statement_site(st)
        return StreamError(f"stream({self.name}): {message}", None if site is None else site.span(), hint)

    def _site(self, index: int | None) -> Site | None:
        return self.kir.sites[index] if index is not None and 0 <= index < len(self.kir.sites) else None

    def site_of(self, expr: Expr | None) -> Site | None:
        """Where in the document `expr` (its first access that knows) is written."""
        if expr is None:
            return None
        loads = [n for n in expr.walk() if n.op == "LOAD" and n.site is not None]
        return self._site(loads[0].site) if loads else None

    def statement_site(self, st: Statement | None) -> Site | None:
        """Where the document writes what `st` computes: the user's statement, or the
        expression a hidden temporary holds (`matmul_arg0` is `(a * 2).T`)."""
        return None if st is None or isinstance(st, Accumulate) else self._site(getattr(st, "site", None))

    def show(self, node: Expr) -> str:
        """`node` as the document writes it, when its site says; else its IR text."""
        site = self.site_of(node) if node.op == "LOAD" and node.site is not None else None
        return site_words(site) if site is not None else format_expr(node)

    def stmt(self, st: Statement, node: Expr) -> str:
        """The statement, for an error: as the document writes it, else (the line the
        error shows) "this statement", else its IR text."""
        site = self.statement_site(st)
        if site is not None:
            return f"`{site_words(site)}` "
        return "this statement " if self.site_of(node) is not None else f"`{format_statement(st).splitlines()[0]}` "

    def defined_at(self, name: str) -> Statement | None:
        """The statement of the body that assigns `name` first, when it has a site."""
        return next((st for st in self.kir.body if name in defines(st) and self.statement_site(st) is not None), None)

    def mentions(self, a: Affine) -> bool:
        return self.S in base_symbols(Affine.of(a))

    # ------------------------------------------------------------------ tensors
    def _streamed_tensors(self) -> frozenset[str]:
        """The arrays with a row per element of S: S must be their first dimension and
        appear nowhere else in their shape."""
        S, found = self.S, set()
        lead = Affine.of(S)
        for d in self.decls.values():
            if not any(self.mentions(x) for x in d.shape):
                continue
            if d.shape[0] != lead or any(self.mentions(x) for x in d.shape[1:]):
                shape = ", ".join(map(str, d.shape))
                st = self.defined_at(d.name) if d.kind == "temp" else None
                what = f"{d.kind} {d.name!r}"
                if st is not None and not _names_target(self.statement_site(st), d.name):
                    what = f"`{site_words(self.statement_site(st))}`"  # a hidden temporary: the words it holds
                raise self.error(f"{what} has shape [{shape}]; an array whose size depends on {S}, the "
                                 f"streamed dimension, must have {S} as its first dimension and nowhere else",
                                 hint="stream along another symbol with along=, or call the kernel on arrays in memory",
                                 st=st)
            found.add(d.name)
        if not any(p.name in found for p in self.kir.params):
            raise self.error(f"no input has {S} as its first dimension, so there is nothing to stream along it")
        return frozenset(found)

    def streamed(self, name: str) -> bool:
        return name in self.streamed_tensors

    # ------------------------------------------------------------------ hoisting
    def hoist(self) -> tuple[list[Statement], list[TensorDecl]]:
        """The body with every reduction over S a statement of its own: `t[F] =
        REDUCE(...)`, F its free variables (none ranging over S)."""
        out: list[Statement] = []
        temps: list[TensorDecl] = []
        seen: dict[tuple, str] = {}  # a 0-d reduction already hoisted, by canonical form
        for st in self.kir.body:
            ranges = statement_ranges(st, self.kir, self.decls)
            svars = {v for v, e in ranges.items() if self.mentions(e)}
            keep_top = isinstance(st, Compute) and self._is_s_reduce(st.body) and not self.streamed(st.target) \
                and st.body.free_vars() == set(st.vars)

            def hoisted(node: Expr, st: Statement = st, ranges: dict = ranges, svars: set = svars) -> Expr | None:
                if not self._is_s_reduce(node):
                    return None
                free = node.free_vars()
                depends = sorted(free & svars)
                if depends:
                    raise self.error(f"{self.stmt(st, node)}has a reduction over {self.S} whose value depends on "
                                     f"the row ({depends[0]}), so no pass can finish it before the rows that need "
                                     "it", node, st=st)
                order = [v for v in _statement_vars(st) if v in free] + sorted(free - set(_statement_vars(st)))
                key = (_canonical(node), tuple(order)) if not order else None
                if key is not None and key in seen:
                    return Expr.load(seen[key], node.dtype, ())
                self._check_axes(st, node)
                name = self.names(f"{getattr(st, 'target', 't')}_{node.arg[0]}")
                temps.append(TensorDecl(name, node.dtype, tuple(ranges[v] for v in order), "temp"))
                out.append(Compute(name, tuple(order), node))
                if key is not None:
                    seen[key] = name
                return Expr.load(name, node.dtype, tuple(Expr.idx(v) for v in order))

            if keep_top:
                inner = st.body.srcs[0].replace(hoisted)
                self._check_axes(st, st.body)
                st = attrs.evolve(st, body=attrs.evolve(st.body, srcs=(inner,)))
            else:
                st = _map_exprs(st, lambda e: e.replace(hoisted))
            out.append(st)
        return out, temps

    def _is_s_reduce(self, e: Expr) -> bool:
        return e.op == "REDUCE" and any(self.mentions(x) for _, x in e.arg[1])

    def _check_axes(self, st: Statement, node: Expr) -> None:
        kind, axes = node.arg
        over = [(v, Affine.of(x)) for v, x in axes if self.mentions(x)]
        if len(over) != 1 or over[0][1] != Affine.of(self.S):
            extents = ", ".join(str(x) for _, x in over)
            raise self.error(f"{self.stmt(st, node)}reduces over {extents}; a streamed reduction runs over "
                             f"{self.S} itself, once", node, st=st)
        if kind in ("argmin", "argmax") and Affine.of(axes[0][1]) != Affine.of(self.S):
            raise self.error(f"{self.stmt(st, node)}has an {kind} that numbers its elements with {self.S} as a "
                             f"later axis; streamed, {self.S} must be its first axis", node, st=st)

    # ------------------------------------------------------------------ roles
    def classify(self, st: Statement) -> Info:
        if not isinstance(st, (Compute, Accumulate, Scan)):
            raise self.error(f"{self.stmt(st, None)}is not a statement stream can split", st=st)
        target = st.target
        if self.streamed(target):
            if isinstance(st, Accumulate):
                raise self.error(f"{self.stmt(st, st.value)}scatters into {target!r}, a streamed array: a chunk's "
                                 "scatter may land in any row", st.value, st=st)
            info = Info(ROW, st.vars[0], scan=isinstance(st, Scan) and st.var == st.vars[0])
        elif isinstance(st, Compute) and self._is_s_reduce(st.body):
            info = Info(REDUCE, next(v for v, x in st.body.arg[1] if self.mentions(x)))
        elif isinstance(st, Accumulate) and any(self.mentions(x) for x in st.extents):
            over = [(v, x) for v, x in zip(st.vars, st.extents) if self.mentions(x)]
            if len(over) != 1 or over[0][1] != Affine.of(self.S):
                raise self.error(f"{self.stmt(st, st.value)}scatters over {', '.join(str(x) for _, x in over)}; a "
                                 f"streamed scatter runs over {self.S} itself, once", st.value, st=st)
            info = Info(SCATTER, over[0][0])
        else:
            info = Info(SMALL)
        offset = False
        for e in statement_exprs(st):
            for node in e.walk():
                if node.op == "LOAD" and self.streamed(node.arg):
                    if info.role == SMALL:
                        raise self.error(f"{self.stmt(st, node)}reads {self.show(node)} outside a pass over the "
                                         f"rows of {node.arg!r}", node, st=st)
                    if node.srcs[0] != Expr.idx(info.svar):
                        raise self.error(f"{self.stmt(st, node)}reads {self.show(node)}, another row of {node.arg!r} "
                                         f"than the one being computed ({node.arg}[{info.svar}, ...]); a chunk holds "
                                         "no other rows", node, hint="stencils and gathers across rows do not stream",
                                         st=st)
            if info.svar is not None and _value_use(e, info.svar, self.streamed):
                offset = True
            if any(self._is_s_reduce(n) for n in e.walk()) and info.role != REDUCE:
                raise self.error(f"{self.stmt(st, e)}nests a reduction over {self.S} that stream cannot hoist", e,
                                 st=st)
        return attrs.evolve(info, offset=offset)


def site_words(site: Site) -> str:
    """What the document writes at `site` (its first line)."""
    return site.text[site.col - 1:site.end_col - 1].strip()


def _names_target(site: Site | None, name: str) -> bool:
    """Whether the words at `site` assign `name` itself (`d = ...`, `d[i] = ...`): the
    user's statement, not an expression a hidden temporary holds."""
    if site is None:
        return False
    words = site_words(site)
    return words.startswith(name) and words[len(name):len(name) + 1] in ("", " ", "[", "=")


def _value_use(e: Expr, var: str, streamed) -> bool:
    """Whether `var` is used in `e` other than as the row index of a streamed array."""
    for n in e.walk():
        for i, s in enumerate(n.srcs):
            if s.op == "IDX" and s.arg == var and not (i == 0 and n.op == "LOAD" and streamed(n.arg)):
                return True
    return e.op == "IDX" and e.arg == var


def _canonical(e: Expr) -> Expr:
    """`e` with its reductions' variables renamed in order of appearance (so two copies of
    `max(x)`, `max[r0](x[r0])` and `max[r1](x[r1])`, compare equal)."""
    names: dict[str, str] = {}
    for n in e.walk():
        if n.op == "REDUCE":
            for v, _ in n.arg[1]:
                names.setdefault(v, f"_c{len(names)}")

    return rename_vars(e, names)


def rename_vars(e: Expr, names: dict[str, str]) -> Expr:
    """`e` with index variables renamed as `names` says, where they are used and where
    reductions bind them."""
    def rename(n: Expr) -> Expr | None:
        if n.op == "IDX" and n.arg in names:
            return Expr.idx(names[n.arg])
        if n.op == "REDUCE":
            kind, axes = n.arg
            return attrs.evolve(n, arg=(kind, tuple((names.get(v, v), x) for v, x in axes)))
        return None

    return e.replace(rename)


def _map_exprs(st: Statement, fn) -> Statement:
    from hologram.ir import map_statement

    return map_statement(st, fn)


def walk_loads(st: Statement) -> Iterator[str]:
    for e in statement_exprs(st):
        for n in e.walk():
            if n.op == "LOAD":
                yield n.arg


def prune(body: list[Statement], outputs: set[str]) -> list[Statement]:
    """The statements the outputs need, in order."""
    needed = set(outputs)
    kept: list[Statement] = []
    for st in reversed(body):
        if needed & set(defines(st)):
            kept.append(st)
            needed.update(walk_loads(st))
    return kept[::-1]
