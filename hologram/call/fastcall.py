"""The fast path of a kernel call: every check of hologram.call.args, made cheap.

A `Kernel` remembers the last call that passed the full checks as a `Hit`: the shapes
of its input arrays, the output shapes they imply, and a run prepared by the backend
for the shape symbols they bind (`Backend.launcher`, or `plain_run` around `launch`).
A later call goes through a function generated for the kernel's signature
(`make_fast`): it binds positional and keyword arguments to the inputs, converts
scalars that convert exactly, allocates or unpacks the outputs (`out=` one array or a
tuple/list of them, None in it allocating that output), and hands everything to the run, which accepts only arrays of
exactly the remembered dtypes and shapes (C-contiguous, outputs writeable) and scalars
of exactly the declared types. Equal shapes mean equal symbols, output shapes,
empty-reduction verdict and launch geometry, so nothing else needs re-deriving; and
such arguments are what `cast=True` would make of them, so `cast=True` is no reason to
decline. Whatever either does not recognise (an unknown, duplicated or missing
argument, a list, another shape, a view, a Python int for a float parameter) is a miss,
and the caller runs the full path, which gives the full path's results and messages.
The fast path never raises on a bad argument; it only declines.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from hologram.backend.binding import exact_arguments
from hologram.call.args import unalias
from hologram.call.mapping import mmap_behind
from hologram.compiler.signature import Signature
from hologram.core.types import DType
from hologram.core.values import Value
from hologram.isa.program import BufferParam, Program, ScalarParam

MISS = object()  # what a fast call returns when the full path must decide

Run = Callable[..., None]  # run(*buffers, *scalars), each in the program's param order


class Hit(Value, eq=False):
    """What one full call established, keyed by its input shapes (signature order)."""

    __slots__ = ("shapes", "out_shapes", "run", "symbols")
    shapes: tuple[tuple[int, ...], ...]
    out_shapes: tuple[tuple[int, ...], ...]
    run: Run
    symbols: Mapping[str, int]  # what a traced launch reports (hologram.call.tracing)

    def __init__(self, shapes: tuple[tuple[int, ...], ...], out_shapes: tuple[tuple[int, ...], ...], run: Run,
                 symbols: Mapping[str, int] | None = None) -> None:
        self._init(shapes=shapes, out_shapes=out_shapes, run=run, symbols={} if symbols is None else symbols)


def program_order(sig: Signature, program: Program) -> tuple[list[str], list[str]] | None:
    """The program's buffer and scalar param names, when they are exactly the signature's
    arrays + outputs and scalars, and the inputs are read-only buffers (else None: the
    fast path is not used). The fast path checks writeability of outputs only."""
    bufs = [p.name for p in program.params if isinstance(p, BufferParam)]
    inputs = {p.name for p in sig.inputs}
    if any(p.role != "in" for p in program.params if isinstance(p, BufferParam) and p.name in inputs):
        return None
    scals = [p.name for p in program.params if isinstance(p, ScalarParam)]
    arrays = {p.name for p in sig.inputs if p.kind != "scalar"} | set(sig.output_names)
    scalars = {p.name for p in sig.inputs if p.kind == "scalar"}
    if sorted(bufs) != sorted(arrays) or len(bufs) != len(arrays) or sorted(scals) != sorted(scalars):
        return None
    return bufs, scals


def plain_run(backend: Any, executable: Any, sig: Signature, order: tuple[list[str], list[str]],
              symbols: Mapping[str, int], shapes: Mapping[str, tuple[int, ...]]) -> Run:
    """A `Run` through `backend.launch`, for backends without a `launcher`: the same
    contract (it declines, returning False, any argument that is not an exact ndarray of
    the declared dtype and of `shapes[name]`, C-contiguous, writeable if an output, or a
    scalar not of the declared numpy type), and it copies inputs that overlap outputs
    first, as a full call does."""
    bufs, scals = order
    inputs = [p.name for p in sig.inputs if p.kind != "scalar"]
    outputs = sig.output_names
    dtypes = {p.name: p.dtype.np for p in (*sig.inputs, *sig.outputs)}
    accepts = [(dtypes[n], shapes[n], n in outputs) for n in bufs]
    scalar_types = [dtypes[n].type for n in scals]
    nbufs, symbols = len(bufs), dict(symbols)

    def run(*args: Any) -> bool | None:
        if not exact_arguments(args, accepts, scalar_types):
            return False
        named = dict(zip(bufs, args[:nbufs]))
        named.update(unalias({n: named[n] for n in inputs}, [named[n] for n in outputs]))
        backend.launch(executable, named, dict(zip(scals, args[nbufs:])), symbols)
        return None
    return run


def _scalar_range(d: DType) -> tuple[type, Any, Any]:
    """The Python type accepted for a scalar of `d` without conversion questions, and the
    range in which numpy converts it exactly as `convert_scalar` does (no overflow)."""
    if d.is_float:
        hi = float(np.finfo(d.np).max)
        return float, -hi, hi
    if d.is_bool:
        return bool, False, True
    return int, d.min, d.max


def _argument_binding(names: tuple[str, ...], values: list[str]) -> list[str]:
    """Source lines that set the locals `values` to the inputs `names` (declared order)
    from `args` and `kw` (the call's positional tuple and keyword dict), or return MISS.

    With p positional arguments, a call binds when `kw` has exactly the names of inputs
    p, p+1, ...: equal counts and every one of those names present leave no room for an
    unknown or duplicated keyword, which are the full path's to report. One branch per
    p, so binding costs a length comparison and one dict lookup per keyword.

    Why not let Python bind them, with the input names as parameters of the generated
    function: forwarding `*args, **kwargs` to it cost every call ~0.2 µs, positional
    ones included (measured on the 16-element axpy, ~0.45 µs in all), and a duplicated
    argument would raise Python's TypeError instead of declining."""
    n = len(names)
    if not n:
        return ["    if kw or args: return MISS"]
    all_positional = [f"    elif len(args) != {n}: return MISS",
                      f"    else: {', '.join(values)}, = args"]
    lines = ["    if kw:",
             "        p = len(args)",
             f"        if p + len(kw) != {n}: return MISS",
             "        try:"]
    for p in range(n):  # 0 <= p < n: kw is not empty and p + len(kw) == n
        by_name = f"{', '.join(values[p:])}, = {', '.join(f'kw[{name!r}]' for name in names[p:])},"
        by_position = f"{', '.join(values[:p])}, = args; " if p else ""
        lines.append(f"            {'elif' if p else 'if'} p == {p}: {by_position}{by_name}")
    lines += ["        except KeyError: return MISS",
              *all_positional]
    return lines


def make_fast(sig: Signature, order: tuple[list[str], list[str]], result: type | None,
              allocate: Callable[[tuple[int, ...], DType], np.ndarray], cell: list,
              launch: Callable[..., Any] | None = None) -> Callable:
    """`fast(args, kw, out, cast)`, the arguments of `Kernel.__call__` as it received them
    (positional tuple, keyword dict): the call's result, or MISS. `cell[0]` holds the
    current Hit (or None); the function reads it once per call, so replacing it is
    thread-safe.

    Keywords are bound to positions by the generated code (`_argument_binding`), so any
    mix of positional and keyword arguments is a fast call. `cast` may be True or False:
    every argument the fast path accepts is already exactly what `cast=True` would make
    of it (the full path returns such an array or scalar unchanged), so there is nothing
    to cast; any other value of `cast` is left to the full path.

    The function is generated source, specialized to the signature (unrolled per
    argument, no loops over parameter records): on this path every few tens of
    nanoseconds count. The arrays' checks are the run's (natively, on cpu_llvm).

    With `launch`, the function calls `launch(hit, *arguments)` instead of
    `hit.run(*arguments)` (the traced variant, hologram.call.tracing)."""
    ns: dict[str, Any] = {"MISS": MISS, "ndarray": np.ndarray, "CELL": cell, "alloc": allocate,
                          "RESULT": result, "may_share": np.may_share_memory, "LAUNCH": launch, "MAPPED": mmap_behind}
    bufs, scals = order
    n = len(sig.inputs)
    names = [f"v{i}" for i in range(n)]
    lines = ["def fast(args, kw, out, cast):",
             "    if cast is not False and cast is not True: return MISS",
             *_argument_binding(sig.input_names, names),
             "    h = CELL[0]",
             "    if h is None: return MISS"]
    local: dict[str, str] = {}
    for i, p in enumerate(sig.inputs):
        v = names[i]
        local[p.name] = v
        if p.kind == "scalar":
            pytype, lo, hi = _scalar_range(p.dtype)
            ns.update({f"T{i}": p.dtype.np.type, f"P{i}": pytype, f"LO{i}": lo, f"HI{i}": hi})
            lines += [f"    t = type({v})",
                      f"    if t is not T{i}:",
                      f"        if t is P{i} and LO{i} <= {v} <= HI{i}: {v} = T{i}({v})",
                      "        else: return MISS"]
    outs = [f"o{j}" for j in range(len(sig.outputs))]
    for j, p in enumerate(sig.outputs):
        local[p.name] = outs[j]
        ns[f"OT{j}"] = p.dtype
    if outs:
        lines.append("    if out is None:")
        lines += [f"        {o} = alloc(h.out_shapes[{j}], OT{j})" for j, o in enumerate(outs)]
        lines.append("    else:")
        if len(outs) == 1:
            lines += ["        if type(out) is ndarray: o0 = out",
                      "        elif (type(out) is tuple or type(out) is list) and len(out) == 1: o0 = out[0]",
                      "        else: return MISS"]
        else:
            lines += [f"        if (type(out) is not tuple and type(out) is not list) or len(out) != {len(outs)}:",
                      "            return MISS",
                      f"        {', '.join(outs)}, = out"]
        lines += [f"        if {o} is None: {o} = alloc(h.out_shapes[{j}], OT{j})"  # numpy's None: allocate it
                  for j, o in enumerate(outs)]
        for o in outs:  # an output in a file mapping may overlap an input through another mapping of the
            # file, which the run's address checks cannot see: the full path compares files (mapping.may_share).
            # An array owning its memory, or a view of one (numpy points a view at the owner), is not mapped.
            lines.append(f"        if type({o}) is ndarray and (b := {o}.base) is not None and (type(b) is not ndarray"
                         f" or b.base is not None) and MAPPED({o}) is not None: return MISS")
        for j in range(len(outs)):  # overlapping outputs: the full path refuses them
            for i in range(j):
                lines.append(f"        if type({outs[j]}) is not ndarray or type({outs[i]}) is not ndarray: "
                             "return MISS")
                lines.append(f"        if {outs[j]}.size and {outs[i]}.size and may_share({outs[j]}, {outs[i]}):"
                             " return MISS")
    run = "h.run(" if launch is None else "LAUNCH(h, "
    lines.append(f"    if {run}{', '.join(local[name] for name in bufs + scals)}) is not None: return MISS")
    if not outs:
        lines.append("    return None")
    elif result is None:
        lines.append("    return o0")
    else:
        lines.append(f"    return RESULT({', '.join(outs)})")
    exec(compile("\n".join(lines), f"<hologram fast call {sig.name}>", "exec"), ns)  # noqa: S102 - our own source
    return ns["fast"]
