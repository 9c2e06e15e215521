"""Per-opcode emission: the value-computing opcodes this backend declares, as LLVM IR.

`VALUE_OPS[op](b, t, args)` emits `op.t` on SSA values already of the operand types
(`SEL`'s predicate is i1) and returns the result. The semantics are the interpreter's
(hologram_interp/semantics.py) and the emitters are the SDK's, shared with cpu_llvm
(hologram.backend.llvm.ops), but for the transcendentals, FMOD and float REM, which call
libdevice (codegen_math.py; NVPTX cannot lower `frem` itself). The Atlas lookup tables
are `addrspace(4)` (`.const`) globals here.

On NVPTX: `fdiv` is `div.rn`, `llvm.sqrt` `sqrt.rn`, `llvm.fma` `fma.rn` (no
fast-math flag is ever set, so every float operation is the correctly rounded one),
and the saturating conversions lower to `cvt.rzi.sat`-style sequences.

f16 is PTX's own type: `add/sub/mul/fma.rn.f16` round once, exactly the ISA's f16
results (an f16 FMA is a true fused multiply-add, as docs/isa.md asks, with no
software path); what PTX has no f16 instruction for (division, square root, the
libdevice functions) LLVM or codegen_math.py computes in f32 and rounds once, which
for + - * / sqrt is again the correctly rounded f16 result.
"""

from __future__ import annotations

from llvmlite import ir

from hologram.backend import DType
from hologram.backend.llvm import ops
from hologram.backend.llvm.ops import Emit, compare  # noqa: F401  (codegen.py's SET reads it here)

from .codegen_math import LIBDEVICE, libdevice_call
from .codegen_types import FLOAT, HALF, intrinsic

CONSTANT = 4  # NVPTX's constant address space: the Atlas tables, cached and broadcast


def _mad(b, t, args):
    a, c, d = args
    return VALUE_OPS["ADD"](b, t, [VALUE_OPS["MUL"](b, t, [a, c]), d])


def _fma(b, t, args):
    return intrinsic(b, "fma", args[0].type, list(args)) if t.is_float else _mad(b, t, args)


def _libdevice(name: str) -> Emit:
    return lambda b, t, args: libdevice_call(b, name, list(args), t)


def _fmod(b: ir.IRBuilder, t: DType, a: ir.Value, d: ir.Value) -> ir.Value:
    return libdevice_call(b, "FMOD", [a, d], t)


_sigmoid_in_type = ops.sigmoid(lambda b, t, x: libdevice_call(b, "EXP", [x], t))


def _sigmoid(b, t, args):
    """docs/isa.md's formula in type t (f16 in f32, rounded once)."""
    if t is DType.F16:
        return b.fptrunc(_sigmoid_in_type(b, DType.F32, [b.fpext(args[0], FLOAT)]), HALF)
    return _sigmoid_in_type(b, t, args)


VALUE_OPS: dict[str, Emit] = {
    **{op: _libdevice(op) for op in LIBDEVICE}, "SIGMOID": _sigmoid,
    **ops.common_ops(), **ops.atlas_ops(addrspace=CONSTANT),
    "ADD": ops.arith("add", "fadd"), "SUB": ops.arith("sub", "fsub"), "MUL": ops.arith("mul", "fmul"),
    "DIV": ops.div, "REM": ops.rem(_fmod), "MIN": ops.minmax(True), "MAX": ops.minmax(False),
    "MAD": _mad, "FMA": _fma, "ABS": ops.abs_, "NEG": ops.neg,
    "SQRT": ops.float1("sqrt"), "RSQRT": ops.rsqrt,
    "FLOOR": ops.float1("floor"), "CEIL": ops.float1("ceil"), "TRUNC": ops.float1("trunc"),
    "RINT": ops.float1("roundeven"), "COPYSIGN": ops.copysign,
}
