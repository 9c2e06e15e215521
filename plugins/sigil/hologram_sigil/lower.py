"""A circuit as a kernel body: the DSL statements that compute the class buffer it leaves.

The circuit runs symbolically over the classes. Each class holds a value: its row of
the input (`x[k, i]`), a row temporary (`r3[i]`) or a scalar (`s4`, what a reduction
left, in every element of its class). `copy`, `swap`, `quote` and `evaluate` only move
values between classes and slots, so they cost nothing; `mark`, `merge`, `split` and
the reductions each write one statement over values already named, so no expression
is ever copied. The last statement assembles the output from the classes whose value
changed, choosing by class with `where`:

    copy@c05->c06 . merge_exp@c01[c06] . reduce_sum@c01->c02
    =>  r1[i] = exp(x[5, i])
        s2 = sum(r1[i], i)
        y[c, i] = where(c < 2, where(c == 1, r1[i], x[c, i]), where(c < 6, where(c == 2, s2, x[c, i]),
                        where(c == 6, x[5, i], x[c, i])))

The optimizer's `fuse` pass then inlines the row temporaries into their consumers: the
kernel is one stage per reduction plus one 96 x width stage writing the buffer once.
"""

from __future__ import annotations

import attrs

from hologram_sigil.circuit import CLASSES, SLOTS, Gen, Node, Par, Pos, Seq, writes

Value = tuple[str, object]  # ("x", k): row k of the input; ("row", name); ("scalar", name)

# The DSL spelling of each operation (hologram.core.semantics.ORACLE names); operands are
# always names or loads, so no parentheses are needed.
SPELLING = {"+": "{0} + {1}", "-": "{0} - {1}", "*": "{0} * {1}", "/": "{0} / {1}",
            "minimum": "minimum({0}, {1})", "maximum": "maximum({0}, {1})", "neg": "-{0}", "abs": "abs({0})",
            "exp": "exp({0})", "log": "log({0})", "sqrt": "sqrt({0})", "sigmoid": "sigmoid({0})",
            "tanh": "tanh({0})", "relu": "relu({0})"}


@attrs.frozen
class Body:
    """The kernel body's text, and for each of its lines the generator it comes from
    (None: the last statement, which comes from the whole circuit)."""

    text: str
    lines: tuple[Pos | None, ...]


def lower(node: Node, width: int) -> Body:
    """The body of the kernel `y = circuit(x)` over f32[96, width] buffers."""
    w = _Writer(width)
    env: dict[int, Value] = {k: ("x", k) for k in range(CLASSES)}
    w.run(node, env)
    changed = [(k, env[k]) for k in range(CLASSES) if env[k] != ("x", k)]
    w.line(f"y[c, i] = {_choose(changed, w)}" if changed else "y[c, i] = x[c, i]", None)
    return Body("\n".join(w.lines) + "\n", tuple(w.at))


class _Writer:
    def __init__(self, width: int):
        self.width = width
        self.lines: list[str] = []
        self.at: list[Pos | None] = []
        self.count = 0

    def line(self, text: str, at: Pos | None) -> None:
        self.lines.append(text)
        self.at.append(at)

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    # The walk below does what model.py's does, over names instead of arrays, on purpose:
    # the model is the oracle this lowering is tested against, so they share no code.
    def run(self, node: Node, env: dict[int, Value]) -> None:
        if isinstance(node, Seq):
            for step in node.steps:
                self.run(step, env)
        elif isinstance(node, Par):
            before = dict(env)
            for branch in node.branches:  # every branch starts from the state before the block
                mine = dict(before)
                self.run(branch, mine)
                env.update({r: mine[r] for r in writes(branch)})
        else:
            self.generator(node, env)

    def generator(self, g: Gen, env: dict[int, Value]) -> None:
        c = g.classes
        if g.kind == "copy":
            env[c[1]] = env[c[0]]
        elif g.kind == "swap":
            env[c[0]], env[c[1]] = env[c[1]], env[c[0]]
        elif g.kind == "quote":
            env[SLOTS + c[0]] = env[c[0]]
        elif g.kind == "evaluate":
            env[c[0]] = env[SLOTS + c[0]]
        elif g.kind == "reduce":
            env[c[1]] = self.reduction(g, env[c[0]])
        else:  # mark, merge, split: one elementwise operation
            target = c[0]
            operands = [env[target]] if g.kind == "mark" else [env[k] for k in c[1:]]
            expr = SPELLING[g.op].format(*(self.ref(v) for v in operands))
            if all(v[0] == "scalar" for v in operands):
                env[target] = ("scalar", self.name("s"))
                self.line(f"{env[target][1]} = {expr}", g.at)
            else:
                env[target] = ("row", self.name("r"))
                self.line(f"{env[target][1]}[i] = {expr}", g.at)

    def reduction(self, g: Gen, v: Value) -> Value:
        """A scalar: the reduction of a row over its `width` elements. A scalar's row is
        `width` copies of it, reduced as such (a sum rounds as numpy's would)."""
        name = self.name("s")
        if v[0] == "scalar":
            row = f"where(i < {self.width}, {v[1]}, {v[1]}), i in range({self.width})"
        else:
            row = f"{self.ref(v)}, i"
        self.line(f"{name} = {g.variant}({row})", g.at)
        return ("scalar", name)

    @staticmethod
    def ref(v: Value) -> str:
        kind, what = v
        if kind == "x":
            return f"x[{what}, i]"
        return f"{what}[i]" if kind == "row" else str(what)


def _choose(changed: list[tuple[int, Value]], w: _Writer) -> str:
    """`where` over the class index `c`, a balanced tree of comparisons (depth log2 of
    the classes changed, so a kernel body never nests deeply)."""
    if len(changed) == 1:
        (k, v), = changed
        return f"where(c == {k}, {w.ref(v)}, x[c, i])"
    mid = len(changed) // 2
    return f"where(c < {changed[mid][0]}, {_choose(changed[:mid], w)}, {_choose(changed[mid:], w)})"
