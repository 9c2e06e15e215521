"""The `canonicalize` and `strength` passes: local rewrite rules, applied to a fixpoint.

Every rule keeps IEEE and integer semantics exactly (bit for bit, signed zeros and
infinities included; NaN stays NaN), so each is stated with the reason it is exact. The
rewrites IEEE forbids are not here: `x + 0.0 -> x` (`-0.0 + 0.0` is `+0.0`),
`x * 0 -> 0` on floats (`inf * 0` is NaN, `-1 * 0` is `-0`), reassociation
(`(a + b) + c` rounds differently from `a + (b + c)`), `x ** 0.5 -> sqrt(x)` (`pow(-0.0,
0.5)` is `+0`, `sqrt(-0.0)` is `-0`; `pow(-inf, 0.5)` is `+inf`, `sqrt(-inf)` NaN), and
`min`/`max` are not commuted (numpy's `minimum(-0.0, 0.0)` returns its first operand).

A rule never drops an operand that could raise when evaluated (an indexed load may be
out of range): see `ir_common.Droppable`.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from hologram.core.types import DType
from hologram.ir import COMPARISONS, Expr, KernelIR
from hologram.passes.api import Pass
from hologram.passes.ir_common import (Droppable, Rule, as_dtype, const_as, exact_widening, first, map_statements,
                                       never, rewrite)
from hologram.passes.ir_fold import evaluate

COMMUTATIVE = frozenset({"ADD", "MUL", "AND", "OR", "XOR", "CMPEQ", "CMPNE"})
FLIPPED = {"CMPLT": "CMPGT", "CMPGT": "CMPLT", "CMPLE": "CMPGE", "CMPGE": "CMPLE"}


# ----------------------------------------------------------------------- canonicalize
def _commute(e: Expr) -> Expr | None:
    """A constant operand goes to the right: `2 * x -> x * 2`, `1 < x -> x > 1`. IEEE
    `+` and `*` are commutative (also for signed zeros and infinities); a swapped
    comparison is the flipped one (NaN: both false)."""
    if len(e.srcs) != 2 or e.srcs[0].op != "CONST" or e.srcs[1].op == "CONST":
        return None
    a, b = e.srcs
    if e.op in COMMUTATIVE:
        return Expr(e.op, e.dtype, (b, a), e.arg)
    if e.op in FLIPPED:
        return Expr(FLIPPED[e.op], e.dtype, (b, a), e.arg)
    return None


def _all_ones(dt: DType) -> int | bool:
    return True if dt.is_bool else -1 if dt.is_signed else dt.max


Drop = Callable[[Expr], bool]


def _identity(e: Expr, drop: Drop) -> Expr | None:
    """Operations with an identity or absorbing constant on the right."""
    if len(e.srcs) != 2 or e.srcs[1].op != "CONST":
        return None
    x, dt, op = e.srcs[0], e.dtype, e.op
    c = const_as(e.srcs[1], dt)
    if dt.is_float:
        if op in ("MUL", "DIV") and c == 1:
            return as_dtype(x, dt)  # x * 1 and x / 1 are x, for -0.0, inf and NaN too
        # x - (+0.0) and x + (-0.0) are x: the sum is +0 only when both addends are +0
        zero_sign = math.copysign(1.0, c) if c == 0 else None
        if (op, zero_sign) in (("SUB", 1.0), ("ADD", -1.0)):
            return as_dtype(x, dt)
        return None
    if op in ("ADD", "SUB", "OR", "XOR") and c == 0:
        return as_dtype(x, dt)
    if (op == "MUL" and c == 1) or (op == "AND" and c == _all_ones(dt)):
        return as_dtype(x, dt)
    if op in ("SHL", "SHR") and not dt.is_bool and c % dt.bits == 0:
        return as_dtype(x, dt)  # the amount is masked to the bit width: a shift by 0
    if op in ("MUL", "AND") and c == 0 and drop(x):
        return Expr.const(c, dt)  # integers and bools only: floats have inf * 0 = NaN
    return None


def _involution(e: Expr) -> Expr | None:
    """`--x -> x` (also INT_MIN: negation wraps), `not not b -> b`, `~~x -> x`; only when
    no conversion sits in between."""
    if e.op not in ("NEG", "NOT") or e.dtype.is_bool and e.op == "NEG":
        return None
    inner = e.srcs[0]
    if inner.op == e.op and inner.dtype is e.dtype and inner.srcs[0].dtype is e.dtype:
        return inner.srcs[0]
    return None


def _strip_signed_casts(e: Expr) -> Expr:
    while e.op == "CAST" and e.dtype.is_signed and e.srcs[0].dtype.is_signed:
        e = e.srcs[0]
    return e


_CLASS_VALUED = frozenset({"ATLAS_CLASS", "MIRROR", "NEIGHBOR"})  # values in -1..95


def _mirror(e: Expr) -> Expr | None:
    """`mirror(mirror(c)) -> c` when `c` is a class or -1 (`atlas_class`, `mirror` or
    `neighbor` of something): mirror is an involution on 0..95 and maps -1 (like every
    value outside 0..95) to -1. For an arbitrary integer it is not: mirror(mirror(200))
    is -1. Conversions in between must be between signed types (they keep -1..95)."""
    if e.op != "MIRROR":
        return None
    inner = _strip_signed_casts(e.srcs[0])
    if inner.op != "MIRROR" or not inner.dtype.is_signed:
        return None
    c = _strip_signed_casts(inner.srcs[0])
    if c.op in _CLASS_VALUED and c.dtype.is_signed:
        return as_dtype(c, e.dtype)
    return None


def _where(e: Expr, drop: Drop) -> Expr | None:
    """`where(true, a, b) -> a` (the side not taken is not evaluated when it could
    fault, so dropping it loses nothing), `where(c, x, x) -> x` (when `c` cannot
    raise), `where(not c, a, b) -> where(c, b, a)`."""
    if e.op != "WHERE":
        return None
    c, a, b = e.srcs
    if c.op == "CONST":
        return as_dtype(a if const_as(c, DType.BOOL) else b, e.dtype)
    if a == b and drop(c):
        return as_dtype(a, e.dtype)
    if c.op == "NOT" and c.dtype.is_bool and c.srcs[0].dtype.is_bool:
        return Expr("WHERE", e.dtype, (c.srcs[0], b, a))
    return None


def _compare_constants(e: Expr) -> Expr | None:
    return evaluate(e) if e.op in COMPARISONS else None


def _cast(e: Expr) -> Expr | None:
    """`T(x) -> x` for x of type T; `T2(T1(x)) -> T2(x)` when every value of x's type
    converts to T1 exactly and T2 converts that value the same way from either type.
    `f32(f64(x: f32))` folds, `i8(i32(x: f32))` does not (i32 saturates first), and
    `u8(f16(x: i8))` does not either: from a float, u8 saturates (-128 -> 0), from an
    integer it wraps (-128 -> 128); it folds only when T2 holds every value of x's type."""
    if e.op != "CAST":
        return None
    x = e.srcs[0]
    if x.dtype is e.dtype:
        return x
    if x.op == "CAST" and exact_widening(x.srcs[0].dtype, x.dtype):
        inner = x.srcs[0].dtype
        saturate_vs_wrap = e.dtype.is_int and x.dtype.is_float and inner.is_int
        if not saturate_vs_wrap or (inner.min >= e.dtype.min and inner.max <= e.dtype.max):
            return as_dtype(x.srcs[0], e.dtype)
    return None


def canonical_rules(drop: Drop = never) -> Rule:
    """The canonicalization rules; `drop` says which operands may go unevaluated."""
    return first(_compare_constants, _commute, lambda e: _identity(e, drop), _involution, _mirror,
                 lambda e: _where(e, drop), _cast)


def canonicalize_expr(e: Expr, drop: Drop = never) -> Expr:
    return rewrite(e, canonical_rules(drop))


def canonicalize(kir: KernelIR) -> KernelIR:
    return map_statements(kir, lambda st: lambda e, drop=Droppable(kir, st): canonicalize_expr(e, drop))


# --------------------------------------------------------------------------- strength
def _power_of_two(v: int, bits: int) -> int | None:
    """k when `v` (as an unsigned `bits`-bit pattern) is 2**k, else None."""
    u = v % (1 << bits)
    return u.bit_length() - 1 if u and u & (u - 1) == 0 else None


def _strength(e: Expr, drop: Drop) -> Expr | None:
    if len(e.srcs) != 2:
        return None
    op, dt = e.op, e.dtype
    x, k = e.srcs
    if op == "MUL" and x.op == "CONST" and k.op != "CONST":
        x, k = k, x
    if k.op != "CONST" or dt.is_bool:
        return None
    c = const_as(k, dt)
    x = as_dtype(x, dt)
    if dt.is_float:
        return _strength_float(op, dt, x, c, drop)
    shift = _power_of_two(c, dt.bits)
    if shift is None or shift == 0:
        return None
    if op == "MUL":
        # wrapping multiply by 2**k is a left shift, also for a negative pattern (i8 -128 == 2**7 mod 256)
        return Expr("SHL", dt, (x, Expr.const(shift, dt)))
    if op in ("FLOORDIV", "MOD") and c > 0:
        # floor division by 2**k is the arithmetic (signed) or logical (unsigned) shift,
        # also for negative x (-7 // 4 == -2 == -7 >> 2); the remainder of floor division
        # by 2**k is the low k bits in two's complement (-7 % 4 == 1 == -7 & 3)
        if op == "FLOORDIV":
            return Expr("SHR", dt, (x, Expr.const(shift, dt)))
        return Expr("AND", dt, (x, Expr.const(c - 1, dt)))
    return None


def _strength_float(op: str, dt: DType, x: Expr, c: float, drop: Drop) -> Expr | None:
    if op == "POW":
        if c == 2:
            return Expr("MUL", dt, (x, x))  # the correctly rounded square, which pow approximates
        if c == 1:
            return x  # C99: pow(x, 1) is x
        if c == 0 and drop(x):
            return Expr.const(1.0, dt)  # C99: pow(x, +-0) is 1 for every x, NaN included
        return None
    if op == "DIV" and math.isfinite(c) and c != 0 and math.frexp(c)[0] in (0.5, -0.5):
        # x / 2**k and x * 2**-k are the same real number, rounded once: equal bit for
        # bit (subnormal results, signed zeros, inf and NaN included) when 2**-k is a
        # normal number of the type
        r = 1.0 / c
        if float(dt.np.type(r)) == r and abs(r) >= float(_tiny(dt)) and math.isfinite(float(dt.np.type(r))):
            return Expr("MUL", dt, (x, Expr.const(r, dt)))
    return None


def _tiny(dt: DType) -> float:
    return float(np.finfo(dt.np).tiny)


def strength_expr(e: Expr, drop: Drop = never) -> Expr:
    return rewrite(e, lambda n: _strength(n, drop))


def strength(kir: KernelIR) -> KernelIR:
    return map_statements(kir, lambda st: lambda e, drop=Droppable(kir, st): strength_expr(e, drop))


PASSES = (
    Pass("canonicalize", "ir", canonicalize, after=("fold",),
         summary="rewrite rules to a fixpoint: constants right, x*1, --x, where(c, x, x), casts of casts"),
    Pass("strength", "ir", strength, after=("canonicalize",), pipelines=("O2",),
         summary="x**2 -> x*x; integer *, //, % by powers of two -> shifts and masks; x/2**k -> x*2**-k"),
)
