"""A launch's arguments, bound to a program and checked: the one implementation every
backend launches through, with the same messages everywhere.

`Backend.launch(executable, buffers, scalars, symbols)` is public: a caller may hand it
anything. Native code trusts sizes, so before a lane runs every backend must refuse, with
an `ArgumentError`, a symbol outside the launch contract (0 .. 2**62 - 1, what the
verifier's proofs assume), a missing or unknown buffer, an array of another dtype or
size, a strided view, a read-only array the program writes, and a scalar that is not a
number. `LaunchBinding.of(program)` computes, once per program, what these checks need;
`bind` (or its steps, for a backend that wants its hot path short) runs them:

    binding = LaunchBinding.of(program)            # at prepare time
    bound = binding.bind(buffers, scalars, symbols)  # at each launch
    bound.arrays      # the caller's arrays (param order), then zeroed temporaries
    bound.scalars     # numpy scalars of the declared dtypes (converted by the ISA's CVT rules)
    bound.symbols     # every shape symbol's value, derived ones included

`exact_arguments` is the cheaper test of a `Backend.launcher` run, whose caller (the
kernel's fast path) already ran the full checks once.
"""

from __future__ import annotations

import functools
import math
import sys
from typing import Any, Mapping, Sequence

import numpy as np

from hologram.backend.device import DeviceArray
from hologram.core.dims import derive, is_derived
from hologram.core.errors import ArgumentError, ExecutionError, shorten
from hologram.core.types import Affine, DType
from hologram.core.values import Value
from hologram.isa.opcodes import OPCODES
from hologram.isa.program import AXES, BufferParam, Instr, Program, ScalarParam, Stage
from hologram.verify.intervals import SYMBOL_MAX

__all__ = ["SYMBOL_MAX", "SYMBOL_RANGE", "symbol_value", "complete_symbols", "plain_array", "host_array",
           "foreign_device_array", "zeroed_temporary",
           "convert_value", "written_buffers", "domain_extents", "Dim", "compile_dim", "eval_dim", "Slot",
           "ScalarSlot", "LaunchBinding", "Bound", "Accepts", "exact_arguments"]

SYMBOL_RANGE = "0 to 2**62 - 1"


def _show(value: Any) -> str:
    return shorten(value, 32)  # never a whole giant int: Python refuses to print one


# --------------------------------------------------------------------------- symbols
def symbol_value(name: str, value: Any) -> int:
    """`value` as the int shape symbol `name` is bound to at a launch, or ArgumentError.

    The launch contract: every symbol lies in 0..SYMBOL_MAX (2**62 - 1). The verifier
    proves memory accesses under it (`2*n` or `n + 4` cannot wrap i64), so every launch
    path enforces it: the kernel's binder and every backend's `launch` and `launcher`."""
    if type(value) is not int:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise ArgumentError(f"shape symbol '{name}' must be bound to an integer, got {_show(value)}")
        value = int(value)
    if not 0 <= value <= SYMBOL_MAX:
        raise ArgumentError(f"shape symbol '{name}' = {_show(value)} is outside the range a launch may bind "
                            f"a symbol to: {SYMBOL_RANGE} (the verifier's proofs assume it)")
    return value


def complete_symbols(names: Sequence[str], bound: Mapping[str, int]) -> Mapping[str, int]:
    """`bound` (the bound symbols' values) with the value of every derived symbol among
    `names` (hologram.core.dims: `max(n - 1, 0)`, `(n + 1)//2`, `m*n`), computed in order
    and held to the launch contract like a bound one; `bound` itself when there is none.
    A derived value past SYMBOL_MAX (a product of large sizes) is an ArgumentError."""
    derived = _derived_names(tuple(names))
    if not derived:
        return bound
    try:
        values = derive(derived, bound)
    except KeyError as e:
        raise ArgumentError(f"shape symbol {e.args[0]!r} is not bound") from None
    for n in derived:
        v = values[n]
        if not 0 <= v <= SYMBOL_MAX:
            vals = ", ".join(f"{k} = {bound[k]}" for k in sorted(bound))
            raise ArgumentError(f"the dimension {n} is {_show(v)} for {vals}, outside the range a launch allows: "
                                f"{SYMBOL_RANGE}")
    return values


@functools.lru_cache(maxsize=1024)
def _derived_names(names: tuple[str, ...]) -> tuple[str, ...]:
    """The derived symbols of a program's symbol list (cached by the list: a launch asks
    for every call)."""
    return tuple(n for n in names if is_derived(n))


# ---------------------------------------------------------------------------- arrays
def plain_array(where: str, value: np.ndarray) -> np.ndarray:
    """An ndarray subclass as a base-class `ndarray` over the same memory (np.matrix,
    np.memmap, a user's subclass: zero-copy, and read by its buffer as any array is).
    A masked array is refused, `cast=True` or not: a kernel reads every element, so its
    mask would be dropped without a word. `where` starts the message ("k(): argument 'x'")."""
    if isinstance(value, np.ma.MaskedArray):
        raise ArgumentError(f"{where} is a masked array; kernels read every element, so its mask would be "
                            "silently ignored", hint="pass x.filled(value) to choose what the masked elements "
                            "become, or np.ma.getdata(x) to ignore the mask")
    return value.view(np.ndarray)


def host_array(where: str, value: Any) -> np.ndarray:
    """What `Backend.to_device` copies: `value` (an ndarray, or anything `np.asarray`
    takes) as a C-contiguous ndarray of a hologram dtype; a copy only where it must be
    made contiguous. A masked array is refused (`plain_array`), as is a dtype hologram has
    not (complex, strings, objects): an ArgumentError that `where` starts ("to_device(): x")."""
    if isinstance(value, DeviceArray):
        raise ArgumentError(f"{where} is already a device array (of backend {value.backend.name!r})",
                            hint="read it to the host with .numpy() first")
    if isinstance(value, np.ndarray):
        value = plain_array(where, value)
    else:
        try:
            value = np.asarray(value)
        except Exception as exc:
            raise ArgumentError(f"{where} cannot be converted to an array: {exc}") from None
    try:
        DType.from_numpy(value.dtype)
    except ValueError:
        names = ", ".join(str(d) for d in DType)
        raise ArgumentError(f"{where} has dtype {value.dtype}, which hologram has no type for (expected one of "
                            f"{names})") from None
    return value if value.flags.c_contiguous else value.copy(order="C")  # (ascontiguousarray makes a 0-d array 1-d)


def foreign_device_array(where: str, array: DeviceArray, runs_on: Any) -> ArgumentError:
    """The error for a device array handed to a backend that does not own it: `runs_on`
    the backend of the launch (None when its binder was not told: then it has none).
    `where` starts the message ("k(): argument 'x'")."""
    owner = array.backend.name
    if runs_on is None or not runs_on.has_device_arrays:
        which = "this backend" if runs_on is None else f"backend {runs_on.name!r}"
        why = f"{which} has no device arrays (it runs on numpy arrays in host memory)"
    else:
        why = f"backend {runs_on.name!r} reads only its own"
    return ArgumentError(f"{where} is a device array of backend {owner!r}, but {why}",
                         hint=f"read it to the host with .numpy(), or run the kernel on {owner!r} "
                              f"(kernel.on({owner!r}))")


TEMP_ALIGN = 64  # bytes: a cache line, and one AVX-512 vector
ALIGN_FROM = 1 << 16  # bytes: smaller temps keep numpy's alignment (a launch of a small kernel stays short)


def zeroed_temporary(name: str, dtype: DType | np.dtype, size: int) -> np.ndarray:
    """A backend's temporary buffer `name`: `size` zeroed elements of `dtype`. When the
    shape symbols ask for more than numpy can hold or the machine can give, an
    ArgumentError naming the buffer and the bytes (the symbols come from the arguments,
    so it is theirs to fix), as the kernel gives for an output it cannot allocate.

    A buffer of ALIGN_FROM bytes or more starts on a TEMP_ALIGN-byte boundary: numpy's
    allocations are only 16-byte aligned, and a temp read in whole vectors (a gemm's
    packed panels, docs/lowering.md) then splits every 512-bit load across two cache
    lines, which made one launch of a gemm up to 10% slower than another, depending on
    where the temp fell."""
    t = np.dtype(dtype.np if isinstance(dtype, DType) else dtype)
    nbytes = size * t.itemsize
    try:
        if nbytes < ALIGN_FROM:  # finding the address costs ~2.5 us: only where it pays
            return np.zeros(size, t)
        raw = np.zeros(nbytes + TEMP_ALIGN, np.uint8)
        skip = -raw.ctypes.data % TEMP_ALIGN
        return raw[skip:skip + nbytes].view(t)
    except (MemoryError, ValueError):  # ValueError: more bytes than an array may have
        pass
    d = dtype if isinstance(dtype, DType) else DType.from_numpy(t)
    why = "more than a numpy array can hold" if nbytes > sys.maxsize else "more than this machine can give"
    raise ArgumentError(f"cannot allocate temporary buffer {name!r} ({size} elements of {d}): {describe_bytes(nbytes)}, "
                        f"{why}")


def describe_bytes(nbytes: int) -> str:
    """`1610612736 bytes (1.5 GiB)`: a size as a message gives it."""
    return f"{nbytes} bytes" + (f" ({_binary(nbytes)})" if nbytes < 1 << 80 else "")


def _binary(nbytes: int) -> str:
    """1.5 GiB, 364 TiB: the size as a person reads it."""
    value, unit = float(nbytes), "bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        value /= 1024
        if value < 1024:
            break
    return f"{value:.3g} {unit}"


# --------------------------------------------------------------------------- scalars
def convert_value(value: Any, dtype: np.dtype) -> np.generic:
    """A number as a numpy scalar of `dtype`, by the ISA's CVT rules: -> bool is != 0,
    integers wrap, float -> int truncates and saturates (NaN -> 0), -> float rounds once."""
    if dtype.kind == "b":
        return np.bool_(value != 0)
    if isinstance(value, (bool, np.bool_)):
        return dtype.type(int(value))
    if dtype.kind in "iu":
        if isinstance(value, (float, np.floating)):
            value = float(value)
            if math.isnan(value):
                return dtype.type(0)
            info = np.iinfo(dtype)
            if math.isinf(value):
                return dtype.type(info.max if value > 0 else info.min)
            return dtype.type(min(max(math.trunc(value), int(info.min)), int(info.max)))
        bits = dtype.itemsize * 8
        v = int(value) & ((1 << bits) - 1)
        if dtype.kind == "i" and v >= 1 << (bits - 1):
            v -= 1 << bits
        return dtype.type(v)
    with np.errstate(all="ignore"):
        if isinstance(value, np.generic):
            return value.astype(dtype)
        if isinstance(value, int):
            try:
                return np.array(value).astype(dtype)[()]  # int64/uint64 -> float rounds once
            except OverflowError:
                return dtype.type(float(value))
        return dtype.type(value)


# -------------------------------------------------------------------- shape evaluation
Dim = tuple[int, tuple[tuple[int, int], ...]]  # const, ((symbol index, coefficient), ...)


def compile_dim(d: Affine, symbols: Sequence[str]) -> Dim:
    """`d` as a constant and (index into `symbols`, coefficient) pairs: evaluated by
    `eval_dim` against a tuple of symbol values, with no name look-ups."""
    return d.const, tuple((symbols.index(n), c) for n, c in d.terms)


def eval_dim(d: Dim, syms: Sequence[int]) -> int:
    n, terms = d
    for i, c in terms:
        n += c * syms[i]
    return n


def domain_extents(stage: Stage, symbols: Mapping[str, int]) -> tuple[int, ...]:
    """The stage's domain under `symbols` (one extent per axis it declares); an
    ExecutionError for a negative extent, an ArgumentError for a symbol the launch did
    not bind."""
    out = []
    for axis, dim in zip(AXES, stage.domain):
        try:
            n = dim.evaluate(symbols)
        except KeyError as e:
            raise ArgumentError(f"stage '{stage.name}': the domain uses shape symbol '{e.args[0]}', "
                                f"which the launch did not bind") from None
        if n < 0:
            raise ExecutionError(f"stage '{stage.name}': domain axis {axis} is {dim} = {n}, which is negative")
        out.append(n)
    return tuple(out)


def written_buffers(program: Program) -> frozenset[str]:
    """The global buffers the program can write: stored to, reduced into, or seeded by a
    stage's inits. A launch refuses a read-only array for any of them."""
    written = {i.addr.buffer for st in program.stages for i in st.body
               if isinstance(i, Instr) and i.addr is not None and OPCODES[i.op].form.startswith("m")
               and OPCODES[i.op].space == "global"}
    written |= {init.buffer for st in program.stages for init in st.inits}
    return frozenset(written)


# --------------------------------------------------------------------------- binding
class Slot(Value, eq=False):
    """A global buffer of a program, as a launch binds it: `dtype` the ISA's type,
    `np` numpy's, `shape` compiled against the program's symbols (`eval_dim`)."""

    __slots__ = ("name", "dtype", "np", "shape", "written")
    name: str
    dtype: DType
    np: np.dtype
    shape: tuple[Dim, ...]
    written: bool

    def __init__(self, name: str, dtype: DType, np: np.dtype, shape: tuple[Dim, ...], written: bool) -> None:
        self._init(name=name, dtype=dtype, np=np, shape=shape, written=written)


class ScalarSlot(Value, eq=False):
    """A scalar parameter of a program, as a launch binds it."""

    __slots__ = ("name", "dtype", "np")
    name: str
    dtype: DType
    np: np.dtype

    def __init__(self, name: str, dtype: DType, np: np.dtype) -> None:
        self._init(name=name, dtype=dtype, np=np)


_set = object.__setattr__  # Bound's fields, set directly: one is built per launch


class Bound(Value, eq=False):
    """A launch's checked arguments: `arrays` the caller's (param order, as given: not
    reshaped) then the zeroed temporaries, `sizes` their element counts, `scalars` one
    numpy scalar per scalar param (declared order), `symbols` every symbol's value by
    name (derived ones included) and `values` the same in program order."""

    __slots__ = ("arrays", "sizes", "scalars", "symbols", "values")
    arrays: list[np.ndarray]
    sizes: tuple[int, ...]
    scalars: list[np.generic]
    symbols: Mapping[str, int]
    values: tuple[int, ...]

    def __init__(self, arrays: list[np.ndarray], sizes: tuple[int, ...], scalars: list[np.generic],
                 symbols: Mapping[str, int], values: tuple[int, ...]) -> None:
        _set(self, "arrays", arrays)
        _set(self, "sizes", sizes)
        _set(self, "scalars", scalars)
        _set(self, "symbols", symbols)
        _set(self, "values", values)


class LaunchBinding(Value, eq=False):
    """What binding a launch of `program` needs, computed once (at prepare time)."""

    __slots__ = ("program", "buffers", "nparams", "scalars")
    program: Program
    buffers: tuple[Slot, ...]  # the buffer params in param order, then the temporaries
    nparams: int  # how many of `buffers` are params
    scalars: tuple[ScalarSlot, ...]

    def __init__(self, program: Program, buffers: tuple[Slot, ...], nparams: int,
                 scalars: tuple[ScalarSlot, ...]) -> None:
        self._init(program=program, buffers=buffers, nparams=nparams, scalars=scalars)

    @staticmethod
    def of(program: Program) -> "LaunchBinding":
        written = written_buffers(program)
        decls = [p for p in program.params if isinstance(p, BufferParam)] + list(program.temps)
        slots = tuple(Slot(b.name, b.dtype, b.dtype.np, tuple(compile_dim(d, program.symbols) for d in b.shape),
                           b.name in written) for b in decls)
        scalars = tuple(ScalarSlot(p.name, p.dtype, p.dtype.np) for p in program.params if isinstance(p, ScalarParam))
        return LaunchBinding(program, slots, len(decls) - len(program.temps), scalars)

    @property
    def params(self) -> tuple[Slot, ...]:
        return self.buffers[:self.nparams]

    @property
    def temps(self) -> tuple[Slot, ...]:
        return self.buffers[self.nparams:]

    def bind(self, buffers: Mapping[str, np.ndarray], scalars: Mapping[str, Any],
             symbols: Mapping[str, int], owner: Any = None) -> Bound:
        """Every check of a launch, in order: symbols, sizes, buffers, scalars; then the
        temporaries. Nothing is allocated before every argument passed. `owner`: the
        backend launching, when it has device arrays: its own are accepted as buffers."""
        values = self.symbol_values(symbols)
        sizes = self.sizes(values)
        arrays = self.arrays(buffers, sizes, owner)
        converted = self.scalar_values(scalars)
        arrays += self.temporaries(sizes)
        return Bound(arrays, sizes, converted, dict(zip(self.program.symbols, values)), values)

    def symbol_values(self, symbols: Mapping[str, int]) -> tuple[int, ...]:
        """The symbols' values in program order (derived ones computed), each an int in
        the range the verifier assumed (`symbol_value`)."""
        symbols = complete_symbols(self.program.symbols, symbols)
        out = []
        for s in self.program.symbols:
            v = symbols.get(s)
            if type(v) is not int or not 0 <= v <= SYMBOL_MAX:
                v = symbol_value(s, v)
            out.append(v)
        return tuple(out)

    def sizes(self, values: Sequence[int]) -> tuple[int, ...]:
        """Every buffer's element count (params, then temporaries) for these symbol
        values (program order); a negative dimension is an ArgumentError."""
        sizes = []
        for b in self.buffers:
            dims = [eval_dim(d, values) for d in b.shape]
            if any(n < 0 for n in dims):
                raise ArgumentError(f"buffer '{b.name}': shape {dims} has a negative dimension")
            sizes.append(math.prod(dims))
        return tuple(sizes)

    def arrays(self, buffers: Mapping[str, np.ndarray], sizes: Sequence[int],
               owner: Any = None) -> list[np.ndarray]:
        """The caller's arrays in param order, checked (an ndarray subclass as a plain
        ndarray over its memory; a device array of `owner`, the launching backend, as it
        is, and another library's array that `owner.adopt` recognises, as one). Written
        for speed: it runs once per buffer per call."""
        if len(buffers) != self.nparams:
            self._wrong_names(buffers)
        out = []
        for b, size in zip(self.params, sizes):
            a = buffers.get(b.name)
            if type(a) is not np.ndarray:
                if not isinstance(a, (np.ndarray, DeviceArray)) and owner is not None:
                    adopted = owner.adopt(a, f"buffer '{b.name}'")  # another library's array in owner's memory
                    a = a if adopted is None else adopted
                if isinstance(a, DeviceArray):
                    out.append(self._device_array(b, a, size, owner))
                    continue
                if not isinstance(a, np.ndarray):
                    if b.name not in buffers:
                        self._wrong_names(buffers)
                    raise ArgumentError(f"buffer '{b.name}': expected a numpy array of {b.dtype}, got "
                                        f"{type(a).__name__}")
                a = plain_array(f"buffer '{b.name}'", a)  # a subclass's memory as is; a masked array refused
            dtype = a.dtype
            if dtype is not b.np and dtype != b.np:
                raise ArgumentError(f"buffer '{b.name}': expected dtype {b.dtype}, got {dtype}")
            if a.size != size:
                raise ArgumentError(f"buffer '{b.name}': expected {size} elements, got {a.size} (shape {a.shape})")
            flags = a.flags
            if not flags.c_contiguous:
                raise ArgumentError(f"buffer '{b.name}' must be C-contiguous")
            if b.written and not flags.writeable:
                raise ArgumentError(f"buffer '{b.name}' is written by the program but the array is read-only")
            out.append(a)
        return out

    @staticmethod
    def _device_array(b: Slot, a: DeviceArray, size: int, owner: Any) -> DeviceArray:
        """A device array for buffer `b`: `owner`'s own, of the dtype and size (always
        contiguous and writeable: device arrays have no views)."""
        if owner is None or a.backend.name != owner.name:
            raise foreign_device_array(f"buffer '{b.name}'", a, owner)
        if a.dtype != b.np:
            raise ArgumentError(f"buffer '{b.name}': expected dtype {b.dtype}, got {a.dtype}")
        if a.size != size:
            raise ArgumentError(f"buffer '{b.name}': expected {size} elements, got {a.size} (shape {a.shape})")
        return a

    def _wrong_names(self, buffers: Mapping[str, Any]) -> None:
        expected = {b.name for b in self.params}
        unknown, missing = set(buffers) - expected, expected - set(buffers)
        what = (f"has no buffer parameter(s) {', '.join(sorted(unknown))}" if unknown
                else f"needs buffer(s) {', '.join(sorted(missing))}")
        raise ArgumentError(f"program '{self.program.name}' {what}")

    def temporaries(self, sizes: Sequence[int]) -> list[np.ndarray]:
        """The program's temporaries, zeroed, of these sizes (all buffers' sizes, as
        `sizes` gives them); ArgumentError when that is more memory than there is."""
        return [zeroed_temporary(b.name, b.np, size) for b, size in zip(self.temps, sizes[self.nparams:])]

    def scalar_values(self, scalars: Mapping[str, Any]) -> list[np.generic]:
        """One numpy scalar of the declared dtype per scalar param, in declared order:
        one of exactly that type as given, another number converted by the CVT rules."""
        out = []
        for s in self.scalars:
            v = scalars.get(s.name)
            if type(v) is not s.np.type:
                if s.name not in scalars:
                    raise ArgumentError(f"scalar parameter '{s.name}' ({s.dtype}) is missing")
                if not isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating)):
                    raise ArgumentError(f"scalar parameter '{s.name}': expected a number of type {s.dtype}, "
                                        f"got {_show(v)}")
                v = convert_value(v, s.np)
            out.append(v)
        return out

    def accepts(self, values: Sequence[int]) -> tuple["Accepts", list[type]]:
        """What `exact_arguments` holds a launcher's arguments to at these symbol values:
        per buffer param its numpy dtype, shape and whether it is written; per scalar
        param its numpy type."""
        accepts = [(b.np, tuple(eval_dim(d, values) for d in b.shape), b.written) for b in self.params]
        return accepts, [s.np.type for s in self.scalars]


Accepts = list[tuple[np.dtype, tuple[int, ...], bool]]  # per buffer: dtype, shape, written


def exact_arguments(args: tuple, accepts: Accepts, scalar_types: Sequence[type]) -> bool:
    """The `Backend.launcher` contract's test: one exact C-contiguous `ndarray` per
    buffer, of its dtype and shape and writeable if written, then one numpy scalar per
    scalar param, of exactly its type."""
    nbufs = len(accepts)
    if len(args) != nbufs + len(scalar_types):
        return False
    for a, (dtype, shape, written) in zip(args, accepts):
        if type(a) is not np.ndarray or a.dtype != dtype or a.shape != shape:
            return False
        flags = a.flags
        if not flags.c_contiguous or (written and not flags.writeable):
            return False
    return all(type(v) is t for v, t in zip(args[nbufs:], scalar_types))
