"""Running a prepared program on the device: the module's image for the device's compute
capability, the grid of each stage, one launch of the program (numpy arrays copied in
and out, device arrays used where they are), and the error word's decoding into the
interpreter's words.

A launch (`run`: `upload`, `launch_stages`, `finish`; the GPU benchmarks call the three
apart, to time launches on device-resident buffers):
1. the program's module is loaded once per process (`load`: `cuModuleLoadData` with the
   cubin built for the device's architecture when there is one, else the PTX of the
   newest target the device can run, which the driver JIT-compiles; then
   `cuModuleGetFunction` per stage kernel);
2. one device allocation holds every numpy buffer (params then temporaries, each at a
   256-byte boundary), the error word and the scratch memory (the per-block partials of
   the stages' full float sums, `abi.tree_sums`); the numpy params are copied in
   (`cuMemcpyHtoDAsync`), the temporaries and the error word zeroed (`cuMemsetD8Async`),
   all on the device's one stream; a device array (arrays.py) is not in it: its own
   pointer is packed, nothing copied;
3. the kernels' parameters are packed once (`ArgumentLayout.pack`: every kernel takes
   the same list) and each kernel is launched in order with it
   (`CU_LAUNCH_PARAM_BUFFER_POINTER`): a stage's grid is `ceil(domain / block)` per
   axis, its `.init` and sums kernels one block; a stage with an empty domain is not
   launched;
4. the error word is read back; a failed check raises the interpreter's
   `ExecutionError` and nothing is copied back (as wgpu; a device array keeps what the
   kernels wrote before the failure); otherwise the written numpy params are copied
   back into the caller's arrays (`cuMemcpyDtoHAsync`), the stream is synchronized and
   the allocation freed.

`driver` is `cuda.bindings.driver` unless a test passes another object with its
functions (tests/test_launch.py runs this module against cuda-bindings' own argument
checks without a device).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import attrs
import numpy as np

from hologram.backend import AXES, Program, domain_extents, error_record
from hologram.errors import ArgumentError, ExecutionError

from .abi import PARTIAL_BYTES
from .arrays import CudaArray
from .driver import DriverError, call

# The error word (codegen.py writes it): ERROR_WORDS i64 `[code, stage, instruction,
# index]`, zeroed before a launch; its codes and decoding are the SDK's (error_record).
ERROR_WORDS = error_record.ERROR_WORDS

# A grid's extent per axis (CUDA's limits: 2**31 - 1 blocks on x, 65535 on y and z).
MAX_GRID = (2 ** 31 - 1, 65535, 65535)
ALIGNMENT = 256  # each buffer's offset in the launch's one allocation (cuMemAlloc's own alignment)


def grid(stage_name: str, extents: Sequence[int], block: Sequence[int]) -> tuple[int, int, int]:
    """The grid of a stage with domain `extents` and `block` (both up to rank 3):
    `ceil(extent / block)` blocks per axis; an ExecutionError when an axis needs more
    blocks than CUDA launches."""
    ext = tuple(extents) + (1,) * (3 - len(extents))
    blk = tuple(block) + (1,) * (3 - len(block))
    out = tuple(-(-e // b) for e, b in zip(ext, blk))
    for axis, n, most, e, b in zip(AXES, out, MAX_GRID, ext, blk):
        if n > most:
            raise ExecutionError(f"stage '{stage_name}': a domain of {e} lanes on axis {axis} in blocks of {b} "
                                 f"needs {n} blocks; CUDA launches at most {most} on {axis}")
    return out  # type: ignore[return-value]


@attrs.frozen
class Image:
    """What `cuModuleLoadData` is given: a cubin, or PTX (NUL-terminated) for the driver's
    JIT, and the target it was built for."""

    kind: str  # "cubin" or "ptx"
    target: str
    data: bytes


def _sm(target: str) -> tuple[int, int]:
    digits = target.removeprefix("sm_")
    return int(digits[:-1]), int(digits[-1])


def choose_image(ptx: Mapping[str, str], cubins: Mapping[str, bytes], capability: tuple[int, int]) -> Image:
    """The image for a device of compute `capability`: the cubin of the newest target of
    the same major version at or below it (a cubin runs on its own major version only,
    on that minor and newer), else the PTX of the newest target at or below it, which
    the driver compiles for the device (a newer GPU, say sm_100, runs sm_90's PTX)."""
    fitting = sorted((t for t in ptx if _sm(t) <= capability), key=_sm)
    if not fitting:
        have = ", ".join(sorted(ptx, key=_sm))
        raise ExecutionError(f"cuda: the device's compute capability {capability[0]}.{capability[1]} is older than "
                             f"every target built ({have})")
    binary = [t for t in fitting if t in cubins and _sm(t)[0] == capability[0]]
    if binary:
        return Image("cubin", binary[-1], cubins[binary[-1]])
    return Image("ptx", fitting[-1], ptx[fitting[-1]].encode() + b"\0")


def execution_error(program: Program, record: Sequence[int], sizes: Mapping[str, int]) -> BaseException:
    """The ExecutionError for the error word `[code, stage, instruction, index]` a kernel
    wrote, worded as the interpreter words it (the SDK's decoding, shared with cpu_llvm);
    `sizes` the global buffers' element counts."""
    return error_record.execution_error(program, record, sizes, backend="cuda", reporter="the device")


@attrs.frozen(eq=False)
class Loaded:
    """A program's module in the device's context: the image it came from and one
    function per stage kernel."""

    image: Image
    module: Any
    functions: tuple[Any, ...]


def load(kernel_names: Sequence[str], image: Image, driver: Any) -> Loaded:
    """`image` loaded into the current context and its stage kernels looked up."""
    module = call(driver.cuModuleLoadData, image.data)
    functions = tuple(call(driver.cuModuleGetFunction, module, name.encode()) for name in kernel_names)
    return Loaded(image, module, functions)


def _aligned(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


def layout(nbytes: Sequence[int]) -> tuple[tuple[int, ...], int]:
    """Each numpy buffer's offset in the launch's one allocation, and the error word's (last)."""
    offsets, at = [], 0
    for n in nbytes:
        offsets.append(at)
        at += _aligned(max(n, 1))
    return tuple(offsets), at


def extra_for(packed: np.ndarray, size: np.ndarray) -> np.ndarray:
    """cuLaunchKernel's `extra` array: the packed parameters' address and the address of
    their size (a size_t), as CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE / _END."""
    from cuda.bindings import driver

    return np.array([driver.CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT, packed.ctypes.data,
                     driver.CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT, size.ctypes.data,
                     driver.CU_LAUNCH_PARAM_END_AS_INT], dtype=np.uint64)


@attrs.frozen(eq=False)
class OnDevice:
    """A launch's arguments on the device: the one allocation (`base`), each buffer's
    device pointer (in it, or a device array's own), the error word's offset, and the
    packed parameters with cuLaunchKernel's `extra` array pointing at them (kept here,
    alive, for as long as launches use them)."""

    base: int
    pointers: tuple[int, ...]
    err_at: int
    grids: tuple[tuple[int, int, int], ...]
    packed: np.ndarray
    size: np.ndarray
    extra: np.ndarray


def upload(exe: Any, bound: Any, stream: Any, driver: Any) -> OnDevice:
    """The grids checked, then one allocation: the numpy params copied in, the temporaries
    and the error word zeroed, the parameters packed (once, for every stage kernel). A
    device array (arrays.CudaArray: the backend's own, or adopted) is packed as its
    pointer, nothing copied; one the program writes must not be read-only."""
    program = exe.program
    grids = tuple((1, 1, 1) if kernel.kind != "stage" else
                  grid(program.stages[kernel.stage_index].name,
                       domain_extents(program.stages[kernel.stage_index], bound.symbols), kernel.block)
                  for kernel in exe.kernels)
    blocks = {k.stage_index: int(np.prod(g)) for k, g in zip(exe.kernels, grids) if k.kind == "stage"}
    scratch = max((blocks[k.stage_index] * exe.sums[k.stage_index] * PARTIAL_BYTES
                   for k in exe.kernels if k.kind == "sums"), default=0)
    arrays = bound.arrays
    for slot, array in zip(exe.binding.buffers, arrays):
        if slot.written and isinstance(array, CudaArray) and array.readonly:
            raise ArgumentError(f"buffer '{slot.name}' is written by the program but the device array is read-only "
                                "(its __cuda_array_interface__ says so)")
    offsets, err_at = layout([a.nbytes for a in arrays if not isinstance(a, CudaArray)])
    scratch_at = _aligned(err_at + ERROR_WORDS * 8)
    base = int(call(driver.cuMemAlloc, scratch_at + scratch))
    try:
        temps = set(map(id, exe.binding.temps))
        at, pointers = iter(offsets), []
        for slot, array in zip(exe.binding.buffers, arrays):
            if isinstance(array, CudaArray):  # already on the device: its pointer as it is
                pointers.append(array.pointer)
                continue
            pointers.append(base + next(at))
            if id(slot) in temps or not array.nbytes:
                call(driver.cuMemsetD8Async, pointers[-1], 0, max(array.nbytes, 1), stream)
            else:
                call(driver.cuMemcpyHtoDAsync, pointers[-1], array.ctypes.data, array.nbytes, stream)
        call(driver.cuMemsetD8Async, base + err_at, 0, ERROR_WORDS * 8, stream)
        packed = np.frombuffer(bytearray(exe.arguments.pack(pointers, bound.values, bound.scalars, base + err_at,
                                                             base + scratch_at)), np.uint8)
        size = np.array([packed.size], np.uint64)
        return OnDevice(base, tuple(pointers), err_at, grids, packed, size, extra_for(packed, size))
    except BaseException:
        _free_quietly(driver, base)
        raise


def launch_stages(exe: Any, loaded: Loaded, on: OnDevice, stream: Any, driver: Any) -> None:
    """Each kernel, in order, on `stream`: a stage's `.init` kernel as one thread before
    the stage's own, its sums kernel as one block after (a stage of an empty domain is
    skipped, its inits and sums are not: the sums kernel then adds nothing)."""
    for function, kernel, blocks in zip(loaded.functions, exe.kernels, on.grids):
        if 0 in blocks:
            continue
        call(driver.cuLaunchKernel, function, *blocks, *kernel.block, 0, stream, 0, on.extra.ctypes.data)


def finish(exe: Any, bound: Any, on: OnDevice, stream: Any, driver: Any) -> None:
    """The error word read back (a failure raised in the interpreter's words, nothing
    copied back), else the written numpy params copied back (a device array holds its
    results already); the allocation freed either way."""
    try:
        record = np.zeros(ERROR_WORDS, np.int64)
        call(driver.cuMemcpyDtoHAsync, record.ctypes.data, on.base + on.err_at, record.nbytes, stream)
        call(driver.cuStreamSynchronize, stream)
        if record[0]:
            raise execution_error(exe.program, record,
                                  {s.name: a.size for s, a in zip(exe.binding.buffers, bound.arrays)})
        for slot, array, pointer in zip(exe.binding.params, bound.arrays, on.pointers):
            if slot.written and array.nbytes and not isinstance(array, CudaArray):  # a device array stays there
                call(driver.cuMemcpyDtoHAsync, array.ctypes.data, pointer, array.nbytes, stream)
        call(driver.cuStreamSynchronize, stream)
    except BaseException:
        _free_quietly(driver, on.base)  # the first failure is the one to report
        raise
    call(driver.cuMemFree, on.base)


def run(exe: Any, loaded: Loaded, bound: Any, stream: Any, driver: Any) -> None:
    """One launch of the prepared `exe` (backend.Executable) with `bound`, the checked
    arguments (`LaunchBinding.bind`), on `stream` in the current context."""
    on = upload(exe, bound, stream, driver)
    try:
        launch_stages(exe, loaded, on, stream, driver)
    except BaseException:
        _free_quietly(driver, on.base)
        raise
    finish(exe, bound, on, stream, driver)


def _free_quietly(driver: Any, base: int) -> None:
    try:
        call(driver.cuMemFree, base)
    except DriverError:  # a failed launch can leave the context unusable: freeing fails too
        pass
