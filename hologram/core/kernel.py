"""`Kernel`: a compiled kernel you call like a function, and `Library`: several of them.

A `Kernel` pairs one compiled artifact (`Compiled`: the document, its IR, its verified
program) with a backend. The backend is resolved, and the program prepared on it, at
the first call; `kernel.on(name)` gives the same kernel on another backend, sharing
the artifact (each backend prepares it once, lazily).

A call checks everything before launching (see hologram.core.args) and copies nothing
unless asked: outputs are allocated by the backend, or the caller's `out=` arrays are
written in place. If an `out=` array overlaps an input, that input is copied first so
the result is the same as without aliasing.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Callable, Iterator, Mapping

import attrs
import numpy as np

from .. import dsl
from ..dsl.document import KernelDef
from .args import (Signature, bind_arguments, bind_direct, bind_symbols, check_array, check_out,
                   check_reductions, concrete_shape, convert_scalar, direct_binding, identityless_reductions,
                   unalias)
from .asm import format_program
from .backend import Backend
from .errors import ArgumentError, KernelNotFoundError, did_you_mean
from .ir import KernelIR, format_kernel
from .isa import Program
from .plugins import get_backend


@attrs.frozen(eq=False)
class Compiled:
    """One kernel through the whole pipeline. `result` is the namedtuple type returned
    when the kernel has several outputs (fields named after the outputs)."""

    kdef: KernelDef
    kir: KernelIR
    program: Program
    signature: Signature = attrs.field()
    result: type | None = attrs.field()
    reductions: tuple = attrs.field()  # min/max/argmin/argmax, checked for empty extents per call
    binding: tuple | None = attrs.field()  # a direct shape-binding plan, or None

    @reductions.default
    def _reductions(self) -> tuple:
        return identityless_reductions(self.kir)

    @binding.default
    def _binding(self) -> tuple | None:
        return direct_binding(self.signature.inputs)

    @signature.default
    def _signature(self) -> Signature:
        return Signature.of(self.kir)

    @result.default
    def _result(self) -> type | None:
        names = self.signature.output_names
        if len(names) < 2:
            return None
        typename = self.kir.name if self.kir.name.isidentifier() else "Outputs"
        return collections.namedtuple(typename, names, rename=True)


# The text forms of a kernel, one per pipeline stage (`hologram compile --emit`). The
# body parser is only loaded when asked for (hologram.dsl loads it lazily).
EMITTERS: dict[str, Callable[[Compiled], str]] = {
    "ast": lambda c: dsl.format_ast(dsl.parse_body(c.kdef)),
    "ir": lambda c: format_kernel(c.kir),
    "asm": lambda c: format_program(c.program),
}


class Kernel:
    """A compiled kernel. Call it with its inputs (positional or by name, in declared
    order); it returns its output (or a namedtuple of them). See docs/api.md."""

    __slots__ = ("_c", "_backend_name", "_ready", "_family", "_lock")

    def __init__(self, compiled: Compiled, backend: str | None = None,
                 _family: dict[str | None, "Kernel"] | None = None):
        self._c = compiled
        self._backend_name = backend
        self._ready: tuple[Backend, Any] | None = None
        self._family = {} if _family is None else _family
        self._family.setdefault(backend, self)
        self._lock = threading.Lock()

    # -- what it is ---------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._c.kir.name

    @property
    def version(self) -> str:
        return self._c.kir.version

    @property
    def summary(self) -> str:
        return self._c.kdef.summary

    @property
    def signature(self) -> Signature:
        """Inputs, outputs and shape symbols; `str()` gives `f(x: f32[n]) -> y: f32[n]`."""
        return self._c.signature

    @property
    def kdef(self) -> KernelDef:
        return self._c.kdef

    @property
    def ir(self) -> KernelIR:
        return self._c.kir

    @property
    def program(self) -> Program:
        return self._c.program

    def emit(self, kind: str) -> str:
        """The kernel's text form at one stage: 'ast', 'ir' or 'asm'."""
        fn = EMITTERS.get(kind)
        if fn is None:
            raise ArgumentError(f"cannot emit {kind!r}{did_you_mean(kind, EMITTERS)}; "
                                f"expected one of {', '.join(EMITTERS)}")
        return fn(self._c)

    # -- where it runs --------------------------------------------------------------
    @property
    def backend(self) -> Backend:
        """The backend this kernel runs on (resolved at the first call, then fixed)."""
        return self._prepare()[0]

    def on(self, backend: str) -> "Kernel":
        """This kernel on another backend (validated now, prepared at its first call)."""
        get_backend(backend)
        found = self._family.get(backend)
        return found if found is not None else Kernel(self._c, backend, self._family)

    def _prepare(self) -> tuple[Backend, Any]:
        ready = self._ready
        if ready is None:
            with self._lock:
                if self._ready is None:
                    b = get_backend(self._backend_name)
                    self._ready = (b, b.prepare(self._c.program))
                ready = self._ready
        return ready

    # -- calling ----------------------------------------------------------------------
    def __call__(self, *args: Any, out: Any = None, cast: bool = False, **kwargs: Any) -> Any:
        c = self._c
        sig, name = c.signature, c.signature.name
        values = bind_arguments(sig, args, kwargs)
        arrays: dict[str, np.ndarray] = {}
        scalars: dict[str, np.generic] = {}
        for p in sig.inputs:
            if p.kind == "scalar":
                scalars[p.name] = convert_scalar(name, p, values[p.name], cast)
            else:
                arrays[p.name] = check_array(name, p, values[p.name], cast)
        symbols = None if c.binding is None else bind_direct(c.binding, arrays, sig.symbols)
        if symbols is None:
            symbols = bind_symbols(name, sig.inputs, arrays, sig.symbols)
        shapes = [concrete_shape(name, p, symbols) for p in sig.outputs]
        check_reductions(name, c.reductions, symbols)
        backend, executable = self._prepare()
        if out is None:
            outs = tuple(backend.allocate(shape, p.dtype) for p, shape in zip(sig.outputs, shapes))
        else:
            outs = check_out(name, sig.outputs, out, shapes)
            arrays = unalias(arrays, outs)
        backend.launch(executable, {**arrays, **dict(zip(sig.output_names, outs))}, scalars, symbols)
        if c.result is not None:
            return c.result(*outs)
        return outs[0] if outs else None

    def __repr__(self) -> str:
        where = self._backend_name or "default backend"
        return f"<Kernel {self.signature} on {where}>"


class Library(Mapping[str, Kernel]):
    """The kernels of one document (or bundle) by name: `lib["gemm"]`, `lib.gemm`,
    `for name in lib`, `lib.items()`. A kernel whose name shadows a Mapping method
    (`items`, `get`, `on`...) is reached with `lib[name]`."""

    __slots__ = ("_kernels",)

    def __init__(self, kernels: Mapping[str, Kernel]):
        self._kernels = dict(kernels)

    def __getitem__(self, name: str) -> Kernel:
        try:
            return self._kernels[name]
        except KeyError:
            raise self._missing(name) from None

    def __getattr__(self, name: str) -> Kernel:
        if name.startswith("_"):  # includes _kernels itself while unpickling
            raise AttributeError(name)
        try:
            return self._kernels[name]
        except KeyError:
            raise self._missing(name) from None

    def _missing(self, name: str) -> KernelNotFoundError:
        have = ", ".join(self._kernels) or "none"
        return KernelNotFoundError(f"no kernel named {name!r}{did_you_mean(name, self._kernels)}",
                                   hint=f"kernels here: {have}")

    def __iter__(self) -> Iterator[str]:
        return iter(self._kernels)

    def __len__(self) -> int:
        return len(self._kernels)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | {n for n in self._kernels if n.isidentifier()})

    def on(self, backend: str) -> "Library":
        """Every kernel of the library on `backend`."""
        return Library({n: k.on(backend) for n, k in self._kernels.items()})

    def __repr__(self) -> str:
        return f"<Library of {len(self)} kernels: {', '.join(self._kernels)}>"
