"""LLVM IR -> PTX through llvmlite's NVPTX target (no libNVVM: it rejects LLVM 22's IR).

The PTX ISA version is pinned per target, low, so that the driver of any machine that
has such a GPU can JIT the PTX (a PTX version newer than the driver knows is refused at
load): 7.8 for sm_80 (CUDA 11.8) and 8.0 for sm_90 (CUDA 12.0), as Triton and tinygrad
pin theirs. LLVM would otherwise emit the newest version it knows.

llvmlite >= 0.45 initializes LLVM itself (`llvm.initialize()` now raises); the NVPTX
target and its asm printer are registered here, once. llvmlite serializes its calls
into LLVM with one process-wide lock, so one lock here costs nothing more.
"""

from __future__ import annotations

import functools
import threading

import llvmlite
import llvmlite.binding as llvm

from .targets import PTX_VERSIONS, check_target

TRIPLE = "nvptx64-nvidia-cuda"
OPT_LEVEL = 3

_LOCK = threading.Lock()


def toolchain() -> str:
    """What makes the PTX: part of every cache key of what this backend builds."""
    major, minor, patch = llvm.llvm_version_info
    return f"llvmlite {llvmlite.__version__}; LLVM {major}.{minor}.{patch}; {TRIPLE}"


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
    module.triple = TRIPLE
    module.data_layout = str(tm.target_data)
    pto = llvm.create_pipeline_tuning_options(speed_level=OPT_LEVEL)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(module, pb)
    return module
