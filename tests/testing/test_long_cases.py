"""The long-reduction generator (hologram/testing/long_cases.py) and the oracle it needs.

`hologram diff-test` once passed 800 cases without drawing a reduction long enough for
an f16 running sum to stall (issue 11): these tests hold the generator to drawing them,
its counting oracle to the generic one, and the oracle to accurate long sums.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from hologram.core import semantics as oracle
from hologram.testing import bounds
from hologram.testing.bounds import Val
from hologram.testing.contract import reduction_tolerance
from hologram.testing.difftest import INTERP_MAX_ELEMENTS, KIND_TABLE
from hologram.testing.long_cases import LONG_EVERY, _ConstantArray, _Values, long_reduction_kernels
from hologram.testing.run import check_case

# derandomized: the coverage assertions below are about one fixed stream of examples
QUICK = settings(max_examples=150, deadline=None, database=None, phases=(Phase.generate,), derandomize=True,
                 suppress_health_check=list(HealthCheck))


def _body(case) -> str:
    return case.source.split('body = """\n')[1].split("\n")[0]


def _terms(case) -> int:
    return max(np.size(v) for _, v in case.inputs)


def _shape(case) -> tuple[str, str, str]:
    """(dtype of the reduced input, reduction kind, form) of a long case."""
    body = _body(case)
    if body.startswith("h[c[i]] +="):  # the scatter-add form: an f16 bin sum
        return str(np.asarray(case.inputs[-1][1]).dtype), "add_at", "add_at"
    kind = "resonance" if body.startswith("h =") else body.split("=", 1)[1].strip().split("(")[0].removeprefix("np.")
    form = ("scatter" if kind == "resonance" else "scan" if kind.startswith("cum") else "contract" if "b[p, j]" in body
            else "named" if "[i, j]" in body else "axis" if "axis=" in body else "whole")
    return str(np.asarray(case.inputs[-1][1]).dtype), kind, form


def test_draws_every_kind_and_form_at_lengths_where_precision_runs_out():
    seen: set[tuple[str, str, str]] = set()

    @settings(QUICK, max_examples=300)
    @given(long_reduction_kernels())
    def collect(case):
        shape = _shape(case)
        n = _terms(case)
        assert (shape[0] in ("float16", "float64") and 8192 <= n <= 2 * 12288) or \
            (shape[0] == "float32" and n >= 1 << 24), n
        seen.add(shape)

    collect()
    assert {d for d, k, _ in seen if k.startswith("cum")} <= {"float16", "float64"}  # an f32 one: 2**24 checks
    # every kind, form and dtype is drawn (found, not pinned to one stream: any change to
    # a generator moves what one fixed stream holds)
    wanted = [(1, k) for k in ("sum", "prod", "mean", "min", "max", "argmin", "argmax", "resonance", "cumsum",
                               "cumprod", "add_at")]
    wanted += [(2, f) for f in ("whole", "axis", "named", "contract", "scatter", "scan", "add_at")]
    wanted += [(0, d) for d in ("float16", "float32", "float64")]
    for position, value in wanted:
        if not any(s[position] == value for s in seen):
            find(long_reduction_kernels(), lambda case, p=position, v=value: _shape(case)[p] == v,
                 settings=settings(QUICK, max_examples=2000))


def test_diff_test_mixes_in_one_long_case_in_four():
    lengths = []

    @QUICK
    @given(KIND_TABLE["kernels"].strategy())
    def collect(case):
        lengths.append(_terms(case))

    collect()
    long = sum(n >= 8192 for n in lengths)
    assert LONG_EVERY == 4 and len(lengths) / 10 < long < len(lengths) / 2, (long, len(lengths))


def test_the_interpreter_is_spared_only_the_f32_cases():
    runs_on = KIND_TABLE["kernels"].runs_on
    f32 = find(long_reduction_kernels(), lambda c: _terms(c) >= 1 << 24)
    f16 = find(long_reduction_kernels(), lambda c: np.asarray(c.inputs[-1][1]).dtype == np.float16)
    assert not runs_on(f32, "interp") and runs_on(f32, "cpu_llvm")
    assert runs_on(f16, "interp") and sum(np.size(v) for _, v in f16.inputs) <= INTERP_MAX_ELEMENTS


PLANTS = [(), ((3, 1000.0),), ((0, 5.0), (999, -5.0), (0, 0.5))]
NAN_PLANTS = ((7, np.nan), (2, 2.0), (9, np.nan))  # the generator plants NaN for the exact kinds only


@pytest.mark.parametrize("kind, plants", [(k, p) for k in ("sum", "prod", "mean", "min", "max", "argmin", "argmax")
                                          for p in PLANTS + ([NAN_PLANTS] if k in ("min", "max", "argmin", "argmax")
                                                             else [])])
def test_counting_oracle_is_the_generic_one(kind, plants):
    """`_ConstantArray` answers a reduction of a constant array with planted values from
    the distinct values and their counts; it must give what the generic oracle gives on
    the array itself (value, and the same allowance up to the last rounding)."""
    constant = {"prod": 1 + 2.0 ** -23}.get(kind, 0.1)
    fill = _Values(kind, np.dtype(np.float32), 0, constant=constant, plants=plants)
    x = fill.array((1000,), 1)
    dtype = np.dtype(np.int64 if kind.startswith("arg") else np.float32)
    got, want = _ConstantArray(fill, 1000).reduce(kind, dtype), bounds.reduce(kind, Val.exact(x))
    assert got.v.dtype == want.v.dtype and got.v.shape == want.v.shape == ()
    np.testing.assert_array_equal(got.v, want.v)
    np.testing.assert_allclose(got.err, want.err, rtol=1e-6)
    assert bool(got.fuzzy) == bool(want.fuzzy)


def test_counting_oracle_of_resonance_is_the_generic_one():
    fill = _Values("sum", np.dtype(np.float32), 0, constant=3.0, plants=((5, 1000.0), (17, -5.0)))
    x = fill.array((5000,), 1)
    classes = np.random.default_rng(1).choice([4, 90], 5000).astype(np.uint8)
    got, want = _ConstantArray(fill, 5000).resonance(classes), bounds.resonance(Val.exact(classes), Val.exact(x))
    np.testing.assert_array_equal(got.v, want.v)
    np.testing.assert_allclose(got.err, want.err, rtol=1e-6)


def test_oracle_sums_long_f16_columns_accurately():
    """numpy sums an f16 column (axis=0 of a C array) one row at a time in f16: it stalls
    at 2048. The oracle reduces the exact terms in f64 along a contiguous axis."""
    x = np.random.default_rng(0).random((8192, 3)).astype(np.float16)
    exact = x.astype(np.float64).sum(axis=0)
    assert np.all(np.abs(np.sum(x, axis=0).astype(np.float64) - exact) > 1000)  # numpy's own: stalled
    got = oracle.reduce("sum", x, 0)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float64), exact, rtol=2.0 ** -10)
    kept = oracle.reduce("sum", x, 0, keepdims=True)
    assert kept.shape == (1, 3) and np.array_equal(kept[0], got)


def test_oracle_products_and_resonance_of_narrow_floats_are_accurate():
    rng = np.random.default_rng(1)
    f = (1 + rng.uniform(-2.0 ** -12, 2.0 ** -12, 1 << 20)).astype(np.float32)
    exact = np.prod(f.astype(np.float64))
    assert abs(oracle.reduce("prod", f) / exact - 1) < 2.0 ** -23  # numpy's f32 product errs ~2**-14
    v = rng.random(20000).astype(np.float16)
    bins = oracle.resonance(np.zeros(20000, np.int32), v)
    assert bins.dtype == np.float16
    assert abs(float(bins[0]) - v.astype(np.float64).sum()) <= reduction_tolerance(20000, np.float16) * 20000


@pytest.mark.parametrize("backend", ["interp", "cpu_llvm"])
def test_generated_long_f16_sums_pass(backend):
    """A generated whole-array f16 sum of >= 8192 terms (cpu_llvm returned 2048 for one
    of ~4096 before the lowering summed f16 in f32)."""
    case = find(long_reduction_kernels(), lambda c: _body(c).startswith("y = sum(") and "axis" not in _body(c)
                and np.asarray(c.inputs[-1][1]).dtype == np.float16 and _terms(c) >= 8192
                and float(np.asarray(c.expected[0][1].v, np.float64)) > 3000,
                settings=settings(max_examples=500, database=None, suppress_health_check=list(HealthCheck)))
    check_case(case, backend)


@settings(max_examples=6, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(long_reduction_kernels(), st.sampled_from(["O0", "O2"]))
def test_generated_long_reductions_pass_on_cpu_llvm(case, opt):
    check_case(case, "cpu_llvm", opt=opt)
