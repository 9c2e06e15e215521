"""Each generator: the numpy model against numpy written out by hand, and the compiled
kernel against the model on both backends (the interpreter on a narrow buffer, where it
is fast; both on the real 96 x 3072 one)."""

from __future__ import annotations

import numpy as np
import pytest

import hologram
from hologram.testing import assert_close, reduction_tolerance
from hologram_sigil import compile_circuit, parse, run_model
from hologram_sigil.cases import expected

WIDTH = 3072
NARROW = 24

# circuit -> {class: its row afterwards} in plain numpy (f64 where numpy's f32 answer
# may round differently), every other class unchanged
ROWS = {
    "mark@c21": lambda x: {21: -x[21]},
    "copy@c05->c06": lambda x: {6: x[5]},
    "swap@c01<->c02": lambda x: {1: x[2], 2: x[1]},
    "merge@c00[c01,c02]": lambda x: {0: x[1] + x[2]},
    "merge_add@c00[c01,c02]": lambda x: {0: x[1] + x[2]},
    "merge_mul@c00[c01,c02]": lambda x: {0: x[1] * x[2]},
    "merge_min@c00[c01,c02]": lambda x: {0: np.minimum(x[1], x[2])},
    "merge_max@c00[c01,c02]": lambda x: {0: np.maximum(x[1], x[2])},
    "merge_abs@c03[c04]": lambda x: {3: np.abs(x[4])},
    "merge_neg@c03[c04]": lambda x: {3: -x[4]},
    "merge_exp@c03[c04]": lambda x: {3: np.exp(x[4].astype(np.float64))},
    "merge_log@c03[c04]": lambda x: {3: np.log(x[4].astype(np.float64))},
    "merge_sqrt@c03[c04]": lambda x: {3: np.sqrt(x[4])},
    "merge_sigmoid@c03[c04]": lambda x: {3: 1 / (1 + np.exp(-x[4].astype(np.float64)))},
    "merge_tanh@c03[c04]": lambda x: {3: np.tanh(x[4].astype(np.float64))},
    "merge_relu@c03[c04]": lambda x: {3: np.maximum(x[4], np.float32(0))},  # NaN stays NaN
    "split@c00[c01,c02]": lambda x: {0: x[1] - x[2]},
    "split_sub@c00[c01,c02]": lambda x: {0: x[1] - x[2]},
    "split_div@c00[c01,c02]": lambda x: {0: x[1] / x[2]},
    "reduce_sum@c07->c08": lambda x: {8: np.full(x.shape[1], x[7].astype(np.float64).sum())},
    "reduce_prod@c07->c08": lambda x: {8: np.full(x.shape[1], x[7].astype(np.float64).prod())},
    "reduce_min@c07->c08": lambda x: {8: np.full(x.shape[1], x[7].min())},
    "reduce_max@c07->c07": lambda x: {7: np.full(x.shape[1], x[7].max())},
    "reduce_mean@c07->c08": lambda x: {8: np.full(x.shape[1], x[7].astype(np.float64).mean())},
    "quote@c05": lambda x: {},  # a slot the buffer does not show
    "quote@c05 . mark@c05 . copy@c05->c09 . evaluate@c05": lambda x: {9: -x[5]},
    "quote@c05 . swap@c05<->c06 . evaluate@c05": lambda x: {6: x[5]},
    "id": lambda x: {},
    # side by side: every branch reads the state before the block
    "copy@c01->c02 || copy@c02->c01": lambda x: {1: x[2], 2: x[1]},
    "mark@c01 || copy@c01->c02": lambda x: {1: -x[1], 2: x[1]},
    "(quote@c03 || mark@c03) . evaluate@c03": lambda x: {},
    "(reduce_max@c01->c02 || merge_add@c01[c01,c02]) . split_sub@c00[c01,c02]":
        lambda x: {2: np.full(x.shape[1], x[1].max()), 1: x[1] + x[2], 0: x[1] + x[2] - x[1].max()},
}


def buffer(width: int, seed: int = 0, prod_row: bool = True) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((96, width)).astype(np.float32)
    if prod_row:  # a product of 3072 normal values under- or overflows: keep row 7's near 1
        x[7] = (1 + rng.standard_normal(width) * 1e-3).astype(np.float32)
    x[4, :6] = [0.0, -0.0, np.inf, -np.inf, np.nan, -2.0]  # the unary variants' edges
    x[2, :4] = [0.0, -0.0, np.inf, np.nan]  # and the binary ones'
    return x


@pytest.mark.parametrize("circuit", sorted(ROWS))
def test_the_model_is_numpy(circuit):
    x = buffer(WIDTH)
    want = x.astype(np.float64)
    with np.errstate(all="ignore"):
        for k, row in ROWS[circuit](x).items():
            want[k] = row
    got = run_model(circuit, x)
    assert got.dtype == np.float32 and got.shape == x.shape
    if "reduce_" in circuit and "max" not in circuit and "min" not in circuit:  # in any order, within the contract
        bound = reduction_tolerance(WIDTH, np.float32) * np.abs(x[7].astype(np.float64)).sum() * 2
        assert_close(got, want.astype(np.float32), bound=bound)
    else:  # numpy's float32 transcendentals are within the contract's 4 ulp of the exact value
        transcendental = any(f in circuit for f in ("exp", "log", "sigmoid", "tanh"))
        assert_close(got, want.astype(np.float32), ulps=4 if transcendental else 0)


@pytest.mark.parametrize("circuit", sorted(ROWS))
def test_each_generator_on_the_interpreter(circuit):
    x = buffer(NARROW, seed=1)
    y = compile_circuit(circuit, width=NARROW, backend="interp")(x)
    expected(parse(circuit), x).check(y, name="y", context=circuit)


@pytest.mark.parametrize("circuit", sorted(ROWS))
def test_each_generator_on_cpu_llvm(circuit):
    if "cpu_llvm" not in hologram.list_backends():
        pytest.skip("cpu_llvm is not available here")
    x = buffer(WIDTH, seed=2)
    k = compile_circuit(circuit, backend="cpu_llvm")
    y = k(x)
    expected(parse(circuit), x).check(y, name="y", context=circuit)
    out = np.full_like(x, np.nan)
    k(x, out=(out,))  # zero-copy into the caller's buffer: every element written
    assert np.array_equal(out, y, equal_nan=True)


ALL = ("merge_add@c00[c01,c02] . merge_mul@c03[c01,c02] . merge_min@c04[c01,c02] . merge_max@c05[c01,c02] . "
       "merge_abs@c06[c01] . merge_neg@c07[c01] . merge_exp@c08[c01] . merge_log@c09[c01] . merge_sqrt@c10[c01] . "
       "merge_sigmoid@c11[c01] . merge_tanh@c12[c01] . merge_relu@c13[c01] . split_sub@c14[c01,c02] . "
       "split_div@c15[c01,c02] . reduce_sum@c01->c16 . reduce_prod@c95->c17 . reduce_min@c01->c18 . "
       "reduce_max@c01->c19 . reduce_mean@c01->c20 . mark@c21 . copy@c22->c23 . swap@c24<->c25 . quote@c26 . "
       "mark@c26 . copy@c26->c27 . evaluate@c26 . merge_exp@c28[c16] . reduce_sum@c28->c29")


def test_every_generator_in_one_kernel_on_both_backends():
    """One circuit with every generator, the reductions' scalars used again (c28, c29):
    the interpreter on a narrow buffer, both backends agreeing on it, cpu_llvm on the
    real one."""
    x = buffer(NARROW, seed=3)
    x[95] = 1.0
    want = expected(parse(ALL), x)
    slow = compile_circuit(ALL, width=NARROW, backend="interp")(x)
    want.check(slow, name="y", context="interp")
    if "cpu_llvm" in hologram.list_backends():
        fast = compile_circuit(ALL, width=NARROW, backend="cpu_llvm")(x)
        want.check(fast, name="y", context="cpu_llvm")
        x = buffer(WIDTH, seed=4)
        x[95] = 1.0
        expected(parse(ALL), x).check(compile_circuit(ALL, backend="cpu_llvm")(x), name="y")


def test_the_real_buffer_on_the_interpreter():
    """The 96 x 3072 buffer, on the interpreter too (one lane at a time: a small circuit)."""
    circuit = "copy@c05->c06 . mark@c21 . merge_exp@c02[c05] . reduce_sum@c02->c03"
    x = buffer(WIDTH, seed=5)
    y = compile_circuit(circuit, backend="interp")(x)
    expected(parse(circuit), x).check(y, name="y")


def test_a_circuit_kernel_is_an_ordinary_kernel():
    k = compile_circuit("copy@c05->c06 . mark@c21")
    assert str(k.signature) == "circuit(x: f32[96, 3072]) -> y: f32[96, 3072]"
    assert len(k.program.stages) == 1  # data movement and a mark: one stage writing the buffer
    softmax = compile_circuit("reduce_max@c00->c01 . split_sub@c02[c00,c01] . merge_exp@c02[c02] . "
                              "reduce_sum@c02->c04 . split_div@c03[c02,c04]")
    assert len(softmax.program.stages) == 3  # the max, the sum (of fused exp), the buffer
    x = buffer(WIDTH, seed=6)
    y = softmax(x)
    e = np.exp(x[0].astype(np.float64) - x[0].max())
    assert_close(y[3], (e / e.sum()).astype(np.float32), ulps=8)
    with pytest.raises(hologram.errors.ArgumentError, match="x"):
        softmax(x[:, :100])
