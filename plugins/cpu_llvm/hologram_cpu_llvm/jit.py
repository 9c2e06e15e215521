"""llvmlite plumbing: the host target, compilation to object code, and loading.

Compiling and loading are separate on purpose: `compile_object` (parse, verify, run the
module pipeline, emit a relocatable object) is the expensive half and its output is what
the disk cache stores; `load_object` (hand the object to an MCJIT engine, resolve the
stage symbols) is all a warm process does. `STATS` counts both, so tests can prove that
a warm start never ran the optimizer.

Where the time goes (docs/cpu-llvm.md, "Compile time"): the module pipeline and the
object emission are nearly all of a compile; loading an object is ~0.3 ms.

llvmlite >= 0.45 initializes LLVM itself (`llvm.initialize()` now raises); only the
native target and asm printer still need registering, once. llvmlite serializes every
call into LLVM with one process-wide lock, so compiling on several threads buys nothing.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Iterable, Sequence

import attrs
import llvmlite
import llvmlite.binding as llvm

from hologram.backend import FORK_GUARD, trace

from . import cancel, cpu, fault_guard
from .loader import STATS, Loaded, process_symbol

# LLVM's C++ objects are not documented as thread-safe for concurrent use of one target
# machine or context; compiles are rare and slow anyway, so they are serialized. Every
# call into LLVM holds the SDK's fork guard, which a fork waits for: a child must not
# inherit LLVM (its context, llvmlite's own lock) in the middle of another thread's
# compile, which it could neither finish nor undo. This module is imported on first need
# under the same guard (backend.py's `_jit`), so its top level takes no lock.
_LOCK = FORK_GUARD

# What object code may reference besides libc and libm (the cancel flag, the fault
# guard's block), for MCJIT as for the loader: every engine in this process resolves these names.
for _name, _address in (cancel.SYMBOLS | fault_guard.SYMBOLS).items():
    llvm.add_symbol(_name, _address)


@attrs.frozen
class Host:
    """What native code is built for. `key` changes whenever code built on one machine
    or toolchain could be wrong or suboptimal on another, so it is part of cache keys."""

    triple: str
    cpu: str
    features: str

    @property
    def key(self) -> str:
        major, minor, patch = llvm.llvm_version_info
        return (f"llvmlite {llvmlite.__version__}; LLVM {major}.{minor}.{patch}; {self.triple}; "
                f"cpu {self.cpu}; features {hashlib.sha256(self.features.encode()).hexdigest()[:16]}")


@functools.cache
def host() -> Host:
    """The machine this process runs on (raises RuntimeError when LLVM has no native target)."""
    with _LOCK:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        return Host(llvm.get_process_triple(), llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())


# Tuning added to every target's features. LLVM tunes its Intel AVX-512 models (Skylake-X
# through Emerald Rapids, and the x86-64-v4 level) to prefer 256-bit vectors, for the
# clock drop 512-bit instructions once caused; the vectorizers then use half the width
# the CPU has. Lifting it doubled the FMA width of the tiled contraction: batched a @ b
# (8 x 512^2 f32), one thread, 45 -> 25 ms on this Emerald Rapids (docs/cpu-llvm.md,
# "Vector width"). A CPU without AVX-512 ignores the flag.
TUNING = ",-prefer-256-bit"


def target_machine() -> llvm.TargetMachine:
    """A fresh O3 target machine for the host. Fresh because an MCJIT engine takes
    ownership of the target machine it is created with."""
    h = host()
    target = llvm.Target.from_triple(h.triple)
    return target.create_target_machine(cpu=h.cpu, features=h.features + TUNING, opt=3, reloc="pic",
                                        codemodel="default", jit=True)


@functools.cache
def _compiler() -> llvm.TargetMachine:
    """The target machine every compile uses (callers hold `_LOCK`): creating one costs
    ~0.4 ms, and emitting an object neither changes nor keeps anything in it."""
    return target_machine()


# The module pipeline's level. Measured against O2 on the benchmark kernels: axpy, fused,
# sum and softmax get byte-identical objects at both levels, in the same compile time;
# the tiled gemm gets different code at O3 that ran 1.5x faster (63 vs 96 ms) for ~15%
# more compile time. So O3 stays; a lighter level would only make gemm slower.
OPT_LEVEL = 3
# ...except for deep loop nests, where every level's time grows steeply with the depth,
# O3's most: a full sum over a rank-16 array (13 in-lane LOOPs) took 9.4 s at O3 and
# 1.4 s at O2 (rank 10: 1.0 s and 0.3 s); an elementwise kernel over rank 14 (11 LOOPs)
# 1.2 s at O2 and O1 alike, rank 20 past 30 s, growing ~1.6x per loop. O0 stays at
# ~0.02 s at any depth, so past VERY_DEEP_NEST_LOOPS the pipeline is skipped: such a
# kernel runs slower, but no program can make LLVM take minutes. No stdlib kernel has
# more than 3 LOOPs in a stage; an elementwise kernel over rank r has r - 3.
DEEP_NEST_LOOPS = 4
DEEP_NEST_OPT_LEVEL = 2
VERY_DEEP_NEST_LOOPS = 8
VERY_DEEP_NEST_OPT_LEVEL = 0


def optimize(module: llvm.ModuleRef, tm: llvm.TargetMachine, level: int = OPT_LEVEL) -> None:
    """Run the module pipeline (new pass manager) with loop and SLP vectorization."""
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(module, pb)
    STATS["optimize"] += 1


def _optimized(module_ir: str, level: int) -> llvm.ModuleRef:
    """Parse, verify and optimize `module_ir` for the host (the caller holds `_LOCK`)."""
    tm = _compiler()
    module = llvm.parse_assembly(module_ir)
    module.verify()
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    optimize(module, tm, level)
    return module


def opt_level(loops_per_stage: int) -> int:
    """The pipeline level for a module whose busiest stage holds `loops_per_stage` LOOPs."""
    if loops_per_stage > VERY_DEEP_NEST_LOOPS:
        return VERY_DEEP_NEST_OPT_LEVEL
    return DEEP_NEST_OPT_LEVEL if loops_per_stage > DEEP_NEST_LOOPS else OPT_LEVEL


def compile_object(module_ir: str, optimized_ir: list[str] | None = None, level: int = OPT_LEVEL,
                   support: Sequence[str] = ()) -> bytes:
    """Textual LLVM IR -> optimized relocatable object code for the host, with the
    modules in `support` (hand-written runtime code: the launch entry point, the thread
    pool) linked in after the optimizer, so they are compiled as written.

    Raises RuntimeError when the IR does not parse or verify (a code generator bug, never
    a user error: the caller wraps it). `optimized_ir`, when given, receives the IR after
    optimization (for tests that check vectorization)."""
    with _LOCK:
        with trace.span("llvm optimize", "prepare", level=level):
            module = _optimized(module_ir, level)
        if optimized_ir is not None:
            optimized_ir.append(str(module))
        with trace.span("llvm emit", "prepare"):
            _link_support(module, _compiler(), support)
            obj = _compiler().emit_object(module)
        STATS["emit"] += 1
        return obj


def _link_support(module: llvm.ModuleRef, tm: llvm.TargetMachine, support: Sequence[str]) -> None:
    for text in support:
        extra = llvm.parse_assembly(text)
        extra.verify()
        extra.triple = tm.triple
        extra.data_layout = str(tm.target_data)
        module.link_in(extra)  # internal helpers of the same name are renamed apart


def optimized_text(module_ir: str, level: int = OPT_LEVEL) -> str:
    """The LLVM IR after the module pipeline (`--emit llvm-opt`)."""
    with _LOCK:
        return str(_optimized(module_ir, level))


def native_assembly(module_ir: str, level: int = OPT_LEVEL) -> str:
    """The host assembly the object code would hold (`--emit native`)."""
    with _LOCK:
        return _compiler().emit_assembly(_optimized(module_ir, level))


def resolvable(name: str) -> bool:
    """Whether MCJIT can resolve `name`: a symbol of the process (libm, libc) or one
    registered with llvmlite."""
    with _LOCK:
        return bool(llvm.address_of_symbol(name) or process_symbol(name))


def load_object(obj: bytes, symbols: Iterable[str]) -> Loaded:
    """Load object code into a new MCJIT engine and resolve `symbols` to addresses.

    One engine per object keeps programs independent: two programs may export the same
    symbol name, and dropping a program frees its code. Undefined references (libm)
    resolve against the process; they are checked first, because MCJIT aborts the whole
    process on an unresolvable one. Raises RuntimeError when a symbol is missing."""
    missing = [name for name in cpu.undefined_symbols(obj) or () if not resolvable(name)]
    if missing:
        raise RuntimeError(f"the object code needs {', '.join(sorted(missing))}, which this process does not "
                           f"provide")
    with _LOCK:
        # llvmlite creates an engine around a module only; that (empty) module is taken
        # out again before finalizing, or finalizing would run the code generator on it
        # (~0.7 ms, most of a warm load).
        empty = llvm.parse_assembly("")
        engine = llvm.create_mcjit_compiler(empty, target_machine())
        engine.remove_module(empty)
        engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        engine.finalize_object()
        addresses = {}
        for name in symbols:
            addr = engine.get_function_address(name)
            if not addr:
                raise RuntimeError(f"symbol {name!r} is not defined by the object code")
            addresses[name] = addr
        STATS["load"] += 1
        return Loaded(addresses, engine)


# ------------------------------------------------------------ targets for shipped code
@attrs.frozen
class Target:
    """A CPU to build object code for: a level (`x86-64-v3`) or `host`, the build machine."""

    name: str
    triple: str
    cpu: str
    features: tuple[str, ...]  # the LLVM features the code may use, all required to run it


def host_features() -> frozenset[str]:
    """The LLVM features this CPU has."""
    host()
    with _LOCK:
        return frozenset(name for name, on in llvm.get_host_cpu_features().items() if on)


def level_targets() -> tuple[str, ...]:
    """The named levels object code can be built for on this machine's architecture."""
    return tuple(cpu.X86_64_LEVELS) if host().triple.startswith("x86_64") else ()


def target(name: str) -> Target:
    """The target `name` (a level of this architecture, or `host`); ValueError otherwise."""
    h = host()
    if name == "host":
        return Target("host", h.triple, h.cpu, tuple(sorted(host_features())))
    if name not in level_targets():
        raise ValueError(f"no target {name!r} here; expected host or one of {', '.join(level_targets()) or 'none'}")
    return Target(name, h.triple, name, tuple(sorted(cpu.X86_64_LEVELS[name])))


def has_features(features: Iterable[str]) -> bool:
    """Whether this CPU has every LLVM feature in `features`, as LLVM sees it."""
    return set(features) <= host_features()


@functools.cache
def _compiler_for(t: Target) -> llvm.TargetMachine:
    machine = llvm.Target.from_triple(t.triple)
    features = ",".join(f"+{f}" for f in t.features) + TUNING
    return machine.create_target_machine(cpu=t.cpu, features=features, opt=3, reloc="pic", codemodel="default")


def compile_object_for(module_ir: str, t: Target, level: int = OPT_LEVEL, support: Sequence[str] = ()) -> bytes:
    """Like `compile_object`, for the CPU `t` rather than this one (code to ship)."""
    with _LOCK:
        tm = _compiler_for(t)
        module = llvm.parse_assembly(module_ir)
        module.verify()
        module.triple = tm.triple
        module.data_layout = str(tm.target_data)
        optimize(module, tm, level)
        _link_support(module, tm, support)
        obj = tm.emit_object(module)
        STATS["emit"] += 1
        return obj


def toolchain() -> str:
    major, minor, patch = llvm.llvm_version_info
    return f"llvmlite {llvmlite.__version__}; LLVM {major}.{minor}.{patch}"
