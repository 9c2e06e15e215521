"""exp, log and pow in WGSL (wgsl_math): cpu_llvm's exponential and logarithm families
(hologram_cpu_llvm/vecmath_exp.py, vecmath_log.py) evaluated in f32, and pow in pairs of
f32 where cpu_llvm uses a double-double logarithm."""

from __future__ import annotations

import math

from .wgsl_math_core import f32_literal, f32_pair, helper, horner

__all__ = ["LOG2E", "LN2_HI", "LN2_LO", "EXP_F32_POLY", "EXPM1_TAIL", "EXP2M1", "LOG_SERIES"]

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

helper("f32_pow2", "fn f32_pow2(n: i32) -> f32 { return bitcast<f32>(u32(n + 127i) << 23u); }")  # -126..127
# p * 2**n for |n| <= 252, rounded once: the first factor is exact (p is near 1)
helper("f32_scale", """fn f32_scale(p: f32, n: i32) -> f32 {
  let h = n / 2i;
  return (p * f32_pow2(h)) * f32_pow2(n - h);
}""", "f32_pow2")
helper("f32_exp", f"""fn f32_exp(x: f32) -> f32 {{
  if (f32_isnan(x)) {{ return x; }}
  let xs = clamp(x, -104.0f, 89.0f);  // beyond: 0 and inf
  let n = round(xs * {f32_literal(LOG2E)});
  let r = (xs - n * {f32_literal(LN2_HI)}) - n * {f32_literal(LN2_LO)};
  return f32_scale({horner("r", EXP_F32_POLY)}, i32(n));
}}""", "f32_isnan", "f32_scale")
# (n, expm1(r)) for x = n ln2 + r, |x| <= 104
helper("expm1_reduced", f"""fn expm1_reduced(x: f32) -> vec2<f32> {{
  let n = round(x * {f32_literal(LOG2E)});
  let r = (x - n * {f32_literal(LN2_HI)}) - n * {f32_literal(LN2_LO)};
  return vec2<f32>(n, r + (r * r) * {horner("r", EXPM1_TAIL)});
}}""")
# 2**n (1 + m) - 1 = 2**n m + (2**n - 1): both terms exact for n <= 24; above, the -1 is
# below half an ulp. x < -40: -1 (the true value rounds to -1 from -17.4 on).
helper("f32_expm1", """fn f32_expm1(x: f32) -> f32 {
  if (f32_isnan(x) || x == 0.0f) { return x; }
  if (x < -40.0f) { return -1.0f; }
  let nm = expm1_reduced(min(x, 89.0f));
  let n = i32(nm.x);
  if (n > 24i) { return f32_scale(1.0f + nm.y, n); }
  let s = f32_pow2(n);
  return s * nm.y + (s - 1.0f);
}""", "f32_isnan", "expm1_reduced", "f32_scale", "f32_pow2")
helper("f32_exp2", f"""fn f32_exp2(x: f32) -> f32 {{
  if (f32_isnan(x)) {{ return x; }}
  let xs = clamp(x, -151.0f, 129.0f);
  let n = round(xs);
  let r = xs - n;  // exact
  return f32_scale(1.0f + r * {horner("r", EXP2M1)}, i32(n));
}}""", "f32_isnan", "f32_scale")
# tanh|x| = -y / (y + 2), y = expm1(-2|x|) in (-1, 0]: no overflow, no cancellation
helper("f32_tanh", """fn f32_tanh(x: f32) -> f32 {
  if (f32_isnan(x) || x == 0.0f) { return x; }
  let y = f32_expm1(-2.0f * min(f32_abs(x), 40.0f));
  return f32_copysign(-y / (y + 2.0f), x);
}""", "f32_isnan", "f32_expm1", "f32_abs", "f32_copysign")
# t = exp(-|x|) in (0, 1]: 1/(1+t) for x >= 0, t/(1+t) below; exp never overflows
helper("f32_sigmoid", """fn f32_sigmoid(x: f32) -> f32 {
  if (f32_isnan(x)) { return x; }
  let t = f32_exp(-f32_abs(x));
  let d = 1.0f + t;
  return select(t / d, 1.0f / d, x >= 0.0f);
}""", "f32_isnan", "f32_exp", "f32_abs")
# exp(a)/2 without premature overflow and expm1(a) (accurate for a < 1), a = |x| <= 90
helper("half_exp_abs", """fn half_exp_abs(a: f32) -> vec2<f32> {
  let nm = expm1_reduced(a);
  let n = i32(nm.x);
  let s = f32_pow2(min(n, 24i));
  return vec2<f32>(f32_scale(1.0f + nm.y, n - 1i), s * nm.y + (s - 1.0f));
}""", "expm1_reduced", "f32_scale", "f32_pow2")
# |x| < 1: (e + e/(e+1))/2 with e = expm1|x| (no cancellation); above, h - 1/(4h)
helper("f32_sinh", """fn f32_sinh(x: f32) -> f32 {
  if (f32_isnan(x) || x == 0.0f) { return x; }
  let a = min(f32_abs(x), 90.0f);
  let he = half_exp_abs(a);
  let small = 0.5f * (he.y + he.y / (he.y + 1.0f));
  return f32_copysign(select(he.x - 0.25f / he.x, small, a < 1.0f), x);
}""", "f32_isnan", "f32_abs", "half_exp_abs", "f32_copysign")
helper("f32_cosh", """fn f32_cosh(x: f32) -> f32 {
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
helper("log_reduced", f"""fn log_reduced(x: f32) -> vec2<f32> {{  // (k, log m), x finite and > 0
  var b = bitcast<u32>(x);
  var k = i32(b >> 23u) - 127i;
  if ((b >> 23u) == 0u) {{  // subnormal: normalize the significand on the bits
    let z = countLeadingZeros(b) - 8u;
    b = b << z;
    k = -126i - i32(z);
  }}
  var m = bitcast<f32>((b & 0x7fffffu) | 0x3f800000u);
  if (m > {f32_literal(math.sqrt(2))}) {{ m = m * 0.5f; k += 1i; }}
  let f = m - 1.0f;
  let s = f / (2.0f + f);
  let z = s * s;
  let hfsq = 0.5f * f * f;
  return vec2<f32>(f32(k), f - (hfsq - s * (hfsq + z * {horner("z", LOG_SERIES)})));
}}""")
# log's special values (NaN, -0/+0 -> -inf, x < 0 -> NaN, inf -> inf), or 0 to go on
helper("log_special", """fn log_special(x: f32) -> f32 {
  let b = bitcast<u32>(x);
  if (f32_isnan(x) || b == 0x7f800000u) { return x; }
  if ((b & 0x7fffffffu) == 0u) { return bitcast<f32>(0xff800000u); }
  if ((b >> 31u) != 0u) { return bitcast<f32>(0x7fc00000u); }
  return 0.0f;
}""", "f32_isnan")
helper("f32_log", f"""fn f32_log(x: f32) -> f32 {{
  let special = log_special(x);
  if (!(special == 0.0f)) {{ return special; }}
  let km = log_reduced(x);
  return km.x * {f32_literal(LN2_HI)} + (km.x * {f32_literal(LN2_LO)} + km.y);
}}""", "log_special", "log_reduced")
helper("f32_log2", f"""fn f32_log2(x: f32) -> f32 {{
  let special = log_special(x);
  if (!(special == 0.0f)) {{ return special; }}
  let km = log_reduced(x);
  return km.x + km.y * {f32_literal(LOG2E)};
}}""", "log_special", "log_reduced")
helper("f32_log10", f"""fn f32_log10(x: f32) -> f32 {{
  let special = log_special(x);
  if (!(special == 0.0f)) {{ return special; }}
  let km = log_reduced(x);
  return km.x * {f32_literal(LOG10_2_HI)} + (km.x * {f32_literal(LOG10_2_LO)} + km.y * {f32_literal(1 / math.log(10))});
}}""", "log_special", "log_reduced")
# u = 1 + x with its rounding error c (Fast2Sum, the larger first): log(u) + c/u
helper("f32_log1p", f"""fn f32_log1p(x: f32) -> f32 {{
  if (f32_isnan(x) || x == 0.0f) {{ return x; }}
  if (x == -1.0f) {{ return bitcast<f32>(0xff800000u); }}
  if (x < -1.0f) {{ return bitcast<f32>(0x7fc00000u); }}
  if (f32_isinf(x)) {{ return x; }}
  let u = f32_unfolded(1.0f + x);
  if (u == 1.0f) {{ return x; }}
  let c = select(1.0f - (u - x), x - (u - 1.0f), f32_abs(x) < 1.0f);
  let km = log_reduced(u);
  return km.x * {f32_literal(LN2_HI)} + (km.x * {f32_literal(LN2_LO)} + (km.y + c / u));
}}""", "f32_isnan", "f32_isinf", "f32_abs", "log_reduced", "f32_unfolded")


# ------------------------------------------------------------------------------------ pow
# cpu_llvm's exp(y log|x|) with the logarithm as a double-double becomes, in f32 pairs,
# 2**(y log2|x|): log2|x| = k + log2(m) to about 2**-40 relative (s = f/(2 + f) as an
# exact pair, the atanh series' leading 2s exact and its tail in f32, times 1/ln2 as a
# pair), y times it as an exact pair (Dekker's product: operands split into 12 + 12 bits
# on the bits, every partial product exact), then 2**(hi + lo) = 2**n 2**r, r = (hi - n)
# + lo. The rounding errors of the sums are recovered by TwoSum on values hidden from
# the optimizer (f32_unfolded), which would otherwise fold them to 0.
INV_LN2_HI, INV_LN2_LO = f32_pair(1 / math.log(2))
TWO_THIRDS_HI, TWO_THIRDS_LO = f32_pair(2 / 3)
helper("log2_pair", f"""fn log2_pair(x: f32) -> vec2<f32> {{  // log2(x) = hi + lo, x finite and > 0
  var b = bitcast<u32>(x);
  var k = i32(b >> 23u) - 127i;
  if ((b >> 23u) == 0u) {{
    let z = countLeadingZeros(b) - 8u;
    b = b << z;
    k = -126i - i32(z);
  }}
  var m = bitcast<f32>((b & 0x7fffffu) | 0x3f800000u);
  if (m > {f32_literal(math.sqrt(2))}) {{ m = m * 0.5f; k += 1i; }}
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
  let rest = (cube.x * z) * {horner("z", LOG_SERIES[1:])};
  let lm = f32_two_sum(2.0f * sh, t.x);
  let lm_lo = lm.y + (2.0f * sl + (t_lo + rest));
  let p = f32_two_prod(lm.x, {INV_LN2_HI});  // times 1/ln2, then plus k
  let u = f32_two_sum(f32(k), p.x);
  return vec2<f32>(u.x, u.y + (p.y + (lm.x * {INV_LN2_LO} + lm_lo * {INV_LN2_HI})));
}}""", "f32_unfolded", "f32_two_prod", "f32_two_sum")
# |x|**y for finite x != 0 and finite y != 0: 2**(y log2|x|), +inf / +0 beyond the range
helper("pow_pos", f"""fn pow_pos(a: f32, y: f32) -> f32 {{
  let l = log2_pair(a);
  let p = f32_two_prod(y, l.x);
  let hi = p.x; let lo = p.y + y * l.y;
  if (hi > 130.0f) {{ return bitcast<f32>(0x7f800000u); }}
  if (hi < -152.0f) {{ return 0.0f; }}
  let n = round(hi);
  let r = (hi - n) + lo;
  return f32_scale(1.0f + r * {horner("r", EXP2M1)}, i32(n));
}}""", "log2_pair", "f32_two_prod", "f32_scale")
# C99 F.9.4.4 case by case (docs/isa.md, POW), then the sign of a negative base
helper("f32_pow", """fn f32_pow(x: f32, y: f32) -> f32 {
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
