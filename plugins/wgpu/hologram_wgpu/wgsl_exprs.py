"""WGSL expressions for the ISA's values and value-computing instructions: each
dtype's register type, immediates, CVT, the arithmetic, logic and comparison opcodes as
the ISA defines them (docs/isa.md), over the helpers of wgsl_lib; and the Atlas tables
the Atlas instructions read (one storage buffer per device)."""

from __future__ import annotations

import struct

import numpy as np

from hologram.backend import DType, atlas

from .wgsl_math import MATH_BINARY, MATH_UNARY, math_call

__all__ = ["NARROW", "WGSL_TYPES", "PACKED", "STORAGE_TYPES", "WIDE", "imm_literal", "zero", "wrap", "convert",
           "binary", "unary", "compare", "small", "ATLAS_OPS", "ATLAS_TABLE_WORDS", "ATLAS_BINDING", "PARTIALS_BINDING",
           "atlas_table"]

# The register type of each dtype the backend runs; the storage element type is the same.
# 8- and 16-bit integers live in 32-bit registers, sign- or zero-extended (NARROW: the
# register's type and the bits), wrapped after every operation that can leave the range.
NARROW = {DType.I8: (DType.I32, 8), DType.I16: (DType.I32, 16), DType.U8: (DType.U32, 8), DType.U16: (DType.U32, 16)}
# f16 lives in an f32 register holding an f16 value: each operation is computed in f32 and
# rounded to f16 (f16_round), as numpy computes f16, so no adapter feature is needed.
WGSL_TYPES = {DType.BOOL: "bool", DType.I32: "i32", DType.U32: "u32", DType.F32: "f32",
              DType.I64: "vec2<u32>", DType.U64: "vec2<u32>", DType.I8: "i32", DType.I16: "i32", DType.U8: "u32",
              DType.U16: "u32", DType.F16: "f32"}
F16_ROUNDED = ("ADD", "SUB", "MUL", "DIV")  # the f16 results of f32 arithmetic that need rounding
# bool (numpy's one byte), 8/16-bit integers and f16 are packed into words, read and written
# with atomics so that a lane's store changes only its own bytes (PACKED: the bits of an element)
PACKED = {DType.BOOL: 8, DType.I8: 8, DType.U8: 8, DType.I16: 16, DType.U16: 16, DType.F16: 16}
STORAGE_TYPES = {**WGSL_TYPES, **{d: "atomic<u32>" for d in PACKED}}
WIDE = (DType.I64, DType.U64)


def imm_literal(value: bool | int | float, dtype: DType) -> str:
    """An immediate of `dtype` as WGSL (exact: floats by their bits, so NaN, inf and
    -0.0 survive)."""
    if dtype is DType.BOOL:
        return "true" if value else "false"
    if dtype in NARROW:  # wrapped to the narrow type, then as its register holds it
        base, bits = NARROW[dtype]
        v = int(value) & ((1 << bits) - 1)
        return imm_literal(v - (1 << bits) if base is DType.I32 and v >> (bits - 1) else v, base)
    if dtype is DType.F16:  # exact: an f16 value is an f32 value
        return imm_literal(float(np.float16(value)), DType.F32)
    if dtype is DType.F32:
        return f"bitcast<f32>(0x{struct.unpack('<I', struct.pack('<f', float(value)))[0]:08x}u)"
    v = int(value)
    if dtype in WIDE:
        v &= (1 << 64) - 1
        return f"vec2<u32>(0x{v & 0xffffffff:x}u, 0x{v >> 32:x}u)"
    if dtype is DType.U32:
        return f"{v & 0xffffffff}u"
    return f"bitcast<i32>(0x{v & 0xffffffff:x}u)" if v < -(2 ** 31 - 1) else f"{v}i"


def zero(dtype: DType) -> str:
    return f"{WGSL_TYPES[dtype]}()"


def wrap(expr: str, dtype: DType) -> str:
    """A 32-bit register value wrapped to the 8/16-bit `dtype` (sign- or zero-extended)."""
    base, bits = NARROW[dtype]
    if base is DType.U32:
        return f"(({expr}) & 0x{(1 << bits) - 1:x}u)"
    # sign-extended by a mask, not by `<< 16 >> 16`: WGSL refuses a constant shift that
    # overflows (naga: "<< operation overflowed"), which an Atlas op on immediates made
    sign = 1 << (bits - 1)
    return f"(((({expr}) & 0x{(1 << bits) - 1:x}i) ^ 0x{sign:x}i) - 0x{sign:x}i)"


def convert(expr: str, frm: DType, to: DType) -> str:
    """`CVT.to.frm` of a WGSL expression (docs/isa.md, "CVT"), among the declared types."""
    if frm is to or {frm, to} == set(WIDE):
        return expr
    if frm is DType.F16:  # the register holds the exact value, as an f32
        return convert(expr, DType.F32, to)
    if to is DType.F16:  # to f32, exact for every value that is finite in f16 (beyond: inf either way), then rounded
        return f"f16_round({convert(expr, frm, DType.F32)})"
    if to in NARROW:
        base, bits = NARROW[to]
        if frm is DType.F32:  # saturate to the narrow range (the 32-bit conversion saturated to its own)
            if base is DType.U32:
                return f"min(f32_to_u32({expr}), {(1 << bits) - 1}u)"
            return f"clamp(f32_to_i32({expr}), {-(1 << (bits - 1))}i, {(1 << (bits - 1)) - 1}i)"
        if frm is DType.BOOL:
            return convert(expr, frm, base)
        return wrap(convert(expr, NARROW.get(frm, (frm,))[0], base), to)
    if frm in NARROW:
        frm = NARROW[frm][0]  # the register holds the extended value
    if frm is to:
        return expr
    if to is DType.BOOL:
        return {DType.F32: f"!(({expr}) == 0.0)", DType.I32: f"(({expr}) != 0i)", DType.U32: f"(({expr}) != 0u)",
                DType.I64: f"any(({expr}) != vec2<u32>())", DType.U64: f"any(({expr}) != vec2<u32>())"}[frm]
    if frm is DType.BOOL:
        one = imm_literal(1, to)
        return f"select({zero(to)}, {one}, {expr})"
    if to in WIDE:
        return {DType.I32: f"i32_to_x64({expr})", DType.U32: f"vec2<u32>({expr}, 0u)",
                DType.F32: f"f32_to_{to}({expr})"}[frm]
    if frm in WIDE:
        return {DType.I32: f"bitcast<i32>(({expr}).x)", DType.U32: f"({expr}).x",
                DType.F32: f"{frm}_to_f32({expr})"}[to]
    if to is DType.F32:
        return f"f32({expr})"
    if frm is DType.F32:
        return f"f32_to_{to}({expr})"
    return f"bitcast<{WGSL_TYPES[to]}>({expr})"  # i32 <-> u32: two's complement


def binary(op: str, t: DType, a: str, b: str) -> str:
    if t in (DType.F32, DType.F16) and op in MATH_BINARY:
        return math_call(op, t is DType.F16, a, b)
    if t is DType.F16:  # f32 has more than 2 x 11 + 2 bits: its rounding, then f16's, is f16's rounding
        if op in ("MIN", "MAX"):  # numpy's f16 loops keep the *first* of equal operands (-0.0, +0.0)
            return f"f16_{op.lower()}({a}, {b})"
        value = binary(op, DType.F32, a, b)
        return f"f16_round({value})" if op in F16_ROUNDED else value
    if t in NARROW:
        base, bits = NARROW[t]
        if op in ("SHL", "SHR"):
            value = f"(({a}) {'<<' if op == 'SHL' else '>>'} (bitcast<u32>({b}) & {bits - 1}u))"
        else:
            value = binary(op, base, a, b)
        return value if op in ("MIN", "MAX", "AND", "OR", "XOR", "SHR") else wrap(value, t)
    wide, signed = t in WIDE, t in (DType.I32, DType.I64)
    if wide:
        if op in ("ADD", "SUB", "MUL"):
            return f"x64_{op.lower()}({a}, {b})"
        if op in ("DIV", "REM"):
            return f"{t}_{op.lower()}({a}, {b})"
        if op in ("AND", "OR", "XOR"):
            return f"(({a}) {'&' if op == 'AND' else '|' if op == 'OR' else '^'} ({b}))"
        lt = "i64_lt" if signed else "u64_lt"
        if op == "MIN":
            return f"select({b}, {a}, {lt}({a}, {b}))"
        if op == "MAX":
            return f"select({b}, {a}, {lt}({b}, {a}))"
        if op == "SHL":
            return f"x64_shl({a}, ({b}).x)"
        if op == "SHR":
            return f"{'i64' if signed else 'u64'}_shr({a}, ({b}).x)"
    if t is DType.F32:
        if op in ("MIN", "MAX", "COPYSIGN"):
            return f"f32_{op.lower()}({a}, {b})"
        # hidden from the shader compiler's float folding (wgsl_math, f32_unfolded): the
        # second operand (x - x), an immediate first one (0 * x), the result ((x + y) - y)
        first = f"f32_unfolded_alt({a})" if a.startswith("bitcast<f32>(") else f"({a})"
        return f"f32_unfolded({first} {dict(ADD='+', SUB='-', MUL='*', DIV='/')[op]} f32_unfolded({b}))"
    if t is DType.BOOL:
        return f"(({a}) {dict(AND='&', OR='|', XOR='!=')[op]} ({b}))"
    if op in ("DIV", "REM"):
        return f"{t}_{op.lower()}({a}, {b})"
    if op in ("MIN", "MAX"):
        return f"{op.lower()}({a}, {b})"
    if op in ("SHL", "SHR"):
        return f"(({a}) {'<<' if op == 'SHL' else '>>'} (bitcast<u32>({b}) & 31u))"
    return f"(({a}) {dict(ADD='+', SUB='-', MUL='*', AND='&', OR='|', XOR='^')[op]} ({b}))"


def unary(op: str, t: DType, a: str) -> str:
    if t in (DType.F32, DType.F16) and op in MATH_UNARY:
        return math_call(op, t is DType.F16, a)
    if t is DType.F16:
        if op == "RSQRT":  # two roundings, each to f16
            return f"f16_round(1.0 / f16_round(sqrt({a})))"
        value = unary(op, DType.F32, a)
        return f"f16_round({value})" if op == "SQRT" else value
    if t in NARROW:
        return wrap(unary(op, NARROW[t][0], a), t)
    if op == "NOT":
        return f"(!({a}))" if t is DType.BOOL else f"(~({a}))"
    if t is DType.F32:
        return {"NEG": f"f32_neg({a})", "ABS": f"f32_abs({a})", "FLOOR": f"floor({a})", "CEIL": f"ceil({a})",
                "TRUNC": f"trunc({a})", "RINT": f"round({a})", "SQRT": f"sqrt({a})",
                "RSQRT": f"(1.0 / sqrt({a}))"}[op]
    if t in WIDE:
        return {"NEG": f"x64_neg({a})", "ABS": f"i64_abs({a})" if t is DType.I64 else a}[op]
    if op == "NEG":
        return f"({zero(t)} - ({a}))"
    return a if t is DType.U32 else f"select({a}, 0i - ({a}), ({a}) < 0i)"  # ABS; MIN stays MIN (wraps)


def small(expr: str, t: DType, bound: int) -> tuple[str, str]:
    """An integer register as a u32 and whether it lies in 0 .. bound-1 (a negative
    value's u32 is huge, so one unsigned comparison tests both ends)."""
    if t in WIDE:
        return f"({expr}).x", f"(({expr}).y == 0u && ({expr}).x < {bound}u)"
    value = expr if NARROW.get(t, (t,))[0] is DType.U32 else f"bitcast<u32>({expr})"
    return value, f"({value} < {bound}u)"


ATLAS_OPS = ("ClsGet", "MIRROR", "NbrCount", "UnityTest", "NbrGet", "BoundMap", "PhaseGet", "PhaseAdv")
# The Atlas tables, one read-only storage buffer (a constant array indexed at run time
# costs llvmpipe seconds per shader): name -> (first word, contents)
_TABLE_PARTS = (("ATLAS_CLASS", atlas.BYTE_CLASS_TABLE), ("ATLAS_MIRROR", atlas.MIRROR_TABLE),
                ("ATLAS_DEGREE", atlas.DEGREE_TABLE), ("ATLAS_NEIGHBOR", atlas.NEIGHBOR_TABLE.reshape(-1)))
ATLAS_TABLE_WORDS = [int(v) & 0xFFFFFFFF for _, t in _TABLE_PARTS for v in t]  # the neighbour table pads with -1
ATLAS_TABLE_BASE = {name: sum(len(t) for _, t in _TABLE_PARTS[:k]) for k, (name, _) in enumerate(_TABLE_PARTS)}
ATLAS_BINDING = "<atlas tables>"  # what StageShader.buffers calls the tables (no buffer's name can be)
PARTIALS_BINDING = "<sum partials>"  # ... and a stage's per-workgroup partial sums (docs/gpu.md, "Full float sums")


def atlas_table(name: str, index: str) -> str:
    return f"atlas_tables[{ATLAS_TABLE_BASE[name]}u + {index}]"


def compare(cc: str, t: DType, a: str, b: str) -> str:
    t = DType.F32 if t is DType.F16 else NARROW.get(t, (t,))[0]
    if t in WIDE:
        lt = "i64_lt" if t is DType.I64 else "u64_lt"
        return {"eq": f"x64_eq({a}, {b})", "ne": f"(!x64_eq({a}, {b}))", "lt": f"{lt}({a}, {b})",
                "gt": f"{lt}({b}, {a})", "le": f"(!{lt}({b}, {a}))", "ge": f"(!{lt}({a}, {b}))"}[cc]
    if t is DType.BOOL and cc not in ("eq", "ne"):
        a, b = f"u32({a})", f"u32({b})"
    if cc == "ne":  # unordered: true for NaN, whatever comparison the driver picks for `!=`
        return f"(!(({a}) == ({b})))"
    return f"(({a}) {dict(eq='==', lt='<', le='<=', gt='>', ge='>=')[cc]} ({b}))"
