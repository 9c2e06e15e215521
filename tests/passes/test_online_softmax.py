"""The kernel-level opt-in to reassociation, and what it buys: the `online-softmax` pass.

Semantics first (the special values must come out as the two-pass form gives them), then
the structure (stages and reads of the input), then both backends against numpy on
generated data full of edge values, across the chunk boundaries of lower_online.py.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import hologram as hg
from hologram.core.errors import DocumentError, EmptyReductionError
from hologram.ir import OnlineMaxSum
from hologram.lower.online import CHUNK

BACKENDS = ("interp", "cpu_llvm")


def softmax_doc(dtype: str = "f32", reassociate: str | None = "true", body: str | None = None) -> str:
    flag = "" if reassociate is None else f"reassociate = {reassociate}\n"
    body = body or "m = max(x)\ne = exp(x - m)\ny = e / sum(e)"
    return f'''[kernel]
name = "softmax_fast"
version = "1.0.0"
{flag}inputs  = {{ x = "{dtype}[n]" }}
outputs = {{ y = "{dtype}[n]" }}
body = """
{body}
"""
'''


def reference(x: np.ndarray) -> np.ndarray:
    """Softmax as the kernel writes it: `x - max(x)` rounded in x's type (every backend
    does that subtraction exactly so), the rest in f64 (f128 where x is f64 would not
    change the rounding much), with numpy's special values: NaN anywhere or inf - inf
    make everything NaN."""
    with np.errstate(all="ignore"):
        d = (x - x.max()) if x.size else x
        e = np.exp(d.astype(np.longdouble))
        return (e / e.sum()).astype(x.dtype)


def close(got: np.ndarray, want: np.ndarray, ulps: int) -> bool:
    """Equal NaN positions; elsewhere within `ulps` of the result's type (relative), or
    a few subnormal steps absolutely (a result that underflows)."""
    if not np.array_equal(np.isnan(got), np.isnan(want)):
        return False
    ok = ~np.isnan(want)
    info = np.finfo(want.dtype)
    tol = ulps * float(info.eps) * np.abs(want[ok].astype(np.float64)) + 8 * float(info.smallest_subnormal)
    return bool(np.all(np.abs(got[ok].astype(np.float64) - want[ok].astype(np.float64)) <= tol))


@pytest.fixture(scope="module")
def kernels():
    return {(dt, b): hg.compile(softmax_doc(dt), backend=b) for dt in ("f32", "f64") for b in BACKENDS}


# --------------------------------------------------------------------------- the opt-in
def test_reassociate_must_be_a_boolean():
    with pytest.raises(DocumentError) as err:
        hg.compile(softmax_doc(reassociate='"yes"'), file="k.toml")
    msg = str(err.value)
    assert "k.toml:4" in msg and "'reassociate'" in msg and "boolean" in msg


@pytest.mark.parametrize("flag, online", [("true", True), ("false", False), (None, False)])
def test_pass_fires_only_with_the_opt_in(flag, online):
    k = hg.compile(softmax_doc(reassociate=flag), backend="interp")
    ir = k.emit("ir")
    assert ("online_max_sum_exp" in ir) is online
    assert k.program.reassociate is online
    assert ".reassociate" in k.emit("asm") if online else ".reassociate" not in k.emit("asm")


def test_not_at_o0_and_not_for_other_sums():
    k = hg.compile(softmax_doc(), backend="interp", opt="O0")
    assert "online_max_sum_exp" not in k.emit("ir")
    # sum(exp(x - m)) with m the max of a different expression: no match
    other = hg.compile(softmax_doc(body="m = max(x * 2.0)\ny = x / sum(exp(x - m))"), backend="interp")
    assert "online_max_sum_exp" not in other.emit("ir")


def test_three_stages_and_two_reads_of_the_input():
    n = 20_000_000
    online = hg.compile(softmax_doc(), backend="interp").stats(n=n)["O2"]
    two_pass = hg.compile(softmax_doc(reassociate=None), backend="interp").stats(n=n)["O2"]
    assert online.stages == two_pass.stages == 3
    assert online.bytes_exact and two_pass.bytes_exact
    chunks = -(-n // CHUNK)
    assert f"({n} + {CHUNK - 1})//{CHUNK}" not in str(online.bytes_read)  # bound: a number
    read = online.bytes_read.evaluate({})
    # x twice (the chunk stage and y's stage), plus m, s and 16 bytes of scratch per chunk
    assert 2 * 4 * n <= read <= 2 * 4 * n + 16 * 2 * chunks + 64
    assert two_pass.bytes_read.evaluate({}) >= 3 * 4 * n
    assert online.bytes_written.evaluate({}) <= 4 * n + 16 * chunks + 64


def test_ir_statement_is_an_online_max_sum():
    k = hg.compile(softmax_doc(), backend="interp")
    assert [type(s) for s in k.ir.body].count(OnlineMaxSum) == 1


# -------------------------------------------------------------------------- the values
SIZES = (0, 1, 2, 7, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 37, 3 * CHUNK)
EDGE = (np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-42, -1e-42, 88.0, -104.0, 3.4e38, -3.4e38)


@st.composite
def inputs(draw, dtype):
    n = draw(st.sampled_from(SIZES) | st.integers(0, 3 * CHUNK))
    lo, hi = draw(st.sampled_from([(-1.0, 1.0), (-100.0, 100.0), (-1e4, 1e4)]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.uniform(lo, hi, n).astype(dtype)
    if n and draw(st.booleans()):
        for _ in range(draw(st.integers(1, 4))):
            x[draw(st.integers(0, n - 1))] = draw(st.sampled_from(EDGE))
    if n and draw(st.integers(0, 9)) == 0:  # a whole chunk of -inf, or everything
        end = draw(st.sampled_from([min(n, CHUNK), n]))
        x[:end] = -np.inf
    return x


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@given(data=st.data())
def test_agrees_with_numpy_on_both_backends(kernels, dtype, data):
    x = data.draw(inputs(np.float32 if dtype == "f32" else np.float64))
    if x.size == 0:  # max of nothing: refused before launch, as without the opt-in
        for b in BACKENDS:
            with pytest.raises(EmptyReductionError):
                kernels[(dtype, b)](x)
        return
    want = reference(x)
    for b in BACKENDS:
        got = kernels[(dtype, b)](x)
        assert close(got, want, 16), (b, x.size, got, want)


@pytest.mark.parametrize("fill, expect", [
    (-np.inf, "nan"),      # exp(-inf - -inf): NaN, as the two-pass form
    (np.inf, "nan"),       # inf - inf
    (np.nan, "nan"),
])
@pytest.mark.parametrize("n", [5, CHUNK + 5])
def test_special_arrays(kernels, fill, expect, n):
    x = np.full(n, fill, np.float32)
    for b in BACKENDS:
        assert np.isnan(kernels[("f32", b)](x)).all()


def test_a_chunk_of_minus_inf_next_to_finite_values(kernels):
    x = np.concatenate([np.full(CHUNK, -np.inf), np.linspace(-3, 3, CHUNK + 100)]).astype(np.float32)
    want = reference(x)
    for b in BACKENDS:
        got = kernels[("f32", b)](x)
        assert close(got, want, 16)
        assert np.all(got[:CHUNK] == 0.0)
