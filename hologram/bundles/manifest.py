"""`bundle.toml`: what a bundle holds, as values, written and read back.

The manifest is written by this module alone (`to_toml`, a small deterministic writer:
the same values give the same bytes) and read with the standard library's TOML parser,
then checked field by field (`parse`): a bundle is untrusted input, so every value has
the type and form this module gives it, or the load fails with a `BundleError` naming
the member and the field. docs/bundles.md is the reference.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from hologram.core import records
from hologram.core.errors import BundleError
from hologram.core.values import Value

# 2: native code described per target, its per-kernel details in a JSON index; 3: each
# kernel's IR as the front end built it, encoded (hologram.ir_codec), for the stream planner
FORMAT_VERSION = 3
MANIFEST = "bundle.toml"
IR_INDEX = "ir/index.json"  # {kernel: sha256 of its IR member}, JSON: read by the C parser, not in the TOML
# A bundle's name and a kernel's name become member paths: letters, digits, _ . - only,
# not starting with a dot (no hidden files, no `..`)
NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
# semver 2.0: MAJOR.MINOR.PATCH, optional -prerelease and +build
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
KINDS = ("array", "scalar")
REDUCTION_KINDS = ("min", "max", "argmin", "argmax")  # the reductions a manifest lists: those without an identity
MAX_NESTING = 16  # tables and arrays within each other: what hologram writes nests 7 deep at most
MAX_INT = 2**31 - 1  # the manifest's integers (format, isa, dsl) are small


class Port(Value):
    """An input or output as the manifest spells it: `type` is `f32[n, m]` (.hasm dims)."""

    __slots__ = ("name", "type", "kind")
    name: str
    type: str
    kind: str  # inputs: 'array' or 'scalar'; outputs are arrays

    def __init__(self, name: str, type: str, kind: str = "array") -> None:
        self._init(name=name, type=type, kind=kind)


class NativeTarget(Value):
    """Object code one backend built for one CPU, for the kernels it lists (docs/bundles.md,
    "Native code"). Kernel K's object is the member `object(K)`; the member `index` is a
    JSON object giving per kernel its object's sha256 and the backend's description of it
    (the stage table): machine-written data, read (fast, by the C JSON parser) only when
    the code is to be used or verified, so `bundle.toml` stays small to parse."""

    __slots__ = ("backend", "target", "triple", "cpu", "features", "toolchain", "kernels", "index_sha256")
    backend: str
    target: str  # x86-64-v3, host, ...
    triple: str
    cpu: str
    features: tuple[str, ...]  # every one required to run it
    toolchain: str  # what built it; the backend decides what must match before loading it
    kernels: tuple[str, ...]
    index_sha256: str

    def __init__(self, backend: str, target: str, triple: str, cpu: str, features: tuple[str, ...], toolchain: str,
                 kernels: tuple[str, ...], index_sha256: str) -> None:
        self._init(backend=backend, target=target, triple=triple, cpu=cpu, features=features, toolchain=toolchain,
                   kernels=kernels, index_sha256=index_sha256)

    @property
    def index(self) -> str:
        return f"native/{self.backend}/{self.target}/index.json"

    def object(self, kernel: str) -> str:
        return f"native/{self.backend}/{self.target}/{kernel}.o"


class Entry(Value):
    """One kernel of a bundle."""

    __slots__ = ("name", "version", "summary", "source", "source_sha256", "program", "program_sha256", "ir",
                 "symbols", "inputs", "outputs", "reductions", "stats")

    name: str
    version: str
    summary: str
    source: str  # member holding the document it was compiled from
    source_sha256: str
    program: str  # member holding its encoded program
    program_sha256: str
    ir: str  # member holding its IR's text form (after the passes)
    symbols: tuple[str, ...]
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    # (kind, ((var, extent), ...)) of each min/max/argmin/argmax: a call checks its extents
    reductions: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]
    stats: Mapping[str, Any]  # stages, instructions (before and after the passes), bytes

    def __init__(self, name: str, version: str, summary: str, source: str, source_sha256: str, program: str,
                 program_sha256: str, ir: str, symbols: tuple[str, ...], inputs: tuple[Port, ...],
                 outputs: tuple[Port, ...], reductions: tuple[tuple[str, tuple[tuple[str, str], ...]], ...],
                 stats: Mapping[str, Any]) -> None:
        self._init(name=name, version=version, summary=summary, source=source, source_sha256=source_sha256,
                   program=program, program_sha256=program_sha256, ir=ir, symbols=symbols, inputs=inputs,
                   outputs=outputs, reductions=reductions, stats=stats)

    @property
    def source_ir(self) -> str:
        """The member holding its IR as the front end built it, encoded (hologram.ir_codec):
        named by the kernel, as native objects are, and its digest in the IR index
        (`IR_INDEX`), so the manifest (parsed at every load) spends nothing on it per kernel."""
        return f"ir/{self.name}.json"


class Manifest(Value):
    """A bundle's `bundle.toml`: what it is, what built it, its kernels and native code."""

    __slots__ = ("name", "version", "isa", "hologram", "dsl", "opt", "kernels", "native", "ir_index_sha256", "format")
    name: str
    version: str
    isa: int
    hologram: str
    dsl: int
    opt: str  # the pipeline the kernels went through
    kernels: tuple[Entry, ...]
    native: tuple[NativeTarget, ...]
    ir_index_sha256: str  # of the member IR_INDEX: each kernel's IR member's sha256
    format: int

    def __init__(self, name: str, version: str, isa: int, hologram: str, dsl: int, opt: str, kernels: tuple[Entry, ...],
                 native: tuple[NativeTarget, ...] = (), ir_index_sha256: str = "", format: int = FORMAT_VERSION) -> None:
        self._init(name=name, version=version, isa=isa, hologram=hologram, dsl=dsl, opt=opt, kernels=kernels,
                   native=native, ir_index_sha256=ir_index_sha256, format=format)

    def kernel(self, name: str) -> Entry:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)


# ----------------------------------------------------------------------------- writing
def to_toml(m: Manifest) -> str:
    out = [f"format = {m.format}", f"name = {_str(m.name)}", f"version = {_str(m.version)}", f"isa = {m.isa}",
           f"hologram = {_str(m.hologram)}", f"dsl = {m.dsl}", f"opt = {_str(m.opt)}",
           f"ir_index_sha256 = {_str(m.ir_index_sha256)}"]
    for k in m.kernels:
        out += ["", "[[kernels]]"]
        for field in ("name", "version", "summary", "source", "source_sha256", "program", "program_sha256", "ir"):
            out.append(f"{field} = {_str(getattr(k, field))}")
        out.append(f"symbols = [{', '.join(map(_str, k.symbols))}]")
        out.append("inputs = " + _list([{"name": p.name, "type": p.type, "kind": p.kind} for p in k.inputs]))
        out.append("outputs = " + _list([{"name": p.name, "type": p.type} for p in k.outputs]))
        out.append("reductions = " + _list([{"kind": kind, "axes": [list(a) for a in axes]}
                                            for kind, axes in k.reductions]))
        out.append(f"stats = {_value(dict(k.stats))}")
    for n in m.native:
        out += ["", "[[native]]"]
        for field in NativeTarget._fields:
            out.append(f"{field} = {_value(getattr(n, field))}")
    return "\n".join(out) + "\n"


def write_index(entries: Mapping[str, tuple[str, Any]]) -> bytes:
    """A target's index: {kernel: {object_sha256, meta}}, as deterministic JSON."""
    return _json({k: {"object_sha256": sha, "meta": meta} for k, (sha, meta) in entries.items()})


def write_ir_index(digests: Mapping[str, str]) -> bytes:
    """The IR index: {kernel: sha256 of its IR member}, as deterministic JSON."""
    return _json(dict(digests))


def _json(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def read_index(data: bytes, target: NativeTarget) -> dict[str, tuple[str, Any]]:
    """{kernel: (object sha256, meta)} of `target`'s index, every field checked: exactly
    the kernels the manifest lists; BundleError naming the member otherwise."""
    where = target.index
    doc = _read_json(data, where, target.kernels, f"{MANIFEST} lists for {target.backend}/{target.target}")
    out = {}
    for kernel, item in doc.items():
        if not isinstance(item, dict) or set(item) != {"object_sha256", "meta"} \
                or not isinstance(item["object_sha256"], str) or not SHA256.match(item["object_sha256"]):
            raise BundleError(f"{where}: kernel {kernel!r}: expected {{object_sha256, meta}}")
        out[kernel] = (item["object_sha256"], item["meta"])
    return out


def read_ir_index(data: bytes, kernels: tuple[str, ...]) -> dict[str, str]:
    """{kernel: sha256 of its IR member}: exactly the manifest's kernels, each a sha256;
    BundleError naming the member otherwise."""
    doc = _read_json(data, IR_INDEX, kernels, f"{MANIFEST} lists")
    for kernel, digest in doc.items():
        if not isinstance(digest, str) or not SHA256.match(digest):
            raise BundleError(f"{IR_INDEX}: kernel {kernel!r}: expected a sha256 (64 hex digits)")
    return doc


def _read_json(data: bytes, where: str, kernels: tuple[str, ...], listed: str) -> dict[str, Any]:
    """An index member: a JSON object with exactly one entry per kernel of `kernels`."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BundleError(f"{where}: not JSON ({exc})") from None
    except RecursionError:
        raise BundleError(f"{where}: nested deeper than a JSON reader follows") from None
    _refuse_deep(doc, where)
    if not isinstance(doc, dict) or sorted(doc) != sorted(kernels):
        raise BundleError(f"{where}: expected an object with one entry per kernel {listed}")
    return doc


def _str(s: str) -> str:
    """A TOML basic string: `"` and `\\` escaped, control characters as \\uXXXX."""
    body = "".join(f"\\{c}" if c in '"\\' else f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c
                   for c in s)
    return f'"{body}"'


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return _str(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(map(_value, v)) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_value(x)}" for k, x in v.items()) + " }" if v else "{}"
    raise TypeError(f"no manifest spelling for {type(v).__name__}")


def _list(items: list) -> str:
    if not items:
        return "[]"
    return "[\n" + "".join(f"  {_value(i)},\n" for i in items) + "]"


# ----------------------------------------------------------------------------- reading
def parse(data: bytes, sha256: str | None = None) -> Manifest:
    """The manifest in `data`, every field checked; BundleError otherwise. `sha256`,
    when the caller has checked it is `data`'s, names the document parsed from these
    bytes by an earlier process (`_document`)."""
    doc = _document(data, sha256)
    _refuse_deep(doc, MANIFEST)
    top = _Fields(doc, MANIFEST)
    fmt = top.int("format")
    if fmt > FORMAT_VERSION:
        raise BundleError(f"{MANIFEST}: bundle format {fmt} is a newer format than this hologram reads "
                          f"({FORMAT_VERSION})", hint="install a hologram version that reads it, or rebuild the bundle")
    if fmt != FORMAT_VERSION:  # one format read: docs/decisions.md, "Bundles keep the front end's IR"
        added = " (format 3 adds each kernel's IR, which streaming along a shape symbol reads)" if fmt == 2 else ""
        raise BundleError(f"{MANIFEST}: bundle format {fmt} is not the one this hologram reads ({FORMAT_VERSION})",
                          hint=f"rebuild the bundle with this hologram{added}")
    kernels = tuple(_entry(_Fields(k, f"{MANIFEST}: kernels[{i}]")) for i, k in enumerate(top.list("kernels", dict)))
    names = [k.name for k in kernels]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise BundleError(f"{MANIFEST}: kernel {dup!r} is listed twice")
    listed = top.list("native", dict) if "native" in doc else []  # no native code: no [[native]] table
    native = tuple(_native(_Fields(n, f"{MANIFEST}: native[{i}]"), set(names)) for i, n in enumerate(listed))
    targets = [(n.backend, n.target) for n in native]
    dup_target = next((t for t in targets if targets.count(t) > 1), None)
    if dup_target is not None:
        raise BundleError(f"{MANIFEST}: native code for {'/'.join(dup_target)} is listed twice")
    m = Manifest(name=top.str("name", NAME), version=top.str("version", SEMVER), isa=top.int("isa"),
                 hologram=top.str("hologram"), dsl=top.int("dsl"), opt=top.str("opt"), kernels=kernels,
                 native=native, ir_index_sha256=top.str("ir_index_sha256", SHA256), format=fmt)
    top.done()
    return m


_KEPT = b"hologram manifest 1\n"  # a kept document: this line, the sha256 of its TOML, a line feed, JSON


def _document(data: bytes, sha256: str | None) -> dict:
    """`data` as a TOML document. A manifest's TOML takes ~3 ms to parse, and tomllib
    ~2.5 ms to import, at every load of a bundle; the parsed document is kept as JSON
    (read in ~0.1 ms by the C parser) under its bytes' sha256 (hologram.core.records,
    'manifests'), so a later process loading the same bytes reads that instead. It is
    checked field by field all the same: what is kept is only what tomllib returned."""
    if sha256 is None or SHA256.match(sha256) is None:
        return _toml(data)
    head = _KEPT + sha256.encode("ascii") + b"\n"
    kept = records.read("manifests", sha256, ".json", 4 * len(data) + 4096)
    if kept is not None and kept.startswith(head):
        try:
            doc = json.loads(kept[len(head):])
        except (ValueError, RecursionError):  # corrupt or truncated: parse the TOML
            doc = None
        if isinstance(doc, dict):
            return doc
    doc = _toml(data)
    try:  # only a document JSON gives back exactly (TOML's dates, say, it cannot)
        text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
        same = json.loads(text) == doc
    except (TypeError, ValueError, RecursionError):
        same = False
    if same:
        records.write("manifests", sha256, ".json", head + text.encode())
    return doc


def _toml(data: bytes) -> dict:
    import tomllib  # not when the document was kept (`_document`)

    try:
        return tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BundleError(f"{MANIFEST}: not a TOML document ({exc})") from None
    except RecursionError:  # tomllib reads nested arrays and tables recursively
        raise BundleError(f"{MANIFEST}: nested deeper than a TOML reader follows (a manifest nests at most "
                          f"{MAX_NESTING} levels)") from None
    except ValueError as exc:  # an integer of more digits than int() converts (sys.get_int_max_str_digits)
        raise BundleError(f"{MANIFEST}: not a TOML document this hologram reads ({exc})") from None


def _entry(f: "_Fields") -> Entry:
    e = Entry(
        name=f.str("name", NAME), version=f.str("version"), summary=f.str("summary"),
        source=f.str("source"), source_sha256=f.str("source_sha256", SHA256),
        program=f.str("program"), program_sha256=f.str("program_sha256", SHA256), ir=f.str("ir"),
        symbols=tuple(f.list("symbols", str)),
        inputs=tuple(_port(_Fields(p, f"{f.where}.inputs[{i}]"), True) for i, p in enumerate(f.list("inputs", dict))),
        outputs=tuple(_port(_Fields(p, f"{f.where}.outputs[{i}]"), False)
                      for i, p in enumerate(f.list("outputs", dict))),
        reductions=tuple(_reduction(_Fields(r, f"{f.where}.reductions[{i}]"))
                         for i, r in enumerate(f.list("reductions", dict))),
        stats=f.table("stats"))
    f.done()
    return e


def _native(f: "_Fields", kernels: set[str]) -> NativeTarget:
    n = NativeTarget(backend=f.str("backend", NAME), target=f.str("target", NAME), triple=f.str("triple"),
                     cpu=f.str("cpu"), features=tuple(f.list("features", str)), toolchain=f.str("toolchain"),
                     kernels=tuple(f.list("kernels", str)), index_sha256=f.str("index_sha256", SHA256))
    f.done()
    for k in n.kernels:
        if k not in kernels or n.kernels.count(k) > 1:
            raise BundleError(f"{f.where}.kernels: {k!r} is {'listed twice' if k in kernels else 'not a kernel'}")
    return n


def _port(f: "_Fields", is_input: bool) -> Port:
    p = Port(f.str("name"), f.str("type"), f.str("kind") if is_input else "array")
    if p.kind not in KINDS:
        raise BundleError(f"{f.where}.kind: expected one of {', '.join(KINDS)}, got {p.kind!r}")
    f.done()
    return p


def _reduction(f: "_Fields") -> tuple[str, tuple[tuple[str, str], ...]]:
    kind = f.str("kind")
    if kind not in REDUCTION_KINDS:  # a call refuses an empty extent of these only: numpy's sum of nothing is 0
        raise BundleError(f"{f.where}.kind: {kind!r} is not a reduction without an identity (expected one of "
                          f"{', '.join(REDUCTION_KINDS)})")
    axes = []
    for i, axis in enumerate(f.list("axes", list)):
        if len(axis) != 2 or not all(isinstance(x, str) for x in axis):
            raise BundleError(f"{f.where}.axes[{i}]: expected [variable, extent], two strings")
        axes.append((axis[0], axis[1]))
    f.done()
    return kind, tuple(axes)


def _refuse_deep(doc: Any, where: str) -> None:
    """Refuse a document nested deeper than MAX_NESTING: whatever reads its values later
    (`bundle inspect`, a backend reading its stage table) may recurse into them."""
    level = [doc]
    for _ in range(MAX_NESTING):
        level = [v for x in level for v in (x.values() if isinstance(x, dict) else x if isinstance(x, list) else ())]
        if not level:
            return
    raise BundleError(f"{where}: nested deeper than {MAX_NESTING} levels (what hologram writes nests less)")


class _Fields:
    """Typed access to one TOML table; `done()` refuses the keys nobody asked for."""

    def __init__(self, table: Any, where: str):
        if not isinstance(table, dict):
            raise BundleError(f"{where}: expected a table, got {type(table).__name__}")
        self.data, self.where, self.seen = table, where, set()

    def _get(self, key: str, kind: type | tuple[type, ...], what: str) -> Any:
        self.seen.add(key)
        if key not in self.data:
            raise BundleError(f"{self.where}: missing {key!r}")
        v = self.data[key]
        if not isinstance(v, kind) or isinstance(v, bool) and kind is int:
            raise BundleError(f"{self.where}.{key}: expected {what}, got {type(v).__name__}")
        return v

    def str(self, key: str, form: re.Pattern | None = None) -> str:
        v = self._get(key, str, "a string")
        if form is not None and not form.match(v):
            raise BundleError(f"{self.where}.{key}: {v!r} is not of the form {form.pattern}")
        return v

    def int(self, key: str) -> int:
        v = self._get(key, int, "an integer")
        if not -MAX_INT <= v <= MAX_INT:
            raise BundleError(f"{self.where}.{key}: {v.bit_length()}-bit integer, out of range (at most "
                              f"{MAX_INT:,} in magnitude)")
        return v

    def list(self, key: str, item: type) -> list:
        v = self._get(key, list, "an array")
        for i, x in enumerate(v):
            if not isinstance(x, item):
                raise BundleError(f"{self.where}.{key}[{i}]: expected {_NOUNS[item]}, got {type(x).__name__}")
        return v

    def table(self, key: str) -> dict:
        return self._get(key, dict, "a table")

    def done(self) -> None:
        extra = sorted(set(self.data) - self.seen)
        if extra:
            raise BundleError(f"{self.where}: unknown field {extra[0]!r}")


_NOUNS: dict[type, str] = {str: "a string", dict: "a table", list: "an array", int: "an integer"}
