"""The compiler driver: one kernel definition through the whole pipeline.

    KernelDef --to_ir--> KernelIR --IR passes--> KernelIR --lower--> Program --ISA
    passes--> Program --verify--> Compiled

`compile_program` is cached by (the kernel's `KernelIR` value, pipeline): the same
kernel reached from another file or format is optimized, lowered and verified once.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import keyword
from typing import TYPE_CHECKING, Any, Callable, Mapping

import attrs

from hologram.compiler.signature import Signature, direct_binding, identityless_reductions
from hologram.core import trace
from hologram.core.errors import CompileError
from hologram.isa.program import Program

if TYPE_CHECKING:  # the compiler's values: a kernel loaded from a bundle never imports them
    from hologram.dsl.document import KernelDef
    from hologram.ir import KernelIR
    from hologram.passes.manager import Pipeline

CACHE_SIZE = 256  # kernels' verified programs kept


@attrs.frozen(eq=False)
class Compiled:
    """One kernel ready to run: its verified program and its interface, compiled from a
    document or a streaming plan (`Compiled.of`) or stored in a bundle or a pickle
    (`Compiled.stored`); nothing else builds one.

    The interface (`signature`, the identity-less `reductions` a call checks) comes from
    the IR as the front end built it, so no pass (a dead-code one, say) can change what a
    call accepts. From a document, `kdef` is the definition, `kir` the IR after the
    pipeline's IR passes and `pipeline` the passes that ran (so the same `kdef` can be
    compiled again at another level). From a bundle those are None: the bundle keeps the
    IR's text (`ir_text`) and its sources, which `definition()` translates when asked,
    and may hand its program over as a function that decodes, checks and verifies it:
    that runs at the first use of `program` (at the latest the first call), once; its
    `source_ir` likewise, at its first use (a stream along a shape symbol).
    `result` is the namedtuple type returned when the kernel has several outputs."""

    _program: Program | Callable[[], Program] = attrs.field(alias="program")
    signature: Signature
    version: str
    summary: str
    pipeline_name: str
    reductions: tuple  # (kind, axes) of each min/max/argmin/argmax, checked for empty extents per call
    kdef: KernelDef | None = None
    kir: KernelIR | None = None
    pipeline: Pipeline | None = None
    # the IR as the front end built it, or (from a bundle or a pickle) a function that
    # decodes and checks its encoding at the first use of `source_ir` (streaming along a symbol)
    _source_ir: KernelIR | Callable[[], KernelIR] | None = attrs.field(default=None, alias="source_ir")
    ir_text: str | None = None
    definition: Callable[[], KernelDef] | None = None
    # object code shipped with a trusted bundle, by backend name: what its `prepare_native` takes
    native: Mapping[str, tuple[Mapping[str, Any], ...]] = attrs.field(factory=dict)
    result: type | None = attrs.field()
    binding: tuple | None = attrs.field()  # a direct shape-binding plan, or None
    _encoded: tuple[bytes, str] | None = attrs.field(default=None, init=False, repr=False)  # `encoded`, once

    @staticmethod
    def of(source_ir: KernelIR, kir: KernelIR, program: Program, pipeline: Pipeline,
           kdef: KernelDef | None = None) -> "Compiled":
        """A kernel compiled from IR: `source_ir` as the front end built it (the interface
        is read from it), `kir` after the IR passes, `kdef` the definition it came from
        (None for a streaming step, whose IR the planner made)."""
        return Compiled(program, Signature.of(source_ir), kir.version, kdef.summary if kdef else "", pipeline.name,
                        identityless_reductions(source_ir), kdef=kdef, kir=kir, pipeline=pipeline,
                        source_ir=source_ir)

    @staticmethod
    def stored(program: Program | Callable[[], Program], signature: Signature, version: str, summary: str,
               pipeline_name: str, reductions: tuple, *, source_ir: Callable[[], KernelIR] | None = None,
               ir_text: str | None = None, kdef: KernelDef | None = None,
               definition: Callable[[], KernelDef] | None = None,
               native: Mapping[str, tuple[Mapping[str, Any], ...]] | None = None) -> "Compiled":
        """A kernel compiled earlier, from the parts a bundle or a pickle keeps: `program`
        may be a function that decodes, checks and verifies it at its first use, and
        `source_ir` one that decodes the IR's encoding at its first use."""
        return Compiled(program, signature, version, summary, pipeline_name, reductions, kdef=kdef,
                        source_ir=source_ir, ir_text=ir_text, definition=definition, native=native or {})

    @property
    def program(self) -> Program:
        p = self._program
        if not isinstance(p, Program):
            p = p()
            object.__setattr__(self, "_program", p)  # two threads may both decode: the same value
        return p

    @property
    def encoded(self) -> tuple[bytes, str]:
        """The program's encoding and its sha256 (hex): what a pickle carries, and the
        kernel's identity whatever its origin (Dask's token of a kernel, hologram.dask).
        Computed once: a gemm's program takes ~5 ms to encode."""
        found = self._encoded
        if found is None:
            from hologram.isa.encoding import encode

            data = encode(self.program)
            found = (data, hashlib.sha256(data).hexdigest())
            object.__setattr__(self, "_encoded", found)
        return found

    @property
    def source_ir(self) -> KernelIR | None:
        ir = self._source_ir
        if callable(ir):
            ir = ir()
            object.__setattr__(self, "_source_ir", ir)
        return ir

    def encoded_source_ir(self) -> bytes | None:
        """`source_ir`'s encoding (hologram.ir_codec), for pickling: one still encoded is not decoded."""
        from hologram.compiler.source_ir import encoded

        return encoded(self._source_ir)

    @binding.default
    def _binding(self) -> tuple | None:
        return direct_binding(self.signature.inputs)

    @result.default
    def _result(self) -> type | None:
        names = self.signature.output_names
        if len(names) < 2:
            return None
        name = self.signature.name  # a document may name a kernel "None" or "class": no type name
        typename = name if name.isidentifier() and not keyword.iskeyword(name) else "Outputs"
        return collections.namedtuple(typename, names, rename=True)

    def source_definition(self) -> KernelDef:
        """The kernel's definition: the document's, or a bundle's source translated now."""
        if self.kdef is not None:
            return self.kdef
        if self.definition is None:
            raise CompileError(f"kernel {self.signature.name!r} has no source to compile again")
        return self.definition()

    def ir_form(self) -> str:
        """The IR's text form after the passes (`hologram compile --emit ir`)."""
        if self.kir is None:
            return self.ir_text or ""
        from hologram.ir import format_kernel

        return format_kernel(self.kir)


def compile_kdef(kdef: KernelDef, pipeline: Pipeline) -> Compiled:
    """One kernel definition through `pipeline`: to_ir, the IR passes, lower, the ISA
    passes, verify. Cached by (the kernel's IR, pipeline). Traced as a `kernel` span
    around `parse`, `analyze` and (unless cached) the passes, `lower` and `verify`."""
    from hologram.dsl.analyze import to_ir  # the front end (lark) loads at the first compile
    from hologram.dsl.parser import parse_body

    with trace.span(f"kernel {kdef.name}", "compile", kernel=kdef.name, pipeline=pipeline.name) as info:
        with trace.span("parse", "compile"):
            body = parse_body(kdef)
        with trace.span("analyze", "compile"):
            kir = to_ir(kdef, body)
        optimized, program = trace.cached(info, compile_program, kir, pipeline)
    return Compiled.of(kir, optimized, program, pipeline, kdef)


def compile_ir(kir: KernelIR, pipeline: Pipeline) -> Compiled:
    """A kernel from IR that no document holds (a streaming plan's step): the passes,
    lower, verify, as `compile_kdef` after the front end."""
    optimized, program = compile_program(kir, pipeline)
    return Compiled.of(kir, optimized, program, pipeline)


@functools.lru_cache(maxsize=CACHE_SIZE)
def compile_program(kir: KernelIR, pipeline: Pipeline) -> tuple[KernelIR, Program]:
    from hologram.lower.stages import lower

    optimized = pipeline.run_ir(kir)
    with trace.span("lower", "compile"):
        program = lower(optimized)
    return optimized, pipeline.run_isa(program)  # run_isa verifies what it returns
