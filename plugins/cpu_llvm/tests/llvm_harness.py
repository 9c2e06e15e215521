"""A small harness that runs the code generator's output beside the reference interpreter.

The module `hologram_cpu_llvm.codegen.compile_program` emits is JIT-compiled here with
llvmlite at O3, as the backend does, and its stage functions called through ctypes
following the stage ABI of codegen.py, one call per stage or per chunk of blocks (each
with its own partials, as the runtime's threads). Programs the verifier refuses run here
only; verified ones also through the real backend.
"""

from __future__ import annotations

import ctypes
import functools
import math

import llvmlite.binding as llvm
import numpy as np

from hologram.core.errors import ExecutionError, VerifyError
from hologram.core.types import Affine, DType
from hologram.isa.opcodes import const
from hologram.isa.program import BufferParam, Instr, Program, Reg, RegDecl, Special, Stage
from hologram.verify.verifier import verify
from hologram_cpu_llvm import CpuLlvmBackend, codegen, jit  # jit: MCJIT learns the runtime's symbols
from hologram_cpu_llvm.codegen import compile_program, reduce_op
from hologram_interp import InterpBackend
from hologram.isa.encoding import program_hash
from hologram_interp.decode import decode_program

I64, F32 = DType.I64, DType.F32
N = Affine.of("n")
INTERP = InterpBackend()
REAL = CpuLlvmBackend(num_threads=2, cache_dir=False)


# ====================================================================== the JIT
@functools.cache
def target_machine() -> llvm.TargetMachine:
    """The host's target machine at O3, as the backend's."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3)


_ENGINES: dict[str, tuple] = {}


def _engine(module_ir: str):
    """(engine, module) for the IR, optimized at O3 as the backend does; cached by text."""
    if module_ir not in _ENGINES:
        mod = llvm.parse_assembly(module_ir)
        mod.verify()
        tm = target_machine()
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(3))
        pb.getModulePassManager().run(mod, pb)
        engine = llvm.create_mcjit_compiler(mod, target_machine())
        engine.finalize_object()
        _ENGINES[module_ir] = (engine, mod)
    return _ENGINES[module_ir][0]


STAGE_FN = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_IDENTITY = {"ReduceAdd": lambda t: -0.0 if t.is_float else 0, "ReduceMul": lambda t: 1,
             "ReduceMin": lambda t: math.inf if t.is_float else t.max,
             "ReduceMax": lambda t: -math.inf if t.is_float else t.min}
_MERGE = {"ReduceAdd": np.add, "ReduceMul": np.multiply, "ReduceMin": np.minimum, "ReduceMax": np.maximum}


def _size(p: BufferParam, symbols: dict[str, int]) -> int:
    return math.prod(d.evaluate(symbols) for d in p.shape)


def llvm_launch(program: Program, buffers: dict[str, np.ndarray], scalars: dict, symbols: dict[str, int],
                *, blocks_per_call: int | None = None) -> None:
    """Run `program` through the generated code, one call per stage (or per chunk of
    `blocks_per_call` blocks, each with its own partials, as the runtime's threads do)."""
    result = compile_program(program)
    engine = _engine(result.module_ir)
    mem = {name: buffers[name].reshape(-1) for name, p in program.buffers().items() if p.role != "temp"}
    for t in program.temps:
        mem[t.name] = np.zeros(_size(t, symbols), t.dtype.np)
    ptrs = (ctypes.c_void_p * max(1, len(mem)))(*[mem[n].ctypes.data for n in program.buffers()])
    syms = np.array([symbols[s] for s in program.symbols] or [0], dtype=np.int64)
    slots = np.zeros(max(1, len(program.scalars())), dtype=np.uint64)
    for i, (name, p) in enumerate(program.scalars().items()):
        raw = np.asarray(const(scalars[name], p.dtype) if not isinstance(scalars[name], np.generic)
                         else scalars[name], dtype=p.dtype.np).tobytes()
        slots.view(np.uint8)[8 * i:8 * i + len(raw)] = np.frombuffer(raw, np.uint8)
    with np.errstate(all="ignore"):
        for entry in result.stages:
            stage = program.stages[entry.stage_index]
            for init in stage.inits:
                buf = mem[init.buffer]
                buf[init.offset] = const(init.value, DType.from_numpy(buf.dtype))
            ext = [d.evaluate(symbols) for d in stage.domain]
            grid = [-(-e // b) for e, b in zip(ext, tuple(stage.block) + (1,) * 3)]
            total = math.prod(grid) if min(ext) > 0 else 0
            fn = STAGE_FN(engine.get_function_address(entry.name))
            step = blocks_per_call or max(total, 1)
            for start in range(0, total, step):
                partials = []
                for name in entry.reduce_buffers:
                    op, _ = reduce_op(stage, name)
                    bt = DType.from_numpy(mem[name].dtype)
                    partials.append(np.full(mem[name].size, const(_IDENTITY[op](bt), bt), bt.np))
                pptrs = (ctypes.c_void_p * max(1, len(partials)))(*[p.ctypes.data for p in partials])
                err = np.zeros(4, np.int64)
                fn(start, min(total, start + step), ctypes.cast(ptrs, ctypes.c_void_p).value,
                   syms.ctypes.data, slots.ctypes.data, ctypes.cast(pptrs, ctypes.c_void_p).value, err.ctypes.data)
                if err[0]:
                    raise ExecutionError(f"cpu_llvm error record {err.tolist()} "
                                         f"({codegen.ERROR_KINDS[int(err[0])]})")
                for name, part in zip(entry.reduce_buffers, partials):
                    op, _ = reduce_op(stage, name)
                    mem[name][:] = _MERGE[op](mem[name], part)


# ========================================================= beside the interpreter
def both(program: Program, buffers: dict[str, np.ndarray], scalars: dict | None = None,
         symbols: dict[str, int] | None = None) -> tuple[dict, dict]:
    """Run on copies of `buffers` with the interpreter and with the generated code."""
    scalars, symbols = scalars or {}, symbols or {}
    want = {k: v.copy() for k, v in buffers.items()}
    got = {k: v.copy() for k, v in buffers.items()}
    INTERP.launch(INTERP.prepare(program) if verifies(program) else decoded(program), want, scalars, symbols)
    run_llvm(program, got, scalars, symbols)
    return got, want


def run_llvm(program: Program, buffers: dict[str, np.ndarray], scalars: dict, symbols: dict[str, int]) -> None:
    """Through the real backend (two threads, no disk cache) for verified programs; the
    harness runs the few the verifier refuses (inexact immediates kept on purpose)."""
    if verifies(program):
        REAL.launch(REAL.prepare(program), buffers, scalars, symbols)
    else:
        llvm_launch(program, buffers, scalars, symbols)


@functools.lru_cache(maxsize=None)
def verifies(program: Program) -> bool:
    """Whether the verifier accepts `program`: only then may the real backend run it."""
    try:
        verify(program)
        return True
    except VerifyError:
        return False


def decoded(program: Program):
    """The interpreter's executable of `program`, decoded without the verifier."""
    return decode_program(program, program_hash(program))


# ===================================================================== programs
def stage_program(body, regs, *, params=None, temps=(), shared=(), pools=(), inits=(), block=(64,),
                  domain=(N,), symbols=("n",), stages=None) -> Program:
    """A one-stage program `p` over x: f32[n] -> y: f32[n] (unless `params` or `stages` say otherwise)."""
    params = params or (BufferParam("x", F32, (N,), "in"), BufferParam("y", F32, (N,), "out"))
    st = Stage("s", domain, block, tuple(RegDecl(n, t) for n, t in regs), tuple(shared), tuple(pools),
               tuple(inits), tuple(body))
    return Program("p", tuple(params), tuple(temps), symbols, stages or (st,))


I = Reg("i")


def gid() -> Instr:
    """`MOV.i64 %i, %gid.x`: lane i's global index into the register I."""
    return Instr("MOV", I64, I, (Special("gid.x"),))
