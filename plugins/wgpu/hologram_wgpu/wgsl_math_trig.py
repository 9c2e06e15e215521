"""sin, cos, tan, their inverses, the inverse hyperbolic functions, hypot, cbrt, erf and
erfc in WGSL (wgsl_math): cpu_llvm's algorithms (hologram_cpu_llvm/vecmath_trig.py,
vecmath_log.py, vecmath_erf.py) evaluated in f32, the trig reduction in integers."""

from __future__ import annotations

import math

from .wgsl_math_core import f32_literal, f32_pair, helper, horner

__all__ = ["SIN_SERIES", "COS_SERIES", "ATAN_SERIES", "ERF_Q", "ERFCX_PIECES"]

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
helper("two_over_pi_word", "fn two_over_pi_word(k: u32) -> u32 {\n  switch k {\n" + "".join(
    f"    case {k + 1}u: {{ return 0x{w:08x}u; }}\n" for k, w in enumerate(_two_over_pi_words(8)))
    + "    default: { return 0u; }\n  }\n}")
# 96 bits of 2/pi's fraction from bit `j0` (>= -25) on: (most significant word first)
helper("two_over_pi_window", """fn two_over_pi_window(j0: i32) -> vec3<u32> {
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
helper("trig_reduce", f"""fn trig_reduce(x: f32) -> vec2<f32> {{
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
helper("sincos_reduced", f"""fn sincos_reduced(r: f32) -> vec2<f32> {{
  let z = r * r;
  let hz = 0.5f * z;
  let w = f32_unfolded(1.0f - hz);
  let s = r + (r * z) * {horner("z", SIN_SERIES)};
  return vec2<f32>(s, w + ((z * z) * {horner("z", COS_SERIES)} + ((1.0f - w) - hz)));
}}""", "f32_unfolded")
helper("sin_or_cos", """fn sin_or_cos(x: f32, shift: u32) -> f32 {
  if (!f32_isfinite(x)) { return bitcast<f32>(0x7fc00000u); }
  let qr = trig_reduce(x);
  let sc = sincos_reduced(qr.y);
  let q = u32(qr.x) + shift;
  let v = select(sc.x, sc.y, (q & 1u) != 0u);
  return select(v, -v, (q & 2u) != 0u);
}""", "f32_isfinite", "trig_reduce", "sincos_reduced")
helper("f32_sin", """fn f32_sin(x: f32) -> f32 {
  if (x == 0.0f) { return x; }
  return sin_or_cos(x, 0u);
}""", "sin_or_cos")
helper("f32_cos", "fn f32_cos(x: f32) -> f32 { return sin_or_cos(x, 1u); }", "sin_or_cos")
helper("f32_tan", """fn f32_tan(x: f32) -> f32 {
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


_ATAN_CASES = "".join(f"    case {k}i: {{ return vec2<f32>({', '.join(f32_pair(math.atan(k / 8)))}); }}\n"
                      for k in range(1, 9))
helper("atan_table", "fn atan_table(k: i32) -> vec2<f32> {  // atan(k/8) as hi + lo\n  switch k {\n"
        + _ATAN_CASES + "    default: { return vec2<f32>(); }\n  }\n}")
helper("atan01", f"""fn atan01(t: f32) -> f32 {{  // t in [0, 1]
  let k = i32(round(t * 8.0f));
  let c = f32(k) * 0.125f;
  let u = (t - c) / (1.0f + t * c);
  let z = u * u;
  let hl = atan_table(k);
  return hl.x + (hl.y + (u + (u * z) * {horner("z", ATAN_SERIES)}));
}}""", "atan_table")
PIO2_HI, PIO2_LO = f32_pair(math.pi / 2)
PI_HI, PI_LO = f32_pair(math.pi)
helper("pio2_minus", f"fn pio2_minus(r: f32) -> f32 {{ return {PIO2_HI} - (r - {PIO2_LO}); }}")
helper("atan_pos", """fn atan_pos(a: f32) -> f32 {  // a >= 0 or +inf
  if (a > 1.0f) { return pio2_minus(atan01(1.0f / a)); }
  return atan01(a);
}""", "atan01", "pio2_minus")
helper("f32_atan", """fn f32_atan(x: f32) -> f32 {
  if (f32_isnan(x)) { return x; }
  return f32_copysign(atan_pos(f32_abs(x)), x);
}""", "f32_isnan", "f32_copysign", "atan_pos", "f32_abs")
# asin(a) = atan(a / sqrt(1 - a**2)), 1 - a**2 as (1 - a)(1 + a): 1 - a is exact from 1/2 on
helper("f32_asin", """fn f32_asin(x: f32) -> f32 {
  let a = f32_abs(x);
  if (f32_isnan(x) || x == 0.0f) { return x; }
  if (a > 1.0f) { return bitcast<f32>(0x7fc00000u); }
  return f32_copysign(atan_pos(a / sqrt((1.0f - a) * (1.0f + a))), x);
}""", "f32_isnan", "f32_abs", "f32_copysign", "atan_pos")
# acos(x) = 2 atan(sqrt((1 - x)/(1 + x)))
helper("f32_acos", """fn f32_acos(x: f32) -> f32 {
  if (f32_isnan(x)) { return x; }
  if (f32_abs(x) > 1.0f) { return bitcast<f32>(0x7fc00000u); }
  return 2.0f * atan_pos(sqrt((1.0f - x) / (1.0f + x)));
}""", "f32_isnan", "f32_abs", "atan_pos")
# atan(min/max), then the folds pi/2 - r and pi - r, the sign of y; C99's infinities and zeros
helper("f32_atan2", f"""fn f32_atan2(y: f32, x: f32) -> f32 {{
  if (f32_isnan(x) || f32_isnan(y)) {{ return x + y; }}
  let ax = f32_abs(x); let ay = f32_abs(y);
  let west = (bitcast<u32>(x) >> 31u) != 0u;
  var r: f32;
  if (f32_isinf(ay) && f32_isinf(ax)) {{ r = select({f32_literal(math.pi / 4)}, {f32_literal(3 * math.pi / 4)}, west); }}
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
helper("f32_asinh", f"""fn f32_asinh(x: f32) -> f32 {{
  if (f32_isnan(x) || x == 0.0f) {{ return x; }}
  let a = f32_abs(x);
  if (a > 4096.0f) {{ return f32_copysign(f32_log(a) + {f32_literal(math.log(2))}, x); }}
  let a2 = a * a;
  return f32_copysign(f32_log1p(a + a2 / (1.0f + sqrt(1.0f + a2))), x);
}}""", "f32_isnan", "f32_abs", "f32_copysign", "f32_log", "f32_log1p")
helper("f32_acosh", f"""fn f32_acosh(x: f32) -> f32 {{
  if (f32_isnan(x)) {{ return x; }}
  if (x < 1.0f) {{ return bitcast<f32>(0x7fc00000u); }}
  if (x > 4096.0f) {{ return f32_log(x) + {f32_literal(math.log(2))}; }}
  let t = x - 1.0f;
  return f32_log1p(t + sqrt(2.0f * t + t * t));
}}""", "f32_isnan", "f32_log", "f32_log1p")
helper("f32_atanh", """fn f32_atanh(x: f32) -> f32 {
  if (f32_isnan(x) || x == 0.0f) { return x; }
  let a = f32_abs(x);
  if (a > 1.0f) { return bitcast<f32>(0x7fc00000u); }
  if (a == 1.0f) { return f32_copysign(bitcast<f32>(0x7f800000u), x); }
  let v = select(2.0f * a / (1.0f - a), 2.0f * a + 2.0f * a * a / (1.0f - a), a < 0.5f);
  return f32_copysign(0.5f * f32_log1p(v), x);
}""", "f32_isnan", "f32_abs", "f32_copysign", "f32_log1p")
# both scaled by 2**-exponent(max) (exact, two steps), sqrt(a**2 + b**2), scaled back
helper("f32_hypot", """fn f32_hypot(a: f32, b: f32) -> f32 {
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
helper("f32_cbrt", """fn f32_cbrt(x: f32) -> f32 {
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
helper("erf_q", f"fn erf_q(z: f32) -> f32 {{ return {horner('z', ERF_Q)}; }}")
# a**2 = (hi, lo) exactly: a split into 12 + 12 bits on the bits, every partial product exact
helper("f32_square_exact", """fn f32_square_exact(a: f32) -> vec2<f32> {
  let hi = a * a;
  let ah = bitcast<f32>(bitcast<u32>(a) & 0xfffff000u);
  let al = a - ah;
  return vec2<f32>(hi, ((ah * ah - hi) + 2.0f * ah * al) + al * al);
}""")
_ERFC_BODY = "".join(
    f"  {'if' if k == 0 else 'else if'} (a < {f32_literal(end)}) {{ "
    f"u = {'a' if k == 0 else '1.0f / a'} - {f32_literal(center)}; p = {horner('u', coefficients)}; }}\n"
    for k, (end, center, coefficients) in enumerate(ERFCX_PIECES[:-1]))
_LAST = ERFCX_PIECES[-1]
helper("erfc_big", f"""fn erfc_big(a: f32) -> f32 {{  // a in [0.5, 10.1]
  var u: f32; var p: f32;
{_ERFC_BODY}  else {{ u = 1.0f / a - {f32_literal(_LAST[1])}; p = {horner('u', _LAST[2])}; }}
  let g = p / a;  // erfc(a) exp(a**2)
  let sq = f32_square_exact(a);
  let nm = expm1_reduced(-sq.x);  // exp(-hi) = 2**n (1 + m)
  let m = nm.y - sq.y * (1.0f + nm.y);  // exp(-hi - lo) = 2**n (1 + m)(1 - lo)
  return f32_scale(m * g + g, i32(nm.x));
}}""", "f32_square_exact", "expm1_reduced", "f32_scale")
helper("f32_erf", """fn f32_erf(x: f32) -> f32 {
  if (f32_isnan(x)) { return x; }
  let a = f32_abs(x);
  if (a < 1.0f) { return x + x * erf_q(x * x); }
  return f32_copysign(1.0f - erfc_big(min(a, 6.0f)), x);
}""", "f32_isnan", "f32_abs", "erf_q", "erfc_big", "f32_copysign")
# below ERFC_SMALL: (1 - x) + (-x Q(x**2)), 1 - x = s + err exactly (Fast2Sum, |x| < 1,
# s hidden from the optimizer so that s - 1 is computed)
helper("f32_erfc", f"""fn f32_erfc(x: f32) -> f32 {{
  if (f32_isnan(x)) {{ return x; }}
  let a = f32_abs(x);
  if (a < {f32_literal(ERFC_SMALL)}) {{
    let s = f32_unfolded(1.0f - x);
    let err = -x - (s - 1.0f);
    return s + (err - x * erf_q(x * x));
  }}
  let big = erfc_big(min(a, 10.1f));
  return select(big, 2.0f - big, (bitcast<u32>(x) >> 31u) != 0u);
}}""", "f32_isnan", "f32_abs", "f32_unfolded", "erf_q", "erfc_big")
