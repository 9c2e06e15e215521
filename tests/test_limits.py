"""Pathological inputs stay cheap: the prover, the bounds analysis, the verifier's loop
checks and the fuse pass are near-linear, or stop at a documented limit with a clear
error (docs/hasm.md, "Limits"; docs/dsl.md, "Limits"). No timing: the tests count work."""

from __future__ import annotations

import glob
import random

import attrs
import numpy as np
import pytest

import hologram
from hologram.core.errors import CompileError, DocumentError, VerifyError
from hologram.core.types import DType
from hologram.dsl.parser import MAX_STATEMENTS
from hologram.dsl.schema import MAX_RANK as MAX_DSL_RANK
from hologram.ir import Compute, Expr, KernelIR
from hologram.isa.asm import format_program, parse_program
from hologram.isa.program import Instr, Label, Program
from hologram.lower.plan import has_reduce
from hologram.passes.ir_common import map_statement
from hologram.passes.ir_fuse import MAX_FUSED_NODES, fuse, inline_elementwise
from hologram.verify import verifier
from hologram.verify.control_rules import MAX_CALL_DEPTH, MAX_LOOP_DEPTH
from hologram.verify.dataflow import MAX_ANALYSIS_STEPS, StageAnalysis
from hologram.verify.decl_rules import MAX_RANK, MAX_SIZE_TERMS
from hologram.verify.intervals import (MAX_BOUND_BITS, MAX_BOUND_TERMS, MAX_PROOF_WORK, SYMBOL_MAX, Domain, Interval,
                                       Poly)
from hologram.verify.verifier import verify


# ============================================================================ the prover
def _expanded(p: Poly, lower: dict[str, int]) -> Poly | None:
    """The prover's reference: `p` with every symbol s replaced by `s + lower[s]`, fully
    expanded (2**degree terms per term), as the prover computed it before it got linear."""
    out = Poly()
    for m, c in p.terms:
        if any(s not in lower for s in m):
            return None
        term = Poly.const(c)
        for s in m:
            term = term * (Poly.sym(s) + lower[s])
        out = out + term
    return out


def _reference_nonneg(p: Poly, lower: dict[str, int]) -> bool:
    if p.is_const:
        return p.value >= 0
    q = _expanded(p, lower)
    return q is not None and all(c >= 0 for _, c in q.terms)


def _reference_extremes(p: Poly, lower: dict[str, int]) -> tuple[int, int] | None:
    if p.is_const:
        return p.value, p.value
    q = _expanded(p, lower)
    if q is None:
        return None
    lo = hi = 0
    for m, c in q.terms:
        big = 1
        for s in m:
            big *= SYMBOL_MAX - lower[s]
        if not m:
            lo, hi = lo + c, hi + c
        elif c > 0:
            hi += c * big
        else:
            lo += c * big
    return lo, hi


def _random_poly(rng: random.Random, symbols: list[str]) -> Poly:
    acc: dict[tuple[str, ...], int] = {}
    for _ in range(rng.randint(1, 5)):
        m = tuple(sorted(rng.choice(symbols) for _ in range(rng.randint(0, 4))))
        acc[m] = acc.get(m, 0) + rng.randint(-4, 4)
    return Poly.make(acc)


def test_prover_decides_exactly_as_the_full_expansion_did():
    rng = random.Random(11)
    symbols = ["a", "b", "c", "d"]
    proven = 0
    for _ in range(3000):
        # lower bounds of every sign (a dimension n + 3 gives -3), some symbols unbounded
        lower = {s: rng.choice([-2, -1, 0, 0, 1, 1, 2, 3]) for s in symbols if rng.random() < 0.9}
        p = _random_poly(rng, symbols)
        expected = _reference_nonneg(p, lower), _reference_extremes(p, lower)
        assert (Domain(lower).nonneg(p), Domain(lower).extremes(p)) == expected, (p, lower)
        d = Domain(lower)  # the other order: extremes first fills the cache nonneg then reads
        assert (d.extremes(p), d.nonneg(p)) == expected[::-1], (p, lower)
        proven += expected[0]
    assert 300 < proven < 2700  # both answers were exercised


def _rank_bounds(rank: int) -> tuple[list[Poly], list[Poly]]:
    """Bounds the analysis of a rank-`rank` elementwise kernel compares (proven, refuted):
    the element count `D = d0*d1*...*d(r-1)` against the last index, the outermost
    index's share `(d0 - 1)*d1*...`. Shifted to the symbols' lower bound 1, each has
    2**rank terms, which the prover used to list."""
    dims = [Poly.sym(f"d{k}") for k in range(rank)]
    whole, inner = Poly.const(1), Poly.const(1)
    for d in dims:
        whole = whole * d
    for d in dims[1:]:
        inner = inner * d
    proven = [whole - 1, whole - inner, 3 * whole - dims[-1] * dims[-2] + 3 * dims[-1] - 1]
    refuted = [2 * inner - whole, whole - 2 * inner, inner - whole + 1]
    return proven, refuted


@pytest.mark.parametrize("rank", [4, 10])
def test_prover_at_ranks_the_reference_can_expand(rank):
    proven, refuted = _rank_bounds(rank)
    lower = {f"d{k}": 1 for k in range(rank)}
    for p in proven + refuted:
        d = Domain(lower)
        assert (d.nonneg(p), d.extremes(p)) == (_reference_nonneg(p, lower), _reference_extremes(p, lower)), p
        assert d.nonneg(p) == (p in proven)


@pytest.mark.parametrize("rank", [16, 40, 64])
def test_prover_work_does_not_grow_with_the_rank(rank):
    proven, refuted = _rank_bounds(rank)
    d = Domain({f"d{k}": 1 for k in range(rank)})
    assert all(d.nonneg(p) for p in proven) and not any(d.nonneg(p) for p in refuted)
    assert d.extremes(proven[0]) == (0, SYMBOL_MAX ** rank - 1)
    # the shifted polynomials have 2**rank terms; the prover examines a handful
    assert d.work <= 8 and not d.gave_up


def test_prover_gives_up_soundly_past_its_budget():
    # (s0 - 1)(s1 - 1)...(s13 - 1) over symbols >= 1 is a product of non-negative
    # factors, but its expansion has 2**14 terms, half of them negative and none
    # dominated: proving it would take 2**14 * 2**14 steps, past MAX_PROOF_WORK
    p = Poly.const(1)
    for k in range(14):
        p = p * (Poly.sym(f"s{k}") - 1)
    d = Domain({f"s{k}": 1 for k in range(14)})
    assert not d.nonneg(p) and d.gave_up and d.work <= MAX_PROOF_WORK + len(p.terms)
    assert d.extremes(p) is None
    q = Poly.const(1)
    for k in range(4):
        q = q * (Poly.sym(f"s{k}") - 1)
    small = Domain({f"s{k}": 1 for k in range(4)})
    assert small.nonneg(q) and _reference_nonneg(q, small.lower) and not small.gave_up


def _within_limits(iv: Interval) -> bool:
    return all(len(p.terms) <= MAX_BOUND_TERMS and all(abs(c).bit_length() <= MAX_BOUND_BITS for _, c in p.terms)
               for p in iv.lo + iv.hi)


@pytest.mark.parametrize("start", [Poly.const(3), Poly.sym("n") + Poly.sym("m") + 1])
def test_oversized_bounds_are_dropped_from_intervals(start):
    # 30 squarings would make a 2**30-bit number of 3, a polynomial of 2**59 terms of n + m + 1
    d = Domain({"n": 0, "m": 0})
    x = Interval.point(start)
    for _ in range(30):
        x = d.mul(x, x, DType.I64)
        assert _within_limits(x)


# ========================================================================== the verifier
def _program(body: list[str], regs: str = "", shape: str = "n") -> Program:
    return parse_program("\n".join([
        ".program p", ".symbols n", f".param out y: f32[{shape}]", ".stage s domain [n] block [1]",
        "    .reg %i: i64", "    .reg %f: f32", *([f"    .reg {regs}: i64"] if regs else []), *body,
        "    MOV.i64 %i, %gid.x", "    MOV_IMM.f32 %f, 1.0", "    STG.f32 [y + %i], %f", "    EXIT"]) + "\n")


def _nest(depth: int) -> Program:
    """`depth` loops, each inside the last, each run twice."""
    opens = [line for k in range(depth) for line in (f"    MOV_IMM.i64 %c{k}, 2", f"h{k}:")]
    closes = [f"    LOOP %c{k}, h{k}" for k in reversed(range(depth))]
    return _program(opens + closes, ", ".join(f"%c{k}" for k in range(depth)))


def _calls(depth: int) -> Program:
    """The main code calls s0, which calls s1, ... s(depth - 1): calls `depth` deep."""
    subs = [line for k in range(depth) for line in (f"s{k}:", *([f"    CALL s{k + 1}"] if k + 1 < depth else []),
                                                    "    RET")]
    p = _program(["    CALL s0"])
    text = format_program(p).rstrip("\n") + "\n" + "\n".join(subs) + "\n"
    return parse_program(text)


def _rejected(p: Program, rule: str, *fragments: str) -> VerifyError:
    with pytest.raises(VerifyError) as exc:
        verify(p)
    assert exc.value.rule == rule, str(exc.value)
    for f in fragments:
        assert f in str(exc.value), str(exc.value)
    return exc.value


def test_loops_nested_past_the_limit_are_refused_at_the_innermost():
    assert verify(_nest(12))
    err = _rejected(_nest(MAX_LOOP_DEPTH + 1), "limit", f"nested {MAX_LOOP_DEPTH + 1} deep",
                    f"at most {MAX_LOOP_DEPTH}")
    assert err.index == 2 * (MAX_LOOP_DEPTH + 1)  # the first LOOP: the innermost loop's
    _rejected(_nest(200), "limit", "nested 200 deep")  # (was 34 s to verify)


def test_calls_nested_past_the_limit_are_refused_without_recursing():
    assert verify(_calls(MAX_CALL_DEPTH))
    _rejected(_calls(MAX_CALL_DEPTH + 1), "limit", f"calls nest {MAX_CALL_DEPTH + 1} deep", "the stage entry")
    _rejected(_calls(3000), "limit", "calls nest 3000 deep")  # was a RecursionError


def _old_loop_problem(body: tuple, labels: dict[str, int]) -> tuple[str, int, int] | None:
    """The loop checks as they were (quadratic): the first loop, in LOOP order, that
    writes its counter (rule, LOOP pc, writer) or crosses a later one (rule, pc, pc2)."""
    loops = [(labels[it.target], pc) for pc, it in enumerate(body) if isinstance(it, Instr) and it.op == "LOOP"]
    for head, pc in loops:
        counter = body[pc].srcs[0].name
        for k in range(head, pc):
            it = body[k]
            if isinstance(it, Instr) and (it.srcs[0].name if it.op == "LOOP" else getattr(it.dst, "name", None)) \
                    == counter:
                return "loop-counter", pc, k
        for head2, pc2 in loops:
            if head < head2 < pc < pc2:
                return "loop-nesting", pc, pc2
    return None


def _random_loops(rng: random.Random) -> list[str]:
    """Labels, LOOPs back to random earlier labels, and counter writes, anywhere."""
    lines, labels = [], []
    for _ in range(rng.randint(1, 14)):
        roll = rng.random()
        if roll < 0.35 or not labels:
            labels.append(f"L{len(labels)}")
            lines.append(f"{labels[-1]}:")
        elif roll < 0.85:
            lines.append(f"    LOOP %c{rng.randrange(4)}, {rng.choice(labels)}")
        else:
            lines.append(f"    MOV_IMM.i64 %c{rng.randrange(4)}, 1")
    return lines


def test_loop_checks_in_one_pass_report_what_the_quadratic_ones_did():
    rng = random.Random(5)
    seen = set()
    for _ in range(1500):
        p = _program([f"    MOV_IMM.i64 %c{k}, 2" for k in range(4)] + _random_loops(rng), "%c0, %c1, %c2, %c3")
        body = p.stages[0].body
        labels = {it.name: k for k, it in enumerate(body) if isinstance(it, Label)}
        expected = _old_loop_problem(body, labels)
        try:
            verify(p)
            got = None
        except VerifyError as err:
            got = None
            if err.rule in ("loop-counter", "loop-nesting"):
                other = int(str(err).split("instruction ")[2].split()[0].strip("(`"))
                got = err.rule, err.index, other
        assert got == expected, format_program(p)
        seen.add(expected and expected[0])
    assert seen == {None, "loop-counter", "loop-nesting"}


def test_analysis_work_is_metered(monkeypatch):
    # twelve sequential loops over 40 tracked registers: fine at the real limit
    body = [f"    MOV_IMM.i64 %r{k}, {k}" for k in range(40)]
    for k in range(12):
        body += [f"    MOV_IMM.i64 %c{k}, 3", f"h{k}:", f"    ADD.i64 %r{k}, %r{k}, 1", f"    LOOP %c{k}, h{k}"]
    regs = ", ".join([f"%r{k}" for k in range(40)] + [f"%c{k}" for k in range(12)])
    p = _program(body, regs)
    assert verify(p)
    spent = StageAnalysis(p, p.stages[0])
    spent.run()
    assert 2_000 < spent.meter.spent < MAX_ANALYSIS_STEPS // 10
    monkeypatch.setattr(verifier, "MAX_ANALYSIS_STEPS", spent.meter.spent // 2)
    monkeypatch.setattr(verifier, "_STAGES_PASSED", type(verifier._STAGES_PASSED)())
    monkeypatch.setattr(verifier, "_PASSED", type(verifier._PASSED)())
    _rejected(p, "complexity", "this stage is too complex to verify: the bounds analysis needs more than")
    # the whole program has a budget too: two such stages pass alone, not together
    monkeypatch.setattr(verifier, "MAX_ANALYSIS_STEPS", spent.meter.spent * 2)
    monkeypatch.setattr(verifier, "MAX_PROGRAM_STEPS", spent.meter.spent * 3 // 2)
    two = attrs.evolve(p, stages=(p.stages[0], attrs.evolve(p.stages[0], name="t")))
    _rejected(two, "complexity", "the program is too complex to verify")


def test_buffers_past_the_rank_and_size_limits_are_refused():
    dims = ", ".join(["n"] * (MAX_RANK + 1))
    _rejected(_program([], shape=dims), "limit", f"has {MAX_RANK + 1} dimensions", f"at most {MAX_RANK}")
    sums = ", ".join(["n + m + 1"] * 6)  # (n + m + 1)**6: up to 3**6 = 729 terms
    text = format_program(_program([], shape="n")).replace(".symbols n", ".symbols n m").replace(
        "y: f32[n]", f"y: f32[{sums}]")
    _rejected(parse_program(text), "limit", "729 terms", f"at most {MAX_SIZE_TERMS}")


# ============================================================================== fuse
def _source_ir(text: str) -> KernelIR:
    return hologram.compile(text, opt="O0").ir


def _kernel(body: str, inputs: str = 'x = "f32[n]"', outputs: str = 'y = "f32[n]"') -> str:
    return (f'[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = {{ {inputs} }}\noutputs = {{ {outputs} }}\n'
            f'body = """\n{body}\n"""\n')


def _chain(n: int) -> str:
    return _kernel("\n".join(["t0 = x + 1"] + [f"t{k} = t{k - 1} + 1" for k in range(1, n)] + [f"y = t{n - 1} * 2"]))


def _reversals(n: int) -> str:
    lines = ["t0[i] = x[n - 1 - i] + x[i]"] + [f"t{k}[i] = t{k - 1}[n - 1 - i] + x[i]" for k in range(1, n)]
    return _kernel("\n".join(lines + [f"y = t{n - 1} + 1"]))


def _old_inline_elementwise(body, decls):
    """ir_fuse.inline_elementwise as it was (quadratic): the reference."""
    inline = {}

    def sub(node):
        if node.op != "LOAD" or node.arg not in inline:
            return None
        d = inline[node.arg]
        env = dict(zip(d.vars, node.srcs))
        value = d.body.replace(lambda n: env.get(n.arg) if n.op == "IDX" else None)
        dtype = decls[d.target].dtype
        return value if value.dtype is dtype else Expr("CAST", dtype, (value,))

    out = []
    for st in body:
        st = map_statement(st, lambda e: e.replace(sub))
        if isinstance(st, Compute) and decls[st.target].kind == "temp" and not has_reduce(st.body):
            inline[st.target] = st
        else:
            out.append(st)
    return out


DOCUMENTS = sorted(glob.glob("kernels/*.toml") + glob.glob("tests/heldout/kernels/*.toml"))


@pytest.mark.parametrize("text", [open(p).read() for p in DOCUMENTS] + [
    _chain(30), _reversals(12),
    _kernel("e = exp(x - max(x))\nt[i] = e[n - 1 - i] * 2.0 + x[i]\ny = t / sum(e)"),
    _kernel("t[j, i] = a[i, j] + 1.0\nu = t * t\ny[i] = sum(u[i, k], k)", 'a = "f32[n, n]"'),
    _kernel("t = x * 2.0\nu[i] = t[i] + sum(t)\ny = u + 1.0"),
])
def test_fuse_substitutes_exactly_what_it_did(text):
    lib = hologram.compile_all(text, opt="O0")
    for k in lib.values():
        kir = k.ir
        decls = {d.name: d for d in kir.params + kir.outputs + kir.temps}
        assert inline_elementwise(kir.body, decls) == _old_inline_elementwise(kir.body, decls)


def _walked(monkeypatch, kir: KernelIR) -> int:
    """Expression nodes fuse visits (every traversal walks)."""
    count, real = [0], Expr.walk

    def walk(self):
        for node in real(self):
            count[0] += 1
            yield node
    with monkeypatch.context() as m:
        m.setattr(Expr, "walk", walk)
        fuse(kir)
    return count[0]


@pytest.mark.parametrize("kernel", [_chain, _reversals])
def test_fuse_work_is_linear_in_the_statements(monkeypatch, kernel):
    small, large = (_walked(monkeypatch, _source_ir(kernel(n))) for n in (150, 300))
    assert large < 2.3 * small  # quadratic: 4x (a chain of 3000 took 23 s)


def test_fused_expressions_stay_small():
    k = hologram.compile(_reversals(300), opt="O2")  # was a RecursionError; would fuse 45k nodes
    assert len(k.ir.temps) >= 2  # temporaries past MAX_FUSED_NODES stay stages of their own
    # a statement kept holds its own nodes and those of the temps it took in, each within the limit
    assert all(sum(1 for _ in st.body.walk()) <= 4 * MAX_FUSED_NODES for st in k.ir.body)
    x = np.arange(7, dtype=np.float32)
    t = x[::-1] + x
    for _ in range(299):
        t = t[::-1] + x
    assert np.array_equal(k.on("interp")(x), t + 1)
    chain = hologram.compile(_chain(3000))  # was 23 s
    assert 3000 // MAX_FUSED_NODES < len(chain.program.stages) < 3000 // 10
    x = np.array([0.5, -3.0], dtype=np.float32)
    expected = x
    for _ in range(3000):
        expected = expected + np.float32(1)
    assert np.array_equal(chain.on("interp")(x), expected * 2)


# ================================================================================ the DSL
def test_ranks_past_the_limit_are_refused_where_they_are_written():
    dims = ", ".join(f"d{k}" for k in range(MAX_DSL_RANK + 1))
    with pytest.raises(DocumentError) as exc:
        hologram.compile(_kernel("y = x + 1", f'x = "f32[{dims}]"', f'y = "f32[{dims}]"'), file="r.toml")
    span = exc.value.span
    assert span.file == "r.toml" and span.line == 4 and f"more than {MAX_DSL_RANK} dimensions" in str(exc.value)
    assert f"d{MAX_DSL_RANK}" in str(exc.value).splitlines()[1][span.col - 1:]
    indices = ", ".join(f"i{k}" for k in range(MAX_DSL_RANK + 1))
    with pytest.raises(CompileError, match=f"at most {MAX_DSL_RANK} dimensions"):
        hologram.compile(_kernel(f"t[{indices}] = x[i0]\ny = x"))


@pytest.mark.parametrize("rank", [16, MAX_DSL_RANK])
def test_high_ranks_compile_and_run(rank):
    dims = ", ".join(f"d{k}" for k in range(rank))
    k = hologram.compile(_kernel("y = x + 1", f'x = "f32[{dims}]"', f'y = "f32[{dims}]"'))  # rank 16: was 9.5 s
    x = np.arange(12, dtype=np.float32).reshape((1,) * (rank - 2) + (3, 4))
    assert np.array_equal(k.on("interp")(x), x + 1)


def test_statements_past_the_limit_are_refused_where_the_first_extra_one_is():
    with pytest.raises(CompileError) as exc:
        hologram.compile(_chain(MAX_STATEMENTS), file="c.toml")
    assert f"{MAX_STATEMENTS + 1} statements" in str(exc.value) and exc.value.span.line == 6 + MAX_STATEMENTS + 1
