"""The wgpu backend: Atlas ISA programs as WGSL compute shaders (wgsl.py) on whatever
adapter wgpu finds (Vulkan, Metal, DX12; Mesa's software Vulkan driver on a machine
without a GPU). docs/gpu.md, "wgpu"."""

from __future__ import annotations

import math
import types
from typing import Any, Mapping, Sequence

import attrs
import numpy as np

from hologram.backend import (DType, LaunchBinding, LRUCache, Backend, Capabilities, Program, ScalarParam,
                              convert_value, domain_extents, format_instr, gathered_sums, program_hash, trace, verify,
                              written_buffers)
from hologram.errors import ArgumentError, ExecutionError, UnsupportedProgram, out_of_bounds

from . import arrays as device_arrays
from . import device as gpu_device
from . import native, sums
from .wgsl import (ERR_CLASS, ERR_LOOP_BUDGET, ERR_OOB_POOL, ERR_OOB_SHARED, ERR_POOL_DEPTH, ERR_POOL_FREE,
                   ERR_POOL_FULL, ERR_WORDS, MAX_LIVE_ALLOCATIONS, NOTHING_ALLOCATED, SUM_GROUPS, ShaderSet,
                   generate)
from .wgsl_exprs import ATLAS_BINDING, PARTIALS_BINDING

__all__ = ["WgpuBackend", "Prepared", "CAPABILITIES"]

TYPES = tuple(d for d in DType if d is not DType.F64)  # every type but f64
_NARROW = (DType.I8, DType.I16, DType.U8, DType.U16, DType.F16)  # in 32-bit registers, packed in storage

# What the backend runs, declared (docs/gpu.md, "What wgpu declares"), as the conformance
# kit measured it on lavapipe. WGSL has 32-bit types only: i64/u64 are two words, 8/16-bit
# integers and f16 live in 32-bit registers and are packed in storage. Float math (exact
# FMA FMOD REM, the transcendentals within 4 ulp) is wgsl_math's, never the drivers'
# builtins. Not declared: f64, reductions WGSL's 32-bit atomics cannot merge.
CAPABILITIES = Capabilities.of(
    "MOV MOV_IMM CVT ADD SUB MUL MIN MAX MAD ABS NEG AND OR XOR NOT SHL SHR SET SEL ISINF ISFINITE "
    "LDG STG LDS STS DIV REM FMA FLOOR CEIL TRUNC RINT SQRT COPYSIGN BRA LOOP CALL RET EXIT BarSync MemFence "
    "ReduceAdd ReduceMin ReduceMax ReduceMul ResAccum PoolAlloc PoolFree PoolLoad PoolStore "
    "ClsGet MIRROR NbrCount UnityTest NbrGet BoundMap PhaseGet PhaseAdv RSQRT FMOD "
    "EXP EXP2 EXPM1 TANH SIGMOID SINH COSH LOG LOG2 LOG10 LOG1P SIN COS TAN ATAN ASIN ACOS ATAN2 "
    "ASINH ACOSH ATANH HYPOT CBRT ERF ERFC POW",
    dtypes=TYPES,
    excluding=[*((op, d) for op in ("ReduceAdd", "ReduceMin", "ReduceMax", "ReduceMul", "ResAccum")
                 for d in _NARROW),
               *((op, d) for op in ("ReduceMin", "ReduceMax", "ReduceMul") for d in (DType.I64, DType.U64))],
    conversions=[(to, frm) for to in TYPES for frm in TYPES],
    max_block_threads=1024)


@attrs.frozen(eq=False)
class Prepared:
    """What `prepare` returns: the verified program, its binding, shaders and pipelines."""

    program: Program
    binding: LaunchBinding
    shaders: ShaderSet
    pipelines: tuple[Any, ...]
    written: frozenset[str]
    # each stage's full f32 sums (docs/gpu.md, "Full float sums"), found once, not per launch
    sums: tuple[tuple[tuple[str, int, DType], ...], ...] = attrs.field(init=False, default=attrs.Factory(
        lambda self: tuple(gathered_sums(self.program, stage) for stage in self.program.stages), takes_self=True))


class WgpuBackend(Backend):
    """Atlas ISA stages as WebGPU compute dispatches."""

    name = "wgpu"
    priority = 5  # below interp (10) and cpu_llvm (100): used when asked for by name
    capabilities = CAPABILITIES
    text_forms = types.MappingProxyType({"wgsl": "the WGSL compute shader of each stage"})
    # Generated test cases of any size: diff-test's long f32 reductions (2**24 terms, where
    # a sum added one contribution at a time stalls) run here too, 0.3 s each on lavapipe.
    max_test_elements = None

    def __init__(self) -> None:
        self._cache: LRUCache = LRUCache(256)

    def available(self) -> bool:
        return gpu_device.unavailable_reason() is None

    def unavailable_reason(self) -> str | None:
        return gpu_device.unavailable_reason()

    def allocate(self, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
        return np.zeros(shape, dtype.np)

    def to_device(self, array: np.ndarray) -> device_arrays.WgpuArray:
        return device_arrays.to_device(self, array)

    def allocate_device(self, shape: tuple[int, ...], dtype: DType) -> device_arrays.WgpuArray:
        return device_arrays.allocate_device(self, shape, dtype)

    def emit(self, program: Program, form: str) -> str:
        if form != "wgsl":
            return super().emit(program, form)
        self.check_covers(program)
        return "\n".join(s.code for s in generate(verify(program)).stages)

    def clear_cache(self) -> None:
        self._cache.clear()

    def prepare(self, program: Program) -> Prepared:
        if not isinstance(program, Program):
            raise ArgumentError(f"prepare expects a hologram.isa.program.Program, got {type(program).__name__}")
        self.check_covers(program)
        key = program_hash(program)
        with trace.span("wgpu prepare", "prepare", program=key) as span:
            hit = self._cache.get(key)
            if span is not None:
                span["cache"] = "miss" if hit is None else "memory"
            if hit is not None:
                return hit
            verify(program)
            shaders = generate(program)
            refusal = gpu_device.device_refusal(program, tuple(2 + len(s.buffers) for s in shaders.stages))
            if refusal is not None:
                raise UnsupportedProgram(f"backend 'wgpu' cannot run program {program.name!r}: {refusal}")
            pipelines = gpu_device.make_pipelines(tuple(s.code for s in shaders.stages))
            prepared = Prepared(program, LaunchBinding.of(program), shaders, pipelines, written_buffers(program))
        self._cache.put(key, prepared)
        return prepared

    # ----------------------------------------- shaders shipped in bundles (native.py)
    def native_targets(self) -> tuple[str, ...]:
        """`wgsl`, on any machine (writing shaders needs no adapter)."""
        return (native.TARGET,)

    def runs_native(self, target: str) -> bool:
        return target == native.TARGET and self.available()

    def native_toolchain(self) -> str:
        return native.toolchain()

    def compile_native(self, program: Program, target: str) -> dict[str, Any]:
        if target != native.TARGET:
            raise ArgumentError(f"wgpu: unknown native target {target!r}; expected {native.TARGET!r}")
        self.check_covers(program)
        return native.compile_native(verify(program))

    def check_native(self, program: Program, code: Mapping[str, Any]) -> str | None:
        return native.check_native(program, code)

    def prepare_native(self, program: Program, natives: Sequence[Mapping[str, Any]]) -> Prepared | None:
        """`program` from the shaders a trusted bundle shipped (no code generation), or None."""
        key = program_hash(program)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        shipped = native.load_shipped(program, natives)
        if shipped is None:
            return None
        prepared = Prepared(program, LaunchBinding.of(program), *shipped, written_buffers(program))
        self._cache.put(key, prepared)
        return prepared

    def launch(self, executable: Prepared | Program, buffers: Mapping[str, np.ndarray],
               scalars: Mapping[str, Any], symbols: Mapping[str, int]) -> None:
        prepared = executable if isinstance(executable, Prepared) else self.prepare(executable)
        bound = prepared.binding.bind(buffers, scalars, symbols, owner=self)  # its own device arrays as they are
        _Launch(prepared, bound).run()


class _Launch:
    """One launch: numpy buffers to the device (device arrays are there already, and
    temporaries are made there, zeroed), each stage dispatched, the written numpy
    buffers back."""

    def __init__(self, prepared: Prepared, bound: Any) -> None:
        self.prepared, self.bound = prepared, bound
        self.gpu = gpu_device.gpu()
        program = prepared.program
        self.arrays = {b.name: a for b, a in zip(prepared.binding.buffers, bound.arrays)}
        self.extents = [tuple(domain_extents(stage, bound.symbols)) for stage in program.stages]

    def info_words(self) -> np.ndarray:
        shaders, program = self.prepared.shaders, self.prepared.program
        words: list[int] = []
        for stage, ext in zip(program.stages, self.extents):
            ext3 = tuple(ext) + (1,) * (3 - len(ext))
            block = tuple(stage.block) + (1,) * (3 - len(stage.block))
            if any(e >= 2 ** 31 for e in ext3):  # a lane's id, ctaid * ntid + tid, must not wrap a u32
                raise ExecutionError(f"stage '{stage.name}': a domain of {ext} lanes; the wgpu backend runs fewer "
                                     f"than 2**31 along an axis")
            words += [*ext3, *(-(-e // b) for e, b in zip(ext3, block))]
        for name in shaders.buffer_names:
            words.append(self.arrays[name].size & 0xFFFFFFFF)
        for name in shaders.symbol_names:
            v = int(self.bound.symbols[name]) & (2 ** 64 - 1)
            words += [v & 0xFFFFFFFF, v >> 32]
        for param, value in zip(self.prepared.binding.scalars, self.bound.scalars):
            words += _scalar_words(param, value)
        words.append(self.gpu.loop_budget)
        return np.array(words, dtype=np.uint32)

    def device_buffers(self, names: set[str]) -> dict[str, Any]:
        temporaries = {b.name for b in self.prepared.binding.temps}
        out = {}
        for name in names:
            array = self.arrays[name]
            if isinstance(array, device_arrays.WgpuArray):
                out[name] = array.buffer
                continue
            too_large = device_arrays.too_large(array.nbytes)
            if too_large is not None:
                raise ExecutionError(f"buffer {name!r} is {too_large}")
            out[name] = (device_arrays.zeroed_buffer(array.nbytes) if name in temporaries
                         else device_arrays.upload(array))
        return out

    def run(self) -> None:
        import wgpu

        device, prepared = self.gpu.device, self.prepared
        shaders = prepared.shaders
        used = {name for s in shaders.stages for name in s.buffers} - {ATLAS_BINDING, PARTIALS_BINDING}
        used |= {name for sums in prepared.sums for name, _, _ in sums}  # merged into after their stage
        inits = {i.buffer for st in prepared.program.stages for i in st.inits}
        buffers = self.device_buffers(used | (inits & set(self.arrays)))
        buffers[ATLAS_BINDING] = self.gpu.atlas_tables
        usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        err = device.create_buffer_with_data(data=np.zeros(ERR_WORDS, np.uint32), usage=usage)
        info = device.create_buffer_with_data(data=self.info_words(), usage=wgpu.BufferUsage.STORAGE)
        for k, (stage, shader, pipeline) in enumerate(zip(prepared.program.stages, shaders.stages,
                                                          prepared.pipelines)):
            # the span times the stage's submission: the queue runs it after, in order
            with trace.span(f"stage {stage.name}", "stage", kernel=prepared.program.name, stage=stage.name):
                for init in stage.inits:
                    self.write_init(stage, init, buffers[init.buffer])
                block = tuple(stage.block) + (1,) * (3 - len(stage.block))
                ext3 = tuple(self.extents[k]) + (1,) * (3 - len(self.extents[k]))
                gathered = prepared.sums[k]
                groups = [min(-(-e // b), self.gpu.max_groups) for e, b in zip(ext3, block)]
                if 0 in groups:
                    continue
                if gathered:  # at most SUM_GROUPS workgroups, each one partial (docs/gpu.md, "Full float sums")
                    for axis in range(3):
                        groups[axis] = min(groups[axis], max(1, SUM_GROUPS // math.prod(groups[:axis])))
                    buffers[PARTIALS_BINDING] = device.create_buffer(size=4 * math.prod(groups) * len(gathered),
                                                                     usage=wgpu.BufferUsage.STORAGE)
                entries = [{"binding": 0, "resource": {"buffer": err}}, {"binding": 1, "resource": {"buffer": info}}]
                entries += [{"binding": j + 2, "resource": {"buffer": buffers[name]}}
                            for j, name in enumerate(shader.buffers)]
                group = device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=entries)
                encoder = device.create_command_encoder()
                compute = encoder.begin_compute_pass()
                compute.set_pipeline(pipeline)
                compute.set_bind_group(0, group)
                compute.dispatch_workgroups(*groups)
                compute.end()
                if gathered:
                    sums.encode(encoder, buffers[PARTIALS_BINDING], math.prod(groups),
                                [(buffers[name], offset) for name, offset, _ in gathered], err)
                device.queue.submit([encoder.finish()])
        record = np.frombuffer(device.queue.read_buffer(err), np.uint32)
        if record[0]:
            raise self.error(record)
        params = {b.name for b in prepared.binding.params}
        for name in prepared.written & set(buffers) & params:
            array = self.arrays[name]
            if isinstance(array, np.ndarray):  # a device array stays where the stages wrote it
                device_arrays.download(buffers[name], array)

    def write_init(self, stage: Any, init: Any, buffer: Any) -> None:
        array = self.arrays[init.buffer]
        if not 0 <= init.offset < array.size:
            raise ExecutionError(f"stage '{stage.name}': init of '{init.buffer}' at offset {init.offset} is out "
                                 f"of bounds ({array.size} elements)")
        value = np.array([convert_value(init.value, array.dtype)], array.dtype)
        self.gpu.device.queue.write_buffer(buffer, init.offset * array.itemsize, value.view(np.uint8))

    def error(self, record: np.ndarray) -> ExecutionError | UnsupportedProgram:
        """The interpreter's ExecutionError for the first failure a shader recorded; an
        UnsupportedProgram when a lane ran past the adapter's loop budget."""
        _, code, stage_index, k, lo, hi, gx, gy, gz, aux = (int(v) for v in record)
        program = self.prepared.program
        stage = program.stages[stage_index]
        if code == ERR_LOOP_BUDGET:
            return UnsupportedProgram(
                f"backend 'wgpu' cannot run program {program.name!r} on this adapter ({self.gpu.adapter_name}): "
                f"stage '{stage.name}' needs more than {self.gpu.loop_budget:,} loop iterations in one invocation "
                f"(its lanes' loops and the blocks each workgroup runs), and this driver ends a longer one early "
                f"(docs/gpu.md, \"Traps\"); run it on another backend, e.g. kernel.on('cpu_llvm'), or on a GPU")
        ins = stage.body[k]
        index = lo | (hi << 32)
        index -= (1 << 64) if index >> 63 else 0
        where = f"stage '{stage.name}': instruction {k} `{format_instr(ins, align=False)}`"
        site = program.sites[ins.site] if ins.site is not None and 0 <= ins.site < len(program.sites) else None
        gid = (gx, gy, gz)[:len(stage.domain)]
        lane = f"{where} (lane gid={gid})"
        if code == ERR_CLASS:
            return ExecutionError.at(site, f"{lane}: {index} is not an Atlas class (0..95)")
        if code == ERR_POOL_FULL:
            size = next(m.size for m in stage.pools if m.name == ins.target)
            return ExecutionError(f"{lane}: pool '{ins.target}' of {size} elements cannot allocate {ins.count} more "
                                  f"({index} in use)")
        if code == ERR_POOL_FREE:
            last = "nothing is allocated" if aux == NOTHING_ALLOCATED else f"the most recent starts at {aux}"
            return ExecutionError(f"{lane}: PoolFree of handle {index}, but {last}")
        if code == ERR_POOL_DEPTH:
            return ExecutionError(f"{lane}: more than {MAX_LIVE_ALLOCATIONS} live pool allocations (the wgpu "
                                  f"backend's limit)")
        if code == ERR_OOB_POOL:
            pool = f"the allocated part of pool {ins.addr.buffer!r}"
            return ExecutionError.at(site, f"{lane}: {out_of_bounds(index, pool, aux)}")
        if code == ERR_OOB_SHARED:
            shared = next(m for m in stage.shared if m.name == ins.addr.buffer)
            what: tuple[str, int] = (f"shared array {shared.name!r}", shared.size)
        else:
            what = (f"global buffer {ins.addr.buffer!r}", self.arrays[ins.addr.buffer].size)
        return ExecutionError.at(site, f"{where} (lane gid={gid}): {out_of_bounds(index, *what)}")


def _scalar_words(param: ScalarParam, value: Any) -> list[int]:
    if param.dtype in (DType.I64, DType.U64):
        v = int(value) & (2 ** 64 - 1)
        return [v & 0xFFFFFFFF, v >> 32]
    if param.dtype in (DType.F32, DType.F16):  # an f16 as the f32 register holds it (exact)
        return [int(np.asarray(value, np.float32).view(np.uint32)), 0]
    if param.dtype.is_int:  # 8/16/32-bit: the register's sign- or zero-extended value
        return [int(value) & 0xFFFFFFFF, 0]
    if param.dtype is DType.BOOL:
        return [int(bool(value)), 0]
    return [0, 0]  # a type no declared instruction reads (the capability check refused every use)

