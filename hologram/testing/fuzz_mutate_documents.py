"""The document mutator: kernel documents (TOML, YAML, JSON), perturbed as text and as trees.

Seeds are the repository's kernel documents (`kernels/*.toml`, `tests/heldout/kernels/*`)
when the package runs from a checkout, each multi-kernel file also split into
one-kernel documents, plus `BUILTIN_SEEDS` (so an installed package fuzzes too). A
mutant applies one mutator (most often) to three:

| level | mutators |
|---|---|
| text | delete, duplicate or swap lines; delete a span; insert a fragment (structure characters, unicode: combining marks, bidi controls, U+2028, NUL, astral letters); swap two tokens; replace a token (huge numbers, identifiers, operators, type names) |
| tree | unknown keys; a value of another type (number, bool, list, table, null, a long string); type strings (another dtype, unknown dtypes, huge, zero and negative dims, huge ranks, repeated symbols, affine dims, unicode names); the same extra dimensions on every array of a kernel (high ranks that still type-check); parameters added, dropped, renamed; kernels duplicated or emptied; deep nesting (lists or tables nested hundreds deep) |
| body | identifiers, operators and literals replaced; calls wrapped (`exp(...)`, `sum(..., axis=3)`); statements duplicated or dropped; index notation (`y[i] = x[i + 5]`); long chains of statements; deeply parenthesized or nested expressions |

A tree mutation is written back in the document's own format (TOML by `to_toml`, YAML by
PyYAML, JSON by the json module). `scale` bounds the sizes of the pathological
mutations (rank, chain length, nesting): "ci" keeps them small, "long" goes as far as the
issue that asked for these fuzzers reported blowups (rank 16+, thousands of statements).

The oracle is fuzz_document_oracle.py's.
"""

from __future__ import annotations

import functools
import json
import math
import re
import tomllib
from pathlib import Path
from typing import Any, Callable

import numpy as np
import yaml

from hologram.core.types import DType
from hologram.testing.fuzz_common import pick
from hologram.testing.fuzz_document_oracle import DocumentCase

Rng = np.random.Generator
FORMATS = {".toml": "toml", ".yaml": "yaml", ".yml": "yaml", ".json": "json"}

BUILTIN_SEEDS: tuple[tuple[str, str, str], ...] = (
    ("builtin/softmax.toml", "toml", '[kernel]\nname = "softmax"\nversion = "1.0.0"\ninputs = { x = "f32[n]" }\n'
                                     'outputs = { y = "f32[n]" }\nbody = """\nm = max(x)\ne = exp(x - m)\n'
                                     'y = e / sum(e)\n"""\n'),
    ("builtin/gemm.toml", "toml", '[kernel]\nname = "gemm"\nversion = "1.0.0"\n'
                                  'inputs = { alpha = "f32", a = "f32[m, k]", b = "f32[k, n]" }\n'
                                  'outputs = { c = "f32[m, n]" }\nbody = "c[i, j] = alpha * sum(a[i, p] * b[p, j], p)"\n'),
    ("builtin/stencil.toml", "toml", '[kernel]\nname = "stencil3"\nversion = "1.0.0"\ninputs = { x = "f32[n]" }\n'
                                     'outputs = { y = "f32[n - 2]" }\nbody = "y[i] = x[i] + x[i + 1] + x[i + 2]"\n'),
    ("builtin/ints.toml", "toml", '[[kernels]]\nname = "mix"\nversion = "1.0.0"\n'
                                  'inputs = { a = "i32[n]", b = "u8[n]", s = "i64" }\n'
                                  'outputs = { y = "i32[n]", h = "f64[96]" }\nbody = """\n'
                                  'y = (a // 3) % 7 + (b >> 2) * s\nh = resonance(atlas_class(b), f64(a))\n"""\n'),
    ("builtin/pair.yaml", "yaml", 'kernels:\n  - name: square\n    version: "1.0.0"\n    inputs: {x: "f64[n]"}\n'
                                  '    outputs: {y: "f64[n]"}\n    body: y = x * x\n  - name: norm\n'
                                  '    version: "1.0.0"\n    inputs: {x: "f16[n, m]"}\n    outputs: {r: "f16[n]"}\n'
                                  '    body: |\n      s = sum(x * x, axis=1)\n      r = sqrt(s)\n'),
    ("builtin/where.json", "json", '{"kernel": {"name": "clipmax", "version": "1.0.0", "inputs": {"x": "f32[n, m]",'
                                   ' "lo": "f32"}, "outputs": {"y": "f32[n, m]", "k": "i64[n]"}, "body": '
                                   '"y = where(x > lo, x, lo)\\nk = argmax(x, axis=1)"}}'),
)

SCALES = {  # the pathological mutations' sizes
    "ci": {"rank": (4, 9), "chain": (20, 200), "nesting": (20, 150), "digits": (20, 400)},
    "long": {"rank": (8, 24), "chain": (200, 5000), "nesting": (100, 3000), "digits": (20, 6000)},
}


# ================================================================= seeds
def _repository() -> Path | None:
    root = Path(__file__).resolve().parents[2]
    return root if (root / "kernels").is_dir() else None


@functools.lru_cache(maxsize=1)
def seed_documents() -> tuple[tuple[str, str, str], ...]:
    """(name, format, text) of every seed document (see the module docstring)."""
    out: list[tuple[str, str, str]] = list(BUILTIN_SEEDS)
    root = _repository()
    if root is not None:
        paths = sorted((root / "kernels").glob("*.toml")) + sorted((root / "tests" / "heldout" / "kernels").glob("*"))
        for path in paths:
            fmt = FORMATS.get(path.suffix)
            if fmt is None:
                continue
            text = path.read_text(encoding="utf-8")
            name = str(path.relative_to(root))
            out.append((name, fmt, text))
            out += _split(name, fmt, text)
    return tuple(out)


def _split(name: str, fmt: str, text: str) -> list[tuple[str, str, str]]:
    """Each kernel of a multi-kernel document as a document of its own."""
    try:
        data = _load(fmt, text)
    except Exception:  # noqa: BLE001
        return []
    many = data.get("kernels") if isinstance(data, dict) else None
    if not isinstance(many, list) or len(many) < 2:
        return []
    return [(f"{name}#{k}", fmt, _dump(fmt, {"kernel": kern})) for k, kern in enumerate(many)]


# ================================================================= formats
def _load(fmt: str, text: str) -> Any:
    if fmt == "toml":
        return tomllib.loads(text)
    if fmt == "yaml":
        return yaml.safe_load(text)
    return json.loads(text)


def _dump(fmt: str, data: Any) -> str:
    if fmt == "toml":
        return to_toml(data)
    if fmt == "yaml":
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1 << 20)
    return json.dumps(data, ensure_ascii=False, indent=1)


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")


def _toml_string(s: str) -> str:
    out = []
    for ch in s:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif code < 0x20 or code == 0x7F or 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04X}" if code < 0xD800 else "\\uFFFD")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _toml_key(k: Any) -> str:
    k = str(k)
    return k if _BARE_KEY.match(k) else _toml_string(k)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return _toml_string(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    return '""'  # None and anything TOML cannot spell


def to_toml(data: Any) -> str:
    """TOML text for a document tree: `kernel` as a [kernel] table, `kernels` (a list of
    tables) as [[kernels]], everything else inline."""
    if not isinstance(data, dict):
        return f"value = {_toml_value(data)}\n"
    lines, tables = [], []
    for k, v in data.items():
        if k == "kernel" and isinstance(v, dict):
            tables.append((f"[{_toml_key(k)}]", v))
        elif k == "kernels" and isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            tables += [(f"[[{_toml_key(k)}]]", x) for x in v]
        else:
            lines.append(f"{_toml_key(k)} = {_toml_value(v)}")
    for header, table in tables:
        lines += ["", header] + [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


# ================================================================= text mutators
FRAGMENTS = ["[", "]", "{", "}", '"', "'", '"""', "=", ":", ",", "#", "\n", "\t", "\\", "- ", "\r\n",
             "\u0301", "\u202e", "\u2028", "\x00", "\ufeff", "\U0001d465", "\u00e9t\u00e9", "\u4e2d", "\ud800",
             "kernel", "kernels", "body", "inputs", "f32[n]", "x", "n", "sum(", ")", "**", "//", "@", ".T",
             "[:, None]", "axis=", "inf", "nan", "-", "1e309", "0x10", "99999999999999999999999"]
REPLACEMENTS = ["x", "y", "n", "m", "k", "i", "j", "p", "sum", "exp", "where", "max", "argmax", "resonance",
                "f16", "f64", "u8", "bool", "i64", "+", "-", "*", "/", "//", "%", "**", "<<", "&", "==", "and",
                "not", "(", ")", "[", "]", ",", "=", "0", "-1", "1.5", "1e308", "nan", "inf", "2**63",
                "9" * 40, "\u00e9", "\U0001d465", "len(x)", "x.T", "x[::-1]", "None", "True", "pi"]
_DOC_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|\*\*|//|<<|>>|==|[^\sA-Za-z0-9_]")


def t_lines(rng: Rng, text: str, scale: dict) -> tuple[str, str]:
    lines = text.split("\n")
    k = int(rng.integers(len(lines)))
    kind = pick(rng, ["delete", "duplicate", "swap"])
    if kind == "delete":
        del lines[k]
    elif kind == "duplicate":
        lines.insert(k, lines[k])
    else:
        j = int(rng.integers(len(lines)))
        lines[k], lines[j] = lines[j], lines[k]
    return "\n".join(lines), f"text:{kind}-line {k + 1}"


def t_span(rng: Rng, text: str, scale: dict) -> tuple[str, str]:
    at = int(rng.integers(len(text) + 1))
    if rng.random() < 0.4:
        n = int(rng.integers(1, 12))
        return text[:at] + text[at + n:], f"text:delete {n} chars at {at}"
    frag = pick(rng, FRAGMENTS)
    return text[:at] + frag + text[at:], f"text:insert {frag!r} at {at}"


def t_tokens(rng: Rng, text: str, scale: dict) -> tuple[str, str]:
    tokens = [(m.start(), m.end()) for m in _DOC_TOKEN.finditer(text)]
    if len(tokens) < 2:
        return t_span(rng, text, scale)
    a = tokens[int(rng.integers(len(tokens)))]
    if rng.random() < 0.4:
        b = tokens[int(rng.integers(len(tokens)))]
        (a, b) = sorted((a, b))
        if a == b:
            return text, "text:swap (same token)"
        ta, tb = text[a[0]:a[1]], text[b[0]:b[1]]
        return text[:a[0]] + tb + text[a[1]:b[0]] + ta + text[b[1]:], f"text:swap {ta!r} and {tb!r}"
    new = pick(rng, REPLACEMENTS)
    if rng.random() < 0.1:
        lo, hi = scale["digits"]
        new = "9" * int(rng.integers(lo, hi + 1))
    return text[:a[0]] + new + text[a[1]:], f"text:replace {text[a[0]:a[1]]!r} -> {new[:30]!r}"


# ================================================================= tree mutators
def _kernel_tables(data: Any) -> list[dict]:
    if not isinstance(data, dict):
        return []
    if isinstance(data.get("kernel"), dict):
        return [data["kernel"]]
    many = data.get("kernels")
    return [k for k in many if isinstance(k, dict)] if isinstance(many, list) else []


def _other_value(rng: Rng, scale: dict) -> Any:
    lo, hi = scale["digits"]
    # beyond ~4300 digits Python cannot write the number back: the text mutators go there
    huge = 10 ** min(int(rng.integers(lo, hi + 1)), 4000) - 1
    return pick(rng, [0, -1, 2**63, huge, 1.5, math.inf, math.nan, True,
                       None, [], ["f32[n]"], {}, {"x": "f32[n]"}, "", "x" * 10000, "f32[n]", "\u00e9"])


def a_unknown_key(rng: Rng, data: Any, scale: dict) -> str:
    tables = _kernel_tables(data) + ([data] if isinstance(data, dict) else [])
    for t in _kernel_tables(data):
        for key in ("inputs", "outputs"):
            if isinstance(t.get(key), dict):
                tables.append(t[key])
    table = pick(rng, tables)
    key = pick(rng, ["bodyy", "Kernel", "name ", "\u00e9", "reassociate", "inputs", "summary", "version", "z"])
    table[key] = _other_value(rng, scale) if rng.random() < 0.5 else "f32[n]"
    return f"tree:key {key!r}"


def a_value_type(rng: Rng, data: Any, scale: dict) -> str:
    kern = pick(rng, _kernel_tables(data))
    key = pick(rng, list(kern) or ["name"])
    kern[key] = _other_value(rng, scale)
    return f"tree:value {key} -> {type(kern[key]).__name__}"


def _type_string(rng: Rng, old: str, scale: dict) -> tuple[str, str]:
    dtype = old.split("[", 1)[0].strip() or "f32"
    kind = pick(rng, ["dtype", "dims", "rank", "rank", "repeat", "affine", "huge", "negative", "syntax"])
    dims = re.findall(r"\[(.*)\]", old)
    dims = [d.strip() for d in dims[0].split(",")] if dims and dims[0].strip() else []
    if kind == "dtype":
        dtype = pick(rng, [d.value for d in DType] + ["f128", "float32", "int", "F32", "\u0066\u0033\u0032"])
    elif kind == "dims":
        dims = [pick(rng, ["n", "m", "k", "w", "1", "0", "96", "n - 1", "2*n"]) for _ in range(int(rng.integers(4)))]
    elif kind == "rank":
        lo, hi = scale["rank"]
        dims = [f"n{j}" if rng.random() < 0.7 else "n" for j in range(int(rng.integers(lo, hi + 1)))]
    elif kind == "repeat":
        dims = dims + dims if dims else ["n", "n"]
    elif kind == "affine":
        dims = [pick(rng, ["n - w + 1", "2*n + 1", "n*m", "-n", "n - n", "0*n", "n + 2**62", "n//2", "(n)"])]
    elif kind == "huge":
        dims = [pick(rng, ["99999999999999", "2**63", str(2**64), "9" * 30])] + dims
    elif kind == "negative":
        dims = ["-1"] + dims
    else:
        return pick(rng, [f"{dtype}[", f"{dtype}[n,]", f"{dtype}[[n]]", f"{dtype} [n]", f"{dtype}[n]x", "",
                           f"{dtype}[\u00e9]", f"{dtype}[n;m]"]), "tree:type syntax"
    return (f"{dtype}[{', '.join(dims)}]" if dims or rng.random() < 0.5 else dtype), f"tree:type {kind}"


def a_param(rng: Rng, data: Any, scale: dict) -> str:
    kern = pick(rng, _kernel_tables(data))
    role = pick(rng, ["inputs", "outputs"])
    params = kern.get(role)
    if not isinstance(params, dict):
        kern[role] = {"x": "f32[n]"}
        return f"tree:param {role} replaced"
    kind = pick(rng, ["type", "type", "type", "add", "drop", "rename"])
    if kind == "add" or not params:
        name = pick(rng, ["z", "x", "y", "n", "sum", "\u00e9", "_", "a1"])
        params[name], what = _type_string(rng, "f32[n]", scale)
        return f"{what} (new {role[:-1]} {name!r} = {params[name]!r})"
    name = pick(rng, list(params))
    if kind == "drop":
        del params[name]
        return f"tree:param drop {name!r}"
    if kind == "rename":
        params[pick(rng, ["z", "n", "i", "exp", "y", "x2", "\u00e9"])] = params.pop(name)
        return f"tree:param rename {name!r}"
    old = params[name] if isinstance(params[name], str) else "f32[n]"
    params[name], what = _type_string(rng, old, scale)
    return f"{what} ({name}: {old!r} -> {params[name]!r})"


def a_dtype(rng: Rng, data: Any, scale: dict) -> str:
    """A parameter's dtype for another valid one: the kernel mostly still compiles and
    computes in other types (promotions, casts, narrow floats)."""
    kern = pick(rng, _kernel_tables(data))
    params = [(role, n) for role in ("inputs", "outputs") if isinstance(kern.get(role), dict)
              for n, t in kern[role].items() if isinstance(t, str)]
    if not params:
        return a_param(rng, data, scale)
    role, name = pick(rng, params)
    old = kern[role][name]
    dtype = pick(rng, [d.value for d in DType])
    kern[role][name] = dtype + old[len(old.split("[", 1)[0]):]
    return f"tree:dtype {name}: {old!r} -> {kern[role][name]!r}"


def a_rank_all(rng: Rng, data: Any, scale: dict) -> str:
    """The same new dimensions appended to every array parameter of a kernel, so an
    elementwise body still type-checks at a high rank."""
    kern = pick(rng, _kernel_tables(data))
    lo, hi = scale["rank"]
    extra = [f"r{j}" for j in range(int(rng.integers(lo, hi + 1)))]
    changed = 0
    for role in ("inputs", "outputs"):
        params = kern.get(role)
        if not isinstance(params, dict):
            continue
        for name, t in params.items():
            if isinstance(t, str) and t.rstrip().endswith("]"):
                params[name] = t.rstrip()[:-1] + ", " + ", ".join(extra) + "]"
                changed += 1
    return f"tree:type rank-all +{len(extra)} dims on {changed} params"


def a_kernels(rng: Rng, data: Any, scale: dict) -> str:
    kernels = _kernel_tables(data)
    kind = pick(rng, ["duplicate", "empty", "both", "wrap"])
    if kind == "duplicate":
        data.pop("kernel", None)
        data["kernels"] = kernels + [dict(pick(rng, kernels))]
    elif kind == "empty":
        data.pop("kernel", None)
        data["kernels"] = []
    elif kind == "both":
        data["kernel"], data["kernels"] = dict(kernels[0]), [dict(k) for k in kernels]
    else:
        data["kernel"] = {"kernel": kernels[0]}
    return f"tree:kernels {kind}"


def a_nesting(rng: Rng, data: Any, scale: dict) -> str:
    lo, hi = scale["nesting"]
    depth = int(rng.integers(lo, hi + 1))
    kern = pick(rng, _kernel_tables(data))
    key = pick(rng, list(kern) or ["name"])
    value: Any = kern.get(key, "x")
    as_list = rng.random() < 0.5
    for _ in range(depth):
        value = [value] if as_list else {"a": value}
    kern[key] = value
    return f"tree:nesting {key} {depth} deep in {'lists' if as_list else 'tables'}"


# ================================================================= body mutators
def _body_names(kern: dict) -> list[str]:
    names = []
    for role in ("inputs", "outputs"):
        if isinstance(kern.get(role), dict):
            names += [str(k) for k in kern[role]]
    return names or ["x", "y"]


def b_body(rng: Rng, data: Any, scale: dict) -> str:
    kern = pick(rng, _kernel_tables(data))
    body = kern.get("body") if isinstance(kern.get("body"), str) else "y = x"
    lines = [ln for ln in body.split("\n") if ln.strip()] or ["y = x"]
    names = _body_names(kern)
    outputs = [str(k) for k in kern["outputs"]] if isinstance(kern.get("outputs"), dict) and kern["outputs"] else ["y"]
    inputs = [n for n in names if n not in outputs] or ["x"]
    kind = pick(rng, ["token", "token", "operator", "operator", "literal", "wrap", "duplicate", "drop", "index",
                       "chain", "parens", "deep-call", "reduce"])
    k = int(rng.integers(len(lines)))
    # a new right-hand side goes to an existing statement's target (a new statement for
    # an output would assign it twice)
    target = lines[k].split("=", 1)[0].strip() if "=" in lines[k] else pick(rng, outputs)
    plain = re.fullmatch(r"[A-Za-z_]\w*", target) is not None
    src = pick(rng, inputs)
    if kind == "token":
        tokens = [(m.start(), m.end()) for m in _DOC_TOKEN.finditer(lines[k])]
        if tokens:
            a, b = pick(rng, tokens)
            lines[k] = lines[k][:a] + pick(rng, names + REPLACEMENTS) + lines[k][b:]
    elif kind == "operator":
        ops = [(m.start(), m.end()) for m in re.finditer(r"\*\*|//|[-+*/%<>]", lines[k].split("=", 1)[-1])]
        if ops:
            shift = len(lines[k]) - len(lines[k].split("=", 1)[-1])
            a, b = pick(rng, ops)
            lines[k] = lines[k][:a + shift] + pick(rng, ["+", "-", "*", "/", "//", "%", "**", "<", "=="]) \
                + lines[k][b + shift:]
    elif kind == "literal":
        lines[k] = re.sub(r"\b\d+(\.\d+)?\b", lambda m: pick(rng, ["0", "1", "-1", "0.5", "255", "65504.0",
                                                                    "1e38", "3"]), lines[k], count=1)
    elif kind == "wrap" and "=" in lines[k]:
        lhs, rhs = lines[k].split("=", 1)
        fn = pick(rng, ["exp", "sum", "abs", "f16", "u8", "sqrt", "argmin", "cumsum", "mean", "f64", "-"])
        extra = pick(rng, ["", "", ", axis=0", ", axis=3", ", axis=-1", ", keepdims=True", ", i"]) \
            if fn in ("sum", "argmin", "cumsum", "mean") else ""
        lines[k] = f"{lhs}= {fn}({rhs.strip()}{extra})"
    elif kind == "duplicate":
        lines.insert(k, lines[k])
    elif kind == "drop" and len(lines) > 1:
        del lines[k]
    elif kind == "index":
        name = re.match(r"[A-Za-z_]\w*", target)
        out = name.group() if name else pick(rng, outputs)
        lines[k] = pick(rng, [f"{out}[i] = {src}[i + 5]", f"{out}[i, j] = {src}[j, i]", f"{out}[i] = {src}[-1]",
                               f"{out}[i] = sum({src}[i, p], p)", f"{out}[i] = {src}[2*i + 1]",
                               f"{out}[{src}[i]] += 1", f"{out}[i] = {src}[i] * {src}[i - 1]"])
    elif kind == "chain":
        lo, hi = scale["chain"]
        n = int(rng.integers(lo, hi + 1))
        chain = [f"t_{j} = {'t_' + str(j - 1) if j else src} * 2 - {src}" for j in range(n)]
        lines[k:k + 1] = chain + [f"{target} = t_{n - 1}"]
        kind = f"chain of {n}"
    elif kind == "parens":
        lo, hi = scale["nesting"]
        n = int(rng.integers(lo, hi + 1))
        lines[k] = f"{target} = " + "(" * n + src + " + 1" + ")" * n
        kind = f"parens {n} deep"
    elif kind == "deep-call":
        lo, hi = scale["nesting"]
        n = int(rng.integers(lo, hi + 1)) // 3 + 1
        fn = pick(rng, ["abs", "exp", "f64", "-"])
        lines[k] = f"{target} = " + f"{fn}(" * n + src + ")" * n
        kind = f"calls {n} deep"
    else:
        lines[k] = f"{target} = {pick(rng, ['max', 'sum', 'argmax', 'prod', 'any', 'mean'])}({src})"
    if not plain and kind in ("parens", "reduce"):
        kind += " (indexed target)"
    kern["body"] = "\n".join(lines) + "\n"
    return f"body:{kind}"


TEXT_MUTATORS: dict[str, tuple[Callable[[Rng, str, dict], tuple[str, str]], int]] = {
    "lines": (t_lines, 2), "span": (t_span, 2), "tokens": (t_tokens, 3),
}
TREE_MUTATORS: dict[str, tuple[Callable[[Rng, Any, dict], str], int]] = {
    "unknown-key": (a_unknown_key, 1), "value-type": (a_value_type, 1), "param": (a_param, 3),
    "dtype": (a_dtype, 3), "rank-all": (a_rank_all, 1),
    "kernels": (a_kernels, 1), "nesting": (a_nesting, 1), "body": (b_body, 6),
}


def mutant(rng: Rng, seeds: tuple[tuple[str, str, str], ...], scale: str = "ci") -> DocumentCase:
    """One mutant document: one mutation (mostly) to three, each at the text level (one
    time in four) or on the tree, which is then written back in the document's format."""
    sizes = SCALES[scale]
    while True:
        origin, fmt, text = seeds[int(rng.integers(len(seeds)))]
        done: list[str] = []
        for _ in range(pick(rng, [1, 1, 1, 1, 1, 1, 2, 2, 2, 3])):
            if rng.random() < 0.25:
                names = list(TEXT_MUTATORS)
                weights = np.array([TEXT_MUTATORS[n][1] for n in names], float)
                fn = TEXT_MUTATORS[names[int(rng.choice(len(names), p=weights / weights.sum()))]][0]
                text, what = fn(rng, text, sizes)
                done.append(what)
                continue
            try:
                data = _load(fmt, text)
            except Exception:  # noqa: BLE001 - an earlier text mutation broke the syntax
                continue
            if not _kernel_tables(data):
                continue
            names = list(TREE_MUTATORS)
            weights = np.array([TREE_MUTATORS[n][1] for n in names], float)
            fn = TREE_MUTATORS[names[int(rng.choice(len(names), p=weights / weights.sum()))]][0]
            what = fn(rng, data, sizes)
            try:
                text = _dump(fmt, data)
            except (ValueError, TypeError, RecursionError, yaml.YAMLError):
                continue
            done.append(what)
        if done:
            return DocumentCase(origin, tuple(done), fmt, text, int(rng.integers(2**31)))
