"""Scatter-add in index notation (docs/dsl.md, "Scatter-add"; decision 29): `h[b[i]] +=
w[i]` is numpy's np.add.at on zeros, on both backends, with the errors of its targets and
run-time errors that name the line."""

from __future__ import annotations

import numpy as np
import pytest

import hologram as hg
from hologram.core.errors import MISSED_DIMENSION, CompileError, ExecutionError
from hologram.core.types import DType
from hologram.ir import Accumulate

from dsl_helpers import compile_ir, document, statements

BACKENDS = ("interp", "cpu_llvm")


def kernel(body: str, inputs: dict[str, str], outputs: dict[str, str], backend: str):
    return hg.compile(document(body, inputs, outputs), file="kernels/s.toml").on(backend)


def add_at(shape, dtype, index, values) -> np.ndarray:
    h = np.zeros(shape, dtype)
    np.add.at(h, index, values)
    return h


# ------------------------------------------------------------------ semantics
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("btype", ["u8", "i32", "i64", "u64"])
def test_a_histogram_is_bincount(backend, btype):
    b = np.random.default_rng(1).integers(0, 256, 3000).astype(DType.parse(btype).np)
    h = kernel("h[b[i]] += 1", {"b": f"{btype}[n]"}, {"h": "i64[256]"}, backend)(b)
    np.testing.assert_array_equal(h, np.bincount(b, minlength=256))


@pytest.mark.parametrize("backend", BACKENDS)
def test_weights_negative_indices_and_duplicates(backend):
    b = np.array([0, -1, 2, 2, 2, -4, 3], np.int16)
    w = np.array([1.5, 2.0, -1.0, 4.0, 0.25, 8.0, 3.0], np.float32)
    k = kernel("h[b[i]] += w[i]\nc[b[i]] += 1\nd[(b[i] + 4) % 4] += i", {"b": "i16[n]", "w": "f32[n]"},
               {"h": "f32[4]", "c": "i32[4]", "d": "i64[4]"}, backend)
    out = k(b, w)
    np.testing.assert_array_equal(out.h, add_at(4, np.float32, b, w))
    np.testing.assert_array_equal(out.c, add_at(4, np.int32, b, 1))
    np.testing.assert_array_equal(out.d, add_at(4, np.int64, (b + 4) % 4, np.arange(7)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_rows_and_a_plain_variable_in_the_target(backend):
    rng = np.random.default_rng(2)
    b = rng.integers(-5, 5, 40).astype(np.int32)
    w = rng.standard_normal((40, 3)).astype(np.float64)
    k = kernel("h[b[i], j] += w[i, j]\ng[i, c[i]] += 2", {"b": "i32[n]", "w": "f64[n, m]", "c": "u8[n]"},
               {"h": "f64[5, m]", "g": "i32[n, 3]"}, backend)
    c = rng.integers(0, 3, 40).astype(np.uint8)
    out = k(b, w, c)
    np.testing.assert_allclose(out.h, add_at((5, 3), np.float64, b, w), rtol=1e-12)
    np.testing.assert_array_equal(out.g, add_at((40, 3), np.int32, (np.arange(40), c), 2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_f16_bins_accumulate_in_f64(backend):
    """numpy's add.at on an f16 array stops at 2048 (2048 + 1 rounds back to 2048); the DSL
    accumulates f16 and f32 scatters in f64 and rounds once."""
    n = 10000
    h = kernel("h[b[i]] += w[i]", {"b": "u8[n]", "w": "f16[n]"}, {"h": "f16[2]"}, backend)(
        np.zeros(n, np.uint8), np.ones(n, np.float16))
    assert h[0] == np.float16(n) and h[1] == 0
    assert add_at(2, np.float16, np.zeros(n, np.int64), np.float16(1))[0] == 2048  # what numpy's own gives


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_empty_domain_leaves_zeros_and_integers_wrap(backend):
    k = kernel("h[b[i]] += w[i]", {"b": "i64[n]", "w": "u8[n]"}, {"h": "u8[3]"}, backend)
    np.testing.assert_array_equal(k(np.zeros(0, np.int64), np.zeros(0, np.uint8)), [0, 0, 0])
    np.testing.assert_array_equal(k(np.zeros(3, np.int64), np.full(3, 200, np.uint8)), [(600 % 256), 0, 0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_scatter_output_can_be_read_afterwards(backend):
    k = kernel("h[b[i]] += 1\np = f64(h) / n", {"b": "u8[n]"}, {"h": "i64[4]", "p": "f64[4]"}, backend)
    out = k(np.array([0, 1, 1, 3], np.uint8))
    np.testing.assert_array_equal(out.p, [0.25, 0.5, 0, 0.25])


def test_a_large_histogram_runs_in_parallel_on_cpu_llvm():
    """Enough lanes that cpu_llvm splits the stage across threads (private copies of h,
    merged): the counts must still be exact."""
    b = np.random.default_rng(3).integers(-256, 256, 2_000_000).astype(np.int32)
    h = kernel("h[b[i]] += 1", {"b": "i32[n]"}, {"h": "i64[256]"}, "cpu_llvm")(b)
    np.testing.assert_array_equal(h, add_at(256, np.int64, b, 1))


# ------------------------------------------------------------------ errors at run time
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_target_index_out_of_range_names_the_line(backend):
    k = kernel("h[b[i]] += 1\nr[b[i], j] += w[i, j]", {"b": "i32[n]", "w": "f32[n, m]"},
               {"h": "i64[4]", "r": "f32[4, m]"}, backend)
    w = np.ones((2, 3), np.float32)
    for bad in (4, -5, 2**31 - 1):
        with pytest.raises(ExecutionError) as info:
            k(np.array([0, bad], np.int32), w)
        text = str(info.value)
        assert text.startswith("kernels/s.toml:7:1: error:"), text
        assert "   7 | h[b[i]] += 1\n     | ^^^^^^^" in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_row_index_out_of_range_never_adds_into_another_row(backend):
    k = kernel("r[b[i], j] += w[i, j]", {"b": "i64[n]", "w": "f32[n, m]"}, {"r": "f32[4, m]"}, backend)
    for bad in (4, -5, 2**62, -2**63):
        with pytest.raises(ExecutionError, match=r"^kernels/s.toml:7:1: error"):
            k(np.array([1, bad], np.int64), np.ones((2, 3), np.float32))


# ------------------------------------------------------------------ errors at compile time
@pytest.mark.parametrize("body, outputs, message", [
    ("h[b[i]] += 1\ny = sum(h)", {"y": "i64"}, r"'h' is not a declared output; the target of '\+=' must be one"),
    ("h[b[i]] += 1", {"h": "bool[4]"}, r"cannot scatter-add into 'h' of type bool"),
    ("h[b[i], j] += 1", {"h": "i64[4]"}, r"output 'h' has 1 dimension \(i64\[4\]\) but the target has 2 indices"),
    ("h[b[i]] += w[i]", {"h": "i32[4]"}, r"cannot add a f32 value into output 'h' of type i32"),
    ("h[b[i]] += w", {"h": "f32[4]"}, r"one value per point; it has shape \[n\]"),
    ("h[b[i]] += 1\nh[b[i]] += 1", {"h": "i64[4]"}, r"'h' is assigned twice"),
    ("h = 1\nh[b[i]] += 1", {"h": "i64[4]"}, r"'h' is assigned twice"),
    ("h[b[i] > 0] += 1", {"h": "i64[4]"}, r"an index must be an integer; this one is a bool"),
    ("h[bb[i]] += 1", {"h": "i64[4]"}, r"unknown name 'bb'; did you mean 'b'"),
    ("h[k] += 1", {"h": "i64[4]"}, None),  # k names nothing: a domain variable, over h's 4 rows
])
def test_scatter_errors(body, outputs, message):
    ins = {"b": "i32[n]", "w": "f32[n]"}
    if message is None:
        assert statements(body, ins, outputs) == ["h[k] += 1:i64  for k<4"]
        return
    with pytest.raises(CompileError, match=message):
        compile_ir(body, ins, outputs)


def test_whole_array_plus_equals_keeps_its_hint():
    with pytest.raises(CompileError) as info:
        compile_ir("y = x\ny += x", {"x": "f32[n]"}, {"y": "f32[n]"})
    assert "there is no '+=' on whole arrays" in info.value.hint and "h[b[i]] += w[i]" in info.value.hint


# ------------------------------------------------------------------ the IR
def test_the_ir_of_a_scatter():
    kir = compile_ir("h[b[i], j] += w[i, j] * 2", {"b": "i32[n]", "w": "f32[n, m]"}, {"h": "f64[5, m]"})
    (st,) = kir.body
    assert isinstance(st, Accumulate) and not st.resonance and st.vars == ("i", "j")
    assert [str(e) for e in st.extents] == ["n", "m"]
    assert kir.sites[st.site].col == 1 and kir.sites[st.site].end_col == 11  # `h[b[i], j]`
    assert str(st).startswith(f"h[where(and(cmpge(%0, 0:i64):bool, cmplt(%0, 5:i64):bool):bool, "
                              f"add(mul(%0, m):i64, j):i64, {MISSED_DIMENSION}:i64):i64] "
                              f"+= f64(mul(w[i, j], 2.0:f32):f32)  for i<n, j<m")


def test_domain_variables_skip_names_bound_by_a_reduction():
    """`h[argmax(a[i, k], k)] += 1` counts the rows' argmax: k is the reduction's, i the domain's."""
    (text,) = statements("h[argmax(a[i, k], k)] += 1", {"a": "f32[n, m]"}, {"h": "i64[m]"})
    assert text.endswith("+= 1:i64  for i<n\n    where %0 = argmax[k_1<m](a[i, k_1]):i64"), text
