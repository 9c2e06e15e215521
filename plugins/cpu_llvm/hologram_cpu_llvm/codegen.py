"""The code generator: a verified Atlas ISA `Program` -> one textual LLVM IR module.

Every stage becomes an exported C function

    void <symbol>(i64 block_start, i64 block_end, ptr bufs, ptr syms, ptr scalars,
                  ptr partials, ptr err)

that runs the blocks with linear ids in [block_start, block_end) (x fastest) and, within
each block, its lanes. `bufs[i]` is the data pointer of the i-th buffer of
`program.buffers()`; `syms[i]` the i64 value of the i-th shape symbol; `scalars[i]` an
8-byte slot holding the i-th scalar parameter's native bytes; `partials[j]` a private
copy (pre-filled with the identity) of `StageEntry.reduce_buffers[j]`, into which the
stage's Reduce*/ResAccum contributions accumulate. A failed run-time check writes
`err[0..3] = [code, stage, instruction index, value]` (codes `ERR_*`, codegen_types.py; the
instruction index counts body items, labels included, as the interpreter's messages do)
and returns early; `err[0]` is left alone otherwise (the runtime zeroes it).

Aliasing contract: the exported function hands every buffer to an internal body function
as a `noalias` parameter, so LLVM may vectorize freely. The runtime must therefore never
pass overlapping memory for two different buffers when the program writes either of them
(it copies an input that aliases an output before launch); read-only buffers may share
memory. Partials never alias anything.

Semantic notes (the rules are docs/isa.md's; the interpreter is the reference):
- f16 values are LLVM `half`; arithmetic runs in f32 with one rounding back per
  operation (exact for + - * / sqrt), FMA via f64 with a round-to-odd step; the host
  needs F16C (part of the CPU key of every cache), and `__truncdfhf2` is defined in
  the module because the JIT has no compiler-rt;
- float ReduceAdd/ReduceMul combine with `reassoc`, so the lane loop keeps vector
  partial sums (the ISA lets a backend pick the order); a partial for a float sum must
  start at -0.0, the identity that leaves -0.0 contributions intact; a float sum into a
  constant element is summed per block and compensated across blocks (Kahan), so a
  multi-million-term sum keeps the contract's log2(n) bound (codegen_control.py);
- float ReduceMin/ReduceMax combine with llvm.minimum/maximum (NaN-propagating, and
  vectorizable, unlike MIN/MAX's select form); they rank -0.0 below +0.0, which picks
  one of the combination orders the ISA allows;
- MemFence emits nothing: within one call the lanes of a block run one at a time, so
  each lane's memory operations are already ordered.

Modules: codegen_control.py lays out a stage (blocks, lanes, control flow),
codegen_memory.py its lane state and memory operands, codegen_ops.py the per-opcode
value table, codegen_types.py types, constants and CVT, codegen_math.py the
transcendentals (vecmath.py, else libm).

How a stage is laid out:
- without BarSync: a loop over blocks, then nested loops over the block's lanes (x
  innermost); registers are allocas that mem2reg promotes, so a straight-line body is a
  plain vectorizable loop;
- without BarSync, when every lane runs the same uniform counted loops over memory
  contiguous across x-lanes (codegen_interchange.py): the counted loops outside, lane
  loops inside, so the lanes vectorize;
- with BarSync only in straight-line top-level code (no branch jumps over one, no loop
  contains one, no subroutine reaches one): one lane loop per barrier-separated region,
  every lane's registers and pools in per-lane arrays, a lane that ended skipping the
  later regions;
- with a BarSync inside control flow: a per-block state machine. Registers, phase, pool
  state and a resume point live in per-lane arrays; the block runs rounds, each
  advancing every live lane to its next barrier (or its end); lanes waiting at
  different barriers are an error, as in the interpreter. Correct for barriers inside
  branches, loops and subroutines, at the price of a dispatch per lane and round.
CALL is inlined at each call site (the verifier forbids recursion, so the contexts are
finite); RET returns to the inlined call's continuation, or ends the lane at top level.

The per-lane arrays and the shared arrays are the stage's scratch: up to 64 KiB of them
in the frame, the rest in one block malloc'd per call (codegen_memory.py); every
function probes its stack as it grows its frame (docs/cpu-llvm.md, "Scratch and the
stack").
"""

from __future__ import annotations

import re

import attrs
from llvmlite import ir

from hologram.backend import OPCODES, Instr, Program
from hologram.errors import HologramError, VerifyError

from .abi import ERROR_KINDS, REDUCE_OPS, reduce_buffers, reduce_op  # the runtime's side of the contract
from .codegen_control import StageEmitter
from .codegen_types import define_half_runtime

# Every function touches each page of its frame as it grows it (inline probes, as C
# compilers' -fstack-clash-protection): a frame larger than what is left of a thread's
# stack faults on the guard page below it, never writing into memory mapped beyond.
PROBE_STACK = '"probe-stack"="inline-asm"'

# Bumped whenever the generated code's meaning changes, so cached native code is rebuilt
# (the runtime's cache key also digests these sources).
CODEGEN_VERSION = 1

@attrs.frozen
class StageEntry:
    """One exported stage function: its symbol, its stage, and the global buffers its
    Reduce*/ResAccum instructions write (the order of the `partials` argument)."""

    name: str
    stage_index: int
    reduce_buffers: tuple[str, ...]


@attrs.frozen
class CodegenResult:
    module_ir: str
    stages: tuple[StageEntry, ...]


def _ident(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def stage_symbol(program: Program, index: int) -> str:
    return f"hg_{_ident(program.name)}_{index}_{_ident(program.stages[index].name)}"


def compile_program(program: Program) -> CodegenResult:
    """The whole program as one LLVM module with one exported function per stage."""
    try:
        return _compile(program)
    except HologramError:
        raise
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as e:
        # Only a program the verifier would refuse gets here (the runtime verifies first).
        raise VerifyError(f"cpu_llvm: program '{getattr(program, 'name', program)!s}' cannot be compiled; "
                          f"run hologram.verify.verifier.verify on it for the reason ({type(e).__name__}: {e})") from e


def _compile(program: Program) -> CodegenResult:
    module = ir.Module(name=_ident(program.name))
    entries = []
    for index, stage in enumerate(program.stages):
        for item in stage.body:
            if isinstance(item, Instr) and item.op not in OPCODES:
                raise VerifyError(f"cpu_llvm: stage '{stage.name}': unknown opcode '{item.op}'")
        partials = reduce_buffers(stage)
        for name in partials:
            reduce_op(stage, name)
        symbol = stage_symbol(program, index)
        StageEmitter(program, index, module, symbol, partials).emit()
        entries.append(StageEntry(symbol, index, partials))
    if any(isinstance(t, ir.HalfType) for t in _types_used(module)):
        define_half_runtime(module)
    for fn in module.functions:
        if fn.blocks:
            fn.attributes = _Probed((*fn.attributes, PROBE_STACK))
    return CodegenResult(str(module), tuple(entries))


class _Probed(ir.values.FunctionAttributes):
    """Function attributes that may include the stack probe request (llvmlite knows only
    LLVM's keyword attributes)."""

    _known = ir.values.FunctionAttributes._known | {PROBE_STACK}


def _types_used(module: ir.Module):
    for fn in module.functions:
        for block in fn.blocks:
            for ins in block.instructions:
                yield ins.type
                for op in getattr(ins, "operands", ()):
                    yield op.type


__all__ = ["CODEGEN_VERSION", "CodegenResult", "ERROR_KINDS", "REDUCE_OPS", "StageEntry", "compile_program",
           "reduce_buffers", "reduce_op", "stage_symbol"]
