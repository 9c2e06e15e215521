"""Property tests: every value opcode, every dtype, arbitrary values, against numpy.

Hypothesis draws whole arrays (NaN, infinities, subnormals and integer extremes
included); the interpreter computes lane by lane, numpy computes on the arrays, and the
results must agree bit for bit (1 ulp for transcendentals, whose numpy scalar and array
paths may differ on some platforms).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from hologram.core.types import ALL_TYPES, FLOAT_TYPES, INTEGER_TYPES, DType
from isa_helpers import same, ulp_close
from test_interp import ARITH_ORACLE, BINARY_FLOAT, EXACT_UNARY, NUM_TYPES, UNARY_FLOAT, cvt_oracle, fma_oracle, run_op

MAX_LANES = 12


def arrays(t: DType, n: int) -> st.SearchStrategy[np.ndarray]:
    if t is DType.F16:  # every bit pattern (hypothesis filters f16 floats heavily)
        return hnp.arrays(np.uint16, n).map(lambda a: a.view(np.float16))
    return hnp.arrays(t.np, n, elements=hnp.from_dtype(t.np))


def draw_arrays(data: st.DataObject, *types: DType) -> list[np.ndarray]:
    n = data.draw(st.integers(1, MAX_LANES), label="lanes")
    return [data.draw(arrays(t, n), label=f"operand {k}") for k, t in enumerate(types)]


@pytest.mark.parametrize("op", ARITH_ORACLE)
@pytest.mark.parametrize("t", NUM_TYPES, ids=str)
@given(data=st.data())
def test_arith(op, t, data):
    a, b = draw_arrays(data, t, t)
    with np.errstate(all="ignore"):
        want = ARITH_ORACLE[op](a, b)
    same(run_op(op, t, a, b), want, a, b)


LOGIC = {"AND": np.bitwise_and, "OR": np.bitwise_or, "XOR": np.bitwise_xor,
         "SHL": np.left_shift, "SHR": np.right_shift}


@pytest.mark.parametrize("op", LOGIC)
@pytest.mark.parametrize("t", INTEGER_TYPES, ids=str)
@given(data=st.data())
def test_logic(op, t, data):
    a, b = draw_arrays(data, t, t)
    bb = b & t.np.type(t.bits - 1) if op in ("SHL", "SHR") else b
    same(run_op(op, t, a, b), LOGIC[op](a, bb), a, b)


@pytest.mark.parametrize("t", ALL_TYPES, ids=str)
@given(data=st.data())
def test_compare_and_select(t, data):
    a, b = draw_arrays(data, t, t)
    mod = data.draw(st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge"]), label="mod")
    fn = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
          "gt": np.greater, "ge": np.greater_equal}[mod]
    p = run_op("SET", t, a, b, mod=mod)
    same(p, fn(a, b), a, b)
    same(run_op("SEL", t, p, a, b), np.where(p, a, b), p, a, b)


@pytest.mark.parametrize("t", NUM_TYPES, ids=str)
@given(data=st.data())
def test_unary_and_mad(t, data):
    a, b, c = draw_arrays(data, t, t, t)
    with np.errstate(all="ignore"):
        same(run_op("ABS", t, a), np.absolute(a), a)
        same(run_op("NEG", t, a), np.negative(a), a)
        same(run_op("MAD", t, a, b, c), a * b + c, a, b, c)


@pytest.mark.parametrize("t", FLOAT_TYPES, ids=str)
@given(data=st.data())
def test_fma(t, data):
    a, b, c = draw_arrays(data, t, t, t)
    with np.errstate(all="ignore"):
        same(run_op("FMA", t, a, b, c), fma_oracle(a, b, c), a, b, c)


@pytest.mark.parametrize("op", UNARY_FLOAT)
@pytest.mark.parametrize("t", FLOAT_TYPES, ids=str)
@given(data=st.data())
def test_float_unary(op, t, data):
    (x,) = draw_arrays(data, t)
    with np.errstate(all="ignore"):
        want = UNARY_FLOAT[op](x)
    got = run_op(op, t, x)
    (same if op in EXACT_UNARY else lambda g, w, *i: ulp_close(g, w, 1, *i))(got, want, x)


@pytest.mark.parametrize("op", BINARY_FLOAT)
@pytest.mark.parametrize("t", FLOAT_TYPES, ids=str)
@given(data=st.data())
def test_float_binary(op, t, data):
    a, b = draw_arrays(data, t, t)
    with np.errstate(all="ignore"):
        want = BINARY_FLOAT[op](a, b)
    got = run_op(op, t, a, b)
    (same if op in ("FMOD", "COPYSIGN") else lambda g, w, *i: ulp_close(g, w, 1, *i))(got, want, a, b)


@pytest.mark.parametrize("src", ALL_TYPES, ids=str)
@given(data=st.data())
def test_cvt(src, data):
    (x,) = draw_arrays(data, src)
    dst = data.draw(st.sampled_from(ALL_TYPES), label="dst")
    same(run_op("CVT", dst, x, dtype2=src), cvt_oracle(x, dst), x)
