"""Running ISA programs on a backend and judging the results, for the backends' tests and the
ISA passes' tests: each dtype's edge values, one-instruction programs, bit-for-bit and ulp
comparisons, random inputs for a program, and the contract between two correct backends.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from hologram.core.types import Affine, DType
from hologram.isa.opcodes import OPCODES, const
from hologram.isa.program import Addr, BufferParam, Imm, Instr, Program, Reg, RegDecl, Special, Stage

I64, BOOL = DType.I64, DType.BOOL
N = Affine.of("n")
# The instructions whose lanes accumulate into one memory element.
CROSS_LANE = frozenset(op for op, spec in OPCODES.items() if spec.group == "reduce") | {"ResAccum"}
# Float functions a backend must round exactly, as + - * / are.
EXACT_FLOAT = ("SQRT", "RSQRT", "FLOOR", "CEIL", "TRUNC", "RINT")  # correctly rounded (RSQRT: each step)


# ======================================================================= inputs
def edges(t: DType) -> np.ndarray:
    """The values most likely to expose a wrong rule, in dtype t."""
    if t is BOOL:
        return np.array([False, True])
    if t.is_float:
        fi = np.finfo(t.np)
        vals = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, -7.0, 0.1, 100.0, 1e4,
                math.inf, -math.inf, math.nan, float(fi.max), -float(fi.max), float(fi.tiny),
                float(fi.smallest_subnormal), -float(fi.smallest_subnormal)]
        return np.array(vals, dtype=t.np)
    lo, hi = t.min, t.max
    vals = {0, 1, 2, 3, 7, 100, hi, hi - 1, lo, lo + 1, -1, -2, -3, -7, -100}
    return np.array(sorted(v for v in vals if lo <= v <= hi), dtype=t.np)


def pairs(t: DType, right: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every edge value of t against every edge value (or every element of `right`)."""
    a, b = zip(*itertools.product(edges(t), edges(t) if right is None else right))
    return np.array(a, dtype=t.np), np.array(b, dtype=t.np)


def triples(t: DType) -> tuple[np.ndarray, ...]:
    e = edges(t)
    if len(e) > 12:
        e = e[np.linspace(0, len(e) - 1, 12).astype(int)]
    return tuple(np.array(c, dtype=t.np) for c in zip(*itertools.product(e, e, e)))


def float_samples(t: DType) -> np.ndarray:
    """The edge values, 200 values of every magnitude from 1e-3 to about 2000, and a few near 1 and 709."""
    rng = np.random.default_rng(7)
    spread = rng.standard_normal(200) * rng.choice([1e-3, 0.3, 1, 3, 30, 700], 200)
    return np.concatenate([edges(t), spread.astype(t.np), np.array([0.5, 0.9999, 1.0001, 709.0], t.np)])


def random_inputs(program: Program, rng: np.random.Generator) -> tuple[dict, dict, dict]:
    """(buffers, scalars, symbols) for `program`: small sizes, and edge values (NaN, -0.0, inf,
    a subnormal, integer extremes) at the start of every buffer large enough to hold them."""
    symbols = {s: int(rng.integers(1, 40)) for s in program.symbols}
    buffers = {}
    for name, p in program.buffers().items():
        if p.role == "temp":
            continue
        size = math.prod(d.evaluate(symbols) for d in p.shape)
        if p.dtype is BOOL:
            arr = rng.integers(0, 2, size).astype(bool)
        elif p.dtype.is_int:
            arr = rng.integers(-100 if p.dtype.is_signed else 0, 100, size).astype(p.dtype.np)
            if size > 3:
                arr[:2] = [p.dtype.min, p.dtype.max]
        else:
            arr = (rng.standard_normal(size) * 4).astype(p.dtype.np)
            if size > 4:
                arr[:4] = [np.nan, -0.0, np.inf, np.finfo(p.dtype.np).smallest_subnormal]
        buffers[name] = arr.reshape([d.evaluate(symbols) for d in p.shape])
    scalars = {n: const(1.5 if p.dtype.is_float else 3, p.dtype) for n, p in program.scalars().items()}
    return buffers, scalars, symbols


# ===================================================================== programs
def op_program(op: str, dtype: DType | None, src_types: tuple[DType, ...], out_type: DType | None, *,
               mod: str | None = None, dtype2: DType | None = None, imms: dict[int, object] | None = None) -> Program:
    """Lane i: `s_k = a_k[i]` for each source, `d = op(s...)`, `out[i] = d`. Sources listed
    in `imms` are immediates instead of loads."""
    imms = imms or {}
    regs = [RegDecl("i", I64)] + [RegDecl(f"s{k}", t) for k, t in enumerate(src_types)]
    body = [Instr("MOV", I64, Reg("i"), (Special("gid.x"),))]
    body += [Instr("LDG", t, Reg(f"s{k}"), addr=Addr(f"a{k}", Reg("i")))
             for k, t in enumerate(src_types) if k not in imms]
    srcs = tuple(Imm(imms[k]) if k in imms else Reg(f"s{k}") for k in range(len(src_types)))
    params = [BufferParam(f"a{k}", t, (N,), "in") for k, t in enumerate(src_types) if k not in imms]
    dst = None
    if out_type is not None:
        regs.append(RegDecl("d", out_type))
        dst = Reg("d")
        params.append(BufferParam("out", out_type, (N,), "out"))
    body.append(Instr(op, dtype, dst, srcs, mod=mod, dtype2=dtype2))
    if out_type is not None:
        body.append(Instr("STG", out_type, srcs=(Reg("d"),), addr=Addr("out", Reg("i"))))
    body.append(Instr("EXIT"))
    stage = Stage("s", (N,), (64,), tuple(regs), body=tuple(body))
    return Program(op.lower(), tuple(params), symbols=("n",), stages=(stage,))


# ================================================================== comparisons
def same(got: np.ndarray, want: np.ndarray, *inputs: np.ndarray) -> None:
    """Bit-for-bit agreement up to NaN payloads: same dtype, NaN where NaN, equal
    elsewhere with the same sign of zero."""
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if got.dtype.kind == "f":
        differ = (got != want) | (np.signbit(got) != np.signbit(want))
        bad = (np.isnan(got) != np.isnan(want)) | (~np.isnan(want) & differ)
    else:
        bad = got != want
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        args = ", ".join(repr(a[k]) for a in inputs)
        pytest.fail(f"{bad.sum()} mismatches; first: op({args}) gave {got[k]!r}, expected {want[k]!r}")


def ulp_close(got: np.ndarray, want: np.ndarray, ulps: int, *inputs: np.ndarray) -> None:
    """Non-finite values and zeros identical; finite values within `ulps` units in the last place."""
    exact = ~np.isfinite(want) | ~np.isfinite(got) | (want == 0)
    same(got[exact], want[exact], *(a[exact] for a in inputs))
    g, w = got[~exact].astype(np.float64), want[~exact]
    with np.errstate(over="ignore"):  # f16 spacing near the maximum
        err = np.abs(g - w.astype(np.float64)) / np.spacing(np.abs(w)).astype(np.float64)
    assert err.max(initial=0) <= ulps, f"{err.max()} ulp apart"


def _has_transcendental(program: Program) -> bool:
    return any(isinstance(i, Instr) and OPCODES[i.op].group in ("transcendental", "math")
               and i.op not in EXACT_FLOAT for s in program.stages for i in s.body)


def _reductions(program: Program) -> dict[str, str]:
    return {i.addr.buffer: i.op for s in program.stages for i in s.body
            if isinstance(i, Instr) and i.op in CROSS_LANE}


def compare_buffers(program: Program, got: dict, want: dict) -> None:
    """The contract between two correct backends on one program: bit for bit, except
    that float sums and products may be reassociated, and that after a transcendental
    (within 4 ULP) float results are only close and integer results derived from them
    may differ."""
    loose = _has_transcendental(program)
    reductions = _reductions(program)
    for name, w in want.items():
        g, w, op = np.atleast_1d(got[name]), np.atleast_1d(w), reductions.get(name)
        if w.dtype.kind != "f":
            if not loose:
                same(g, w)  # wrapping integer sums/products are exact in any order
            continue
        if not loose and op in (None, "ReduceMin", "ReduceMax"):
            if op is None:
                same(g, w)
            else:  # order decides only the sign of a zero minimum
                assert ((g == w) | (np.isnan(g) & np.isnan(w))).all(), (name, g, w)
            continue
        # Reassociated sums can overflow differently, so only finite pairs are compared.
        fin = np.isfinite(g) & np.isfinite(w)
        g64, w64 = g[fin].astype(np.float64), w[fin].astype(np.float64)
        scale = max(np.abs(g64).max(initial=0.0), np.abs(w64).max(initial=0.0), 1.0)
        rtol = {np.float16: 5e-2, np.float32: 1e-3, np.float64: 1e-6}[w.dtype.type]
        assert np.allclose(g64, w64, rtol=rtol, atol=rtol * scale), (name, g, w)


# A program whose every lane but the first n - 3 reads past `x` (a checked access): the
# out-of-bounds error each backend must word as the interpreter does.
OOB = """
.program oob
.symbols n
.param in x: f32[n]
.param out y: f32[n]
.stage s domain [n] block [32]
.reg %i, %j: i64
.reg %v: f32
    MOV.i64 %i, %gid.x
    ADD.i64 %j, %i, 3
    LDG.f32.chk %v, [x + %j]
    STG.f32.chk [y + %i], %v
    EXIT
"""
