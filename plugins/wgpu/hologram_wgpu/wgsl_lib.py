"""The WGSL helper functions a generated shader calls: 64-bit integers as `vec2<u32>`
(low word, high word; WGSL has no 64-bit integer), the ISA's float rules that WGSL's
builtins leave open (NaN in MIN/MAX, saturating float -> integer conversion), and floor
division. Each helper is emitted only when the shader names it (`helpers_for`)."""

from __future__ import annotations

import re

from .wgsl_math import MATH_HELPERS

# name -> (WGSL text, names of the helpers it calls)
_HELPERS: dict[str, tuple[str, tuple[str, ...]]] = {
    # ------------------------------------------------------------------ f32 bit tests
    "f32_isnan": ("fn f32_isnan(a: f32) -> bool { return (bitcast<u32>(a) & 0x7fffffffu) > 0x7f800000u; }", ()),
    "f32_isinf": ("fn f32_isinf(a: f32) -> bool { return (bitcast<u32>(a) & 0x7fffffffu) == 0x7f800000u; }", ()),
    "f32_isfinite": ("fn f32_isfinite(a: f32) -> bool { return (bitcast<u32>(a) & 0x7f800000u) != 0x7f800000u; }",
                     ()),
    # numpy minimum/maximum: NaN if either is NaN; of equal operands (-0.0, +0.0) the second
    "f32_min": ("fn f32_min(a: f32, b: f32) -> f32 { if (f32_isnan(a)) { return a; } return select(b, a, a < b); }",
                ("f32_isnan",)),
    "f32_max": ("fn f32_max(a: f32, b: f32) -> f32 { if (f32_isnan(a)) { return a; } return select(b, a, a > b); }",
                ("f32_isnan",)),
    "f16_min": ("fn f16_min(a: f32, b: f32) -> f32 { return select(b, a, f32_isnan(a) || a <= b); }", ("f32_isnan",)),
    "f16_max": ("fn f16_max(a: f32, b: f32) -> f32 { return select(b, a, f32_isnan(a) || a >= b); }", ("f32_isnan",)),
    "f32_neg": ("fn f32_neg(a: f32) -> f32 { return bitcast<f32>(bitcast<u32>(a) ^ 0x80000000u); }", ()),
    "f32_abs": ("fn f32_abs(a: f32) -> f32 { return bitcast<f32>(bitcast<u32>(a) & 0x7fffffffu); }", ()),
    "f32_copysign": ("fn f32_copysign(a: f32, b: f32) -> f32 {\n"
                     "  return bitcast<f32>((bitcast<u32>(a) & 0x7fffffffu) | (bitcast<u32>(b) & 0x80000000u));\n}",
                     ()),
    # f16 in f32 registers: the nearest f16 (ties to even, overflow to inf, subnormals kept),
    # by scaling to the f16 quantum of the value's binade, where round() is exact
    "f16_round": ("fn f16_round(a: f32) -> f32 {\n"
                  "  let m = f32_abs(a);\n"
                  "  if (!(m < 65520.0)) { return select(f32_copysign(bitcast<f32>(0x7f800000u), a), a, f32_isnan(a)); }\n"
                  "  if (m < 6.103515625e-05) { return f32_copysign(round(m * 16777216.0) * 5.9604644775390625e-08, a); }\n"
                  "  let quantum = bitcast<f32>((bitcast<u32>(m) & 0x7f800000u) - (10u << 23u));\n"
                  "  return f32_copysign(round(m / quantum) * quantum, a);\n}",
                  ("f32_abs", "f32_copysign", "f32_isnan")),
    "f16_decode": ("fn f16_decode(h: u32) -> f32 {\n"
                   "  let sign = (h & 0x8000u) << 16u; let e = (h >> 10u) & 0x1fu; let m = h & 0x3ffu;\n"
                   "  if (e == 0u) { return f32_copysign(f32(m) * 5.9604644775390625e-08, bitcast<f32>(sign)); }\n"
                   "  if (e == 31u) { return bitcast<f32>(sign | 0x7f800000u | (m << 13u)); }\n"
                   "  return bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u));\n}", ("f32_copysign",)),
    "f16_encode": ("fn f16_encode(a: f32) -> u32 {\n"  # a: an f16 value
                   "  let b = bitcast<u32>(a); let sign = (b >> 16u) & 0x8000u; let m = f32_abs(a);\n"
                   "  if (f32_isnan(a)) { return sign | 0x7c00u | max((b >> 13u) & 0x3ffu, 0x200u); }\n"
                   "  if (m >= 65536.0) { return sign | 0x7c00u; }\n"
                   "  if (m < 6.103515625e-05) { return sign | u32(m * 16777216.0); }\n"
                   "  return sign | ((((b >> 23u) & 0xffu) - 112u) << 10u) | ((b >> 13u) & 0x3ffu);\n}",
                   ("f32_abs", "f32_isnan")),
    # float -> integer: truncate, saturate, NaN -> 0 (2147483648.0 is exactly 2**31)
    "f32_to_i32": ("fn f32_to_i32(a: f32) -> i32 {\n"
                   "  if (f32_isnan(a)) { return 0i; }\n"
                   "  if (a >= 2147483648.0) { return 2147483647i; }\n"
                   "  if (a <= -2147483648.0) { return bitcast<i32>(0x80000000u); }\n"
                   "  return i32(a);\n}", ("f32_isnan",)),
    "f32_to_u32": ("fn f32_to_u32(a: f32) -> u32 {\n"
                   "  if (f32_isnan(a) || a <= 0.0) { return 0u; }\n"
                   "  if (a >= 4294967296.0) { return 0xffffffffu; }\n"
                   "  return u32(a);\n}", ("f32_isnan",)),
    # ---------------------------------------------------- integer floor division, 0 for /0
    "i32_div": ("fn i32_div(a: i32, b: i32) -> i32 {\n"
                "  if (b == 0i) { return 0i; }\n"
                "  if (b == -1i) { return 0i - a; }\n"  # wraps: MIN / -1 = MIN, where WGSL's `/` is undefined
                "  let q = a / b;\n"
                "  if ((a % b != 0i) && ((a < 0i) != (b < 0i))) { return q - 1i; }\n"
                "  return q;\n}", ()),
    "i32_rem": ("fn i32_rem(a: i32, b: i32) -> i32 {\n"
                "  if (b == 0i || b == -1i) { return 0i; }\n"
                "  let r = a % b;\n"
                "  if (r != 0i && ((r < 0i) != (b < 0i))) { return r + b; }\n"
                "  return r;\n}", ()),
    "u32_div": ("fn u32_div(a: u32, b: u32) -> u32 { if (b == 0u) { return 0u; } return a / b; }", ()),
    "u32_rem": ("fn u32_rem(a: u32, b: u32) -> u32 { if (b == 0u) { return 0u; } return a % b; }", ()),
    # ------------------------------------------------------ 64-bit integers: vec2<u32>(lo, hi)
    "x64_add": ("fn x64_add(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {\n"
                "  let lo = a.x + b.x;\n"
                "  return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));\n}", ()),
    "x64_sub": ("fn x64_sub(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {\n"
                "  return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));\n}", ()),
    "u32_mul_wide": ("fn u32_mul_wide(a: u32, b: u32) -> vec2<u32> {\n"  # the 64-bit product, by 16-bit halves
                     "  let al = a & 0xffffu; let ah = a >> 16u; let bl = b & 0xffffu; let bh = b >> 16u;\n"
                     "  let ll = al * bl; let lh = al * bh; let hl = ah * bl; let hh = ah * bh;\n"
                     "  let mid = (ll >> 16u) + (lh & 0xffffu) + (hl & 0xffffu);\n"
                     "  let lo = (ll & 0xffffu) | (mid << 16u);\n"
                     "  let hi = hh + (lh >> 16u) + (hl >> 16u) + (mid >> 16u);\n"
                     "  return vec2<u32>(lo, hi);\n}", ()),
    "x64_mul": ("fn x64_mul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {\n"
                "  let p = u32_mul_wide(a.x, b.x);\n"
                "  return vec2<u32>(p.x, p.y + a.x * b.y + a.y * b.x);\n}", ("u32_mul_wide",)),
    "x64_neg": ("fn x64_neg(a: vec2<u32>) -> vec2<u32> { return x64_sub(vec2<u32>(0u, 0u), a); }", ("x64_sub",)),
    "i64_lt": ("fn i64_lt(a: vec2<u32>, b: vec2<u32>) -> bool {\n"
               "  if (a.y != b.y) { return bitcast<i32>(a.y) < bitcast<i32>(b.y); }\n"
               "  return a.x < b.x;\n}", ()),
    "u64_lt": ("fn u64_lt(a: vec2<u32>, b: vec2<u32>) -> bool {\n"
               "  if (a.y != b.y) { return a.y < b.y; }\n"
               "  return a.x < b.x;\n}", ()),
    "x64_eq": ("fn x64_eq(a: vec2<u32>, b: vec2<u32>) -> bool { return all(a == b); }", ()),
    "i64_abs": ("fn i64_abs(a: vec2<u32>) -> vec2<u32> { return select(a, x64_neg(a), (a.y & 0x80000000u) != 0u); }",
                ("x64_neg",)),
    "x64_shl": ("fn x64_shl(a: vec2<u32>, b: u32) -> vec2<u32> {\n"
                "  let s = b & 63u;\n"
                "  if (s == 0u) { return a; }\n"
                "  if (s >= 32u) { return vec2<u32>(0u, a.x << (s - 32u)); }\n"
                "  return vec2<u32>(a.x << s, (a.y << s) | (a.x >> (32u - s)));\n}", ()),
    "u64_shr": ("fn u64_shr(a: vec2<u32>, b: u32) -> vec2<u32> {\n"
                "  let s = b & 63u;\n"
                "  if (s == 0u) { return a; }\n"
                "  if (s >= 32u) { return vec2<u32>(a.y >> (s - 32u), 0u); }\n"
                "  return vec2<u32>((a.x >> s) | (a.y << (32u - s)), a.y >> s);\n}", ()),
    "i64_shr": ("fn i64_shr(a: vec2<u32>, b: u32) -> vec2<u32> {\n"
                "  let s = b & 63u;\n"
                "  let hi = bitcast<i32>(a.y);\n"
                "  if (s == 0u) { return a; }\n"
                "  if (s >= 32u) { return vec2<u32>(bitcast<u32>(hi >> (s - 32u)), bitcast<u32>(hi >> 31u)); }\n"
                "  return vec2<u32>((a.x >> s) | (a.y << (32u - s)), bitcast<u32>(hi >> s));\n}", ()),
    # 64-bit division: restoring, a bit at a time; then floor division's signs (docs/isa.md)
    "u64_divrem": ("fn u64_divrem(a: vec2<u32>, b: vec2<u32>) -> array<vec2<u32>, 2> {\n"
                   "  var q = vec2<u32>(); var r = vec2<u32>();\n"
                   "  for (var i = 63i; i >= 0i; i -= 1i) {\n"
                   "    let word = select(a.x, a.y, i >= 32i);\n"
                   "    r = x64_shl(r, 1u) | vec2<u32>((word >> (u32(i) & 31u)) & 1u, 0u);\n"
                   "    if (!u64_lt(r, b)) {\n"
                   "      r = x64_sub(r, b);\n"
                   "      q = q | x64_shl(vec2<u32>(1u, 0u), u32(i));\n"
                   "    }\n"
                   "  }\n"
                   "  return array<vec2<u32>, 2>(q, r);\n}", ("x64_shl", "u64_lt", "x64_sub")),
    "u64_div": ("fn u64_div(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {\n"
                "  if (all(b == vec2<u32>())) { return vec2<u32>(); }\n"
                "  return u64_divrem(a, b)[0];\n}", ("u64_divrem",)),
    "u64_rem": ("fn u64_rem(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {\n"
                "  if (all(b == vec2<u32>())) { return vec2<u32>(); }\n"
                "  return u64_divrem(a, b)[1];\n}", ("u64_divrem",)),
    "i64_divrem": ("fn i64_divrem(a: vec2<u32>, b: vec2<u32>) -> array<vec2<u32>, 2> {\n"
                   "  if (all(b == vec2<u32>())) { return array<vec2<u32>, 2>(vec2<u32>(), vec2<u32>()); }\n"
                   "  let an = (a.y >> 31u) != 0u; let bn = (b.y >> 31u) != 0u;\n"
                   "  let mb = select(b, x64_neg(b), bn);\n"
                   "  let qr = u64_divrem(select(a, x64_neg(a), an), mb);\n"
                   "  var q = qr[0]; var r = qr[1];\n"
                   "  if (an != bn) {\n"
                   "    q = x64_neg(q);\n"
                   "    if (any(r != vec2<u32>())) { q = x64_sub(q, vec2<u32>(1u, 0u)); r = x64_sub(mb, r); }\n"
                   "  }\n"
                   "  return array<vec2<u32>, 2>(q, select(r, x64_neg(r), bn));\n}",
                   ("u64_divrem", "x64_neg", "x64_sub")),
    "i64_div": ("fn i64_div(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return i64_divrem(a, b)[0]; }",
                ("i64_divrem",)),
    "i64_rem": ("fn i64_rem(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return i64_divrem(a, b)[1]; }",
                ("i64_divrem",)),
    # 64-bit integer <-> f32, rounded once: the top 32 significant bits with every lower one
    # folded into a sticky bit round as the whole value does (u32 -> f32 is exact RNE)
    "u64_to_f32": ("fn u64_to_f32(a: vec2<u32>) -> f32 {\n"
                   "  if (a.y == 0u) { return f32(a.x); }\n"
                   "  let s = countLeadingZeros(a.y);\n"
                   "  if (s == 0u) { return ldexp(f32(a.y | select(0u, 1u, a.x != 0u)), 32i); }\n"
                   "  let top = (a.y << s) | (a.x >> (32u - s));\n"
                   "  return ldexp(f32(top | select(0u, 1u, (a.x << s) != 0u)), i32(32u - s));\n}", ()),
    "i64_to_f32": ("fn i64_to_f32(a: vec2<u32>) -> f32 {\n"
                   "  if ((a.y >> 31u) != 0u) { return -u64_to_f32(x64_neg(a)); }\n"
                   "  return u64_to_f32(a);\n}", ("u64_to_f32", "x64_neg")),
    "f32_to_x64_mag": ("fn f32_to_x64_mag(a: f32) -> vec2<u32> {\n"  # a: a whole number, 0 <= a < 2**64
                       "  if (a < 4294967296.0) { return vec2<u32>(u32(a), 0u); }\n"
                       "  let hi = floor(a * 2.3283064365386963e-10);\n"  # exact: a power of two, then whole
                       "  return vec2<u32>(u32(a - hi * 4294967296.0), u32(hi));\n}", ()),
    "f32_to_i64": ("fn f32_to_i64(a: f32) -> vec2<u32> {\n"
                   "  if (f32_isnan(a)) { return vec2<u32>(); }\n"
                   "  if (a >= 9223372036854775808.0) { return vec2<u32>(0xffffffffu, 0x7fffffffu); }\n"
                   "  if (a <= -9223372036854775808.0) { return vec2<u32>(0u, 0x80000000u); }\n"
                   "  let m = f32_to_x64_mag(abs(trunc(a)));\n"
                   "  return select(m, x64_neg(m), a < 0.0);\n}", ("f32_isnan", "f32_to_x64_mag", "x64_neg")),
    "f32_to_u64": ("fn f32_to_u64(a: f32) -> vec2<u32> {\n"
                   "  if (f32_isnan(a) || a <= 0.0) { return vec2<u32>(); }\n"
                   "  if (a >= 18446744073709551616.0) { return vec2<u32>(0xffffffffu, 0xffffffffu); }\n"
                   "  return f32_to_x64_mag(trunc(a));\n}", ("f32_isnan", "f32_to_x64_mag")),
    "i32_to_x64": ("fn i32_to_x64(a: i32) -> vec2<u32> {\n"
                   "  return vec2<u32>(bitcast<u32>(a), select(0u, 0xffffffffu, a < 0i));\n}", ()),
}


_ALL_HELPERS = {**_HELPERS, **MATH_HELPERS}  # the float math (wgsl_math) calls helpers of both


def helpers_for(code: str) -> str:
    """The helper functions `code` calls, with those they call, in a fixed order."""
    wanted: set[str] = set()
    todo = [name for name in _ALL_HELPERS if re.search(rf"\b{name}\(", code)]
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo.extend(_ALL_HELPERS[name][1])
    return "\n".join(_ALL_HELPERS[name][0] for name in _ALL_HELPERS if name in wanted)
