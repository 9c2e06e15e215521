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
# The value itself, in a form a shader compiler cannot see through. Mesa's NIR treats
# SPIR-V float arithmetic without `NoContraction` (WGSL has no way to ask for it) as
# inexact and simplifies algebraically: lavapipe turns `x - ((1 + x) - 1)` and `x - x`
# into 0 and `x * 0.0` into 0 (NaN and inf lost), `x + 0.0` into x (-0.0 kept). Its
# bits XOR a zero the shader reads at run time (`opaque_zero`, set by the stage writer
# from the launch info) stop that, constants included; the second word gives a hidden
# copy that common-subexpression elimination does not merge with the first.
_helper("f32_unfolded", "fn f32_unfolded(v: f32) -> f32 { return bitcast<f32>(bitcast<u32>(v) ^ opaque_zero.x); }")
_helper("f32_unfolded_alt",
        "fn f32_unfolded_alt(v: f32) -> f32 { return bitcast<f32>(bitcast<u32>(v) ^ opaque_zero.y); }")
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


# --------------------------------------------------------------------- exp and its family
# cpu_llvm's reduction (vecmath_exp.py): x = n ln2 + r, n = rint(x log2 e), |r| <= ln2/2;
# LN2_HI has 16 bits, so n * LN2_HI is exact for |n| <= 255 and x - n * LN2_HI cancels
# exactly (also when contracted: the product is exact).
LOG2E = 1.4426950408889634
LN2_HI = 0.693145751953125
LN2_LO = math.log(2) - LN2_HI
# exp(r) on |r| <= ln2/2: cpu_llvm's EXP_F32_POLY (a Chebyshev fit, 2**-34 relative)
EXP_F32_POLY = [0.9999999999595618, 0.999999999995509, 0.5000000107729166, 0.16666666786308587,
                0.041666218319291945, 0.008333283538708528, 0.0013948578326459795, 0.00019907569310848288]
# expm1(r) = r + r**2 * P(r), P's coefficients 1/k! (cpu_llvm's EXPM1_TAIL), cut where the
# next term is below 2**-27 of the result for |r| <= ln2/2
EXPM1_TAIL = [1.0 / math.factorial(k) for k in range(2, 10)]
# 2**r - 1 = r * Q(r), Q's coefficients ln2**k / k! (cpu_llvm's _EXP2M1), |r| <= 1/2
EXP2M1 = [math.log(2) ** k / math.factorial(k) for k in range(1, 10)]

_helper("f32_pow2", "fn f32_pow2(n: i32) -> f32 { return bitcast<f32>(u32(n + 127i) << 23u); }")  # -126..127
# p * 2**n for |n| <= 252, rounded once: the first factor is exact (p is near 1)
_helper("f32_scale", """fn f32_scale(p: f32, n: i32) -> f32 {
  let h = n / 2i;
  return (p * f32_pow2(h)) * f32_pow2(n - h);
}""", "f32_pow2")
_helper("f32_exp", f"""fn f32_exp(x: f32) -> f32 {{
  if (f32_isnan(x)) {{ return x; }}
  let xs = clamp(x, -104.0f, 89.0f);  // beyond: 0 and inf
  let n = round(xs * {_f(LOG2E)});
  let r = (xs - n * {_f(LN2_HI)}) - n * {_f(LN2_LO)};
  return f32_scale({_horner("r", EXP_F32_POLY)}, i32(n));
}}""", "f32_isnan", "f32_scale")
# (n, expm1(r)) for x = n ln2 + r, |x| <= 104
_helper("expm1_reduced", f"""fn expm1_reduced(x: f32) -> vec2<f32> {{
  let n = round(x * {_f(LOG2E)});
  let r = (x - n * {_f(LN2_HI)}) - n * {_f(LN2_LO)};
  return vec2<f32>(n, r + (r * r) * {_horner("r", EXPM1_TAIL)});
}}""")
# 2**n (1 + m) - 1 = 2**n m + (2**n - 1): both terms exact for n <= 24; above, the -1 is
# below half an ulp. x < -40: -1 (the true value rounds to -1 from -17.4 on).
_helper("f32_expm1", """fn f32_expm1(x: f32) -> f32 {
  if (f32_isnan(x) || x == 0.0f) { return x; }
  if (x < -40.0f) { return -1.0f; }
  let nm = expm1_reduced(min(x, 89.0f));
  let n = i32(nm.x);
  if (n > 24i) { return f32_scale(1.0f + nm.y, n); }
  let s = f32_pow2(n);
  return s * nm.y + (s - 1.0f);
}""", "f32_isnan", "expm1_reduced", "f32_scale", "f32_pow2")
_helper("f32_exp2", f"""fn f32_exp2(x: f32) -> f32 {{
  if (f32_isnan(x)) {{ return x; }}
  let xs = clamp(x, -151.0f, 129.0f);
  let n = round(xs);
  let r = xs - n;  // exact
  return f32_scale(1.0f + r * {_horner("r", EXP2M1)}, i32(n));
}}""", "f32_isnan", "f32_scale")
# tanh|x| = -y / (y + 2), y = expm1(-2|x|) in (-1, 0]: no overflow, no cancellation
_helper("f32_tanh", """fn f32_tanh(x: f32) -> f32 {
  if (f32_isnan(x) || x == 0.0f) { return x; }
  let y = f32_expm1(-2.0f * min(f32_abs(x), 40.0f));
  return f32_copysign(-y / (y + 2.0f), x);
}""", "f32_isnan", "f32_expm1", "f32_abs", "f32_copysign")
# t = exp(-|x|) in (0, 1]: 1/(1+t) for x >= 0, t/(1+t) below; exp never overflows
_helper("f32_sigmoid", """fn f32_sigmoid(x: f32) -> f32 {
  if (f32_isnan(x)) { return x; }
  let t = f32_exp(-f32_abs(x));
  let d = 1.0f + t;
  return select(t / d, 1.0f / d, x >= 0.0f);
}""", "f32_isnan", "f32_exp", "f32_abs")
# exp(a)/2 without premature overflow and expm1(a) (accurate for a < 1), a = |x| <= 90
_helper("half_exp_abs", """fn half_exp_abs(a: f32) -> vec2<f32> {
  let nm = expm1_reduced(a);
  let n = i32(nm.x);
  let s = f32_pow2(min(n, 24i));
  return vec2<f32>(f32_scale(1.0f + nm.y, n - 1i), s * nm.y + (s - 1.0f));
}""", "expm1_reduced", "f32_scale", "f32_pow2")
# |x| < 1: (e + e/(e+1))/2 with e = expm1|x| (no cancellation); above, h - 1/(4h)
_helper("f32_sinh", """fn f32_sinh(x: f32) -> f32 {
  if (f32_isnan(x) || x == 0.0f) { return x; }
  let a = min(f32_abs(x), 90.0f);
  let he = half_exp_abs(a);
  let small = 0.5f * (he.y + he.y / (he.y + 1.0f));
  return f32_copysign(select(he.x - 0.25f / he.x, small, a < 1.0f), x);
}""", "f32_isnan", "f32_abs", "half_exp_abs", "f32_copysign")
_helper("f32_cosh", """fn f32_cosh(x: f32) -> f32 {
  if (f32_isnan(x)) { return x; }
  let h = half_exp_abs(min(f32_abs(x), 90.0f)).x;
  return h + 0.25f / h;
}""", "f32_isnan", "f32_abs", "half_exp_abs")

# --------------------------------------------------------------------- log and its family
# cpu_llvm's (vecmath_log.py): x = 2**k m, m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact),
# s = f / (2 + f), log(1 + f) = f - (f**2/2 - s (f**2/2 + R)), R = the atanh series
# 2/3 s**2 + 2/5 s**4 + ... (fdlibm's arrangement), cut where s**(2k) < 2**-27 (s < 0.172)
LOG_SERIES = [2.0 / (2 * k + 1) for k in range(1, 6)]
LOG10_2 = math.log10(2)
LOG10_2_HI = math.ldexp(math.floor(math.ldexp(LOG10_2, 17)), -17)  # 16 bits: k * HI exact
LOG10_2_LO = LOG10_2 - LOG10_2_HI
_helper("log_reduced", f"""fn log_reduced(x: f32) -> vec2<f32> {{  // (k, log m), x finite and > 0
  var b = bitcast<u32>(x);
  var k = i32(b >> 23u) - 127i;
  if ((b >> 23u) == 0u) {{  // subnormal: normalize the significand on the bits
    let z = countLeadingZeros(b) - 8u;
    b = b << z;
    k = -126i - i32(z);
  }}
  var m = bitcast<f32>((b & 0x7fffffu) | 0x3f800000u);
  if (m > {_f(math.sqrt(2))}) {{ m = m * 0.5f; k += 1i; }}
  let f = m - 1.0f;
  let s = f / (2.0f + f);
  let z = s * s;
  let hfsq = 0.5f * f * f;
  return vec2<f32>(f32(k), f - (hfsq - s * (hfsq + z * {_horner("z", LOG_SERIES)})));
}}""")
# log's special values (NaN, -0/+0 -> -inf, x < 0 -> NaN, inf -> inf), or 0 to go on
_helper("log_special", """fn log_special(x: f32) -> f32 {
  let b = bitcast<u32>(x);
  if (f32_isnan(x) || b == 0x7f800000u) { return x; }
  if ((b & 0x7fffffffu) == 0u) { return bitcast<f32>(0xff800000u); }
  if ((b >> 31u) != 0u) { return bitcast<f32>(0x7fc00000u); }
  return 0.0f;
}""", "f32_isnan")
_helper("f32_log", f"""fn f32_log(x: f32) -> f32 {{
  let special = log_special(x);
  if (!(special == 0.0f)) {{ return special; }}
  let km = log_reduced(x);
  return km.x * {_f(LN2_HI)} + (km.x * {_f(LN2_LO)} + km.y);
}}""", "log_special", "log_reduced")
_helper("f32_log2", f"""fn f32_log2(x: f32) -> f32 {{
  let special = log_special(x);
  if (!(special == 0.0f)) {{ return special; }}
  let km = log_reduced(x);
  return km.x + km.y * {_f(LOG2E)};
}}""", "log_special", "log_reduced")
_helper("f32_log10", f"""fn f32_log10(x: f32) -> f32 {{
  let special = log_special(x);
  if (!(special == 0.0f)) {{ return special; }}
  let km = log_reduced(x);
  return km.x * {_f(LOG10_2_HI)} + (km.x * {_f(LOG10_2_LO)} + km.y * {_f(1 / math.log(10))});
}}""", "log_special", "log_reduced")
# u = 1 + x with its rounding error c (Fast2Sum, the larger first): log(u) + c/u
_helper("f32_log1p", f"""fn f32_log1p(x: f32) -> f32 {{
  if (f32_isnan(x) || x == 0.0f) {{ return x; }}
  if (x == -1.0f) {{ return bitcast<f32>(0xff800000u); }}
  if (x < -1.0f) {{ return bitcast<f32>(0x7fc00000u); }}
  if (f32_isinf(x)) {{ return x; }}
  let u = f32_unfolded(1.0f + x);
  if (u == 1.0f) {{ return x; }}
  let c = select(1.0f - (u - x), x - (u - 1.0f), f32_abs(x) < 1.0f);
  let km = log_reduced(u);
  return km.x * {_f(LN2_HI)} + (km.x * {_f(LN2_LO)} + (km.y + c / u));
}}""", "f32_isnan", "f32_isinf", "f32_abs", "log_reduced", "f32_unfolded")


# ---------------------------------------------------------------------- sin, cos and tan
# Payne-Hanek for every |x| > pi/4 (cpu_llvm's f32 reduction, vecmath_trig.py, in 32-bit
# words): |x| = M 2**E with a 24-bit integer M and -24 <= E <= 104, so x 2/pi mod 4 =
# (M W(E) mod 2**96) 2**-94 with W(E) the 96 bits of 2/pi from the fraction's bit E - 1
# (the bits before it add multiples of 4). The 94-bit fraction, rounded to [-1/2, 1/2)
# of a quadrant, keeps >= 60 bits after the worst cancellation an f32 can produce; its
# top 64 bits times pi/2 (a 32-bit constant) round once to r. No float arithmetic: the
# reduction is immune to what a shader compiler does to floats.


def _two_over_pi_words(count: int) -> list[int]:
    """The first 32 * count bits of 2/pi's fraction, in words (Machin's formula in
    integers, 64 guard bits)."""
    guard = 32 * count + 64

    def arctan_inv(k: int) -> int:  # atan(1/k) * 2**guard
        total, term, n, sign = 0, (1 << guard) // k, 1, 1
        while term:
            total += sign * (term // n)
            term //= k * k
            n, sign = n + 2, -sign
        return total

    bits = (2 << (guard + 32 * count)) // (16 * arctan_inv(5) - 4 * arctan_inv(239))
    return [(bits >> (32 * (count - 1 - k))) & 0xFFFFFFFF for k in range(count)]


PIO2_Q31 = round(math.pi / 2 * 2 ** 31)  # pi/2 in 32 bits (2**-32 relative: r stays within 0.5 + 2**-7 ulp)
# word k of the fraction's bits from bit 32k - 31 (word 0 is the zeros before the point)
_helper("two_over_pi_word", "fn two_over_pi_word(k: u32) -> u32 {\n  switch k {\n" + "".join(
    f"    case {k + 1}u: {{ return 0x{w:08x}u; }}\n" for k, w in enumerate(_two_over_pi_words(8)))
    + "    default: { return 0u; }\n  }\n}")
# 96 bits of 2/pi's fraction from bit `j0` (>= -25) on: (most significant word first)
_helper("two_over_pi_window", """fn two_over_pi_window(j0: i32) -> vec3<u32> {
  let o = u32(j0 + 31i);
  let w = o / 32u; let sh = o % 32u;
  var out = vec3<u32>();
  for (var t = 0u; t < 3u; t += 1u) {
    let next = select(two_over_pi_word(w + t + 1u) >> (32u - sh), 0u, sh == 0u);
    out[t] = (two_over_pi_word(w + t) << sh) | next;
  }
  return out;
}""", "two_over_pi_word")
# (quadrant mod 4, r) with x = quadrant pi/2 + r, |r| <= pi/4, for finite x
_helper("trig_reduce", f"""fn trig_reduce(x: f32) -> vec2<f32> {{
  let b = bitcast<u32>(x) & 0x7fffffffu;
  if (b <= 0x3f490fdau) {{ return vec2<f32>(0.0f, x); }}  // |x| <= pi/4
  let m = (b & 0x7fffffu) | 0x800000u;
  let e = i32(b >> 23u) - 150i;
  let win = two_over_pi_window(e - 1i);
  let p0 = u32_mul_wide(m, win.z); let p1 = u32_mul_wide(m, win.y);
  let mid = x64_add(vec2<u32>(p0.y, 0u), vec2<u32>(p1.x, 0u));
  let r0 = p0.x; let r1 = mid.x; let r2 = p1.y + m * win.x + mid.y;  // M W mod 2**96
  // the fraction as a signed 96-bit number (f2, f1, f0): negative from half a quadrant on
  var f2 = (r2 << 2u) | (r1 >> 30u); var f1 = (r1 << 2u) | (r0 >> 30u); var f0 = r0 << 2u;
  let negative = (f2 >> 31u) != 0u;
  var quadrant = (r2 >> 30u) + select(0u, 1u, negative);
  if (negative) {{  // two's complement: the magnitude
    f0 = ~f0 + 1u; f1 = ~f1 + select(0u, 1u, f0 == 0u); f2 = ~f2 + select(0u, 1u, f0 == 0u && f1 == 0u);
  }}
  var top = vec2<u32>(f1, f2); var low = f0; var n = 0u;  // the fraction's top 64 bits, normalized
  if (f2 == 0u) {{ top = vec2<u32>(f0, f1); low = 0u; n = 32u; }}
  var r = 0.0f;
  if (any(top != vec2<u32>())) {{
    let z = x64_clz(top);
    top = x64_shl(top, z) | vec2<u32>(select(0u, low >> (32u - z), z != 0u), 0u);
    n += z;
    let hi = u32_mul_wide(top.y, {PIO2_Q31}u); let lo = u32_mul_wide(top.x, {PIO2_Q31}u);
    let prod = x64_add(hi, vec2<u32>(lo.y, 0u)) | vec2<u32>(select(0u, 1u, lo.x != 0u), 0u);
    r = f32_compose(0u, x64_round(x64_shr_sticky(prod, 1u), -62i - i32(n), 24i, -149i));
  }}
  r = select(r, -r, negative);
  if ((bitcast<u32>(x) >> 31u) != 0u) {{ quadrant = 0u - quadrant; r = -r; }}
  return vec2<f32>(f32(quadrant & 3u), r);
}}""", "two_over_pi_window", "u32_mul_wide", "x64_add", "x64_clz", "x64_shl", "x64_shr_sticky", "x64_round",
        "f32_compose")
# Taylor series on |r| <= pi/4 (cpu_llvm's _SIN and _COS cut for f32: the first dropped
# term is below 2**-30 of the result)
SIN_SERIES = [(-1) ** k / math.factorial(2 * k + 1) for k in range(1, 6)]  # r**3 .. r**11
COS_SERIES = [(-1) ** k / math.factorial(2 * k) for k in range(2, 7)]  # r**4 .. r**12
# (sin r, cos r) of trig_reduce's r; cos as w = 1 - r**2/2 plus the tail and w's rounding
_helper("sincos_reduced", f"""fn sincos_reduced(r: f32) -> vec2<f32> {{
  let z = r * r;
  let hz = 0.5f * z;
  let w = f32_unfolded(1.0f - hz);
  let s = r + (r * z) * {_horner("z", SIN_SERIES)};
  return vec2<f32>(s, w + ((z * z) * {_horner("z", COS_SERIES)} + ((1.0f - w) - hz)));
}}""", "f32_unfolded")
_helper("sin_or_cos", """fn sin_or_cos(x: f32, shift: u32) -> f32 {
  if (!f32_isfinite(x)) { return bitcast<f32>(0x7fc00000u); }
  let qr = trig_reduce(x);
  let sc = sincos_reduced(qr.y);
  let q = u32(qr.x) + shift;
  let v = select(sc.x, sc.y, (q & 1u) != 0u);
  return select(v, -v, (q & 2u) != 0u);
}""", "f32_isfinite", "trig_reduce", "sincos_reduced")
_helper("f32_sin", """fn f32_sin(x: f32) -> f32 {
  if (x == 0.0f) { return x; }
  return sin_or_cos(x, 0u);
}""", "sin_or_cos")
_helper("f32_cos", "fn f32_cos(x: f32) -> f32 { return sin_or_cos(x, 1u); }", "sin_or_cos")
_helper("f32_tan", """fn f32_tan(x: f32) -> f32 {
  if (x == 0.0f) { return x; }
  if (!f32_isfinite(x)) { return bitcast<f32>(0x7fc00000u); }
  let qr = trig_reduce(x);
  let sc = sincos_reduced(qr.y);
  return select(sc.x / sc.y, -sc.y / sc.x, (u32(qr.x) & 1u) != 0u);
}""", "f32_isfinite", "trig_reduce", "sincos_reduced")


# ------------------------------------------------------------------ the inverse functions
# cpu_llvm's atan (vecmath_trig.py): |x| > 1 folds to pi/2 - atan(1/|x|); t in [0, 1] is
# reduced around c = k/8 by atan(t) = atan(c) + atan((t - c)/(1 + t c)), |u| <= 1/16,
# atan(c) a pair of f32 (hi + lo) from a 9-entry table, the series to u**9
ATAN_SERIES = [(-1) ** k / (2 * k + 1) for k in range(1, 5)]


def _pair(v: float) -> tuple[str, str]:
    """v as two f32 literals, hi + lo (about 48 bits)."""
    hi = float(np.float32(v))
    return _f(hi), _f(v - hi)


_ATAN_CASES = "".join(f"    case {k}i: {{ return vec2<f32>({', '.join(_pair(math.atan(k / 8)))}); }}\n"
                      for k in range(1, 9))
_helper("atan_table", "fn atan_table(k: i32) -> vec2<f32> {  // atan(k/8) as hi + lo\n  switch k {\n"
        + _ATAN_CASES + "    default: { return vec2<f32>(); }\n  }\n}")
_helper("atan01", f"""fn atan01(t: f32) -> f32 {{  // t in [0, 1]
  let k = i32(round(t * 8.0f));
  let c = f32(k) * 0.125f;
  let u = (t - c) / (1.0f + t * c);
  let z = u * u;
  let hl = atan_table(k);
  return hl.x + (hl.y + (u + (u * z) * {_horner("z", ATAN_SERIES)}));
}}""", "atan_table")
PIO2_HI, PIO2_LO = _pair(math.pi / 2)
PI_HI, PI_LO = _pair(math.pi)
_helper("pio2_minus", f"fn pio2_minus(r: f32) -> f32 {{ return {PIO2_HI} - (r - {PIO2_LO}); }}")
_helper("atan_pos", """fn atan_pos(a: f32) -> f32 {  // a >= 0 or +inf
  if (a > 1.0f) { return pio2_minus(atan01(1.0f / a)); }
  return atan01(a);
}""", "atan01", "pio2_minus")
_helper("f32_atan", """fn f32_atan(x: f32) -> f32 {
  if (f32_isnan(x)) { return x; }
  return f32_copysign(atan_pos(f32_abs(x)), x);
}""", "f32_isnan", "f32_copysign", "atan_pos", "f32_abs")
# asin(a) = atan(a / sqrt(1 - a**2)), 1 - a**2 as (1 - a)(1 + a): 1 - a is exact from 1/2 on
_helper("f32_asin", """fn f32_asin(x: f32) -> f32 {
  let a = f32_abs(x);
  if (f32_isnan(x) || x == 0.0f) { return x; }
  if (a > 1.0f) { return bitcast<f32>(0x7fc00000u); }
  return f32_copysign(atan_pos(a / sqrt((1.0f - a) * (1.0f + a))), x);
}""", "f32_isnan", "f32_abs", "f32_copysign", "atan_pos")
# acos(x) = 2 atan(sqrt((1 - x)/(1 + x)))
_helper("f32_acos", """fn f32_acos(x: f32) -> f32 {
  if (f32_isnan(x)) { return x; }
  if (f32_abs(x) > 1.0f) { return bitcast<f32>(0x7fc00000u); }
  return 2.0f * atan_pos(sqrt((1.0f - x) / (1.0f + x)));
}""", "f32_isnan", "f32_abs", "atan_pos")
# atan(min/max), then the folds pi/2 - r and pi - r, the sign of y; C99's infinities and zeros
_helper("f32_atan2", f"""fn f32_atan2(y: f32, x: f32) -> f32 {{
  if (f32_isnan(x) || f32_isnan(y)) {{ return x + y; }}
  let ax = f32_abs(x); let ay = f32_abs(y);
  let west = (bitcast<u32>(x) >> 31u) != 0u;
  var r: f32;
  if (f32_isinf(ay) && f32_isinf(ax)) {{ r = select({_f(math.pi / 4)}, {_f(3 * math.pi / 4)}, west); }}
  else if (f32_isinf(ay) || (ax == 0.0f && ay != 0.0f)) {{ r = {PIO2_HI}; }}
  else if (f32_isinf(ax) || ay == 0.0f) {{ r = select(0.0f, {PI_HI}, west); }}
  else {{
    r = atan01(min(ax, ay) / max(ax, ay));
    if (ay > ax) {{ r = pio2_minus(r); }}
    if (west) {{ r = {PI_HI} - (r - {PI_LO}); }}
  }}
  return f32_copysign(r, y);
}}""", "f32_isnan", "f32_abs", "f32_isinf", "atan01", "pio2_minus", "f32_copysign")
# cpu_llvm's (vecmath_log.py): asinh = log1p(a + a**2/(1 + sqrt(1 + a**2))), log(a) + ln2 for
# a > 2**12 (where 1 + a**2 is a**2 in f32); acosh = log1p(t + sqrt(2t + t**2)), t = x - 1;
# atanh = log1p(2a + 2a**2/(1 - a))/2 below 1/2, log1p(2a/(1 - a))/2 above
_helper("f32_asinh", f"""fn f32_asinh(x: f32) -> f32 {{
  if (f32_isnan(x) || x == 0.0f) {{ return x; }}
  let a = f32_abs(x);
  if (a > 4096.0f) {{ return f32_copysign(f32_log(a) + {_f(math.log(2))}, x); }}
  let a2 = a * a;
  return f32_copysign(f32_log1p(a + a2 / (1.0f + sqrt(1.0f + a2))), x);
}}""", "f32_isnan", "f32_abs", "f32_copysign", "f32_log", "f32_log1p")
_helper("f32_acosh", f"""fn f32_acosh(x: f32) -> f32 {{
  if (f32_isnan(x)) {{ return x; }}
  if (x < 1.0f) {{ return bitcast<f32>(0x7fc00000u); }}
  if (x > 4096.0f) {{ return f32_log(x) + {_f(math.log(2))}; }}
  let t = x - 1.0f;
  return f32_log1p(t + sqrt(2.0f * t + t * t));
}}""", "f32_isnan", "f32_log", "f32_log1p")
_helper("f32_atanh", """fn f32_atanh(x: f32) -> f32 {
  if (f32_isnan(x) || x == 0.0f) { return x; }
  let a = f32_abs(x);
  if (a > 1.0f) { return bitcast<f32>(0x7fc00000u); }
  if (a == 1.0f) { return f32_copysign(bitcast<f32>(0x7f800000u), x); }
  let v = select(2.0f * a / (1.0f - a), 2.0f * a + 2.0f * a * a / (1.0f - a), a < 0.5f);
  return f32_copysign(0.5f * f32_log1p(v), x);
}""", "f32_isnan", "f32_abs", "f32_copysign", "f32_log1p")
# both scaled by 2**-exponent(max) (exact, two steps), sqrt(a**2 + b**2), scaled back
_helper("f32_hypot", """fn f32_hypot(a: f32, b: f32) -> f32 {
  if (f32_isinf(a) || f32_isinf(b)) { return bitcast<f32>(0x7f800000u); }
  if (f32_isnan(a) || f32_isnan(b)) { return a + b; }
  let m = max(f32_abs(a), f32_abs(b));
  if (m == 0.0f) { return 0.0f; }
  let k = max(i32(bitcast<u32>(m) >> 23u), 1i) - 127i;
  let x = f32_scale(a, -k); let y = f32_scale(b, -k);
  return f32_scale(sqrt(x * x + y * y), k);
}""", "f32_isinf", "f32_isnan", "f32_abs", "f32_scale")
# cpu_llvm's cbrt: |x| = m 2**k, k = 3q + r, t = m 2**r in [1, 8), a cubic first guess,
# Newton steps y -= (y**3 - t) / (3 y**2), an exact scale by 2**q, the sign of x
_helper("f32_cbrt", """fn f32_cbrt(x: f32) -> f32 {
  if (!f32_isfinite(x) || x == 0.0f) { return x; }
  var b = bitcast<u32>(x) & 0x7fffffffu;
  var k = i32(b >> 23u) - 127i;
  if ((b >> 23u) == 0u) { let z = countLeadingZeros(b) - 8u; b = b << z; k = -126i - i32(z); }
  let q = i32(floor(f32(k) / 3.0f));
  let t = bitcast<f32>(((b & 0x7fffffu) | 0x3f800000u)) * f32(1u << u32(k - 3i * q));
  var y = 0.4956f + t * (0.6173f + t * (-0.1177f + t * 0.00848f));
  for (var i = 0; i < 4; i += 1) { y = y - (y * y * y - t) / (3.0f * y * y); }
  return f32_copysign(f32_scale(y, q), x);
}""", "f32_isfinite", "f32_copysign", "f32_scale")


# ------------------------------------------------------------------------- erf and erfc
# cpu_llvm's (vecmath_erf.py, whose coefficients come from its scripts/fit_erf.py):
# erf(x) = x + x Q(x**2) for |x| < 1; elsewhere both from erfc(a) = exp(-a**2) g(a), a = |x|,
# a g(a) a polynomial in a - 0.75 on [0.5, 1] and in 1/a - center on [1, 2], [2, 4],
# [4, 27.5]; exp(-a**2) with a**2 = hi + lo exactly (Dekker's product on a split made on
# the bits) as 2**n (1 + m)(1 - lo); erfc(x) = 2 - erfc(-x) below -0.84375 and 1 - erf(x)
# above, with 1 - x as an exact pair.
ERF_Q = [
    0.1283791670955126, -0.37612638903183754, 0.11283791670955126, -0.026866170645131252,
    0.005223977625442175, -0.0008548327023449497, 0.00012055332981694495, -1.4925650353787866e-05,
    1.6462114205798046e-06, -1.6365840648222765e-07, 1.4807117719731329e-08,
    -1.2289529419960295e-09, 9.412558594992829e-11, -6.639294901316118e-12, 4.117309460970657e-13,
    -1.746609279318069e-14]
ERFCX_PIECES = [  # (upper end in a, center, coefficients)
    (1.0, 0.75, [
        0.3802032377198586, 0.2309581315512983, -0.19475409299232166, 0.13358108505513747,
        -0.07974315509920456, 0.04286759599780736, -0.021180363040229983, 0.009750549443029364,
        -0.004223304276640562, 0.001733753314650335, -0.0006784490642780263, 0.0002542348814504876,
        -9.157501514708721e-05, 3.180613191739838e-05, -1.0680663859941079e-05,
        3.4756755076941763e-06, -1.0982471462637695e-06, 3.3744392594101176e-07,
        -1.0104558090232076e-07, 3.030842647122462e-08, -8.638562386214021e-09]),
    (2.0, 0.75, [
        0.46817959203854037, -0.16908097778547482, 0.019347872628690175, 0.040293199742531975,
        -0.050465735252147266, 0.037688720011266, -0.018116937855262402, 0.0005608110503725641,
        0.011128915210473087, -0.016227456442334403, 0.015771739275268242, -0.011588180814476403,
        0.005640025891725786, 0.0003726336497046273, -0.005213582220963439, 0.00815532513186202,
        -0.009030235100484764, 0.008322182900980643, -0.0059838258528661275, 0.000633621876656076,
        0.0033898654796065686]),
    (4.0, 0.375, [
        0.530860349316975, -0.1515855295741559, -0.09203998771159042, 0.17726803412603195,
        -0.11628192691538146, -0.03780807551873516, 0.19624233325428372, -0.25568449601817994,
        0.13611580517080926, 0.1702846835722452, -0.5550809021118924, 0.7810663257726871,
        -0.5348838598321909, -0.42707313186799806, 2.0393411600518263, -3.6533894468516057,
        3.8886202132113232, -0.8938262562788278, -7.139811094288048, 21.41211382711469,
        -29.803033857317892]),
    (27.5, 0.140625, [
        0.5587688652020621, -0.07495228694130146, -0.23739071037157322, 0.18876771227541392,
        0.18915955252834898, -0.4873347872612402, 0.08310389800913731, 1.1201012057827873,
        -1.6735978420548503, -1.1969551105121838, 7.7298409344949, -8.32449357918503,
        -17.044481952980014, 69.25827775327264, -59.11466651978234, -220.70998039034362,
        798.185038722838, -567.654669601496, -3145.870730788213, 8559.310847750694,
        -3315.903700677924]),
]
ERFC_SMALL = 0.84375  # erfc(x) below: 1 - erf(x)
_helper("erf_q", f"fn erf_q(z: f32) -> f32 {{ return {_horner('z', ERF_Q)}; }}")
# a**2 = (hi, lo) exactly: a split into 12 + 12 bits on the bits, every partial product exact
_helper("f32_square_exact", """fn f32_square_exact(a: f32) -> vec2<f32> {
  let hi = a * a;
  let ah = bitcast<f32>(bitcast<u32>(a) & 0xfffff000u);
  let al = a - ah;
  return vec2<f32>(hi, ((ah * ah - hi) + 2.0f * ah * al) + al * al);
}""")
_ERFC_BODY = "".join(
    f"  {'if' if k == 0 else 'else if'} (a < {_f(end)}) {{ u = {'a' if k == 0 else '1.0f / a'} - {_f(center)}; "
    f"p = {_horner('u', coefficients)}; }}\n"
    for k, (end, center, coefficients) in enumerate(ERFCX_PIECES[:-1]))
_LAST = ERFCX_PIECES[-1]
_helper("erfc_big", f"""fn erfc_big(a: f32) -> f32 {{  // a in [0.5, 10.1]
  var u: f32; var p: f32;
{_ERFC_BODY}  else {{ u = 1.0f / a - {_f(_LAST[1])}; p = {_horner('u', _LAST[2])}; }}
  let g = p / a;  // erfc(a) exp(a**2)
  let sq = f32_square_exact(a);
  let nm = expm1_reduced(-sq.x);  // exp(-hi) = 2**n (1 + m)
  let m = nm.y - sq.y * (1.0f + nm.y);  // exp(-hi - lo) = 2**n (1 + m)(1 - lo)
  return f32_scale(m * g + g, i32(nm.x));
}}""", "f32_square_exact", "expm1_reduced", "f32_scale")
_helper("f32_erf", """fn f32_erf(x: f32) -> f32 {
  if (f32_isnan(x)) { return x; }
  let a = f32_abs(x);
  if (a < 1.0f) { return x + x * erf_q(x * x); }
  return f32_copysign(1.0f - erfc_big(min(a, 6.0f)), x);
}""", "f32_isnan", "f32_abs", "erf_q", "erfc_big", "f32_copysign")
# below ERFC_SMALL: (1 - x) + (-x Q(x**2)), 1 - x = s + err exactly (Fast2Sum, |x| < 1,
# s hidden from the optimizer so that s - 1 is computed)
_helper("f32_erfc", f"""fn f32_erfc(x: f32) -> f32 {{
  if (f32_isnan(x)) {{ return x; }}
  let a = f32_abs(x);
  if (a < {_f(ERFC_SMALL)}) {{
    let s = f32_unfolded(1.0f - x);
    let err = -x - (s - 1.0f);
    return s + (err - x * erf_q(x * x));
  }}
  let big = erfc_big(min(a, 10.1f));
  return select(big, 2.0f - big, (bitcast<u32>(x) >> 31u) != 0u);
}}""", "f32_isnan", "f32_abs", "f32_unfolded", "erf_q", "erfc_big")


# ------------------------------------------------------------------------------------ pow
# cpu_llvm's exp(y log|x|) with the logarithm as a double-double becomes, in f32 pairs,
# 2**(y log2|x|): log2|x| = k + log2(m) to about 2**-40 relative (s = f/(2 + f) as an
# exact pair, the atanh series' leading 2s exact and its tail in f32, times 1/ln2 as a
# pair), y times it as an exact pair (Dekker's product: operands split into 12 + 12 bits
# on the bits, every partial product exact), then 2**(hi + lo) = 2**n 2**r, r = (hi - n)
# + lo. The rounding errors of the sums are recovered by TwoSum on values hidden from
# the optimizer (f32_unfolded), which would otherwise fold them to 0.
_helper("f32_two_prod", """fn f32_two_prod(a: f32, b: f32) -> vec2<f32> {  // a * b = hi + lo exactly
  let p = a * b;
  let ah = bitcast<f32>(bitcast<u32>(a) & 0xfffff000u); let al = a - ah;
  let bh = bitcast<f32>(bitcast<u32>(b) & 0xfffff000u); let bl = b - bh;
  return vec2<f32>(p, (((ah * bh - p) + ah * bl) + al * bh) + al * bl);
}""")
_helper("f32_two_sum", """fn f32_two_sum(a: f32, b: f32) -> vec2<f32> {  // a + b = hi + lo exactly
  let s = f32_unfolded(a + b);
  let bb = f32_unfolded(s - a);
  return vec2<f32>(s, (a - (s - bb)) + (b - bb));
}""", "f32_unfolded")
INV_LN2_HI, INV_LN2_LO = _pair(1 / math.log(2))
TWO_THIRDS_HI, TWO_THIRDS_LO = _pair(2 / 3)
_helper("log2_pair", f"""fn log2_pair(x: f32) -> vec2<f32> {{  // log2(x) = hi + lo, x finite and > 0
  var b = bitcast<u32>(x);
  var k = i32(b >> 23u) - 127i;
  if ((b >> 23u) == 0u) {{
    let z = countLeadingZeros(b) - 8u;
    b = b << z;
    k = -126i - i32(z);
  }}
  var m = bitcast<f32>((b & 0x7fffffu) | 0x3f800000u);
  if (m > {_f(math.sqrt(2))}) {{ m = m * 0.5f; k += 1i; }}
  let f = m - 1.0f;
  let d = f32_unfolded(2.0f + f);
  let dl = f - (d - 2.0f);  // 2 + f = d + dl exactly
  let sh = f32_unfolded(f / d);
  let q = f32_two_prod(sh, d);
  let sl = (((f - q.x) - q.y) - sh * dl) / d;  // s = sh + sl
  // log(m) = 2s + 2/3 s**3 + s**5 R(s**2): the cube and its coefficient as exact pairs
  // (s**3 = sh**3 + 3 sh**2 sl to first order), the rest in f32 (below 2**-13 of log m)
  let zz = f32_two_prod(sh, sh);
  let cube = f32_two_prod(sh, zz.x);
  let cube_lo = cube.y + sh * zz.y + 3.0f * zz.x * sl;
  let t = f32_two_prod(cube.x, {TWO_THIRDS_HI});
  let t_lo = t.y + (cube.x * {TWO_THIRDS_LO} + cube_lo * {TWO_THIRDS_HI});
  let z = zz.x;
  let rest = (cube.x * z) * {_horner("z", LOG_SERIES[1:])};
  let lm = f32_two_sum(2.0f * sh, t.x);
  let lm_lo = lm.y + (2.0f * sl + (t_lo + rest));
  let p = f32_two_prod(lm.x, {INV_LN2_HI});  // times 1/ln2, then plus k
  let u = f32_two_sum(f32(k), p.x);
  return vec2<f32>(u.x, u.y + (p.y + (lm.x * {INV_LN2_LO} + lm_lo * {INV_LN2_HI})));
}}""", "f32_unfolded", "f32_two_prod", "f32_two_sum")
# |x|**y for finite x != 0 and finite y != 0: 2**(y log2|x|), +inf / +0 beyond the range
_helper("pow_pos", f"""fn pow_pos(a: f32, y: f32) -> f32 {{
  let l = log2_pair(a);
  let p = f32_two_prod(y, l.x);
  let hi = p.x; let lo = p.y + y * l.y;
  if (hi > 130.0f) {{ return bitcast<f32>(0x7f800000u); }}
  if (hi < -152.0f) {{ return 0.0f; }}
  let n = round(hi);
  let r = (hi - n) + lo;
  return f32_scale(1.0f + r * {_horner("r", EXP2M1)}, i32(n));
}}""", "log2_pair", "f32_two_prod", "f32_scale")
# C99 F.9.4.4 case by case (docs/isa.md, POW), then the sign of a negative base
_helper("f32_pow", """fn f32_pow(x: f32, y: f32) -> f32 {
  let ax = f32_abs(x); let ay = f32_abs(y);
  if (y == 0.0f || x == 1.0f) { return 1.0f; }
  if (f32_isnan(x) || f32_isnan(y)) { return x + y; }
  let whole = floor(y) == y;
  let odd = whole && ay < 16777216.0f && (i32(ay) & 1i) == 1i;
  let negative = (bitcast<u32>(x) >> 31u) != 0u;
  let inf = bitcast<f32>(0x7f800000u);
  if (f32_isinf(y)) {
    if (ax == 1.0f) { return 1.0f; }
    return select(0.0f, inf, (ax > 1.0f) == (y > 0.0f));
  }
  var mag: f32;
  if (ax == 0.0f) { mag = select(inf, 0.0f, y > 0.0f); }
  else if (f32_isinf(ax)) { mag = select(0.0f, inf, y > 0.0f); }
  else {
    if (negative && !whole) { return bitcast<f32>(0x7fc00000u); }
    mag = pow_pos(ax, y);
  }
  return select(mag, -mag, negative && odd);
}""", "f32_abs", "f32_isnan", "f32_isinf", "pow_pos")


# ------------------------------------------------------------------------------ dispatch
MATH_UNARY = frozenset({"EXP", "EXP2", "EXPM1", "TANH", "SIGMOID", "SINH", "COSH", "LOG", "LOG2", "LOG10", "LOG1P",
                        "SIN", "COS", "TAN", "ATAN", "ASIN", "ACOS", "ASINH", "ACOSH", "ATANH", "CBRT",
                        "ERF", "ERFC"})
MATH_BINARY = frozenset({"FMOD", "REM", "ATAN2", "HYPOT", "POW"})


def math_call(op: str, is_f16: bool, *args: str) -> str:
    """The WGSL value of the float op `op` (FMA, or one of MATH_UNARY / MATH_BINARY) at
    f32, or at f16 when `is_f16` (registers hold f16 values as f32)."""
    if op == "FMA":
        return f"{'f16' if is_f16 else 'f32'}_fma({', '.join(args)})"
    value = f"f32_{op.lower()}({', '.join(args)})"
    return f"f16_round({value})" if is_f16 else value
