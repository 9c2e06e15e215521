"""Loading a bundle: an archive in, a `Library` of ready kernels out, no compiler work.

    lib = hologram.load_bundle("stdlib")                    # by name, the highest version
    lib = hologram.load_bundle("mylib", version=">=1,<2")   # a PEP 440 specifier
    lib = hologram.load_bundle("dist/mylib-1.2.0.hgb")      # by path

A name is looked up in the folders of HOLOGRAM_BUNDLE_PATH (files `NAME-VERSION.hgb`)
and among the bundles plugins register (`hologram_register_bundles`). Loading reads the
archive (every member checked against RECORD), the manifest (every field checked) and
each kernel's members against the manifest's digests: a failure is a BundleError naming
the member and the reason, and nothing is returned. A kernel's program is decoded, held
to the manifest's signature and verified (a bundle is untrusted input) at the kernel's
first use, before anything runs: a bundle of many kernels costs only what is used.
The front end (lark, the analyzer) and the passes are never imported here.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import warnings
from typing import TYPE_CHECKING, Callable, Iterator

from hologram.bundles import archive
from hologram.bundles.folds import unlisted_reduction
from hologram.bundles.manifest import (IR_INDEX, MANIFEST, NAME, SEMVER, Entry, Manifest, NativeTarget, Port, parse,
                                       read_index, read_ir_index)
from hologram.call.kernel import Kernel, Library
from hologram.compiler.driver import Compiled
from hologram.compiler.signature import Param, Signature
from hologram.compiler.source_ir import EncodedIR
from hologram.core import trace
from hologram.core.dims import is_derived
from hologram.core.errors import BundleError, HologramError, HologramWarning, did_you_mean
from hologram.core.files import read_regular_file
from hologram.core.types import Affine, DType, Shape
from hologram.core.values import Value
from hologram.isa.asm_lexer import LineReader
from hologram.isa.encoding import SUPPORTED_ISA_VERSIONS, decode
from hologram.isa.program import BufferParam, Program, ScalarParam
from hologram.registry.lookups import bundles as registered_bundles, get_backend, translator_for_path
from hologram.verify import verdicts

if TYPE_CHECKING:
    from hologram.dsl.document import KernelDef

ENV_PATH = "HOLOGRAM_BUNDLE_PATH"
PLUGIN = "a plugin"  # Found.origin of a bundle an installed plugin registered
_SPLIT = re.compile(r"-(?=[0-9])")  # where NAME-VERSION.hgb may split: a version starts with a digit
SOURCES = "sources/"  # the members holding the documents a bundle was built from


class Found(Value, uncompared=("make",)):
    """A bundle `load_bundle` can find by name: what its file name (or its plugin) says it
    is, where it is and who put it there."""

    __slots__ = ("name", "version", "path", "origin", "make", "sources")
    name: str
    version: str
    path: str
    origin: str  # 'HOLOGRAM_BUNDLE_PATH' or 'a plugin'
    make: Callable[[], bytes | None] | None  # builds it (BundleRef.make)
    sources: str | None  # the documents the bundle `make` builds comes from

    def __init__(self, name: str, version: str, path: str, origin: str,
                 make: Callable[[], bytes | None] | None = None, sources: str | None = None) -> None:
        self._init(name=name, version=version, path=path, origin=origin, make=make, sources=sources)

    @property
    def trusted(self) -> bool:
        """Whether its native code runs unless the caller says otherwise: only a bundle a
        plugin ships in its installed package, never one built into a cache (anyone who
        can write the cache could have replaced it) nor one on HOLOGRAM_BUNDLE_PATH."""
        return self.origin == PLUGIN and self.make is None


class Bundle(Value, eq=False):
    """An opened bundle: its manifest and members, every hash checked."""

    __slots__ = ("where", "manifest", "members", "digests", "path", "_indexes")
    where: str
    manifest: Manifest
    members: dict[str, bytes]
    digests: dict[str, str]  # sha256 by member, checked against the bytes by RECORD
    path: str | None  # the file it was read from (None: bytes in memory)
    _indexes: dict[str, dict]  # index members read, by name

    def __init__(self, where: str, manifest: Manifest, members: dict[str, bytes], digests: dict[str, str],
                 path: str | None = None) -> None:
        self._init(where=where, manifest=manifest, members=members, digests=digests, path=path, _indexes={})

    def __repr__(self) -> str:  # not the members' bytes
        return f"Bundle(where={self.where!r}, manifest={self.manifest!r}, path={self.path!r})"

    def program(self, entry: Entry) -> Program:
        """The kernel's program, decoded and verified (or passed before by this verifier:
        hologram.verify.verdicts); BundleError naming the member otherwise."""
        data = self._member(entry.program, entry.program_sha256, entry)
        try:
            with trace.span("decode", "bundle", kernel=entry.name):
                program = decode(data)
        except HologramError as exc:
            raise BundleError(f"{self.where}: {entry.program}: not a program this hologram decodes: {exc.message}") \
                from None
        with trace.span("verdict", "bundle", kernel=entry.name):
            passed = verdicts.passed(entry.program_sha256)
        if passed:  # these bytes passed this verifier before
            return program
        from hologram.verify.verifier import verify  # imported only for a program without a verdict

        try:
            with trace.span("verify", "bundle", kernel=entry.name):
                verify(program)
        except HologramError as exc:
            raise BundleError(f"{self.where}: {entry.program}: the verifier refuses it: {exc.message}") from None
        verdicts.record(entry.program_sha256)
        return program

    def check_program_hash(self, entry: Entry) -> None:
        self._member(entry.program, entry.program_sha256, entry)

    def native_index(self, target: NativeTarget) -> dict[str, tuple[str, object]]:
        """{kernel: (object sha256, meta)} of `target`, its index and every object it
        names checked against the archive; BundleError naming the member otherwise."""
        def read(data: bytes) -> dict[str, tuple[str, object]]:
            index = read_index(data, target)
            for kernel, (sha256, _) in index.items():
                if self.digests.get(target.object(kernel)) != sha256:
                    raise BundleError(f"{target.object(kernel)}: its sha256 is not the one {target.index} gives (the "
                                      f"index disagrees with the archive)")
            return index
        return self._index(target.index, target.index_sha256, read)

    def _index(self, member: str, sha256: str, read: Callable[[bytes], dict]) -> dict:
        """An index member (machine data in JSON, outside `bundle.toml`), its hash checked
        against the manifest's, read by `read` once; BundleError naming it otherwise."""
        if member not in self._indexes:
            if member not in self.members:
                raise BundleError(f"{self.where}: no {member} member, which {MANIFEST} names")
            if self.digests.get(member) != sha256:
                raise BundleError(f"{self.where}: {member}: its sha256 is not the one {MANIFEST} gives (the "
                                  f"manifest disagrees with the archive)")
            try:
                self._indexes[member] = read(self.members[member])
            except BundleError as exc:
                raise BundleError(f"{self.where}: {exc.message}") from None
        return self._indexes[member]

    def native_code(self, target: NativeTarget, kernel: str) -> dict:
        """What a backend's `prepare_native` takes for `kernel`'s object for `target`."""
        _, meta = self.native_index(target)[kernel]
        return {"target": target.target, "triple": target.triple, "cpu": target.cpu, "features": target.features,
                "toolchain": target.toolchain, "meta": meta, "object": self.members[target.object(kernel)]}

    def source(self, entry: Entry) -> str:
        return self._member(entry.source, entry.source_sha256, entry).decode("utf-8", "replace")

    def source_ir(self, entry: Entry) -> bytes:
        """The encoding of the kernel's IR as the front end built it, its hash checked
        against the IR index (not decoded)."""
        return self._member(entry.source_ir, self.ir_digests()[entry.name], entry, IR_INDEX)

    def ir_digests(self) -> dict[str, str]:
        """{kernel: its IR member's sha256}: the IR index, its own hash checked against the manifest."""
        names = tuple(e.name for e in self.manifest.kernels)
        return self._index(IR_INDEX, self.manifest.ir_index_sha256, lambda data: read_ir_index(data, names))

    def ir(self, entry: Entry) -> str:
        if entry.ir not in self.members:
            raise BundleError(f"{self.where}: kernel {entry.name!r} names {entry.ir!r}, which the bundle does not hold")
        return self.members[entry.ir].decode("utf-8", "replace")

    def _member(self, name: str, sha256: str, entry: Entry, listed_in: str = MANIFEST) -> bytes:
        data = self.members.get(name)
        if data is None:
            raise BundleError(f"{self.where}: kernel {entry.name!r} names {name!r}, which the bundle does not hold")
        if self.digests.get(name) != sha256:
            raise BundleError(f"{self.where}: {name}: its sha256 is not the one {listed_in} gives for kernel "
                              f"{entry.name!r} (the {'manifest' if listed_in == MANIFEST else 'index'} disagrees "
                              f"with the archive)")
        return data


def open_bundle(path: str | os.PathLike) -> Bundle:
    """The bundle at `path`, its archive and manifest checked (programs not yet decoded)."""
    where = os.fspath(path)
    with trace.span("open bundle", "bundle", path=where):
        try:
            data = read_regular_file(where, archive.MAX_BUNDLE_BYTES)
        except OSError as exc:
            raise BundleError(f"cannot read bundle {where}: {exc.strerror or exc}") from None
        return read_bundle(data, where, path=where)


def read_bundle(data: bytes, where: str = "<bundle>", path: str | None = None) -> Bundle:
    """The bundle in `data` (named `where` in messages, read from the file `path`), as
    `open_bundle` checks it."""
    members, digests = archive.read_with_digests(data, where)
    if MANIFEST not in members:
        raise BundleError(f"{where}: no {MANIFEST} member (not a bundle)")
    try:
        manifest = parse(members[MANIFEST], digests[MANIFEST])
    except BundleError as exc:
        raise BundleError(f"{where}: {exc.message}", hint=exc.hint) from None
    if manifest.isa not in SUPPORTED_ISA_VERSIONS:
        newer = "newer than" if manifest.isa > max(SUPPORTED_ISA_VERSIONS) else "not one of"
        raise BundleError(f"{where}: its programs are ISA version {manifest.isa}, {newer} the versions this "
                          f"hologram runs ({', '.join(map(str, SUPPORTED_ISA_VERSIONS))})",
                          hint="install a newer hologram, or rebuild the bundle with this one")
    described = {MANIFEST, IR_INDEX} | \
        {m for e in manifest.kernels for m in (e.program, e.source, e.ir, e.source_ir)} | \
        {n.index for n in manifest.native} | {n.object(k) for n in manifest.native for k in n.kernels}
    for name in sorted(members.keys() - described):
        raise BundleError(f"{where}: member {name!r} is not described by {MANIFEST}",
                          hint="a bundle holds exactly what its manifest lists; rebuild it")
    return Bundle(where, manifest, members, digests, path)


def library(bundle: Bundle, backend: str | None = None, verify_now: bool = False,
            trust_native: bool = False) -> Library:
    """Every kernel of `bundle` as a Library (on `backend`, or the default one). Every
    member's hash is checked now; each program is decoded, held to the manifest and
    verified at its kernel's first use, or now for all with `verify_now`. The native code
    the bundle ships is handed to backends only with `trust_native` (machine code cannot
    be verified: docs/bundles.md, "Native code"). `verify_now` also decodes and checks
    each kernel's IR, which otherwise waits for its first stream along a shape symbol."""
    if backend is not None:
        get_backend(backend)  # an unknown backend is an error now, not at the first call
    native: dict[str, dict[str, tuple]] = {}  # kernel -> backend -> code, for prepare_native
    if trust_native:  # the indexes are read (and checked) only for code that may run
        for target in bundle.manifest.native:
            for kernel in target.kernels:
                code = native.setdefault(kernel, {})
                code[target.backend] = code.get(target.backend, ()) + (bundle.native_code(target, kernel),)
    compiled = [_compiled(bundle, e, native.get(e.name, {})) for e in bundle.manifest.kernels]
    if verify_now:
        for c in compiled:
            c.program  # noqa: B018 - decoding, checking and verifying is the point
            c.source_ir  # noqa: B018 - and the IR the stream planner reads
    m = bundle.manifest
    return Library({c.signature.name: Kernel(c, backend) for c in compiled},
                   (m.name, m.version, bundle.path, trust_native))


def load_bundle(name_or_path: str | os.PathLike, version: str | None = None, backend: str | None = None,
                trust_native: bool | None = None) -> Library:
    """The kernels of a bundle, by path or by name (the highest version `version`, a
    PEP 440 specifier, admits). See the module docstring. The bundle's native code is
    used when `trust_native` is True, or when it is None and an installed plugin ships
    the bundle in its package (`Found.trusted`); never for a file found by path, on
    HOLOGRAM_BUNDLE_PATH or built into a cache unless asked."""
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise BundleError(f"load_bundle() expects a bundle name or path, got {type(name_or_path).__name__}")
    text = os.fspath(name_or_path)
    with trace.span("load bundle", "bundle", bundle=text, version=version):
        return _load(text, version, backend, trust_native)


def _load(text: str, version: str | None, backend: str | None, trust_native: bool | None) -> Library:
    if _is_path(text):
        if version is not None:
            raise BundleError("version= selects among bundles found by name; a path names one file",
                              hint=f"load_bundle({text!r}) without version=")
        return library(open_bundle(text), backend, trust_native=bool(trust_native))
    found, bundle = _resolve(text, version)
    assert bundle is not None
    trusted = trust_native if trust_native is not None else found.trusted
    return library(bundle, backend, trust_native=trusted)


def _is_path(text: str) -> bool:
    return text.endswith(".hgb") or any(sep in text for sep in ("/", os.sep, os.altsep) if sep)


# --------------------------------------------------------------------------- kernels
def _compiled(bundle: Bundle, e: Entry, native: dict[str, tuple]) -> Compiled:
    where = f"{bundle.where}: kernel {e.name!r}"
    inputs = tuple(_param(p, p.kind, f"{where}: input {p.name!r}") for p in e.inputs)
    outputs = tuple(_param(p, "output", f"{where}: output {p.name!r}") for p in e.outputs)
    signature = Signature(e.name, inputs, outputs, e.symbols)
    reductions = tuple((kind, tuple((var, _extent(ext, e.symbols, f"{where}: reduction")) for var, ext in axes))
                       for kind, axes in e.reductions)
    bundle.source(e)  # present and unaltered: it is the kernel's provenance
    bundle.check_program_hash(e)  # so a damaged program is refused now, with the rest
    # the IR the stream planner reads: its hash checked now, decoded and checked at its first use
    source_ir = EncodedIR(bundle.source_ir(e), signature, f"{where}: {e.source_ir}", BundleError)

    def program() -> Program:  # decoding and verifying wait for the kernel's first use
        p = bundle.program(e)
        problem = _disagreement(signature, p) or unlisted_reduction(reductions, p)
        if problem is not None:
            raise BundleError(f"{where}: {MANIFEST} disagrees with {e.program}: {problem}")
        return p
    return Compiled.stored(program, signature, e.version, e.summary, bundle.manifest.opt, reductions,
                           source_ir=source_ir, ir_text=bundle.ir(e), definition=_definition(bundle, e), native=native)


def _disagreement(sig: Signature, program: Program) -> str | None:
    """How the manifest's interface differs from the program's, or None."""
    if program.name != sig.name:
        return f"the program is named {program.name!r}"
    bound, derived = program.symbols[:len(sig.symbols)], program.symbols[len(sig.symbols):]
    if tuple(bound) != tuple(sig.symbols) or not all(map(is_derived, derived)):
        # the program lists the bound symbols first, then the derived ones its shapes use
        return f"the program's shape symbols are {', '.join(program.symbols) or 'none'}"
    params = {p.name: p for p in program.params}
    if set(params) != {p.name for p in sig.inputs + sig.outputs}:
        return f"the program's parameters are {', '.join(params) or 'none'}"
    for p in sig.inputs + sig.outputs:
        q = params[p.name]
        if p.kind == "scalar":
            ok = isinstance(q, ScalarParam) and q.dtype == p.dtype
        else:
            # exactly the role the interface gives: an input the program may write ('inout')
            # would overwrite the caller's array, an output it may read would read garbage
            role = "out" if p.kind == "output" else "in"
            if isinstance(q, BufferParam) and q.role != role:
                what = "an output" if p.kind == "output" else "an input"
                return (f"{p.name} is {what} in the manifest (role {role!r}), but the program declares it "
                        f"{q.role!r}" + (", so it may write the caller's array" if role == "in" else ""))
            ok = isinstance(q, BufferParam) and q.dtype == p.dtype and q.shape == p.shape
        if not ok:
            return f"{p.name} is {p} in the manifest, {q} in the program"
    return None


def _param(port: Port, kind: str, where: str) -> Param:
    dtype, shape = _type(port.type, where)
    if kind == "scalar" and shape:
        raise BundleError(f"{where}: a scalar has no shape, got {port.type!r}")
    return Param(port.name, dtype, shape, kind)


def _type(text: str, where: str) -> tuple[DType, Shape]:
    try:
        return _parse_type(text)
    except HologramError as exc:
        raise BundleError(f"{where}: type {text!r}: {exc.message}") from None


@functools.lru_cache(maxsize=1024)
def _parse_type(text: str) -> tuple[DType, Shape]:
    """A port's type, `f32[n, 2*m]`, read as `.hasm` spells it. Cached by the text (a
    pure function of it: a bundle's ports repeat a few types, and every load reads them)."""
    r = LineReader(text, 1, "<type>", text)
    dtype = r.dtype()
    shape = r.dims("a shape") if r.peek() is not None else ()
    r.end()
    return dtype, shape


def _extent(text: str, symbols: tuple[str, ...], where: str) -> Affine:
    """A reduction's extent: affine in the kernel's shape symbols (a call evaluates it)."""
    try:
        r = LineReader(text, 1, where, text)
        value = r.affine()
        r.end()
    except HologramError as exc:
        raise BundleError(f"{where}: extent {text!r}: {exc.message}") from None
    unknown = [s for s in value.symbols if s not in symbols]
    if unknown:
        raise BundleError(f"{where}: extent {text} names {unknown[0]!r}, not one of the kernel's symbols "
                          f"({', '.join(symbols) or 'none'})")
    return value


def _definition(bundle: Bundle, e: Entry) -> Callable[[], KernelDef]:
    """The kernel's source translated on demand (Kernel.stats, emit('ast')), not at load."""
    def load() -> KernelDef:
        from hologram.compile_api.compile import translate  # the front end: only for these questions

        file = f"{bundle.where}:{e.source}"
        for kdef in translate(translator_for_path(e.source), bundle.source(e), file):
            if kdef.name == e.name:
                return kdef
        raise BundleError(f"{bundle.where}: {e.source} does not define kernel {e.name!r}")
    return load


# -------------------------------------------------------------------------- finding
# A file is found by its name, NAME-VERSION.hgb, and then held to its manifest: a file
# whose manifest names another bundle or another version is not that bundle, and is
# skipped with a warning (a copy renamed mylib-9.9.9.hgb must not win every query).
# VERSION is the manifest's exact spelling, so two files never hold one version spelled
# two ways (01.0.0, 1.0, an epoch: none is a semantic version). docs/bundles.md, "Loading".

def discover(name: str | None = None) -> list[Found]:
    """The bundles `load_bundle` can find by name (only `name`'s, when given): the files
    `NAME-VERSION.hgb` in the folders of HOLOGRAM_BUNDLE_PATH, then the plugins'. Each
    file is opened and held to its manifest; one that is unreadable or holds another
    bundle or version is left out with a warning. A plugin's bundle built at its first
    load is listed as its plugin names it (loading holds it to that)."""
    found = []
    for f in _candidates(name):
        if f.make is not None:
            found.append(f)
            continue
        try:
            problem = _mislabelled(open_bundle(f.path).manifest, f)
        except BundleError as exc:
            problem = exc.message
        if problem is None:
            found.append(f)
        else:
            _skip(problem)
    return found


def resolve(name: str, version: str | None = None) -> Found:
    """The bundle `name` of the highest version `version` admits; BundleError listing
    what there is when none does. (A bundle its plugin builds at the first load is not
    built here: `load_bundle` does that.)"""
    return _resolve(name, version, build=False)[0]


def _resolve(name: str, version: str | None, build: bool = True) -> tuple[Found, Bundle | None]:
    """`resolve`, and the bundle opened and held to its name (None when it is yet to be
    built and `build` is false): the candidates in order of version, highest first, the
    first whose file is the bundle it is named for winning. Equal versions: the first
    found (HOLOGRAM_BUNDLE_PATH's folders in order, then the plugins), as PATH does; two
    in one folder are ambiguous."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import Version

    try:
        wanted = SpecifierSet(version or "")
    except InvalidSpecifier:
        raise BundleError(f"version={version!r} is not a PEP 440 specifier", hint="e.g. '>=1.2,<2' or '==1.4.0'") \
            from None
    candidates = list(_candidates(name))
    ordered = sorted(candidates, key=lambda f: Version(f.version), reverse=True)  # stable: search order kept
    skipped = []
    for f in ordered:
        if not wanted.contains(Version(f.version), prereleases=True):
            continue
        if f.make is not None and not build:
            return f, None
        bundle = _open_found(f)  # a damaged file is an error: never silently an older version
        if bundle is None:
            skipped.append(f.path)
            continue
        for other in ordered:
            if other is not f and other.origin == ENV_PATH == f.origin and Version(other.version) == \
                    Version(f.version) and os.path.dirname(other.path) == os.path.dirname(f.path) \
                    and _open_found(other) is not None:
                raise BundleError(f"bundle {name!r}: {f.path} and {other.path} hold the same version, spelled two "
                                  f"ways", hint="remove one of them")
        return f, bundle
    where = f"{ENV_PATH} and the plugins' bundles"
    if not candidates:
        known = {f.name for f in _candidates(None)}
        raise BundleError(f"no bundle named {name!r} in {where}{did_you_mean(name, known)}",
                          hint=f"put {name}-VERSION.hgb in a folder listed in {ENV_PATH}, or pass its path"
                          + (f"; bundles found by name: {', '.join(sorted(known))}" if known else ""))
    have = ", ".join(f"{f.version} ({f.path})" for f in candidates if f.path not in skipped)
    refused = f"skipped, holding another bundle or version: {', '.join(skipped)}" if skipped else ""
    if version is None:
        raise BundleError(f"no bundle named {name!r} in {where}", hint=refused)
    raise BundleError(f"no version of bundle {name!r} matches {version!r}",
                      hint="; ".join(filter(None, [f"found: {have}" if have else "", refused])))


def _candidates(name: str | None) -> Iterator[Found]:
    """The bundles named `name` (every one when None) as their file names and plugins
    say, not yet held to their manifests."""
    for folder in filter(None, os.environ.get(ENV_PATH, "").split(os.pathsep)):
        try:
            entries = sorted(os.listdir(folder))
        except OSError:
            continue  # a folder that is not there holds no bundle
        for file in entries:
            named = name_and_version(file)
            if named is not None and name in (None, named[0]):
                yield Found(*named, os.path.join(folder, file), ENV_PATH)
    for ref in registered_bundles().values():
        if name is not None and ref.name != name:
            continue
        named = name_and_version(os.path.basename(ref.path), ref.name)
        if named is not None:
            yield Found(ref.name, named[1], ref.path, PLUGIN, ref.make, ref.sources)
            continue
        try:  # the file name does not say: the manifest does
            yield Found(ref.name, open_bundle(ref.path).manifest.version, ref.path, PLUGIN, ref.make, ref.sources)
        except BundleError as exc:
            _skip(f"bundle {ref.name!r}, which a plugin registers: {exc.message}")


def _open_found(f: Found) -> Bundle | None:
    """The bundle `f` names, held to its name and version; None (with a warning) when
    its file holds another. A bundle built at its first load is built when missing,
    damaged or not its documents'."""
    if f.make is not None:
        return _open_made(f)
    bundle = open_bundle(f.path)
    problem = _mislabelled(bundle.manifest, f)
    if problem is not None:
        _skip(problem)
        return None
    return bundle


def _open_made(f: Found) -> Bundle:
    """A bundle a plugin builds into a cache (a source checkout's, BundleRef.make): the
    file there when it is intact, the bundle it is named for and built from the
    plugin's documents; else built again (in memory when the cache cannot be written)."""
    assert f.make is not None
    if os.path.lexists(f.path):
        try:
            bundle = open_bundle(f.path)
            problem = _mislabelled(bundle.manifest, f) or _not_built_from(bundle, f.sources)
        except BundleError as exc:
            problem = exc.message
        if problem is None:
            return bundle
        _warn(f"bundle built again: {problem}")
    data = f.make()
    bundle = open_bundle(f.path) if data is None else read_bundle(data, f"{f.name} {f.version} (built in memory)")
    problem = _mislabelled(bundle.manifest, f)
    if problem is not None:
        raise BundleError(f"the plugin that registers bundle {f.name!r} built another: {problem}")
    return bundle


def _mislabelled(m: Manifest, f: Found) -> str | None:
    """How the bundle `f` names differs from what its manifest says it is, or None."""
    if (m.name, m.version) == (f.name, f.version):
        return None
    return (f"{f.path}: named {f.name} {f.version}, but it holds the bundle {m.name} {m.version}"
            + (" (a file's name must be its manifest's NAME-VERSION.hgb)" if f.origin == ENV_PATH else ""))


def _not_built_from(bundle: Bundle, sources: str | None) -> str | None:
    """Why `bundle` was not built from the documents in the folder `sources` (each of its
    source members a file there, byte for byte), or None."""
    if sources is None:
        return None
    for member in sorted(m for m in bundle.members if m.startswith(SOURCES)):
        path = os.path.join(sources, *member[len(SOURCES):].split("/"))
        try:
            data = read_regular_file(path, archive.MAX_MEMBER_BYTES)
        except OSError:
            return f"{bundle.where}: {member} is not a document of {sources}"
        if hashlib.sha256(data).hexdigest() != bundle.digests[member]:
            return f"{bundle.where}: {member} differs from {path}"
    return None


def _skip(problem: str) -> None:
    _warn(f"bundle skipped: {problem}")


def _warn(message: str) -> None:
    warnings.warn(HologramWarning(message), stacklevel=3)


def name_and_version(file: str, name: str | None = None) -> tuple[str, str] | None:
    """(name, version) of a file named `NAME-VERSION.hgb`, VERSION a semantic version that
    is also a PEP 440 one (`name` when given, else the shortest name before such a
    version: `my-lib-1.2.0-rc.1.hgb` is my-lib 1.2.0-rc.1)."""
    if not file.endswith(".hgb"):
        return None
    stem = file[:-len(".hgb")]
    if name is not None:
        rest = stem[len(name) + 1:] if stem.startswith(name + "-") else ""
        return (name, rest) if rest and _valid_version(rest) else None
    for m in _SPLIT.finditer(stem):
        head, rest = stem[:m.start()], stem[m.end():]
        if NAME.match(head) and _valid_version(rest):
            return head, rest
    return None


def _valid_version(text: str) -> bool:
    """A bundle's version: semver (what a manifest holds), which specifiers compare as PEP 440."""
    from packaging.version import InvalidVersion, Version

    if not SEMVER.match(text):
        return False
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True
