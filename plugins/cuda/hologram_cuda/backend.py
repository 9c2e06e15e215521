"""The CUDA backend object: what it declares, `prepare` (verify, generate, PTX per
target, cubins when nvJitLink is installed) and `launch` (not yet written: it needs a
device to be tested; without one it says so)."""

from __future__ import annotations

import threading
from typing import Any, Mapping

import attrs
import numpy as np

from hologram.backend import (OPCODES, Backend, Capabilities, DType, LaunchBinding, LRUCache, Program, program_hash,
                              trace, verify)
from hologram.errors import ArgumentError, CompileError, HologramError, PluginError, UnsupportedProgram

from .arguments import ArgumentLayout
from .targets import DTYPES, TARGETS, check_target

# What the code generator emits (docs/gpu.md, "CUDA"): every opcode of the ISA at every
# dtype, less ERFC.f64, whose libdevice implementation NVIDIA documents as 5 ulp, past
# the ISA's 4 (the f32 and f16 ERFC are within it). The transcendentals are libdevice's,
# their accuracy NVIDIA's documented bounds, not yet measured on a device.
CAPABILITIES = Capabilities.of(
    tuple(OPCODES), dtypes=DTYPES,
    excluding=[("ERFC", DType.F64)],
    conversions=[(to, frm) for to in DTYPES for frm in DTYPES],
    shared_memory=True, pools=True,
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
    a buffer, scalar or shared array of an undeclared dtype, or a block deeper than
    CUDA's z limit."""
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
