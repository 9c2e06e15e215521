"""`CpuLlvmBackend`: Atlas ISA programs compiled to native code, run on a thread pool.

prepare: verify, hash, then memory cache -> disk cache (object code: load it and resolve
the stage symbols; LLVM's optimizer never runs) -> codegen + O3 + emit, stored to disk.
The result is a `runtime.Executable`. launch: see runtime.py. docs/cpu-llvm.md has the
whole story (threads, caches, aliasing, errors).
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import struct
import sys
import threading
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from hologram.backend import (FORK_GUARD, Backend, DType, FaultGuard, Instr, LaunchBinding, Program, Value,
                              convert_value, program_hash, renew_in_child, trace)
from hologram.errors import ArgumentError, CompileError, HologramError, HologramWarning

from . import cancel, cpu, fault_guard, loader, native_pool, threads, trampoline
from .abi import reduce_op
from .cache import DiskCache, Entry, MemoryCache, default_cache_dir
from .launcher import make_launcher
from .runtime import REDUCE_KINDS, STAGE_FN, Executable, ReduceSlot, StagePlan, identity, launch


class StageSymbol(Value):
    """The part of codegen's StageEntry the runtime needs (and caches on disk)."""

    __slots__ = ("name", "stage_index", "reduce_buffers")
    name: str
    stage_index: int
    reduce_buffers: tuple[str, ...]

    def __init__(self, name: str, stage_index: int, reduce_buffers: tuple[str, ...]) -> None:
        self._init(name=name, stage_index=stage_index, reduce_buffers=reduce_buffers)

    def as_json(self) -> dict[str, Any]:
        """As a stage table (a cache entry's or a bundle's meta) holds it."""
        return {"name": self.name, "stage_index": self.stage_index, "reduce_buffers": list(self.reduce_buffers)}


# --------------------------------------------------------------------------- codegen link
# jit.py (llvmlite.binding, ~22 ms to import) and codegen.py (llvmlite.ir, ~8 ms) are
# imported by what compiles, never by what loads: a process that runs cached or shipped
# object code links it with loader.py and knows its CPU from cpu.py.
_CODEGEN_SOURCES = ("codegen", "vecmath", "jit", "abi", "trampoline", "native_pool", "cancel", "fault_guard",
                    "signals")
_DECLARED = re.compile(r"^CODEGEN_VERSION = (\d+)", re.MULTILINE)
# An entry also certifies that its program passed the verifier, so `prepare` does not
# verify again on a disk hit; a change to the verifier, or to any hologram module it
# reaches, invalidates the entries (`verifier_modules`).
# Named, not imported: a process that only runs cached or shipped code never imports the
# verifier (the SDK's `verify` lives there; test_warm_prepare holds the two together).
_VERIFIER = "hologram.verify.verifier"
# `from hologram.x import a, b` and `import hologram.x`, anywhere in a module: a regular
# expression rather than `ast`, which costs ~50 ms a process to parse them all.
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(hologram(?:\.\w+)*)[ \t]+import[ \t]+(\([^)]*\)|[\w ,\t]+)"
                     r"|import[ \t]+(hologram(?:\.\w+)*))", re.MULTILINE)


def _jit() -> Any:
    """jit.py, imported on first need (its llvmlite.binding costs ~22 ms, which a process
    that runs only cached or shipped code never pays) under the SDK's fork guard, so no
    fork lands inside the import (hologram.core.forks)."""
    with FORK_GUARD:
        from . import jit
    return jit


def _offload() -> Any:
    """offload.py (where compiles run: here or in the compile worker), imported like jit.py:
    by what compiles, under the fork guard."""
    with FORK_GUARD:
        from . import offload
    return offload


def _opt_level(program: Program) -> int:
    """LLVM's pipeline level for `program`: O3, or O2 for a deep loop nest (jit.opt_level)."""
    jit = _jit()

    loops = max((sum(1 for i in s.body if isinstance(i, Instr) and i.op == "LOOP") for s in program.stages),
                default=0)
    return jit.opt_level(loops)


def verifier_modules() -> dict[str, Path]:
    """The verifier's module and every `hologram` module it imports, transitively (by
    name -> source file): what decides whether a program passes. The files are found
    through the import system, so this follows the modules wherever they live."""
    found: dict[str, Path] = {}
    todo = [_VERIFIER]
    while todo:
        name = todo.pop()
        spec = None if name in found else importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        found[name] = path = Path(spec.origin)
        for m in _IMPORT.finditer(path.read_text()):
            module, names = m.group(1) or m.group(3), (m.group(2) or "").strip("()")
            todo.append(module)
            if importlib.util.find_spec(module).submodule_search_locations is not None:
                # from a package: `from hologram.isa import program` names a module
                todo += [f"{module}.{n.split()[0]}" for n in names.split(",") if n.strip()
                         and importlib.util.find_spec(f"{module}.{n.split()[0]}") is not None]
    return found


def _codegen_version() -> str:
    """The codegen's declared version plus a digest of its sources (codegen*, vecmath*,
    jit, abi and the support code): what object code depends on besides its program and
    LLVM, so editing any invalidates every cached object without a manual bump, and
    shipped code is used only by the code generator that made it."""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for path in sorted(here.glob("*.py")):
        if path.stem.startswith(_CODEGEN_SOURCES):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    declared = _DECLARED.search((here / "codegen.py").read_text(encoding="utf-8"))
    return f"codegen {declared.group(1) if declared else 0}+{digest.hexdigest()[:16]}"


def _verifier_version() -> str:
    """A digest of the verifier's modules: part of the disk cache's key, since an entry
    certifies that its program passed this verifier. Not part of shipped code's identity:
    a bundle's programs are verified at load by whatever verifier runs there."""
    digest = hashlib.sha256()
    for name, path in sorted(verifier_modules().items()):
        digest.update(name.encode() + b"\0" + path.read_bytes())
    return f"verifier {digest.hexdigest()[:16]}"


def _host_key() -> str:
    """This machine and toolchain for cache keys: what the OS says of the CPU (cpu.py)
    and the llvmlite release (which fixes the LLVM inside it); LLVM's own account
    where the OS says nothing."""
    here = cpu.fingerprint()
    if here is None:
        jit = _jit()

        return jit.host().key
    import llvmlite  # the package alone: its version, not the binding

    return f"llvmlite {llvmlite.__version__}; {here}"


def _support() -> tuple[list[str], dict[str, Any]]:
    """The launch entry point (trampoline.py), the Ctrl-C hook (cancel.py), the SIGBUS
    guard (fault_guard.py) and the thread pool (native_pool.py), as IR compiled into
    every kernel's object code, and the table saying so: a process that loads such code
    adopts them (`_adopt`) instead of compiling them with LLVM."""
    texts, symbols = [trampoline.ir(), cancel.ir()], {"launch": trampoline.ENTRY, "sigint": cancel.HANDLER}
    guard = fault_guard.ir()
    if guard is not None:
        texts.append(guard)
        symbols["sigbus"] = fault_guard.HANDLER
    pool = native_pool.ir()
    if pool is not None:
        texts.append(pool)
        symbols |= {"worker": native_pool.WORKER, "run": native_pool.RUN}
    return texts, {"layout": trampoline.LAYOUT, "symbols": symbols}


def _support_symbols(meta: Any) -> list[str]:
    support = meta.get("support") if isinstance(meta, dict) else None
    if not isinstance(support, dict) or not isinstance(support.get("symbols"), dict):
        return []
    return [str(v) for v in support["symbols"].values()]


def _adopt(meta: Any, loaded: loader.Loaded) -> None:
    """Hand the entry point and the pool in `loaded` to their modules, unless this
    interpreter lays objects out differently from the one that built the code."""
    support = meta.get("support") if isinstance(meta, dict) else None
    if not isinstance(support, dict) or support.get("layout") != trampoline.LAYOUT:
        return
    at = {k: loaded.addresses.get(str(v)) for k, v in support.get("symbols", {}).items()}
    if at.get("launch"):
        trampoline.adopt(at["launch"], loaded)
    if at.get("sigint"):
        cancel.adopt(at["sigint"], loaded)
    if at.get("sigbus"):
        fault_guard.adopt(at["sigbus"], loaded)
    if at.get("worker") and at.get("run"):
        native_pool.adopt(at["worker"], at["run"], loaded)


def _load_linked(obj: bytes, meta: Any, symbols: Sequence[StageSymbol], shipped: bool = False) -> loader.Loaded:
    """`obj` loaded with its stage symbols and support code resolved, the support adopted."""
    loaded = _load(obj, [s.name for s in symbols] + _support_symbols(meta), shipped)
    _adopt(meta, loaded)
    cancel.arm()  # native code is about to run: Ctrl-C must be able to stop it
    return loaded


def _load(obj: bytes, symbols: Sequence[str], shipped: bool = False) -> loader.Loaded:
    """Object code linked here (loader.py) when it can be, else by MCJIT: only code this
    process's LLVM made (a fresh compile, the disk cache). Shipped code (`shipped`) is
    linked here or not at all: MCJIT trusts what it is given, and takes the process
    down on an object it cannot link. RuntimeError when it is refused."""
    if loader.supported():
        try:
            return loader.link(obj, list(symbols))
        except loader.Unsupported as e:
            if shipped:
                raise RuntimeError(f"the loader cannot link it: {e}") from None
    elif shipped:
        raise RuntimeError("shipped object code is linked by cpu_llvm's loader only, which runs on x86-64 Linux")
    jit = _jit()

    return jit.load_object(obj, symbols)


def _usable_here(native: Mapping[str, Any]) -> bool:
    """Whether shipped code for this CPU's architecture and OS uses only features it has."""
    if not cpu.same_platform(str(native.get("triple"))):
        return False
    features = native.get("features", ())
    known = cpu.has_features(features)
    if known is not None:
        return known
    jit = _jit()

    return jit.has_features(features)


# ---------------------------------------------------------------------------- backend
class CpuLlvmBackend(Backend):
    """Native, multithreaded execution of Atlas ISA programs through llvmlite.

    num_threads   threads per launch (default `$HOLOGRAM_NUM_THREADS`, else the CPU count;
                  at most `threads.max_threads()`, 4 per CPU, with a warning)
    cache_dir     disk cache directory (default `$HOLOGRAM_CACHE_DIR`, else the user cache
                  dir); `False` disables the disk cache
    codegen       `Program -> CodegenResult` (tests substitute hand-written modules)
    """

    name = "cpu_llvm"
    priority = 100

    def __init__(self, num_threads: int | None = None, cache_dir: str | Path | bool | None = None,
                 codegen: Callable[[Program], Any] | None = None, codegen_version: str | None = None):
        self.num_threads = (threads.thread_count() if num_threads is None
                            else threads.capped(num_threads, "num_threads"))
        self._cache_dir = cache_dir
        self._codegen = codegen  # None: codegen.compile_program, imported when first needed
        self._codegen_version = codegen_version
        self._verifier_version: str | None = None
        self._memory: MemoryCache[str, Executable] = MemoryCache()  # cache.MEMORY_ENTRIES, thread-safe
        self._lock = threading.RLock()  # held while building: a forked child gets a free one
        renew_in_child(self, "_lock", threading.RLock)
        self._available: bool | None = None

    def __repr__(self) -> str:
        return f"CpuLlvmBackend(num_threads={self.num_threads})"

    def clear_cache(self) -> None:
        """Forget every prepared program held in memory, and with it its machine code once
        no kernel holds it (`hologram.clear_cache()` calls this; the disk cache stays), and
        end the compile worker if one runs (offload.py)."""
        self._memory.clear()
        offload = sys.modules.get(f"{__package__}.offload")  # imported by a compile, if any ran
        if offload is not None:
            offload.stop_worker()

    def available(self) -> bool:
        """Whether llvmlite is installed (the binding is loaded only when something
        compiles; a broken LLVM then raises CompileError)."""
        if self._available is None:
            try:
                self._available = importlib.util.find_spec("llvmlite.binding") is not None
            except (ImportError, ValueError):
                self._available = False
        return self._available

    def allocate(self, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
        return np.zeros(shape, dtype=dtype.np if isinstance(dtype, DType) else dtype)

    def fault_guard(self) -> FaultGuard | None:
        """The SIGBUS guard of fault_guard.py, once a loaded object handed it over (every
        object this code generator makes carries it); None before, and off Linux."""
        return fault_guard.guard()

    @property
    def disk(self) -> DiskCache | None:
        if self._cache_dir is False:
            return None
        return DiskCache(default_cache_dir() if self._cache_dir in (None, True) else Path(self._cache_dir))

    def cache_key(self, program_key: str) -> str:
        if self._verifier_version is None:
            self._verifier_version = _verifier_version()
        return (f"hologram cpu_llvm; program {program_key}; {self._generator()}; {self._verifier_version}; "
                f"{_host_key()}")

    # ------------------------------------------------------------------ prepare
    def prepare(self, program: Program) -> Executable:
        if not isinstance(program, Program):
            raise ArgumentError(f"prepare expects a hologram.isa.program.Program, got {type(program).__name__}")
        key = program_hash(program)
        with trace.span("cpu_llvm prepare", "prepare", program=key) as info:
            exe = self._memory.get(key)
            if exe is not None:
                if info is not None:
                    info["cache"] = "memory"
                return exe
            with self._lock:
                exe = self._memory.get(key)
                if exe is None:
                    exe = self._build(program, key, info)
                    self._memory.put(key, exe)
                elif info is not None:
                    info["cache"] = "memory"
        return exe

    def _build(self, program: Program, key: str, info: dict | None = None) -> Executable:
        """`program` from the disk cache, else compiled (and stored); `info`, a trace
        span's args, learns which (`cache`: `disk` or `miss`)."""
        disk, full_key = self.disk, self.cache_key(key)
        with trace.span("disk cache load", "prepare") as found:
            entry = disk.load(full_key) if disk is not None else None
            if entry is not None:
                # stored only for a program (this hash) that passed this verifier (the key)
                try:
                    symbols = _symbols_from_meta(entry.meta, program)
                    exe = _link(program, key, symbols, _load_linked(entry.obj, entry.meta, symbols), True)
                    if info is not None:
                        info["cache"] = found["found"] = "disk"
                    return exe
                except (ValueError, KeyError, TypeError, RuntimeError):
                    disk.discard(full_key)  # intact but unusable (say, a stale stage table): rebuild
            if found is not None:
                found["found"] = "nothing" if disk is not None else "no disk cache"
        if info is not None:
            info["cache"] = "miss"
        offload = _offload()

        result = self._generate(program)
        symbols = tuple(StageSymbol(e.name, int(e.stage_index), tuple(e.reduce_buffers)) for e in result.stages)
        support, table = _support()
        meta = {"stages": [s.as_json() for s in symbols], "support": table}
        try:
            _check_symbols(symbols, program)
            obj = offload.compile_object(result.module_ir, level=_opt_level(program), support=support)
            with trace.span("link", "prepare"):
                loaded = _load_linked(obj, meta, symbols)
        except (RuntimeError, ValueError) as e:
            raise CompileError(f"cpu_llvm: LLVM rejected the code generated for program '{program.name}' "
                               f"(a code generator bug): {e}") from None
        if disk is not None:
            with trace.span("disk cache store", "prepare"):
                disk.store(full_key, Entry(meta, obj))
        return _link(program, key, symbols, loaded, False)

    def _generate(self, program: Program) -> Any:
        """The verified program's LLVM module (a CodegenResult)."""
        from hologram.backend import verify  # what compiles verifies: imported here, not by what loads

        with trace.span("verify", "prepare"):
            verify(program)
        codegen = self._codegen
        if codegen is None:
            with FORK_GUARD:  # a fork must not land inside the import (hologram.core.forks)
                from .codegen import compile_program as codegen
        try:
            with trace.span("codegen", "prepare"):
                return codegen(program)
        except HologramError:
            raise
        except Exception as e:  # a code generator bug: say so, keep the cause chained
            raise CompileError(f"cpu_llvm: the code generator failed on program '{program.name}' (a bug in "
                               f"hologram_cpu_llvm): {type(e).__name__}: {e}") from e

    # ------------------------------------------------------- native code to ship
    # (hologram.bundles builds object code for other CPUs into a bundle, and hands it back
    # here when a trusted bundle is loaded: docs/bundles.md, "Native code")
    def native_targets(self) -> tuple[str, ...]:
        """The CPUs `compile_native` builds for on this machine: the x86-64 levels, `host`;
        none where shipped code is not used (the loader does not run here)."""
        if not loader.supported():
            return ()
        jit = _jit()

        return (*jit.level_targets(), "host")

    def runs_native(self, target: str) -> bool:
        """Whether object code for `target` (an x86-64 level, or `host`) runs on this CPU;
        a level's features are read from the OS, LLVM asked only where the OS says nothing."""
        if target == "host":
            return bool(self.native_targets())
        features = cpu.X86_64_LEVELS.get(target)
        if features is None or cpu.arch() != "x86_64":
            return False
        known = cpu.has_features(features)
        if known is not None:
            return known
        jit = _jit()

        return jit.has_features(features)

    def native_toolchain(self) -> str:
        """What built object code: the code generator (its version and sources: the
        stages' calling convention, the first field) and LLVM."""
        jit = _jit()

        return f"{self._generator()}; {jit.toolchain()}"

    def _generator(self) -> str:
        if self._codegen_version is None:
            self._codegen_version = _codegen_version()
        return self._codegen_version

    def compile_native(self, program: Program, target: str) -> dict[str, Any]:
        """Object code of the verified `program` for the CPU `target`, with what loading it
        needs: {target, triple, cpu, features, toolchain, meta (the stage table), object}."""
        jit = _jit()

        try:
            t = jit.target(target)
        except ValueError as e:
            raise ArgumentError(f"cpu_llvm: {e}") from None
        result = self._generate(program)
        symbols = tuple(StageSymbol(e.name, int(e.stage_index), tuple(e.reduce_buffers)) for e in result.stages)
        _check_symbols(symbols, program)
        support, table = _support()
        try:
            obj = _offload().compile_object(result.module_ir, level=_opt_level(program), support=support,
                                            target=t.name)
        except RuntimeError as e:
            raise CompileError(f"cpu_llvm: LLVM rejected the code generated for program '{program.name}' "
                               f"(a code generator bug): {e}") from None
        return {"target": t.name, "triple": t.triple, "cpu": t.cpu, "features": t.features,
                "toolchain": self.native_toolchain(),
                "meta": {"stages": [s.as_json() for s in symbols], "support": table},
                "object": obj}

    def check_native(self, program: Program, native: Mapping[str, Any]) -> str | None:
        """What is wrong with shipped object code for `program` (`hologram bundle verify`),
        or None: a well-formed object (`cpu.object_problem`) whose stage table covers the
        program and names functions the object defines."""
        try:
            symbols = _symbols_from_meta(native["meta"], program)
            return cpu.object_problem(bytes(native["object"]), [s.name for s in symbols]
                                      + _support_symbols(native["meta"]))
        except (ValueError, KeyError, TypeError, RuntimeError) as e:
            return str(e)

    def prepare_native(self, program: Program, natives: Sequence[Mapping[str, Any]]) -> Executable | None:
        """`program` from object code shipped with it (what `compile_native` made, from a
        bundle the caller trusts), for the most capable target this CPU runs; None when
        none fits (another CPU, another code generator): then `prepare` compiles it.
        Code is used when this code generator made it, whatever LLVM compiled it; the
        x86-64 levels are tried first, most capable first, and the build host's own code
        only when none fits or LLVM is loaded anyway: its features are LLVM's to judge
        (cpu.has_features knows the levels'), which costs importing llvmlite.

        Code that fits is checked (`check_native`) and linked by loader.py, never by
        MCJIT; code refused either way is not used, with a HologramWarning saying why,
        and the program is compiled instead (docs/bundles.md, "Native code")."""
        key = program_hash(program)
        exe = self._memory.get(key)
        if exe is not None or not loader.supported():
            return exe
        mine = [n for n in natives if str(n.get("toolchain", "")).split("; ", 1)[0] == self._generator()]
        llvm_loaded = "llvmlite.binding" in sys.modules
        order = sorted(mine, key=lambda n: (cpu.has_features(n.get("features", ())) is None and not llvm_loaded,
                                            -len(n.get("features", ()))))
        for n in order:
            if not _usable_here(n):
                continue
            problem = self.check_native(program, n)  # not well formed: never handed to the loader
            if problem is None:
                try:
                    with trace.span("load shipped code", "prepare", program=key, target=n.get("target")):
                        symbols = _symbols_from_meta(n["meta"], program)
                        exe = _link(program, key, symbols, _load_linked(n["object"], n["meta"], symbols, True),
                                    True)
                    self._memory.put(key, exe)
                    return exe
                except (ValueError, KeyError, TypeError, RuntimeError) as e:
                    problem = str(e)
            warnings.warn(HologramWarning(f"cpu_llvm: the object code shipped for program '{program.name}' "
                                          f"({n.get('target')}) is not used: {problem}; the program is compiled "
                                          f"here instead"), stacklevel=3)
        return None

    # ---------------------------------------------------------------- text forms
    text_forms = {
        "llvm": "LLVM IR as the code generator writes it, one function per stage",
        "llvm-opt": "the same after LLVM's O3 pipeline for this CPU (vectorized; O2 for a deep loop nest)",
        "native": "the host CPU's assembly, as the object code holds it",
    }

    def emit(self, program: Program, form: str) -> str:
        """`program` in one of `text_forms` (compiled afresh: nothing is cached)."""
        if form not in self.text_forms:
            raise ArgumentError(f"cpu_llvm has no text form {form!r}; expected one of {', '.join(self.text_forms)}")
        jit = _jit()

        module_ir = self._generate(program).module_ir
        if form == "llvm":
            return module_ir
        try:
            return (jit.optimized_text if form == "llvm-opt" else jit.native_assembly)(module_ir, _opt_level(program))
        except RuntimeError as e:
            raise CompileError(f"cpu_llvm: LLVM rejected the code generated for program '{program.name}' "
                               f"(a code generator bug): {e}") from None

    # ------------------------------------------------------------------- launch
    def launch(self, executable: Any, buffers: Mapping[str, np.ndarray],
               scalars: Mapping[str, Any], symbols: Mapping[str, int]) -> None:
        exe = executable if isinstance(executable, Executable) else self.prepare(executable)
        launch(exe, buffers, scalars, symbols, self.num_threads)

    def launcher(self, executable: Any, symbols: Mapping[str, int]) -> Callable[..., None]:
        """`run(buffers, scalars)` for these symbol values, trusting the caller's checks
        (see `Backend` and launcher.py): what `Kernel` calls on its fast path."""
        exe = executable if isinstance(executable, Executable) else self.prepare(executable)
        return make_launcher(exe, symbols, lambda: self.num_threads)


# ------------------------------------------------------------------ prepare helpers
def _symbols_from_meta(meta: Any, program: Program) -> tuple[StageSymbol, ...]:
    symbols = tuple(StageSymbol(str(s["name"]), int(s["stage_index"]), tuple(map(str, s["reduce_buffers"])))
                    for s in meta["stages"])
    _check_symbols(symbols, program)
    return symbols


def _check_symbols(symbols: Sequence[StageSymbol], program: Program) -> None:
    if sorted(s.stage_index for s in symbols) != list(range(len(program.stages))):
        raise ValueError("the stage table does not cover the program's stages exactly once")
    names = program.buffers()
    for s in symbols:
        if any(b not in names for b in s.reduce_buffers):
            raise ValueError(f"stage table names unknown reduce buffers {s.reduce_buffers}")


def _link(program: Program, key: str, symbols: Sequence[StageSymbol], loaded: loader.Loaded,
          from_cache: bool) -> Executable:
    """The Executable: per stage its function pointer and launch plan, per buffer its
    slot, plus the pairs of params that could alias a written one."""
    _check_symbols(symbols, program)
    decls = program.buffers()
    binding = LaunchBinding.of(program)
    slots = binding.buffers
    names = [b.name for b in slots]
    plans = []
    for sym in sorted(symbols, key=lambda s: s.stage_index):
        st = program.stages[sym.stage_index]
        reduces = []
        for b in sym.reduce_buffers:
            # codegen's reading of the stage (it refuses two kinds on one buffer)
            kind, ufunc = REDUCE_KINDS[reduce_op(st, b)[0]]
            reduces.append(ReduceSlot(names.index(b), ufunc, identity(kind, decls[b].dtype.np)))
        inits = tuple((names.index(i.buffer), i.offset, convert_value(i.value, decls[i.buffer].dtype.np))
                      for i in st.inits)
        block = tuple(st.block) + (1,) * (3 - len(st.block))
        plans.append(StagePlan(st.name, sym.stage_index, STAGE_FN(loaded.addresses[sym.name]), block, inits,
                               tuple(reduces)))
    nparams = binding.nparams
    pairs = tuple((i, j) for i in range(nparams) for j in range(nparams)
                  if i != j and slots[i].written and not (slots[j].written and j < i))
    return Executable(program, key, tuple(plans), binding, loaded,
                      struct.Struct(f"<{len(slots)}Q").pack, struct.Struct(f"<{len(program.symbols)}q").pack,
                      from_cache, pairs)
