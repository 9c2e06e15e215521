"""The opcode table: every Atlas opcode, its group, operand form, the dtypes its suffix
admits and its result type. `OPCODES` is the single table the assembler, the binary
encoding, the verifier and the backends all read, so an opcode exists in one place; its
semantics are in docs/isa.md.
"""

from __future__ import annotations

import attrs

from hologram.core.types import DType


@attrs.frozen
class OpSpec:
    """form: operand kinds in order: 'd' dst reg, 's' source operand, 'm' memory
    address, 'l' label, 'p' pool name, 'n' element count.
    types: which dtypes the `.dtype` suffix admits: 'any' numeric+bool, 'num' numeric,
    'int' integers, 'intbool' integers or bool, 'float', 'none' (no suffix).
    result: dst type: 'same' as dtype, 'bool', 'i64', 'none'."""

    name: str
    group: str
    form: str
    types: str
    result: str = "same"
    space: str | None = None  # memory space of 'm': global, shared, pool

    def admits(self, dtype: DType) -> bool:
        """Whether `dtype` may be this opcode's `.dtype` suffix (its `types` class)."""
        return TYPE_CLASSES[self.types](dtype)


TYPE_CLASSES = {
    "any": lambda d: True,
    "num": lambda d: not d.is_bool,
    "int": lambda d: d.is_int,
    "intbool": lambda d: d.is_int or d.is_bool,
    "float": lambda d: d.is_float,
}


def _ops(group: str, names: str, form: str, types: str, result: str = "same", space: str | None = None):
    return {n: OpSpec(n, group, form, types, result, space) for n in names.split()}


OPCODES: dict[str, OpSpec] = {
    **_ops("data", "LDG", "dm", "any", space="global"),
    **_ops("data", "STG", "ms", "any", "none", space="global"),
    **_ops("data", "LDS", "dm", "any", space="shared"),
    **_ops("data", "STS", "ms", "any", "none", space="shared"),
    **_ops("data", "MOV MOV_IMM", "ds", "any"),
    **_ops("data", "CVT", "ds", "any"),
    **_ops("arith", "ADD SUB MUL DIV REM MIN MAX", "dss", "num"),
    **_ops("arith", "MAD FMA", "dsss", "num"),
    **_ops("arith", "ABS NEG", "ds", "num"),
    **_ops("logic", "AND OR XOR", "dss", "intbool"),
    **_ops("logic", "NOT", "ds", "intbool"),
    **_ops("logic", "SHL SHR", "dss", "int"),
    **_ops("logic", "SET", "dss", "any", "bool"),
    **_ops("logic", "SEL", "dsss", "any"),
    **_ops("control", "BRA CALL", "l", "none", "none"),
    **_ops("control", "LOOP", "sl", "none", "none"),
    **_ops("control", "RET EXIT", "", "none", "none"),
    **_ops("sync", "BarSync MemFence", "", "none", "none"),
    **_ops("reduce", "ReduceAdd ReduceMin ReduceMax ReduceMul", "ms", "num", "none", space="global"),
    **_ops("transcendental", "EXP LOG LOG2 LOG10 SQRT RSQRT SIN COS TAN TANH SIGMOID", "ds", "float"),
    **_ops("math", "ASIN ACOS ATAN SINH COSH ASINH ACOSH ATANH EXP2 EXPM1 LOG1P FLOOR CEIL TRUNC RINT ERF ERFC "
           "CBRT",
           "ds", "float"),
    **_ops("math", "ATAN2 HYPOT FMOD COPYSIGN POW", "dss", "float"),
    **_ops("atlas", "ClsGet MIRROR NbrCount", "ds", "int"),
    **_ops("atlas", "UnityTest", "ds", "int", "bool"),
    **_ops("atlas", "NbrGet", "dss", "int"),
    **_ops("atlas", "BoundMap", "dsss", "int"),
    **_ops("atlas", "ResAccum", "ms", "num", "none", space="global"),
    **_ops("atlas", "PhaseGet", "d", "none", "i64"),
    **_ops("atlas", "PhaseAdv", "s", "none", "none"),
    **_ops("pool", "PoolAlloc", "dpn", "none", "i64"),
    **_ops("pool", "PoolFree", "s", "none", "none"),
    **_ops("pool", "PoolLoad", "dm", "any", space="pool"),
    **_ops("pool", "PoolStore", "ms", "any", "none", space="pool"),
}
