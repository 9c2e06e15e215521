"""The Kernel IR as bytes: a canonical, versioned JSON encoding, and its reader.

A bundle keeps each kernel's IR as the front end built it (docs/bundles.md, "The IR
member"), so the stream planner can cut a bundle's kernel into passes without the
kernel's source and the front end; a pickled kernel carries it the same way.

    data = encode(kir)          # bytes; the same IR gives the same bytes
    kir = decode(data)          # ValueError naming the field when `data` is not one

The document is one JSON object (docs/bundles.md gives every field):

    {"format": "hologram-kernel-ir", "format_version": 1, "name", "version", "symbols",
     "reassociate", "params", "outputs", "temps", "sites", "nodes", "body"}

`nodes` is the expression DAG, children first, each node `[op, dtype, srcs, arg, site]`
with `srcs` the indices of earlier nodes; the statements of `body` name their
expressions by node index. Nodes are shared by value (sites included), so the encoding
is a function of the IR's value, not of how its objects happen to be shared. A float
constant is the 16 hex digits of its IEEE binary64 bits (exact for -0.0 and every NaN).

`decode` treats its input as untrusted: anything but a document `encode` could have
written is a ValueError saying where and what was expected, and the IR it returns is
checked to be well formed (`check`): every name declared, every index in range, every
expression's arity, every index variable bound. No half-built value escapes.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Callable

from hologram.core.dims import is_derived, parse_derived
from hologram.core.errors import Site
from hologram.core.instructions import ir_ops
from hologram.core.types import Affine, DType
from hologram.ir import (ATLAS_OPS, BINARY_OPS, LEAF_OPS, OPS, REDUCE_KINDS, SCAN_KINDS, TERNARY_OPS, UNARY_OPS,
                         Accumulate, Compute, Expr, KernelIR, OnlineMaxSum, Scan, Statement, TensorDecl,
                         statement_exprs)

FORMAT = "hologram-kernel-ir"
FORMAT_VERSION = 1
KEYS = ("format", "format_version", "name", "version", "symbols", "reassociate", "params", "outputs", "temps",
        "sites", "nodes", "body")
DECL_KINDS = {"params": ("input", "scalar"), "outputs": ("output",), "temps": ("temp",)}
NAMED_ARG_OPS = frozenset({"IDX", "SYM", "SCALAR", "LOAD"})  # arg: a name
MAX_INT = 1 << 64  # a constant is an i64 or a u64: |value| below 2**64


# ----------------------------------------------------------------------------- writing
def encode(kir: KernelIR) -> bytes:
    """`kir` as canonical JSON bytes: equal IRs (sites included) give equal bytes."""
    nodes: list[list] = []
    index: dict[tuple, int] = {}
    at: dict[int, int] = {}  # id(Expr) -> node index, for the nodes already written

    def node(root: Expr) -> int:
        for e in root.walk():
            if id(e) in at:
                continue
            srcs = [at[id(s)] for s in e.srcs]
            arg = _encode_arg(e)
            key = (e.op, e.dtype, _arg_key(arg), e.site, tuple(srcs))
            if key not in index:
                index[key] = len(nodes)
                nodes.append([e.op, e.dtype.value, srcs, arg, e.site])
            at[id(e)] = index[key]
        return at[id(root)]

    body = [_encode_statement(st, node) for st in kir.body]
    doc = {"format": FORMAT, "format_version": FORMAT_VERSION, "name": kir.name, "version": kir.version,
           "symbols": list(kir.symbols), "reassociate": kir.reassociate,
           "params": [_encode_decl(d) for d in kir.params], "outputs": [_encode_decl(d) for d in kir.outputs],
           "temps": [_encode_decl(d) for d in kir.temps],
           "sites": [[s.file, s.line, s.col, s.end_col, s.text] for s in kir.sites], "nodes": nodes, "body": body}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("ascii")


def _arg_key(arg: Any) -> Any:
    """`arg` told apart from its look-alikes: True is not 1, 1 is not 1.0."""
    return (type(arg).__name__, json.dumps(arg, sort_keys=True)) if not isinstance(arg, str) else arg


def _encode_arg(e: Expr) -> Any:
    if e.op == "CONST":
        if isinstance(e.arg, float):
            return struct.pack(">d", e.arg).hex()
        if isinstance(e.arg, (bool, int)):
            return e.arg
    elif e.op in NAMED_ARG_OPS and isinstance(e.arg, str):
        return e.arg
    elif e.op == "REDUCE":
        kind, axes = e.arg
        return [kind, [[var, _encode_affine(ext)] for var, ext in axes]]
    elif e.arg is None:
        return None
    raise ValueError(f"an IR {e.op} node holds {e.arg!r}, which the IR encoding has no form for")


def _encode_affine(a: Affine) -> list:
    return [a.const, [[name, c] for name, c in a.terms]]


def _encode_decl(d: TensorDecl) -> dict:
    return {"name": d.name, "dtype": d.dtype.value, "shape": [_encode_affine(a) for a in d.shape], "kind": d.kind}


def _encode_statement(st: Statement, node: Callable[[Expr], int]) -> dict:
    if isinstance(st, Compute):
        return {"statement": "compute", "target": st.target, "vars": list(st.vars), "body": node(st.body),
                "site": st.site}
    if isinstance(st, Accumulate):
        return {"statement": "accumulate", "target": st.target, "vars": list(st.vars),
                "extents": [_encode_affine(a) for a in st.extents], "key": node(st.key), "value": node(st.value),
                "resonance": st.resonance, "site": st.site}
    if isinstance(st, OnlineMaxSum):
        return {"statement": "online_max_sum", "target": st.target, "max_target": st.max_target,
                "axes": [[var, _encode_affine(ext)] for var, ext in st.axes], "value": node(st.value)}
    return {"statement": "scan", "target": st.target, "vars": list(st.vars), "var": st.var, "kind": st.kind,
            "value": node(st.value), "site": st.site}


# ----------------------------------------------------------------------------- reading
def decode(data: bytes) -> KernelIR:
    """The KernelIR `data` encodes, checked to be well formed; ValueError naming the
    field and what was expected otherwise (never another exception, never a partial IR)."""
    if not isinstance(data, (bytes, bytearray)):
        raise ValueError(f"expected the IR's encoding as bytes, got {type(data).__name__}")
    try:
        doc = json.loads(bytes(data).decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except RecursionError:
        raise ValueError("nested deeper than a JSON reader follows (the IR's encoding nests 5 levels)") from None
    except ValueError as exc:  # json.JSONDecodeError, or an integer of too many digits
        raise ValueError(f"not JSON ({exc})") from None
    r = _Reader()
    top = r.table(doc, "the document", KEYS)
    if top["format"] != FORMAT:
        raise ValueError(f"format: expected {FORMAT!r}, got {_short(top['format'])}")
    version = r.int(top["format_version"], "format_version", 1, 1 << 31)
    if version != FORMAT_VERSION:
        newer = "newer than" if version > FORMAT_VERSION else "not"
        raise ValueError(f"format_version: {version} is {newer} the IR encoding this hologram reads "
                         f"({FORMAT_VERSION})")
    symbols = tuple(r.str(s, f"symbols[{i}]") for i, s in enumerate(r.list(top["symbols"], "symbols")))
    decls = {part: tuple(r.decl(d, f"{part}[{i}]", DECL_KINDS[part]) for i, d in enumerate(r.list(top[part], part)))
             for part in DECL_KINDS}
    sites = tuple(r.site(s, f"sites[{i}]") for i, s in enumerate(r.list(top["sites"], "sites")))
    nodes: list[Expr] = []
    for i, n in enumerate(r.list(top["nodes"], "nodes")):
        nodes.append(r.node(n, f"nodes[{i}]", nodes, len(sites)))
    body = tuple(r.statement(s, f"body[{i}]", nodes, len(sites)) for i, s in enumerate(r.list(top["body"], "body")))
    kir = KernelIR(r.str(top["name"], "name"), r.str(top["version"], "version"), decls["params"], decls["outputs"],
                   decls["temps"], body, symbols, r.bool(top["reassociate"], "reassociate"), sites)
    try:
        check(kir)
    except RecursionError:  # a derived symbol's name nested past the stack
        raise ValueError("a symbol's name nests deeper than this hologram reads") from None
    return kir


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Reader:
    """Typed access to the decoded JSON: each method returns its value or raises a
    ValueError naming where (`where`) and what was expected."""

    def table(self, value: Any, where: str, keys: tuple[str, ...]) -> dict:
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected an object, got {_kind(value)}")
        missing = [k for k in keys if k not in value]
        if missing:
            raise ValueError(f"{where}: missing {missing[0]!r}")
        extra = sorted(set(value) - set(keys))
        if extra:
            raise ValueError(f"{where}: unknown field {_short(extra[0])}")
        return value

    def list(self, value: Any, where: str, length: int | None = None) -> list:
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected an array, got {_kind(value)}")
        if length is not None and len(value) != length:
            raise ValueError(f"{where}: expected {length} items, got {len(value)}")
        return value

    def str(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise ValueError(f"{where}: expected a string, got {_kind(value)}")
        return value

    def bool(self, value: Any, where: str) -> bool:
        if not isinstance(value, bool):
            raise ValueError(f"{where}: expected true or false, got {_kind(value)}")
        return value

    def int(self, value: Any, where: str, low: int, high: int) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{where}: expected an integer, got {_kind(value)}")
        if not low <= value < high:
            raise ValueError(f"{where}: {value} is out of range (expected {low} <= value < {high})")
        return value

    def index(self, value: Any, where: str, count: int, what: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < count:
            raise ValueError(f"{where}: expected the index of {what} (0 to {count - 1}), got {_short(value)}"
                             if count else f"{where}: expected the index of {what}, and there is none")
        return value

    def site_index(self, value: Any, where: str, sites: int) -> int | None:
        return None if value is None else self.index(value, where, sites, "a site")

    def dtype(self, value: Any, where: str) -> DType:
        try:
            return DType.parse(self.str(value, where))
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None

    def affine(self, value: Any, where: str) -> Affine:
        const, terms = self.list(value, where, 2)
        const = self.int(const, f"{where}[0]", -MAX_INT, MAX_INT)
        out = []
        for i, term in enumerate(self.list(terms, f"{where}[1]")):
            name, c = self.list(term, f"{where}[1][{i}]", 2)
            out.append((self.str(name, f"{where}[1][{i}][0]"), self.int(c, f"{where}[1][{i}][1]", -MAX_INT, MAX_INT)))
        a = Affine(const, tuple(out))
        if a.terms != tuple(out):  # one encoding per dimension: what `encode` writes
            raise ValueError(f"{where}: expected its terms sorted by symbol, each symbol once, no zero coefficient")
        return a

    def names(self, value: Any, where: str) -> tuple[str, ...]:
        return tuple(self.str(v, f"{where}[{i}]") for i, v in enumerate(self.list(value, where)))

    def decl(self, value: Any, where: str, kinds: tuple[str, ...]) -> TensorDecl:
        d = self.table(value, where, ("name", "dtype", "shape", "kind"))
        kind = self.str(d["kind"], f"{where}.kind")
        if kind not in kinds:
            raise ValueError(f"{where}.kind: expected {' or '.join(map(repr, kinds))}, got {_short(kind)}")
        shape = tuple(self.affine(a, f"{where}.shape[{i}]") for i, a in enumerate(self.list(d["shape"], f"{where}.shape")))
        return TensorDecl(self.str(d["name"], f"{where}.name"), self.dtype(d["dtype"], f"{where}.dtype"), shape, kind)

    def site(self, value: Any, where: str) -> Site:
        file, line, col, end_col, text = self.list(value, where, 5)
        return Site(self.str(file, f"{where}[0]"), self.int(line, f"{where}[1]", 0, 1 << 31),
                    self.int(col, f"{where}[2]", 0, 1 << 31), self.int(end_col, f"{where}[3]", 0, 1 << 31),
                    self.str(text, f"{where}[4]"))

    def node(self, value: Any, where: str, nodes: list[Expr], sites: int) -> Expr:
        op, dtype, srcs, arg, site = self.list(value, where, 5)
        op = self.str(op, f"{where}[0]")
        if op not in OPS:
            raise ValueError(f"{where}[0]: {_short(op)} is not an IR op")
        dtype = self.dtype(dtype, f"{where}[1]")
        srcs = tuple(nodes[self.index(s, f"{where}[2][{i}]", len(nodes), "an earlier node")]
                     for i, s in enumerate(self.list(srcs, f"{where}[2]")))
        arity = _arity(op)
        if arity is not None and len(srcs) != arity:
            raise ValueError(f"{where}: {op} takes {arity} operand{'s' if arity != 1 else ''}, got {len(srcs)}")
        e = Expr(op, dtype, srcs, self.arg(op, arg, f"{where}[3]"), self.site_index(site, f"{where}[4]", sites))
        hash(e)  # cached bottom-up now: hashing a deep chain first at its root would recurse its whole depth
        return e

    def arg(self, op: str, value: Any, where: str) -> Any:
        if op == "CONST":
            if isinstance(value, bool):
                return value
            if isinstance(value, int):
                return self.int(value, where, -MAX_INT, MAX_INT)
            if isinstance(value, str) and len(value) == 16 and all(c in "0123456789abcdef" for c in value):
                return struct.unpack(">d", bytes.fromhex(value))[0]
            raise ValueError(f"{where}: expected a constant (true/false, an integer, or 16 lower-case hex digits of "
                             f"a float's bits), got {_short(value)}")
        if op in NAMED_ARG_OPS:
            return self.str(value, where)
        if op == "REDUCE":
            kind, axes = self.list(value, where, 2)
            if kind not in REDUCE_KINDS:
                raise ValueError(f"{where}[0]: expected one of {', '.join(REDUCE_KINDS)}, got {_short(kind)}")
            return kind, self.axes(axes, f"{where}[1]")
        if value is not None:
            raise ValueError(f"{where}: a {op} node has no argument (null), got {_short(value)}")
        return None

    def axes(self, value: Any, where: str) -> tuple[tuple[str, Affine], ...]:
        out = []
        for i, axis in enumerate(self.list(value, where)):
            var, ext = self.list(axis, f"{where}[{i}]", 2)
            out.append((self.str(var, f"{where}[{i}][0]"), self.affine(ext, f"{where}[{i}][1]")))
        return tuple(out)

    def statement(self, value: Any, where: str, nodes: list[Expr], sites: int) -> Statement:
        if not isinstance(value, dict) or value.get("statement") not in _STATEMENT_KEYS:
            raise ValueError(f"{where}: expected an object whose 'statement' is one of "
                             f"{', '.join(_STATEMENT_KEYS)}")
        kind = value["statement"]
        s = self.table(value, where, _STATEMENT_KEYS[kind])

        def expr(key: str) -> Expr:
            return nodes[self.index(s[key], f"{where}.{key}", len(nodes), "a node")]

        target = self.str(s["target"], f"{where}.target")
        if kind == "online_max_sum":
            return OnlineMaxSum(target, self.str(s["max_target"], f"{where}.max_target"),
                                self.axes(s["axes"], f"{where}.axes"), expr("value"))
        vars_ = self.names(s["vars"], f"{where}.vars")
        site = self.site_index(s["site"], f"{where}.site", sites)
        if kind == "compute":
            return Compute(target, vars_, expr("body"), site)
        if kind == "accumulate":
            extents = tuple(self.affine(a, f"{where}.extents[{i}]")
                            for i, a in enumerate(self.list(s["extents"], f"{where}.extents")))
            return Accumulate(target, vars_, extents, expr("key"), expr("value"),
                              self.bool(s["resonance"], f"{where}.resonance"), site)
        var, scan = self.str(s["var"], f"{where}.var"), self.str(s["kind"], f"{where}.kind")
        if scan not in SCAN_KINDS or var not in vars_:
            raise ValueError(f"{where}: expected a scan kind of {', '.join(SCAN_KINDS)} along one of its vars, got "
                             f"{_short(scan)} along {_short(var)}")
        return Scan(target, vars_, var, scan, expr("value"), site)


_STATEMENT_KEYS = {
    "compute": ("statement", "target", "vars", "body", "site"),
    "accumulate": ("statement", "target", "vars", "extents", "key", "value", "resonance", "site"),
    "online_max_sum": ("statement", "target", "max_target", "axes", "value"),
    "scan": ("statement", "target", "vars", "var", "kind", "value", "site"),
}


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _arity(op: str) -> int | None:
    """How many operands `op` takes; None for LOAD (one per dimension of its array)."""
    if op in LEAF_OPS:
        return 0
    if op in UNARY_OPS or op == "REDUCE":
        return 1
    if op in BINARY_OPS:
        return 2
    if op in TERNARY_OPS:
        return 3
    if op in ATLAS_OPS:
        return ir_ops()[op].arity
    return None


# ------------------------------------------------------------------------ well formed
def check(kir: KernelIR) -> None:
    """Refuse (ValueError, naming the part) an IR the lowering could not take as the
    front end's: a name used and not declared, or declared twice; a target that is not
    an output or temporary; a load with the wrong number of indices or type; a scalar
    or symbol that is not the kernel's; an index variable no statement or reduction binds."""
    decls: dict[str, TensorDecl] = {}
    for d in kir.params + kir.outputs + kir.temps:
        if d.name in decls:
            raise ValueError(f"array {d.name!r} is declared twice")
        if d.kind == "scalar" and d.shape:
            raise ValueError(f"scalar {d.name!r} has a shape")
        decls[d.name] = d
        for a in d.shape:
            _check_symbols(a, kir.symbols, f"the shape of {d.name!r}")
    if len(set(kir.symbols)) != len(kir.symbols) or any(is_derived(s) for s in kir.symbols):
        raise ValueError(f"symbols: expected distinct identifiers, got {list(kir.symbols)}")
    for i, st in enumerate(kir.body):
        where = f"body[{i}]"
        for target in ((st.max_target, st.target) if isinstance(st, OnlineMaxSum) else (st.target,)):
            d = decls.get(target)
            if d is None or d.kind not in ("output", "temp"):
                raise ValueError(f"{where}: assigns {target!r}, which is not an output or temporary of the kernel")
            if isinstance(st, OnlineMaxSum) and d.shape:
                raise ValueError(f"{where}: online_max_sum_exp assigns {target!r}, which is not 0-d")
        if isinstance(st, (Compute, Scan)) and len(st.vars) != len(decls[st.target].shape):
            raise ValueError(f"{where}: {len(st.vars)} index variables for {st.target!r}, which has "
                             f"{len(decls[st.target].shape)} dimensions")
        if isinstance(st, Accumulate):
            if len(st.vars) != len(st.extents):
                raise ValueError(f"{where}: {len(st.vars)} index variables over {len(st.extents)} extents")
            for a in st.extents:
                _check_symbols(a, kir.symbols, f"{where}: an extent")
        bound = frozenset(v for v, _ in st.axes) if isinstance(st, OnlineMaxSum) else frozenset(st.vars)
        for e in statement_exprs(st):
            _check_expr(e, decls, kir, where)
            free = e.free_vars() - bound
            if free:
                raise ValueError(f"{where}: index variable {sorted(free)[0]!r} is bound by no statement or reduction")


def _check_expr(root: Expr, decls: dict[str, TensorDecl], kir: KernelIR, where: str) -> None:
    for e in root.walk():
        if e.op == "LOAD":
            d = decls.get(e.arg)
            if d is None or d.kind == "scalar":
                raise ValueError(f"{where}: loads {e.arg!r}, which is not an array of the kernel")
            if len(e.srcs) != len(d.shape) or e.dtype != d.dtype:
                raise ValueError(f"{where}: a load of {e.arg!r} ({d.dtype}, {len(d.shape)} dimensions) as "
                                 f"{e.dtype} with {len(e.srcs)} indices")
        elif e.op == "SCALAR":
            d = decls.get(e.arg)
            if d is None or d.kind != "scalar":
                raise ValueError(f"{where}: reads {e.arg!r}, which is not a scalar of the kernel")
        elif e.op == "SYM":
            _check_symbols(Affine.of(e.arg), kir.symbols, where)
        elif e.op == "REDUCE":
            for _, ext in e.arg[1]:
                _check_symbols(ext, kir.symbols, f"{where}: a reduction's extent")
        if e.site is not None and e.site >= len(kir.sites):
            raise ValueError(f"{where}: site {e.site} of {len(kir.sites)}")


def _check_symbols(a: Affine, symbols: tuple[str, ...], where: str) -> None:
    for name in a.symbols:
        if name in symbols:
            continue
        derived = parse_derived(name) if is_derived(name) else None
        if derived is None:
            raise ValueError(f"{where}: {name!r} is not one of the kernel's symbols ({', '.join(symbols) or 'none'})")
        for part in (derived.a, derived.b):
            _check_symbols(part, symbols, where)
