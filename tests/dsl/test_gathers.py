"""Gathers in index notation (docs/dsl.md, "Gathers"; decision 15): numpy's integer-array
indexing on both backends, negative constants counting from the end, the errors of
indices that are not integers, run-time errors that name the document line, and the
compile-time warning for an access out of bounds at every size."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import hologram as hg
from hologram.core.errors import CompileError, CompileWarning, ExecutionError
from hologram.dsl.indexing import Check, constant_index, numpy_index
from hologram.core.types import Affine, DType
from hologram.ir import Expr

from dsl_helpers import compile_ir, document, statements

BACKENDS = ("interp", "cpu_llvm")


def kernel(body: str, inputs: dict[str, str], outputs: dict[str, str], backend: str):
    return hg.compile(document(body, inputs, outputs), file="kernels/g.toml").on(backend)


# ------------------------------------------------------------------ semantics
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("itype", ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"])
def test_a_gather_is_numpy_fancy_indexing(backend, itype):
    x = np.arange(10, dtype=np.float32) * 1.5
    signed = itype.startswith("i")
    idx = np.array([0, 9, 3, 3, -1, -10, 5] if signed else [0, 9, 3, 3, 7], DType.parse(itype).np)
    y = kernel("y[i] = x[idx[i]]", {"x": "f32[n]", "idx": f"{itype}[k]"}, {"y": "f32[k]"}, backend)(x, idx)
    np.testing.assert_array_equal(y, x[idx])


@pytest.mark.parametrize("backend", BACKENDS)
def test_rows_columns_and_computed_indices(backend):
    a = np.arange(20, dtype=np.int32).reshape(4, 5)
    idx = np.array([3, -1, 0, -4, 2], np.int64)
    k = kernel("r[i, j] = a[idx[i], j]\nc[i, j] = a[j, idx[i] % 5]\nm[i] = a[i % 4, (idx[i] + 7) % 5] + i",
               {"a": "i32[4, 5]", "idx": "i64[k]"}, {"r": "i32[k, 5]", "c": "i32[k, 4]", "m": "i64[k]"}, backend)
    out = k(a, idx)
    np.testing.assert_array_equal(out.r, a[idx])
    np.testing.assert_array_equal(out.c, a[:, idx % 5].T)
    ar = np.arange(5)
    np.testing.assert_array_equal(out.m, a[ar % 4, (idx + 7) % 5] + ar)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_scalar_input_and_a_gather_of_a_gather(backend):
    x = np.arange(6, dtype=np.float64) ** 2
    p = np.array([5, 0, 2, 1, 4, 3], np.int16)
    k = kernel("first = x[s]\ny[i] = x[p[p[i]]]", {"x": "f64[n]", "p": "i16[n]", "s": "i64"},
               {"first": "f64", "y": "f64[n]"}, backend)
    for s in (0, 5, -1, -6):
        out = k(x, p, s)
        assert out.first == x[s]
        np.testing.assert_array_equal(out.y, x[p[p]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_constants_count_from_the_end(backend):
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    k = kernel("last = x[-1]\ncol[i] = m[i, -2]\ncorner = m[-3, -4]", {"x": "f32[n]", "m": "f32[r, c]"},
               {"last": "f32", "col": "f32[r]", "corner": "f32"}, backend)
    out = k(np.arange(5, dtype=np.float32), m)
    assert out.last == 4 and out.corner == m[-3, -4]
    np.testing.assert_array_equal(out.col, m[:, -2])
    with pytest.raises(ExecutionError, match="out of bounds"):  # numpy: IndexError for m[-3] of 2 rows
        k(np.arange(5, dtype=np.float32), m[:2].copy())
    with pytest.raises(ExecutionError):
        k(np.zeros(0, np.float32), m)


# ------------------------------------------------------------------ errors at run time
@pytest.mark.filterwarnings("ignore:.*temporary 't' is assigned but never used")  # t only moves y to line 8
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_index_out_of_range_names_the_line_and_never_reads(backend):
    k = kernel("t = x[0]\ny[i] = x[idx[i]] * 2", {"x": "f32[n]", "idx": "i32[k]"}, {"y": "f32[k]"}, backend)
    x = np.arange(4, dtype=np.float32)
    for bad in (4, -5, 2**31 - 1, -2**31):
        with pytest.raises(ExecutionError) as info:
            k(x, np.array([0, bad], np.int32))
        text = str(info.value)
        assert text.startswith("kernels/g.toml:8:8: error: stage 'y'"), text
        assert "out of bounds for global buffer 'x' of 4 elements" in text
        assert "   8 | y[i] = x[idx[i]] * 2\n     |        ^^^^^^^^^" in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_gathered_row_index_never_reads_another_row(backend):
    """2**61 * 4 + j wraps to j in i64: the row index is checked against its own
    dimension, not only the flat index."""
    k = kernel("y[i, j] = a[idx[i], j]", {"a": "f32[3, 4]", "idx": "i64[k]"}, {"y": "f32[k, 4]"}, backend)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for bad in (3, -4, 2**61, 2**62 + 1, -2**63):
        with pytest.raises(ExecutionError, match=r"kernels/g.toml:7:11") as info:
            k(a, np.array([1, bad], np.int64))
        # not the sentinel's value: what failed, in words
        assert "an index is out of bounds for its dimension of global buffer 'a' (12 elements)" in str(info.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_unsigned_index_above_the_i64_maximum_is_out_of_range(backend):
    k = kernel("y[i] = x[idx[i]]", {"x": "f32[n]", "idx": "u64[k]"}, {"y": "f32[k]"}, backend)
    x = np.arange(4, dtype=np.float32)
    for bad in (2**64 - 1, 2**63, 2**64 - 4):  # as i64: -1, the minimum, -4: must not count from the end
        with pytest.raises(ExecutionError):
            k(x, np.array([bad], np.uint64))


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_inner_gather_out_of_range_names_its_own_column(backend):
    k = kernel("y[i] = x[i] + x[idx[i]]", {"x": "f32[n]", "idx": "i8[n]"}, {"y": "f32[n]"}, backend)
    with pytest.raises(ExecutionError, match=r"^kernels/g.toml:7:15: error"):
        k(np.zeros(3, np.float32), np.array([0, 1, 3], np.int8))


# ------------------------------------------------------------------ errors at compile time
@pytest.mark.parametrize("body, message, col", [
    ("y[i] = x[w[i] * 0.5]", r"an index must be an integer; this one is f64", 10),
    ("y[i] = x[f[i]]", r"an index must be an integer; this one is f32", 10),
    ("y[i] = x[w[i] > 0]", r"this one is a bool", 10),
    ("y[i] = x[w]", r"'w' is an array \(\[n\]\)", 10),
    ("y[i] = x[w + 1]", r"one integer per point; this one has shape \[n\]", 10),
    ("y[i] = x[pi]", r"this one is f64", 10),
])
def test_indices_that_are_not_integers_per_point(body, message, col):
    with pytest.raises(CompileError, match=message) as info:
        compile_ir(body, {"x": "f32[n]", "w": "i32[n]", "f": "f32[n]"}, {"y": "f32[n]"})
    assert (info.value.span.line, info.value.span.col) == (1, col)


def test_a_bool_index_says_to_use_where():
    with pytest.raises(CompileError) as info:
        compile_ir("y[i] = x[w[i] > 0]", {"x": "f32[n]", "w": "i32[n]"}, {"y": "f32[n]"})
    assert "where(mask, x, 0)" in info.value.hint


# ------------------------------------------------------------------ the IR
def test_the_ir_of_a_gather_counts_negative_values_from_the_end():
    assert statements("y[i] = x[idx[i]]", {"x": "f32[n]", "idx": "i32[k]"}, {"y": "f32[k]"}) == [
        "y[i] = x[where(cmplt(i64(idx[i]), 0:i64):bool, add(i64(idx[i]), n):i64, i64(idx[i])):i64]"]
    assert statements("y[i] = x[idx[i]]", {"x": "f32[n]", "idx": "u16[k]"}, {"y": "f32[k]"}) == [
        "y[i] = x[i64(idx[i])]"]
    assert statements("y = x[-2]", {"x": "f32[n]"}, {"y": "f32"}) == ["y = x[sub(n, 2:i64):i64]"]


def test_an_affine_index_is_not_a_gather():
    assert statements("y[i] = x[n - 1 - i]", {"x": "f32[n]"}, {"y": "f32[n]"}) == ["y[i] = x[sub(sub(n, i):i64, 1:i64):i64]"]


@pytest.mark.filterwarnings("ignore:.*temporary 't' is assigned but never used")  # t only moves y to line 2
def test_loads_carry_sites_into_the_ir_table():
    kir = compile_ir("t = x[0]\ny[i] = x[idx[i]] + x[i]", {"x": "f32[n]", "idx": "i32[n]"}, {"y": "f32[n]"})
    loads = [e for e in kir.body[1].body.walk() if e.op == "LOAD"]
    sites = {e.arg + str(e.srcs[0].op): kir.sites[e.site] for e in loads}
    assert [(s.line, s.col, s.end_col) for s in sites.values()] == [(2, 10, 16), (2, 8, 17), (2, 20, 24)]
    assert all(s.text == "y[i] = x[idx[i]] + x[i]" and s.file == "<test>" for s in sites.values())


def test_the_site_table_is_part_of_the_ir_equality():
    a = compile_ir("y[i] = x[idx[i]]", {"x": "f32[n]", "idx": "i32[n]"}, {"y": "f32[n]"})
    b = compile_ir("\ny[i] = x[idx[i]]", {"x": "f32[n]", "idx": "i32[n]"}, {"y": "f32[n]"})
    assert a.body == b.body and a != b  # the same statements, written on another line


def test_numpy_index_returns_the_check_it_needs():
    n = Affine.of("n")
    assert constant_index(-1, n).check is Check.BOUNDS and str(constant_index(-1, n).expr) == "sub(n, 1:i64):i64"
    assert constant_index(2, Affine.of(3)).check is Check.NONE
    assert constant_index(-3, Affine.of(3)).check is Check.NONE
    assert constant_index(3, Affine.of(3)).check is Check.BOUNDS
    load = Expr.load("idx", DType.I32, (Expr.idx("i"),))
    assert numpy_index(load, n).check is Check.OWN
    assert numpy_index(Expr.const(-1, DType.I64), Affine.of(4)).expr == Expr.const(3, DType.I64)
    with pytest.raises(CompileError, match="too large for i64"):
        numpy_index(2**64, n)


# ------------------------------------------------------------------ the compile-time warning
@pytest.mark.parametrize("body, outputs, message, hint", [
    ("y[i] = x[i + 1]", {"y": "f32[n]"}, r"'x' is indexed past its end at i = n - 1 .* reaches n", r"y: f32\[n - 1\]"),
    ("y[i] = x[i + 2] * x[i]", {"y": "f32[n - 1]"}, r"at i = n - 2 .* reaches n", r"y: f32\[n - 2\]"),
    ("y[i] = z[2*i + 2]", {"y": "f32[n]"}, r"reaches 2\*n", r"y: f32\[n - 1\]"),
    ("y[i] = x[i - 1]", {"y": "f32[n]"}, r"before its start at i = 0", r"shift the index"),
    ("y[i] = sum(x[i + d], d in range(3))", {"y": "f32[n]"}, r"at d = 2, i = n - 1", r"y: f32\[n - 2\]"),
    ("y[i, j] = m[i, j + 1]", {"y": "f32[r, c]"}, r"'m' is indexed past its end at j = c - 1", r"y: f32\[r, c - 1\]"),
])
def test_an_access_out_of_bounds_at_every_size_warns(body, outputs, message, hint):
    with pytest.warns(CompileWarning, match=message) as record:
        compile_ir(body, {"x": "f32[n]", "m": "f32[r, c]", "z": "f32[2*n]"}, outputs)
    w = record[0].message
    assert w.span.line == 1 and w.message and str(w).startswith("<test>:1:")
    assert re.search(hint, w.hint), w.hint


@pytest.mark.parametrize("body, outputs", [
    ("y[i] = x[i + 1]", {"y": "f32[n - 1]"}),
    ("y[i] = x[i] + x[n - 1 - i]", {"y": "f32[n]"}),
    ("y[i] = where(i < n - 1, x[i + 1], 0.0)", {"y": "f32[n]"}),
    ("y[i] = where(i > 0, x[i - 1], x[i])", {"y": "f32[n]"}),
    ("y[i] = x[i + k]", {"y": "f32[k]"}),                       # depends on n and k: not at every size
    ("y[i] = sum(x[i + d], d in range(3))", {"y": "f32[n - 2]"}),
    ("y[i] = x[idx[i]]", {"y": "f32[n]"}),                      # a gather: its values decide
    ("t[i] = x[i + 1]\ny = sum(t)", {"y": "f32"}),              # a temporary's range keeps it inside
])
def test_no_warning_for_accesses_inside_at_some_size(body, outputs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        compile_ir(body, {"x": "f32[n]", "idx": "i32[n]", "m": "f32[r, c]", "w": "f32[k]"}, outputs)


def test_a_warned_kernel_still_runs_where_nothing_is_read():
    with pytest.warns(CompileWarning):
        k = kernel("y[i] = x[i + 1]", {"x": "f32[n]"}, {"y": "f32[n]"}, "interp")
    assert k(np.zeros(0, np.float32)).shape == (0,)


@pytest.mark.parametrize("opt", ["O0", "O2"])
def test_a_fused_temporary_read_out_of_range_names_the_reading_line(opt):
    """At O2 `t` is computed inside `y` (the fuse pass): the failing read is `t[idx[i]]`,
    on line 8, not `x` on line 7."""
    k = hg.compile(document("t = x * 2\ny[i] = t[idx[i]]", {"x": "f32[n]", "idx": "i32[k]"}, {"y": "f32[k]"}),
                   file="kernels/g.toml", opt=opt).on("cpu_llvm")
    with pytest.raises(ExecutionError, match=r"^kernels/g.toml:8:8: error"):
        k(np.zeros(3, np.float32), np.array([5], np.int32))
