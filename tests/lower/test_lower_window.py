"""Small windows (hologram/lower/window.py): reductions over small constant extents are
straight-line code with proven, unchecked loads, and compute what numpy does on both
backends (docs/lowering.md, section 3)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hologram as hg
from hologram.core.errors import ExecutionError
from hologram.core.types import Affine, DType
from hologram.ir import Expr
from hologram.isa.builder import ProgramBuilder
from hologram.isa.program import Instr
from hologram.lower.expr import ExprGen
from hologram.lower.loops import reduce_in_lane
from hologram.lower.plan import I64, add, const
from hologram.lower.window import WINDOW_POINTS, at_point, window_points
from hologram.testing.contract import assert_close

BACKENDS = ("interp", "cpu_llvm")
_KERNELS: dict[tuple[str, str], hg.Kernel] = {}


def doc(body: str, inputs: str, outputs: str) -> str:
    return (f'[kernel]\nname = "w"\nversion = "1.0.0"\ninputs = {{ {inputs} }}\noutputs = {{ {outputs} }}\n'
            f'body = "{body}"\n')


BLUR = doc("y[i, j] = sum(img[i + di, j + dj], di in range(3), dj in range(3)) / 9",
           'img = "f32[h, w]"', 'y = "f32[h - 2, w - 2]"')


def kernel(text: str, backend: str) -> hg.Kernel:
    if (text, backend) not in _KERNELS:
        _KERNELS[text, backend] = hg.compile(text).on(backend)
    return _KERNELS[text, backend]


def on_both(text: str, *args: np.ndarray) -> np.ndarray:
    """The kernel's output on both backends, which must agree bit for bit (NaN with NaN)."""
    a, b = (np.asarray(kernel(text, be)(*args)) for be in BACKENDS)
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype.kind == "f":
        nan = np.isnan(a) & np.isnan(b)
        assert np.array_equal(np.where(nan, 0, a), np.where(nan, 0, b)) and np.array_equal(
            np.signbit(np.where(nan, 0, a)), np.signbit(np.where(nan, 0, b)))
    else:
        assert np.array_equal(a, b)
    return a


# ------------------------------------------------------------------------ structure
def test_a_3x3_blur_is_straight_line_code_with_unchecked_loads():
    (stage,) = hg.compile(BLUR).program.stages
    instrs = [it for it in stage.body if isinstance(it, Instr)]
    assert not any(it.op in ("LOOP", "BRA") for it in instrs)  # no loop, no zero-trip guard
    loads = [it for it in instrs if it.op == "LDG"]
    assert len(loads) == 9 and not any(it.checked for it in loads)  # proven in bounds
    # three row offsets, each read at constant offsets 0, 1, 2
    assert sorted(it.addr.offset for it in loads) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    # f32 terms are summed in f32, as a balanced tree (no widening conversion)
    assert not any(it.op == "CVT" for it in instrs)
    assert sum(it.op == "ADD" and it.dtype is DType.F32 for it in instrs) == 8


def test_the_blur_vectorizes_across_lanes_on_cpu():
    from hologram_cpu_llvm import jit
    from hologram_cpu_llvm.codegen import compile_program
    optimized: list[str] = []
    jit.compile_object(compile_program(hg.compile(BLUR).program).module_ir, optimized)
    assert any("fadd <" in line and "x float>" in line for line in optimized[0].splitlines())


@pytest.mark.parametrize("ranges, unrolled", [
    ("di in range(3), dj in range(3)", True),
    ("di in range(4), dj in range(8)", True),  # WINDOW_POINTS terms
    ("di in range(3), dj in range(11)", False),  # 33 terms: a loop
])
def test_windows_up_to_the_limit_are_unrolled(ranges, unrolled):
    extra = 3 if "range(3)" in ranges.split(",")[0] else 4
    cols = {"range(3)": 3, "range(8)": 8, "range(11)": 11}[ranges.split("dj in ")[1]]
    text = doc(f"y[i, j] = sum(img[i + di, j + dj], {ranges})", 'img = "f32[h, w]"',
               f'y = "f32[h - {extra - 1}, w - {cols - 1}]"')
    (stage,) = hg.compile(text).program.stages
    assert (not any(isinstance(it, Instr) and it.op == "LOOP" for it in stage.body)) is unrolled
    img = np.random.default_rng(0).standard_normal((extra + 4, cols + 5)).astype(np.float32)
    h, w = img.shape
    want = sum(img[a:h - extra + 1 + a, b:w - cols + 1 + b].astype(np.float64)
               for a in range(extra) for b in range(cols))
    assert_close(on_both(text, img), want.astype(np.float32), reduction_n=extra * cols,
                 magnitude=sum(np.abs(img[a:h - extra + 1 + a, b:w - cols + 1 + b]).astype(np.float64)
                               for a in range(extra) for b in range(cols)))


def test_which_reductions_are_windows():
    def red(kind, *extents):
        return Expr("REDUCE", DType.F32, (Expr.load("x", DType.F32, (Expr.idx("d"),)),),
                    (kind, tuple((f"d{k}", Affine.of(e)) for k, e in enumerate(extents))))
    assert len(window_points(red("sum", 3, 3))) == 9
    assert window_points(red("sum", 2, 3))[:4] == [{"d0": 0, "d1": 0}, {"d0": 0, "d1": 1}, {"d0": 0, "d1": 2},
                                                    {"d0": 1, "d1": 0}]  # row-major
    assert window_points(red("sum", WINDOW_POINTS + 1)) is None
    assert window_points(red("sum", "n")) is None  # a symbolic extent: a loop
    assert window_points(red("sum", 0)) is None  # statically empty: the loop emits nothing
    assert window_points(red("argmax", 3)) is None  # keeps the loop's first-occurrence rules


def test_at_point_folds_the_index_arithmetic():
    i, di = Expr.idx("i"), Expr.idx("di")
    x = Expr.load("x", DType.F32, (Expr("ADD", I64, (di, i)),))
    assert at_point(x, {"di": 2}).srcs == (add(i, const(2)),)
    assert at_point(x, {"di": 0}).srcs == (i,)
    sub = Expr.load("x", DType.F32, (Expr("SUB", I64, (i, di)),))
    assert at_point(sub, {"di": 1}).srcs == (add(i, const(-1)),)
    huge = Expr.load("x", DType.F32, (Expr("MUL", I64, (Expr("ADD", I64, (di, const(2**62))), const(4))),))
    assert at_point(huge, {"di": 1}).srcs[0].op == "MUL"  # 2**64 + 4 would not wrap here: left alone


def test_in_range_knows_windows_of_a_smaller_domain():
    sb = ProgramBuilder("p", ("h", "w")).stage("s", ("w",))
    gen = ExprGen(sb, {}, reduce_in_lane)
    h, w = Affine.of("h"), Affine.of("w")
    ext = {"i": h - 2, "j": w - 2, "di": Affine.of(3)}
    i, j, di = (Expr.idx(v) for v in ("i", "j", "di"))
    assert gen.in_range(add(i, const(2)), h, ext)
    assert gen.in_range(Expr("ADD", I64, (di, i)), h, ext)
    assert gen.in_range(add(Expr("ADD", I64, (di, i)), const(0)), h, ext)
    assert gen.in_range(j, w, ext)
    assert not gen.in_range(add(i, const(3)), h, ext)  # (h - 3) + 3 = h
    assert not gen.in_range(add(i, const(-1)), h, ext)  # i = 0 reads x[-1]
    assert not gen.in_range(add(j, const(1)), h, ext)  # another dimension's size
    assert not gen.in_range(Expr("ADD", I64, (i, Expr.idx("k"))), h, ext)  # k's range unknown


def test_a_window_that_leaves_the_array_raises_on_both_backends():
    # y has as many rows as img: the last rows' windows read past it
    text = doc("y[i, j] = sum(img[i + di, j], di in range(3))", 'img = "f32[h, w]"', 'y = "f32[h, w]"')
    (stage,) = hg.compile(text).program.stages
    assert any(isinstance(it, Instr) and it.op == "LDG" and it.checked for it in stage.body)
    for be in BACKENDS:
        with pytest.raises(ExecutionError, match="out of bounds"):
            kernel(text, be)(np.ones((4, 5), np.float32))


# -------------------------------------------------------------------------- numbers
def window_inputs(dtype: str, shape: tuple[int, int], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype in ("i32", "u8"):
        return rng.integers(0, 200, shape).astype(DType(dtype).np)
    x = (rng.standard_normal(shape) * rng.choice([1e-3, 1.0, 1e3], shape)).astype(DType(dtype).np)
    flat = x.reshape(-1)
    if not flat.size:
        return x
    picks = rng.integers(0, flat.size, max(1, flat.size // 25))
    flat[picks] = rng.choice(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], dtype=x.dtype), picks.size)
    return x


REDUCERS = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max}


@settings(max_examples=25, deadline=None)
@given(kind=st.sampled_from(sorted(REDUCERS)), dtype=st.sampled_from(["f16", "f32", "f64", "i32", "u8"]),
       rows=st.integers(1, 3), row0=st.integers(0, 1), cols=st.integers(1, 4), col0=st.integers(0, 2),
       h=st.integers(0, 5), w=st.integers(0, 20), seed=st.integers(0, 2**32 - 1))
def test_windows_match_numpy_on_both_backends(kind, dtype, rows, row0, cols, col0, h, w, seed):
    di = f"di in range({rows})" if row0 == 0 else f"di in range({row0}, {row0 + rows})"
    dj = f"dj in range({cols})" if col0 == 0 else f"dj in range({col0}, {col0 + cols})"
    text = doc(f"y[i, j] = {kind}(x[i + di, j + dj], {di}, {dj})", f'x = "{dtype}[h, w]"',
               f'y = "{dtype}[h - {row0 + rows - 1}, w - {col0 + cols - 1}]"')
    x = window_inputs(dtype, (h + row0 + rows - 1, w + col0 + cols - 1), seed)
    got = on_both(text, x)
    stack = np.stack([x[a:a + h, b:b + w] for a in range(row0, row0 + rows) for b in range(col0, col0 + cols)])
    with np.errstate(all="ignore"):
        if kind in ("sum", "prod") and x.dtype.kind == "f":
            want = REDUCERS[kind](stack.astype(np.float64), axis=0).astype(x.dtype)
        else:
            want = REDUCERS[kind](stack, axis=0).astype(x.dtype)
    if x.dtype.kind != "f":
        assert np.array_equal(got, want)
        return
    mag = np.sum(np.abs(stack.astype(np.float64)), axis=0) if kind == "sum" else None
    with np.errstate(all="ignore"):
        huge = np.sum(np.where(np.isfinite(stack), np.abs(stack.astype(np.float64)), 0), axis=0) > np.finfo(
            x.dtype).max  # some summation order overflows: the contract leaves it open
    where = ~huge if kind == "sum" else None
    if kind == "prod":
        # the f64 product rounds once; a product under- or overflowing f16/f32 is numpy's too
        assert_close(got, want, ulps=1)
        return
    assert_close(got, want, reduction_n=rows * cols if kind == "sum" else None, magnitude=mag, where=where)


def test_a_sum_of_negative_zeros_is_negative_zero_as_numpy():
    text = doc("y[i] = sum(x[i + d], d in range(3))", 'x = "f32[n]"', 'y = "f32[n - 2]"')
    got = on_both(text, np.full(5, -0.0, np.float32))
    assert np.all(got == 0) and np.all(np.signbit(got))


def test_nan_and_inf_in_a_window_as_numpy():
    text = doc("y[i] = sum(x[i + d], d in range(2)) + max(x[i + d], d in range(2))", 'x = "f32[n]"',
               'y = "f32[n - 1]"')
    x = np.array([1, np.inf, -np.inf, np.nan, 2, 3], np.float32)
    with np.errstate(invalid="ignore"):
        want = (x[:-1] + x[1:]) + np.maximum(x[:-1], x[1:])
    assert_close(on_both(text, x), want)
