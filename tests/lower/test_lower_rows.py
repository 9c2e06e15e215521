"""Sums along short rows a block at a time (hologram/lower/rows.py): which statements take
the form, its shape and proofs, and its numbers on both backends (docs/lowering.md,
"Short rows")."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hologram as hg
from hologram.errors import VerifyError
from hologram.isa.program import Instr, Special, lead_lane_axes
from hologram.lower.rows import ROWS, SHORT_ROW
from hologram.testing.cases import KernelCase, _Index, _row_blocks
from hologram.testing.contract import assert_close
from hologram.testing.exprgen import GenConfig
from hologram.testing.run import check_case
from hologram.verify.verifier import verify

BACKENDS = ("interp", "cpu_llvm")


def doc(body: str, inputs: str = 'X = "f32[n, d]", w = "f32[d]"', out: str = 'y = "f32[n]"') -> str:
    return f'''[kernel]
name = "rows"
version = "1.0.0"
inputs  = {{ {inputs} }}
outputs = {{ {out} }}
body = "{body}"
'''


XW = doc("y = X @ w")


def stage_of(text: str, name: str = "y"):
    prog = hg.compile(text, backend="interp").program
    return prog, next(s for s in prog.stages if s.name == name)


def is_row_block(stage) -> bool:
    return stage.block[0] == ROWS and lead_lane_axes(stage) == (0,)


# ----------------------------------------------------------------------- which statements
@pytest.mark.parametrize("body, inputs, out", [
    ("y = X @ w", None, None),
    ("y[i] = sum(X[i, p] * w[p], p)", None, None),
    ("y = X.sum(axis=1)", 'X = "f32[n, d]"', None),
    ("y[i] = sigmoid(sum(X[i, p] * w[p], p)) - t[i]", 'X = "f32[n, d]", w = "f32[d]", t = "f32[n]"', None),
    ("y = X @ w", 'X = "f16[n, d]", w = "f16[d]"', 'y = "f16[n]"'),
    ("y = X @ w", 'X = "f32[b, n, d]", w = "f32[d]"', 'y = "f32[b, n]"'),  # batched: z on y
    ("y = X @ w", 'X = "f32[n, 40]", w = "f32[40]"', None),  # constant, short, no window
])
def test_short_row_sums_take_the_block_form(body, inputs, out):
    _, stage = stage_of(doc(body, inputs or 'X = "f32[n, d]", w = "f32[d]"', out or 'y = "f32[n]"'))
    assert is_row_block(stage), stage


@pytest.mark.parametrize("body, inputs, why", [
    ("y = X @ w", 'X = "f64[n, d]", w = "f64[d]"', "f64 sums are compensated, one row at a time"),
    ("y = X @ w", 'X = "f32[n, 16]", w = "f32[16]"', "a window of 16: unrolled in each lane"),
    ("y = X @ w", 'X = "f32[n, 64]", w = "f32[64]"', "a constant row longer than SHORT_ROW"),
    ("y[i] = max(X[i, p], p)", 'X = "f32[n, d]"', "not a sum"),
    ("y[i] = where(i > 0, sum(X[i, p], p), 0)", 'X = "f32[n, d]"', "the sum under a where"),
    ("y[i] = sum(X[i, p + 1] * w[p], p)", 'X = "f32[n, d + 1]", w = "f32[d]"', "an index not a plain variable"),
    ("y[i] = sum(X[p, i], p)", 'X = "f32[d, n]"', "read down columns, not along rows"),
])
def test_other_sums_keep_their_form(body, inputs, why):
    _, stage = stage_of(doc(body, inputs))
    assert not is_row_block(stage), why


# ----------------------------------------------------------------------- shape and proofs
def test_the_block_adds_rows_terms_into_their_own_accumulators_with_every_access_proven():
    prog, stage = stage_of(XW)
    ins = [it for it in stage.body if isinstance(it, Instr)]
    loads = [it for it in ins if it.op == "LDG"]
    assert loads and not any(it.checked for it in loads)  # the verifier proved every one
    # ROWS accumulators in the block's loop, one in the loop of the rows one at a time
    assert sum(1 for it in ins if it.op == "ADD" and it.mod == "reassoc" and it.dtype.value == "f64") == ROWS + 1
    x_loads = [it for it in loads if it.addr.buffer == "X"]
    assert len(x_loads) == ROWS + 1  # a row of the block each, and the one-at-a-time loop's
    # the block's origin is the lead lane's gid.x moved back inside: MIN(gid.x, n - ROWS)
    assert any(it.op == "MIN" and Special("gid.x") in it.srcs for it in ins)
    assert any(it.op == "SET" and it.mod == "gt" and SHORT_ROW in [getattr(s, "value", None) for s in it.srcs]
               for it in ins)


def test_the_clamp_is_what_proves_the_block_in_bounds():
    """Without the MIN that moves the last block back inside, the verifier refuses the
    unchecked loads of the rows past the end (the proof is real, not assumed)."""
    prog, stage = stage_of(XW)
    body = list(stage.body)
    k = next(k for k, it in enumerate(body) if isinstance(it, Instr) and it.op == "MIN" and Special("gid.x") in it.srcs)
    body[k] = attrs.evolve(body[k], op="MOV", srcs=(Special("gid.x"),))
    broken = attrs.evolve(prog, stages=tuple(attrs.evolve(s, body=tuple(body)) if s is stage else s
                                             for s in prog.stages))
    with pytest.raises(VerifyError, match="bounds|out of"):
        verify(broken)


# ----------------------------------------------------------------------- numbers
SIZES = [(1, 1), (5, 16), (15, 3), (16, 16), (17, 16), (31, 7), (33, 33), (100, 1), (77, SHORT_ROW),
         (77, SHORT_ROW + 1), (40, 0), (0, 5), (1000, 17)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n, d", SIZES)
@pytest.mark.parametrize("t", ["f32", "f16", "f64"])
def test_x_at_w_meets_the_contract_at_the_blocks_edges(backend, n, d, t):
    rng = np.random.default_rng(n * 100 + d)
    dt = np.dtype(t.replace("f", "float"))
    X = rng.standard_normal((n, d)).astype(dt)
    w = rng.standard_normal(d).astype(dt)
    k = hg.compile(XW.replace("f32", t)).on(backend)
    y = k(X, w)
    terms = (X * w).astype(np.float64)  # each product rounded to t, as the IR says
    want = terms.sum(axis=1)
    assert y.dtype == dt and y.shape == (n,)
    assert_close(y, want.astype(dt), ulps=1, reduction_n=max(d, 1), magnitude=np.abs(terms).sum(axis=1))


@pytest.mark.parametrize("n, d", [(16, 16), (37, 20), (1000, 33)])
def test_interp_and_cpu_llvm_agree_on_the_block_form(n, d):
    rng = np.random.default_rng(d)
    X, w = rng.standard_normal((n, d)).astype(np.float32), rng.standard_normal(d).astype(np.float32)
    a, b = (hg.compile(XW).on(be)(X, w) for be in BACKENDS)
    assert_close(b, a, ulps=1, reduction_n=d, magnitude=np.abs((X * w).astype(np.float64)).sum(axis=1))


# ----------------------------------------------------------------------- generated
@st.composite
def row_block_kernels(draw, cfg: GenConfig = GenConfig(dtypes=("f32", "f16", "f64", "i32"))) -> KernelCase:
    k = _Index(draw, cfg)
    _row_blocks(k)
    return k.case()


@settings(max_examples=60, deadline=None)
@given(row_block_kernels())
def test_generated_row_sums_on_both_backends(case: KernelCase):
    for backend in BACKENDS:
        check_case(case, backend)
