"""Held-out acceptance test, part 3: shapes, reductions, index notation and the Atlas.

Broadcasting, reductions over everything / axis= / named index variables, stencils with
affine indices and dims, temporaries, gemm, batched matvec, row softmax, layer-norm, and the
Atlas functions against our own implementation of DESIGN.md's formulas and graph invariants.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import hologram as hg
from hologram.core.errors import HologramError
from heldout_oracle import BACKEND, check, check_reduction, floats, ints, load, quiet, rng


# -------------------------------------------------------------------------- broadcasting


def test_broadcasting():
    r = rng()
    a = r.standard_normal((5, 7)).astype(np.float32)
    row = r.standard_normal(7).astype(np.float32)
    col = r.standard_normal(5).astype(np.float32)
    check(load("broadcast.toml", "add_row")(a, row), a + row, signed_zero=True)
    check(load("broadcast.toml", "add_col")(a, col), a + col[:, None], signed_zero=True)
    u, v = floats(np.float64, 6), floats(np.float64, 9)
    with quiet():
        check(load("broadcast.toml", "outer")(u, v), np.outer(u, v))
    check(load("broadcast.toml", "scale_shift")(a, np.float32(3), np.float32(-1)), a * np.float32(3) - np.float32(1))
    m = ints(np.int32, 12).reshape(3, 4)
    check(load("broadcast.toml", "transpose")(m), np.ascontiguousarray(m.T))


def test_broadcasting_with_unit_dims():
    r = rng()
    a = r.standard_normal((4, 6)).astype(np.float32)
    c = r.standard_normal((4, 1)).astype(np.float32)
    row = r.standard_normal((1, 6)).astype(np.float32)
    out = load("syntax.toml", "broadcast_unit_dims")(a, c, row, np.float32(0.25))
    check(out.y, a + c, signed_zero=True)
    check(out.z, c * row + np.float32(0.25), signed_zero=True)
    with pytest.raises(HologramError):
        load("syntax.toml", "broadcast_unit_dims")(a, np.ones((4, 2), np.float32), row, 0.0)


def test_broadcast_shape_mismatch_is_an_error():
    k = load("broadcast.toml", "add_row")
    with pytest.raises(HologramError) as ei:
        k(np.zeros((3, 4), np.float32), np.zeros(5, np.float32))
    msg = str(ei.value)
    assert "n" in msg and "4" in msg and "5" in msg


# ---------------------------------------------------------------------------- reductions


def test_reductions_over_everything():
    x = rng().uniform(0.5, 1.5, (6, 9))
    out = load("reductions.toml", "total")(x)
    check_reduction(out.s, np.sum(x), x)
    np.testing.assert_allclose(out.p, np.prod(x), rtol=8 * 7 * np.finfo(np.float64).eps * x.size)
    check(out.lo, np.min(x))
    check(out.hi, np.max(x))
    check_reduction(out.mu, np.mean(x), x / x.size)


def test_reductions_propagate_nan():
    x = rng().uniform(-1, 1, (3, 4))
    x[1, 2] = np.nan
    out = load("reductions.toml", "total")(x)
    for v in out:
        assert np.isnan(v)
    y = floats(np.float32, 20, edges=False)
    y[4] = np.nan
    check(load("reductions.toml", "vec_max")(y), np.max(y))


@pytest.mark.parametrize("vals", [[np.inf, -np.inf], [np.inf, 1.0, 2.0], [-np.inf, -np.inf], [np.nan, np.inf],
                                  [1e38, 1e38, -1e38], [-0.0, -0.0], [np.nan, np.nan]])
def test_reductions_of_special_values(vals):
    doc = ('[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = { x = "f32[n]" }\n'
           'outputs = { s = "f32", p = "f32", lo = "f32", hi = "f32", mu = "f32", am = "i64" }\n'
           'body = """\ns = sum(x)\np = prod(x)\nlo = min(x)\nhi = max(x)\nmu = mean(x)\nam = argmax(x)\n"""\n')
    x = np.array(vals, np.float32)
    out = hg.compile(doc, format="toml").on(BACKEND)(x)
    for name, fn in [("s", np.sum), ("p", np.prod), ("lo", np.min), ("hi", np.max), ("mu", np.mean)]:
        check(getattr(out, name), fn(x), ulps=2 if name == "mu" else 0)
    check(out.am, np.argmax(x))


def test_reductions_with_axis():
    x = floats(np.float32, 8 * 11, -3, 3, edges=False).reshape(8, 11)
    out = load("reductions.toml", "axes")(x)
    check_reduction(out.s0, x.sum(axis=0), x, axis=0)
    check_reduction(out.s1, x.sum(axis=1), x, axis=1)
    check(out.hi0, x.max(axis=0))
    check(out.lo1, x.min(axis=1))
    check_reduction(out.mu1, x.mean(axis=1), x / x.shape[1], axis=1)


def test_negative_axes():
    x = rng().standard_normal((4, 6))
    out = load("small_types.toml", "negative_axis")(x)
    check_reduction(out.a, x.sum(axis=-1), x, axis=1)
    check(out.b, x.min(axis=-2))
    np.testing.assert_allclose(out.c, x.sum(axis=0).max(), rtol=1e-14)


def test_three_dimensional_reductions():
    x = rng().standard_normal((3, 4, 5))
    out = load("extras.toml", "cube_axes")(x)
    check_reduction(out.s1, x.sum(axis=1), x, axis=1)
    check_reduction(out.s2, x.sum(axis=2), x, axis=2)
    check_reduction(out.s02, x.sum(axis=(0, 2)), x.transpose(1, 0, 2).reshape(4, -1), axis=1)


def test_argmin_argmax():
    k = load("reductions.toml", "args")
    x = floats(np.float32, 50, edges=False)
    x[[3, 30]] = x.max() + 1  # ties -> first occurrence
    x[[7, 40]] = x.min() - 1
    out = k(x)
    check(out.imin, np.argmin(x))
    check(out.imax, np.argmax(x))
    x[[10, 20]] = np.nan  # numpy: the first NaN wins both
    out = k(x)
    check(out.imin, np.argmin(x))
    check(out.imax, np.argmax(x))
    m = ints(np.int32, 35).reshape(5, 7)
    out = load("reductions.toml", "args_axis")(m)
    check(out.imin, np.argmin(m, axis=1))
    check(out.imax, np.argmax(m, axis=0))


def test_named_index_reductions():
    x = floats(np.float64, 7 * 5, edges=False).reshape(7, 5)
    out = load("reductions.toml", "named_index")(x)
    check_reduction(out.rows, x.sum(axis=1), x, axis=1)
    check(out.cols, x.max(axis=0))
    check_reduction(out.sq, np.sum(x * x), x * x)


def test_nested_and_named_arg_reductions():
    a = rng().uniform(0.5, 1.5, (5, 8))
    a[2, 3] = a[2, 5] = 9.0  # a tie: first index wins
    out = load("indexing.toml", "nested")(a)
    check_reduction(out.s, a.max(axis=1).sum(), a.max(axis=1))
    check(out.idx, np.argmax(a, axis=1))
    np.testing.assert_allclose(out.pr, np.prod(a, axis=0), rtol=1e-14)


def test_index_variables_reused_across_reductions():
    a = ints(np.int64, 36).reshape(6, 6)
    check(load("indexing.toml", "row_col_sums")(a), a.sum(axis=1) + a.sum(axis=0))


def test_integer_sums_follow_numpy_dtypes():
    a, b = ints(np.int32, 64), ints(np.uint8, 64)
    out = load("reductions.toml", "int_sums")(a, b)
    check(out.sa, np.sum(a))
    check(out.sb, np.sum(b))
    check_reduction(out.ma, np.mean(a), a / a.size)


def test_integer_reductions():
    a = ints(np.int16, 6 * 5).reshape(6, 5)
    out = load("extras.toml", "int_reductions")(a)
    check(out.lo, np.min(a))
    check(out.hi, np.max(a, axis=0))
    check(out.p, np.prod(a, axis=1))  # wraps in int64 like numpy
    check_reduction(out.mu, np.mean(a, axis=0), a / a.shape[0], axis=0)


def test_integer_sum_wraps():
    doc = ('[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = { x = "i64[n]", u = "u64[n]" }\n'
           'outputs = { s = "i64", t = "u64" }\nbody = """\ns = sum(x)\nt = sum(u)\n"""\n')
    x = np.array([2**63 - 1, 1, 5], np.int64)
    u = np.array([2**64 - 1, 2, 0], np.uint64)
    out = hg.compile(doc, format="toml").on(BACKEND)(x, u)
    check(out.s, np.sum(x))
    check(out.t, np.sum(u))


def test_reductions_of_small_types_follow_numpy():
    h = floats(np.float16, 40, -4, 4, edges=False)
    p = rng().random(40) < 0.2
    b = ints(np.int8, 40) % 3
    out = load("small_types.toml", "reduce_small")(h, p, b.astype(np.int8))
    b = b.astype(np.int8)
    check_reduction(out.hs, np.sum(h), h)
    check_reduction(out.hm, np.mean(h), h / h.size)
    check(out.ps, np.sum(p))
    check(out.pm, np.max(p))
    check(out.pa, np.argmax(p))
    check(out.bp, np.prod(b))
    check(out.bs, np.sum(b))


def test_reductions_on_length_one_and_empty():
    s, mx = load("reductions.toml", "vec_sum"), load("reductions.toml", "vec_max")
    one = np.array([2.5], np.float32)
    check(s(one), np.sum(one))
    check(mx(one), np.max(one))
    check(s(np.zeros(0, np.float32)), np.float32(0))  # numpy: the empty sum is 0
    with pytest.raises(HologramError):  # numpy raises for the max of nothing
        mx(np.zeros(0, np.float32))


def test_empty_reductions_with_identities():
    doc = ('[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = { x = "f64[n]", i = "i64[m]" }\n'
           'outputs = { s = "f64", p = "f64", si = "i64", pi_ = "i64" }\n'
           'body = """\ns = sum(x)\np = prod(x)\nsi = sum(i)\npi_ = prod(i)\n"""\n')
    out = hg.compile(doc, format="toml").on(BACKEND)(np.zeros(0), np.zeros(0, np.int64))
    check(out.s, np.float64(0))
    check(out.p, np.float64(1))
    check(out.si, np.int64(0))
    check(out.pi_, np.int64(1))


def test_reductions_over_empty_axes():
    with pytest.raises(HologramError):  # min over an empty axis 1: numpy raises too
        load("reductions.toml", "axes")(np.zeros((3, 0), np.float32))
    check(load("reductions.toml", "named_index")(np.zeros((2, 0))).rows, np.zeros(2))
    with pytest.raises(HologramError):
        load("reductions.toml", "args")(np.zeros(0, np.float32))  # numpy: argmin of an empty sequence


def test_f32_sum_accuracy_grows_with_log_n():
    k = load("reductions.toml", "vec_sum")
    x = rng().uniform(0, 1, 200).astype(np.float32)
    check_reduction(k(x), np.float32(np.sum(x.astype(np.float64))), x)


# -------------------------------------------------------- index notation and temporaries


def test_stencils_and_affine_dims():
    x = floats(np.float32, 50, edges=False)
    check(load("stencils.toml", "stencil3")(x), x[:-2] + x[1:-1] + x[2:], signed_zero=True)
    i = ints(np.int64, 30)
    with quiet():
        check(load("stencils.toml", "diff")(i), np.diff(i))
    d = floats(np.float64, 33)
    check(load("stencils.toml", "reverse")(d), d[::-1].copy(), signed_zero=True)
    e = floats(np.float32, 40)
    out = load("stencils.toml", "strided")(e)
    check(out.even, e[0::2].copy(), signed_zero=True)
    check(out.odd, e[1::2].copy(), signed_zero=True)
    p = ints(np.int32, 40)
    with quiet():
        check(load("stencils.toml", "pairs")(p), p[0::2] * p[1::2])
    a = floats(np.float64, 9 * 8, edges=False).reshape(9, 8)
    want = 4 * a[1:-1, 1:-1] - a[:-2, 1:-1] - a[2:, 1:-1] - a[1:-1, :-2] - a[1:-1, 2:]
    check(load("stencils.toml", "laplace2d")(a), want)


def test_stencil_edge_sizes():
    k = load("stencils.toml", "stencil3")
    check(k(np.arange(3, dtype=np.float32)), np.array([3.0], np.float32))
    check(load("stencils.toml", "reverse")(np.array([7.0])), np.array([7.0]))
    out = load("stencils.toml", "strided")(np.zeros(0, np.float32))
    assert out.even.shape == (0,) and out.odd.shape == (0,)


def test_affine_dim_needs_enough_input():
    k = load("stencils.toml", "stencil3")
    with pytest.raises(HologramError):
        k(np.zeros(1, np.float32))  # n - 2 < 0


def test_odd_length_for_even_dim_is_an_error():
    k = load("stencils.toml", "strided")
    with pytest.raises(HologramError) as ei:
        k(np.zeros(7, np.float32))  # 2*n cannot be 7
    assert "7" in str(ei.value)


def test_affine_input_dim_binds_its_symbol():
    doc = ('[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = { x = "f64[n + 2]" }\n'
           'outputs = { y = "f64[n]" }\nbody = "y[i] = x[i] + x[i + 2]"\n')
    k = hg.compile(doc, format="toml").on(BACKEND)
    x = floats(np.float64, 12, edges=False)
    check(k(x), x[:-2] + x[2:])
    check(k(np.ones(2)), np.zeros(0))
    with pytest.raises(HologramError):
        k(np.ones(1))


def test_correlate_valid():
    k = load("indexing.toml", "correlate")
    r = rng()
    for n, m in [(20, 3), (5, 5), (40, 1)]:
        x, w = r.standard_normal(n), r.standard_normal(m)
        terms = np.abs(np.lib.stride_tricks.sliding_window_view(x, m) * w)
        check_reduction(k(x, w), np.correlate(x, w, "valid"), terms, axis=1)
    with pytest.raises(HologramError):
        k(np.ones(1), np.ones(3))  # n - m + 1 < 0
    check(k(np.ones(2), np.ones(3)), np.zeros(0))  # n - m + 1 == 0: empty, as numpy's "valid"


def test_conv2d():
    r = rng()
    a = r.standard_normal((7, 9)).astype(np.float32)
    f = r.standard_normal((3, 3)).astype(np.float32)
    win = np.lib.stride_tricks.sliding_window_view(a.astype(np.float64), (3, 3))
    want = np.einsum("ijpq,pq->ij", win, f.astype(np.float64)).astype(np.float32)
    got = load("indexing.toml", "conv2d")(a, f)
    check_reduction(got, want, np.abs(win * f).reshape(5, 7, 9), axis=2)
    with pytest.raises(HologramError):  # f must be 3x3
        load("indexing.toml", "conv2d")(a, np.ones((2, 3), np.float32))


def test_transposed_product_and_reversals():
    r = rng()
    a, b = r.standard_normal((6, 4)), r.standard_normal((6, 5))
    check_reduction(load("indexing.toml", "atb")(a, b), a.T @ b, np.abs(a)[:, :, None] * np.abs(b)[:, None, :], axis=0)
    m = ints(np.int32, 24).reshape(3, 8)
    v = ints(np.int32, 8)
    out = load("indexing.toml", "flip_rows_tile")(m, v)
    check(out.y, m[::-1].copy())
    check(out.t, v + m[:, ::-1])
    x = floats(np.float64, 30)
    check(load("indexing.toml", "strided_reduction")(x), x[1::2] - x[0::2])


def test_repeated_symbol_and_diagonal():
    k = load("extras.toml", "square_matrix")
    a = rng().standard_normal((5, 5))
    out = k(a)
    check_reduction(out.tr, np.trace(a), np.diag(a))
    check(out.sym, (a + a.T) / 2)
    with pytest.raises(HologramError) as ei:
        k(np.zeros((3, 4)))
    assert "3" in str(ei.value) and "4" in str(ei.value)


def test_strided_reduction_variable():
    x = np.arange(10.0)
    check(load("strided_sum.toml")(x), np.sum(x[0::2]))


def test_temporaries_survive_fusion():
    x = floats(np.float64, 25, edges=False)
    check(load("temporaries.toml", "reverse_temp")(x), (x * 2 + 1)[::-1].copy())
    i = ints(np.int64, 20)
    check(load("temporaries.toml", "stencil_of_temp")(i), np.diff(i * i))
    out = load("temporaries.toml", "outputs_feed_outputs")(x)
    check(out.y, x * 2)
    check_reduction(out.s, np.sum(x * 2), x * 2)
    np.testing.assert_allclose(out.z, (x * 2) / np.sum(x * 2), rtol=1e-13)
    u, v = floats(np.float64, 5, edges=False), floats(np.float64, 7, edges=False)
    out = load("temporaries.toml", "outer_then_reduce")(u, v)
    check_reduction(out.s, np.outer(u, v).sum(), np.outer(u, v))
    check(out.r, np.outer(u, v).max(axis=0))
    f = floats(np.float32, 30, edges=False)
    a = f[:-1] + f[1:]
    check(load("temporaries.toml", "prefix_window")(f), (a[:-2] + a[2:])[:-1] - f[4:])
    check(load("temporaries.toml", "prefix_window")(np.ones(4, np.float32)), np.zeros(0, np.float32))


def test_temporaries_chain():
    x = rng().standard_normal(64)
    c = x - x.mean()
    want = c / np.sqrt(np.mean(c * c))
    np.testing.assert_allclose(load("extras.toml", "chain_temporaries")(x), want, rtol=1e-13, atol=1e-13)


# ------------------------------------------------------------------------ linear algebra


def test_batched_matvec_dot_int_gemm():
    r = rng()
    a = r.standard_normal((3, 4, 6)).astype(np.float32)
    x = r.standard_normal((3, 6)).astype(np.float32)
    want = np.einsum("bik,bk->bi", a.astype(np.float64), x.astype(np.float64)).astype(np.float32)
    check_reduction(load("linalg.toml", "batched_matvec")(a, x), want, np.abs(a) * np.abs(x)[:, None, :], axis=2)
    u, v = r.standard_normal(100), r.standard_normal(100)
    check_reduction(load("linalg.toml", "dot")(u, v), np.dot(u, v), u * v)
    ia = r.integers(-1000, 1000, (5, 7)).astype(np.int32)
    ib = r.integers(-1000, 1000, (7, 4)).astype(np.int32)
    ia[0, 0] = ib[0, 0] = 2**31 - 1  # the product wraps, exactly as numpy's int32 matmul
    with quiet():
        check(load("linalg.toml", "gemm_i32")(ia, ib), ia @ ib)


def test_softmax_rows_and_layernorm():
    r = rng()
    x = r.standard_normal((6, 10)).astype(np.float32) * 5
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    want = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    np.testing.assert_allclose(load("rownorm.toml", "softmax_rows")(x), want, rtol=8 * 5 * 2**-23)
    g, b = r.standard_normal(10).astype(np.float32), r.standard_normal(10).astype(np.float32)
    mu = x64.mean(axis=1, keepdims=True)
    want = ((x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(axis=1, keepdims=True) + 1e-5) * g + b).astype(np.float32)
    got = load("rownorm.toml", "layernorm")(x, g, b, np.float32(1e-5))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------------- Atlas


def design_class(byte: int) -> int | None:
    """DESIGN.md's formula; None for the (b4, b5) = (1, 1) bytes whose fold the docs define."""
    b = [(byte >> i) & 1 for i in range(8)]
    h2 = (b[7] << 1) | b[6]
    d = {(0, 0): 0, (1, 0): 1, (0, 1): 2}.get((b[4], b[5]))
    l = (b[3] << 2) | (b[2] << 1) | b[1]  # noqa: E741
    return None if d is None else 24 * h2 + 8 * d + l


def test_atlas_class_matches_the_formula():
    all_bytes = np.arange(256, dtype=np.uint8)
    c = load("atlas.toml", "classify")(all_bytes)
    assert c.dtype == np.int32 and ((0 <= c) & (c < 96)).all()
    for byte in range(256):
        want = design_class(byte)
        if want is None:  # folded bytes keep h2 and l, and land on one of the three d values
            h2, l = byte >> 6, (byte >> 1) & 7  # noqa: E741
            assert c[byte] in {24 * h2 + 8 * d + l for d in range(3)}, byte
        else:
            assert c[byte] == want, byte
    assert len(set(c.tolist())) == 96  # every class is reached


def atlas_tables():
    classes = np.arange(96, dtype=np.int32)
    g = load("atlas.toml", "graph")(classes)
    deg = g.deg
    nb = load("atlas.toml", "neighbors")
    cs = np.repeat(classes, 6)
    ks = np.tile(np.arange(6, dtype=np.int32), 96)
    valid = ks < deg[cs]
    adj = nb(cs[valid].copy(), ks[valid].copy())
    return g, cs[valid], adj


def test_atlas_graph_invariants():
    g, src, dst = atlas_tables()
    assert (np.bincount(g.deg, minlength=7)[[5, 6]] == [64, 32]).all()
    assert set(g.deg.tolist()) == {5, 6}
    assert ((0 <= dst) & (dst < 96)).all()
    edges = {(int(a), int(b)) for a, b in zip(src, dst)}
    assert len(edges) == len(src), "neighbour lists repeat a class"
    assert all(a != b for a, b in edges), "self loop"
    assert all((b, a) in edges for a, b in edges), "neighbour relation is not symmetric"
    assert len(edges) // 2 == 256
    mir = g.mir
    classes = np.arange(96)
    assert (mir[mir] == classes).all() and (mir != classes).all()
    assert len({frozenset((int(c), int(mir[c]))) for c in classes}) == 48
    assert not any((int(c), int(mir[c])) in edges for c in classes), "a class is adjacent to its mirror"
    assert g.uni.sum() == 2


def test_bound_map_and_resonance():
    r = rng()
    c = r.integers(0, 96, 50)
    p = r.integers(0, 48, 50)
    b = r.integers(0, 256, 50)
    c[:2], p[:2], b[:2] = [0, 95], [0, 47], [0, 255]
    check(load("atlas.toml", "address")(c, p, b), c * 12288 + p * 256 + b)
    assert 95 * 12288 + 47 * 256 + 255 == 96 * 48 * 256 - 1
    cls = r.integers(0, 96, 200).astype(np.int32)
    v = r.standard_normal(200)
    h = load("atlas.toml", "histogram")(cls, v)
    want = np.zeros(96)
    np.add.at(want, cls, v)
    assert h.dtype == np.float64 and h.shape == (96,)
    np.testing.assert_allclose(h, want, rtol=1e-12, atol=1e-12)


def test_atlas_bad_class_is_an_error_or_not_a_class():
    """DESIGN.md is silent on classes outside 0..95: no crash, and no pretend answer."""
    bad = np.array([96, -1, 2**31 - 1], np.int32)
    try:
        g = load("atlas.toml", "graph")(bad)
    except HologramError:
        return
    assert not ((0 <= g.mir) & (g.mir < 96)).any() and not g.uni.any() and not np.isin(g.deg, [5, 6]).any()


def test_resonance_with_bad_classes_does_not_crash():
    k = load("atlas.toml", "histogram")
    try:
        h = k(np.array([0, 96, -1, 5], np.int32), np.ones(4))
    except HologramError:
        return
    assert h[0] == 1 and h[5] == 1


@given(st.integers(0, 3), st.integers(-2, 4), st.integers(1, 2), st.integers(0, 9))
def test_affine_offsets_are_in_bounds_or_an_error(c, a, s, n):
    """y[i] = x[s*i + a] over y: [n - c]: numpy's answer when every index is in bounds, else an error."""
    doc = ('[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = { x = "i32[n]" }\n'
           f'outputs = {{ y = "i32[n - {c}]" }}\nbody = "y[i] = x[{s}*i + {a}] * 3"\n')
    x = np.arange(n, dtype=np.int32) - 4
    idx = s * np.arange(max(n - c, 0)) + a
    try:
        got = hg.compile(doc, format="toml").on(BACKEND)(x)
    except HologramError:
        assert n < c or (idx.size and (idx.min() < 0 or idx.max() >= n)), (c, a, s, n)
        return
    assert not (idx.size and (idx.min() < 0 or idx.max() >= n)), "read out of bounds without an error"
    check(got, x[idx] * 3)
