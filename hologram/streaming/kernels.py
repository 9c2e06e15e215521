"""The kernels of a streaming plan, built from the kernel's own statements.

`plan(kir, symbol)` sorts the hoisted, classified statements of
hologram.streaming.plan into passes (the fewest the dependencies allow, the online max-and-sum
fused into its max's pass) and writes one `KernelIR` per step:

- a pass kernel holds the row statements its outputs need and, per reduction of the
  pass, the reduction over the chunk into fresh *partial* outputs: float sums and
  products accumulate in f64 (so no chunk's partial overflows or loses what the whole
  reduction would keep), argmin/argmax add the value at the index, the online pair
  writes the chunk's max and `sum(f64(exp(v - max_chunk)))`. The streamed variable's
  value, where a statement uses it beyond indexing rows, becomes `var + offset` (the
  chunk's first row, a scalar parameter), and the symbol itself, where used as a value
  (`len(x)`), a scalar parameter holding the whole call's size;
- a small kernel holds the statements over reductions' results; a 0-d small tensor
  arrives as a scalar parameter, an array one as an input.

Each is an ordinary kernel: the runtime compiles it through the kernel's own pipeline
and runs it on the kernel's backend like any other (the interpreter and cpu_llvm
alike), so a pass means exactly what the same statements mean in the whole kernel.
"""

from __future__ import annotations

import attrs

from hologram.core.errors import StreamError
from hologram.core.types import Affine, DType
from hologram.ir import (Compute, Expr, KernelIR, Scan, Statement, TensorDecl, defines, format_statement,
                         map_statement, statement_exprs)
from hologram.streaming.plan import (REDUCE, ROW, SCATTER, SMALL, Info, Plan, Planner, Reduction, Step,
                                          base_symbols, prune, rename_vars, walk_loads)

F64, I64 = DType.F64, DType.I64


def plan(kir: KernelIR, symbol: str) -> Plan:
    """How `kir` streams along `symbol` (hologram.streaming.plan); a StreamError
    says what stops it."""
    return build_plan(Planner(kir, symbol))


def build_plan(pl: Planner) -> Plan:
    kir = pl.kir
    body, temps = pl.hoist()
    hoisted = bool(temps)
    for t in temps:
        pl.decls[t.name] = t
    outputs = [d.name for d in kir.outputs]
    kept = prune(body, set(outputs))
    infos = [pl.classify(st) for st in kept]
    streamed = tuple(p.name for p in kir.params if pl.streamed(p.name))
    row_outputs = tuple(o for o in outputs if pl.streamed(o))
    if not hoisted and len(kept) == len(kir.body) and all(i.role == ROW and not i.offset and not i.scan for i in infos) \
            and not _symbol_values(kept, pl) and len(row_outputs) == len(outputs):
        step = Step("pass", 1, kir, tuple((p.name, _role(pl, p), p.name) for p in kir.params),
                    tuple((o, "row", o) for o in outputs))
        return Plan(pl.S, (step,), streamed, row_outputs, direct=True)
    return _Steps(pl, kept, infos, row_outputs).build(streamed, row_outputs)


def _role(pl: Planner, p: TensorDecl) -> str:
    return "stream" if pl.streamed(p.name) else "scalar" if p.kind == "scalar" else "input"


def _symbol_values(body: list[Statement], pl: Planner) -> bool:
    return any(n.op == "SYM" and pl.mentions(Affine.of(n.arg)) for st in body for e in statement_exprs(st)
               for n in e.walk())


def _sum_of_shifted_exp(e: Expr) -> tuple[Expr, Expr] | None:
    """(v, the load of m) when `e` is `sum(exp(v - m[...]))` over floats."""
    if e.op != "REDUCE" or e.arg[0] != "sum" or not e.dtype.is_float:
        return None
    x = e.srcs[0]
    if x.op != "EXP" or x.dtype is not e.dtype or x.srcs[0].op != "SUB" or x.srcs[0].dtype is not e.dtype:
        return None
    v, m = x.srcs[0].srcs
    return (v, m) if m.op == "LOAD" else None


class _Steps:
    def __init__(self, pl: Planner, body: list[Statement], infos: list[Info], row_outputs: tuple[str, ...]):
        self.pl, self.body, self.infos, self.row_outputs = pl, body, infos, row_outputs
        self.kir = pl.kir
        self.expanded: dict[int, Expr] = {}  # a fused sum's body through the row temps it reads
        self.where: list[int] = []        # each statement's pass (row, reduce, scatter) or level (small)
        self.fused: dict[int, int] = {}   # a sum's index -> the index of the max it runs with (online)
        self.assign()

    # ------------------------------------------------------------------ passes
    def assign(self) -> None:
        known: dict[str, int] = {p.name: 0 for p in self.kir.params if not self.pl.streamed(p.name)}
        rows: dict[str, int] = {p.name: 1 for p in self.kir.params if self.pl.streamed(p.name)}
        for i, (st, info) in enumerate(zip(self.body, self.infos)):
            reads = set(walk_loads(st))
            small = [known[r] for r in reads if r in known]
            if info.role == SMALL:
                level = max(small, default=0)
                for t in defines(st):
                    known[t] = level
                self.where.append(level)
                continue
            p = max([1] + [k + 1 for k in small] + [rows[r] for r in reads if r in rows])
            if info.role == ROW:
                rows[st.target] = p
            else:
                j = self.online_partner(i)
                if j is not None:
                    p, self.fused[i] = self.where[j], j
                known[st.target] = p
            self.where.append(p)

    def online_partner(self, i: int) -> int | None:
        """The max statement whose pass the sum `i` can share (module docstring of
        streaming.plan): `s = sum(exp(v - m))` after `m = max(v)`, same axes and targets,
        seen through the row temporaries they read (softmax's `e = exp(x - m)`). The
        sum's body, so expanded, is what its pass computes (`self.expanded`)."""
        st = self.body[i]
        if not isinstance(st, Compute):
            return None
        total = self.inline_rows(st.body)
        found = _sum_of_shifted_exp(total)
        if found is None:
            return None
        v, load = found
        for j in range(i):
            m = self.body[j]
            if not isinstance(m, Compute) or m.target != load.arg or self.infos[j].role != REDUCE \
                    or j in self.fused.values() or m.body.arg[0] != "max" or m.body.dtype is not st.body.dtype:
                continue
            axes, maxes = st.body.arg[1], m.body.arg[1]
            if len(axes) != len(maxes) or any(Affine.of(a) != Affine.of(b) for (_, a), (_, b) in zip(axes, maxes)):
                return None
            if len(m.vars) != len(st.vars) or load.srcs != tuple(Expr.idx(x) for x in st.vars) \
                    or self.pl.decls[m.target].shape != self.pl.decls[st.target].shape:
                return None
            names = dict(zip(m.vars, st.vars)) | {a: b for (a, _), (b, _) in zip(maxes, axes)}
            if rename_vars(self.inline_rows(m.body.srcs[0]), names) != v:
                return None
            self.expanded[i] = total
            return j
        return None

    def inline_rows(self, e: Expr) -> Expr:
        """`e` with every load of a row temporary (a Compute) replaced by its definition."""
        defs = {st.target: st for st, info in zip(self.body, self.infos)
                if info.role == ROW and isinstance(st, Compute) and st.target not in self.row_outputs}

        def f(n: Expr) -> Expr | None:
            if n.op != "LOAD" or n.arg not in defs:
                return None
            d = defs[n.arg]
            subst = dict(zip(d.vars, n.srcs))
            return self.inline_rows(d.body).replace(
                lambda x: subst[x.arg] if x.op == "IDX" and x.arg in subst else None)

        return e.replace(f)

    # ------------------------------------------------------------------ steps
    def build(self, streamed: tuple[str, ...], row_outputs: tuple[str, ...]) -> Plan:
        rows = [i for i, info in enumerate(self.infos) if info.role == ROW]
        passes = {self.where[i] for i, info in enumerate(self.infos) if info.role in (REDUCE, SCATTER)}
        # the outputs are written by the last pass, so no pass reads an input after an
        # output that may be the same memory (`out=` the input) was written
        last_rows = max(passes | {self.where[i] for i in rows if self.body[i].target in row_outputs}, default=0)
        if row_outputs:
            passes.add(last_rows)
        steps: list[Step] = []
        levels = {self.where[i] for i, info in enumerate(self.infos) if info.role == SMALL}
        for level in range(0, max(passes | levels, default=0) + 1):
            if level in passes:
                steps.append(self.pass_step(level, row_outputs if level == last_rows else ()))
            if level in levels:
                steps.append(self.small_step(level))
        return Plan(self.pl.S, tuple(steps), streamed, row_outputs)

    def pass_step(self, level: int, outputs: tuple[str, ...]) -> Step:
        pl = self.pl
        reducing = [i for i, info in enumerate(self.infos) if info.role in (REDUCE, SCATTER) and self.where[i] == level]
        wanted = set(outputs) | {r for i in reducing for r in self.reads(i)}
        include: set[int] = set(reducing)
        for i in range(len(self.body) - 1, -1, -1):  # the row statements they need, transitively
            if self.infos[i].role == ROW and self.body[i].target in wanted:
                include.add(i)
                wanted.update(walk_loads(self.body[i]))
        rw = _Rewriter(pl, level)
        body: list[Statement] = []
        outs: list[tuple[TensorDecl, str, str]] = [(attrs.evolve(pl.decls[o]), "row", o) for o in outputs]
        temps: list[TensorDecl] = []
        reductions: list[Reduction] = []
        companions = {j: i for i, j in self.fused.items()}
        partial_max: dict[str, str] = {}
        tainted: set[str] = set()  # rows of this pass that depend on a scan along S
        for i in sorted(include):
            st, info = self.body[i], self.infos[i]
            if info.role == ROW:
                if info.scan:
                    chained = bool(tainted & set(walk_loads(st)))
                    reductions.append(self.scan_rows(st, info, rw, body, outs, temps, chained))
                else:
                    body.append(rw.statement(st, info))
                if info.scan or tainted & set(walk_loads(st)):
                    tainted.add(st.target)
                if st.target not in outputs:  # an output the last pass writes is a temporary here
                    temps.append(attrs.evolve(pl.decls[st.target], kind="temp"))
                continue
            d = pl.decls[st.target]
            if info.role == SCATTER:
                wide = F64 if d.dtype.is_float else d.dtype
                part = pl.names(f"{st.target}_part")
                value = rw.expr(st.value, info)
                value = value if value.dtype is wide else Expr("CAST", wide, (value,))
                body.append(attrs.evolve(st, target=part, key=rw.expr(st.key, info), value=value))
                outs.append((TensorDecl(part, wide, d.shape, "output"), "partial", st.target))
                reductions.append(Reduction("scatter", st.target, d.dtype, (part,)))
                continue
            kind, axes = st.body.arg
            source = st.body.srcs[0]
            if i in self.fused:  # reads the chunk's own max, computed just before
                m = self.body[self.fused[i]].target
                source = _replace_load(self.expanded[i].srcs[0], m, partial_max[m])
            inner = rw.expr(source, info)
            if i in companions:  # a max whose sum runs in this pass too: online, written with the sum
                part = pl.names(f"{st.target}_part")
                partial_max[st.target] = part
                rw.defined.add(part)
                body.append(Compute(part, st.vars, attrs.evolve(st.body, srcs=(inner,))))
                outs.append((TensorDecl(part, d.dtype, d.shape, "output"), "partial", st.target))
                continue
            if i in self.fused:
                part = pl.names(f"{st.target}_part")
                body.append(Compute(part, st.vars, Expr("REDUCE", F64, (Expr("CAST", F64, (inner,)),), (kind, axes))))
                outs.append((TensorDecl(part, F64, d.shape, "output"), "partial", st.target))
                reductions.append(Reduction("online", st.target, d.dtype, (partial_max[m], part), companion=m))
                continue
            part = pl.names(f"{st.target}_part")
            if kind in ("sum", "prod") and d.dtype.is_float:
                # an f32 sum of a chunk is within the contract as an f32 sum of everything
                # is; an f16 partial could overflow where the whole sum (in f32) does not,
                # and a product in any type could where the whole one (in f64) does not
                dtype = F64 if kind == "prod" or d.dtype is F64 else DType.F32
                wide = Expr("CAST", dtype, (inner,)) if inner.dtype is not dtype else inner
                body.append(Compute(part, st.vars, Expr("REDUCE", dtype, (wide,), (kind, axes))))
                outs.append((TensorDecl(part, dtype, d.shape, "output"), "partial", st.target))
                reductions.append(Reduction(kind, st.target, d.dtype, (part,)))
                continue
            body.append(Compute(part, st.vars, attrs.evolve(st.body, srcs=(inner,))))
            outs.append((TensorDecl(part, d.dtype, d.shape, "output"), "partial", st.target))
            if kind not in ("argmin", "argmax"):
                reductions.append(Reduction(kind, st.target, d.dtype, (part,)))
                continue
            fresh = {v: pl.names(f"{v}_v") for v, _ in axes}
            value = pl.names(f"{st.target}_value")
            body.append(Compute(value, st.vars, Expr("REDUCE", inner.dtype, (rename_vars(inner, fresh),),
                                                      (kind[3:], tuple((fresh[v], x) for v, x in axes)))))
            outs.append((TensorDecl(value, inner.dtype, d.shape, "output"), "partial", st.target))
            reductions.append(Reduction(kind, st.target, d.dtype, (part, value),
                                        tuple(Affine.of(x) for _, x in axes[1:])))
        kir = rw.kernel(f"{self.kir.name}_pass{level}", body, outs, temps)
        return Step("pass", level, kir, rw.roles, tuple((d.name, role, src) for d, role, src in outs), tuple(reductions))

    def scan_rows(self, st: Scan, info: Info, rw: "_Rewriter", body: list[Statement],
                  outs: list[tuple[TensorDecl, str, str]], temps: list[TensorDecl], chained: bool) -> Reduction:
        """A scan along S in a pass: the chunk's own scan (`t_local`), then `t = carry + t_local`
        (`carry * t_local` for a product), the carry an input of the pass holding every earlier
        chunk's combination; and the chunk's total as its partial."""
        pl = self.pl
        d = pl.decls[st.target]
        value = rw.expr(st.value, info)
        local = pl.names(f"{st.target}_local")
        temps.append(attrs.evolve(d, name=local, kind="temp"))
        body.append(attrs.evolve(st, target=local, value=value))
        carry = pl.names(f"{st.target}_carry")
        rest = tuple(Expr.idx(v) for v in st.vars[1:])
        pl.decls[carry] = TensorDecl(carry, d.dtype, d.shape[1:], "input" if rest else "scalar")
        rw.carries[carry] = st.target
        before = Expr.load(carry, d.dtype, rest) if rest else Expr("SCALAR", d.dtype, (), carry)
        mine = Expr.load(local, d.dtype, tuple(Expr.idx(v) for v in st.vars))
        body.append(Compute(st.target, st.vars, Expr("ADD" if st.kind == "sum" else "MUL", d.dtype, (before, mine))))
        # as a chunk's partial sum: f32 for f16 and f32 sums (within the contract), f64 for products
        wide = (F64 if st.kind == "prod" or d.dtype is F64 else DType.F32) if d.dtype.is_float else d.dtype
        r = pl.names(f"{info.svar}_total")
        term = rename_vars(value, {info.svar: r})
        term = term if term.dtype is wide else Expr("CAST", wide, (term,))
        total = pl.names(f"{st.target}_total")
        body.append(Compute(total, st.vars[1:], Expr("REDUCE", wide, (term,), (st.kind, ((r, d.shape[0]),)))))
        outs.append((TensorDecl(total, wide, d.shape[1:], "output"), "partial", st.target))
        return Reduction(f"cum{st.kind}", st.target, d.dtype, (total,), chained=chained)

    def reads(self, i: int) -> set[str]:
        if i in self.expanded:
            return {n.arg for n in self.expanded[i].walk() if n.op == "LOAD"}
        return set(walk_loads(self.body[i]))

    def small_step(self, level: int) -> Step:
        pl = self.pl
        rw = _Rewriter(pl, level, small=True)
        body: list[Statement] = []
        outs: list[tuple[TensorDecl, str, str]] = []
        for i, (st, info) in enumerate(zip(self.body, self.infos)):
            if info.role != SMALL or self.where[i] != level:
                continue
            body.append(rw.statement(st, info))
            for t in defines(st):
                rw.defined.add(t)
                outs.append((attrs.evolve(pl.decls[t], kind="output"), "small", t))
        kir = rw.kernel(f"{self.kir.name}_small{level}", body, outs, [])
        return Step("small", level, kir, rw.roles, tuple((d.name, role, src) for d, role, src in outs))


def _replace_load(e: Expr, old: str, new: str) -> Expr:
    return e.replace(lambda n: attrs.evolve(n, arg=new) if n.op == "LOAD" and n.arg == old else None)


class _Rewriter:
    """Rewrites statements for one step and collects the parameters they read."""

    def __init__(self, pl: Planner, level: int, small: bool = False):
        self.pl, self.level, self.small = pl, level, small
        self.defined: set[str] = set()   # small tensors this (small) step defines itself
        self.offset: str | None = None
        self.symbols: dict[str, str] = {}  # symbol -> the scalar parameter holding its value
        self.carries: dict[str, str] = {}  # a scan's carry parameter -> the scan's target
        self.roles: tuple[tuple[str, str, str], ...] = ()

    def statement(self, st: Statement, info: Info) -> Statement:
        return map_statement(st, lambda e: self.expr(e, info))

    def expr(self, e: Expr, info: Info) -> Expr:
        pl, svar = self.pl, info.svar

        def f(n: Expr) -> Expr | None:
            if n.op == "IDX" and info.offset and n.arg == svar:
                return Expr("ADD", I64, (n, Expr("SCALAR", I64, (), self.offset_param())))
            if n.op == "LOAD" and pl.streamed(n.arg):
                return attrs.evolve(n, srcs=(Expr.idx(svar), *n.srcs[1:])) if n.srcs[0] != Expr.idx(svar) else None
            if n.op == "LOAD" and n.arg not in self.defined and pl.decls[n.arg].shape == ():
                return Expr("SCALAR", n.dtype, (), n.arg)  # a small value known before this step
            if n.op == "SYM" and (self.small or pl.mentions(Affine.of(n.arg))):
                return Expr("SCALAR", I64, (), self.symbol_param(n.arg))
            return None

        return e.replace(f)

    def offset_param(self) -> str:
        if self.offset is None:
            self.offset = self.pl.names(f"{self.pl.S}_offset")
        return self.offset

    def symbol_param(self, symbol: str) -> str:
        if symbol not in self.symbols:
            self.symbols[symbol] = self.pl.names(f"{symbol}_value" if symbol.isidentifier() else "symbol_value")
        return self.symbols[symbol]

    # ------------------------------------------------------------------ the kernel
    def kernel(self, name: str, body: list[Statement], outs: list[tuple[TensorDecl, str, str]],
               temps: list[TensorDecl]) -> KernelIR:
        pl = self.pl
        own = {d.name for d, _, _ in outs} | {t.name for t in temps}
        loads: dict[str, None] = {}
        scalars: dict[str, None] = {}
        for st in body:
            for e in statement_exprs(st):
                for n in e.walk():
                    if n.op == "LOAD" and n.arg not in own:
                        loads[n.arg] = None
                    elif n.op == "SCALAR":
                        scalars[n.arg] = None
        originals = {p.name: p for p in pl.kir.params}
        used = set(loads) | set(scalars)
        params: list[tuple[TensorDecl, str, str]] = []
        for p in pl.kir.params:
            if p.name in used:
                params.append((p, _role_of(pl, p), p.name))
        extra = [n for n in (*loads, *scalars) if n not in originals and n != self.offset
                 and n not in self.symbols.values()]
        for n in extra:
            d = pl.decls[n]
            role, source = ("carry", self.carries[n]) if n in self.carries else ("small", n)
            params.append((TensorDecl(n, d.dtype, d.shape, "scalar" if d.shape == () else "input"), role, source))
        self._bind(params, [d for d, _, _ in outs] + temps, body)
        if self.offset is not None:
            params.append((TensorDecl(self.offset, I64, (), "scalar"), "offset", pl.S))
        for symbol, pname in self.symbols.items():
            params.append((TensorDecl(pname, I64, (), "scalar"), "symbol", symbol))
        self.roles = tuple((d.name, role, src) for d, role, src in params)
        decls = [d for d, _, _ in params] + [d for d, _, _ in outs] + temps
        symbols: dict[str, None] = {}
        for d in decls:
            for x in d.shape:
                for s in sorted(base_symbols(Affine.of(x))):
                    symbols[s] = None
        return KernelIR(name, pl.kir.version, tuple(d for d, _, _ in params), tuple(d for d, _, _ in outs),
                        tuple(temps), tuple(body), tuple(symbols), pl.kir.reassociate, pl.kir.sites)

    def _bind(self, params: list[tuple[TensorDecl, str, str]], decls: list[TensorDecl], body: list[Statement]) -> None:
        """Add an original input for each symbol the step's shapes need and no parameter binds."""
        pl = self.pl
        needed: set[str] = set()
        for d in [p for p, _, _ in params] + decls:
            for x in d.shape:
                needed |= base_symbols(Affine.of(x))
        for st in body:
            for x in getattr(st, "extents", ()):
                needed |= base_symbols(Affine.of(x))
            for e in statement_exprs(st):
                for n in e.walk():
                    if n.op == "REDUCE":
                        for _, x in n.arg[1]:
                            needed |= base_symbols(Affine.of(x))
                    elif n.op == "SYM":
                        needed |= base_symbols(Affine.of(n.arg))
        for s in sorted(needed):
            if any(_binds(d, s) for d, _, _ in params):
                continue
            source = next((p for p in pl.kir.params if p.kind != "scalar" and _binds(p, s)), None)
            if source is None:
                raise StreamError(f"stream({pl.name}): a step needs the shape symbol {s!r}, which no input binds")
            params.append((source, _role_of(pl, source), source.name))
            params.sort(key=lambda t: _order(pl, t[0].name))


def _binds(d: TensorDecl, symbol: str) -> bool:
    return d.kind != "scalar" and any(len(Affine.of(x).terms) == 1 and Affine.of(x).terms[0][0] == symbol
                                      for x in d.shape)


def _role_of(pl: Planner, p: TensorDecl) -> str:
    return "stream" if pl.streamed(p.name) else "scalar" if p.kind == "scalar" else "input"


def _order(pl: Planner, name: str) -> int:
    names = [p.name for p in pl.kir.params]
    return names.index(name) if name in names else len(names)


def describe(step: Step) -> str:
    """A step's kernel, as text (for errors and `hologram stream --explain`-style output)."""
    return "\n".join(format_statement(st) for st in step.kir.body)
