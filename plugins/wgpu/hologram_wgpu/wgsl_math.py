"""The ISA's float math in WGSL, for f32 and for f16 held in f32 registers: exact `FMA`,
`FMOD` and `REM` through integer arithmetic on the significands, and the
transcendentals with cpu_llvm's algorithms (hologram_cpu_llvm.vecmath*: the same
reductions, series and arrangements) evaluated in f32, within the ISA's 4-ulp contract
(docs/gpu.md, "What wgpu declares", has the measured errors).

WGSL has no f64, so where cpu_llvm widens an f32 argument to f64 and rounds once, these
work in f32 and keep the steps that lose accuracy exact: Cody-Waite constants with
trailing zeros (so `n * HI` is exact and `x - n * HI` cancels exactly), scaling by 2**n
in two exact-then-rounded steps (subnormal results rounded once), argument bits read
with bitcasts (NaN, signs, subnormal inputs). Every step is exact or merely rounded
whether or not a driver contracts `a * b + c` into an fma, and nothing relies on the
driver keeping subnormals in an intermediate. WGSL's own `exp`, `log`, `sin`, `fma`
and `%` are never used: drivers answer them far outside the contract.

f16 functions are the f32 ones rounded to f16 (`f16_round`): the f32 result is within
a few f32 ulp, 2**-13 of an f16 ulp, so rounding it once more is as numpy computes f16
(in f32, then rounded), except for `FMA`, whose exact sum is rounded to f16 directly.
Each function is a helper in `MATH_HELPERS`, emitted only when a shader calls it."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["MATH_HELPERS", "MATH_UNARY", "MATH_BINARY", "math_call"]


def _f(x: float) -> str:
    """An f32 WGSL literal of the f32 nearest to x, written exactly (its f64 digits)."""
    return f"{float(np.float32(x))!r}f"


def _horner(var: str, coefficients: list[float]) -> str:
    """c0 + var * (c1 + var * (...)) in WGSL."""
    out = _f(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        out = f"({_f(c)} + {var} * {out})"
    return out


# name -> (WGSL text, names of the helpers it calls); merged with wgsl_lib's helpers
MATH_HELPERS: dict[str, tuple[str, tuple[str, ...]]] = {}


def _helper(name: str, text: str, *calls: str) -> None:
    MATH_HELPERS[name] = (text, calls)


# ------------------------------------------------------------------------ exact arithmetic
# Finite nonzero values as (integer significand, exponent): |a| = m * 2**e, m < 2**24.
_helper("f32_unpack", """fn f32_unpack(a: f32) -> vec2<i32> {
  let b = bitcast<u32>(a) & 0x7fffffffu;
  let e = b >> 23u;
  if (e == 0u) { return vec2<i32>(i32(b), -149i); }
  return vec2<i32>(i32((b & 0x7fffffu) | 0x800000u), i32(e) - 150i);
}""")
_helper("x64_clz", """fn x64_clz(a: vec2<u32>) -> u32 {
  return select(32u + countLeadingZeros(a.x), countLeadingZeros(a.y), a.y != 0u);
}""")
# a >> s with every bit shifted out folded into bit 0 (a sticky bit), s >= 0
_helper("x64_shr_sticky", """fn x64_shr_sticky(a: vec2<u32>, s: u32) -> vec2<u32> {
  if (s >= 64u) { return vec2<u32>(select(0u, 1u, any(a != vec2<u32>())), 0u); }
  let kept = u64_shr(a, s);
  return kept | vec2<u32>(select(0u, 1u, any(x64_shl(kept, s) != a)), 0u);
}""", "u64_shr", "x64_shl")
# r * 2**e (r != 0, r < 2**63) rounded to nearest even with `prec` significant bits and
# no bit below 2**qmin: (q, s) with the result q * 2**s, where q >= 2**(prec-1) unless
# s == qmin (a subnormal), and q == 2**prec when the rounding carried
_helper("x64_round", """fn x64_round(r: vec2<u32>, e: i32, prec: i32, qmin: i32) -> vec2<i32> {
  let msb = 63i - i32(x64_clz(r));
  let shift = max(msb - (prec - 1i), qmin - e);
  if (shift <= 0i) { return vec2<i32>(bitcast<i32>(x64_shl(r, u32(-shift)).x), e + shift); }
  if (shift >= 64i) { return vec2<i32>(0i, qmin); }
  let q = u64_shr(r, u32(shift)).x;
  let rest = x64_sub(r, x64_shl(vec2<u32>(q, 0u), u32(shift)));
  let half = x64_shl(vec2<u32>(1u, 0u), u32(shift - 1i));
  let up = u64_lt(half, rest) || (all(rest == half) && (q & 1u) == 1u);
  return vec2<i32>(i32(q + select(0u, 1u, up)), e + shift);
}""", "x64_clz", "x64_shl", "u64_shr", "x64_sub", "u64_lt")
# the f32 (sign | q * 2**s) of x64_round(.., 24, -149): the exponent field is built by
# an integer add, so q == 2**24 carries into it and overflow reaches the bits of inf
_helper("f32_compose", """fn f32_compose(sign: u32, qs: vec2<i32>) -> f32 {
  if (qs.x == 0i) { return bitcast<f32>(sign); }
  if (qs.y > 105i) { return bitcast<f32>(sign | 0x7f800000u); }
  return bitcast<f32>(sign | min((u32(qs.y + 149i) << 23u) + u32(qs.x), 0x7f800000u));
}""")
# the f16 value (in f32) of x64_round(.., 11, -24): q * 2**s is exact in f32
_helper("f16_compose", """fn f16_compose(sign: u32, qs: vec2<i32>) -> f32 {
  if (qs.y > 5i) { return bitcast<f32>(sign | 0x7f800000u); }
  let v = f32(qs.x) * bitcast<f32>(u32(qs.y + 127i) << 23u);
  return bitcast<f32>(sign | select(bitcast<u32>(v), 0x7f800000u, v >= 65536.0f));
}""")
# a * b + c rounded once (to f16 when `half`): the 48-bit product and c as 64-bit integers
# with their top bit at bit 61, the smaller shifted to the larger's exponent with a sticky
# bit (exact when the shift is small; beyond, the difference loses at most one bit of the
# 38 below the rounding point), added or subtracted, rounded once. Infinite or NaN
# operands and zero products are IEEE's a * b + c, computed on the bits.
_helper("fma_exact", """fn fma_exact(a: f32, b: f32, c: f32, half: bool) -> f32 {
  let ua = bitcast<u32>(a); let ub = bitcast<u32>(b); let uc = bitcast<u32>(c);
  let sp = (ua ^ ub) & 0x80000000u; let sc = uc & 0x80000000u;
  if ((ua & 0x7fffffffu) >= 0x7f800000u || (ub & 0x7fffffffu) >= 0x7f800000u) { return a * b + c; }
  if ((uc & 0x7fffffffu) >= 0x7f800000u) { return c; }
  if ((ua & 0x7fffffffu) == 0u || (ub & 0x7fffffffu) == 0u) {
    if ((uc & 0x7fffffffu) == 0u) { return bitcast<f32>(sp & sc); }
    return c;
  }
  let pa = f32_unpack(a); let pb = f32_unpack(b);
  var p = u32_mul_wide(u32(pa.x), u32(pb.x));
  let np = x64_clz(p) - 2u;
  p = x64_shl(p, np);
  let ep = pa.y + pb.y - i32(np);
  var r = p; var e = ep; var s = sp;
  if ((uc & 0x7fffffffu) != 0u) {
    let pc = f32_unpack(c);
    var q = vec2<u32>(u32(pc.x), 0u);
    let nc = x64_clz(q) - 2u;
    q = x64_shl(q, nc);
    let ec = pc.y - i32(nc);
    let c_big = ec > ep || (ec == ep && !u64_lt(q, p));
    let big = select(p, q, c_big);
    let small = x64_shr_sticky(select(q, p, c_big), u32(min(abs(ec - ep), 64i)));
    e = select(ep, ec, c_big); s = select(sp, sc, c_big);
    r = select(x64_sub(big, small), x64_add(big, small), sp == sc);
    if (all(r == vec2<u32>())) { return 0.0f; }
  }
  if (half) { return f16_compose(s, x64_round(r, e, 11i, -24i)); }
  return f32_compose(s, x64_round(r, e, 24i, -149i));
}""", "f32_unpack", "u32_mul_wide", "x64_clz", "x64_shl", "u64_lt", "x64_shr_sticky", "x64_sub", "x64_add",
        "x64_round", "f32_compose", "f16_compose")
_helper("f32_fma", "fn f32_fma(a: f32, b: f32, c: f32) -> f32 { return fma_exact(a, b, c, false); }", "fma_exact")
_helper("f16_fma", "fn f16_fma(a: f32, b: f32, c: f32) -> f32 { return fma_exact(a, b, c, true); }", "fma_exact")
# C fmod, exact: the significands normalized to 24 bits, the remainder of the dividend's
# by the divisor's brought down 8 exponent steps at a time in u32 (r < 2**24, r << 8
# fits), then scaled by the divisor's exponent (exact: a multiple of its quantum)
_helper("f32_fmod", """fn f32_fmod(a: f32, b: f32) -> f32 {
  let ua = bitcast<u32>(a) & 0x7fffffffu; let ub = bitcast<u32>(b) & 0x7fffffffu;
  if (ua >= 0x7f800000u || ub > 0x7f800000u || ub == 0u) { return bitcast<f32>(0x7fc00000u); }
  if (ua < ub) { return a; }
  let pa = f32_unpack(a); let pb = f32_unpack(b);
  let na = countLeadingZeros(u32(pa.x)) - 8u; let nb = countLeadingZeros(u32(pb.x)) - 8u;
  let mb = u32(pb.x) << nb;
  let eb = pb.y - i32(nb);
  var r = (u32(pa.x) << na) % mb;
  var d = pa.y - i32(na) - eb;
  loop {
    if (d <= 0i) { break; }
    let k = min(d, 8i);
    r = (r << u32(k)) % mb;
    d -= k;
  }
  let sign = bitcast<u32>(a) & 0x80000000u;
  if (r == 0u) { return bitcast<f32>(sign); }
  return f32_compose(sign, x64_round(vec2<u32>(r, 0u), eb, 24i, -149i));
}""", "f32_unpack", "f32_compose", "x64_round")
# numpy remainder: fmod, then the divisor added once when the signs differ (rounded, as
# numpy's npy_divmod does), a zero with the divisor's sign
_helper("f32_rem", """fn f32_rem(a: f32, b: f32) -> f32 {
  let m = f32_fmod(a, b);
  let um = bitcast<u32>(m); let ub = bitcast<u32>(b);
  if (f32_isnan(m)) { return m; }
  if ((um & 0x7fffffffu) == 0u) { return bitcast<f32>(ub & 0x80000000u); }
  if (((um ^ ub) & 0x80000000u) != 0u) { return m + b; }
  return m;
}""", "f32_fmod", "f32_isnan")


# ------------------------------------------------------------------------------ dispatch
MATH_UNARY: frozenset[str] = frozenset()  # the one-operand ops with a helper here
MATH_BINARY = frozenset({"FMOD", "REM"})


def math_call(op: str, is_f16: bool, *args: str) -> str:
    """The WGSL value of the float op `op` (FMA, or one of MATH_UNARY / MATH_BINARY) at
    f32, or at f16 when `is_f16` (registers hold f16 values as f32)."""
    if op == "FMA":
        return f"{'f16' if is_f16 else 'f32'}_fma({', '.join(args)})"
    value = f"f32_{op.lower()}({', '.join(args)})"
    return f"f16_round({value})" if is_f16 else value
