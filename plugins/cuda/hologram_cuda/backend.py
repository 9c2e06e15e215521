"""The CUDA backend object: what it declares, `prepare` (verify, generate, PTX per
target, cubins when nvJitLink is installed) and `launch` (not yet written: it needs a
device to be tested; without one it says so)."""

from __future__ import annotations

import threading
from typing import Any, Mapping, Sequence

import attrs
import numpy as np

from hologram.backend import (Backend, Capabilities, DType, LaunchBinding, LRUCache, Program, program_hash, trace,
                              verify)
from hologram.errors import ArgumentError, CompileError, HologramError, PluginError, UnsupportedProgram

from . import native
from .arguments import ArgumentLayout
from .targets import DTYPES, TARGETS, check_target

# What the code generator emits (docs/gpu.md, "CUDA"): these opcodes at the dtypes of
# DTYPES, less float REM (NVPTX lowers `frem` to a libcall, libdevice's fmod: not yet
# linked). Left out, and why: the transcendentals (libdevice, with the ULP contract
# still to be measured), FMOD and float REM (the same), reductions and ResAccum (atomics
# or a block tree plus a second pass, not yet), pools, PhaseGet/PhaseAdv (per-lane
# phase state, not yet) and f16.
OPCODES_DECLARED = ("MOV MOV_IMM ADD SUB MUL DIV REM MIN MAX MAD FMA ABS NEG AND OR XOR NOT SHL SHR SEL SET CVT "
                    "SQRT RSQRT FLOOR CEIL TRUNC RINT COPYSIGN ISINF ISFINITE "
                    "ClsGet MIRROR NbrCount UnityTest NbrGet BoundMap "
                    "LDG STG LDS STS BarSync MemFence BRA LOOP CALL RET EXIT")
CAPABILITIES = Capabilities.of(
    OPCODES_DECLARED, dtypes=DTYPES,
    excluding=[("REM", DType.F32), ("REM", DType.F64)],
    conversions=[(to, frm) for to in DTYPES for frm in DTYPES],
    shared_memory=True, pools=False,
    max_block_threads=1024,  # a CUDA block's limit
    max_rank=3)

CACHE_ENTRIES = 256
MAX_BLOCK_Z = 64  # a CUDA block's z extent (x and y may reach 1024; the declaration caps the product)


@attrs.frozen
class Executable:
    """A prepared program: its launch binding, its kernels' parameter layout, its
    kernels, and the code per target (PTX always; cubins when nvJitLink is installed,
    else an empty mapping)."""

    program: Program
    key: str
    binding: LaunchBinding
    arguments: ArgumentLayout
    kernels: tuple  # codegen.KernelEntry per stage
    ptx: Mapping[str, str]
    cubins: Mapping[str, bytes]


def refusal(program: Program) -> str | None:
    """What `program` has that the declaration cannot say and this backend does not run:
    a buffer, scalar or shared array of an undeclared dtype, a stage `.init`, or a block
    deeper than CUDA's z limit."""
    for name, decl in program.buffers().items():
        if decl.dtype not in DTYPES:
            return f"buffer '{name}' is {decl.dtype}, which this backend does not declare"
    for name, p in program.scalars().items():
        if p.dtype not in DTYPES:
            return f"scalar '{name}' is {p.dtype}, which this backend does not declare"
    for stage in program.stages:
        for m in stage.shared:
            if m.dtype not in DTYPES:
                return f"stage '{stage.name}': shared array '{m.name}' is {m.dtype}, which this backend does not declare"
        if len(stage.block) == 3 and stage.block[2] > MAX_BLOCK_Z:
            return f"stage '{stage.name}': block {list(stage.block)} is deeper than CUDA's {MAX_BLOCK_Z} lanes on z"
        if stage.inits:
            return f"stage '{stage.name}' has .init stores, which this backend does not run yet"
    return None


class CudaBackend(Backend):
    """Atlas ISA -> PTX (llvmlite NVPTX) -> cubin (nvJitLink); runs on an NVIDIA GPU."""

    name = "cuda"
    # Below cpu_llvm until launches run and pass the conformance kit on a device: the
    # default backend is the available one of highest priority.
    priority = 50
    capabilities = CAPABILITIES
    text_forms = {
        "llvm": "LLVM IR as the code generator writes it, one ptx_kernel per stage",
        "llvm-opt": "the same after LLVM's O3 pipeline for sm_80",
        "ptx": "the PTX for sm_80 (PTX ISA 7.8)",
        "ptx-sm_90": "the PTX for sm_90 (PTX ISA 8.0)",
    }

    def __init__(self, targets: tuple[str, ...] | None = None):
        self.targets = tuple(check_target(t) for t in (targets or TARGETS))
        self._memory: LRUCache[str, Executable] = LRUCache(CACHE_ENTRIES)
        self._lock = threading.Lock()

    def available(self) -> bool:
        """False everywhere until `launch` is written, without probing the driver: every
        process that picks a default backend asks, and the probe (importing
        cuda-bindings, cuInit) costs ~40 ms. `unavailable_reason` probes."""
        return False

    def unavailable_reason(self) -> str:
        """Why `available()` is False: "no CUDA driver: ..." (cuInit's failure), "no CUDA
        device: ...", or, with a device, that `launch` is not written (docs/gpu.md, "CUDA")."""
        from .driver import device_status

        status = device_status()
        if not status.available:
            return status.reason
        return f"{status.reason} found, but launching on a device is not implemented yet (PTX and cubins only)"

    def allocate(self, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
        return np.zeros(shape, dtype=dtype.np if isinstance(dtype, DType) else dtype)

    def clear_cache(self) -> None:
        self._memory.clear()

    # ------------------------------------------------------------------ prepare
    def prepare(self, program: Program) -> Executable:
        """`program` verified, within the declaration, as PTX for each of `targets` and,
        when nvJitLink is installed, as cubins; cached in memory by program hash."""
        if not isinstance(program, Program):
            raise ArgumentError(f"prepare expects a hologram.isa.program.Program, got {type(program).__name__}")
        key = program_hash(program)
        exe = self._memory.get(key)
        if exe is not None:
            return exe
        with self._lock, trace.span("cuda prepare", "prepare", program=key):
            exe = self._memory.get(key)
            if exe is None:
                exe = self._build(program, key)
                self._memory.put(key, exe)
        return exe

    def _module(self, program: Program):
        """The verified, covered program's LLVM module (a codegen.KernelModule)."""
        verify(program)
        self.check_covers(program)
        why = refusal(program)
        if why is not None:
            raise UnsupportedProgram(f"backend 'cuda' cannot run program {program.name!r}: {why}")
        from .codegen import compile_program

        try:
            return compile_program(program)
        except HologramError:
            raise
        except Exception as e:  # a code generator bug: say so, keep the cause chained
            raise CompileError(f"cuda: the code generator failed on program '{program.name}' (a bug in "
                               f"hologram_cuda): {type(e).__name__}: {e}") from e

    def _build(self, program: Program, key: str) -> Executable:
        from .assemble import assemble, have_nvjitlink
        from .ptx import emit_ptx

        module = self._module(program)
        try:
            ptx = {t: emit_ptx(module.module_ir, t) for t in self.targets}
        except RuntimeError as e:
            raise CompileError(f"cuda: LLVM rejected the code generated for program '{program.name}' "
                               f"(a code generator bug): {e}") from None
        cubins = {t: assemble(text, t, program.name) for t, text in ptx.items()} if have_nvjitlink() else {}
        return Executable(program, key, LaunchBinding.of(program), ArgumentLayout.of(program), module.kernels, ptx,
                          cubins)

    # ------------------------------------- PTX and cubins shipped in bundles (native.py)
    def native_targets(self) -> tuple[str, ...]:
        """`sm_80` and `sm_90` when nvJitLink is installed (no GPU needed), else none."""
        return native.targets()

    def runs_native(self, target: str) -> bool:
        return self.available() and target in native.targets()

    def native_toolchain(self) -> str:
        return native.toolchain()

    def compile_native(self, program: Program, target: str) -> dict[str, Any]:
        return native.compile_native(program, self._module(program), target)

    def check_native(self, program: Program, code: Mapping[str, Any]) -> str | None:
        return native.check_native(program, code)

    def prepare_native(self, program: Program, natives: Sequence[Mapping[str, Any]]) -> Executable | None:
        """`program` from the code a trusted bundle shipped, for this device (the cubin of
        its architecture, else PTX for the driver to JIT: `native.choose`); None without a
        device, or when nothing fits it. The hand-off to the launch path: the Executable
        holds the shipped PTX, and the cubin only when the device runs it, so the launch
        loads `cubins[target]` when present, else JITs `ptx[target]` (docs/gpu.md, "Bundles")."""
        if not self.available():
            return None
        picked = native.shipped_for_device(program, natives)
        if picked is None:
            return None
        from .codegen import KernelEntry

        code, kind = picked
        kernels = tuple(KernelEntry(name, stage, block) for name, stage, block in code.kernels)
        return Executable(program, program_hash(program), LaunchBinding.of(program), ArgumentLayout.of(program),
                          kernels, {code.target: code.ptx}, {code.target: code.cubin} if kind == "cubin" else {})

    # ------------------------------------------------------------------- launch
    def launch(self, executable: Executable | Program, buffers: Mapping[str, np.ndarray],
               scalars: Mapping[str, Any], symbols: Mapping[str, int]) -> None:
        prepared = executable if isinstance(executable, Executable) else self.prepare(executable)
        prepared.binding.bind(buffers, scalars, symbols)  # wrong arguments are refused alike everywhere
        reason = self.unavailable_reason()
        raise PluginError(f"backend 'cuda' cannot launch program {prepared.program.name!r}: "
                          f"{reason}",
                          hint="the PTX and cubins are built (Kernel.emit('ptx')); run the kernel on another "
                               "backend, e.g. kernel.on('cpu_llvm')")

    # ---------------------------------------------------------------- text forms
    def emit(self, program: Program, form: str) -> str:
        """`program` in one of `text_forms` (compiled afresh: nothing is cached)."""
        if form not in self.text_forms:
            raise ArgumentError(f"cuda has no text form {form!r}; expected one of {', '.join(self.text_forms)}")
        from .ptx import emit_ptx, optimized_ir

        module_ir = self._module(program).module_ir
        if form == "llvm":
            return module_ir
        if form == "llvm-opt":
            return optimized_ir(module_ir, "sm_80")
        return emit_ptx(module_ir, "sm_90" if form == "ptx-sm_90" else "sm_80")
