"""A kernel function's statements as kernel-body lines.

Each statement keeps its own text (the kernel language reads Python's expressions), with
the few changes that make Python's meaning the body's (module.py folds the constants):

    return e                  ->  out = e                 (the output named by the return)
    return a, b               ->  out0 = a / out1 = b     (a returned local keeps its name)
    c[:] = e, c[...] = e      ->  c = e                   (an out-parameter filled whole)
    i = get_global_id()       ->  (nothing: i is an index variable)
    if i < n: c[i] = a[i]     ->  c[i] = a[i]             (the guard the index range makes)
    t = a[i] * 2 (per thread) ->  t[i] = a[i] * 2, and t -> t[i] where it is read

Everything else is refused with an error at the statement and the kernel language's
form to write instead.
"""

from __future__ import annotations

import ast
from typing import Iterable, Sequence

import attrs

from hologram.translator import CompileError, Span
from hologram_python.module import THREAD_ID, TYPE_NAMES, Names, Source, literal
from hologram_python.text import BodyLine, Edit, cut

_NAMES = {ast.For: "for", ast.AsyncFor: "for", ast.While: "while", ast.If: "if", ast.With: "with",
          ast.AsyncWith: "with", ast.Try: "try", ast.FunctionDef: "def", ast.AsyncFunctionDef: "def",
          ast.ClassDef: "class", ast.Import: "import", ast.ImportFrom: "import", ast.Raise: "raise",
          ast.Assert: "assert", ast.Delete: "del", ast.Global: "global", ast.Nonlocal: "nonlocal",
          ast.Match: "match", ast.Break: "break", ast.Continue: "continue"}
if hasattr(ast, "TryStar"):
    _NAMES[ast.TryStar] = "try"
_HINTS = {  # (for, while and if: the body language's own hints, statement_hint)
    "def": "a kernel is one function; decorate another function for another kernel",
    "class": "a kernel is one function; decorate another function for another kernel",
    "import": "import at the top of the module: np.exp(x) and exp(x) are the same function in a kernel",
    "with": "a kernel's statements are assignments and one return",
    "try": "a kernel's statements are assignments and one return; a run-time error is an ExecutionError",
    "raise": "a kernel's statements are assignments and one return; a run-time error is an ExecutionError",
    "assert": "a kernel's statements are assignments and one return",
}


@attrs.frozen
class Guard:
    """A thread-style bound: thread index `var` runs below `bound` (plus `extra`: 1 for `<=`)."""

    var: str
    bound: ast.expr
    extra: int
    span: Span


@attrs.frozen
class ThreadTarget:
    """An out-parameter indexed by a thread index: `c[i, j] = ...` has `i` at position 0."""

    name: str
    var: str
    position: int
    span: Span


@attrs.frozen
class Body:
    lines: tuple[BodyLine, ...]
    out_params: frozenset[str]
    returns: tuple[tuple[str, ast.expr], ...]  # (output name, the returned expression)
    return_node: ast.Return | None
    guards: tuple[Guard, ...]
    thread_targets: tuple[ThreadTarget, ...]


def statement_error(src: Source, node: ast.AST, message: str, hint: str | None = None) -> CompileError:
    return CompileError(message, src.span(node), hint=hint)


def statement_hint(word: str) -> str | None:
    """The hint for a statement a kernel has not: the body language's, for the statements
    it knows (its parser, and lark, load only when there is an error to explain)."""
    if word in ("for", "while", "if"):
        from hologram.translator import STATEMENT_HINTS

        return STATEMENT_HINTS[word]
    return _HINTS.get(word)


class BodyTranslator:
    def __init__(self, src: Source, names: Names, fn: ast.FunctionDef, params: Sequence[str],
                 symbols: Iterable[str]):
        self.src, self.names, self.fn = src, names, fn
        self.params = list(params)
        self.symbols = set(symbols)
        self.locals = _assigned_names(fn.body) | set(params)
        self.threads: dict[str, int] = {}  # thread index -> axis
        self.per_thread: dict[str, tuple[str, ...]] = {}  # a per-thread temporary -> its thread indices
        self.hidden: dict[str, str] = {}  # a returned local that is also read -> its name in the body
        self.guards: list[Guard] = []
        self.targets: list[ThreadTarget] = []
        self.out_params: set[str] = set()

    # -- the statements ----------------------------------------------------------------
    def translate(self, returns: int | None) -> Body:
        """`returns`: how many values the return annotation declares (None: no annotation)."""
        stmts = list(self.fn.body)
        if stmts and isinstance(stmts[0], ast.Expr) and isinstance(stmts[0].value, ast.Constant) \
                and isinstance(stmts[0].value.value, str):
            stmts = stmts[1:]  # the docstring: the kernel's summary
        ret = stmts[-1] if stmts and isinstance(stmts[-1], ast.Return) else None
        flat = self._flatten(stmts[:-1] if ret is not None else stmts)
        for st in flat:
            if isinstance(st, ast.Return):
                raise statement_error(self.src, st, "a kernel returns once, at its end",
                                      hint="assign the values to names and return them in the last statement")
        _check_single_assignment(self.src, flat)
        plan = self._plan_returns(ret, returns, flat)
        lines: list[BodyLine] = []
        for st in flat:
            lines.extend(self._statement(st))
        if ret is not None:
            lines.extend(self._return_lines(ret, plan))
        return Body(tuple(lines), frozenset(self.out_params), tuple((name, v) for name, v, _ in plan), ret,
                    tuple(self.guards), tuple(self.targets))

    def _flatten(self, stmts: Sequence[ast.stmt]) -> list[ast.stmt]:
        """The statements in order, thread ids dropped and guards unwrapped."""
        out: list[ast.stmt] = []
        for st in stmts:
            if isinstance(st, ast.Pass):
                continue
            if self._thread_ids(st):
                continue
            if isinstance(st, ast.If):
                exit_guard = self._exit_guard(st)
                if exit_guard is not None:
                    self.guards.extend(exit_guard)
                    continue
                guard = self._guard(st)
                if guard is not None:
                    self.guards.extend(guard)
                    out.extend(self._flatten(st.body))
                    continue
            out.append(st)
        return out

    def _statement(self, st: ast.stmt) -> list[BodyLine]:
        src = self.src
        if isinstance(st, ast.Assign):
            if len(st.targets) != 1:
                raise statement_error(src, st, "one target per assignment: a name is assigned once in a kernel",
                                      hint="write a = value, then b = a")
            return self._assign(st, st.targets[0], st.value)
        if isinstance(st, ast.AugAssign):
            target = st.target
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                    and target.value.id in self.params:
                self.out_params.add(target.value.id)
            return self._cut(st, self._edits([target, st.value]))
        if isinstance(st, ast.AnnAssign):
            raise statement_error(src, st, "a local name is not annotated in a kernel: its type is inferred",
                                  hint="annotate the function's parameters and return value")
        if isinstance(st, ast.Expr):
            raise statement_error(src, st, "this expression's value is not used: a kernel's statements are "
                                  "assignments and one return", hint="assign it to a name, or drop it")
        word = _NAMES.get(type(st), type(st).__name__.lower())
        raise statement_error(src, st, f"a kernel has no {word!r} statements", hint=statement_hint(word))

    def _assign(self, st: ast.stmt, target: ast.expr, value: ast.expr) -> list[BodyLine]:
        src = self.src
        if isinstance(target, ast.Name):
            if target.id in self.params:
                raise statement_error(src, target, f"assigning {target.id!r} would rebind the parameter, not "
                                      "write into it", hint=f"fill an out-parameter with {target.id}[:] = ...")
            if target.id in self.threads:
                raise statement_error(src, target, f"{target.id!r} is a thread index: it cannot be assigned")
            deps = self._thread_deps(value)
            if deps:
                self.per_thread[target.id] = deps
            return self._cut(st, self._edits([target, value]))
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            name = target.value.id
            if name in self.params:
                self.out_params.add(name)
            elts = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
            if len(elts) == 1 and _whole(elts[0]):
                # c[:] = e, c[...] = e: the whole array, the kernel language's `c = e`
                (line, col), (end_line, end_col) = src.start(target), src.end(target)
                if end_line != line:
                    raise statement_error(src, target, f"write {name}[:] on one line")
                edit = Edit(line, col, end_col, name)
                return self._cut(st, [edit, *self._edits([value])])
            for k, e in enumerate(elts):
                if isinstance(e, ast.Name) and e.id in self.threads and name in self.params:
                    self.targets.append(ThreadTarget(name, e.id, k, src.span(e)))
            return self._cut(st, self._edits([target.slice, value]))
        if isinstance(target, (ast.Tuple, ast.List)):
            raise statement_error(src, target, "one name per assignment in a kernel",
                                  hint="write each value in a statement of its own")
        raise statement_error(src, target, "a kernel assigns a name (t = ...), an index of one (y[i] = ...) or "
                              "a whole out-parameter (y[:] = ...)")

    def _cut(self, st: ast.stmt, edits: list[Edit]) -> list[BodyLine]:
        value = getattr(st, "value", None)
        return cut(self.src, self.src.start(st), self.src.end(st), edits + self._continued(st, value))

    def _continued(self, node: ast.AST, value: ast.AST | None) -> list[Edit]:
        """A backslash continuation, which the body language has not: each `\\` becomes a
        space and the value is put in parentheses, inside which lines continue."""
        src = self.src
        (line, _), (end_line, _) = src.start(node), src.end(node)
        found = [k for k in range(line, end_line) if src.lines[k - 1].rstrip().endswith("\\")
                 and "#" not in src.lines[k - 1]]
        if not found or value is None:
            return []
        edits = []
        for k in found:
            at = len(src.lines[k - 1].rstrip()) - 1
            edits.append(Edit(k, at, at + 1, " "))
        (v_line, v_col), (v_end_line, v_end_col) = src.start(value), src.end(value)
        return edits + [Edit(v_line, v_col, v_col, "("), Edit(v_end_line, v_end_col, v_end_col, ")")]

    # -- names in expressions -----------------------------------------------------------
    def _edits(self, nodes: Iterable[ast.AST]) -> list[Edit]:
        """The edits of the names in `nodes` that are spelled otherwise in the kernel
        language: module constants (folded), aliases, per-thread temporaries."""
        edits: list[Edit] = []

        def visit(n: ast.AST) -> None:
            text = self._spelling(n)
            if text is None:
                for child in ast.iter_child_nodes(n):
                    visit(child)
                return
            (line, col), (end_line, end_col) = self.src.start(n), self.src.end(n)
            if end_line != line:
                raise statement_error(self.src, n, "write this name on one line")
            edits.append(Edit(line, col, end_col, text))

        for node in nodes:
            visit(node)
        return edits

    def _spelling(self, n: ast.AST) -> str | None:
        names = self.names
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in names.types \
                and n.value.id not in self.locals:
            if n.attr in TYPE_NAMES:
                return TYPE_NAMES[n.attr]
            raise statement_error(self.src, n, f"hologram.types has no element type {n.attr!r}",
                                  hint=f"element types: {', '.join(TYPE_NAMES)}")
        if not isinstance(n, ast.Name):
            return None
        name = n.id
        if name in self.locals and name not in self.params:
            spelled = self.hidden.get(name, name)
            if name in self.per_thread:
                return f"{spelled}[{', '.join(self.per_thread[name])}]"
            return None if spelled == name else spelled
        if name in self.locals or name in self.threads:
            return None
        if name in names.constants:
            return literal(names.constants[name])
        if name in names.numpy:
            return None if name in ("np", "numpy") else "np"
        if name in names.spellings:
            spelled = names.spellings[name]
            return None if spelled == name else spelled
        if name in names.others or name in names.types or name in names.hologram or name in names.kernel:
            what = names.others.get(name) or "a module"
            raise statement_error(self.src, n, f"{name!r} is {what}, not a constant: a kernel reads module-level "
                                  "ints, floats and bools (folded in as literals)",
                                  hint="pass it as a parameter, or make it a module-level number")
        return None  # an index variable, a function, pi, ...: the kernel language's own names

    # -- returns ---------------------------------------------------------------------------
    def _plan_returns(self, ret: ast.Return | None, declared: int | None,
                      flat: Sequence[ast.stmt]) -> list[tuple[str, ast.expr, bool]]:
        """(output name, returned value, whether a line assigns it) for each returned value.
        A returned local names its output (`return y`: the statement that computes y
        computes the output); when something else reads it too, it is first renamed
        (`y_`) and the output assigned from it, so those reads see the local's own
        dtype and shape, as in Python, not the output's."""
        if ret is None:
            return []
        src = self.src
        if ret.value is None:
            raise statement_error(src, ret, "this kernel returns nothing",
                                  hint="return its outputs, or write them into out-parameters (y[:] = ...)")
        if declared is None:
            raise statement_error(src, ret, "the function returns a value but declares no return type",
                                  hint='annotate it: def f(x: f32["n"]) -> f32["n"]')
        values = ret.value.elts if isinstance(ret.value, ast.Tuple) and declared != 1 else [ret.value]
        if len(values) != declared:
            raise statement_error(src, ret.value, f"the function returns {len(values)} value"
                                  f"{'s' if len(values) != 1 else ''} but its return type declares {declared}")
        taken = set(self.locals) | self.symbols
        plan: list[tuple[str, ast.expr, bool]] = []
        for k, v in enumerate(values):
            if isinstance(v, ast.Name) and v.id in self.locals and v.id not in self.params \
                    and v.id not in self.threads and all(v.id != name for name, *_ in plan):
                others = [*flat, *(w for w in values if w is not v)]
                if any(isinstance(n, ast.Name) and n.id == v.id and isinstance(n.ctx, ast.Load)
                       for node in others for n in ast.walk(node)):
                    self.hidden[v.id] = _fresh(f"{v.id}_", taken)
                    taken.add(self.hidden[v.id])
                    plan.append((v.id, v, True))
                else:
                    plan.append((v.id, v, False))
                continue
            name = _fresh("out" if len(values) == 1 else f"out{k}", taken)
            taken.add(name)
            plan.append((name, v, True))
        return plan

    def _return_lines(self, ret: ast.Return, plan: Sequence[tuple[str, ast.expr, bool]]) -> list[BodyLine]:
        src = self.src
        lines: list[BodyLine] = []
        for name, v, assign in plan:
            if assign:
                at = src.start(ret) if len(plan) == 1 else src.start(v)
                lines.extend(cut(src, src.start(v), src.end(v), self._edits([v]) + self._continued(v, v),
                                 f"{name} = ", at))
        return lines

    # -- thread style ------------------------------------------------------------------------
    def _thread_ids(self, st: ast.stmt) -> bool:
        """`i = get_global_id()`, `i, j = get_global_id(0), get_global_id(1)`: recorded, no line."""
        if not isinstance(st, ast.Assign) or len(st.targets) != 1:
            return False
        target, value = st.targets[0], st.value
        pairs = list(zip(target.elts, value.elts)) if isinstance(target, ast.Tuple) and \
            isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts) else [(target, value)]
        if not all(self._is_thread_call(v) for _, v in pairs):
            return False
        for t, v in pairs:
            if not isinstance(t, ast.Name):
                raise statement_error(self.src, t, "a thread index is assigned to a name")
            axis = self._axis(v)
            if t.id in self.threads or axis in self.threads.values():
                raise statement_error(self.src, v, f"the thread index of axis {axis} is taken twice")
            self.threads[t.id] = axis
        return True

    def _is_thread_call(self, v: ast.expr) -> bool:
        if not isinstance(v, ast.Call):
            return False
        f = v.func
        if isinstance(f, ast.Name):
            return self.names.spellings.get(f.id) == THREAD_ID or (f.id == THREAD_ID and not self.names.bound(f.id))
        return isinstance(f, ast.Attribute) and f.attr == THREAD_ID

    def _axis(self, call: ast.Call) -> int:
        args = list(call.args) + [k.value for k in call.keywords if k.arg == "axis"]
        if len(args) > 1 or any(k.arg != "axis" for k in call.keywords):
            raise statement_error(self.src, call, "get_global_id takes one argument, the axis (0, 1 or 2)")
        if not args:
            return 0
        a = args[0]
        if isinstance(a, ast.Constant) and type(a.value) is int and 0 <= a.value <= 2:
            return a.value
        raise statement_error(self.src, a, "the axis of get_global_id is 0, 1 or 2, written as a number")

    def _thread_deps(self, value: ast.expr) -> tuple[str, ...]:
        """The thread indices a value depends on, directly or through per-thread temporaries, by axis."""
        found: set[str] = set()
        for n in ast.walk(value):
            if isinstance(n, ast.Name):
                if n.id in self.threads:
                    found.add(n.id)
                found.update(self.per_thread.get(n.id, ()))
        return tuple(sorted(found, key=lambda v: self.threads[v]))

    def _guard(self, st: ast.If) -> list[Guard] | None:
        """`if i < n and j < m:` around the statements (no else): the bounds, or None."""
        if st.orelse or not self._mentions_thread(st.test):
            return None
        found = []
        for left, op, right in _comparisons(st.test, ast.And):
            g = self._bound(left, op, right, below=True)
            if g is None:
                return None
            if g is not True:
                found.append(g)
        return found

    def _exit_guard(self, st: ast.If) -> list[Guard] | None:
        """`if i >= n: return` (or `... or j >= m`) before the statements: the bounds, or None."""
        body = st.body
        if st.orelse or len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is not None \
                or not self._mentions_thread(st.test):
            return None
        found = []
        for left, op, right in _comparisons(st.test, ast.Or):
            g = self._bound(left, op, right, below=False)
            if not isinstance(g, Guard):
                return None
            found.append(g)
        return found

    def _bound(self, left: ast.expr, op: ast.cmpop, right: ast.expr, below: bool) -> "Guard | bool | None":
        """One comparison of a guard: a Guard for an upper bound, True for `0 <= i`, else None.
        `below`: the comparison says the index is in range (else: out of range)."""
        def thread(e: ast.expr) -> str | None:
            return e.id if isinstance(e, ast.Name) and e.id in self.threads else None

        flip = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}
        if thread(left) is None and thread(right) is not None and type(op) in flip:
            left, op, right = right, flip[type(op)](), left
        var = thread(left)
        if var is None:
            return None
        span = self.src.span(right)
        if below:
            if isinstance(op, ast.Lt):
                return Guard(var, right, 0, span)
            if isinstance(op, ast.LtE):
                return Guard(var, right, 1, span)
            if isinstance(op, ast.GtE) and _is_int(right, 0) or isinstance(op, ast.Gt) and _is_int(right, -1):
                return True  # 0 <= i: always so
            return None
        if isinstance(op, ast.GtE):
            return Guard(var, right, 0, span)
        if isinstance(op, ast.Gt):
            return Guard(var, right, 1, span)
        return None

    def _mentions_thread(self, test: ast.expr) -> bool:
        return bool(self.threads) and any(isinstance(n, ast.Name) and n.id in self.threads for n in ast.walk(test))


# ------------------------------------------------------------------------------ helpers
def _whole(e: ast.expr) -> bool:
    """`:` or `...` (the whole array)."""
    if isinstance(e, ast.Slice):
        return e.lower is None and e.upper is None and e.step is None
    return isinstance(e, ast.Constant) and e.value is Ellipsis


def _is_int(e: ast.expr, value: int) -> bool:
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return isinstance(e.operand, ast.Constant) and type(e.operand.value) is int and -e.operand.value == value
    return isinstance(e, ast.Constant) and type(e.value) is int and e.value == value


def _comparisons(test: ast.expr, joiner: type) -> list[tuple[ast.expr, ast.cmpop, ast.expr]]:
    """`a < b and c < d < e` as [(a, <, b), (c, <, d), (d, <, e)]; anything else gives a
    pair that no bound matches."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, joiner):
        return [p for v in test.values for p in _comparisons(v, joiner)]
    if isinstance(test, ast.Compare):
        items = [test.left, *test.comparators]
        return [(items[k], op, items[k + 1]) for k, op in enumerate(test.ops)]
    return [(test, ast.Eq(), test)]


def _check_single_assignment(src: Source, flat: Sequence[ast.stmt]) -> None:
    """A name is assigned once in a kernel. The analyzer says so too, but only after a
    returned local may have been renamed (`y_`): said here, the error names `y`."""
    first: dict[str, ast.expr] = {}
    for st in flat:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            target = st.targets[0]
            if target.id in first:
                raise statement_error(src, target, f"{target.id!r} is assigned twice (first on line "
                                      f"{first[target.id].lineno})",
                                      hint="each name is assigned exactly once; use a new name")
            first[target.id] = target


def _assigned_names(stmts: Sequence[ast.stmt]) -> set[str]:
    """Every name a statement of the function binds (Python makes it local to the function)."""
    found = set()
    for st in stmts:
        for n in ast.walk(st):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                found.add(n.id)
    return found


def _fresh(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    return name
