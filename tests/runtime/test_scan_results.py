"""cumsum and cumprod on every backend, held to numpy (hologram.testing: `bounds.scan`,
each prefix within the contract of a reduction of its terms) at the sizes where a
two-pass block scan can go wrong: around the chunk size, empty, along every axis of 2-D,
3-D and 4-D arrays, with NaN, inf and -0.0, wrapping integers, and long f16/f32/f64 runs
where an accumulator of the wrong width or an uncompensated f64 sum would be caught."""

from __future__ import annotations

import numpy as np
import pytest

import hologram as hg
from hologram.lower.scan import CHUNK
from hologram.testing import bounds
from hologram.testing.bounds import Val

BACKENDS = [b for b in ("interp", "cpu_llvm") if b in hg.list_backends()]
INTERP_MAX = 3 * CHUNK  # the reference interpreter runs one lane at a time
RNG = np.random.default_rng(14)


def kernel(body: str, inputs: str, outputs: str, opt: str = "O2") -> hg.Kernel:
    return hg.compile(f'[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = {{ {inputs} }}\n'
                      f'outputs = {{ {outputs} }}\nbody = """\n{body}\n"""\n', opt=opt)


def expect(kind: str, x: np.ndarray, axis: int | None = None) -> Val:
    return bounds.scan(kind, Val.exact(x), axis)


def run(k: hg.Kernel, backend: str, *args: np.ndarray) -> np.ndarray:
    if backend == "interp" and max(np.size(a) for a in args) > INTERP_MAX:
        pytest.skip("too large for the reference interpreter")
    return k.on(backend)(*args)


SIZES = [0, 1, 2, 7, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, 2 * CHUNK + 1, 3 * CHUNK - 5, 100_003]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "u8", "f16"])
def test_cumsum_of_a_vector_at_sizes_around_the_chunk(backend, n, dtype):
    out = {"i32": "i64", "u8": "u64"}.get(dtype, dtype)
    k = kernel("y = cumsum(x)", f'x = "{dtype}[n]"', f'y = "{out}[n]"')
    npdt = np.dtype(hg.core.types.DType.parse(dtype).np)
    x = (RNG.standard_normal(n) * 4).astype(npdt) if npdt.kind == "f" else RNG.integers(0, 100, n).astype(npdt)
    expect("sum", x).check(run(k, backend, x))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [0, 5, CHUNK + 1, 2 * CHUNK + 3])
@pytest.mark.parametrize("dtype", ["f32", "f64", "i64", "f16"])
def test_cumprod_of_a_vector(backend, n, dtype):
    k = kernel("y = cumprod(x)", f'x = "{dtype}[n]"', f'y = "{dtype}[n]"')
    npdt = np.dtype(hg.core.types.DType.parse(dtype).np)
    if npdt.kind == "f":  # near 1, so long products stay in range and every rounding shows
        x = (1 + RNG.uniform(-2.0 ** -6, 2.0 ** -6, n)).astype(npdt)
    else:  # wraps
        x = RNG.integers(-3, 4, n).astype(npdt)
    expect("prod", x).check(run(k, backend, x))


AXES = [  # shape, axis: small rows, and rows that cross chunks (the scanned axis long)
    ((3, 5), 0), ((3, 5), 1), ((3, 5), -1), ((4, 2 * CHUNK + 7), 1), ((2 * CHUNK + 7, 3), 0),
    ((2, 3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), -1), ((2, 1500, 3), 1), ((2, 3, 1100), 2),
    ((2, 3, 2, 5), 0), ((2, 3, 2, 5), 2), ((2, 2, 3, 1030), 3), ((0, 4), 1), ((4, 0), 1), ((4, 0), 0),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape, axis", AXES, ids=[f"{s}-{a}" for s, a in AXES])
@pytest.mark.parametrize("kind", ["sum", "prod"])
def test_scans_along_every_axis(backend, shape, axis, kind):
    dims = ", ".join(f"d{k}" for k in range(len(shape)))
    k = kernel(f"y = x.cum{kind}(axis={axis})", f'x = "f32[{dims}]"', f'y = "f32[{dims}]"')
    x = (1 + RNG.uniform(-0.01, 0.01, shape) if kind == "prod" else RNG.standard_normal(shape)).astype(np.float32)
    expect(kind, x, axis).check(run(k, backend, x))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("inputs, shape, flat", [('x = "f32[m, 3]"', (700, 3), "3*m"),
                                                 ('x = "f32[3, n]"', (3, 5), "3*n"),
                                                 ('x = "f32[2, 1, n]"', (2, 1, 600), "2*n"),
                                                 ('x = "f32[n, 1]"', (2500, 1), "n")])
def test_cumsum_of_a_matrix_flattens_it(backend, inputs, shape, flat):
    k = kernel("y = np.cumsum(x)", inputs, f'y = "f32[{flat}]"')
    x = RNG.standard_normal(shape).astype(np.float32)
    expect("sum", x).check(run(k, backend, x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_scalar_scans_as_one_element(backend):
    k = kernel("y = cumsum(s)\nz = cumprod(s * 2, axis=-1)", 's = "i16"', 'y = "i64[1]", z = "i64[1]"')
    y, z = k.on(backend)(np.int16(-7))
    assert y.tolist() == [-7] and z.tolist() == [-14]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [9, 2 * CHUNK + 9])
def test_nan_inf_and_signed_zeros_come_out_as_numpy_s(backend, n):
    k = kernel("y = cumsum(x)\nz = cumprod(x)", 'x = "f64[n]"', 'y = "f64[n]", z = "f64[n]"')
    x = np.full(n, -0.0)
    x[n // 3] = np.inf
    x[n // 2] = 1.0
    x[n - 2] = -np.inf  # inf + -inf: NaN from here on
    y, z = run(k, backend, x)
    with np.errstate(invalid="ignore"):
        want = np.cumsum(x)
    assert np.array_equal(np.signbit(y[: n // 3]), np.signbit(want[: n // 3]))  # -0.0 + -0.0 stays -0.0
    np.testing.assert_array_equal(y, want)
    expect("prod", x).check(z)
    x = np.ones(n, np.float32)
    x[n // 2] = np.nan
    expect("sum", x).check(run(kernel("y = cumsum(x)", 'x = "f32[n]"', 'y = "f32[n]"'), backend, x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_integers_wrap(backend):
    k = kernel("y = cumsum(x)\nz = cumprod(u)", 'x = "i64[n]", u = "u32[n]"', 'y = "i64[n]", z = "u64[n]"')
    n = 2 * CHUNK + 2
    x = np.full(n, 2 ** 62, np.int64)
    u = np.full(n, 3, np.uint32)
    y, z = run(k, backend, x, u)
    np.testing.assert_array_equal(y, np.cumsum(x))
    np.testing.assert_array_equal(z, np.cumprod(u))
    assert y.dtype == np.int64 and z.dtype == np.uint64


@pytest.mark.parametrize("backend", BACKENDS)
def test_f16_prefixes_accumulate_wider_than_f16(backend):
    # 3000 terms in [0.5, 1): an f16 running sum stops growing at 2048 (numpy's own f16
    # cumsum gives 2048 for the last); the prefixes must stay within the contract
    x = RNG.uniform(0.5, 1.0, 3000).astype(np.float16)
    y = run(kernel("y = cumsum(x)", 'x = "f16[n]"', 'y = "f16[n]"'), backend, x)
    expect("sum", x).check(y)
    assert y[-1] > 2100 and np.cumsum(x)[-1] == 2048


def test_f32_and_f64_prefix_sums_meet_the_contract_over_many_chunks():
    if "cpu_llvm" not in BACKENDS:
        pytest.skip("cpu_llvm not installed")
    n = 1 << 20
    x32 = np.full(n, 0.1, np.float32)  # an f32 running sum (or offsets in f32) drifts past the contract
    x32[::7] = 0.3
    expect("sum", x32).check(kernel("y = cumsum(x)", 'x = "f32[n]"', 'y = "f32[n]"').on("cpu_llvm")(x32))
    x64 = np.full(n, 0.1)  # an uncompensated f64 running sum drifts ~6e4 eps at n = 1e6
    x64[::7] = 0.3
    expect("sum", x64).check(kernel("y = cumsum(x)", 'x = "f64[n]"', 'y = "f64[n]"').on("cpu_llvm")(x64))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("opt", ["O0", "O2"])
def test_a_scan_inside_an_expression(backend, opt):
    k = kernel("t = x * 2\ny = x - cumsum(t) / len(x)\nc = cumprod(m, axis=1)\ns = cumsum(x, axis=0)\n"
               "z[i] = s[i] + c[0, i]",
               'x = "f32[n]", m = "f32[3, n]"', 'y = "f32[n]", z = "f32[n]"', opt)
    n = CHUNK + 10
    x = RNG.standard_normal(n).astype(np.float32)
    m = (1 + RNG.uniform(-0.01, 0.01, (3, n))).astype(np.float32)
    y, z = run(k, backend, x, m)
    s = np.cumsum((x * 2).astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(y, x - s / np.float32(n), rtol=1e-5, atol=1e-5)
    want = np.cumsum(x.astype(np.float64)).astype(np.float32) + np.cumprod(m.astype(np.float64), 1).astype(np.float32)[0]
    np.testing.assert_allclose(z, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_output_of_another_dtype_or_a_broadcast_shape(backend):
    k = kernel("y = cumsum(x)\nz = cumsum(b)", 'x = "f32[n]", b = "bool[n]"', 'y = "f64[n]", z = "f32[n]"')
    x = RNG.standard_normal(CHUNK + 3).astype(np.float32)
    b = x > 0
    y, z = run(k, backend, x, b)
    np.testing.assert_array_equal(y, np.cumsum(x.astype(np.float64)).astype(np.float32).astype(np.float64))
    np.testing.assert_array_equal(z, np.cumsum(b).astype(np.float32))


def test_backends_agree_bitwise_on_integer_scans():
    if len(BACKENDS) < 2:
        pytest.skip("one backend")
    k = kernel("y = cumsum(x * x, axis=0)", 'x = "i32[n, m]"', 'y = "i64[n, m]"')
    x = RNG.integers(-50_000, 50_000, (CHUNK + 77, 2)).astype(np.int32)
    a, b = (k.on(be)(x) for be in BACKENDS)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, np.cumsum(x * x, axis=0))  # x * x wraps in i32, as numpy's
