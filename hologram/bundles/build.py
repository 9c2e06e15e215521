"""Building a bundle: kernel documents compiled once, at build time, into one archive.

    report = build(["kernels/"], name="stdlib", version="1.0.0", output="stdlib-1.0.0.hgb")

Sources are documents, or folders searched for every registered translator's
extensions. Each document compiles in a worker process (`jobs`), unless the build cache
already holds it: a document's result is kept under the digest of everything it depends
on (the hologram version, the plugins that read documents and their versions, the text,
its member name, the pipeline's passes), so an unchanged document is not compiled again.
The archive is deterministic: the same sources and options give the same bytes, in any
folder, on any machine (hologram.bundles.archive).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import multiprocessing
import os
import secrets
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import attrs

from hologram.bundles import archive
from hologram.bundles.manifest import (
    IR_INDEX, MANIFEST, NAME, SEMVER, Entry, Manifest, NativeTarget, Port, parse, read_index, to_toml, write_index,
    write_ir_index,
)
from hologram.compile_api.compile import MAX_DOCUMENT_BYTES, translate
from hologram.compiler.driver import Compiled, compile_kdef
from hologram.core.distribution import hologram_version
from hologram.core.errors import BundleError, HologramError, UnsupportedProgram
from hologram.core.files import cache_root, read_regular_file, read_text_file
from hologram.dsl.document import DSL_VERSION, KernelDef
from hologram.ir_codec import encode as encode_ir
from hologram.isa.asm import format_type
from hologram.isa.encoding import SUPPORTED_ISA_VERSIONS, encode
from hologram.isa.program import ISA_VERSION
from hologram.passes.manager import Pipeline
from hologram.passes.stats import instruction_count, measure
from hologram.registry.lookups import backends, translator_for_path, translators
from hologram.registry.pipelines import resolve
from hologram.registry.plugins import registry

Progress = Callable[[int, int, str], None]  # (documents done, documents in all, the one just done)
NativePlan = tuple[tuple[str, str, tuple[str, ...]], ...]  # (backend, its toolchain, targets)


@attrs.frozen
class NativeCode:
    """Object code a backend built for one kernel and one CPU (what `compile_native` gave)."""

    backend: str
    target: str
    triple: str
    cpu: str
    features: tuple[str, ...]
    toolchain: str
    meta: Any  # the backend's description (JSON-able): the stage table
    object: bytes = attrs.field(repr=False)


@attrs.frozen
class KernelBuild:
    """One kernel as built: its manifest entry, its members, its native code, what the
    build table shows."""

    entry: Entry
    members: tuple[tuple[str, bytes], ...]
    seconds: float
    cached: bool = False
    natives: tuple[NativeCode, ...] = ()


@attrs.frozen
class BuildReport:
    manifest: Manifest
    kernels: tuple[KernelBuild, ...]
    data: bytes  # the archive
    output: str | None
    seconds: float


def build(sources: Sequence[str | os.PathLike], name: str, version: str, output: str | os.PathLike | None = None,
          opt: str | None = None, passes: Sequence[str] | str | None = None, jobs: int | None = None,
          cache_dir: str | os.PathLike | None | bool = None, progress: Progress | None = None,
          built_by: str | None = None, native: str | Sequence[str] = "auto") -> BuildReport:
    """Compile `sources` into the bundle `name` `version` (semver); write it to `output`
    when given. `opt`/`passes` choose the pipeline as for `hologram.compile`. `jobs`
    worker processes (default: the CPU count); `cache_dir` the build cache (default
    `$HOLOGRAM_CACHE_DIR/build`, else the user cache dir; False: none). `built_by` is the
    hologram version the manifest records (default: the installed one; a wheel build
    names its own). `native`: object code to ship, from every installed backend that
    builds it (`compile_native`), for "auto" (every target of every installed backend
    but `host`: this architecture's CPU levels x86-64-v2, -v3, -v4; `wgsl`; `cuda:sm_80`,
    `cuda:sm_90`), "none", or the targets named (a list, or comma-separated, each
    `TARGET` or `BACKEND:TARGET`; `host` is this machine, which makes the bundle depend
    on it). docs/bundles.md, "Native code"."""
    start = time.perf_counter()
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise BundleError(f"jobs={jobs!r}: expected a number of worker processes >= 1")
    if not isinstance(name, str) or not NAME.match(name):
        raise BundleError(f"bundle name {name!r}: expected letters, digits and _ . - (not starting with . or -)")
    if not isinstance(version, str) or not SEMVER.match(version):
        raise BundleError(f"bundle version {version!r}: expected a semantic version such as 1.2.0")
    pipeline = resolve(opt, passes)
    plan = native_plan(native)
    documents = collect(sources)
    cache = _cache_dir(cache_dir)
    keys = {member: _key(member, text, pipeline.names, pipeline.name, plan) for member, (_, text) in documents.items()}
    results: dict[str, list[KernelBuild]] = {}
    todo = []
    for member, (path, text) in documents.items():
        hit = _cache_load(cache, keys[member])
        if hit is not None:
            results[member] = hit
        else:
            todo.append((member, path, text))
    done = len(results)
    if progress is not None:
        progress(done, len(documents), "")
    for member, kernels in _compile_all(todo, opt, passes, jobs, plan):
        results[member] = kernels
        _cache_store(cache, keys[member], kernels)
        done += 1
        if progress is not None:
            progress(done, len(documents), member)
    kernels = sorted((k for ks in results.values() for k in ks), key=lambda k: k.entry.name)
    seen: dict[str, str] = {}
    for k in kernels:
        if k.entry.name in seen:
            raise BundleError(f"kernel {k.entry.name!r} is defined in both {seen[k.entry.name]} and {k.entry.source}",
                              hint="a bundle's kernels have unique names")
        seen[k.entry.name] = k.entry.source
    native, native_members = native_section(kernels)
    ir_index = ir_index_member(kernels)
    manifest = Manifest(name=name, version=version, isa=ISA_VERSION, hologram=built_by or hologram_version(),
                        dsl=DSL_VERSION, opt=pipeline.name, kernels=tuple(k.entry for k in kernels), native=native,
                        ir_index_sha256=hashlib.sha256(ir_index).hexdigest())
    members = {MANIFEST: to_toml(manifest).encode(), IR_INDEX: ir_index}
    members.update((m, text.encode()) for m, (_, text) in documents.items())
    for k in kernels:
        members.update(k.members)
    members.update(native_members)
    data = archive.write(members)
    if output is not None:
        try:
            write_atomically(Path(output), data)
        except OSError as exc:
            raise BundleError(f"cannot write {os.fspath(output)}: {exc.strerror or exc}") from None
    return BuildReport(manifest, tuple(kernels), data, None if output is None else os.fspath(output),
                       time.perf_counter() - start)


# ---------------------------------------------------------------------------- sources
def collect(sources: Iterable[str | os.PathLike]) -> dict[str, tuple[str, str]]:
    """{member name: (path, text)} of every document: a file as `sources/<its name>`, a
    folder's documents (every registered extension, recursively) as `sources/<path in
    the folder>`; no absolute paths, so the member names do not depend on where the
    sources sit. In a folder, a file its translator does not claim (`Translator.claims`:
    a Python module without kernels) is no document; a file named is always one."""
    extensions = tuple(sorted({e for t in translators().values() for e in t.extensions}))
    found: dict[str, tuple[str, str]] = {}
    for source in sources:
        path = Path(source)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.name.lower().endswith(extensions)
                           and not any(part.startswith(".") for part in p.relative_to(path).parts))
            pairs = [(p, p.relative_to(path).as_posix()) for p in files if _claimed(p)]
            if not pairs:
                raise BundleError(f"{path}: no kernel documents in this folder ({', '.join(extensions)})")
        elif path.is_file():
            pairs = [(path, path.name)]
        else:
            raise BundleError(f"{path}: no such file or folder")
        for p, rel in pairs:
            member = f"sources/{rel}"
            bad = archive.member_problem(member)
            if bad is not None:
                raise BundleError(f"{p}: cannot be stored as {member!r}: {bad}", hint="rename the file")
            if member in found:
                raise BundleError(f"{p} and {found[member][0]} would both be stored as {member!r}",
                                  hint="give the documents different names, or pass their folders")
            translator_for_path(str(p))  # an unknown extension is an error now
            found[member] = (str(p), _read_text(p))
    if not found:
        raise BundleError("no sources: name kernel documents or folders of them")
    return found


def _claimed(path: Path) -> bool:
    claims = translator_for_path(str(path)).claims
    if claims is None:
        return True
    try:
        return bool(claims(_read_text(path)))
    except BundleError:
        raise
    except Exception:  # a plugin's bug: the file is taken, and its parse reports what is wrong
        return True


def _read_text(path: Path) -> str:
    return read_text_file(str(path), MAX_DOCUMENT_BYTES, BundleError)


# -------------------------------------------------------------------------- compiling
def compile_source(member: str, path: str, text: str, opt: str | None, passes: Sequence[str] | str | None,
                   plan: NativePlan = ()) -> list[KernelBuild]:
    """Every kernel of one document, ready for the archive (what a worker runs)."""
    pipeline = resolve(opt, passes)
    o0 = resolve("O0")
    translator = translator_for_path(path)
    kdefs = translate(translator, text, path)
    if not kdefs:
        raise BundleError(f"{path}: no kernels in this document", hint=translator.no_kernels_hint())
    out = []
    for kdef in kdefs:
        start = time.perf_counter()
        c = _compile_as_member(kdef, member, pipeline)
        k = _kernel_build(c, member, text, o0)
        out.append(attrs.evolve(k, natives=_native_code(c, plan), seconds=time.perf_counter() - start))
    return out


# ----------------------------------------------------------------------- native code
def native_plan(native: str | Sequence[str]) -> NativePlan:
    """Which backends build object code for which targets: every installed backend
    offering `compile_native`, whether or not it can run here (a GPU backend builds code
    for a device this machine lacks), for "auto" (every target each offers but `host`),
    "none", or the targets named: `TARGET` (every backend offering it) or
    `BACKEND:TARGET` (that one's: `cuda:sm_80`)."""
    if isinstance(native, str):
        asked = [t.strip() for t in native.split(",") if t.strip()]
    else:
        asked = [str(t).strip() for t in native]
    if asked in (["none"], []):
        return ()
    installed = backends()
    offered = {name: tuple(installed[name].native_targets()) for name in sorted(installed)}
    offered = {name: known for name, known in offered.items() if known}
    if asked == ["auto"]:
        chosen = {name: tuple(t for t in known if t != "host") for name, known in offered.items()}
    else:
        chosen = {}
        for spelled in asked:
            backend, _, target = spelled.rpartition(":")
            owners = [n for n, known in offered.items() if target in known and backend in ("", n)]
            if not owners:
                spellings = [f"{n}:{t}" for n, known in offered.items() for t in known]
                raise BundleError(f"the installed backends cannot build native code for {spelled} here",
                                  hint=f"targets here: {', '.join(spellings) or 'none'} (a backend's prefix is "
                                       f"optional); or --native none")
            for n in owners:
                chosen[n] = chosen.get(n, ()) + ((target,) if target not in chosen.get(n, ()) else ())
    return tuple((name, str(installed[name].native_toolchain()), targets)
                 for name, targets in sorted(chosen.items()) if targets)


def _native_code(c: Compiled, plan: NativePlan) -> tuple[NativeCode, ...]:
    """The kernel's object code for every (backend, target) of `plan`; none for a backend
    that does not run the kernel (`compile_native` raised UnsupportedProgram: a GPU
    backend's declaration leaves out what it has no code for), which lists the target
    without it, so loading it there prepares the program as any other."""
    natives = []
    installed = backends()
    for backend_name, _, targets in plan:
        backend = installed[backend_name]
        for t in targets:
            try:
                code = backend.compile_native(c.program, t)
            except UnsupportedProgram:
                break  # the same refusal for every target of this backend
            natives.append(NativeCode(backend_name, t, str(code["triple"]), str(code["cpu"]),
                                      tuple(sorted(code["features"])), str(code["toolchain"]),
                                      json.loads(json.dumps(code["meta"])), bytes(code["object"])))
    return tuple(natives)


def native_section(kernels: Sequence[KernelBuild]) -> tuple[tuple[NativeTarget, ...], dict[str, bytes]]:
    """The manifest's [[native]] tables and their members (each target's index and
    objects) for the native code of `kernels`."""
    by_target: dict[tuple[str, str], list[tuple[str, NativeCode]]] = {}
    for k in kernels:
        for n in k.natives:
            by_target.setdefault((n.backend, n.target), []).append((k.entry.name, n))
    targets, members = [], {}
    for (backend, target), codes in sorted(by_target.items()):
        first = codes[0][1]
        for name, n in codes:
            if (n.triple, n.cpu, n.features, n.toolchain) != (first.triple, first.cpu, first.features, first.toolchain):
                raise BundleError(f"backend {backend!r} built {name!r} for {target} differently from "
                                  f"{codes[0][0]!r} (triple, cpu, features or toolchain)")
        codes.sort(key=lambda c: c[0])
        index = write_index({name: (hashlib.sha256(n.object).hexdigest(), n.meta) for name, n in codes})
        nt = NativeTarget(backend, target, first.triple, first.cpu, first.features, first.toolchain,
                          tuple(name for name, _ in codes), hashlib.sha256(index).hexdigest())
        members[nt.index] = index
        members.update((nt.object(name), n.object) for name, n in codes)
        targets.append(nt)
    return tuple(targets), members


def ir_index_member(kernels: Sequence[KernelBuild]) -> bytes:
    """The IR index of `kernels`: each one's IR member's sha256 (manifest.IR_INDEX)."""
    return write_ir_index({k.entry.name: hashlib.sha256(dict(k.members)[k.entry.source_ir]).hexdigest()
                           for k in kernels})


def _compile_as_member(kdef: KernelDef, member: str, pipeline: Pipeline) -> Compiled:
    """`kdef` compiled with its body's file named `member`: the source locations a program
    keeps for run-time errors (hologram.core.errors.Site) name the bundle's member, never
    a path that differs between checkouts. Errors and warnings name the file as given
    (the document is compiled again under that name when there are any)."""
    relocated = attrs.evolve(kdef, origin=attrs.evolve(kdef.origin, file=member))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            c = compile_kdef(relocated, pipeline)
        except HologramError:
            c = None
    if c is None or caught:
        compile_kdef(kdef, pipeline)  # raises or warns as the caller named the file
    assert c is not None
    return c


def _kernel_build(c: Compiled, member: str, text: str, o0: Pipeline) -> KernelBuild:
    name = c.signature.name
    if not NAME.match(name):
        raise BundleError(f"{member}: kernel name {name!r} cannot name a bundle member",
                          hint="a bundled kernel's name uses letters, digits and _ . - only")
    program = encode(c.program)
    ir = c.ir_form().encode()
    source_ir = encode_ir(c.source_ir)
    before = c if c.pipeline == o0 else compile_kdef(c.source_definition(), o0)
    stats = measure(c.kir, c.program)
    sig = c.signature
    entry = Entry(
        name=name, version=c.version, summary=c.summary, source=member,
        source_sha256=hashlib.sha256(text.encode()).hexdigest(),
        program=f"programs/{name}.hbc", program_sha256=hashlib.sha256(program).hexdigest(), ir=f"ir/{name}.ir",
        symbols=sig.symbols,
        inputs=tuple(Port(p.name, format_type(p.dtype, p.shape), p.kind) for p in sig.inputs),
        outputs=tuple(Port(p.name, format_type(p.dtype, p.shape)) for p in sig.outputs),
        reductions=tuple((kind, tuple((var, str(ext)) for var, ext in axes)) for kind, axes in c.reductions),
        stats={"stages": stats.stages, "instructions": stats.instructions,
               "instructions_before": instruction_count(before.program), "registers": stats.registers,
               "bytes_read": str(stats.bytes_read), "bytes_written": str(stats.bytes_written),
               "bytes_exact": stats.bytes_exact,
               # what the translator noted (a circuit's "4 ops -> 1 op"); absent when nothing, so
               # the manifests of plain documents are what they were
               **({"notes": [list(n) for n in c.kdef.notes]} if c.kdef is not None and c.kdef.notes else {})})
    return KernelBuild(entry, ((entry.program, program), (entry.ir, ir), (entry.source_ir, source_ir)), 0.0)


def _compile_all(todo: list[tuple[str, str, str]], opt: str | None, passes: Sequence[str] | str | None,
                 jobs: int | None, plan: NativePlan):
    """(member, kernels) of each document in `todo`, in worker processes when more than one."""
    jobs = max(1, jobs if jobs is not None else (os.cpu_count() or 1))
    if jobs == 1 or len(todo) < 2:
        for member, path, text in todo:
            yield member, compile_source(member, path, text, opt, passes, plan)
        return
    # spawn, not fork: a fresh interpreter per worker, whatever threads the caller runs
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(min(jobs, len(todo)), mp_context=context) as pool:
        futures = {pool.submit(compile_source, m, p, t, opt, passes, plan): m for m, p, t in todo}
        for future in concurrent.futures.as_completed(futures):
            yield futures[future], future.result()


# ---------------------------------------------------------------------- build cache
def _key(member: str, text: str, pass_names: tuple[str, ...], pipeline: str, plan: NativePlan) -> str:
    ident = json.dumps([hologram_version(), DSL_VERSION, list(SUPPORTED_ISA_VERSIONS), member, text,
                        pipeline, list(pass_names), [list(p) for p in plan], _readers()])
    return hashlib.sha256(ident.encode()).hexdigest()


def _readers() -> list[list[str]]:
    """The plugins that read documents (translators and the document keys they claim),
    with their versions: another version of one may read a document differently."""
    return [[p.name, p.version or ""] for p in registry(("translator",)).report
            if p.status == "ok" and any(r.startswith("translator ") for r in p.registered)]


def _cache_dir(cache_dir: str | os.PathLike | None | bool) -> Path | None:
    if cache_dir is False:
        return None
    if cache_dir is None or cache_dir is True:
        return cache_root() / "build"
    return Path(cache_dir)


def _cache_load(cache: Path | None, key: str) -> list[KernelBuild] | None:
    """The kernels of a cached document, or None (a missing or unreadable entry is a miss)."""
    if cache is None:
        return None
    try:
        data = read_regular_file(str(cache / f"{key}.hgb"), archive.MAX_BUNDLE_BYTES)
        members = archive.read(data, "build cache entry")
        manifest = parse(members.pop(MANIFEST))
    except (OSError, BundleError):
        return None
    natives: dict[str, list[NativeCode]] = {}
    try:
        for nt in manifest.native:
            for name, (_, meta) in read_index(members[nt.index], nt).items():
                natives.setdefault(name, []).append(NativeCode(nt.backend, nt.target, nt.triple, nt.cpu, nt.features,
                                                               nt.toolchain, meta, members[nt.object(name)]))
    except (KeyError, BundleError):
        return None
    kernels = []
    for e in manifest.kernels:
        names = (e.program, e.ir, e.source_ir)
        if any(n not in members for n in names):
            return None
        kernels.append(KernelBuild(e, tuple((n, members[n]) for n in names), 0.0, cached=True,
                                   natives=tuple(natives.get(e.name, ()))))
    return kernels


def _cache_store(cache: Path | None, key: str, kernels: list[KernelBuild]) -> None:
    if cache is None:
        return
    native, native_members = native_section(kernels)
    ir_index = ir_index_member(kernels)
    manifest = Manifest(name="cache", version="0.0.0", isa=ISA_VERSION, hologram=hologram_version(), dsl=DSL_VERSION,
                        opt="-", kernels=tuple(k.entry for k in kernels), native=native,
                        ir_index_sha256=hashlib.sha256(ir_index).hexdigest())
    members = {MANIFEST: to_toml(manifest).encode(), IR_INDEX: ir_index, **native_members}
    for k in kernels:
        members.update(k.members)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        write_atomically(cache / f"{key}.hgb", archive.write(members))
    except OSError:
        pass  # a cache that cannot be written costs the next build time, nothing else


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same folder: a reader sees
    the old file or the new one, never half of one. The file gets the mode any new file
    gets (0666 less the umask: 0644 under 022), not mkstemp's 0600, so a bundle written
    to a shared folder is readable by whom the umask allows."""
    fd, tmp = _create_temporary(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _create_temporary(path: Path) -> tuple[int, str]:
    """A new file beside `path`, opened for writing, created with mode 0666 so that the
    kernel applies the umask (reading the umask means setting it, which races threads)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")
