"""The base of the WGSL float math (wgsl_math): the registry of helper functions, f32
literals and polynomials written exactly, values hidden from the shader compiler's float
folding, and the exact operations: `FMA`, `FMOD` and `REM` in integer arithmetic on the
significands, error-free f32 pairs (Dekker's product, TwoSum)."""

from __future__ import annotations

import numpy as np

__all__ = ["MATH_HELPERS", "helper", "f32_literal", "horner", "f32_pair"]


def f32_literal(x: float) -> str:
    """An f32 WGSL literal of the f32 nearest to x, written exactly (its f64 digits)."""
    return f"{float(np.float32(x))!r}f"


def horner(var: str, coefficients: list[float]) -> str:
    """c0 + var * (c1 + var * (...)) in WGSL."""
    out = f32_literal(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        out = f"({f32_literal(c)} + {var} * {out})"
    return out


# name -> (WGSL text, names of the helpers it calls); merged with wgsl_lib's helpers
MATH_HELPERS: dict[str, tuple[str, tuple[str, ...]]] = {}


def helper(name: str, text: str, *calls: str) -> None:
    MATH_HELPERS[name] = (text, calls)


def f32_pair(v: float) -> tuple[str, str]:
    """v as two f32 literals, hi + lo (about 48 bits)."""
    hi = float(np.float32(v))
    return f32_literal(hi), f32_literal(v - hi)


# ------------------------------------------------------------------------ exact arithmetic
# The value itself, in a form a shader compiler cannot see through. Mesa's NIR treats
# SPIR-V float arithmetic without `NoContraction` (WGSL has no way to ask for it) as
# inexact and simplifies algebraically: lavapipe turns `x - ((1 + x) - 1)` and `x - x`
# into 0 and `x * 0.0` into 0 (NaN and inf lost), `x + 0.0` into x (-0.0 kept). Its
# bits XOR a zero the shader reads at run time (`opaque_zero`, set by the stage writer
# from the launch info) stop that, constants included; the second word gives a hidden
# copy that common-subexpression elimination does not merge with the first.
helper("f32_unfolded", "fn f32_unfolded(v: f32) -> f32 { return bitcast<f32>(bitcast<u32>(v) ^ opaque_zero.x); }")
helper("f32_unfolded_alt",
        "fn f32_unfolded_alt(v: f32) -> f32 { return bitcast<f32>(bitcast<u32>(v) ^ opaque_zero.y); }")
# Finite nonzero values as (integer significand, exponent): |a| = m * 2**e, m < 2**24.
helper("f32_unpack", """fn f32_unpack(a: f32) -> vec2<i32> {
  let b = bitcast<u32>(a) & 0x7fffffffu;
  let e = b >> 23u;
  if (e == 0u) { return vec2<i32>(i32(b), -149i); }
  return vec2<i32>(i32((b & 0x7fffffu) | 0x800000u), i32(e) - 150i);
}""")
helper("x64_clz", """fn x64_clz(a: vec2<u32>) -> u32 {
  return select(32u + countLeadingZeros(a.x), countLeadingZeros(a.y), a.y != 0u);
}""")
# a >> s with every bit shifted out folded into bit 0 (a sticky bit), s >= 0
helper("x64_shr_sticky", """fn x64_shr_sticky(a: vec2<u32>, s: u32) -> vec2<u32> {
  if (s >= 64u) { return vec2<u32>(select(0u, 1u, any(a != vec2<u32>())), 0u); }
  let kept = u64_shr(a, s);
  return kept | vec2<u32>(select(0u, 1u, any(x64_shl(kept, s) != a)), 0u);
}""", "u64_shr", "x64_shl")
# r * 2**e (r != 0, r < 2**63) rounded to nearest even with `prec` significant bits and
# no bit below 2**qmin: (q, s) with the result q * 2**s, where q >= 2**(prec-1) unless
# s == qmin (a subnormal), and q == 2**prec when the rounding carried
helper("x64_round", """fn x64_round(r: vec2<u32>, e: i32, prec: i32, qmin: i32) -> vec2<i32> {
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
helper("f32_compose", """fn f32_compose(sign: u32, qs: vec2<i32>) -> f32 {
  if (qs.x == 0i) { return bitcast<f32>(sign); }
  if (qs.y > 105i) { return bitcast<f32>(sign | 0x7f800000u); }
  return bitcast<f32>(sign | min((u32(qs.y + 149i) << 23u) + u32(qs.x), 0x7f800000u));
}""")
# the f16 value (in f32) of x64_round(.., 11, -24): q * 2**s is exact in f32
helper("f16_compose", """fn f16_compose(sign: u32, qs: vec2<i32>) -> f32 {
  if (qs.y > 5i) { return bitcast<f32>(sign | 0x7f800000u); }
  let v = f32(qs.x) * bitcast<f32>(u32(qs.y + 127i) << 23u);
  return bitcast<f32>(sign | select(bitcast<u32>(v), 0x7f800000u, v >= 65536.0f));
}""")
# a * b + c rounded once (to f16 when `half`): the 48-bit product and c as 64-bit integers
# with their top bit at bit 61, the smaller shifted to the larger's exponent with a sticky
# bit (exact when the shift is small; beyond, the difference loses at most one bit of the
# 38 below the rounding point), added or subtracted, rounded once. Infinite or NaN
# operands and zero products are IEEE's a * b + c, computed on the bits.
helper("fma_exact", """fn fma_exact(a: f32, b: f32, c: f32, half: bool) -> f32 {
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
helper("f32_fma", "fn f32_fma(a: f32, b: f32, c: f32) -> f32 { return fma_exact(a, b, c, false); }", "fma_exact")
helper("f16_fma", "fn f16_fma(a: f32, b: f32, c: f32) -> f32 { return fma_exact(a, b, c, true); }", "fma_exact")
# C fmod, exact: the significands normalized to 24 bits, the remainder of the dividend's
# by the divisor's brought down 8 exponent steps at a time in u32 (r < 2**24, r << 8
# fits), then scaled by the divisor's exponent (exact: a multiple of its quantum)
helper("f32_fmod", """fn f32_fmod(a: f32, b: f32) -> f32 {
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
helper("f32_rem", """fn f32_rem(a: f32, b: f32) -> f32 {
  let m = f32_fmod(a, b);
  let um = bitcast<u32>(m); let ub = bitcast<u32>(b);
  if (f32_isnan(m)) { return m; }
  if ((um & 0x7fffffffu) == 0u) { return bitcast<f32>(ub & 0x80000000u); }
  if (((um ^ ub) & 0x80000000u) != 0u) { return m + b; }
  return m;
}""", "f32_fmod", "f32_isnan")


# error-free pairs of f32 (exact whatever the compiler does: the split is made on the
# bits, every partial product is exact, and TwoSum's sums are hidden from the folding)
helper("f32_two_prod", """fn f32_two_prod(a: f32, b: f32) -> vec2<f32> {  // a * b = hi + lo exactly
  let p = a * b;
  let ah = bitcast<f32>(bitcast<u32>(a) & 0xfffff000u); let al = a - ah;
  let bh = bitcast<f32>(bitcast<u32>(b) & 0xfffff000u); let bl = b - bh;
  return vec2<f32>(p, (((ah * bh - p) + ah * bl) + al * bh) + al * bl);
}""")
helper("f32_two_sum", """fn f32_two_sum(a: f32, b: f32) -> vec2<f32> {  // a + b = hi + lo exactly
  let s = f32_unfolded(a + b);
  let bb = f32_unfolded(s - a);
  return vec2<f32>(s, (a - (s - bb)) + (b - bb));
}""", "f32_unfolded")
