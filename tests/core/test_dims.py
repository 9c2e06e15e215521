"""Derived shape symbols (hologram.core.dims): the name is the definition, the algebra's
simplifications are exact at every size the facts allow, and every consumer (the
verifier, the runtime, both backends) computes them from the name alone."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import hologram as hg
from hologram.core.dims import DimAlgebra, Derived, derive, derived_closure, is_derived, parse_derived
from hologram.core.errors import ArgumentError, VerifyError
from hologram.core.types import Affine, DType
from hologram.isa.asm import format_program, parse_program
from hologram.isa.builder import ProgramBuilder, gid
from hologram.isa.encoding import decode, encode
from hologram.verify.verifier import verify

N, M = Affine.of("n"), Affine.of("m")
SYMBOLS = ("m", "n")


def affine_forms() -> st.SearchStrategy[Affine]:
    coeff = st.integers(-3, 3)
    return st.builds(lambda c, a, b: Affine(c, (("m", a), ("n", b))), st.integers(-6, 6), coeff, coeff)


@st.composite
def dimensions(draw, depth: int = 2) -> Affine:
    """A dimension the algebra builds, from affine forms and earlier dimensions."""
    a = draw(affine_forms())
    if depth == 0:
        return a
    d = DimAlgebra()
    op = draw(st.sampled_from(["max", "min", "floordiv", "ceildiv", "mul", "clamp0", "affine"]))
    b = draw(dimensions(depth - 1))
    k = draw(st.integers(1, 5))
    if op == "max":
        return d.max(a, b)
    if op == "min":
        return d.min(a, b)
    if op == "floordiv":
        return d.floordiv(d.clamp0(a), k)
    if op == "ceildiv":
        return d.ceildiv(a, k)
    if op == "mul":
        return d.mul(d.clamp0(a), d.clamp0(b))
    if op == "clamp0":
        return d.clamp0(a + b)
    return a + b * k


def value(form: str, m: int, n: int) -> int:
    """The value Python gives the dimension's own text, the specification of its name."""
    return eval(form, {"__builtins__": {}, "max": max, "min": min}, {"m": m, "n": n})  # noqa: S307


@given(dimensions(), st.integers(0, 9), st.integers(0, 9))
@settings(max_examples=300, deadline=None)
# a quotient of a max() under a coefficient: printed 2*max(n - 1, 0)//2 once, which reads
# as (2*max(n - 1, 0))//2 (a manifest's port type is this text, read back)
@example(Affine(0, (("max(n - 1, 0)//2", 2),)), 0, 2)
def test_a_dimension_means_what_its_text_says(dim, m, n):
    values = derive(derived_closure(dim.symbols), {"m": m, "n": n})
    assert dim.evaluate(values) == value(str(dim), m, n)
    for name in dim.symbols:
        if is_derived(name):
            d = parse_derived(name)
            assert d is not None and d.name == name and parse_derived(name) is d  # one meaning, cached
            assert values[name] == value(name, m, n)


@given(affine_forms(), affine_forms(), st.integers(1, 5), st.integers(0, 9), st.integers(0, 9))
@settings(max_examples=300, deadline=None)
def test_simplifications_are_exact_where_the_facts_hold(a, b, k, m, n):
    facts = (N - 2, M - N)  # a kernel declaring arrays of n - 2 and m - n elements: n >= 2, m >= n
    if n < 2 or m < n:
        return
    d = DimAlgebra(facts)
    env = {"m": m, "n": n}
    cases = [(d.max(a, b), max(a.evaluate(env), b.evaluate(env))),
             (d.min(a, b), min(a.evaluate(env), b.evaluate(env))),
             (d.clamp0(a), max(a.evaluate(env), 0)),
             (d.ceildiv(a, k), -(-max(a.evaluate(env), 0) // k))]
    for dim, want in cases:
        assert dim.evaluate(derive(derived_closure(dim.symbols), env)) == want, (dim, env)


def test_affine_answers_where_the_declared_dimensions_make_them_exact():
    assert DimAlgebra().clamp0(N - 1) == Affine.of("max(n - 1, 0)")
    assert DimAlgebra((N - 1,)).clamp0(N - 1) == N - 1  # an array of n - 1 elements: n >= 1
    assert DimAlgebra().ceildiv(N - 1, 2) == Affine.of("n//2")  # x[1::2]
    assert DimAlgebra().min(N, N.floordiv(1) + 3) == N
    assert DimAlgebra().floordiv(2 * N + 1, 2) == N
    assert str(2 * DimAlgebra().floordiv(N, 2) + 1) == "2*(n//2) + 1"


@pytest.mark.parametrize("name", ["n", "x1", "max(n, 0", "max(n)", "n//1", "n//0", "(n)//2", "n*m", "2*n", "n +",
                                  "min(n, 3) + 1", "foo(n, 1)", "n//2//2"])
def test_names_that_are_not_canonical_definitions_mean_nothing(name):
    assert parse_derived(name) is None


def _program(dim: Affine) -> "object":
    pb = ProgramBuilder("p", symbols=("n",))
    pb.buffer("x", DType.F32, ("n",), "in")
    pb.buffer("y", DType.F32, ("n",), "out")
    s = pb.stage("y", (dim,))
    i = s.mov(DType.I64, gid("x"), hint="i")
    s.stg(DType.F32, "y", s.ldg(DType.F32, "x", i, checked=True), i, checked=True)
    return pb.build()


def test_programs_declare_derived_symbols_after_what_they_read_and_round_trip():
    p = _program(DimAlgebra().ceildiv(N, 2))
    assert p.symbols == ("n", "(n + 1)//2")
    verify(p)
    assert decode(encode(p)) == p
    assert parse_program(format_program(p)) == p
    assert '.symbols n "(n + 1)//2"' in format_program(p)


@pytest.mark.parametrize("symbols, message", [
    (("n", "max(n, 0"), r"neither an identifier nor a derived symbol"),
    (("max(n - 1, 0)", "n"), r"reads 'n', which is not a symbol declared before it"),
    (("n", "max(k - 1, 0)"), r"reads 'k'"),
])
def test_the_verifier_refuses_derived_symbols_it_cannot_compute(symbols, message):
    import attrs

    p = attrs.evolve(_program(N), symbols=symbols)
    with pytest.raises(VerifyError, match=message):
        verify(p)


@pytest.mark.parametrize("backend", [b for b in ("interp", "cpu_llvm") if b in hg.list_backends()])
def test_backends_compute_derived_symbols_themselves(backend):
    """`launch` is public: given the bound symbols only (or a wrong derived value), a
    backend computes each derived symbol from its name."""
    b = hg.get_backend(backend)
    exe = b.prepare(_program(DimAlgebra().ceildiv(N, 2)))
    x, y = np.arange(5, dtype=np.float32), np.zeros(5, np.float32)
    b.launch(exe, {"x": x, "y": y}, {}, {"n": 5, "(n + 1)//2": 1})
    np.testing.assert_array_equal(y, [0, 1, 2, 0, 0])


def test_a_derived_value_past_the_launch_contract_is_an_argument_error():
    k = hg.compile('[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = { a = "u8[m, n]" }\n'
                   'outputs = { s = "i64" }\nbody = "s = sum(a.size + 0 * a)"\n')
    with pytest.raises(ArgumentError, match=r"m\*n"):
        from hologram.call.args import complete_symbols

        complete_symbols(("m", "n", "m*n"), {"m": 2 ** 40, "n": 2 ** 40})
    assert k(np.ones((3, 4), np.uint8)) == 12 * 12


def test_a_definition_is_a_value():
    assert Derived("max", N - 1, Affine.of(0)).name == "max(n - 1, 0)"
    assert Derived("mul", M, N).evaluate({"m": 3, "n": 4}) == 12
    assert derived_closure(["max(n//2 - 1, 0)"]) == ["n//2", "max(n//2 - 1, 0)"]


def test_lanes_may_assume_a_clamped_extent_is_its_argument():
    """A lane of a stage over `max(n - 1, 0)` exists only when n >= 2... so x[i + 1] is in
    bounds unchecked; an .init (which runs with no lane) gets no such licence."""
    d = DimAlgebra().clamp0(N - 1)
    pb = ProgramBuilder("p", symbols=("n",))
    pb.buffer("x", DType.F32, ("n",), "in")
    pb.buffer("y", DType.F32, (d,), "out")
    s = pb.stage("y", (d,))
    i = s.mov(DType.I64, gid("x"), hint="i")
    s.stg(DType.F32, "y", s.ldg(DType.F32, "x", i, offset=1), i)
    verify(pb.build())
    pb = ProgramBuilder("q", symbols=("n",))
    pb.buffer("x", DType.F32, ("n",), "in")
    pb.temp("t", DType.F32, (d,))
    s = pb.stage("t", (d,))
    s.init("t", 0.0)
    s.stg(DType.F32, "t", 1.0, s.mov(DType.I64, gid("x")))
    with pytest.raises(VerifyError, match="inits run even when the domain is empty"):
        verify(pb.build())


@given(st.sampled_from(["max(n - 3, 0)", "(n + 1)//2", "min(n, 3)", "m*n", "(m - 5)*(n - 5)", "min(n - 2, m)"]),
       st.integers(0, 9), st.integers(0, 9))
def test_what_lanes_may_assume_holds_whenever_the_extent_has_a_lane(name, m, n):
    from hologram.core.dims import lane_facts, within_lanes

    env = derive(derived_closure([name]), {"m": m, "n": n})
    if env[name] < 1:
        return
    assert all(f.evaluate(env) >= 1 for f in lane_facts((Affine.of(name),)))
    assert all(Affine.of(k).evaluate(env) == v.evaluate(env) for k, v in within_lanes((Affine.of(name),)).items())
