"""The float math of the wgpu backend (hologram_wgpu.wgsl_math) held to the ISA's
contract on the driver it runs on: every transcendental it declares within 4 ulp of
numpy in f64 rounded to the type, over a dense sweep (every exponent, the ranges where
the function varies, huge arguments, arguments near 1, subnormal results) with the
special values (NaN, infinities, signed zeros) exact; FMA, FMOD and REM exact; the
standard library's softmax, sigmoid and tanh within the contract of the interpreter."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import hologram
from hologram.backend import OPCODES, DType
from hologram.core import semantics
from hologram.testing import assert_close

KERNELS = Path(__file__).resolve().parents[3] / "kernels"
CONTRACT_ULPS = 4.0  # docs/isa.md, "Transcendentals and math"


def _sigmoid(x: np.ndarray) -> np.ndarray:
    t = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + t), t / (1 + t))


REFERENCE = {"EXP": np.exp, "EXP2": np.exp2, "EXPM1": np.expm1, "LOG": np.log, "LOG2": np.log2,
             "LOG10": np.log10, "LOG1P": np.log1p, "TANH": np.tanh, "SIGMOID": _sigmoid, "SINH": np.sinh,
             "COSH": np.cosh, "SIN": np.sin, "COS": np.cos, "TAN": np.tan, "ATAN": np.arctan,
             "ASIN": np.arcsin, "ACOS": np.arccos, "ASINH": np.arcsinh, "ACOSH": np.arccosh,
             "ATANH": np.arctanh, "CBRT": np.cbrt, "ERF": np.vectorize(math.erf),
             "ERFC": np.vectorize(math.erfc)}
REFERENCE2 = {"ATAN2": np.arctan2, "HYPOT": np.hypot, "POW": np.power}
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 10.0, -10.0, 0.1,
           -0.7, 1e-7, -1e-7, 1e-30, 30.0, 40.0, 41.0, 88.72, 88.73, 89.0, -89.0, 100.0, -87.3, -103.97, -104.0,
           -150.0, 129.0, 1e5, -1e5, 3.4028234663852886e38, -3.4028234663852886e38, 1.401298464324817e-45,
           -1.401298464324817e-45, 1.1754942e-38, 5.961261e-08, -5.961261e-08, 65504.0, 6e-8]


def _declared(wgpu_backend, name: str) -> bool:  # asserted first, so a missing declaration fails by name
    return wgpu_backend.capabilities.covers(name, DType.F32)


def _run(body: str, dtype: DType, *args: np.ndarray) -> np.ndarray:
    names = "abc"[:len(args)]
    inputs = ", ".join(f'{n} = "{dtype}[n]"' for n in names)
    kernel = hologram.compile(f'[kernel]\nname = "m"\nversion = "1.0.0"\ninputs = {{ {inputs} }}\n'
                              f'outputs = {{ y = "{dtype}[n]" }}\nbody = "y = {body}"\n')
    return kernel.on("wgpu")(*args)


def sweep_f32(rng: np.random.Generator) -> np.ndarray:
    """Random bit patterns (every exponent, subnormals, NaN), [-10, 10], [-1, 1], just
    around 1 (log's cancellation), tiny arguments, exp's whole range (its subnormal
    results), the f32 values nearest to multiples of pi/2 up to 2**40 and their
    neighbours (trig's cancellation), and the special values."""
    n = 1 << 18
    near_pio2 = (rng.integers(1, 2 ** 40, n // 8) * (np.pi / 2)).astype(np.float32)
    return np.concatenate([
        near_pio2, np.nextafter(near_pio2, np.float32(np.inf)), np.nextafter(near_pio2, np.float32(-np.inf)),
        rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32),
        rng.uniform(-10, 10, n).astype(np.float32), rng.uniform(-1, 1, n // 2).astype(np.float32),
        (1 + rng.uniform(-2 ** -8, 2 ** -8, n // 4)).astype(np.float32),
        rng.uniform(-2 ** -20, 2 ** -20, n // 8).astype(np.float32),
        rng.uniform(-110, 95, n // 4).astype(np.float32), np.array(SPECIAL, np.float32)])


def sweep_pairs_f32(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random bit pairs, every pair of special values, [-4, 4] x [-30, 30], both operands
    of one magnitude with either sign, [0, 2] x [-1000, 1000] (pow's results across the
    whole range, subnormal ones included)."""
    n = 1 << 18
    sp = np.array(SPECIAL, np.float32)

    def bits() -> np.ndarray:
        return rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)

    u = rng.uniform(-4, 4, n).astype(np.float32)
    return (np.concatenate([bits(), np.repeat(sp, len(sp)), u, u * rng.uniform(0.5, 2, n).astype(np.float32),
                            rng.uniform(0, 2, n).astype(np.float32)]),
            np.concatenate([bits(), np.tile(sp, len(sp)), rng.uniform(-30, 30, n).astype(np.float32),
                            -u * rng.uniform(0.5, 2, n).astype(np.float32),
                            rng.uniform(-1000, 1000, n).astype(np.float32)]))


def max_ulp_error(name: str, x: np.ndarray, got: np.ndarray, y: np.ndarray | None = None) -> float:
    """The largest error in ulp of got's type against numpy in f64 (rounded to the type
    for the special values, which must match exactly, signs of zeros included)."""
    with np.errstate(all="ignore"):
        exact = (REFERENCE[name](x.astype(np.float64)) if y is None
                 else REFERENCE2[name](x.astype(np.float64), y.astype(np.float64)))
        want = exact.astype(got.dtype)
        finite = np.isfinite(want) & np.isfinite(got)
        special = ~finite & ~((np.isnan(want) & np.isnan(got)) | (want == got))
        signed = (want == 0) & (got == 0) & (np.signbit(want) != np.signbit(got))
        wrong = np.nonzero(special | signed)[0][:5]
        args = (x,) if y is None else (x, y)
        assert not len(wrong), f"{name}: " + "; ".join(f"{[a[j] for a in args]} -> {got[j]!r}, expected {want[j]!r}"
                                                       for j in wrong)
        ulp = np.spacing(np.abs(want)).astype(np.float64)
        return float(np.where(finite, np.abs(got.astype(np.float64) - exact) / ulp, 0).max())


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_each_declared_transcendental_is_within_4_ulp_with_exact_special_values(wgpu_backend, name):
    assert _declared(wgpu_backend, name), f"{name} is not declared by wgpu"
    dsl = OPCODES[name].dsl[0].name
    x = sweep_f32(np.random.default_rng(sum(map(ord, name))))
    assert max_ulp_error(name, x, _run(f"{dsl}(a)", DType.F32, x)) <= CONTRACT_ULPS
    every_f16 = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    assert max_ulp_error(name, every_f16, _run(f"{dsl}(a)", DType.F16, every_f16)) <= CONTRACT_ULPS


@pytest.mark.parametrize("name", sorted(REFERENCE2))
def test_each_declared_binary_function_is_within_4_ulp_with_exact_special_values(wgpu_backend, name):
    assert _declared(wgpu_backend, name), f"{name} is not declared by wgpu"
    dsl = OPCODES[name].dsl[0].name
    x, y = sweep_pairs_f32(np.random.default_rng(sum(map(ord, name))))
    assert max_ulp_error(name, x, _run(f"{dsl}(a, b)", DType.F32, x, y), y) <= CONTRACT_ULPS
    every_f16 = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    a, b = (g.ravel() for g in np.meshgrid(every_f16[::37], every_f16[::41]))
    assert max_ulp_error(name, a, _run(f"{dsl}(a, b)", DType.F16, a, b), b) <= CONTRACT_ULPS


def _exact_cases(rng: np.random.Generator, dtype: type) -> tuple[np.ndarray, ...]:
    """Random bits, normal values, every pair of special values, products that c nearly
    cancels, and the docs' examples of a single rounding."""
    n = 6000
    uint = np.uint32 if dtype is np.float32 else np.uint16
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-45, -6e-8, 1.1754942e-38, 65504.0,
                   3.4028235e38, 1 + 2 ** -12, 2 ** -80, 1.5, 3.0], np.float32)

    def bits() -> np.ndarray:
        return rng.integers(0, np.iinfo(uint).max, n, dtype=uint, endpoint=True).view(dtype)

    def normal() -> np.ndarray:
        return rng.standard_normal(n).astype(dtype)

    with np.errstate(all="ignore"):
        sp = sp.astype(dtype)
        a, b = normal(), normal()
        cancel = -(a.astype(np.float64) * b).astype(dtype)
        return tuple(np.concatenate(parts) for parts in zip(
            (bits(), bits(), bits()), (normal(), normal(), normal()), (a, b, cancel),
            (np.repeat(sp, len(sp)), np.tile(sp, len(sp)), np.tile(sp[::-1], len(sp))),
            (bits() * dtype(1e-20 if dtype is np.float32 else 1e-3), bits(), bits())))


def _same_bits(got: np.ndarray, want: np.ndarray, what: str, *args: np.ndarray) -> None:
    same = (got == want) & (np.signbit(got) == np.signbit(want))
    same |= np.isnan(got) & np.isnan(want)
    wrong = np.nonzero(~same)[0][:5]
    assert not len(wrong), f"{what}: " + "; ".join(f"{[a[j] for a in args]} -> {got[j]!r}, expected {want[j]!r}"
                                                   for j in wrong)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_fma_fmod_and_rem_are_exact(wgpu_backend, dtype):
    t = DType.from_numpy(np.dtype(dtype))
    a, b, c = _exact_cases(np.random.default_rng(5), dtype)
    with np.errstate(all="ignore"):
        _same_bits(_run("fma(a, b, c)", t, a, b, c), semantics.fma(a, b, c), "FMA", a, b, c)
        _same_bits(_run("fmod(a, b)", t, a, b), np.fmod(a, b), "FMOD", a, b)
        _same_bits(_run("a % b", t, a, b), np.remainder(a, b), "REM", a, b)


def test_fma_rounds_once_where_two_roundings_differ(wgpu_backend):
    """docs/isa.md's examples: the product on an f32 midpoint and a tiny c; a product
    beyond f32's range brought back by c; a zero result's sign."""
    a = np.float32([1 + 2 ** -12, 3e38, -0.0, 1e-30])
    b = np.float32([1 + 2 ** -12, 2.0, 5.0, 1e-20])
    c = np.float32([2 ** -80, -3e38, -0.0, 1e-45])
    got = _run("fma(a, b, c)", DType.F32, a, b, c)
    assert got.tolist() == [np.float32(1 + 2 ** -11 + 2 ** -23), np.float32(3e38), -0.0, np.float32(1e-45)]
    assert np.signbit(got[2])


@pytest.mark.parametrize("name", ["softmax", "sigmoid", "tanh"])
def test_stdlib_softmax_sigmoid_and_tanh_match_interp_within_the_contract(wgpu_backend, name):
    kernel = hologram.compile_file(KERNELS / f"{name}.toml")
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.standard_normal(4000) * 8, [0.0, -0.0, 30.0, -30.0, 90.0, -90.0, 1e-30]])
    x = x.astype(np.float32)
    if name != "softmax":  # the special values too (softmax of an inf is NaN on both)
        x = np.concatenate([x, np.float32([np.inf, -np.inf, np.nan])])
    got, want = kernel.on("wgpu")(x), kernel.on("interp")(x)
    if name == "softmax":  # exp within 4 ulp, then the division by a sum of x.size terms
        assert_close(got, want, ulps=2 * int(CONTRACT_ULPS), reduction_n=x.size, name=name)
    else:
        assert_close(got, want, ulps=int(CONTRACT_ULPS), name=name)


FOLDABLE = """
[kernel]
name = "foldable"
version = "1.0.0"
inputs  = { x = "f32[n]", w = "f32[n]" }
outputs = { a = "f32[n]", b = "f32[n]", c = "f32[n]", d = "f32[n]", e = "f32[n]" }
body = '''
a = x - x
b = x * 0.0
c = 0.0 * x
d = x + 0.0
e = (x + w) - w
'''
"""


def test_float_arithmetic_the_shader_compiler_could_fold_keeps_ieee_results(wgpu_backend):
    """Mesa's NIR simplifies float arithmetic it deems inexact (x - x to 0, x * 0.0 to 0,
    x + 0.0 to x, (x + w) - w to x); the ISA's answers for NaN, inf, -0.0 and rounding
    differ, and the stage writer hides the operands from it."""
    kernel = hologram.compile(FOLDABLE)
    x = np.float32([np.nan, np.inf, -np.inf, -0.0, 1e-10, 1.0])
    w = np.float32([1.0, 1.0, 2.0, 0.0, 1.0, 3.0])
    for got, want in zip(kernel.on("wgpu")(x, w), kernel.on("interp")(x, w), strict=True):
        _same_bits(got, want, "folded", x, w)
