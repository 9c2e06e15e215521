"""Checking a kernel call's arguments against its signature, before anything runs.

Pure functions from (signature, Python arguments) to what a backend launch needs:
arrays of the declared dtype, C-contiguous; scalars as numpy scalars of the declared
dtype; every shape symbol's value. Nothing is converted behind the caller's back: a
wrong dtype or layout is an `ArgumentError` unless the caller passed `cast=True`, which
makes one explicit copy. A device array (hologram.backend.device) is taken as it is, an
input or an `out=` array, when the kernel's backend owns it, and never converted; so is
another library's array in the backend's memory (a CuPy array on cuda), as the
backend's device array over the same memory (`adopt_foreign`, `Backend.adopt`).

Shape symbols are solved from the input shapes in declaration order. A dimension is an
`Affine` (`n`, `n - 2`, `2*n`, `n + m`): a dimension with exactly one symbol not yet
bound binds it (`c*s + k = size`), a dimension whose symbols are all bound checks it.
"""

from __future__ import annotations

import math
import numbers
import sys
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from hologram.backend.binding import (SYMBOL_MAX, SYMBOL_RANGE, complete_symbols, describe_bytes,
                                      foreign_device_array, plain_array)
from hologram.backend.device import DeviceArray
from hologram.call.mapping import may_share
from hologram.compiler.signature import Param, Signature
from hologram.core.errors import ArgumentError, EmptyReductionError, did_you_mean, shorten
from hologram.core.types import Affine, DType
from hologram.core.values import Value

CAST_HINT = "pass cast=True to convert it (one explicit copy)"


# ------------------------------------------------------------------------- arguments
def bind_arguments(sig: Signature, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Match positional and keyword arguments to the declared inputs, as Python does."""
    names = sig.input_names
    if len(args) > len(names):
        listed = ", ".join(names) if names else "none"
        raise ArgumentError(f"{sig.name}() takes {_count(len(names), 'input')} ({listed}) but {len(args)} were given")
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in names:
            hint = ("outputs are returned; pass out= to write into existing arrays"
                    if key in sig.output_names else None)
            raise ArgumentError(f"{sig.name}() got an unexpected argument {key!r}{did_you_mean(key, names)}",
                                hint=hint)
        if key in bound:
            raise ArgumentError(f"{sig.name}() got multiple values for argument {key!r}")
        bound[key] = value
    missing = [n for n in names if n not in bound]
    if missing:
        raise ArgumentError(f"{sig.name}() missing {_count(len(missing), 'input', with_number=False)} "
                            + ", ".join(repr(n) for n in missing))
    return bound


def _count(n: int, noun: str, with_number: bool = True) -> str:
    word = noun if n == 1 else noun + "s"
    return f"{n} {word}" if with_number else word


def check_array(kernel: str, p: Param, value: Any, cast: bool, loop_rank: int = 0) -> np.ndarray:
    """`value` as an input array of `p`'s dtype and rank (plus `loop_rank` leading loop
    dimensions, hologram.call.loops), C-contiguous; with `cast=True` anything numpy can
    convert becomes one converted copy (`cast_array`; never a copy otherwise). An ndarray
    subclass is viewed as a plain ndarray, a masked array refused (`plain_array`)."""
    where = f"{kernel}(): argument {p.name!r}"
    if type(value) is not np.ndarray:
        if isinstance(value, DeviceArray):
            return _check_device_array(kernel, where, p, value, loop_rank)
        if isinstance(value, np.ndarray):
            value = plain_array(where, value)
    if not isinstance(value, np.ndarray):
        if not cast:
            raise ArgumentError(f"{where} must be a numpy array of {p.type}, got {type(value).__name__}",
                                hint=CAST_HINT)
        try:
            value = np.asarray(value)
        except Exception as exc:
            raise ArgumentError(f"{where} cannot be converted to an array of {p.type}: {exc}") from None
    if cast:
        _numeric(where, value, p.type)
    _check_rank(kernel, where, p, value, loop_rank)
    want = p.dtype.np
    if cast:
        if value.dtype != want or not value.flags.c_contiguous:
            value = cast_array(where, p.name, value, p.dtype)
        return value
    if value.dtype != want:
        raise ArgumentError(f"{where} must have dtype {p.dtype} ({want}), got {value.dtype}", hint=CAST_HINT)
    if not value.flags.c_contiguous:
        raise ArgumentError(f"{where} must be C-contiguous, got a strided view of shape {value.shape}",
                            hint=f"{CAST_HINT}, or use np.ascontiguousarray")
    return value


def adopt_foreign(kernel: str, p: Param, value: Any, backend: Any) -> Any:
    """`value`, neither an ndarray nor a device array, as `backend`'s device array over the
    same memory when the backend recognises it (`Backend.adopt`: a CuPy or PyTorch array
    on cuda), else `value` as it is, for `check_array` to convert or refuse."""
    if isinstance(value, (np.ndarray, DeviceArray)):
        return value
    adopted = backend.adopt(value, f"{kernel}(): argument {p.name!r}")
    return value if adopted is None else adopted


def _check_rank(kernel: str, where: str, p: Param, value: np.ndarray | DeviceArray, loop_rank: int) -> None:
    if value.ndim != len(p.shape) + loop_rank:
        hint = f"to map the kernel over leading dimensions, call {kernel}.map(...)" \
            if value.ndim > len(p.shape) else None
        raise ArgumentError(f"{where} must have rank {len(p.shape)} ({p.type}), got shape {value.shape}", hint=hint)


def _check_device_array(kernel: str, where: str, p: Param, value: DeviceArray, loop_rank: int) -> DeviceArray:
    """A device array input: of `p`'s rank and exactly its dtype. It is never converted,
    `cast=True` or not: a conversion would be a hidden round trip through the host.
    Whose it is, is checked once the kernel's backend is known (`check_device_owners`)."""
    _check_rank(kernel, where, p, value, loop_rank)
    if value.dtype != p.dtype.np:
        raise ArgumentError(f"{where} must have dtype {p.dtype} ({p.dtype.np}), got a device array of {value.dtype}",
                            hint="a device array is never converted (not even with cast=True): convert it on the "
                                 "host, x.numpy().astype(...), and move that to the device")
    return value


def check_device_owners(kernel: str, backend: Any, inputs: Mapping[str, Any], outputs: Sequence[Param],
                        given: Sequence[Any] | None) -> bool:
    """Whether any input is a device array, each one (inputs and `out=` arrays) being
    `backend`'s own: a device array of another backend, or one handed to a backend without
    device arrays, is an ArgumentError naming the argument and what was expected."""
    on_device = False
    for name, a in inputs.items():
        if type(a) is not np.ndarray and isinstance(a, DeviceArray):  # (is_device_array, inline: every call)
            if a.backend.name != backend.name:  # by name: a reloaded plugin's arrays stay its own
                raise foreign_device_array(f"{kernel}(): argument {name!r}", a, backend)
            on_device = True
    if given is not None:
        for p, a in zip(outputs, given):
            if type(a) is not np.ndarray and isinstance(a, DeviceArray) and a.backend.name != backend.name:
                raise foreign_device_array(f"{kernel}(): out {p.name!r}", a, backend)
    return on_device


def is_device_array(value: Any) -> bool:
    """`isinstance(value, DeviceArray)`, with a plain ndarray answered first: the full
    path asks for every argument, and a negative answer of an abstract class's
    isinstance costs ~0.4 us (the type check ~0.05)."""
    return type(value) is not np.ndarray and isinstance(value, DeviceArray)


def cast_array(where: str, name: str, value: np.ndarray, d: DType) -> np.ndarray:
    """`value` converted to `d`, C-contiguous (one copy), by the rules a scalar converts
    by (`convert_scalar`): to an integer or bool dtype, floats truncate toward zero and
    a NaN, an infinity or a value the dtype cannot hold is an ArgumentError naming the
    element (numpy's astype would give INT_MIN, or wrap); to a float dtype, as numpy
    converts. An object array converts element by element, each a real number.
    `where` starts the message ("k(): argument 'x'"), `name` names the elements."""
    _numeric(where, value, str(d))
    if value.dtype.kind == "O":
        out = np.empty(value.shape, d.np)
        for index, item in np.ndenumerate(value):
            try:
                out[index] = _number_to(d, item)
            except _Refused as refused:
                raise ArgumentError(f"{where}: {_element(name, index)} = {_show(item)} {refused}") from None
        return out
    source = value.dtype
    if not d.is_float and source.kind in "fiu" and not np.can_cast(source, d.np, "safe"):
        lo, hi = (0, 1) if d.is_bool else (d.min, d.max)
        if source.kind == "f":
            unfit = ~np.isfinite(value)
            if not d.is_bool:
                truncated = np.trunc(value)  # exact bounds: lo and hi + 1 are powers of two, exact as floats
                unfit |= (truncated < float(lo)) | (truncated >= float(hi + 1))
        else:
            info = np.iinfo(source)
            unfit = np.zeros(value.shape, bool)
            if lo > info.min:
                unfit |= value < lo
            if hi < info.max:
                unfit |= value > hi
        if unfit.any():
            index = np.unravel_index(int(np.flatnonzero(unfit)[0]), value.shape)
            item = value[index].item()
            words = "cannot be converted to" if source.kind == "f" and not np.isfinite(item) else "is out of range for"
            raise ArgumentError(f"{where}: {_element(name, index)} = {_show(item)} {words} {d}"
                                + ("" if words.startswith("cannot") else f" ({lo} to {hi})"))
    with np.errstate(all="ignore"):  # float overflow gives inf, as numpy (and a float scalar) does
        return np.ascontiguousarray(value, dtype=d.np)


def _numeric(where: str, value: np.ndarray, to: str) -> None:
    """Refuse strings, bytes, records and complex numbers (an object array's elements
    are checked one by one)."""
    if value.dtype.kind in "USVc":
        raise ArgumentError(f"{where} cannot be converted to {to}: got values of dtype {value.dtype}")


def _element(name: str, index: tuple[int, ...]) -> str:
    return f"{name}[{', '.join(map(str, index))}]" if index else name


class _Refused(Exception):
    """Why a number cannot be converted: the words after `x = value` in the message."""


def _number_to(d: DType, value: Any) -> np.generic:
    """A real number (Python's or numpy's) as a numpy scalar of `d`: floats truncate
    toward zero for an integer or bool `d`; NaN, infinities and values out of range are
    refused (`_Refused`), never wrapped."""
    if isinstance(value, (complex, np.complexfloating)) or not isinstance(value, (numbers.Number, np.bool_)):
        raise _Refused("is not a real number")
    if d.is_float:
        try:
            with np.errstate(all="ignore"):
                return d.np.type(value)
        except (OverflowError, TypeError, ValueError):  # an int beyond any float, an odd Number
            raise _Refused(f"cannot be converted to {d}") from None
    if not isinstance(value, (bool, np.bool_, numbers.Integral)):
        try:
            value = float(value)
        except (OverflowError, TypeError, ValueError):
            value = math.nan
        if not math.isfinite(value):
            raise _Refused(f"cannot be converted to {d}")
        if d.is_bool:
            return np.bool_(value != 0)
    ivalue = int(value)  # truncates toward zero
    if not d.min <= ivalue <= d.max:
        raise _Refused(f"is out of range for {d} ({d.min} to {d.max})")
    return d.np.type(ivalue)


def convert_scalar(kernel: str, p: Param, value: Any, cast: bool) -> np.generic:
    """A Python or numpy number (or 0-d array) as a numpy scalar of `p.dtype`.

    Integer types are range-checked (an out-of-range value is an error, never wrapped).
    A float for an integer or bool parameter needs `cast=True`, which truncates toward
    zero as numpy's astype does. Float parameters follow numpy: overflow gives inf."""
    where = f"{kernel}(): argument {p.name!r}"
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (complex, np.complexfloating)) or not isinstance(value, (numbers.Number, np.bool_)):
        hint = f"to map the kernel over an array of them, call {kernel}.map(...)" \
            if isinstance(value, np.ndarray) else None
        raise ArgumentError(f"{where} must be a number ({p.type}), got {type(value).__name__}", hint=hint)
    d = p.dtype
    if not d.is_float and not cast and not isinstance(value, (bool, np.bool_, numbers.Integral)):
        kind = "an integer" if d.is_int else "a bool"
        raise ArgumentError(f"{where} must be {kind} ({d}), got {type(value).__name__} {_show(value)}",
                            hint="pass cast=True to truncate it toward zero")
    try:
        return _number_to(d, value)
    except _Refused as refused:
        raise ArgumentError(f"{where} = {_show(value)} {refused}") from None


def _show(value: Any) -> str:
    return shorten(value, 32)  # never a whole giant int: Python refuses to print one


# --------------------------------------------------------------------------- symbols
class _Source(Value):
    """Where a symbol's value came from, for error messages."""

    __slots__ = ("arg", "dim", "expr", "size")
    arg: str
    dim: int
    expr: Affine
    size: int

    def __init__(self, arg: str, dim: int, expr: Affine, size: int) -> None:
        self._init(arg=arg, dim=dim, expr=expr, size=size)

    def __str__(self) -> str:
        return f"argument {self.arg!r} dim {self.dim} ({self.expr}) has size {self.size}"


def bind_direct(plan: Sequence[tuple[str, int, str | None, int]], arrays: Mapping[str, np.ndarray],
                symbols: Sequence[str]) -> dict[str, int] | None:
    """The symbols bound by a `direct_binding` plan, or None on any disagreement (the
    caller then runs `bind_symbols`, which explains the mismatch)."""
    bound: dict[str, int] = {}
    for name, i, sym, const in plan:
        size = arrays[name].shape[i]
        if sym is None:
            if size != const:
                return None
        elif bound.setdefault(sym, size) != size or size > SYMBOL_MAX:
            return None
    return bound if len(bound) == len(symbols) else None


def bind_symbols(kernel: str, params: Sequence[Param], arrays: Mapping[str, np.ndarray],
                 symbols: Sequence[str], given: Mapping[str, int] | None = None) -> dict[str, int]:
    """Every shape symbol's value, solved from the shapes of `arrays` (by `params` order).

    `given` pre-binds symbols (the CLI's --bind); they are checked like any other source.
    Raises ArgumentError naming the symbol, both sizes and both arguments on a mismatch."""
    bound: dict[str, int] = dict(given or {})
    for s, v in bound.items():
        if type(v) is not int or not 0 <= v <= SYMBOL_MAX:
            raise ArgumentError(f"{kernel}(): {s} = {_show(v)} (--bind) is outside the range a launch may bind "
                                f"a symbol to: {SYMBOL_RANGE} (the verifier's proofs assume it)")
    source: dict[str, _Source | str] = {s: "--bind" for s in bound}
    pending = [(p, i, Affine.of(d), arrays[p.name].shape[i])
               for p in params if p.kind != "scalar" and p.name in arrays for i, d in enumerate(p.shape)]
    while pending:
        progress, later = False, []
        for p, i, dim, size in pending:
            free = [s for s in dim.symbols if s not in bound]
            if len(free) > 1:
                later.append((p, i, dim, size))
                continue
            progress = True
            src = _Source(p.name, i, dim, size)
            if not free:
                _check_dim(kernel, p, src, bound, source)
                continue
            sym = free[0]
            coeff = dict(dim.terms)[sym]
            rest = (dim - Affine(0, ((sym, coeff),))).evaluate(bound)
            value, rem = divmod(size - rest, coeff)
            if rem or value < 0:
                raise ArgumentError(f"{kernel}(): {src}, which no integer {sym} >= 0 satisfies")
            if value > SYMBOL_MAX:
                raise ArgumentError(f"{kernel}(): {src}, so {sym} = {value}, which is outside the range a launch "
                                    f"may bind a symbol to: {SYMBOL_RANGE} (the verifier's proofs assume it)")
            bound[sym], source[sym] = value, src
        if not progress:
            p, i, dim, size = later[0]
            raise ArgumentError(f"{kernel}(): cannot bind shape symbols {', '.join(s for s in dim.symbols if s not in bound)}"
                                f" from argument {p.name!r} dim {i} ({dim}); each symbol needs a dimension of its own")
        pending = later
    unbound = [s for s in symbols if s not in bound]
    if unbound:
        raise ArgumentError(f"{kernel}(): shape symbol {unbound[0]!r} is not bound by any argument's shape")
    return bound


def _check_dim(kernel: str, p: Param, src: _Source, bound: Mapping[str, int],
               source: Mapping[str, "_Source | str"]) -> None:
    want = src.expr.evaluate(bound)
    if want == src.size:
        return
    if src.expr.is_const:
        raise ArgumentError(f"{kernel}(): argument {p.name!r} dim {src.dim} must be {want} ({p.type}), "
                            f"got size {src.size}")
    if len(src.expr.terms) == 1:
        (sym, coeff), = src.expr.terms
        prev = source[sym]
        implied, rem = divmod(src.size - src.expr.const, coeff)
        need = f"needs {sym} = {implied}" if not rem and implied >= 0 else f"no integer {sym} >= 0 fits"
        raise ArgumentError(f"{kernel}(): shape mismatch for symbol {sym!r}: {sym} = {bound[sym]} "
                            f"from {_origin(prev)}, but {src}, which {need}")
    vals = ", ".join(f"{s} = {bound[s]} (from {_origin(source[s])})" for s in src.expr.symbols)
    raise ArgumentError(f"{kernel}(): shape mismatch: {src}, but {src.expr} = {want} with {vals}")


def _origin(src: "_Source | str") -> str:
    if isinstance(src, str):
        return src
    return f"argument {src.arg!r} dim {src.dim} ({src.expr}) of size {src.size}"


def concrete_shape(kernel: str, p: Param, symbols: Mapping[str, int]) -> tuple[int, ...]:
    shape = tuple(Affine.of(d).evaluate(symbols) for d in p.shape)
    if any(n < 0 for n in shape):
        vals = ", ".join(f"{k} = {v}" for k, v in symbols.items())
        what = "output" if p.kind == "output" else "argument"
        raise ArgumentError(f"{kernel}(): {what} {p.name!r} ({p.type}) would have negative shape {shape} for {vals}")
    return shape


# --------------------------------------------------------------------------- outputs
def allocate_outputs(kernel: str, outputs: Sequence[Param], shapes: Sequence[tuple[int, ...]],
                     symbols: Mapping[str, int], allocate: Callable[[tuple[int, ...], DType], np.ndarray],
                     given: Sequence[np.ndarray | None] | None = None) -> tuple[np.ndarray, ...]:
    """A new array per output from the backend's `allocate`, except where `given` (the
    checked `out=`) holds one. A size numpy cannot hold (more than 2**63 - 1 bytes) is
    refused before asking; one the machine cannot give (numpy's MemoryError, or a
    ValueError from an allocator) becomes the same ArgumentError, naming the output, its
    shape, the symbols and the bytes."""
    arrays = []
    for k, (p, shape) in enumerate(zip(outputs, shapes)):
        if given is not None and given[k] is not None:
            arrays.append(given[k])
            continue
        nbytes = math.prod(shape) * p.dtype.np.itemsize
        if nbytes > sys.maxsize:
            raise _too_big(kernel, p, shape, symbols, nbytes, "more than a numpy array can hold")
        try:
            arrays.append(allocate(shape, p.dtype))
        except (MemoryError, ValueError):
            raise _too_big(kernel, p, shape, symbols, nbytes, "more than this machine can give") from None
    return tuple(arrays)


def _too_big(kernel: str, p: Param, shape: tuple[int, ...], symbols: Mapping[str, int], nbytes: int,
             why: str) -> ArgumentError:
    used = {s for d in p.shape for s in Affine.of(d).symbols}
    named = ", ".join(f"{s} = {v}" for s, v in symbols.items() if s in used)
    return ArgumentError(f"{kernel}(): cannot allocate output {p.name!r} ({p.type}) of shape {shape}"
                         f"{f' for {named}' if named else ''}: {describe_bytes(nbytes)}, {why}")


def check_out(kernel: str, outputs: Sequence[Param], out: Any,
              shapes: Sequence[tuple[int, ...]]) -> tuple[np.ndarray | None, ...]:
    """Validate `out=`: one array per output (a bare array when there is one), of the exact
    dtype and shape, C-contiguous, writeable and not overlapping each other; or None for
    an output to allocate (as numpy's ufuncs take it). Returns the caller's arrays
    themselves (an ndarray subclass included, so `k(x, out=m) is m`; a masked array is
    refused, see `plain_array`), None where None was given."""
    arrays = (out,) if isinstance(out, np.ndarray) or is_device_array(out) else out
    if not isinstance(arrays, (tuple, list)) or len(arrays) != len(outputs):
        n = len(arrays) if isinstance(arrays, (tuple, list)) else type(out).__name__
        names = ", ".join(p.name for p in outputs)
        raise ArgumentError(f"{kernel}(): out= must hold {_count(len(outputs), 'array')} ({names}), got {n}")
    for p, a, shape in zip(outputs, arrays, shapes):
        where = f"{kernel}(): out {p.name!r}"
        if a is None:
            continue
        if type(a) is not np.ndarray and isinstance(a, DeviceArray):
            # always contiguous and writeable; whose it is, check_device_owners says
            if a.dtype != p.dtype.np or a.shape != shape:
                raise ArgumentError(f"{where} must be a {p.dtype} array of shape {shape} ({p.type}), got a "
                                    f"device array of {a.dtype} and shape {a.shape}")
            continue
        if not isinstance(a, np.ndarray):
            raise ArgumentError(f"{where} must be a numpy array of {p.type}, got {type(a).__name__}")
        if type(a) is not np.ndarray:
            a = plain_array(where, a)  # np.matrix reports no shape but its own
        if a.dtype != p.dtype.np:
            raise ArgumentError(f"{where} must have dtype {p.dtype} ({p.dtype.np}), got {a.dtype}")
        if a.shape != shape:
            raise ArgumentError(f"{where} must have shape {shape} ({p.type}), got {a.shape}")
        if not a.flags.c_contiguous:
            raise ArgumentError(f"{where} must be C-contiguous")
        if not a.flags.writeable:
            raise ArgumentError(f"{where} is read-only")
    for i, a in enumerate(arrays):
        for j in range(i):
            if a is not None and arrays[j] is not None and _shares(a, arrays[j]):
                raise ArgumentError(f"{kernel}(): out {outputs[j].name!r} and out {outputs[i].name!r} share memory")
    return tuple(arrays)


def unalias(inputs: Mapping[str, np.ndarray], outs: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Inputs that overlap an output array are copied first, so writing an output can
    never change an input another lane still has to read (numpy's ufuncs do the same).
    Overlap is by address, and by file for arrays in file mappings: two mappings of one
    file are two addresses for the same bytes (hologram.call.mapping). A device array
    overlaps only itself (there are no views of one); its copy is made on the device."""
    return {name: a.copy() if any(_shares(a, o) for o in outs) else a for name, a in inputs.items()}


def _shares(a: np.ndarray | DeviceArray, b: np.ndarray | DeviceArray) -> bool:
    if type(a) is np.ndarray and type(b) is np.ndarray:  # the common case, answered first
        return may_share(a, b)
    if isinstance(a, DeviceArray) or isinstance(b, DeviceArray):  # never np.may_share_memory: it would read one
        return a is b and a.size > 0
    return may_share(a, b)


# ------------------------------------------------------------------------ reductions
def check_reductions(name: str, reductions: Sequence[tuple[str, tuple]], symbols: Mapping[str, int]) -> None:
    """numpy refuses min/max/argmin/argmax of an empty array; so do we, before launching."""
    for kind, axes in reductions:
        sizes = [Affine.of(ext).evaluate(symbols) for _, ext in axes]
        if 0 in sizes or any(s < 0 for s in sizes):
            desc = [f"{ext} = {size}" for (_, ext), size in zip(axes, sizes)]
            named = {str(ext) for _, ext in axes}
            desc += [f"{s} = {symbols[s]}" for s in sorted({s for _, ext in axes for s in Affine.of(ext).symbols})
                     if s not in named]
            raise EmptyReductionError(f"{name}(): {kind}() over an empty extent ({', '.join(desc)}) "
                                      f"has no identity")
