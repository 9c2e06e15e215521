"""Scalar types and symbolic shapes shared by every stage of the pipeline.

`DType` names the twelve scalar types of the DSL and the ISA. `Affine` is a dimension:
an integer affine combination of shape symbols (`n`, `n - 2`, `2*m + 1`), evaluated
against the symbol bindings a call supplies.
"""

from __future__ import annotations

import enum
import math
from typing import Iterable, Mapping

import attrs
import numpy as np


class DType(enum.Enum):
    BOOL = "bool"
    I8 = "i8"
    I16 = "i16"
    I32 = "i32"
    I64 = "i64"
    U8 = "u8"
    U16 = "u16"
    U32 = "u32"
    U64 = "u64"
    F16 = "f16"
    F32 = "f32"
    F64 = "f64"

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"DType.{self.name}"

    @property
    def np(self) -> np.dtype:
        return _NUMPY[self]

    @property
    def is_bool(self) -> bool:
        return self is DType.BOOL

    @property
    def is_float(self) -> bool:
        return self in (DType.F16, DType.F32, DType.F64)

    @property
    def is_int(self) -> bool:
        """Signed or unsigned integer (bool excluded)."""
        return self.is_signed or self.is_unsigned

    @property
    def is_signed(self) -> bool:
        return self in (DType.I8, DType.I16, DType.I32, DType.I64)

    @property
    def is_unsigned(self) -> bool:
        return self in (DType.U8, DType.U16, DType.U32, DType.U64)

    @property
    def bits(self) -> int:
        return 8 if self is DType.BOOL else self.np.itemsize * 8

    @property
    def itemsize(self) -> int:
        return self.np.itemsize

    @property
    def min(self) -> int | float:
        return _limits(self)[0]

    @property
    def max(self) -> int | float:
        return _limits(self)[1]

    @classmethod
    def parse(cls, text: str) -> "DType":
        """The DType spelled `text` (`f32`, `u8`, `bool`); ValueError otherwise."""
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"unknown type {text!r}; expected one of {', '.join(d.value for d in cls)}") from None

    @classmethod
    def from_numpy(cls, dtype: np.dtype | type) -> "DType":
        dt = np.dtype(dtype)
        for d, n in _NUMPY.items():
            if n == dt:
                return d
        raise ValueError(f"numpy dtype {dt} has no Hologram equivalent")


_NUMPY: dict[DType, np.dtype] = {
    DType.BOOL: np.dtype(np.bool_),
    DType.I8: np.dtype(np.int8),
    DType.I16: np.dtype(np.int16),
    DType.I32: np.dtype(np.int32),
    DType.I64: np.dtype(np.int64),
    DType.U8: np.dtype(np.uint8),
    DType.U16: np.dtype(np.uint16),
    DType.U32: np.dtype(np.uint32),
    DType.U64: np.dtype(np.uint64),
    DType.F16: np.dtype(np.float16),
    DType.F32: np.dtype(np.float32),
    DType.F64: np.dtype(np.float64),
}

INTEGER_TYPES = tuple(d for d in DType if d.is_int)
FLOAT_TYPES = (DType.F16, DType.F32, DType.F64)
ALL_TYPES = tuple(DType)


def _limits(d: DType) -> tuple[int | float, int | float]:
    if d is DType.BOOL:
        return 0, 1
    if d.is_float:
        info = np.finfo(d.np)
        return float(info.min), float(info.max)
    info = np.iinfo(d.np)
    return int(info.min), int(info.max)


def promote(*dtypes: DType) -> DType:
    """numpy's result type for arrays of these dtypes (NEP 50)."""
    return DType.from_numpy(np.result_type(*(d.np for d in dtypes)))


def convert_const(value: bool | int | float, to: DType) -> bool | int | float:
    """A Python constant converted as CVT converts: saturating float->int with NaN -> 0,
    wrapping int->int, anything->bool is `!= 0`, rounding to the target float type."""
    if to.is_bool:
        return bool(value != 0)
    if to.is_float:
        return float(to.np.type(float(value) if not isinstance(value, int) else value))
    if isinstance(value, float):
        if math.isnan(value):
            return 0
        if math.isinf(value):
            return to.max if value > 0 else to.min
        return int(min(max(math.trunc(value), to.min), to.max))
    v = int(value) & ((1 << to.bits) - 1)
    return v - (1 << to.bits) if to.is_signed and v >= 1 << (to.bits - 1) else v


def python_int(value: object) -> object:
    """A numpy integer as the Python int it stands for; anything else unchanged (for
    `structure_problem` to judge). Sizes and offsets held as numpy integers compute in
    fixed width and wrap: `math.prod((np.int32(65536),) * 2)` is 0."""
    return int(value) if isinstance(value, np.integer) else value


def python_scalar(value: object) -> object:
    """A numpy bool, integer or float scalar as the Python bool, int or float it stands
    for (the value the encoding, the formatter and the verifier read); anything else
    unchanged, for `structure_problem` to judge. The ISA values convert what they are
    given, so a program has one form whatever built it: the interpreter refused numpy
    offsets that cpu_llvm ran."""
    if isinstance(value, np.generic):
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.floating):
            return float(value)
    return value


def python_ints(values: object) -> object:
    """`python_int` of every element of a tuple (a block shape); anything else unchanged."""
    if type(values) is tuple and any(isinstance(v, np.integer) for v in values):
        return tuple(python_int(v) for v in values)
    return values


def _canonical_terms(terms: object) -> object:
    """`terms` sorted by symbol name, each symbol once (coefficients summed), zero
    coefficients dropped. Every consumer then reads the same value: the verifier's
    polynomials and the runtimes' sizes agree, and one dimension has one encoding (and
    one program hash). Anything but a tuple of (str, int) pairs is returned unchanged,
    for `structure_problem` to describe."""
    if type(terms) is not tuple:
        return terms
    prev = ""
    for t in terms:  # the common case: already canonical, kept as it is (no allocation)
        if type(t) is not tuple or len(t) != 2 or type(t[0]) is not str or type(t[1]) is not int \
                or not t[1] or t[0] <= prev:
            break
        prev = t[0]
    else:
        return terms
    acc: dict[str, int] = {}
    for t in terms:
        if not (isinstance(t, tuple) and len(t) == 2 and isinstance(t[0], str)
                and isinstance(t[1], (int, np.integer)) and not isinstance(t[1], (bool, np.bool_))):
            return terms
        acc[t[0]] = acc.get(t[0], 0) + int(t[1])
    return tuple(sorted((n, c) for n, c in acc.items() if c))


@attrs.frozen(order=True)
class Affine:
    """`const + sum(coeff * symbol)`: a dimension or a symbolic integer.

    The constructor canonicalizes the terms (`_canonical_terms`): sorted by symbol name,
    one per symbol, non-zero coefficients. So `Affine(0, (("n", -1), ("n", 2)))` is
    `Affine(0, (("n", 1),))`, and equal expressions are equal values (and hash alike).
    """

    const: int = attrs.field(default=0, converter=python_int)
    terms: tuple[tuple[str, int], ...] = attrs.field(default=(), converter=_canonical_terms)

    @staticmethod
    def of(value: "int | str | Affine") -> "Affine":
        if isinstance(value, Affine):
            return value
        if isinstance(value, str):
            return Affine(0, ((value, 1),))
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return Affine(int(value), ())
        raise TypeError(f"cannot make a dimension of {value!r}")

    @staticmethod
    def _make(const: int, terms: Iterable[tuple[str, int]]) -> "Affine":
        return Affine(const, tuple(terms))  # the constructor sums, sorts and drops zeros

    def __add__(self, other: "int | str | Affine") -> "Affine":
        o = Affine.of(other)
        return Affine._make(self.const + o.const, self.terms + o.terms)

    __radd__ = __add__

    def __neg__(self) -> "Affine":
        return Affine(-self.const, tuple((n, -c) for n, c in self.terms))

    def __sub__(self, other: "int | str | Affine") -> "Affine":
        return self + (-Affine.of(other))

    def __rsub__(self, other: "int | str | Affine") -> "Affine":
        return Affine.of(other) - self

    def __mul__(self, k: int) -> "Affine":
        if not isinstance(k, int):
            raise TypeError("an affine dimension can only be scaled by an integer")
        return Affine._make(self.const * k, ((n, c * k) for n, c in self.terms))

    __rmul__ = __mul__

    def floordiv(self, k: int) -> "Affine | None":
        """`self // k` for every value of the symbols, when that is affine: each symbol's
        coefficient divisible by k (k > 0); otherwise None."""
        if k <= 0 or any(c % k for _, c in self.terms):
            return None
        return Affine._make(self.const // k, ((n, c // k) for n, c in self.terms))

    @property
    def is_const(self) -> bool:
        return not self.terms

    @property
    def symbols(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.terms)

    def evaluate(self, bindings: Mapping[str, int]) -> int:
        total = self.const
        for name, c in self.terms:
            if name not in bindings:
                raise KeyError(name)
            total += c * int(bindings[name])
        return total

    def __str__(self) -> str:
        parts: list[str] = []
        for name, c in self.terms:
            mag = abs(c)
            term = name if mag == 1 else f"{mag}*({name})" if _infix(name) else f"{mag}*{name}"
            if not parts:
                parts.append(term if c > 0 else f"-{term}")
            else:
                parts.append(f"+ {term}" if c > 0 else f"- {term}")
        if self.const or not parts:
            if not parts:
                parts.append(str(self.const))
            else:
                parts.append(f"+ {self.const}" if self.const > 0 else f"- {-self.const}")
        return " ".join(parts)


def _infix(name: str) -> bool:
    """A derived symbol written with `//` or `*` (hologram.core.dims) outside one whole
    `max(...)` or `min(...)`: parenthesized under a coefficient, so `2*(n//2)` and
    `2*(max(n - 1, 0)//2)` read as they are meant."""
    if "//" not in name and "*" not in name:
        return False
    if not name.startswith(("max(", "min(")):
        return True
    depth = 0
    for i, ch in enumerate(name):
        depth += (ch == "(") - (ch == ")")
        if depth == 0:
            return i != len(name) - 1  # the call's parenthesis closes before the end: `max(...)//2`
    return True


Shape = tuple[Affine, ...]


def shape_str(shape: Shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def type_str(dtype: DType, shape: Shape) -> str:
    """`f32[n, 4]` or `f32` for a scalar: the spelling used in kernel documents."""
    return f"{dtype}{shape_str(shape)}" if shape else str(dtype)
