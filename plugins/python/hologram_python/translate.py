"""A Python module's `@hologram.kernel` functions as `KernelDef`s (never executed).

    parameters with annotations   inputs (f32["n"], f32["m", "n"], f32 a scalar)
    the return annotation         the outputs (one type, or a tuple of types); `return`
                                  assigns them
    parameters the body writes    out-parameters: outputs (y[:] = ..., y[i] = ...)
    the docstring's first line    the summary
    @hologram.kernel(name=, version=, reassociate=)   the document's keys

The kernel is handed to the same schema as a TOML document (`kernels_from_mapping`),
as a `Located` tree whose every key and type string points into the .py file, so each
schema error (a reserved name, a shape symbol named like a parameter, a bad dimension)
underlines the function's own text. The body's lines are built by body.py.
"""

from __future__ import annotations

import ast
import functools
from typing import Any, Mapping

import attrs

from hologram.translator import (Affine, BodyOrigin, CompileError, DocumentError, KernelDef, Located, Shape, SourceText,
                                 Span, kernels_from_mapping)
from hologram_python.body import Body, BodyTranslator
from hologram_python.module import (TYPE_NAMES, Names, Source, fold, kernel_decorator, kernel_functions,
                                    module_names, parse_module)

DEFAULT_VERSION = "0.0.0"  # a kernel whose decorator gives no version= (docs/python-kernels.md)
OPTIONS = ("name", "version", "reassociate")  # the decorator's keywords that are the document's
RUNTIME_OPTIONS = ("backend", "opt", "passes")  # read by hologram.kernel when the module runs


def translate_module(text: str, file: str) -> list[KernelDef]:
    """Every `@hologram.kernel` function of the module, its decorator's options read from
    its text (the module is not running: they must be literals or module constants)."""
    module, functions = _read(text, file)
    return [module.kernel(fn) for fn in functions]


def translate_function(text: str, file: str, line: int, options: Mapping[str, Any]) -> KernelDef | None:
    """The kernel of the function whose definition (its first decorator) starts at `line`
    of the running module `text`, with `options` (name, version, reassociate: those the
    `@hologram.kernel` call was given) in place of its decorator's text; None when no
    `@hologram.kernel` function starts there."""
    module, functions = _read(text, file)
    for fn in functions:
        if line in (fn.lineno, min((d.lineno for d in fn.decorator_list), default=fn.lineno)):
            return module.kernel(fn, options)
    return None


@functools.lru_cache(maxsize=16)
def _read(text: str, file: str) -> tuple[_Module, tuple[ast.FunctionDef | ast.AsyncFunctionDef, ...]]:
    """The module parsed once, with its kernel functions: `@hologram.kernel` asks for its
    functions one at a time, and a module may hold many (the trees are only read)."""
    tree = parse_module(text, file)
    names = module_names(tree)
    return _Module(Source(text, file), SourceText.of(text, file), names), tuple(kernel_functions(tree, names))


@attrs.frozen
class _Module:
    src: Source
    text: SourceText  # the schema's position model, for `Located` values
    names: Names

    def kernel(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, given: Mapping[str, Any] | None = None) -> KernelDef:
        """The function's kernel; its decorator's options as `given` by the call, or (None)
        as its text writes them."""
        src = self.src
        if isinstance(fn, ast.AsyncFunctionDef):
            raise DocumentError("a kernel is a plain function, not async", src.name_span(fn))  # type: ignore[arg-type]
        decorator = kernel_decorator(fn, self.names)
        options = self._options(decorator) if given is None else self._given(decorator, fn, given)
        params = self._params(fn)
        returns = self._return_types(fn)
        symbols = {s for t in [*(t for _, t in params.values()), *returns] for s in _symbol_words(t.value)}
        _check_size_params(params, symbols, src)
        body = BodyTranslator(src, self.names, fn, list(params), symbols).translate(
            None if fn.returns is None else len(returns))
        if body.out_params and body.returns:
            raise CompileError("a kernel's outputs are either its return values or its out-parameters, not both",
                               src.span(body.return_node), hint=f"out-parameters here: "
                               f"{', '.join(p for p in params if p in body.out_params)}")
        if returns and not body.returns:
            raise DocumentError(f"{fn.name} declares a return type but returns nothing", src.span(fn.returns),
                                hint="end it with a return statement")
        inputs = {p: t for p, (_, t) in params.items() if p not in body.out_params}
        outputs = {p: t for p, (_, t) in params.items() if p in body.out_params}
        for (name, node), t in zip(body.returns, returns):
            outputs[name] = attrs.evolve(t, key_span=src.span(node))
        head = src.name_span(fn)
        table: dict[str, Located] = {
            "name": options.get("name") or self._string(fn.name, head),
            "version": options.get("version") or self._string(DEFAULT_VERSION, head),
            "summary": self._string(_summary(fn), head),
            "inputs": Located("table", inputs, head, head, src=self.text),
            "outputs": Located("table", outputs, head, head, src=self.text),
            "body": self._string("\n".join(line.text for line in body.lines), head),
        }
        if "reassociate" in options:
            table["reassociate"] = options["reassociate"]
        (kdef,) = kernels_from_mapping(Located("table", {"kernel": Located("table", table, head, src=self.text)},
                                               head, src=self.text))
        lines = tuple((line.line, line.cols[0] - 1) for line in body.lines) or ((fn.lineno, 0),)
        columns = tuple(line.cols for line in body.lines)
        kdef = attrs.evolve(kdef, origin=BodyOrigin(src.file, src.text, lines, columns), span=head)
        _check_guards(body, kdef, self.names, src)
        return kdef

    # -- the decorator --------------------------------------------------------------------
    def _options(self, dec: ast.expr | None) -> dict[str, Located]:
        """The options the decorator's text gives, literals or module constants."""
        if not isinstance(dec, ast.Call):
            return {}
        if dec.args:
            raise DocumentError("hologram.kernel takes keyword arguments only", self.src.span(dec.args[0]),
                                hint=f"its keywords: {', '.join(OPTIONS + RUNTIME_OPTIONS)}")
        found: dict[str, Located] = {}
        for k in dec.keywords:
            if k.arg in RUNTIME_OPTIONS:
                continue
            if k.arg not in OPTIONS:
                raise DocumentError(f"hologram.kernel has no option {k.arg or '**'!r}", self.src.span(k),
                                    hint=f"its keywords: {', '.join(OPTIONS + RUNTIME_OPTIONS)}")
            value = k.value
            if isinstance(value, ast.Name) and value.id in self.names.constants:
                constant: Any = self.names.constants[value.id]
            elif isinstance(value, ast.Constant):
                constant = value.value
            else:
                raise DocumentError(f"{k.arg}= of hologram.kernel must be written as a literal (the translator "
                                    "does not run the module)", self.src.span(value))
            found[k.arg] = Located(_kind(constant), constant, self.src.span(value), self.src.span(k), src=self.text)
        return found

    def _given(self, dec: ast.expr | None, fn: ast.FunctionDef, given: Mapping[str, Any]) -> dict[str, Located]:
        """The options a running `@hologram.kernel(...)` call received, each pointing at the
        keyword that gave it (`version=V`, or the `**options` it came in)."""
        keywords = dec.keywords if isinstance(dec, ast.Call) else []
        found: dict[str, Located] = {}
        for option in OPTIONS:
            if option not in given:
                continue
            written = next((k for k in keywords if k.arg == option), None) or \
                next((k for k in keywords if k.arg is None), None)
            span = self.src.span(written) if written is not None else self.src.span(dec or fn)
            found[option] = Located(_kind(given[option]), given[option], span, span, src=self.text)
        return found

    # -- the signature --------------------------------------------------------------------
    def _params(self, fn: ast.FunctionDef) -> dict[str, tuple[ast.arg, Located]]:
        a = fn.args
        for extra, what in ((a.vararg, "*args"), (a.kwarg, "**kwargs")):
            if extra is not None:
                raise DocumentError(f"a kernel's parameters are named one by one: no {what}", self.src.span(extra))
        if a.kwonlyargs:
            raise DocumentError("a kernel's parameters are positional (no keyword-only parameters)",
                                self.src.span(a.kwonlyargs[0]), hint="drop the '*'")
        if a.defaults:
            raise DocumentError("a kernel's parameters have no default values", self.src.span(a.defaults[0]))
        params = {}
        for arg in [*a.posonlyargs, *a.args]:
            if arg.annotation is None:
                raise DocumentError(f"parameter {arg.arg!r} has no type", self.src.span(arg),
                                    hint=f'annotate it: {arg.arg}: f32["n"] (an array) or {arg.arg}: f32 (a number)')
            line, col = self.src.start(arg)
            name = Span(self.src.file, line, col + 1, line, col + 1 + len(arg.arg), source=self.src.text)
            params[arg.arg] = (arg, self._type(arg.annotation, name))
        return params

    def _return_types(self, fn: ast.FunctionDef) -> list[Located]:
        ann = fn.returns
        if ann is None or isinstance(ann, ast.Constant) and ann.value is None:
            return []
        if isinstance(ann, ast.Tuple):
            items = ann.elts
        elif isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) and ann.value.id in ("tuple", "Tuple"):
            items = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        else:
            items = [ann]
        return [self._type(t, self.src.span(t)) for t in items]

    def _type(self, ann: ast.expr, key: Span) -> Located:
        """An annotation as a type string whose every character points at the annotation."""
        src = self.src
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):  # x: "f32[n]"
            text, chars = ann.value, self._literal_chars(ann)
        else:
            head, dims = (ann.value, ann.slice) if isinstance(ann, ast.Subscript) else (ann, None)
            dtype = self._dtype(head)
            if dtype is None:
                raise DocumentError("expected a type such as f32, f32[\"n\"] or f32[\"m\", \"n\"] (from "
                                    "hologram.types)", src.span(ann),
                                    hint=f"element types: {', '.join(TYPE_NAMES)}")
            text, chars = dtype, self._chars(head, len(dtype))
            if dims is not None:
                elts = dims.elts if isinstance(dims, ast.Tuple) else [dims]
                parts: list[tuple[str, list[int]]] = []
                for e in elts:
                    if isinstance(e, ast.Constant) and isinstance(e.value, str):
                        parts.append((e.value, self._literal_chars(e)[:-1]))
                    elif type(folded := fold(e, self.names.constants)) is int:  # 4, BINS (a module constant)
                        parts.append((str(folded), self._chars(e, len(str(folded)))))
                    else:
                        segment = ast.get_source_segment(src.text, e) or ""
                        segment = " ".join(segment.split())
                        parts.append((segment, self._chars(e, len(segment))))
                first = self._chars(elts[0], 1) if elts else self._chars(dims, 1)
                last = self._offset(src.end(ann)) - 1
                text += "["
                chars += first
                for k, (part, where) in enumerate(parts):
                    if k:
                        text += ", "
                        chars += where[:1] * 2
                    text += part
                    chars += where
                text += "]"
                chars += [last]
            chars = chars + [self._offset(src.end(ann))]
        return Located("string", text, src.span(ann), key, tuple(chars), self.text)

    def _dtype(self, head: ast.expr) -> str | None:
        names = self.names
        if isinstance(head, ast.Name):
            if head.id in names.spellings:
                spelled = names.spellings[head.id]
                return spelled if spelled in TYPE_NAMES.values() else None
            return TYPE_NAMES.get(head.id) if not names.bound(head.id) else None
        if isinstance(head, ast.Attribute) and head.attr in TYPE_NAMES:
            base = head.value
            if isinstance(base, ast.Name) and base.id in names.types:
                return TYPE_NAMES[head.attr]
            if isinstance(base, ast.Attribute) and base.attr == "types" and isinstance(base.value, ast.Name) \
                    and names.is_hologram(base.value.id):
                return TYPE_NAMES[head.attr]
        return None

    def _offset(self, at: tuple[int, int]) -> int:
        return self.src.offset(*at)

    def _chars(self, node: ast.AST, n: int) -> list[int]:
        """n character offsets spread over `node`'s text (clamped to its last character)."""
        start = self._offset(self.src.start(node))
        end = self._offset(self.src.end(node)) if self.src.end(node)[0] == self.src.start(node)[0] else start + 1
        return [min(start + k, max(end - 1, start)) for k in range(n)]

    def _literal_chars(self, node: ast.Constant) -> list[int]:
        """The offsets of a string literal's characters (exact for a literal without escapes
        or prefixes), with one past its end."""
        start, end = self._offset(self.src.start(node)), self._offset(self.src.end(node))
        raw = self.src.text[start:end]
        value = node.value
        if raw[:1] in "'\"" and len(raw) == len(value) + 2:
            return [start + 1 + k for k in range(len(value) + 1)]
        return [start] * (len(value) + 1)

    def _string(self, value: str, span: Span) -> Located:
        return Located("string", value, span, span, src=self.text)


def _check_size_params(params: Mapping[str, tuple[ast.arg, Located]], symbols: set[str], src: Source) -> None:
    """The seeds pass an array's length as a parameter (`n: u32` beside `c: f32["n"]`); a
    kernel reads its sizes from its arrays, so such a parameter is refused with that said
    (the schema would only say that two names clash)."""
    for name, (arg, t) in params.items():
        if name in symbols and "[" not in t.value:
            raise DocumentError(f"parameter {name!r} is a size: the shape symbol {name} already is the size of the "
                                "arrays declared with it, read from them at each call", t.key_span or src.span(arg),
                                hint=f"drop the parameter {name}; the body (a guard such as `idx < {name}`) reads "
                                     "the shape symbol")


def _kind(value: Any) -> str:
    """A decorator option's kind, in the schema's words."""
    return {str: "string", bool: "boolean", int: "integer", float: "float"}.get(type(value), type(value).__name__)


def _summary(fn: ast.FunctionDef) -> str:
    doc = ast.get_docstring(fn)
    return next((line.strip() for line in (doc or "").splitlines() if line.strip()), "")


def _symbol_words(type_text: str) -> set[str]:
    inside = type_text.partition("[")[2]
    return {w for w in "".join(c if c.isalnum() or c == "_" else " " for c in inside).split() if not w[0].isdigit()}


# ---------------------------------------------------------------------- thread style
def _check_guards(body: Body, kdef: KernelDef, names: Names, src: Source) -> None:
    """Index notation runs a thread index over its target's dimension: each guard must
    bound it by that dimension (or a guard would run it elsewhere)."""
    shapes = {p.name: p.shape for p in (*kdef.inputs, *kdef.outputs)}
    bounds: dict[str, tuple[Affine, Span]] = {}
    for g in body.guards:
        value = _affine(g.bound, shapes, names)
        if value is None:
            raise CompileError("a guard bounds a thread index by a shape: a shape symbol, len(a), a.shape[k], an "
                               "integer, or a sum of those", g.span)
        value = value + g.extra
        if g.var in bounds and bounds[g.var][0] != value:
            raise CompileError(f"thread index {g.var!r} is bounded twice, by {bounds[g.var][0]} and {value}", g.span)
        bounds[g.var] = (value, g.span)
    for t in body.thread_targets:
        if t.var not in bounds:
            continue
        shape: Shape = shapes.get(t.name, ())
        if t.position < len(shape) and shape[t.position] != bounds[t.var][0]:
            bound, span = bounds[t.var]
            raise CompileError(f"the guard runs {t.var} below {bound}, but {t.name}'s dimension {t.position} is "
                               f"{shape[t.position]}: the statement runs {t.var} over all of {t.name}'s dimension",
                               span, hint=f"bound {t.var} by {shape[t.position]} (len({t.name}) for the first "
                               "dimension), or write the kernel in index notation")


def _affine(node: ast.expr, shapes: Mapping[str, Shape], names: Names) -> Affine | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Affine.of(node.value)
    if isinstance(node, ast.Name):
        if any(node.id in d.symbols for shape in shapes.values() for d in shape):
            return Affine.of(node.id)
        value = names.constants.get(node.id)
        return Affine.of(value) if type(value) is int else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" \
            and len(node.args) == 1 and isinstance(node.args[0], ast.Name):
        shape = shapes.get(node.args[0].id)
        return Affine.of(shape[0]) if shape else None
    if isinstance(node, ast.Attribute) and node.attr == "size" and isinstance(node.value, ast.Name):
        shape = shapes.get(node.value.id)
        return Affine.of(shape[0]) if shape is not None and len(shape) == 1 else None
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape" \
            and isinstance(node.value.value, ast.Name) and type(k := fold(node.slice, names.constants)) is int:
        shape = shapes.get(node.value.value.id)
        return Affine.of(shape[k]) if shape is not None and -len(shape) <= k < len(shape) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        a, b = _affine(node.left, shapes, names), _affine(node.right, shapes, names)
        if a is None or b is None:
            return None
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if b.is_const:
            return a * b.const
        return b * a.const if a.is_const else None
    return None
