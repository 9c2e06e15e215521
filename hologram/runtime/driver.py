"""The compiler driver: one kernel definition through the whole pipeline.

    KernelDef --to_ir--> KernelIR --IR passes--> KernelIR --lower--> Program --ISA
    passes--> Program --verify--> Compiled

`compile_program` is cached by (the kernel's `KernelIR` value, pipeline): the same
kernel reached from another file or format is optimized, lowered and verified once.
"""

from __future__ import annotations

import collections
import functools
import keyword

import attrs

from hologram.dsl.document import KernelDef
from hologram.ir import KernelIR
from hologram.isa.program import Program
from hologram.lower.stages import lower
from hologram.passes.manager import Pipeline
from hologram.runtime.args import Signature, direct_binding, identityless_reductions

CACHE_SIZE = 256  # kernels' verified programs kept


@attrs.frozen(eq=False)
class Compiled:
    """One kernel through the whole pipeline: `kir` is its IR after the pipeline's IR
    passes, `program` the verified program after its ISA passes, `pipeline` the passes
    that ran (so the same `kdef` can be compiled again at another level). `result` is the
    namedtuple type returned when the kernel has several outputs (fields named after
    the outputs)."""

    kdef: KernelDef
    kir: KernelIR
    program: Program
    pipeline: Pipeline
    # the IR as the front end built it: the kernel's interface and its checks come from
    # here, so no pass (a dead-code one, say) can change what a call accepts
    source_ir: KernelIR = attrs.field()
    signature: Signature = attrs.field()
    result: type | None = attrs.field()
    reductions: tuple = attrs.field()  # min/max/argmin/argmax, checked for empty extents per call
    binding: tuple | None = attrs.field()  # a direct shape-binding plan, or None

    @source_ir.default
    def _source_ir(self) -> KernelIR:
        return self.kir

    @reductions.default
    def _reductions(self) -> tuple:
        return identityless_reductions(self.source_ir)

    @binding.default
    def _binding(self) -> tuple | None:
        return direct_binding(self.signature.inputs)

    @signature.default
    def _signature(self) -> Signature:
        return Signature.of(self.source_ir)

    @result.default
    def _result(self) -> type | None:
        names = self.signature.output_names
        if len(names) < 2:
            return None
        name = self.kir.name  # a document may name a kernel "None" or "class": no type name
        typename = name if name.isidentifier() and not keyword.iskeyword(name) else "Outputs"
        return collections.namedtuple(typename, names, rename=True)


def compile_kdef(kdef: KernelDef, pipeline: Pipeline) -> Compiled:
    """One kernel definition through `pipeline`: to_ir, the IR passes, lower, the ISA
    passes, verify. Cached by (the kernel's IR, pipeline)."""
    from hologram.dsl.analyze import to_ir  # the front end (lark) loads at the first compile

    kir = to_ir(kdef)
    optimized, program = compile_program(kir, pipeline)
    return Compiled(kdef, optimized, program, pipeline, source_ir=kir)


@functools.lru_cache(maxsize=CACHE_SIZE)
def compile_program(kir: KernelIR, pipeline: Pipeline) -> tuple[KernelIR, Program]:
    optimized = pipeline.run_ir(kir)
    return optimized, pipeline.run_isa(lower(optimized))  # run_isa verifies what it returns
