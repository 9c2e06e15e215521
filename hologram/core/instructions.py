"""The op table: every Atlas instruction, declared once.

An entry (`OpSpec`) says everything the rest of the system knows about one instruction:
its operands and their types (the verifier's typing rule), its effects, its reference
semantics (`hologram.core.lane_semantics`, which the interpreter calls), the IR ops and
DSL functions that lower to it, whether backends may approximate it, and the line of
docs/isa.md that documents it. Everything else is derived from this table: the verifier,
the binary encoding and the assembler (an instruction is written by its name, so the
name is its encoding and its assembly spelling), the lowering's op tables, the IR's
elementwise ops and the DSL's elementwise functions, the interpreter's dispatch, the
generators of `hologram.testing` and the instruction tables of docs/isa.md
(`hologram.isa.reference`). Adding an instruction is an entry here, its reference
semantics, and one code-generation entry per native backend.

The table lives in `core` so the front end (the IR and the DSL, below the ISA in the
layout) reads the same declaration as the back end; `hologram.isa.opcodes` is its public
name (docs/decisions.md, "One op table").
"""

from __future__ import annotations

import math
import operator

import attrs
import numpy as np

from hologram.core import atlas
from hologram.core import lane_semantics as S
from hologram.core.types import DType

__all__ = ["OpSpec", "DslFunction", "OPCODES", "TYPE_CLASSES", "EFFECTS", "SOURCE_KINDS", "GROUPS", "ir_ops"]

TYPE_CLASSES = {
    "any": lambda d: True,
    "num": lambda d: not d.is_bool,
    "int": lambda d: d.is_int,
    "intbool": lambda d: d.is_int or d.is_bool,
    "float": lambda d: d.is_float,
}
# What an instruction does besides computing its destination from its operands. An
# instruction with none is pure: removable when its result is dead, movable while its
# operands do not change.
EFFECTS = {
    "reads": "reads memory of its space",
    "writes": "writes memory of its space",
    "cross-lane": "its memory or its wait is shared with the other lanes (of the block, or the launch)",
    "barrier": "waits for the block's other lanes",
    "fence": "orders the lane's memory accesses",
    "control": "changes where the lane continues",
    "state": "reads or changes the lane's own state (its phase, its pools' tops)",
}
# The type of each source operand ('s' of the form), in order: the verifier's typing rule.
SOURCE_KINDS = {
    "t": "of the `.T` suffix type",
    "b": "bool",
    "i": "i64",
    "S": "of the second suffix type (CVT's source type)",
    "c": "an i64 register (not an immediate or a launch constant)",
    "k": "an immediate of type T",
}
# The sections of docs/isa.md, in order: the instructions of these groups are one table.
GROUPS = ("data", "arith", "logic", "control", "sync", "reduce", "transcendental", "math", "atlas", "pool")


@attrs.frozen
class DslFunction:
    """A function of the body language that is this instruction, elementwise.

    typing  the numpy function that types a call (NEP 50) and, unless the oracle
            defines the function itself, computes the reference answer; "" is numpy's
            function of the same name
    kinds   the dtype kinds of the arguments the generators draw (b bool, i signed,
            u unsigned, f float)"""

    name: str
    summary: str
    typing: str = ""
    kinds: str = "iuf"

    @property
    def ufunc(self) -> np.ufunc:
        return getattr(np, self.typing or self.name)


@attrs.frozen
class OpSpec:
    """One instruction.

    name      its assembly spelling; the binary encoding writes it too (a string-table
              entry), so a name never changes once programs use it
    group     its section of docs/isa.md (GROUPS)
    form      operand kinds in order: 'd' dst reg, 's' source operand, 'm' memory
              address, 'l' label, 'p' pool name, 'n' element count
    types     which dtypes the `.T` suffix admits: 'any' numeric+bool, 'num' numeric,
              'int' integers, 'intbool' integers or bool, 'float', 'none' (no suffix)
    result    dst type: 'same' as the suffix, 'bool', 'i64', 'none'
    space     memory space of 'm': global, shared, pool
    sources   the type of each source operand (SOURCE_KINDS), one letter per 's' of the
              form; 't' for each by default
    modifier  'compare' (SET's required comparison), 'reassoc' (optional, float types) or None
    predicated  may carry a guard `@%p`
    effects   what it does besides its result (EFFECTS); none: a pure instruction
    semantics the reference semantics, `(dtype, mod=None) -> lane function` on numpy
              scalars of the operand types (hologram.core.lane_semantics); None for
              memory, control and lane-state instructions, which the machine defines
    lowers    the Kernel IR ops lowered to exactly this instruction
    dsl       the DSL functions that are this instruction, elementwise (their IR op is
              the instruction's name, which `lowers` then lists)
    approx    backends may approximate it within the 4-ulp contract (≈ in docs/isa.md)
    syntax    how docs/isa.md writes it; "" is derived from the form
    doc       its semantics, as docs/isa.md states them"""

    name: str
    group: str
    form: str
    types: str
    result: str = "same"
    space: str | None = None
    sources: str = attrs.field(default=attrs.Factory(lambda self: "t" * self.form.count("s"), takes_self=True))
    modifier: str | None = None
    predicated: bool = False
    effects: frozenset[str] = frozenset()
    semantics: S.Semantics | None = attrs.field(default=None, eq=False)
    lowers: tuple[str, ...] = ()
    dsl: tuple[DslFunction, ...] = ()
    approx: bool = False
    syntax: str = ""
    doc: str = ""

    def admits(self, dtype: DType) -> bool:
        """Whether `dtype` may be this opcode's `.T` suffix (its `types` class)."""
        return TYPE_CLASSES[self.types](dtype)

    @property
    def arity(self) -> int:
        return len(self.sources)

    @property
    def pure(self) -> bool:
        """Computes its destination from its operands alone, with no other effect."""
        return not self.effects and self.form.startswith("d")

    def result_type(self, t: DType | None) -> DType | None:
        """The destination's type for suffix type `t`."""
        return {"same": t, "bool": DType.BOOL, "i64": DType.I64}.get(self.result)

    def source_type(self, k: int, t: DType | None, t2: DType | None = None) -> DType | None:
        """The type source operand `k` is read as, for suffix types `t` (and CVT's `t2`)."""
        return {"t": t, "k": t, "b": DType.BOOL, "i": DType.I64, "c": DType.I64, "S": t2}[self.sources[k]]


# ----------------------------------------------------------------------------- the table
def _op(name: str, group: str, form: str, types: str, doc: str, sources: str = "", lowers: tuple[str, ...] = (),
        dsl: tuple[DslFunction, ...] = (), **kw) -> OpSpec:
    """An entry; by default every source is of the suffix type, and an instruction a DSL
    function is lowers from the IR op of its own name."""
    if sources:
        kw["sources"] = sources
    return OpSpec(name, group, form, types, lowers=(name, *lowers) if dsl and name not in lowers else lowers, dsl=dsl,
                  doc=doc, **kw)


def _f(name: str, summary: str, **kw) -> tuple[DslFunction, ...]:
    return (DslFunction(name, summary, **kw),)


def _math1(name: str, fn: np.ufunc | S.Semantics, doc: str, dsl: tuple[DslFunction, ...] = (),
           approx: bool = True, group: str = "math") -> OpSpec:
    """A float function of one operand, `name.T %d, a`: a numpy ufunc in type T, or a
    semantics factory of lane_semantics."""
    return _op(name, group, "ds", "float", doc, semantics=S.same(fn) if isinstance(fn, np.ufunc) else fn, dsl=dsl,
               approx=approx)


_TABLE: tuple[OpSpec, ...] = (
    # ---------------------------------------------------------------- data movement
    _op("LDG", "data", "dm", "any", "`d = buf[i + k]` from a global buffer", space="global",
        effects=frozenset({"reads"}), syntax="LDG.T %d, [buf + %i + k]"),
    _op("STG", "data", "ms", "any", "`buf[i + k] = s`", result="none", space="global",
        effects=frozenset({"writes"}), syntax="STG.T [buf + %i + k], s"),
    _op("LDS", "data", "dm", "any", "load from the block's shared array", space="shared",
        effects=frozenset({"reads", "cross-lane"}), syntax="LDS.T %d, [sh + %i + k]"),
    _op("STS", "data", "ms", "any", "store to the block's shared array", result="none", space="shared",
        effects=frozenset({"writes", "cross-lane"}), syntax="STS.T [sh + %i + k], s"),
    _op("MOV", "data", "ds", "any", "`d = s`", semantics=S.identity, syntax="MOV.T %d, s"),
    _op("MOV_IMM", "data", "ds", "any", "`d = imm` (same as `MOV`; the spelling marks a constant)",
        sources="k", semantics=S.identity, syntax="MOV_IMM.T %d, imm"),
    _op("CVT", "data", "ds", "any", "`d = convert(s)`, from type S to type T ([CVT](#cvt))", sources="S",
        semantics=S.convert_to, syntax="CVT.T.S %d, s"),
    # ---------------------------------------------------------------- arithmetic
    _op("ADD", "arith", "dss", "num", "`a + b`; `ADD.reassoc.T` (T float): reassociable "
        "([Reassociable operations](#reassociable-operations))", modifier="reassoc",
        semantics=S.same(operator.add), lowers=("ADD",)),
    _op("SUB", "arith", "dss", "num", "`a - b`", semantics=S.same(operator.sub), lowers=("SUB",)),
    _op("MUL", "arith", "dss", "num", "`a * b`", semantics=S.same(operator.mul), lowers=("MUL",)),
    _op("DIV", "arith", "dss", "num", "floats: `a / b` (IEEE). integers: **floor** division `floor(a / b)` "
        "(numpy `floor_divide`); `b == 0` → **0**", semantics=S.div, lowers=("DIV", "FLOORDIV")),
    _op("REM", "arith", "dss", "num", "numpy `remainder`: `a - floor(a / b) * b`, the sign of the **divisor**. "
        "integers: `b == 0` → **0**. floats: see below (C `fmod` is `FMOD`)", semantics=S.rem, lowers=("MOD",)),
    _op("MIN", "arith", "dss", "num", "numpy `minimum`: NaN if either is NaN; `MIN.reassoc.T` (T float): "
        "reassociable", modifier="reassoc", semantics=S.same(np.minimum),
        dsl=_f("minimum", "elementwise minimum, NaN-propagating", kinds="biuf")),
    _op("MAX", "arith", "dss", "num", "numpy `maximum`: NaN if either is NaN; `MAX.reassoc.T` (T float): "
        "reassociable", modifier="reassoc", semantics=S.same(np.maximum),
        dsl=_f("maximum", "elementwise maximum, NaN-propagating", kinds="biuf")),
    _op("MAD", "arith", "dsss", "num", "`a * b + c`, **rounded twice** (the product, then the sum)",
        semantics=S.same(lambda a, b, c: a * b + c)),
    _op("FMA", "arith", "dsss", "num", "`a * b + c` computed exactly and **rounded once**", semantics=S.fused,
        lowers=("FMA",)),
    _op("ABS", "arith", "ds", "num", "the absolute value of `a`", semantics=S.same(np.absolute),
        dsl=_f("abs", "absolute value")),
    _op("NEG", "arith", "ds", "num", "`-a`", semantics=S.same(np.negative), lowers=("NEG",)),
    # ---------------------------------------------------------------- logic and comparison
    _op("AND", "logic", "dss", "intbool", "bitwise and (logical on `bool`)", semantics=S.same(operator.and_),
        lowers=("AND",)),
    _op("OR", "logic", "dss", "intbool", "bitwise or (logical on `bool`)", semantics=S.same(operator.or_),
        lowers=("OR",)),
    _op("XOR", "logic", "dss", "intbool", "bitwise xor (logical on `bool`)", semantics=S.same(operator.xor),
        lowers=("XOR",)),
    _op("NOT", "logic", "ds", "intbool", "bitwise complement `~a` (`-a - 1` on signed); logical not on `bool`",
        semantics=S.same(np.invert), lowers=("NOT",)),
    _op("SHL", "logic", "dss", "int", "`a << (b & (bits-1))`, bits shifted out are lost",
        semantics=S.shift(operator.lshift), lowers=("SHL",)),
    _op("SHR", "logic", "dss", "int", "`a >> (b & (bits-1))`: **arithmetic** (sign-filling) on signed types, "
        "**logical** on unsigned", semantics=S.shift(operator.rshift), lowers=("SHR",)),
    _op("SET", "logic", "dss", "any", "`p = a cc b`, result `bool`; cc is `eq ne lt le gt ge`", result="bool",
        modifier="compare", semantics=S.compare, syntax="SET.cc.T %p, a, b"),
    _op("SEL", "logic", "dsss", "any", "`d = p ? a : b`; `p` is read as `bool`", sources="btt",
        semantics=S.select, syntax="SEL.T %d, %p, a, b"),
    _op("ISINF", "logic", "ds", "any", "true where `a` is ±inf (numpy `isinf`), result `bool`; false for NaN, "
        "every finite value, integers and `bool`", result="bool", semantics=S.same(np.isinf), syntax="ISINF.T %p, a",
        dsl=_f("isinf", "true where x is +inf or -inf", kinds="f")),
    _op("ISFINITE", "logic", "ds", "any", "true where `a` is neither ±inf nor NaN (numpy `isfinite`), result "
        "`bool`; subnormals are finite; true for integers and `bool`", result="bool", semantics=S.same(np.isfinite),
        syntax="ISFINITE.T %p, a", dsl=_f("isfinite", "true where x is neither infinite nor NaN", kinds="f")),
    # ---------------------------------------------------------------- control flow
    _op("BRA", "control", "l", "none", "jump to label L; L must be **after** the branch. `@%p BRA L`, "
        "`@!%p BRA L`: jump if `p` is true (resp. false); `p` is a `bool` register", result="none",
        predicated=True, effects=frozenset({"control"}), syntax="BRA L"),
    _op("CALL", "control", "l", "none", "push the address of the next instruction, jump to L", result="none",
        effects=frozenset({"control"}), syntax="CALL L"),
    _op("LOOP", "control", "sl", "none", "`c = c - 1` (saturating: never below the type's minimum); "
        "`if c > 0: goto L`; L must be **at or before** the `LOOP`; `c` is an `i64` register", result="none",
        sources="c", effects=frozenset({"control"}), syntax="LOOP %c, L"),
    _op("RET", "control", "", "none", "pop a return address and jump to it; with an **empty** return stack, "
        "end the lane (like `EXIT`)", result="none", effects=frozenset({"control"})),
    _op("EXIT", "control", "", "none", "the lane ends", result="none", effects=frozenset({"control"})),
    # ---------------------------------------------------------------- synchronization
    _op("BarSync", "sync", "", "none", "block barrier: wait until every live lane of the block has reached "
        "this `BarSync`", result="none", effects=frozenset({"barrier", "cross-lane"})),
    _op("MemFence", "sync", "", "none", "order this lane's memory accesses: all accesses before it happen "
        "before all accesses after it, as seen by other lanes", result="none", effects=frozenset({"fence"})),
    # ---------------------------------------------------------------- reductions
    *(_op(name, "reduce", "ms", "num", f"combine {combine}; identity for `.init`: {identity}", result="none",
          space="global", effects=frozenset({"writes", "cross-lane"}), semantics=S.same(fn),
          syntax=f"{name}.T [buf + %i + k], v")
      for name, combine, identity, fn in (
          ("ReduceAdd", "`+`", "0", operator.add),
          ("ReduceMin", "`MIN` (NaN propagates)", "+inf, or the type's max", np.minimum),
          ("ReduceMax", "`MAX` (NaN propagates)", "-inf, or the type's min", np.maximum),
          ("ReduceMul", "`*`", "1", operator.mul))),
    # ---------------------------------------------------------------- transcendentals and math
    _math1("EXP", np.exp, "`exp`; `exp(-inf)` = 0, overflow → inf (`f32`: x > 88.72)", _f("exp", "e**x"),
           group="transcendental"),
    _math1("LOG", np.log, "`log`; `log(0)` = -inf (also -0), `log(x<0)` = NaN, `log(inf)` = inf",
           _f("log", "natural logarithm"), group="transcendental"),
    _math1("LOG2", np.log2, "`log2`; as LOG", _f("log2", "base-2 logarithm"), group="transcendental"),
    _math1("LOG10", np.log10, "`log10`; as LOG", _f("log10", "base-10 logarithm"), group="transcendental"),
    _math1("SQRT", np.sqrt, "`sqrt`; correctly rounded; `sqrt(-0.0)` = -0.0, `sqrt(x<0)` = NaN",
           _f("sqrt", "square root"), approx=False, group="transcendental"),
    _math1("RSQRT", S.rsqrt, "`1 / sqrt(x)`; two roundings (sqrt, then the division); `+0` → inf, `-0` → -inf, "
           "`x<0` → NaN, `inf` → 0", _f("rsqrt", "1 / sqrt(x)", typing="sqrt", kinds="f"), approx=False,
           group="transcendental"),
    _math1("SIN", np.sin, "`sin`; `±inf` → NaN; `sin(-0.0)` = -0.0", _f("sin", "sine"), group="transcendental"),
    _math1("COS", np.cos, "`cos`; `±inf` → NaN", _f("cos", "cosine"), group="transcendental"),
    _math1("TAN", np.tan, "`tan`; `±inf` → NaN; `tan(-0.0)` = -0.0", _f("tan", "tangent"), group="transcendental"),
    _math1("TANH", np.tanh, "`tanh`; `±inf` → ±1", _f("tanh", "hyperbolic tangent"), group="transcendental"),
    _math1("SIGMOID", S.sigmoid, "`1/(1+exp(-x))` for x ≥ 0, `exp(x)/(1+exp(x))` for x < 0, computed that way "
           "in type T, so `exp` never overflows: `-inf` → 0, `+inf` → 1, NaN → NaN, tiny or 0 for very negative "
           "x (never NaN)", _f("sigmoid", "1 / (1 + exp(-x))", typing="exp", kinds="f"), group="transcendental"),
    _math1("ASIN", np.arcsin, "`arcsin`; outside [-1, 1] → NaN", _f("arcsin", "inverse sine")),
    _math1("ACOS", np.arccos, "`arccos`; outside [-1, 1] → NaN", _f("arccos", "inverse cosine")),
    _math1("ATAN", np.arctan, "`arctan`; `±inf` → ±π/2", _f("arctan", "inverse tangent")),
    _math1("SINH", np.sinh, "`sinh`; overflow → ±inf", _f("sinh", "hyperbolic sine")),
    _math1("COSH", np.cosh, "`cosh`; overflow → inf", _f("cosh", "hyperbolic cosine")),
    _math1("ASINH", np.arcsinh, "`arcsinh`", _f("arcsinh", "inverse hyperbolic sine")),
    _math1("ACOSH", np.arccosh, "`arccosh`; `x < 1` → NaN", _f("arccosh", "inverse hyperbolic cosine")),
    _math1("ATANH", np.arctanh, "`arctanh`; `±1` → ±inf, outside [-1, 1] → NaN",
           _f("arctanh", "inverse hyperbolic tangent")),
    _math1("EXP2", np.exp2, "`exp2`", _f("exp2", "2**x")),
    _math1("EXPM1", np.expm1, "`expm1`; `expm1(-inf)` = -1", _f("expm1", "exp(x) - 1, accurate near 0")),
    _math1("LOG1P", np.log1p, "`log1p`; `log1p(-1)` = -inf, `x < -1` → NaN",
           _f("log1p", "log(1 + x), accurate near 0")),
    _math1("FLOOR", np.floor, "`floor`; exact; keeps the sign of zero", _f("floor", "round toward -inf"),
           approx=False),
    _math1("CEIL", np.ceil, "`ceil`; exact; keeps the sign of zero (`CEIL -0.5` = -0.0)",
           _f("ceil", "round toward +inf"), approx=False),
    _math1("TRUNC", np.trunc, "`trunc`; exact; keeps the sign of zero", _f("trunc", "round toward 0"),
           approx=False),
    _math1("RINT", np.rint, "`rint`; exact; round half to **even** (`RINT 2.5` = 2, `-0.5` = -0.0), as "
           "`numpy.round`", _f("rint", "round half to even"), approx=False),
    _math1("ERF", S.via_f64(math.erf), "`math.erf` (C `erf`); `erf(±inf)` = ±1, `erf(-0.0)` = -0.0",
           _f("erf", "error function (math.erf, scipy.special.erf)", typing="exp")),
    _math1("ERFC", S.via_f64(math.erfc), "`math.erfc` (C `erfc`); `erfc(-inf)` = 2, `erfc(inf)` = 0; accurate "
           "in relative terms where `erf` is near ±1 (`erfc(10)` = 2.09e-45, underflow to 0 beyond 27.3)",
           _f("erfc", "1 - erf(x), accurate where erf(x) is near 1", typing="exp")),
    _math1("CBRT", np.cbrt, "`cbrt`; `cbrt(-8)` = -2 (odd, unlike `POW`); `±0`, `±inf` and NaN are themselves",
           _f("cbrt", "cube root")),
    _op("ATAN2", "math", "dss", "float", "`arctan2`; signed zeros: `atan2(0, -0)` = π, `atan2(-0, -0)` = -π, "
        "`atan2(±0, +0)` = ±0", semantics=S.same(np.arctan2), approx=True, syntax="ATAN2.T %d, y, x",
        dsl=_f("arctan2", "angle of the point (b, a)")),
    _op("HYPOT", "math", "dss", "float", "`hypot`; `hypot(±inf, NaN)` = inf", semantics=S.same(np.hypot),
        approx=True, dsl=_f("hypot", "sqrt(a**2 + b**2) without overflow")),
    _op("FMOD", "math", "dss", "float", "`fmod`; exact; sign of the **dividend** (`fmod(-3, 2)` = -1); "
        "`fmod(x, 0)` = NaN, `fmod(±inf, y)` = NaN, `fmod(x, ±inf)` = x", semantics=S.same(np.fmod),
        dsl=_f("fmod", "C remainder (sign of a)")),
    _op("COPYSIGN", "math", "dss", "float", "`copysign`; exact; magnitude of a, sign bit of b (NaN's sign bit "
        "too)", semantics=S.same(np.copysign), dsl=_f("copysign", "magnitude of a, sign of b")),
    _op("POW", "math", "dss", "float", "`power` on arrays (C `pow`); `pow(x, ±0)` = 1 (also NaN x), "
        "`pow(1, y)` = 1 (also NaN y), negative base with a non-integer exponent → NaN, `pow(-0.0, -1)` = -inf, "
        "`pow(-0.0, 0.5)` = +0.0", semantics=S.same(S.array_loop(np.power)), approx=True,
        dsl=_f("power", "a ** b")),
    # ---------------------------------------------------------------- Atlas
    _op("ClsGet", "atlas", "ds", "int", "the class (0..95) of the byte `b & 0xFF` (low 8 bits, two's "
        "complement for negative b)", semantics=S.atlas_unary(S.byte_class), lowers=("ATLAS_CLASS",),
        syntax="ClsGet.T %d, b"),
    _op("MIRROR", "atlas", "ds", "int", "`mirror(c)`; -1 when c is not in 0..95",
        semantics=S.atlas_unary(atlas.mirror), lowers=("MIRROR",), syntax="MIRROR.T %d, c"),
    _op("NbrCount", "atlas", "ds", "int", "`degree(c)` (5 or 6); 0 when c is not in 0..95",
        semantics=S.atlas_unary(atlas.degree), lowers=("DEGREE",), syntax="NbrCount.T %d, c"),
    _op("UnityTest", "atlas", "ds", "int", "result `bool`: c is a unity class (0 or 48); false outside 0..95",
        result="bool", semantics=S.unity_test, lowers=("IS_UNITY",), syntax="UnityTest.T %p, c"),
    _op("NbrGet", "atlas", "dss", "int", "the k-th neighbour of c in ascending order; -1 when c is not in "
        "0..95 or k not in `0..degree(c)-1`", semantics=S.neighbor, lowers=("NEIGHBOR",),
        syntax="NbrGet.T %d, c, k"),
    _op("BoundMap", "atlas", "dsss", "int", "`c*12288 + p*256 + b`, computed exactly and wrapped to T; no "
        "range check (an out-of-range address is caught where it is used)", semantics=S.bound_map,
        lowers=("BOUND_MAP",), syntax="BoundMap.T %d, c, p, b"),
    _op("ResAccum", "atlas", "ms", "num", "`ReduceAdd` of v into element `c + k`, where the index register "
        "`%c` must hold an Atlas class 0..95 (else `ExecutionError`)", result="none", space="global",
        effects=frozenset({"writes", "cross-lane"}), semantics=S.same(operator.add),
        syntax="ResAccum.T [buf + %c + k], v"),
    _op("PhaseGet", "atlas", "d", "none", "the lane's phase counter, result `i64`", result="i64",
        effects=frozenset({"state"}), syntax="PhaseGet %d"),
    _op("PhaseAdv", "atlas", "s", "none", "`phase = (phase + v) mod 768`, result in 0..767 for any integer v, "
        "negative or huge", result="none", sources="i", effects=frozenset({"state"}), syntax="PhaseAdv v"),
    # ---------------------------------------------------------------- pools
    _op("PoolAlloc", "pool", "dpn", "none", "reserve `n` (a constant ≥ 0) elements of pool p: `h = top; "
        "top += n`; the elements are **zero-filled**; `%h` gets the base index (`i64`)", result="i64",
        effects=frozenset({"state"}), syntax="PoolAlloc %h, p, n"),
    _op("PoolFree", "pool", "s", "none", "release the lane's most recent allocation, which must start at `h`: "
        "that pool's top returns to `h`", result="none", sources="c", effects=frozenset({"state"}),
        syntax="PoolFree %h"),
    _op("PoolLoad", "pool", "dm", "any", "`d = p[i + k]`", space="pool", effects=frozenset({"reads"}),
        syntax="PoolLoad.T %d, [p + %i + k]"),
    _op("PoolStore", "pool", "ms", "any", "`p[i + k] = s`", result="none", space="pool",
        effects=frozenset({"writes"}), syntax="PoolStore.T [p + %i + k], s"),
)

OPCODES: dict[str, OpSpec] = {op.name: op for op in _TABLE}
assert len(OPCODES) == len(_TABLE), "an instruction is declared twice"


def ir_ops(arity: int | None = None) -> dict[str, OpSpec]:
    """The Kernel IR ops that lower to exactly one instruction, with it (of `arity`
    operands, or all)."""
    return {ir: op for op in _TABLE for ir in op.lowers if arity is None or op.arity == arity}
