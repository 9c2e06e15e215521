"""A Python module as the translator sees it: its text with positions, what its
module-level names are bound to, and which functions are kernels.

Nothing is executed. Names are resolved from the module's own statements: imports of
numpy, hologram and hologram.types, and module-level constants (a name assigned once, at
the top level, to an int, float or bool, or an arithmetic expression of those), which a
kernel's body may read and which the translator folds into its text.
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Callable, Iterator, Mapping

import attrs

from hologram.translator import DocumentError, Span

Constant = int | float | bool

# hologram.types' names and the element types they stand for (`bool_` is `bool`)
DTYPES = ("bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "f32", "f64")
TYPE_NAMES: Mapping[str, str] = {**{d: d for d in DTYPES}, "bool_": "bool"}
THREAD_ID = "get_global_id"


class Source:
    """The module's text, with `ast`'s positions (1-based lines, UTF-8 byte columns) as
    character offsets and spans."""

    def __init__(self, text: str, file: str):
        self.text, self.file = text, file
        self.lines = text.split("\n")
        self.starts = [0]
        for line in self.lines[:-1]:
            self.starts.append(self.starts[-1] + len(line) + 1)

    def col(self, lineno: int, byte_col: int) -> int:
        """The 0-based character column of a UTF-8 byte column on line `lineno`."""
        line = self.lines[lineno - 1] if 0 < lineno <= len(self.lines) else ""
        if line.isascii():
            return byte_col
        return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))

    def start(self, node: ast.AST) -> tuple[int, int]:
        """(line, 0-based char column) where `node` starts."""
        return node.lineno, self.col(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> tuple[int, int]:
        return node.end_lineno, self.col(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]

    def offset(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def span(self, node: ast.AST) -> Span:
        (line, col), (end_line, end_col) = self.start(node), self.end(node)
        if end_line != line:  # the first line, to its end: what an excerpt can underline
            end_col = len(self.lines[line - 1])
        return Span(self.file, line, col + 1, line, max(end_col, col + 1) + 1, source=self.text)

    def name_span(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> Span:
        """The function's name in its `def` line: where a kernel is."""
        line = node.lineno
        text = self.lines[line - 1]
        at = text.find(node.name, text.find("def ") + 4)
        at = at if at >= 0 else 0
        return Span(self.file, line, at + 1, line, at + len(node.name) + 1, source=self.text)


def parse_module(text: str, file: str) -> ast.Module:
    """The module's syntax tree; a SyntaxError is a DocumentError at its position."""
    try:
        return ast.parse(text, file)
    except SyntaxError as exc:
        line = exc.lineno or 1
        col = exc.offset or 1
        end = exc.end_offset if exc.end_lineno in (None, line) and exc.end_offset and exc.end_offset > col else col + 1
        src = Source(text, file)
        line_text = src.lines[line - 1] if 0 < line <= len(src.lines) else ""
        # SyntaxError's offsets count characters already (1-based)
        span = Span(file, line, min(col, len(line_text) + 1), line, min(end, len(line_text) + 2), source=text)
        raise DocumentError(f"invalid Python: {exc.msg}", span) from None
    except ValueError as exc:  # a NUL byte
        raise DocumentError(f"invalid Python: {exc}", Span(file, 1, 1, source=text)) from None


# ----------------------------------------------------------------------- bindings
@attrs.frozen
class Names:
    """What the module's top-level names are bound to."""

    numpy: frozenset[str]  # the numpy module (`import numpy as np`)
    hologram: frozenset[str]  # the hologram package (`import hologram as hg`)
    types: frozenset[str]  # hologram.types (`import hologram.types as T`, `from hologram import types`)
    kernel: frozenset[str]  # hologram.kernel itself (`from hologram import kernel`)
    spellings: Mapping[str, str]  # a name the body may use -> its spelling in the kernel language
    constants: Mapping[str, Constant]
    others: Mapping[str, str]  # any other module-level name -> what it is, for the error

    def is_hologram(self, name: str) -> bool:
        """`hg` and `hologram` name the package when imported so, or when not bound at all
        (a file written for `hologram translate` alone may skip the import)."""
        return name in self.hologram or (name in ("hg", "hologram") and not self.bound(name))

    def bound(self, name: str) -> bool:
        return (name in self.numpy or name in self.hologram or name in self.types or name in self.kernel
                or name in self.spellings or name in self.constants or name in self.others)


def module_names(tree: ast.Module) -> Names:
    numpy: set[str] = set()
    hologram: set[str] = set()
    types: set[str] = set()
    kernel: set[str] = set()
    spellings: dict[str, str] = {}
    what: dict[str, str] = {}  # every other binding, last word wins
    count: dict[str, int] = {}
    assigned: dict[str, ast.expr] = {}

    def bind(name: str, description: str) -> None:
        count[name] = count.get(name, 0) + 1
        what[name] = description

    for node in _top_level(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                bound = a.asname or a.name.partition(".")[0]
                module = a.name if a.asname else a.name.partition(".")[0]
                count[bound] = count.get(bound, 0) + 1
                if module == "numpy":
                    numpy.add(bound)
                elif module == "hologram":
                    hologram.add(bound)
                elif module == "hologram.types":
                    types.add(bound)
                else:
                    what[bound] = f"the module {module!r}"
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module == "hologram.types" and any(a.name == "*" for a in node.names):
                for name, dtype in {**TYPE_NAMES, THREAD_ID: THREAD_ID}.items():
                    count[name] = count.get(name, 0) + 1
                    spellings[name] = dtype
                continue
            for a in node.names:
                bound = a.asname or a.name
                count[bound] = count.get(bound, 0) + 1
                if node.level == 0 and node.module == "numpy":
                    spellings[bound] = a.name  # np's function or type by its own name (DSL checks it)
                elif node.level == 0 and node.module == "hologram" and a.name == "kernel":
                    kernel.add(bound)
                elif node.level == 0 and node.module == "hologram" and a.name == "types":
                    types.add(bound)
                elif node.level == 0 and node.module == "hologram.types" and a.name in TYPE_NAMES:
                    spellings[bound] = TYPE_NAMES[a.name]
                elif node.level == 0 and node.module == "hologram.types" and a.name == THREAD_ID:
                    spellings[bound] = THREAD_ID
                else:
                    what[bound] = f"imported from {'.' * node.level}{node.module or ''}"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            bind(node.name, "a function")
        elif isinstance(node, ast.ClassDef):
            bind(node.name, "a class")
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.With,
                               ast.AsyncWith, ast.NamedExpr, ast.ExceptHandler, ast.Delete)):
            for name in _bound_names(node):
                bind(name, "a module-level variable")
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                assigned[node.targets[0].id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                assigned[node.target.id] = node.value
    constants: dict[str, Constant] = {}
    others: dict[str, str] = {}
    for name, n in count.items():
        if name in numpy or name in hologram or name in types or name in kernel or name in spellings:
            if n > 1:
                others[name] = "bound more than once"
            continue
        value = fold(assigned[name], constants) if n == 1 and name in assigned else None
        if value is not None:
            constants[name] = value
        else:
            others[name] = what.get(name, "a module-level variable") if n == 1 else "assigned more than once"
    multiple = {k for k, n in count.items() if n > 1}
    return Names(frozenset(numpy - multiple), frozenset(hologram - multiple), frozenset(types - multiple),
                 frozenset(kernel - multiple), {k: v for k, v in spellings.items() if k not in multiple},
                 constants, others)


def _top_level(tree: ast.Module) -> Iterator[ast.AST]:
    """The module's statements in order, through if/try/with/for blocks, not into
    functions or classes (whose bodies bind their own names), with the walrus targets of
    module-level expressions."""
    stack = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        children = [c for c in ast.iter_child_nodes(node)]
        stack.extend(reversed(children))


def _bound_names(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.NamedExpr)):
        targets = [node.target]
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
    elif isinstance(node, ast.ExceptHandler):
        return [node.name] if node.name else []
    elif isinstance(node, ast.Delete):
        targets = node.targets
    else:
        return []
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


# ------------------------------------------------------------------------ folding
_BINARY: Mapping[type, Callable[[Constant, Constant], Constant]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_MAX_BITS = 4096  # a folded integer past this is not a constant here (`2 ** 10**9` is not computed)


def fold(node: ast.expr, env: Mapping[str, Constant]) -> Constant | None:
    """The value of a constant expression (numbers, bools, names of constants folded
    before, unary and binary arithmetic), as Python computes it; None for anything else."""
    try:
        value = _fold(node, env)
    except (ArithmeticError, ValueError):
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > _MAX_BITS:
        return None
    return value


def _fold(node: ast.expr, env: Mapping[str, Constant]) -> Constant | None:
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) in (int, float, bool) else None
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.UnaryOp):
        v = _fold(node.operand, env)
        if v is None:
            return None
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.UAdd):
            return +v
        if isinstance(node.op, ast.Not):
            return not v
        if isinstance(node.op, ast.Invert) and isinstance(v, int):
            return ~v
        return None
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        a, b = _fold(node.left, env), _fold(node.right, env)
        if a is None or b is None:
            return None
        if isinstance(node.op, ast.Pow) and isinstance(a, int) and isinstance(b, int) and \
                abs(b) * max(abs(a), 2).bit_length() > _MAX_BITS:
            return None
        return _BINARY[type(node.op)](a, b)
    return None


def literal(value: Constant) -> str:
    """The kernel-language text of a folded constant: a weak literal, as the Python
    number is in numpy (NEP 50); parenthesized when negative, so `x ** N` keeps its meaning."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        text = "inf" if math.isinf(value) else repr(abs(value))
        return f"(-{text})" if math.copysign(1.0, value) < 0 else text
    return f"({value})" if value < 0 else str(value)


# ------------------------------------------------------------------------- kernels
def kernel_decorator(node: ast.AST, names: Names) -> ast.expr | None:
    """The `@hologram.kernel` (or `@hologram.kernel(...)`) decorator of a function, if any."""
    for dec in getattr(node, "decorator_list", ()):
        target = dec.func if isinstance(dec, ast.Call) else dec
        if isinstance(target, ast.Name) and target.id in names.kernel:
            return dec
        if isinstance(target, ast.Attribute) and target.attr == "kernel" and isinstance(target.value, ast.Name) \
                and names.is_hologram(target.value.id):
            return dec
    return None


def kernel_functions(tree: ast.Module, names: Names) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every decorated kernel of the module, nested ones too, in source order."""
    found = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
             and kernel_decorator(n, names) is not None]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def has_kernels(text: str) -> bool:
    """Whether the module has a `@hologram.kernel` function; a module that is not valid
    Python is claimed when it spells the decorator, so its error is reported."""
    if "kernel" not in text:
        return False
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return "@" in text
    return bool(kernel_functions(tree, module_names(tree)))
