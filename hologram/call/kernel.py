"""`Kernel`: a compiled kernel you call like a function, and `Library`: several of them.

A `Kernel` pairs one compiled artifact (`Compiled`: the document, its IR, its verified
program) with a backend. The backend is resolved, and the program prepared on it, at
the first call; `kernel.on(name)` gives the same kernel on another backend, sharing
the artifact (each backend prepares it once, lazily).

A call checks everything before launching (see hologram.call.args) and copies nothing
unless asked: outputs are allocated by the backend (in its device memory when an input
is a device array of it), or the caller's `out=` arrays are written in place. If an
`out=` array overlaps an input, that input is copied first so the result is the same as
without aliasing.
"""

from __future__ import annotations

import hashlib
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from hologram.backend.base import Backend
from hologram.call.args import (adopt_foreign, allocate_outputs, bind_arguments, bind_direct, bind_symbols,
                                check_array, check_device_owners, check_out, check_reductions, complete_symbols,
                                concrete_shape, convert_scalar, unalias)
from hologram.call.fastcall import MISS, Hit, make_fast, plain_run, program_order
from hologram.call.loops import LoopCall, core_views, loop_call, output_shapes
from hologram.compiler.driver import Compiled, compile_kdef
from hologram.compiler.signature import Signature
from hologram.compiler.source_ir import EncodedIR
from hologram.core import forks, trace
from hologram.core.errors import ArgumentError, HologramError, KernelNotFoundError, did_you_mean, in_words, meant
from hologram.core.lru import LRUCache
from hologram.core.types import Affine
from hologram.isa.encoding import decode
from hologram.isa.program import BufferParam, Program
from hologram.registry.lookups import collection_adapter, get_backend

if TYPE_CHECKING:  # the compiler's values: a kernel from a bundle runs without them
    from hologram.dsl.document import KernelDef
    from hologram.ir import KernelIR

# The text forms of a kernel, one per pipeline stage (`hologram compile --emit`).
def _ast(c: Compiled) -> str:
    from hologram.dsl.ast import format_ast
    from hologram.dsl.parser import parse_body  # the body parser (lark) loads only when asked for

    return format_ast(parse_body(c.source_definition()))


def _asm(c: Compiled) -> str:
    from hologram.isa.asm import format_program

    return format_program(c.program)


EMITTERS: dict[str, Callable[[Compiled], str]] = {
    "ast": _ast,
    "ir": Compiled.ir_form,
    "asm": _asm,
}


def backend_forms(backend: Backend) -> dict[str, str]:
    """The text forms `backend` offers beyond the core ones (form -> description)."""
    return {str(k): str(v) for k, v in backend.text_forms.items() if k not in EMITTERS and k != "stats"}


def form_choices(kind: str, core: Sequence[str], backend: Backend) -> str:
    """The rest of the sentence saying `kind` is no text form: ` (did you mean 'asm'?):
    the text forms are ast, ir and asm, and backend 'cpu_llvm' adds llvm, llvm-opt and
    native` (`core`: the forms every backend has here)."""
    forms = list(backend_forms(backend))
    adds = f", and backend {backend.name!r} adds {in_words(forms)}" if forms else \
        f" (backend {backend.name!r} adds none)"
    return f"{meant(kind, [*core, *forms])}: the text forms are {in_words(core)}{adds}"


class Kernel:
    """A compiled kernel. Call it with its inputs (positional or by name, in declared
    order); it returns its output (or a namedtuple of them). See docs/api.md."""

    __slots__ = ("_c", "_backend_name", "_ready", "_family", "_lock", "_fast", "_hit", "_loops", "_traced",
                 "__weakref__")

    def __init__(self, compiled: Compiled, backend: str | None = None,
                 _family: dict[str | None, "Kernel"] | None = None):
        self._c = compiled
        self._backend_name = backend
        self._ready: tuple[Backend, Any] | None = None
        self._family = {} if _family is None else _family
        self._family.setdefault(backend, self)
        self._lock = threading.Lock()  # held while preparing: a forked child gets a free one
        forks.renew_in_child(self, "_lock")
        self._fast: Callable | None = None  # the generated fast path (hologram.call.fastcall)
        # [the last fully checked call the fast path matches against, {input shapes: Hit}
        # of recent ones, so alternating shapes does not rebuild launchers]
        self._hit: list = [None, {}]
        self._loops: dict[tuple, tuple[Any, Any]] = {}  # loop pattern -> (Batched, executable)
        self._traced: Callable | None = None  # the fast path with its launch traced (hologram.call.tracing)

    # -- what it is ---------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._c.signature.name

    @property
    def version(self) -> str:
        return self._c.version

    @property
    def summary(self) -> str:
        return self._c.summary

    @property
    def signature(self) -> Signature:
        """Inputs, outputs and shape symbols; `str()` gives `f(x: f32[n]) -> y: f32[n]`."""
        return self._c.signature

    @property
    def kdef(self) -> KernelDef:
        """The kernel's definition (for a kernel from a bundle, its source translated now)."""
        return self._c.source_definition()

    @property
    def ir(self) -> KernelIR | None:
        """The IR after the passes; None for a kernel from a bundle (`emit("ir")` has its text)."""
        return self._c.kir

    @property
    def program(self) -> Program:
        return self._c.program

    def emit(self, kind: str) -> str:
        """The kernel's text form at one stage: 'ast', 'ir', 'asm', or a form the kernel's
        backend offers (`backend_forms`; cpu_llvm: 'llvm', 'llvm-opt', 'native')."""
        fn = EMITTERS.get(kind)
        if fn is not None:
            return fn(self._c)
        backend = get_backend(self._backend_name)
        if kind not in backend_forms(backend):
            raise ArgumentError(f"cannot emit {kind!r}{form_choices(kind, tuple(EMITTERS), backend)}")
        return backend.emit(self._c.program, kind)

    def stats(self, **symbols: int) -> dict[str, Any]:
        """What the optimizer does to this kernel: {"O0": Stats, "O1": ..., "O2": ...}
        (plus "custom" when it was compiled with `passes=`), each the stages, IR
        operations, instructions, registers and bytes a launch reads and writes (see
        hologram.passes.stats). Byte counts are formulas in the shape symbols; the
        symbols given here (`n=1024`) are substituted."""
        from hologram.passes.stats import measure  # the cost model: only for this question

        known = self._c.signature.symbols
        for name, value in symbols.items():
            if name not in known:
                raise ArgumentError(f"{self.name} has no shape symbol {name!r}{did_you_mean(name, known)}",
                                    hint=f"its symbols: {', '.join(known) or 'none'}")
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ArgumentError(f"shape symbol {name} must be an integer >= 0, got {value!r}")
        from hologram.passes.api import PIPELINES
        from hologram.registry.pipelines import resolve

        pipelines = [resolve(level) for level in PIPELINES]
        if self._c.pipeline is not None and self._c.pipeline.name not in PIPELINES:
            pipelines.append(self._c.pipeline)
        out = {}
        for pipeline in pipelines:
            c = self._c if pipeline == self._c.pipeline else compile_kdef(self._c.source_definition(), pipeline)
            out[pipeline.name] = measure(c.kir, c.program).bind({k: int(v) for k, v in symbols.items()})
        return out

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
                    with trace.span(f"prepare {self.name}", "prepare", kernel=self.name, backend=b.name):
                        self._ready = (b, _prepare(b, self._c))
                ready = self._ready
        return ready

    # -- calling ----------------------------------------------------------------------
    def __call__(self, /, *args: Any, out: Any = None, cast: bool = False, **kwargs: Any) -> Any:
        # (`self` positional-only: an input may be named self)
        fast = self._fast
        if fast is not None:  # positional, keyword or mixed: the fast path binds them itself
            result = fast(args, kwargs, out, cast)
            if result is not MISS:
                return result
        return self._call(args, out, cast, kwargs)

    def _call(self, args: tuple, out: Any, cast: bool, kwargs: dict[str, Any]) -> Any:
        """The full path: every check, with the messages of hologram.call.args."""
        c = self._c
        # a bundle's program is decoded, held to the manifest and verified before the
        # manifest's signature is trusted to check these arguments
        c.program  # noqa: B018
        sig, name = c.signature, c.signature.name
        values = bind_arguments(sig, args, kwargs)
        adapter = collection_adapter([*values.values(), *_given(out)])
        if adapter is not None:  # lazy arrays of another library (Dask): its adapter builds the call
            return adapter.call(self, values, out, cast, False)
        arrays: dict[str, np.ndarray] = {}
        scalars: dict[str, np.generic] = {}
        for p in sig.inputs:
            if p.kind == "scalar":
                scalars[p.name] = convert_scalar(name, p, values[p.name], cast)
            else:
                v = values[p.name]
                if type(v) is not np.ndarray:  # another library's device array: the backend's, no copy
                    v = adopt_foreign(name, p, v, self._prepare()[0])
                arrays[p.name] = check_array(name, p, v, cast)
        symbols = None if c.binding is None else bind_direct(c.binding, arrays, sig.symbols)
        if symbols is None:
            symbols = bind_symbols(name, sig.inputs, arrays, sig.symbols)
        symbols = complete_symbols(c.program.symbols, symbols)
        shapes = [concrete_shape(name, p, symbols) for p in sig.outputs]
        check_reductions(name, c.reductions, symbols)
        backend, executable = self._prepare()
        arrays, outs = _outputs(name, sig, backend, arrays, out, shapes, symbols)
        self._remember(arrays, tuple(shapes), symbols)
        _launch(self.name, c.program, backend, executable, {**arrays, **dict(zip(sig.output_names, outs))}, scalars,
                symbols)
        if c.result is not None:
            return c.result(*outs)
        return outs[0] if outs else None

    def map(self, /, *args: Any, out: Any = None, cast: bool = False, **kwargs: Any) -> Any:
        """The kernel mapped over its arguments' leading (loop) dimensions, as a numpy
        gufunc: `softmax.map(x)` with `x` of shape `(4, 7, n)` is the 28 rows' softmaxes,
        in one launch (docs/api.md, "Loop dimensions"). Arguments without extra
        dimensions are shared by every item; with none anywhere, it is a plain call."""
        c = self._c
        c.program  # noqa: B018 - a bundle's program is verified before its signature is trusted
        sig = c.signature
        values = bind_arguments(sig, args, kwargs)
        adapter = collection_adapter([*values.values(), *_given(out)])
        if adapter is not None:
            return adapter.call(self, values, out, cast, True)
        for p in sig.inputs:  # another library's device arrays first, as `_call` takes them (their loop ranks)
            v = values[p.name]
            if p.kind != "scalar" and type(v) is not np.ndarray:
                values[p.name] = adopt_foreign(sig.name, p, v, self._prepare()[0])
        loop = loop_call(sig, values, cast)
        if loop is None:
            return self._call(args, out, cast, kwargs)
        return self._call_loops(loop, out, cast)

    def _call_loops(self, loop: LoopCall, out: Any, cast: bool) -> Any:
        """A call whose arguments have loop dimensions (hologram.call.loops): the
        kernel over every item, in one launch of its batched program."""
        c = self._c
        sig, name = c.signature, c.signature.name
        arrays: dict[str, np.ndarray] = {}
        scalars: dict[str, np.generic] = {}
        for p in sig.inputs:
            v = loop.values[p.name]
            if p.name in loop.full or p.name in loop.tabled:
                arrays[p.name] = v
            elif p.kind == "scalar":
                scalars[p.name] = convert_scalar(name, p, v, cast)
            else:
                arrays[p.name] = check_array(name, p, v, cast)
        symbols = bind_symbols(name, sig.inputs, core_views(sig, loop), sig.symbols)
        core = complete_symbols(c.program.symbols, symbols)
        check_reductions(name, c.reductions, core)
        shapes = output_shapes(loop, [concrete_shape(name, p, core) for p in sig.outputs])
        backend, batched, executable = self._prepare_loops(loop.pattern())
        symbols = {**symbols, batched.count: loop.count}
        for param, table in batched.tables:
            arrays[table], symbols[dict(batched.items)[param]] = loop.tabled[param]
        arrays, outs = _outputs(name, sig, backend, arrays, out, shapes, symbols)
        _launch(self.name, batched.program, backend, executable, {**arrays, **dict(zip(sig.output_names, outs))},
                scalars, symbols)
        if c.result is not None:
            return c.result(*outs)
        return outs[0] if outs else None

    def _prepare_loops(self, pattern: tuple[frozenset[str], frozenset[str]]) -> tuple[Backend, Any, Any]:
        """The batched program for one pattern of loop dimensions, prepared on this
        kernel's backend (once per pattern)."""
        backend, _ = self._prepare()
        found = self._loops.get(pattern)
        if found is None:
            from hologram.passes.isa_batch import batched  # the rewrite: only for calls that map

            with self._lock:
                b = batched(self._c.program, *pattern)
                backend.check_covers(b.program)
                found = self._loops[pattern] = (b, backend.prepare(b.program))
        return backend, found[0], found[1]

    def _remember(self, arrays: Mapping[str, np.ndarray], out_shapes: tuple, symbols: Mapping[str, int]) -> None:
        """Make the call just checked the fast path's reference: same input shapes, same
        symbols, so the same launch. Some programs never get a fast path (their buffer
        params are not the signature's arrays): then nothing is kept. A launcher the
        backend cannot make is no fast path either; its `launch` reports why."""
        key = tuple(a.shape for a in arrays.values())
        recent = self._hit[1]
        if key in recent:
            self._hit[0] = recent[key]
            return
        sig = self._c.signature
        backend, executable = self._prepare()
        order = program_order(sig, self._c.program)
        if order is None:
            return
        shapes = {name: a.shape for name, a in arrays.items()}
        shapes.update(zip(sig.output_names, out_shapes))
        program_shapes = {p.name: tuple(Affine.of(d).evaluate(symbols) for d in p.shape)
                          for p in self._c.program.params if isinstance(p, BufferParam)}
        if program_shapes != shapes:  # a launcher checks the program's shapes; they must be the call's
            return
        try:
            run = backend.launcher(executable, symbols)
        except HologramError:
            return
        if run is None:
            run = plain_run(backend, executable, sig, order, symbols, shapes)
        hit = Hit(key, out_shapes, run, symbols)
        if len(recent) >= 8:
            recent.clear()
        recent[key] = self._hit[0] = hit
        if self._fast is None:
            self._fast = make_fast(sig, order, self._c.result, backend.allocate, self._hit)

    def __repr__(self) -> str:
        where = self._backend_name or "default backend"
        return f"<Kernel {self.signature} on {where}>"

    def __dask_tokenize__(self) -> tuple:
        """Dask's token: what the kernel computes and where it runs, so two graphs calling
        equal kernels share their tasks (hologram.dask)."""
        return ("hologram.Kernel", self._c.encoded[1], str(self._c.signature), self._backend_name)

    # -- pickling -------------------------------------------------------------------
    def __reduce__(self) -> tuple:
        """A kernel travels as its program's encoding and its interface: nothing that
        needs the document, the bundle file or a compiler on the other side
        (multiprocessing, Dask workers). The first kernel unpickled per (program,
        interface, backend) in a process is the one every later copy returns, so it is
        prepared once per process. The object code a trusted bundle shipped with it
        travels too: a worker runs it as the process that loaded the bundle would (a
        pickle is code its receiver runs anyway), and compiles nothing."""
        c = self._c
        data, digest = c.encoded
        native = {name: tuple(dict(n) for n in found) for name, found in c.native.items()}
        return (_unpickle, (data, digest, c.signature, c.version, c.summary,
                            c.pipeline_name, c.reductions, c.ir_form(), c.kdef, self._backend_name,
                            c.encoded_source_ir(), native))


def _given(out: Any) -> tuple:
    return out if isinstance(out, (tuple, list)) else (out,)


def _outputs(name: str, sig: Signature, backend: Backend, arrays: dict[str, Any], out: Any,
             shapes: Sequence[tuple[int, ...]], symbols: Mapping[str, int]) -> tuple[dict[str, Any], tuple]:
    """The call's outputs: the checked `out=` arrays, the rest allocated by the backend
    (on its device when any input is one of its device arrays: check_device_owners);
    and the inputs, those an output overlaps copied (`unalias`)."""
    given = None if out is None else check_out(name, sig.outputs, out, shapes)
    on_device = check_device_owners(name, backend, arrays, sig.outputs, given)
    allocate = backend.allocate_device if on_device else backend.allocate
    outs = allocate_outputs(name, sig.outputs, shapes, symbols, allocate, given)
    return (arrays if given is None else unalias(arrays, outs)), outs


def _launch(name: str, program: Program, backend: Backend, executable: Any, buffers: dict[str, np.ndarray],
            scalars: dict[str, Any], symbols: Mapping[str, int]) -> None:
    """The full path's launch; while a trace records, as a span (~20 ns of a ~15 µs call)."""
    if trace.recorder is None:
        backend.launch(executable, buffers, scalars, symbols)
    else:
        from hologram.call.tracing import traced_launch

        traced_launch(name, program, backend, executable, buffers, scalars, symbols)


def _prepare(backend: Backend, c: Compiled) -> Any:
    """The backend's executable for `c`: from object code a trusted bundle shipped, when
    the backend takes it and it fits this CPU; else prepared from the program."""
    backend.check_covers(c.program)
    natives = c.native.get(backend.name)
    if natives:
        exe = backend.prepare_native(c.program, natives)
        if exe is not None:
            return exe
    return backend.prepare(c.program)


# Kernels unpickled in this process, by (program sha256, signature, version, backend): the
# same kernel sent again is the same, already prepared, object (Kernel.__reduce__).
_UNPICKLED: LRUCache[tuple, "Kernel"] = LRUCache(256)


def _unpickle(data: bytes, digest: str, signature: Signature, version: str, summary: str, pipeline_name: str,
              reductions: tuple, ir_text: str, kdef: KernelDef | None, backend: str | None,
              source_ir: bytes | None = None, native: Mapping[str, tuple] | None = None) -> "Kernel":
    key = (digest, signature, version, backend)
    kernel = _UNPICKLED.get(key)
    if kernel is None:
        if hashlib.sha256(data).hexdigest() != digest:
            raise HologramError(f"a pickled kernel {signature.name!r} is corrupt: its program does not match its hash")
        ir = None if source_ir is None else EncodedIR(source_ir, signature, f"a pickled kernel {signature.name!r}")
        compiled = Compiled.stored(decode(data), signature, version, summary, pipeline_name, reductions, kdef=kdef,
                                   source_ir=ir, ir_text=ir_text, native=native)  # verified when prepared
        kernel = Kernel(compiled, backend)
        _UNPICKLED.put(key, kernel)
    return kernel


def forget_unpickled() -> None:
    """Forget the kernels unpickled in this process (hologram.clear_cache)."""
    _UNPICKLED.clear()


class Library(Mapping[str, Kernel]):
    """The kernels of one document (or bundle) by name: `lib["gemm"]`, `lib.gemm`,
    `for name in lib`, `lib.items()`. A kernel whose name shadows a Mapping method
    (`items`, `get`, `on`...) or an attribute below is reached with `lib[name]`.

    A bundle's library says what it is: `name`, `version` (its manifest's), `path` (the
    file it was read from; None when built in memory) and `trusted` (whether the
    bundle's native code may run). A document's library has None for the first three
    and `trusted` False."""

    # `lib.gemm` is an instance attribute, found by the ordinary lookup: reaching a kernel
    # through __getattr__ costs ~1 µs (the failed lookup raises first), twice a fast call
    __slots__ = ("_kernels", "_bundle", "__dict__")

    def __init__(self, kernels: Mapping[str, Kernel],
                 bundle: tuple[str, str, str | None, bool] | None = None):
        """`bundle`: (name, version, path, trusted) of the bundle the kernels come from."""
        object.__setattr__(self, "_kernels", dict(kernels))
        object.__setattr__(self, "_bundle", bundle)
        self.__dict__.update((name, k) for name, k in self._kernels.items()
                             if not name.startswith("_") and not any(name in vars(c) for c in Library.__mro__))

    @property
    def name(self) -> str | None:
        """The bundle's name (None for a document's kernels)."""
        return None if self._bundle is None else self._bundle[0]

    @property
    def version(self) -> str | None:
        """The bundle's version, as its manifest gives it."""
        return None if self._bundle is None else self._bundle[1]

    @property
    def path(self) -> str | None:
        """The bundle file the kernels were read from."""
        return None if self._bundle is None else self._bundle[2]

    @property
    def trusted(self) -> bool:
        """Whether the bundle's native code may run (docs/bundles.md, "Native code")."""
        return self._bundle is not None and self._bundle[3]

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a Library is read-only: cannot set {name!r}")

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

    def __reduce__(self) -> tuple:
        return Library, (dict(self._kernels), self._bundle)

    def on(self, backend: str) -> "Library":
        """Every kernel of the library on `backend`."""
        return Library({n: k.on(backend) for n, k in self._kernels.items()}, self._bundle)

    def __repr__(self) -> str:
        kernels = f"{len(self)} kernel{'' if len(self) == 1 else 's'}: {', '.join(self._kernels)}"
        if self._bundle is None:
            return f"<Library of {kernels}>"
        name, version, path, trusted = self._bundle
        where = path if path is not None else "built in memory"
        return f"<Library {name} {version} ({where}; native code {'trusted' if trusted else 'not trusted'}) of {kernels}>"


_UNTRACED = (Kernel.__call__, Kernel.map)


def _switch(on: bool) -> None:
    """While a trace records, calls go through hologram.call.tracing; otherwise they
    run exactly the methods above, which know nothing of tracing (docs/tracing.md)."""
    if on:
        from hologram.call.tracing import traced_call, traced_map

        Kernel.__call__, Kernel.map = traced_call(_UNTRACED[0]), traced_map(_UNTRACED[1])
    else:
        Kernel.__call__, Kernel.map = _UNTRACED


trace.on_switch(_switch)
