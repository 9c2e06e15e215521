"""The CUDA backend object: what it declares, `prepare` (verify, generate, PTX per
target, cubins when nvJitLink is installed; cached in memory and on disk) and `launch`
(launch.py: the module for the device's compute capability, numpy in and out, device
arrays in place: arrays.py)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Mapping, Sequence

import attrs
import numpy as np

from hologram.backend import (FORK_GUARD, OPCODES, Backend, Capabilities, DType, LaunchBinding, LRUCache, Program,
                              program_hash, renew_in_child, trace, verify)
from hologram.errors import ArgumentError, CompileError, HologramError, PluginError, UnsupportedProgram

from . import native
from .abi import KernelEntry, lists_kernels_of, tree_sums
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
    kernels: tuple[KernelEntry, ...]  # in launch order: a stage's init kernel, the stage's, its sums kernel
    ptx: Mapping[str, str]
    cubins: Mapping[str, bytes]
    # each stage's number of full float sums (abi.tree_sums), found once, not per launch
    sums: tuple[int, ...] = attrs.field(init=False, default=attrs.Factory(
        lambda self: tuple(len(tree_sums(self.program, stage)) for stage in self.program.stages), takes_self=True))


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

    def __init__(self, targets: tuple[str, ...] | None = None, cache_dir: str | Path | bool | None = None):
        """`targets` to build for (default all); `cache_dir` the disk cache's folder
        (default `$HOLOGRAM_CACHE_DIR/cuda`, else the user cache directory's
        `hologram/cuda`; False: no disk cache)."""
        self.targets = tuple(check_target(t) for t in (targets or TARGETS))
        self._cache_dir = cache_dir
        self._memory: LRUCache[str, Executable] = LRUCache(CACHE_ENTRIES)
        self._loaded: LRUCache[str, Any] = LRUCache(CACHE_ENTRIES)  # program hash -> launch.Loaded
        self._lock = threading.Lock()
        renew_in_child(self, "_lock")  # held while building: a forked child gets a free one

    def available(self) -> bool:
        """Whether `cuInit` succeeds and device 0 has compute capability 8.0 or newer.
        Probed once per process (importing cuda-bindings and cuInit: ~40 ms), and only
        when asked: the registry asks a backend of lower priority than an available one
        (cpu_llvm) only when it is named."""
        from .driver import device_status

        return device_status().available

    def unavailable_reason(self) -> str | None:
        """Why `available()` is False: "no CUDA driver: ..." (cuInit's failure), "no CUDA
        device: ...", "no usable CUDA device: ..." (older than sm_80); None when it is."""
        from .driver import device_status

        status = device_status()
        return None if status.available else status.reason

    def allocate(self, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
        return np.zeros(shape, dtype=dtype.np if isinstance(dtype, DType) else dtype)

    # ------------------------------------------------ device arrays (arrays.py)
    def to_device(self, array: np.ndarray) -> Any:
        """`array` copied into a new allocation on the device (an arrays.CudaArray); a
        PluginError saying why when there is no usable device (driver.device)."""
        from . import arrays

        return arrays.to_device(self, array)

    def allocate_device(self, shape: tuple[int, ...], dtype: DType) -> Any:
        """A new zeroed allocation on the device (the outputs of a call on device arrays)."""
        from . import arrays

        return arrays.allocate_device(self, shape, dtype)

    def adopt(self, value: Any, where: str) -> Any:
        """An object exposing `__cuda_array_interface__` (CuPy, PyTorch, numba) as a
        CudaArray over its memory, no copy (arrays.adopt); None for anything else."""
        if not hasattr(value, "__cuda_array_interface__"):
            return None
        from . import arrays

        return arrays.adopt(self, value, where)

    def clear_cache(self) -> None:
        """Forget the prepared programs held in memory (the disk cache and the modules
        loaded on the device stay)."""
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

    def _check(self, program: Program) -> None:
        """`program` verified, within the declaration and without a refusal."""
        verify(program)
        self.check_covers(program)
        why = refusal(program)
        if why is not None:
            raise UnsupportedProgram(f"backend 'cuda' cannot run program {program.name!r}: {why}")

    def _module(self, program: Program):
        """The verified, covered program's LLVM module (a codegen.KernelModule)."""
        self._check(program)
        with FORK_GUARD:  # a fork must not land inside the import (hologram.core.forks)
            from .codegen import compile_program
        try:
            return compile_program(program)
        except HologramError:
            raise
        except Exception as e:  # a code generator bug: say so, keep the cause chained
            raise CompileError(f"cuda: the code generator failed on program '{program.name}' (a bug in "
                               f"hologram_cuda): {type(e).__name__}: {e}") from e

    @property
    def disk(self):
        """The disk cache (cache.DiskCache), or None when `cache_dir` is False."""
        from .cache import DiskCache, default_cache_dir

        if self._cache_dir is False:
            return None
        return DiskCache(default_cache_dir() if self._cache_dir in (None, True) else Path(self._cache_dir))

    def _build(self, program: Program, key: str) -> Executable:
        """From the disk cache when every target's entry is there (the program verified and
        checked as a fresh build checks it, LLVM and nvJitLink not run), else built and stored."""
        from .assemble import nvjitlink_version
        from .cache import Entry, cache_key

        disk, nvjitlink = self.disk, nvjitlink_version()
        keys = {t: cache_key(key, t, nvjitlink) for t in self.targets}
        entries = {t: disk.load(k) for t, k in keys.items()} if disk is not None else {}
        if entries and all(e is not None for e in entries.values()):
            self._check(program)
            kernels = entries[self.targets[0]].kernels
            cubins = {t: e.cubin for t, e in entries.items() if e.cubin}
            if len({e.kernels for e in entries.values()}) == 1 and lists_kernels_of(program, kernels) \
                    and len(cubins) in (0, len(entries)):
                return Executable(program, key, LaunchBinding.of(program), ArgumentLayout.of(program), kernels,
                                  {t: e.ptx for t, e in entries.items()}, cubins)
        exe = self._compile(program, key)
        if disk is not None:
            for t, k in keys.items():
                disk.store(k, Entry(exe.ptx[t], exe.cubins.get(t, b""), exe.kernels))
        return exe

    def _compile(self, program: Program, key: str) -> Executable:
        from .assemble import assemble, have_nvjitlink

        with FORK_GUARD:  # llvmlite.binding: a fork must not land inside the import
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
        code, kind = picked
        return Executable(program, program_hash(program), LaunchBinding.of(program), ArgumentLayout.of(program),
                          code.kernels, {code.target: code.ptx}, {code.target: code.cubin} if kind == "cubin" else {})

    # ------------------------------------------------------------------- launch
    def launch(self, executable: Executable | Program, buffers: Mapping[str, np.ndarray],
               scalars: Mapping[str, Any], symbols: Mapping[str, int]) -> None:
        """One launch on the device (launch.run): the arguments checked as every backend
        checks them, the numpy ones copied to the device (device arrays are there), each
        stage launched, the error word read back and the written numpy buffers copied back."""
        prepared = executable if isinstance(executable, Executable) else self.prepare(executable)
        # wrong arguments are refused alike everywhere; this backend's device arrays are taken as they are
        bound = prepared.binding.bind(buffers, scalars, symbols, owner=self)
        reason = self.unavailable_reason()
        if reason is not None:
            raise PluginError(f"backend 'cuda' cannot launch program {prepared.program.name!r}: {reason}",
                              hint="the PTX and cubins are built (Kernel.emit('ptx')); run the kernel on another "
                                   "backend, e.g. kernel.on('cpu_llvm')")
        from cuda.bindings import driver

        from . import launch
        from .driver import device

        gpu = device()
        gpu.make_current()
        with trace.span("cuda launch", "launch", program=prepared.key):
            launch.run(prepared, self._module_on_device(prepared, gpu, driver), bound, gpu.stream, driver)

    def _module_on_device(self, prepared: Executable, gpu: Any, driver: Any) -> Any:
        """The program's module loaded into the device's context, once per process
        (launch.Loaded): the cubin for its compute capability, else PTX for the JIT."""
        from . import launch

        loaded = self._loaded.get(prepared.key)
        if loaded is None:
            with self._lock:
                loaded = self._loaded.get(prepared.key)
                if loaded is None:
                    image = launch.choose_image(prepared.ptx, prepared.cubins, gpu.capability)
                    loaded = launch.load([k.name for k in prepared.kernels], image, driver)
                    self._loaded.put(prepared.key, loaded)
        return loaded

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
