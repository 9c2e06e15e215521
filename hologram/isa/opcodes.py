"""The opcode table, the ISA's public name for it: every Atlas instruction, its operands
and their types, effects, reference semantics, the IR ops and DSL functions lowering to
it, and its documentation. It is declared once, in `hologram.core.instructions` (below
the front end, which derives its elementwise functions from it); the assembler, the
binary encoding, the verifier, the lowering, the backends and docs/isa.md's tables
(`hologram.isa.reference`) all read it from here. Backends also find here the reference
semantics' conversions they share (`convert`, `const`, `pairwise`).
"""

from __future__ import annotations

from hologram.core.instructions import (EFFECTS, GROUPS, OPCODES, SOURCE_KINDS, TYPE_CLASSES, DslFunction, OpSpec,
                                        ir_ops)
from hologram.core.lane_semantics import const, convert, fma, pairwise, round_exact, wrap_int

__all__ = ["OpSpec", "DslFunction", "OPCODES", "TYPE_CLASSES", "EFFECTS", "SOURCE_KINDS", "GROUPS", "ir_ops",
           "convert", "const", "wrap_int", "round_exact", "fma", "pairwise"]
