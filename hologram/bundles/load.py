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

import os
import re
from typing import TYPE_CHECKING, Callable

import attrs

from hologram.bundles import archive
from hologram.bundles.manifest import MANIFEST, NAME, Entry, Manifest, NativeTarget, Port, parse, read_index
from hologram.core import trace
from hologram.core.errors import BundleError, HologramError
from hologram.core.files import read_regular_file
from hologram.core.types import Affine, DType, Shape
from hologram.isa.asm_lexer import LineReader
from hologram.isa.encoding import SUPPORTED_ISA_VERSIONS, decode
from hologram.isa.program import BufferParam, Program, ScalarParam
from hologram.runtime.args import Param, Signature
from hologram.runtime.driver import Compiled
from hologram.runtime.kernel import Kernel, Library
from hologram.runtime.lookups import bundles as registered_bundles, get_backend, translator_for_path
from hologram.verify.verifier import verify

if TYPE_CHECKING:
    from hologram.dsl.document import KernelDef

ENV_PATH = "HOLOGRAM_BUNDLE_PATH"
PLUGIN = "a plugin"  # Found.origin of a bundle an installed plugin registered
_SPLIT = re.compile(r"-(?=[0-9])")  # where NAME-VERSION.hgb may split: a version starts with a digit


@attrs.frozen
class Found:
    """A bundle `load_bundle` can find by name: where it is and who put it there."""

    name: str
    version: str
    path: str
    origin: str  # 'HOLOGRAM_BUNDLE_PATH' or 'a plugin'
    make: Callable[[], None] | None = attrs.field(default=None, eq=False)  # writes `path` if missing


@attrs.frozen(eq=False)
class Bundle:
    """An opened bundle: its manifest and members, every hash checked."""

    where: str
    manifest: Manifest
    members: dict[str, bytes] = attrs.field(repr=False)
    digests: dict[str, str] = attrs.field(repr=False)  # sha256 by member, checked against the bytes by RECORD
    _indexes: dict[tuple[str, str], dict] = attrs.field(factory=dict, init=False, repr=False)

    def program(self, entry: Entry) -> Program:
        """The kernel's program, decoded and verified; BundleError naming the member otherwise."""
        data = self._member(entry.program, entry.program_sha256, entry)
        try:
            with trace.span("decode", "bundle", kernel=entry.name):
                program = decode(data)
        except HologramError as exc:
            raise BundleError(f"{self.where}: {entry.program}: not a program this hologram decodes: {exc.message}") \
                from None
        try:
            with trace.span("verify", "bundle", kernel=entry.name):
                verify(program)
        except HologramError as exc:
            raise BundleError(f"{self.where}: {entry.program}: the verifier refuses it: {exc.message}") from None
        return program

    def check_program_hash(self, entry: Entry) -> None:
        self._member(entry.program, entry.program_sha256, entry)

    def native_index(self, target: NativeTarget) -> dict[str, tuple[str, object]]:
        """{kernel: (object sha256, meta)} of `target`, its index and every object it
        names checked against the archive; BundleError naming the member otherwise."""
        key = (target.backend, target.target)
        if key not in self._indexes:
            if self.digests.get(target.index) != target.index_sha256:
                raise BundleError(f"{self.where}: {target.index}: its sha256 is not the one {MANIFEST} gives (the "
                                  f"manifest disagrees with the archive)")
            try:
                index = read_index(self.members[target.index], target)
            except BundleError as exc:
                raise BundleError(f"{self.where}: {exc.message}") from None
            for kernel, (sha256, _) in index.items():
                if self.digests.get(target.object(kernel)) != sha256:
                    raise BundleError(f"{self.where}: {target.object(kernel)}: its sha256 is not the one "
                                      f"{target.index} gives (the index disagrees with the archive)")
            self._indexes[key] = index
        return self._indexes[key]

    def native_code(self, target: NativeTarget, kernel: str) -> dict:
        """What a backend's `prepare_native` takes for `kernel`'s object for `target`."""
        _, meta = self.native_index(target)[kernel]
        return {"target": target.target, "triple": target.triple, "cpu": target.cpu, "features": target.features,
                "toolchain": target.toolchain, "meta": meta, "object": self.members[target.object(kernel)]}

    def source(self, entry: Entry) -> str:
        return self._member(entry.source, entry.source_sha256, entry).decode("utf-8", "replace")

    def ir(self, entry: Entry) -> str:
        if entry.ir not in self.members:
            raise BundleError(f"{self.where}: kernel {entry.name!r} names {entry.ir!r}, which the bundle does not hold")
        return self.members[entry.ir].decode("utf-8", "replace")

    def _member(self, name: str, sha256: str, entry: Entry) -> bytes:
        data = self.members.get(name)
        if data is None:
            raise BundleError(f"{self.where}: kernel {entry.name!r} names {name!r}, which the bundle does not hold")
        if self.digests.get(name) != sha256:
            raise BundleError(f"{self.where}: {name}: its sha256 is not the one {MANIFEST} gives for kernel "
                              f"{entry.name!r} (the manifest disagrees with the archive)")
        return data


def open_bundle(path: str | os.PathLike) -> Bundle:
    """The bundle at `path`, its archive and manifest checked (programs not yet decoded)."""
    where = os.fspath(path)
    with trace.span("open bundle", "bundle", path=where):
        try:
            data = read_regular_file(where, archive.MAX_BUNDLE_BYTES)
        except OSError as exc:
            raise BundleError(f"cannot read bundle {where}: {exc.strerror or exc}") from None
        return read_bundle(data, where)


def read_bundle(data: bytes, where: str = "<bundle>") -> Bundle:
    """The bundle in `data` (named `where` in messages), as `open_bundle` checks it."""
    members, digests = archive.read_with_digests(data, where)
    if MANIFEST not in members:
        raise BundleError(f"{where}: no {MANIFEST} member (not a bundle)")
    try:
        manifest = parse(members[MANIFEST])
    except BundleError as exc:
        raise BundleError(f"{where}: {exc.message}", hint=exc.hint) from None
    if manifest.isa not in SUPPORTED_ISA_VERSIONS:
        newer = "newer than" if manifest.isa > max(SUPPORTED_ISA_VERSIONS) else "not one of"
        raise BundleError(f"{where}: its programs are ISA version {manifest.isa}, {newer} the versions this "
                          f"hologram runs ({', '.join(map(str, SUPPORTED_ISA_VERSIONS))})",
                          hint="install a newer hologram, or rebuild the bundle with this one")
    described = {MANIFEST} | {m for e in manifest.kernels for m in (e.program, e.source, e.ir)} | \
        {n.index for n in manifest.native} | {n.object(k) for n in manifest.native for k in n.kernels}
    for name in sorted(members.keys() - described):
        raise BundleError(f"{where}: member {name!r} is not described by {MANIFEST}",
                          hint="a bundle holds exactly what its manifest lists; rebuild it")
    return Bundle(where, manifest, members, digests)


def library(bundle: Bundle, backend: str | None = None, verify_now: bool = False,
            trust_native: bool = False) -> Library:
    """Every kernel of `bundle` as a Library (on `backend`, or the default one). Every
    member's hash is checked now; each program is decoded, held to the manifest and
    verified at its kernel's first use, or now for all with `verify_now`. The native code
    the bundle ships is handed to backends only with `trust_native` (machine code cannot
    be verified: docs/bundles.md, "Native code")."""
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
    return Library({c.signature.name: Kernel(c, backend) for c in compiled})


def load_bundle(name_or_path: str | os.PathLike, version: str | None = None, backend: str | None = None,
                trust_native: bool | None = None) -> Library:
    """The kernels of a bundle, by path or by name (the highest version `version`, a
    PEP 440 specifier, admits). See the module docstring. The bundle's native code is
    used when `trust_native` is True, or when it is None and the bundle was registered
    by an installed plugin; never for a file found by path or on HOLOGRAM_BUNDLE_PATH
    unless asked."""
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
    found = resolve(text, version)
    if found.make is not None and not os.path.exists(found.path):
        found.make()  # a source checkout's bundle, built on first use
    trusted = trust_native if trust_native is not None else found.origin == PLUGIN
    return library(open_bundle(found.path), backend, trust_native=trusted)


def _is_path(text: str) -> bool:
    return text.endswith(".hgb") or any(sep in text for sep in ("/", os.sep, os.altsep) if sep)


# --------------------------------------------------------------------------- kernels
def _compiled(bundle: Bundle, e: Entry, native: dict[str, tuple]) -> Compiled:
    where = f"{bundle.where}: kernel {e.name!r}"
    inputs = tuple(_param(p, p.kind, f"{where}: input {p.name!r}") for p in e.inputs)
    outputs = tuple(_param(p, "output", f"{where}: output {p.name!r}") for p in e.outputs)
    signature = Signature(e.name, inputs, outputs, e.symbols)
    reductions = tuple((kind, tuple((var, _affine(ext, f"{where}: reduction")) for var, ext in axes))
                       for kind, axes in e.reductions)
    bundle.source(e)  # present and unaltered: it is the kernel's provenance
    bundle.check_program_hash(e)  # so a damaged program is refused now, with the rest

    def program() -> Program:  # decoding and verifying wait for the kernel's first use
        p = bundle.program(e)
        problem = _disagreement(signature, p)
        if problem is not None:
            raise BundleError(f"{where}: {MANIFEST} disagrees with {e.program}: {problem}")
        return p
    return Compiled(program, signature, e.version, e.summary, bundle.manifest.opt, reductions,
                    ir_text=bundle.ir(e), definition=_definition(bundle, e), native=native)


def _disagreement(sig: Signature, program: Program) -> str | None:
    """How the manifest's interface differs from the program's, or None."""
    if program.name != sig.name:
        return f"the program is named {program.name!r}"
    if tuple(program.symbols) != tuple(sig.symbols):
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
        r = LineReader(text, 1, where, text)
        dtype = r.dtype()
        shape = r.dims("a shape") if r.peek() is not None else ()
        r.end()
    except HologramError as exc:
        raise BundleError(f"{where}: type {text!r}: {exc.message}") from None
    return dtype, shape


def _affine(text: str, where: str) -> Affine:
    try:
        r = LineReader(text, 1, where, text)
        value = r.affine()
        r.end()
    except HologramError as exc:
        raise BundleError(f"{where}: extent {text!r}: {exc.message}") from None
    return value


def _definition(bundle: Bundle, e: Entry) -> Callable[[], KernelDef]:
    """The kernel's source translated on demand (Kernel.stats, emit('ast')), not at load."""
    def load() -> KernelDef:
        from hologram.runtime.compile import translate  # the front end: only for these questions

        file = f"{bundle.where}:{e.source}"
        for kdef in translate(translator_for_path(e.source), bundle.source(e), file):
            if kdef.name == e.name:
                return kdef
        raise BundleError(f"{bundle.where}: {e.source} does not define kernel {e.name!r}")
    return load


# -------------------------------------------------------------------------- finding
def discover(name: str | None = None) -> list[Found]:
    """The bundles `load_bundle` can find by name (only `name`'s, when given): the files
    `NAME-VERSION.hgb` in the folders of HOLOGRAM_BUNDLE_PATH, then the plugins'."""
    found = []
    for folder in filter(None, os.environ.get(ENV_PATH, "").split(os.pathsep)):
        try:
            entries = sorted(os.listdir(folder))
        except OSError:
            continue  # a folder that is not there holds no bundle
        for file in entries:
            named = name_and_version(file)
            if named is not None and name in (None, named[0]):
                found.append(Found(*named, os.path.join(folder, file), ENV_PATH))
    for ref in registered_bundles().values():
        if name is not None and ref.name != name:
            continue
        named = name_and_version(os.path.basename(ref.path), ref.name)
        bundle_version = named[1] if named is not None else None
        if bundle_version is None:  # the file name does not say: the manifest does
            try:
                bundle_version = open_bundle(ref.path).manifest.version
            except BundleError:
                continue  # unreadable (or, with `make`, not built yet and not named NAME-VERSION.hgb)
        found.append(Found(ref.name, bundle_version, ref.path, PLUGIN, ref.make))
    return found


def resolve(name: str, version: str | None = None) -> Found:
    """The bundle `name` of the highest version `version` admits; BundleError listing
    what there is when none does."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import Version

    try:
        wanted = SpecifierSet(version or "")
    except InvalidSpecifier:
        raise BundleError(f"version={version!r} is not a PEP 440 specifier", hint="e.g. '>=1.2,<2' or '==1.4.0'") \
            from None
    candidates = discover(name)
    matching = [f for f in candidates if wanted.contains(Version(f.version), prereleases=True)]
    if not matching:
        have = ", ".join(f"{f.version} ({f.path})" for f in candidates)
        where = f"{ENV_PATH} and the plugins' bundles"
        if not candidates:
            raise BundleError(f"no bundle named {name!r} in {where}",
                              hint=f"put {name}-VERSION.hgb in a folder listed in {ENV_PATH}, or pass its path")
        raise BundleError(f"no version of bundle {name!r} matches {version!r}", hint=f"found: {have}")
    return max(matching, key=lambda f: Version(f.version))


def name_and_version(file: str, name: str | None = None) -> tuple[str, str] | None:
    """(name, version) of a file named `NAME-VERSION.hgb` (`name` when given, else the
    shortest name before a valid version: `my-lib-1.2.0-rc.1.hgb` is my-lib 1.2.0-rc.1)."""
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
    from packaging.version import InvalidVersion, Version

    try:
        Version(text)
    except InvalidVersion:
        return False
    return True
