"""LLVM IR -> PTX through llvmlite's NVPTX target (no libNVVM: it rejects LLVM 22's IR).

The PTX ISA version is pinned per target, low, so that the driver of any machine that
has such a GPU can JIT the PTX (a PTX version newer than the driver knows is refused at
load): 7.8 for sm_80 (CUDA 11.8) and 8.0 for sm_90 (CUDA 12.0), as Triton and tinygrad
pin theirs. LLVM would otherwise emit the newest version it knows.

A module that calls libdevice (codegen_math.py: the transcendentals) gets it linked in
before the optimizer runs, with every libdevice function made internal, so O3 inlines
the few it calls and deletes the rest; LLVM's NVPTX pipeline resolves libdevice's
`__nvvm_reflect("__CUDA_FTZ")` to 0 (subnormals kept, as the ISA wants). libdevice comes
from the `nvidia-nvvm` wheel (a dependency), found through `cuda.pathfinder`, which also
looks under CUDA_HOME/CUDA_PATH.

llvmlite >= 0.45 initializes LLVM itself (`llvm.initialize()` now raises); the NVPTX
target and its asm printer are registered here, once. llvmlite serializes its calls
into LLVM with one process-wide lock, so one lock here costs nothing more.
"""

from __future__ import annotations

import functools

import llvmlite
import llvmlite.binding as llvm

from hologram.backend import FORK_GUARD
from hologram.errors import PluginError

from .codegen_math import PREFIX as LIBDEVICE_PREFIX
from .targets import PTX_VERSIONS, check_target

TRIPLE = "nvptx64-nvidia-cuda"
OPT_LEVEL = 3

# Every call into LLVM holds the SDK's fork guard: a fork waits for it, so no child
# inherits LLVM in the middle of a compile (cpu_llvm's JIT holds the same one).
_LOCK = FORK_GUARD


LIBDEVICE_HINT = "pip install nvidia-nvvm (or set CUDA_HOME to a CUDA toolkit)"


def toolchain() -> str:
    """What makes the PTX: part of every cache key of what this backend builds."""
    major, minor, patch = llvm.llvm_version_info
    return f"llvmlite {llvmlite.__version__}; LLVM {major}.{minor}.{patch}; {TRIPLE}; {_libdevice_version()}"


def libdevice_path() -> str:
    """Where libdevice.10.bc is; a PluginError naming what to install when it is nowhere."""
    from cuda.pathfinder import BitcodeLibNotFoundError, locate_bitcode_lib

    try:
        return locate_bitcode_lib("device").abs_path
    except BitcodeLibNotFoundError as e:
        raise PluginError(f"cuda: the transcendentals need libdevice, which was not found ({e})",
                          hint=LIBDEVICE_HINT) from None


@functools.cache
def _libdevice_version() -> str:
    """The libdevice that would be linked, by its wheel's version or its path."""
    try:
        from importlib.metadata import version

        return f"libdevice from nvidia-nvvm {version('nvidia-nvvm')}"
    except Exception:  # no wheel: a toolkit's libdevice, if any
        try:
            return f"libdevice at {libdevice_path()}"
        except PluginError:
            return "no libdevice"


@functools.cache
def _libdevice() -> llvm.ModuleRef:
    """libdevice parsed once (callers hold `_LOCK`); each link takes a clone, since
    linking consumes the module linked in."""
    with open(libdevice_path(), "rb") as f:
        return llvm.parse_bitcode(f.read())


def _link_libdevice(module: llvm.ModuleRef) -> None:
    """libdevice linked into `module` when it calls a libdevice function, everything it
    brings made internal (kept only where called)."""
    if not any(f.is_declaration and f.name.startswith(LIBDEVICE_PREFIX) for f in module.functions):
        return
    own = {g.name for g in (*module.functions, *module.global_variables) if not g.is_declaration}
    module.link_in(_libdevice().clone())
    for g in (*module.functions, *module.global_variables):
        if not g.is_declaration and g.name not in own:
            g.linkage = "internal"


@functools.cache
def _target_machine(target: str) -> llvm.TargetMachine:
    """The target machine for `target` (callers hold `_LOCK`); emitting PTX neither
    changes nor keeps anything in it."""
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm.Target.from_triple(TRIPLE).create_target_machine(
        cpu=target, features=f"+{PTX_VERSIONS[target]}", opt=OPT_LEVEL)


def optimized_ir(module_ir: str, target: str) -> str:
    """`module_ir` verified and run through the O3 module pipeline for `target`."""
    with _LOCK:
        return str(_optimize(module_ir, check_target(target)))


def emit_ptx(module_ir: str, target: str) -> str:
    """The PTX of `module_ir` for `target` (`sm_80` or `sm_90`), at its pinned version."""
    with _LOCK:
        module = _optimize(module_ir, check_target(target))
        return _target_machine(target).emit_assembly(module)


def _optimize(module_ir: str, target: str) -> llvm.ModuleRef:
    tm = _target_machine(target)
    module = llvm.parse_assembly(module_ir)
    module.verify()
    _link_libdevice(module)
    module.triple = TRIPLE
    module.data_layout = str(tm.target_data)
    pto = llvm.create_pipeline_tuning_options(speed_level=OPT_LEVEL)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(module, pb)
    return module
