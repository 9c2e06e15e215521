"""The whole pipeline held to numpy.

Generated kernels (hologram.testing.cases) are compiled through the public API and run on
the reference interpreter; every output must be an answer the accuracy contract allows
for numpy's result (hologram.testing.bounds). Separate tests per part of the language
keep a failure's cause obvious.

The contract itself is checked from the other side: replaying generated cases on a
simulated *conforming* backend (every transcendental off by up to 4 ULP, every sum and
product, and every prefix of a scan, in a random pairwise order) must never fail, or the
bounds would be too tight.
"""

from __future__ import annotations

import math

import attrs
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import hologram
from hologram.core import semantics as oracle
from hologram.core.errors import CompileError
from hologram.testing import bounds
from hologram.testing.bounds import Val
from hologram.testing.cases import KernelCase, atlas_kernels, expression_kernels, index_kernels, kernels, runtime_errors
from hologram.testing.contract import ulp_step
from hologram.testing.exprgen import VALUE_TESTS, GenConfig
from hologram.testing.run import check_case, run_kernel_text
from hologram.testing.value_test_cases import value_test_kernels
from hologram.testing.values import as_dtype

CFG = GenConfig()
needs_interp = pytest.mark.skipif("interp" not in hologram.list_backends(), reason="interp backend not installed")


# ------------------------------------------------------------- interp vs the oracle
@needs_interp
@given(expression_kernels(CFG.only("arith", "compare", "logic", "select")))
def test_operators_and_casts(case: KernelCase) -> None:
    check_case(case, "interp")


@needs_interp
@given(expression_kernels(CFG.only("bitwise", "compare")))
def test_bitwise_and_shifts(case: KernelCase) -> None:
    check_case(case, "interp")


@needs_interp
@given(expression_kernels(CFG.only("math", "arith")))
def test_rounding_sign_minmax_and_friends(case: KernelCase) -> None:
    check_case(case, "interp")


@needs_interp
@given(expression_kernels(CFG.only("transcendental", "arith")))
def test_transcendentals(case: KernelCase) -> None:
    check_case(case, "interp")


@needs_interp
@given(expression_kernels(attrs.evolve(CFG.only("arith", "math"), max_depth=2, max_temps=1)))
def test_reductions_and_broadcasting(case: KernelCase) -> None:
    check_case(case, "interp")


@needs_interp
@given(index_kernels())
def test_index_notation(case: KernelCase) -> None:
    check_case(case, "interp")


@needs_interp
@given(atlas_kernels())
def test_atlas_functions(case: KernelCase) -> None:
    check_case(case, "interp")


@given(value_test_kernels())
def test_value_tests_at_the_values_where_they_matter(case: KernelCase) -> None:
    assert any(f"{test}(" in case.source for test in VALUE_TESTS), case.source
    for backend in {"interp", "cpu_llvm"} & set(hologram.list_backends()):
        check_case(case, backend)


@needs_interp
@given(kernels())
def test_everything_together(case: KernelCase) -> None:
    check_case(case, "interp")


@needs_interp
@given(expression_kernels(attrs.evolve(CFG, max_depth=2)), st.data())
def test_output_needs_a_same_kind_cast(case: KernelCase, data: st.DataObject) -> None:
    """Declaring an output with a dtype the value cannot be cast to same-kind is a
    CompileError that suggests an explicit cast (never a crash or a silent cast)."""
    assume(not case.error)
    name, _, node = next(s for s in case.program.statements if s[0] == case.expected[0][0])
    assume(not node.weak)  # a shape symbol's value is a weak int: any integer output takes it, as a literal
    bad = [t for t in ("bool", "i8", "u8", "f16") if not np.can_cast(node.dtype, as_dtype(t), "same_kind")]
    assume(bad)
    target = data.draw(st.sampled_from(bad))
    decl = f'{name} = "{_type_text(case.source, name)}"'
    assert decl in case.source
    source = case.source.replace(decl, f'{name} = "{target}{_dims_of(case.source, name)}"')
    with pytest.raises(CompileError, match="cast"):
        run_kernel_text(source, case.args)


def _type_text(source: str, name: str) -> str:
    outputs = next(line for line in source.splitlines() if line.startswith("outputs"))
    return outputs.split(f'{name} = "', 1)[1].split('"', 1)[0]


def _dims_of(source: str, name: str) -> str:
    t = _type_text(source, name)
    return t[t.index("["):] if "[" in t else ""


# --------------------------------------------------------- the contract is not too tight
class ConformingBackend:
    """An `Engine` that computes like a different, conforming backend: each
    transcendental result moved by a random amount within its ULP contract, each float
    sum/product/mean reduced pairwise in a random order in the result dtype."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def apply(self, name: str, args, *, dtype=None) -> Val:
        if name == "gelu":
            return bounds.gelu_steps(args[0], self.apply)
        raw = [a.v if isinstance(a, Val) else a for a in args]
        v = np.asarray(oracle.cast(raw[0], as_dtype(dtype)) if name == "cast" else oracle.ORACLE[name](*raw))
        u = bounds.OP_ULPS.get(name, 0)
        if u and v.dtype.kind == "f":
            v = ulp_step(v, self.rng.integers(-u, u + 1, size=v.shape))
        return Val.exact(v)

    def reduce(self, kind: str, a: Val, axis=None, keepdims: bool = False) -> Val:
        v = oracle.reduce(kind, a.v, axis, keepdims)
        if kind not in ("sum", "prod", "mean") or v.dtype.kind != "f":
            return Val.exact(v)
        axes = oracle.reduced_axes(a.v, axis)
        kept = [d for d in range(a.v.ndim) if d not in axes]
        n = math.prod(a.v.shape[d] for d in axes)
        x = np.transpose(a.v, kept + list(axes)).reshape([a.v.shape[d] for d in kept] + [n]).astype(v.dtype)
        x = x[..., self.rng.permutation(n)]
        with np.errstate(all="ignore"):
            if n == 0:
                acc = np.full(x.shape[:-1], 1 if kind == "prod" else 0, v.dtype)
            else:
                while x.shape[-1] > 1:  # pairwise, in the result dtype
                    pairs, odd = x[..., : x.shape[-1] // 2 * 2], x[..., x.shape[-1] // 2 * 2:]
                    op = np.multiply if kind == "prod" else np.add
                    x = np.concatenate([op(pairs[..., 0::2], pairs[..., 1::2]), odd], axis=-1)
                acc = x[..., 0]
            if kind == "mean":
                acc = (acc / v.dtype.type(n)).astype(v.dtype)
        return Val.exact(np.reshape(acc, v.shape))

    def scan(self, kind: str, a: Val, axis=None) -> Val:
        """Each prefix reduced on its own, as `reduce` does (a random pairwise order in the
        result dtype): a backend that shares nothing between prefixes."""
        v = oracle.scan(kind, a.v, axis)
        if v.dtype.kind != "f":
            return Val.exact(v)
        x = np.moveaxis(a.v.reshape(-1) if axis is None else a.v.reshape(v.shape), 0 if axis is None else axis, -1)
        out = np.stack([self.reduce(kind, Val.exact(x[..., :k + 1].astype(v.dtype)), -1).v
                        for k in range(x.shape[-1])], -1) if x.shape[-1] else x.astype(v.dtype)
        return Val.exact(np.moveaxis(out, -1, 0 if axis is None else axis).reshape(v.shape))

    def resonance(self, classes: Val, values) -> Val:
        raw = values.v if isinstance(values, Val) else values
        c, w = np.broadcast_arrays(classes.v, raw)
        order = self.rng.permutation(c.size)
        return Val.exact(oracle.resonance(c.ravel()[order], w.ravel()[order]))

    def scatter_add(self, shape, dtype, index, values) -> Val:
        raw = values.v if isinstance(values, Val) else values
        *ix, w = np.broadcast_arrays(*(i.v for i in index), raw)
        order = self.rng.permutation(w.size)  # another order of the same additions
        return Val.exact(oracle.add_at(shape, dtype, tuple(i.ravel()[order] for i in ix), w.ravel()[order]))


@given(kernels(), st.integers(0, 2**32 - 1))
def test_contract_admits_a_conforming_backend(case: KernelCase, seed: int) -> None:
    assume(not case.error)
    case.check(case.replay(ConformingBackend(np.random.default_rng(seed))))


@given(kernels(attrs.evolve(CFG.only("transcendental", "arith"), reductions=("sum", "prod", "mean"))),
       st.integers(0, 2**32 - 1))
def test_contract_admits_conforming_math(case: KernelCase, seed: int) -> None:
    assume(not case.error)
    case.check(case.replay(ConformingBackend(np.random.default_rng(seed))))


def test_replay_with_the_oracle_reproduces_the_expected_values() -> None:
    @given(kernels())
    def run(case: KernelCase) -> None:
        assume(not case.error)
        out = case.replay(bounds)
        for name, val in case.expected:
            assert np.array_equal(out[name], val.v, equal_nan=val.dtype.kind == "f")

    run()


# ------------------------------------------------------------- worked examples on interp
@needs_interp
def test_softmax_on_interp_meets_the_contract() -> None:
    doc = """[kernel]
name = "softmax"
version = "1.0.0"
inputs = { x = "f32[n]" }
outputs = { y = "f32[n]" }
body = \"\"\"
m = max(x)
e = exp(x - m)
y = e / sum(e)
\"\"\"
"""
    x = np.linspace(-3, 3, 11, dtype=np.float32)
    e = bounds.apply("exp", [bounds.apply("-", [Val.exact(x), bounds.reduce("max", Val.exact(x))])])
    y = bounds.apply("/", [e, bounds.reduce("sum", e)])
    y.check(run_kernel_text(doc, {"x": x})["y"], name="y")


# ------------------------------------------------------------------------ the harness
DOC = """[kernel]
name = "axpy"
version = "1.0.0"
inputs = { a = "f32", x = "f32[n]", y = "f32[n]" }
outputs = { z = "f32[n]", total = "f32" }
body = \"\"\"
z = a * x + y
total = sum(z)
\"\"\"
"""


@needs_interp
def test_run_kernel_text_returns_outputs_by_name() -> None:
    x, y = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    by_name = run_kernel_text(DOC, {"a": np.float32(2), "x": x, "y": y})
    positional = run_kernel_text(DOC, [np.float32(2), x, y])
    for out in (by_name, positional):
        assert sorted(out) == ["total", "z"]
        assert out["z"].tolist() == [1, 3, 5, 7] and out["total"].shape == () and out["total"] == 16


@needs_interp
def test_run_kernel_text_wants_one_kernel() -> None:
    two = DOC.replace("[kernel]", "[[kernels]]") + "\n" + DOC.replace("[kernel]", "[[kernels]]").replace("axpy", "axpy2")
    with pytest.raises(hologram.errors.HologramError, match="one kernel, got 2: axpy, axpy2"):
        run_kernel_text(two, {})


@needs_interp
def test_check_case_reports_wrong_values_missing_errors_and_compile_errors() -> None:
    x = np.arange(3, dtype=np.float32)
    good = KernelCase(DOC, (("a", np.float32(2)), ("x", x), ("y", x)),
                      (("z", Val.exact(2 * x + x)), ("total", Val.exact(np.float32(9)))))
    check_case(good)
    wrong = attrs.evolve(good, expected=(("z", Val.exact(2 * x + x + 1)),))
    with pytest.raises(AssertionError, match=r"assert_close\(z\): 3 of 3 elements differ(.|\n)*--- kernel ---"):
        check_case(wrong)
    expects_error = attrs.evolve(good, expected=(), error=(hologram.errors.ExecutionError,))
    with pytest.raises(AssertionError, match="expected ExecutionError, but the kernel ran"):
        check_case(expects_error)
    broken = attrs.evolve(good, source=DOC.replace("a * x", "a * q"))
    with pytest.raises(AssertionError, match="the kernel raised CompileError"):
        check_case(broken)


@needs_interp
def test_runtime_errors_are_expected_as_such() -> None:
    doc = DOC.replace("total = sum(z)", "total = max(z)")
    empty = np.zeros(0, np.float32)
    case = KernelCase(doc, (("a", np.float32(1)), ("x", empty), ("y", empty)), (), error=runtime_errors())
    assert check_case(case) is None


def test_describe_shows_the_document_and_the_inputs() -> None:
    case = KernelCase(DOC, (("a", np.float32(2)), ("x", np.array([1.5, -0.0], np.float32))), ())
    text = case.describe()
    assert text.startswith("--- kernel ---\n[kernel]") and "--- inputs ---" in text
    assert "a: float32[] = 2." in text and "x: float32[2] = [ 1.5, -0. ]" in text
