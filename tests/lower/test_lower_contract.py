"""The register-tiled contraction (hologram/core/lower_contract.py): its shape, its proofs,
and its numbers on both backends against numpy (docs/lowering.md, "Contractions")."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hologram as hg
from hologram.core.types import DType
from hologram.ir import Compute
from hologram.isa.program import Instr, Label
from hologram.lower.contract import (BLOCK, GROUP, LONG_GROUPS, TILE_COLS, TILE_ROWS, group_blocks,
                                     match_contraction, narrow_cols, tile_cols)
from hologram.lower.plan import make_plan
from hologram.lower.stages import lower
from hologram.testing.contract import assert_close
from hologram.verify.verifier import verify

F32, F64 = DType.F32, DType.F64
BACKENDS = ("interp", "cpu_llvm")

GEMM = '''[kernel]
name = "gemm"
version = "1.0.0"
inputs  = { alpha = "f32", a = "f32[m, k]", b = "f32[k, n]" }
outputs = { c = "f32[m, n]" }
body = "c[i, j] = alpha * sum(a[i, p] * b[p, j], p)"
'''
GEMM64 = GEMM.replace("f32", "f64")

# the outer expression uses i and j, and a vector load, around the sum
BIAS = '''[kernel]
name = "affine"
version = "1.0.0"
inputs  = { a = "f32[m, k]", b = "f32[k, n]", bias = "f32[n]" }
outputs = { c = "f32[m, n]" }
body = "c[i, j] = maximum(sum(a[i, p] * b[p, j], p) + bias[j], 0.0) + i - 2 * j"
'''

_KERNELS: dict[tuple[str, str], hg.Kernel] = {}


def kernel(text: str, backend: str) -> hg.Kernel:
    if (text, backend) not in _KERNELS:
        _KERNELS[text, backend] = hg.compile(text).on(backend)
    return _KERNELS[text, backend]


def gemm_program(text: str = GEMM):
    from hologram.dsl.analyze import to_ir
    from hologram.dsl.translators import parse_toml
    kdefs = parse_toml(text, "<test>")
    return to_ir(kdefs[0] if isinstance(kdefs, (list, tuple)) else kdefs)


def same_bits(x: np.ndarray, y: np.ndarray) -> None:
    """Equal bit for bit, NaN matching NaN whatever its payload."""
    both_nan = np.isnan(x) & np.isnan(y)
    bits = np.dtype(f"u{x.dtype.itemsize}")
    assert x.dtype == y.dtype and np.array_equal(np.where(both_nan, 0, x.view(bits)), np.where(both_nan, 0, y.view(bits)))


# ----------------------------------------------------------------------- structure
@pytest.mark.parametrize("t", [F32, F64])
def test_gemm_is_a_pack_a_tiled_and_a_narrow_stage_with_every_access_unchecked(t):
    cols = tile_cols(t)  # 32 for f32, 16 for f64: two 512-bit vectors a row
    prog = verify(lower(gemm_program(GEMM if t is F32 else GEMM64)))
    pack, stage, narrow = prog.stages
    (panels,) = prog.temps
    assert [str(d) for d in panels.shape] == [f"n + {cols - 1}", "k"]
    # the pack: a block of a panel's columns per p, its lead lane copies them (contiguous
    # loads of b's row and stores into the panel), every access proven
    assert pack.block == (1, cols) and [str(d) for d in pack.domain] == ["k", "n"]
    moves = [it for it in pack.body if isinstance(it, Instr) and it.addr is not None]
    assert sorted(it.addr.offset for it in moves if it.op == "LDG" and it.addr.buffer == "b") == list(range(cols))
    assert sorted(it.addr.offset for it in moves if it.op == "STG" and it.addr.buffer == panels.name) == \
        list(range(cols))
    assert not any(it.checked for it in moves)
    assert stage.block == (TILE_ROWS, cols) and [str(d) for d in stage.domain] == ["m", "n"]
    body = stage.body
    labels = {it.name: k for k, it in enumerate(body) if isinstance(it, Label)}
    step = labels[next(n for n in labels if n.startswith("kstep"))]
    end = next(k for k in range(step, len(body)) if isinstance(body[k], Instr) and body[k].op == "LOOP")
    loop = [it for it in body[step:end] if isinstance(it, Instr)]
    assert sum(it.op == "FMA" and it.dtype is t for it in loop) == TILE_ROWS * cols
    loads = [it for it in loop if it.op == "LDG"]
    assert len(loads) == TILE_ROWS + cols and not any(it.checked for it in loads)
    # b's row segment is read from its packed panel: one register plus offsets 0..C-1
    assert sorted(it.addr.offset for it in loads if it.addr.buffer == panels.name) == list(range(cols))
    tiled = [it for it in body if isinstance(it, Instr) and it.addr is not None]
    assert tiled and not any(it.checked for it in tiled)  # the tile path is proven, loads and stores
    # a matrix narrower or shorter than a tile: narrow tiles, b read in place, consecutive
    # columns (offsets of one index) where n allows, clamped ones below; all proven
    w = narrow_cols(t)
    assert narrow.block == (TILE_ROWS, w) and [str(d) for d in narrow.domain] == ["m", "n"]
    body = narrow.body
    labels = {it.name: k for k, it in enumerate(body) if isinstance(it, Label)}
    step = labels[next(n for n in labels if n.startswith("kstep"))]
    end = next(k for k in range(step, len(body)) if isinstance(body[k], Instr) and body[k].op == "LOOP")
    loop = [it for it in body[step:end] if isinstance(it, Instr)]
    assert sum(it.op == "FMA" and it.dtype is t for it in loop) == TILE_ROWS * w
    assert sorted(it.addr.offset for it in loop if it.op == "LDG" and it.addr.buffer == "b") == list(range(w))
    accesses = [it for it in body if isinstance(it, Instr) and it.addr is not None]
    assert accesses and not any(it.checked for it in accesses)


@pytest.mark.parametrize("body, inputs, tiled", [
    ("c[i, j] = sum(a[i, p] * b[p, j], p)", '{ a = "f32[m, k]", b = "f32[k, n]" }', True),
    ("c[i, j] = sum(b[p, j] * a[i, p], p)", '{ a = "f32[m, k]", b = "f32[k, n]" }', True),
    ("c[i, j] = sum(a[i, p] * b[p, j], p)", '{ a = "f64[m, k]", b = "f64[k, n]" }', True),
    # not a tiled contraction: mixed types, a transposed operand, a second reduction, a
    # product with a third factor
    ("c[i, j] = sum(a[i, p] * b[p, j], p)", '{ a = "f64[m, k]", b = "f32[k, n]" }', False),
    ("c[i, j] = sum(a[p, i] * b[p, j], p)", '{ a = "f32[k, m]", b = "f32[k, n]" }', False),
    ("c[i, j] = sum(a[i, p] * b[p, j], p) - sum(a[i, q] * b[q, j], q)", '{ a = "f32[m, k]", b = "f32[k, n]" }',
     False),
    ("c[i, j] = sum(a[i, p] * b[p, j] * 2.0, p)", '{ a = "f32[m, k]", b = "f32[k, n]" }', False),
])
def test_which_statements_are_tiled(body, inputs, tiled):
    dt = "f64" if "f64" in inputs else "f32"
    text = GEMM.replace('{ alpha = "f32", a = "f32[m, k]", b = "f32[k, n]" }', inputs).replace(
        "alpha * sum(a[i, p] * b[p, j], p)", body.split("= ", 1)[1]).replace('"f32[m, n]"', f'"{dt}[m, n]"')
    kir = gemm_program(text)
    plan = make_plan(kir)
    st_ = next(s for s in plan.statements if isinstance(s, Compute) and s.target == "c")
    assert (match_contraction(st_, plan.decls) is not None) is tiled
    verify(lower(kir))


def test_matvec_and_dot_keep_their_in_lane_loops():
    for name in ("matvec", "dot"):
        prog = lower(gemm_program(open(f"kernels/{name}.toml").read()))
        assert not any(isinstance(it, Instr) and it.op == "FMA" for s in prog.stages for it in s.body)


# ------------------------------------------------------------------------- numbers
COLS64 = tile_cols(F64)
SIDES = st.sampled_from([0, 1, 2, TILE_ROWS - 1, TILE_ROWS, TILE_ROWS + 1, COLS64 - 1, COLS64, COLS64 + 1,
                         TILE_COLS - 1, TILE_COLS, TILE_COLS + 1, TILE_COLS + TILE_ROWS + 1])
DTYPES = st.sampled_from([np.float32, np.float64])
DEPTHS = st.sampled_from([0, 1, 2, BLOCK - 1, BLOCK, BLOCK + 1, BLOCK * GROUP - 1, BLOCK * GROUP,
                          BLOCK * GROUP + 1, 45, 70])


def check_gemm(alpha: np.floating, a: np.ndarray, b: np.ndarray) -> None:
    """Both backends agree bit for bit and meet the reduction contract against numpy
    (f32 or f64, as the operands)."""
    text = GEMM64 if a.dtype == np.float64 else GEMM
    outs = [kernel(text, be)(alpha, a, b) for be in BACKENDS]
    same_bits(*outs)
    with np.errstate(all="ignore"):
        # einsum's own loop, not BLAS (which may skip zero factors, and so inf * 0); for
        # f64 operands in long double where the platform has it
        wide = np.longdouble if a.dtype == np.float64 else np.float64
        exact = np.einsum("ik,kj->ij", a.astype(wide), b.astype(wide))
        want = (wide(alpha) * exact).astype(a.dtype)
        mag = (abs(wide(alpha)) * (np.abs(a).astype(wide) @ np.abs(b).astype(wide))).astype(np.float64)
    assert_close(outs[0], want, ulps=1, reduction_n=a.shape[1], magnitude=mag)


@settings(max_examples=30, deadline=None)
@given(m=SIDES, n=SIDES, k=DEPTHS, seed=st.integers(0, 2**32 - 1), alpha=st.sampled_from([1.0, -0.5, 3.0]),
       dt=DTYPES)
def test_gemm_matches_numpy_on_every_shape(m, n, k, seed, alpha, dt):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(dt)
    b = (rng.standard_normal((k, n)) * rng.choice([1e-3, 1.0, 1e3], (k, 1))).astype(dt)
    check_gemm(dt(alpha), a, b)


@settings(max_examples=20, deadline=None)
@given(m=SIDES, n=SIDES, k=DEPTHS, seed=st.integers(0, 2**32 - 1), dt=DTYPES)
def test_gemm_nan_and_inf_as_numpy(m, n, k, seed, dt):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(dt)
    b = rng.standard_normal((k, n)).astype(dt)
    for x in (a, b):  # a few non-finite entries, and zeros for inf * 0
        flat = x.reshape(-1)
        if flat.size:
            picks = rng.integers(0, flat.size, max(1, flat.size // 20))
            flat[picks] = rng.choice(np.array([np.nan, np.inf, -np.inf, 0.0], dt), picks.size)
    check_gemm(dt(1.0), a, b)


@pytest.mark.parametrize("k", [120, 200])  # groups of 7 blocks (k = 120), of 9 (k = 200)
def test_products_and_group_partials_overflow_like_f32_but_group_totals_are_f64(k):
    m, n = TILE_ROWS, TILE_COLS
    step = BLOCK * group_blocks(k)  # products per group
    assert k > 2 * step
    a = np.ones((m, k), np.float32)
    b = np.zeros((k, n), np.float32)
    b[0], b[step], b[2 * step] = 2e38, 2e38, -3e38  # one per group
    b[1:3, 0] = 3e38  # column 0: two in one group overflow f32 there, as in numpy
    b[3, 1] = 1e20
    a[:, 3] = 1e20  # column 1: a product beyond f32 is inf, as in numpy
    for be in BACKENDS:
        c = kernel(GEMM, be)(np.float32(1.0), a, b)
        total = 2 * np.float64(np.float32(2e38)) - np.float64(np.float32(3e38))
        assert np.all(c[:, 2:] == np.float32(total))  # numpy's f32 loop: inf
        assert np.all(c[:, 0] == np.inf) and np.all(c[:, 1] == np.inf)


def test_f64_group_sums_keep_what_their_total_rounds_away():
    """1e16, then 1, then -1e16, one per group of 8G products: added plainly in f64 the 1
    is lost (1e16 + 1 rounds to 1e16) and the sum is 0; TwoSum keeps it, and the sum is 1."""
    k = 120
    step = BLOCK * group_blocks(k)
    assert 2 * step < k
    a = np.ones((TILE_ROWS, k))
    b = np.zeros((k, tile_cols(F64)))
    b[0], b[step], b[2 * step] = 1e16, 1.0, -1e16
    for be in BACKENDS:
        assert np.all(kernel(GEMM64, be)(1.0, a, b) == 1.0), be


@settings(max_examples=6, deadline=None)
@given(m=SIDES, n=SIDES, k=DEPTHS, seed=st.integers(0, 2**32 - 1))
def test_outer_expression_sees_its_indices(m, n, k, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    outs = [kernel(BIAS, be)(a, b, bias) for be in BACKENDS]
    same_bits(*outs)
    s = np.einsum("ik,kj->ij", a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    want = (np.maximum(s + bias, np.float32(0)).astype(np.float64) + np.arange(m)[:, None]
            - 2 * np.arange(n)[None, :]).astype(np.float32)
    assert_close(outs[0], want, ulps=2, reduction_n=k, magnitude=np.abs(a) @ np.abs(b) + np.abs(want))


def test_stdlib_gemm_tile_edges_on_cpu():
    rng = np.random.default_rng(7)
    for m, k, n in ((TILE_ROWS * 3 + 5, 67, TILE_COLS * 4 + 7), (200, 129, 131)):
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        c = hg.compile_file("kernels/gemm.toml").on("cpu_llvm")(np.float32(0.5), a, b)
        assert_close(c, np.float32(0.5) * (a @ b), ulps=1, reduction_n=k, magnitude=0.5 * (np.abs(a) @ np.abs(b)))


def test_the_tile_step_becomes_vector_fmas_on_cpu():
    """The point of the tiling: after the default pass pipeline, LLVM's SLP vectorizer
    turns each row of the tile step into vector FMAs (any width the host offers)."""
    from hologram_cpu_llvm import jit
    from hologram_cpu_llvm.codegen import compile_program
    prog = hg.compile(GEMM).program
    optimized: list[str] = []
    jit.compile_object(compile_program(prog).module_ir, optimized)
    vector_fmas = [line for line in optimized[0].splitlines()
                   if "@llvm.fma.v" in line and "f32(" in line and " call " in line]
    assert len(vector_fmas) >= TILE_ROWS


BMM = {shared: f'''[kernel]
name = "bmm"
version = "1.0.0"
inputs  = {{ a = "{'f32[m, k]' if shared == 'a' else 'f32[z, m, k]'}", b = "{'f32[k, n]' if shared == 'b' else 'f32[z, k, n]'}" }}
outputs = {{ c = "f32[z, m, n]" }}
body = "c = a @ b"
''' for shared in ("", "a", "b")}


@settings(max_examples=20, deadline=None)
@given(m=SIDES, n=SIDES, k=DEPTHS, z=st.integers(1, 3), shared=st.sampled_from(sorted(BMM)),
       seed=st.integers(0, 2**32 - 1), dt=DTYPES)
def test_batched_matmul_matches_numpy_on_every_shape(m, n, k, z, shared, seed, dt):
    """Every batch takes the tile (or, smaller than a tile, the lead lane's one output at a
    time), one matrix shared by all batches or not; both backends agree bit for bit."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k) if shared == "a" else (z, m, k)).astype(dt)
    b = rng.standard_normal((k, n) if shared == "b" else (z, k, n)).astype(dt)
    wide = np.longdouble if dt is np.float64 else np.float64
    aw, bw = (np.broadcast_to(x, (z,) + x.shape[-2:]).astype(wide) for x in (a, b))
    exact = np.einsum("zik,zkj->zij", aw, bw)  # einsum's own loop, not BLAS
    mag = (np.abs(aw) @ np.abs(bw)).astype(np.float64)
    text = BMM[shared].replace("f32", "f64") if dt is np.float64 else BMM[shared]
    outs = [kernel(text, be)(a, b) for be in BACKENDS]
    same_bits(*outs)
    assert_close(outs[0], exact.astype(dt), ulps=1, reduction_n=k, magnitude=mag)


def test_long_sums_take_longer_groups_within_the_bound():
    """k > 2**e takes groups of 2e - 5 blocks: (8 + G) u stays below the pairwise bound
    2 (ceil(log2 k) + 1) u for every k, one u to spare."""
    for above, blocks in LONG_GROUPS:
        for k in (above + 1, 2 * above):
            bound = 2 * (np.ceil(np.log2(k)) + 1)
            assert BLOCK + blocks <= bound - 1
    assert BLOCK + GROUP <= 2 * (np.ceil(np.log2(BLOCK * GROUP + 1)) + 1)
    rng = np.random.default_rng(3)
    for k in (LONG_GROUPS[0][0] + 1, LONG_GROUPS[3][0] + 3, 1100):
        for dt in (np.float32, np.float64):  # f64: group sums added with TwoSum
            a = rng.standard_normal((TILE_ROWS + 1, k)).astype(dt)
            b = (rng.standard_normal((k, TILE_COLS + 2)) * rng.choice([1e-3, 1.0, 1e3], (k, 1))).astype(dt)
            check_gemm(dt(1.0), a, b)
