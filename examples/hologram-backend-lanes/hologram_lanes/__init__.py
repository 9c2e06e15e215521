"""hologram-backend-lanes: an example backend that runs every lane of a stage at once.

The reference interpreter runs a stage lane by lane. This backend runs it instruction by
instruction over all lanes together: a register is a numpy array with one element per
lane, `LDG` is a gather, `STG` a scatter. Running instruction k for every lane before
instruction k + 1 for any is a valid order only when lanes never wait for each other or
take different paths, so it runs *straight-line* stages: no branch, loop, barrier,
shared memory, pool or reduction. It says so in its `capabilities` (the backend SDK,
`hologram.backend`, docs/backends.md): the runtime refuses every other program before
`prepare` with an UnsupportedProgram (a PluginError) that names the instruction, so a
kernel it cannot run fails at its first call, clearly, and runs elsewhere with
`kernel.on("interp")`; the differential harness counts such a kernel as not covered by
`lanes`, not as a failure, and `hologram conformance --backend lanes` tests exactly what
it declares. Elementwise kernels (vadd, axpy, relu, stencil3, casts, `where`) run, and
give the interpreter's results bit for bit: each supported opcode is the numpy function
the interpreter's per-lane rule is (docs/isa.md).

It imports the SDK and `hologram.errors`, nothing else of Hologram. Registered with
priority 0, below `interp` (10): never the default unless it is the only backend; ask
for it by name (`backend="lanes"`, `--backend lanes`).
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Mapping

import attrs
import numpy as np

from hologram.backend import (AXES, Backend, Capabilities, DType, Imm, Instr, Label, LaunchBinding, Program, Reg,
                              Special, Stage, Sym, domain_extents, format_instr, hookimpl, verify)
from hologram.errors import ArgumentError, ExecutionError

__all__ = ["LanesBackend", "Prepared", "CAPABILITIES", "hologram_register_backends"]

# The opcodes it runs, each as the numpy function over all lanes. MIN/MAX are numpy's
# minimum/maximum (NaN wins; of -0.0 and +0.0 the second operand), as the ISA defines.
BINARY: dict[str, Callable[..., Any]] = {
    "ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "MIN": np.minimum, "MAX": np.maximum,
    "AND": np.bitwise_and, "OR": np.bitwise_or, "XOR": np.bitwise_xor,
}
UNARY: dict[str, Callable[..., Any]] = {"NEG": np.negative, "ABS": np.absolute, "NOT": np.invert}
COMPARE: dict[str, Callable[..., Any]] = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
}
OTHER = ("MOV", "MOV_IMM", "CVT", "LDG", "STG", "DIV", "MAD", "SET", "SEL", "EXIT")

# What it runs, declared: those opcodes at every dtype, except integer DIV (floor division,
# 0 for /0) and float -> integer CVT (saturating), and no block-shared memory or pools.
CAPABILITIES = Capabilities.of(
    [*BINARY, *UNARY, *OTHER],
    excluding=[("DIV", d) for d in DType if not d.is_float],
    conversions=[(to, frm) for to in DType for frm in DType if not (frm.is_float and to.is_int)],
    shared_memory=False, pools=False)


@attrs.frozen
class Prepared:
    """What `prepare` returns: a verified program this backend runs, and its launch binding."""

    program: Program
    binding: LaunchBinding


class LanesBackend(Backend):
    """Straight-line Atlas ISA stages, all lanes at once, with numpy."""

    name = "lanes"
    priority = 0
    capabilities = CAPABILITIES

    def available(self) -> bool:
        return True

    def allocate(self, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
        return np.zeros(shape, dtype.np)

    def prepare(self, program: Program) -> Prepared:
        """The program, verified and within `capabilities` (the runtime asks first; a
        caller of `prepare` may not have)."""
        if not isinstance(program, Program):
            raise ArgumentError(f"prepare expects a hologram.isa.program.Program, got {type(program).__name__}")
        self.check_covers(program)
        return _prepared(program)

    def launch(self, executable: Prepared | Program, buffers: Mapping[str, np.ndarray],
               scalars: Mapping[str, Any], symbols: Mapping[str, int]) -> None:
        prepared = executable if isinstance(executable, Prepared) else self.prepare(executable)
        bound = prepared.binding.bind(buffers, scalars, symbols)  # every check a launch makes, the SDK's words
        memory = _memory(prepared, bound.arrays)
        consts = {name: np.int64(v) for name, v in bound.symbols.items()}  # what `$name` reads: i64 symbols,
        consts.update((s.name, v) for s, v in zip(prepared.binding.scalars, bound.scalars))  # scalars in their dtype
        with np.errstate(all="ignore"):  # IEEE results (inf, NaN) and wrapping integers, not warnings
            for stage in prepared.program.stages:
                _run_stage(stage, memory, consts, bound.symbols)


# ------------------------------------------------------------------------------ prepare
@functools.lru_cache(maxsize=256)  # Programs are frozen and hashable: each is verified once
def _prepared(program: Program) -> Prepared:
    return Prepared(verify(program), LaunchBinding.of(program))


# ------------------------------------------------------------------------------- launch
def _memory(prepared: Prepared, arrays: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Flat views of the checked arrays (params, then the zeroed temporaries), by name.
    All lanes load before any stores, so an input overlapping a written buffer is refused."""
    memory = {b.name: a.reshape(-1) for b, a in zip(prepared.binding.buffers, arrays)}
    for out in (b.name for b in prepared.binding.params if b.written):
        for b in prepared.binding.params:
            if b.name != out and np.may_share_memory(memory[out], memory[b.name]):
                raise ArgumentError(f"buffer {out!r} overlaps {b.name!r}; pass arrays that do not alias")
    return memory


class LaneSpecials:
    """The special registers: %gid, %tid, %ctaid one value per lane (x fastest, as the
    interpreter orders lanes), %gdim, %ntid, %nctaid one per launch; an axis the domain
    lacks has extent 1. Each is computed when a stage first reads it (a 1-D stage reads
    only %gid.x, and the lane arrays cost as much as the arithmetic)."""

    def __init__(self, extents: list[int], block: tuple[int, ...]) -> None:
        self.extents = extents + [1] * (3 - len(extents))
        self.block = tuple(block) + (1,) * (3 - len(block))
        self.values: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self.values:
            kind, axis_name = name.split(".")
            axis = AXES.index(axis_name)
            extent, ntid = self.extents[axis], self.block[axis]
            if kind in ("gdim", "ntid", "nctaid"):
                value = np.int64({"gdim": extent, "ntid": ntid, "nctaid": -(-extent // ntid)}[kind])
            else:
                lanes = math.prod(self.extents)
                below = math.prod(self.extents[:axis])  # lanes per step along this axis
                gid = np.arange(lanes, dtype=np.int64)  # lane k: gid = k // below % extent
                if below > 1:
                    gid //= below
                if below * extent < lanes:
                    gid %= extent
                value = {"gid": gid, "tid": gid % ntid, "ctaid": gid // ntid}[kind]
            self.values[name] = value
        return self.values[name]


def _run_stage(stage: Stage, memory: dict[str, np.ndarray], consts: Mapping[str, Any],
               symbols: Mapping[str, int]) -> None:
    extents = list(domain_extents(stage, symbols))
    for init in stage.inits:  # once per launch, before any lane, also over an empty domain
        _store(stage, f".init {init.buffer}", memory[init.buffer], np.int64(init.offset), init.value)
    if math.prod(extents) == 0:
        return
    specials = LaneSpecials(extents, stage.block)
    types = stage.reg_types()
    regs: dict[str, Any] = {}  # unwritten registers read as zero of their type

    def read(operand: object, dtype: DType) -> Any:
        if isinstance(operand, Reg):
            return regs[operand.name] if operand.name in regs else types[operand.name].np.type(0)
        if isinstance(operand, Special):
            return specials[operand.name]
        if isinstance(operand, Sym):
            return consts[operand.name]
        assert isinstance(operand, Imm)
        return dtype.np.type(operand.value)  # exact: the verifier admits only representable immediates

    for ins in stage.body:
        if isinstance(ins, Label):
            continue
        op, t = ins.op, ins.dtype
        if op == "EXIT":
            return
        if op == "STG":
            index = read(ins.addr.index, DType.I64) + ins.addr.offset if ins.addr.index else np.int64(ins.addr.offset)
            _store(stage, format_instr(ins, align=False), memory[ins.addr.buffer], index, read(ins.srcs[0], t))
            continue
        if op == "LDG":
            index = read(ins.addr.index, DType.I64) + ins.addr.offset if ins.addr.index else np.int64(ins.addr.offset)
            value = memory[ins.addr.buffer][_checked(stage, ins, memory[ins.addr.buffer], index)]
        elif op in BINARY:
            value = BINARY[op](read(ins.srcs[0], t), read(ins.srcs[1], t))
        elif op in UNARY:
            value = UNARY[op](read(ins.srcs[0], t))
        elif op == "DIV":
            value = np.true_divide(read(ins.srcs[0], t), read(ins.srcs[1], t))
        elif op == "MAD":  # rounded twice: the product, then the sum
            value = np.add(np.multiply(read(ins.srcs[0], t), read(ins.srcs[1], t)), read(ins.srcs[2], t))
        elif op == "SET":
            value = COMPARE[ins.mod](read(ins.srcs[0], t), read(ins.srcs[1], t))
        elif op == "SEL":
            value = np.where(read(ins.srcs[0], DType.BOOL), read(ins.srcs[1], t), read(ins.srcs[2], t))
        elif op == "CVT":
            value = np.asarray(read(ins.srcs[0], ins.dtype2))
            value = value != 0 if t is DType.BOOL else value.astype(t.np)
        else:  # MOV, MOV_IMM
            value = read(ins.srcs[0], t)
        regs[ins.dst.name] = np.asarray(value, types[ins.dst.name].np)


def _checked(stage: Stage, where: object, buffer: np.ndarray, index: Any) -> Any:
    """`index` (one per lane, or one for all), refused unless every element is in bounds:
    numpy would wrap a negative index to the end and raise IndexError past it."""
    lo, hi = int(np.min(index)), int(np.max(index))
    if lo < 0 or hi >= buffer.size:
        bad = lo if lo < 0 else hi
        text = where if isinstance(where, str) else format_instr(where, align=False)
        raise ExecutionError(f"stage {stage.name!r}: `{text}`: index {bad} is out of bounds for a buffer of "
                             f"{buffer.size} elements")
    return index


def _store(stage: Stage, text: str, buffer: np.ndarray, index: Any, value: Any) -> None:
    buffer[_checked(stage, text, buffer, index)] = value  # lanes storing to one element: racy, last wins


@hookimpl
def hologram_register_backends(register: Callable[[object], None]) -> None:
    register(LanesBackend())
