"""Typing of elementwise operations: numpy decides, the IR records the decision.

Every operator and elementwise function names the numpy ufunc that defines it; numpy's
own dispatcher (`ufunc.resolve_dtypes`, which implements NEP 50 with Python scalars as
weak operands) picks the loop, so `x_i8 + 1` is i8, `sqrt(i8)` is f16 and `u64 < i64`
compares exactly. `apply` then converts each operand to its loop dtype (weak literals
become `CONST`s of that dtype, checked to fit), broadcasts, and emits the IR op, with the
few rewrites typing requires: bool `+`/`*`/`minimum`/`maximum` are logical, integer `**`
by a literal is repeated multiplication, integer `fmod` is built from `%`, rounding an
integer is the identity, and float-only ops never see an integer operand.

Arithmetic on nothing but literals is evaluated at compile time with Python's own
operators, as numpy users get when Python evaluates `2 * pi` before numpy sees it; the
result is still a weak literal.

Shape symbols used as values are weak ints too, as `len(x)` is a Python int in numpy:
`x_f32 - s / n` is f32 and `x_i8 + n` is i8 (where numpy raises OverflowError for an `n`
that does not fit, the conversion wraps, as every integer conversion in the DSL does).
Comparisons with integers are exact, as numpy 2's with Python ints. Operators on weak
values alone, at least one of them a symbol (`n // 2`, `1 / n`), compute Python's result
at run time in i64 (wrapping) or f64 and stay weak; see docs/dsl.md, decision 21.
"""

from __future__ import annotations

import functools
import math
import operator
from typing import Callable, Sequence

import attrs
import numpy as np

from hologram.core.errors import CompileError, Span
from hologram.core.types import DType, shape_str
from hologram.dsl.shapes import Val, align, broadcast_shapes, kind_dtype
from hologram.ir import Expr

BOOL, I64, U64, F64 = DType.BOOL, DType.I64, DType.U64, DType.F64


@attrs.frozen
class Elementwise:
    """An elementwise operation: `name` as written, numpy's `ufunc` (the typing oracle),
    and the IR `op` (None: the identity, as unary `+`). Operators (`operator=True`) on
    literals alone are folded at compile time; functions of literals are typed values."""

    name: str
    ufunc: np.ufunc
    op: str | None
    operator: bool = False

    @property
    def what(self) -> str:
        return f"operator '{self.name}'" if self.operator else f"{self.name}()"


def _ops(table: dict[str, tuple[np.ufunc, str | None]]) -> dict[str, Elementwise]:
    return {k: Elementwise(k, u, op, True) for k, (u, op) in table.items()}


BINARY = _ops({
    "+": (np.add, "ADD"), "-": (np.subtract, "SUB"), "*": (np.multiply, "MUL"),
    "/": (np.true_divide, "DIV"), "//": (np.floor_divide, "FLOORDIV"), "%": (np.remainder, "MOD"),
    "**": (np.power, "POW"),
    "&": (np.bitwise_and, "AND"), "|": (np.bitwise_or, "OR"), "^": (np.bitwise_xor, "XOR"),
    "<<": (np.left_shift, "SHL"), ">>": (np.right_shift, "SHR"),
    "==": (np.equal, "CMPEQ"), "!=": (np.not_equal, "CMPNE"), "<": (np.less, "CMPLT"),
    "<=": (np.less_equal, "CMPLE"), ">": (np.greater, "CMPGT"), ">=": (np.greater_equal, "CMPGE"),
    "and": (np.logical_and, "AND"), "or": (np.logical_or, "OR"),
})
UNARY = _ops({"-": (np.negative, "NEG"), "+": (np.positive, None), "~": (np.invert, "NOT"),
              "not": (np.logical_not, "NOT")})
LOGICAL = frozenset({"and", "or", "not"})
BITWISE = frozenset({"&", "|", "^", "~", "<<", ">>"})

_FOLD: dict[str, Callable] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow,
    "&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "and": lambda a, b: a and b, "or": lambda a, b: a or b, "not": operator.not_,
    "u-": operator.neg, "u+": operator.pos, "u~": operator.invert,
}
_MAX_CONST_BITS = 512  # literal arithmetic beyond this can only overflow every dtype
_SWAP = {"CMPLT": "CMPGT", "CMPLE": "CMPGE", "CMPGT": "CMPLT", "CMPGE": "CMPLE", "CMPEQ": "CMPEQ", "CMPNE": "CMPNE"}


# ------------------------------------------------------------------ literals
def default_dtype(value: bool | int | float, span: Span | None) -> DType:
    """The dtype numpy gives a lone Python scalar (`np.asarray(v).dtype`)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if I64.min <= value <= I64.max:
            return I64
        if 0 <= value <= U64.max:
            return U64
        raise CompileError(f"integer literal {value} is too large for any integer type (u64 holds up to {U64.max})", span)
    return kind_dtype(value)


def convert_literal(value: bool | int | float, dtype: DType, span: Span | None) -> bool | int | float:
    """A weak literal in `dtype` (NEP 50): an integer that does not fit is an error."""
    if dtype.is_bool:
        return bool(value)
    if dtype.is_float:
        try:
            with np.errstate(over="ignore"):
                return float(dtype.np.type(value))
        except OverflowError:
            raise CompileError(f"the literal {value} is too large for {dtype}", span) from None
    if isinstance(value, float):
        raise CompileError(f"the float literal {value!r} cannot be used as {dtype}", span,
                           hint=f"convert explicitly: {dtype}({value!r})")
    if not dtype.min <= value <= dtype.max:
        raise CompileError(f"the literal {value} does not fit in {dtype} (range {dtype.min}..{dtype.max})", span,
                           hint="convert the other operand to a wider type first, e.g. i64(x)")
    return int(value)


def cast_literal(value: bool | int | float, dtype: DType, span: Span | None) -> bool | int | float:
    """An explicit cast `dtype(literal)`, as an array cast (CAST) would convert the
    literal's own array: an integer is an i64 (u64 if it needs to be) and wraps, so
    `i8(300)` is 44; a float truncates and saturates into integer types (NaN -> 0)."""
    if isinstance(value, float) and dtype.is_int:
        if math.isnan(value):
            return 0
        if math.isinf(value):
            return dtype.max if value > 0 else dtype.min
        return min(max(math.trunc(value), dtype.min), dtype.max)
    if dtype.is_int and not isinstance(value, bool):
        return int(np.array(value, default_dtype(value, span).np).astype(dtype.np))
    return convert_literal(value, dtype, span)


def fold(name: str, operands: Sequence[Val], span: Span | None) -> Val:
    """Evaluate an operator on literal operands with Python's semantics."""
    values = [v.literal for v in operands]
    key = name if len(values) == 2 else "u" + name if name != "not" else name
    if name in ("**", "<<") and all(isinstance(v, int) for v in values):
        base, exp = values
        if name == "**":
            bits = exp * abs(base).bit_length() if abs(base) > 1 else 0
        else:
            bits = exp + abs(base).bit_length()
        if bits > _MAX_CONST_BITS:
            raise CompileError(f"constant expression is too large ({name} by {exp})", span)
    try:
        result = _FOLD[key](*values)
    except ZeroDivisionError:
        raise CompileError("division by zero in a constant expression", span) from None
    except (ArithmeticError, ValueError, TypeError) as exc:
        raise CompileError(f"cannot evaluate the constant expression: {exc}", span) from None
    if isinstance(result, complex):
        raise CompileError("the constant expression has a complex result", span)
    if isinstance(result, int) and result.bit_length() > _MAX_CONST_BITS:
        raise CompileError("constant expression is too large", span)
    return Val.of_literal(result, span)


# ------------------------------------------------------------------ conversion
def coerce(val: Val, dtype: DType) -> Expr:
    """`val`'s element expression as `dtype`: weak literals convert (and must fit),
    anything else gets a CAST when its dtype differs (a weak shape-symbol value too: it
    wraps into a narrower integer type and rounds into a float type)."""
    if val.is_literal:
        return Expr.const(convert_literal(val.literal, dtype, val.span), dtype)
    if val.dtype is dtype:
        return val.expr
    return Expr("CAST", dtype, (val.expr,))


def strengthen(val: Val) -> Val:
    """A weak value as the array numpy would make of it (`np.asarray(2)` is i64,
    `np.asarray(len(x))` too)."""
    if not val.weak:
        return val
    if not val.is_literal:  # already computed in its kind's dtype, i64 or f64
        return Val(val.expr, val.shape, False, val.span)
    return Val(coerce(val, default_dtype(val.literal, val.span)), val.shape, False, val.span)


def cast(val: Val, dtype: DType, span: Span | None) -> Val:
    """`dtype(val)`: an explicit conversion (CAST semantics)."""
    if val.is_literal:
        return Val(Expr.const(cast_literal(val.literal, dtype, val.span or span), dtype), val.shape, False, span)
    return Val(coerce(val, dtype), val.shape, False, span)


# ------------------------------------------------------------------ numpy's dispatcher
def _oracle_key(val: Val) -> DType | type:
    # weak ints and floats go to numpy as the Python types (NEP 50 "abstract" scalars),
    # shape-symbol values as the Python int len() gives; a weak bool behaves exactly like
    # a bool array, so it goes as one
    if val.weak and val.dtype is not BOOL:
        return int if val.dtype.is_int else float
    return val.dtype


def _own_dtype(val: Val) -> DType:
    """The dtype numpy gives a weak value on its own: a literal's `np.asarray(v)`, a
    shape-symbol value's kind (i64 or f64)."""
    return default_dtype(val.literal, val.span) if val.is_literal else val.dtype


@functools.lru_cache(maxsize=None)
def _resolve(ufunc: np.ufunc, key: tuple) -> tuple[tuple[DType, ...], DType] | None:
    dtypes = tuple(k.np if isinstance(k, DType) else k for k in key)
    try:
        loop = ufunc.resolve_dtypes(dtypes + (None,))
        return tuple(DType.from_numpy(d) for d in loop[:-1]), DType.from_numpy(loop[-1])
    except Exception:  # numpy reports "no loop" as several exception types
        return None


def resolve(ufunc: np.ufunc, operands: Sequence[Val]) -> tuple[tuple[DType, ...], DType] | None:
    """numpy's loop for these operands: (input dtypes, output dtype), or None if undefined.
    Weak values that meet no typed operand are typed as numpy types a lone Python scalar."""
    if all(v.weak for v in operands):
        key = tuple(_own_dtype(v) for v in operands)
    else:
        key = tuple(_oracle_key(v) for v in operands)
    return _resolve(ufunc, key)


def describe(val: Val) -> str:
    """How a value's type reads in a message: `f32`, `an int literal`, `an int shape symbol`."""
    if not val.weak:
        return str(val.dtype)
    kind = "bool" if val.dtype is BOOL else "int" if val.dtype.is_int else "float"
    what = "literal" if val.is_literal else "shape symbol" if val.expr.op == "SYM" else "computed from shape symbols"
    return f"{'an' if kind == 'int' else 'a'} {kind} {what}"


def _type_error(spec: Elementwise, operands: Sequence[Val], span: Span | None) -> CompileError:
    types = " and ".join(describe(v) for v in operands)
    hint = None
    if spec.name in BITWISE:
        hint = "bitwise operators need integer or bool operands; convert first, e.g. i32(x)"
    elif spec.name == "-" and all(v.dtype is BOOL for v in operands):
        hint = "use 'not' (or '~') to negate a condition and '^' or '!=' to compare two"
    elif spec.ufunc is np.sign and operands[0].dtype is BOOL:
        hint = "sign() needs numbers; convert first, e.g. i8(b)"
    return CompileError(f"{spec.what} is not defined for {types}", span, hint=hint)


def _shape_error(spec: Elementwise, operands: Sequence[Val], span: Span | None) -> CompileError:
    shapes = " and ".join(shape_str(v.shape) for v in operands)
    return CompileError(f"the operands of {spec.what} have shapes {shapes}, which do not broadcast", span,
                        hint="numpy broadcasting: trailing dimensions must be equal or 1")


# ------------------------------------------------------------------ apply
def apply(spec: Elementwise, operands: Sequence[Val], span: Span | None) -> Val:
    """`spec(*operands)` with numpy's typing and broadcasting, as a `Val`."""
    if spec.name in LOGICAL:
        for v in operands:
            if v.dtype is not BOOL:
                raise CompileError(f"'{spec.name}' needs bool operands; got {v.dtype}", v.span or span,
                                   hint="compare first, e.g. x > 0, or use '&', '|', '~' on integers")
    if spec.operator and all(v.weak for v in operands):
        if all(v.is_literal for v in operands):
            return fold(spec.name, operands, span)
        return _weak_operator(spec, operands, span)
    if spec.op in _SWAP and not any(v.dtype.is_float for v in operands if not v.weak):
        # numpy 2 compares a Python int with an integer array exactly, even one outside
        # its range: as i64 (a symbol's own type) the loop below is exact
        operands = [strengthen(v) if v.weak and not v.is_literal and v.dtype.is_int else v for v in operands]
    shape = broadcast_shapes(v.shape for v in operands)
    if shape is None:
        raise _shape_error(spec, operands, span)
    loop = resolve(spec.ufunc, operands)
    if loop is None:
        raise _type_error(spec, operands, span)
    in_dtypes, out_dtype = loop
    if spec.op == "POW" and not out_dtype.is_float:
        return _int_power(operands, in_dtypes[0], shape, span)
    srcs = tuple(align(Val(coerce(v, d), v.shape), shape) for v, d in zip(operands, in_dtypes))
    return Val(emit(spec.op, srcs, in_dtypes, out_dtype), shape, False, span)


def _weak_operator(spec: Elementwise, operands: Sequence[Val], span: Span | None) -> Val:
    """An operator on weak scalars, at least one a shape-symbol value (`n // 2`, `1 / n`,
    `n - 2*m`): what Python computes on `len()` results, at run time in i64 (wrapping, by
    the DSL's integer rules) and f64. The result stays weak, as Python's int or float
    does; a comparison gives a bool, which behaves like a bool array anyway."""
    key = tuple(I64 if v.dtype.is_int else v.dtype for v in operands)  # int literals must fit i64
    loop = _resolve(spec.ufunc, key)
    if loop is None:
        raise _type_error(spec, operands, span)
    in_dtypes, out_dtype = loop
    if spec.op == "POW" and not out_dtype.is_float:
        val = _int_power(operands, in_dtypes[0], (), span)
    else:
        srcs = tuple(coerce(v, d) for v, d in zip(operands, in_dtypes))
        val = Val(emit(spec.op, srcs, in_dtypes, out_dtype), (), False, span)
    return attrs.evolve(val, weak=out_dtype in (I64, F64))


def emit(op: str | None, srcs: tuple[Expr, ...], in_dtypes: Sequence[DType], out: DType) -> Expr:
    """The IR for `op` on operands already converted to numpy's loop dtypes."""
    d = in_dtypes[0]
    if op is None:
        return srcs[0]
    if d is BOOL and op in _BOOL_OPS:
        return Expr(_BOOL_OPS[op], out, srcs)
    if not d.is_float and op in _IDENTITY_ON_INTS and (op != "ABS" or not d.is_signed):
        return srcs[0]
    if not d.is_float and op == "ISNAN":
        return Expr.const(False, BOOL)
    if d.is_signed and op == "FMOD":
        return _int_fmod(*srcs)
    if d.is_unsigned and op == "FMOD":
        return Expr("MOD", out, srcs)
    if op in _SWAP and in_dtypes[0] is not in_dtypes[1]:
        return _mixed_compare(op, srcs, in_dtypes)
    return Expr(op, out, srcs)


_BOOL_OPS = {"ADD": "OR", "MUL": "AND", "MIN": "AND", "MAX": "OR"}
_IDENTITY_ON_INTS = frozenset({"FLOOR", "CEIL", "TRUNC", "RINT", "ABS"})


def _int_fmod(a: Expr, b: Expr) -> Expr:
    # C's truncated remainder from numpy's floored one: they differ (by b) exactly when
    # the remainder is non-zero and the operands' signs differ; by zero both give 0
    d = a.dtype
    zero = Expr.const(0, d)
    r = Expr("MOD", d, (a, b))
    signs_differ = Expr("CMPNE", BOOL, (Expr("CMPLT", BOOL, (a, zero)), Expr("CMPLT", BOOL, (b, zero))))
    fix = Expr("AND", BOOL, (Expr("CMPNE", BOOL, (r, zero)), signs_differ))
    return Expr("WHERE", d, (fix, Expr("SUB", d, (r, b)), r))


def _mixed_compare(op: str, srcs: tuple[Expr, ...], dtypes: Sequence[DType]) -> Expr:
    # numpy compares u64 with i64 exactly: a negative signed operand is below every
    # unsigned one; otherwise both fit u64
    if dtypes[0].is_signed:
        op, srcs = _SWAP[op], (srcs[1], srcs[0])
    u, s = srcs
    negative = Expr("CMPLT", BOOL, (s, Expr.const(0, s.dtype)))
    unsigned_is_greater = op in ("CMPGT", "CMPGE", "CMPNE")
    exact = Expr(op, BOOL, (u, Expr("CAST", u.dtype, (s,))))
    return Expr("WHERE", BOOL, (negative, Expr.const(unsigned_is_greater, BOOL), exact))


def _int_power(operands: Sequence[Val], dtype: DType, shape, span) -> Val:
    """Integer `**`: numpy's integer power, wrapping. A literal exponent must be
    non-negative (numpy refuses a negative one) and expands into multiplications (square
    and multiply); an array exponent stays a POW, whose negative elements give the
    truncated `1 / a**-b` (numpy raises there; see docs/dsl.md)."""
    base, exp = operands
    x = align(Val(coerce(base, dtype), base.shape), shape)
    if not exp.is_literal:
        b = align(Val(coerce(exp, dtype), exp.shape), shape)
        return Val(Expr("POW", dtype, (x, b)), shape, False, span)
    if isinstance(exp.literal, float) or exp.literal < 0:
        raise CompileError(f"integer '**' needs a non-negative integer exponent; got the literal {exp.literal}",
                           exp.span or span, hint="for other exponents use a float base, e.g. f64(x) ** y")
    n = int(convert_literal(exp.literal, dtype, exp.span))
    result: Expr | None = None
    while n:
        if n & 1:
            result = x if result is None else Expr("MUL", dtype, (result, x))
        n >>= 1
        if n:
            x = Expr("MUL", dtype, (x, x))
    if result is None:  # x ** 0 is 1, but x is still computed: an empty min() in it raises, as numpy's does
        result = Expr("ADD", dtype, (Expr("MUL", dtype, (x, Expr.const(0, dtype))), Expr.const(1, dtype)))
    return Val(result, shape, False, span)


# ------------------------------------------------------------------ assignment
def can_assign(val: Val, dtype: DType) -> bool:
    """Whether `out[...] = val` may convert implicitly: numpy's same-kind rule, where a
    weak scalar stands for its kind (bool < int < float)."""
    if val.weak:
        src = val.dtype  # the weak value's kind
        return src is BOOL or (src.is_int and not dtype.is_bool) or dtype.is_float
    return bool(np.can_cast(val.dtype.np, dtype.np, "same_kind"))
