"""Type annotations for kernels written as Python functions (`@hologram.kernel`).

    from hologram.types import f32, i64

    @hologram.kernel
    def scale(x: f32["n"], k: f32) -> f32["n"]:
        return x * k

`f32` alone is a scalar, `f32["n"]` a vector of `n` elements, `f32["m", "n"]` a matrix;
a dimension is a shape symbol, an integer, or an expression of them as in kernel
documents (`f32["n - 2"]`, `f32[4, "2*n"]`). The Python translator reads these from the
function's source and never evaluates them, so what they evaluate to here matters only
to Python itself (which evaluates annotations when the `def` runs) and to a reader: an
`ArrayType` that prints as the type string (`f32[m, n]`).

`get_global_id()` is the thread index of the thread-style form (docs/python-kernels.md).

This module imports nothing: it is what a module of Python kernels imports at start-up.
"""

from __future__ import annotations

__all__ = ["ArrayType", "ScalarType", "get_global_id",
           "bool", "bool_", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "f32", "f64"]

# The element types, by their kernel-document names (hologram.core.types.DType; a test
# keeps the two lists equal).
DTYPE_NAMES = ("bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "f32", "f64")


class ArrayType:
    """`f32["m", "n"]`: an element type and its dimensions (strings or ints, as written)."""

    __slots__ = ("dtype", "dims")

    def __init__(self, dtype: str, dims: tuple[str | int, ...]):
        self.dtype = dtype
        self.dims = dims

    def __repr__(self) -> str:
        return f"{self.dtype}[{', '.join(str(d) for d in self.dims)}]"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ArrayType) and (self.dtype, self.dims) == (other.dtype, other.dims)

    def __hash__(self) -> int:
        return hash((self.dtype, self.dims))


class ScalarType:
    """An element type: a scalar annotation (`k: f32`), subscripted for an array (`f32["n"]`)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __getitem__(self, dims: object) -> ArrayType:
        return ArrayType(self.name, dims if isinstance(dims, tuple) else (dims,))  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return self.name


def get_global_id(axis: int = 0) -> int:
    """The index of the running thread along `axis`, in the thread-style form. A kernel's
    body is translated, never run, so calling this is always a mistake."""
    raise RuntimeError("get_global_id() has a meaning only inside a @hologram.kernel function, whose source is "
                       "translated, never run")


bool = ScalarType("bool")  # noqa: A001 - the element type's own name; `bool_` avoids shadowing the builtin
bool_ = bool
i8 = ScalarType("i8")
i16 = ScalarType("i16")
i32 = ScalarType("i32")
i64 = ScalarType("i64")
u8 = ScalarType("u8")
u16 = ScalarType("u16")
u32 = ScalarType("u32")
u64 = ScalarType("u64")
f16 = ScalarType("f16")
f32 = ScalarType("f32")
f64 = ScalarType("f64")
