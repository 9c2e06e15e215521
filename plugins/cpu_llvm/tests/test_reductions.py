"""cpu_llvm: the fast paths of cross-lane reductions agree with the contract.

- float ReduceMin/ReduceMax use IEEE minimum/maximum so the lane loop vectorizes: a NaN
  anywhere (vector body or scalar tail) gives NaN, and ties of -0.0/+0.0 give a zero;
- float sums into one element are summed per block and compensated across blocks, so a
  multi-million-term sum stays within the log2(n) bound of `assert_close`; f16 terms
  are summed in f32;
- every reduction kind over f16 (and products and scatter-adds over f32) at lengths
  where the type's precision runs out, written every way the DSL allows, meets the
  contract on both backends (the lowering's accumulator rule, lower_plan.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from hologram.core.errors import ExecutionError
from hologram.core.types import Affine, DType
from hologram.isa.program import Addr, BufferParam, Imm, Init, Instr, Label, Pred, Reg
from hologram.testing import assert_close
from hologram_cpu_llvm import jit
from hologram_cpu_llvm.codegen import compile_program

from llvm_harness import REAL, I, N, both, gid, llvm_launch, stage_program

F16, F32, F64, I64 = DType.F16, DType.F32, DType.F64, DType.I64


def _reduce_program(op: str, t: DType, *, offset: int = 0, size: Affine = Affine.of(1), checked: bool = False,
                    block: int = 256, identity: float | None = None):
    v = Reg("v")
    body = [gid(), Instr("LDG", t, v, addr=Addr("x", I)),
            Instr(op, t, srcs=(v,), addr=Addr("r", None, offset), checked=checked), Instr("EXIT")]
    params = (BufferParam("x", t, (N,), "in"), BufferParam("r", t, (size,), "inout"))
    inits = [Init("r", offset, identity)] if identity is not None else []
    return stage_program(body, [("i", I64), ("v", t)], params=params, inits=inits, block=(block,))


def _run(prog, x: np.ndarray, r: np.ndarray, *, chunk: int | None = None) -> np.ndarray:
    bufs = {"x": x, "r": r.copy()}
    llvm_launch(prog, bufs, {}, {"n": len(x)}, blocks_per_call=chunk)
    return bufs["r"]


# ---------------------------------------------------------------- min / max
@pytest.mark.parametrize("t", [F32, F64], ids=str)
@pytest.mark.parametrize("op", ["ReduceMin", "ReduceMax"])
def test_float_min_max_propagate_nan_from_every_position(op, t):
    ident = np.inf if op == "ReduceMin" else -np.inf
    prog = _reduce_program(op, t, identity=ident)
    n = 1000  # 3 full blocks of 256 and a partial one: vector bodies and scalar tails
    x = np.random.default_rng(3).standard_normal(n).astype(t.np)
    want = x.min() if op == "ReduceMin" else x.max()
    assert _run(prog, x, np.zeros(1, t.np))[0] == want
    for pos in (0, 1, 15, 16, 63, 64, 255, 256, 257, 767, 768, 990, n - 1):
        y = x.copy()
        y[pos] = np.nan
        assert np.isnan(_run(prog, y, np.zeros(1, t.np))[0]), pos
        assert np.isnan(_run(prog, y, np.zeros(1, t.np), chunk=1)[0]), pos
    # Infinities are ordinary values; the identity is returned for an all-identity input.
    y = np.full(n, ident, t.np)
    assert _run(prog, y, np.zeros(1, t.np))[0] == ident
    y[500] = -ident
    assert _run(prog, y, np.zeros(1, t.np))[0] == -ident


@pytest.mark.parametrize("op", ["ReduceMin", "ReduceMax"])
def test_float_min_max_of_signed_zeros_is_a_zero(op):
    """Which zero wins a -0.0/+0.0 tie depends on the combination order, which the ISA
    leaves to the backend; the value must be a zero, and the interpreter's order is one
    of the allowed ones (test_cpu_llvm_codegen.compare_buffers accepts either sign)."""
    prog = _reduce_program(op, F32, identity=np.inf if op == "ReduceMin" else -np.inf)
    x = np.where(np.arange(700) % 3 == 0, -0.0, 0.0).astype(np.float32)
    got, want = both(prog, {"x": x, "r": np.zeros(1, np.float32)}, {}, {"n": len(x)})
    assert got["r"][0] == 0.0 and want["r"][0] == 0.0
    same_sign = np.full(700, -0.0, np.float32)
    assert np.signbit(_run(prog, same_sign, np.zeros(1, np.float32))[0])  # only -0.0: -0.0


@pytest.mark.parametrize("t", [F32, F64], ids=str)
def test_float_min_max_loop_vectorizes(t):
    optimized: list[str] = []
    jit.compile_object(compile_program(_reduce_program("ReduceMax", t, identity=-np.inf)).module_ir, optimized)
    assert "@llvm.maximum.v" in optimized[0]  # a vector maximum: the lane loop was widened


# --------------------------------------------------------------------- sums
@pytest.mark.parametrize("checked", [False, True])
@pytest.mark.parametrize("t", [F32, F64], ids=str)
def test_long_float_sum_meets_the_log2_bound(t, checked):
    """2**22 terms of 0.1: adding each block's total to one running f32 partial rounds
    the same way every time and errs by ~4e-4 relative; the contract allows ~6e-6."""
    n = 1 << 22
    prog = _reduce_program("ReduceAdd", t, checked=checked, identity=0.0)
    x = np.full(n, 0.1, t.np)
    exact = np.full(1, np.float64(x[0]) * n).astype(t.np)
    for chunk in (None, 4096):
        assert_close(_run(prog, x, np.zeros(1, t.np), chunk=chunk), exact, reduction_n=n)
    bufs = {"x": x, "r": np.zeros(1, t.np)}
    REAL.launch(REAL.prepare(prog), bufs, {}, {"n": n})
    assert_close(bufs["r"], exact, reduction_n=n)


def test_long_f16_sum_accumulates_in_f32():
    """A hand-written ReduceAdd.f16 (the lowering never emits one): an f16 running sum
    of terms below 1 stops growing at 2048 (256 for these terms below 1/8, whatever n
    is); per block in f32, each chunk's partial rounded once, it meets the contract."""
    prog = _reduce_program("ReduceAdd", F16, identity=0.0)
    for n in (10_000, 1 << 18):
        x = (np.random.default_rng(n).random(n) / 8).astype(np.float16)
        exact = np.asarray([x.astype(np.float64).sum()]).astype(np.float16)
        for chunk in (None, 4096):
            assert_close(_run(prog, x, np.zeros(1, np.float16), chunk=chunk), exact, reduction_n=n)
        bufs = {"x": x, "r": np.zeros(1, np.float16)}
        REAL.launch(REAL.prepare(prog), bufs, {}, {"n": n})  # two threads, two f16 partials
        assert_close(bufs["r"], exact, reduction_n=n)


def test_float_sum_special_values():
    prog = _reduce_program("ReduceAdd", F32, identity=-0.0)
    n = 3000
    x = np.full(n, -0.0, np.float32)
    r = _run(prog, x, np.zeros(1, np.float32))
    assert r[0] == 0.0 and np.signbit(r[0])  # -0.0 contributions onto the -0.0 identity
    for specials, want in (({5: np.inf}, np.inf), ({5: np.inf, 2900: -np.inf}, np.nan), ({700: np.nan}, np.nan),
                           ({0: 3e38, 1: 3e38}, np.inf)):
        y = np.ones(n, np.float32)
        for k, v in specials.items():
            y[k] = v
        for chunk in (None, 1):
            got = _run(prog, y, np.zeros(1, np.float32), chunk=chunk)[0]
            assert (np.isnan(got) and np.isnan(want)) or got == want, (specials, chunk, got)


def test_float_sum_next_to_scattered_contributions():
    """A buffer that also receives contributions at a lane-dependent index keeps every
    contribution in memory, so the constant element gets both kinds."""
    v, j = Reg("v"), Reg("j")
    body = [gid(), Instr("LDG", F32, v, addr=Addr("x", I)), Instr("REM", I64, j, (I, Imm(4))),
            Instr("ReduceAdd", F32, srcs=(v,), addr=Addr("r")),
            Instr("ReduceAdd", F32, srcs=(v,), addr=Addr("r", j)), Instr("EXIT")]
    params = (BufferParam("x", F32, (N,), "in"), BufferParam("r", F32, (Affine.of(4),), "inout"))
    prog = stage_program(body, [("i", I64), ("v", F32), ("j", I64)], params=params, block=(128,))
    x = (np.arange(2000) % 7).astype(np.float32)
    got, want = both(prog, {"x": x, "r": np.zeros(4, np.float32)}, {}, {"n": len(x)})
    assert_close(got["r"], want["r"], reduction_n=len(x))
    assert got["r"][0] == x.sum() + x[::4].sum()


def test_checked_sum_element_out_of_range():
    """A checked constant element beyond the buffer: an error if a lane reaches the
    reduction, and no write at all when every lane branches around it."""
    m = Affine.of("m")
    v, p = Reg("v"), Reg("p")
    body = [gid(), Instr("LDG", F32, v, addr=Addr("x", I)),
            Instr("SET", F32, p, (v, Imm(0.0)), mod="lt"),
            Instr("BRA", target="skip", pred=Pred(p)),
            Instr("ReduceAdd", F32, srcs=(v,), addr=Addr("r", None, 2), checked=True), Label("skip"), Instr("EXIT")]
    params = (BufferParam("x", F32, (N,), "in"), BufferParam("r", F32, (m,), "inout"))
    prog = stage_program(body, [("i", I64), ("v", F32), ("p", DType.BOOL)], params=params, symbols=("n", "m"))
    r = np.full(2, 7.0, np.float32)
    bufs = {"x": np.full(300, -1.0, np.float32), "r": r.copy()}
    llvm_launch(prog, bufs, {}, {"n": 300, "m": 2})
    assert (bufs["r"] == r).all()
    bufs = {"x": np.full(300, 1.0, np.float32), "r": r.copy()}
    with pytest.raises(ExecutionError, match="global"):
        llvm_launch(prog, bufs, {}, {"n": 300, "m": 2})
    bufs = {"x": np.full(300, 1.0, np.float32), "r": np.zeros(3, np.float32)}
    llvm_launch(prog, bufs, {}, {"n": 300, "m": 3})
    assert bufs["r"][2] == 300.0


@pytest.mark.parametrize("layout", ["regions", "state machine"])
def test_float_sum_across_barriers(layout):
    """Block accumulators under both barrier layouts: lanes contribute before and after
    a barrier (straight-line regions), or inside a subroutine that syncs (state machine)."""
    from hologram.isa.program import MemDecl, Special
    v, t, w = Reg("v"), Reg("t"), Reg("w")
    head = [gid(), Instr("MOV", I64, t, (Special("tid.x"),)), Instr("LDG", F32, v, addr=Addr("x", I)),
            Instr("ReduceAdd", F32, srcs=(v,), addr=Addr("r"))]
    if layout == "regions":
        body = head + [Instr("STS", F32, srcs=(v,), addr=Addr("sh", t)), Instr("BarSync"),
                       Instr("LDS", F32, w, addr=Addr("sh", None, 0)),
                       Instr("ReduceAdd", F32, srcs=(w,), addr=Addr("r")), Instr("EXIT")]
    else:
        body = head + [Instr("CALL", target="sync"), Instr("ReduceAdd", F32, srcs=(w,), addr=Addr("r")),
                       Instr("EXIT"), Label("sync"), Instr("STS", F32, srcs=(v,), addr=Addr("sh", t)),
                       Instr("BarSync"), Instr("LDS", F32, w, addr=Addr("sh", None, 0)), Instr("RET")]
    params = (BufferParam("x", F32, (N,), "in"), BufferParam("r", F32, (Affine.of(1),), "inout"))
    prog = stage_program(body, [("i", I64), ("v", F32), ("t", I64), ("w", F32)], params=params,
                         shared=[MemDecl("sh", F32, 32)], block=(32,))
    x = (np.arange(1000) % 13 - 6).astype(np.float32)
    got, want = both(prog, {"x": x, "r": np.zeros(1, np.float32)}, {}, {"n": len(x)})
    assert got["r"][0] == want["r"][0] == x.sum() + sum(32 * x[k] for k in range(0, 992, 32)) + 8 * x[992]


ROWS = """[kernel]
name = "rows"
version = "1.0.0"
inputs = {{ x = "{t}[m, n]" }}
outputs = {{ y = "{t}[m]" }}
body = "y[i] = sum(x[i, j], j)"
"""


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 15, 16, 17, 33, 100, 1000])
@pytest.mark.parametrize("t", ["f16", "f32", "f64"])
def test_in_lane_float_sums_of_every_length(t, n):
    """Row sums (one lane per row, lower_loops.py): f16/f32 accumulate in f64 with a
    reassociable add (vectorized by cpu_llvm), f64 in 8 unrolled Kahan accumulators after
    an n % 8 remainder. Specials in the remainder and in the blocks, cancellation, and
    rows as long as the loop, on both backends, against the contract."""
    import hologram as hg
    dt = DType(t).np
    rng = np.random.default_rng(n)
    x = rng.uniform(-4, 4, (7, n)).astype(dt)
    if n:
        x[1, -1] = np.inf
        x[2, 0] = np.nan
        x[3, 0], x[3, -1] = np.inf, -np.inf
        x[4] = np.finfo(dt).eps / 4
        x[4, 0] = 1.0
        x[5, :] = -0.0
    k = hg.compile(ROWS.format(t=t), format="toml")
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN, as numpy's
        want = x.astype(np.float64).sum(axis=1).astype(dt)
    outs = [k.on(b)(x) for b in ("interp", "cpu_llvm")]
    for got in outs:
        assert_close(got, want, reduction_n=max(n, 1), magnitude=np.abs(x.astype(np.float64)).sum(axis=1))
    if t == "f64":  # strict Kahan steps in program order on both backends: the same bits
        np.testing.assert_array_equal(outs[0].view(np.uint64), outs[1].view(np.uint64))


# ------------------------------------------------- narrow types, long reductions
def _doc(inputs: dict[str, str], outputs: dict[str, str], body: str) -> str:
    table = lambda d: "{ " + ", ".join(f'{k} = "{v}"' for k, v in d.items()) + " }"  # noqa: E731
    return (f'[kernel]\nname = "long"\nversion = "1.0.0"\ninputs = {table(inputs)}\n'
            f'outputs = {table(outputs)}\nbody = """\n{body}\n"""\n')


def _terms(kind: str, shape, t: str, rng) -> np.ndarray:
    """Positive terms, so a sum grows until the type's running sum stalls (f16 sums stay
    below ~4096, inside the f16 range); factors near 1 (tighter for the longer f32
    products), so a product stays finite and normal."""
    dt = DType(t).np
    if kind == "prod":
        width = 2.0 ** -7 if t == "f16" else 2.0 ** -12
        return (1 + rng.uniform(-width, width, shape)).astype(dt)
    size = int(np.prod(shape))
    scale = min(1.0, 8192 / size) if t == "f16" else 1.0  # f16 sums of ~4096 at most: finite
    return (rng.random(shape) * scale).astype(dt)


def _exact(kind: str, x: np.ndarray, axis=None) -> np.ndarray:
    """The reduction of `x`'s exact terms, rounded once (f64 sums and products of f16 and
    f32 terms are that, far inside the contract); numpy for the exact kinds. (numpy
    itself adds an f16 column sum, axis=0, one row at a time in f16: it stalls too.)"""
    if kind in ("sum", "prod", "mean"):
        return np.asarray(getattr(np, kind)(x.astype(np.float64), axis=axis)).astype(x.dtype)
    return np.asarray(getattr(np, kind)(x, axis=axis))


M = 2  # rows of the 2-D forms


def _forms(kind: str, t: str):
    """(name, document, inputs(n, rng), expected(*inputs), terms per output) for every way
    to write reduction `kind` in the DSL: whole array, of a product, along either axis,
    over named index variables (everything, per row) and as a contraction."""
    out = "i64" if kind.startswith("arg") else t
    yield ("full", _doc({"x": f"{t}[n]"}, {"s": out}, f"s = {kind}(x)"),
           lambda n, r: [_terms(kind, n, t, r)], lambda x: _exact(kind, x), lambda n: n)
    if kind in ("sum", "prod"):
        yield ("product terms", _doc({"x": f"{t}[n]", "y": f"{t}[n]"}, {"s": out}, f"s = {kind}(x * y)"),
               lambda n, r: [_terms(kind, n, t, r), _terms(kind, n, t, r)], lambda x, y: _exact(kind, x * y),
               lambda n: n)
    yield ("axis=1", _doc({"x": f"{t}[m, n]"}, {"s": f"{out}[m]"}, f"s = {kind}(x, axis=1)"),
           lambda n, r: [_terms(kind, (M, n), t, r)], lambda x: _exact(kind, x, 1), lambda n: n)
    yield ("axis=0", _doc({"x": f"{t}[n, m]"}, {"s": f"{out}[m]"}, f"s = {kind}(x, axis=0)"),
           lambda n, r: [_terms(kind, (n, M), t, r)], lambda x: _exact(kind, x, 0), lambda n: n)
    if kind == "mean":
        return
    yield ("named i, j", _doc({"x": f"{t}[m, n]"}, {"s": out}, f"s = {kind}(x[i, j], i, j)"),
           lambda n, r: [_terms(kind, (M, n), t, r)], lambda x: _exact(kind, x), lambda n: M * n)
    yield ("named j", _doc({"x": f"{t}[m, n]"}, {"s": f"{out}[m]"}, f"s[i] = {kind}(x[i, j], j)"),
           lambda n, r: [_terms(kind, (M, n), t, r)], lambda x: _exact(kind, x, 1), lambda n: n)
    if not kind.startswith("arg"):
        yield ("contraction", _doc({"a": f"{t}[m, n]", "b": f"{t}[n, m]"}, {"c": f"{t}[m, m]"},
                                   f"c[i, j] = {kind}(a[i, p] * b[p, j], p)"),
               lambda n, r: [_terms(kind, (M, n), t, r), _terms(kind, (n, M), t, r)],
               lambda a, b: _exact(kind, a[:, :, None] * b[None, :, :], 1), lambda n: n)


LONG_KINDS = ("sum", "prod", "mean", "min", "max", "argmin", "argmax")
LONG_CASES = [(kind, t, form[0]) for t in ("f16", "f32") for kind in LONG_KINDS for form in _forms(kind, t)
              if t == "f16" or kind == "prod"]


def _check_long(kind: str, t: str, form: str, n: int, backends) -> None:
    import hologram as hg
    _, text, make, expect, terms = next(f for f in _forms(kind, t) if f[0] == form)
    args = make(n, np.random.default_rng(n))
    want = expect(*args)
    k = hg.compile(text, format="toml")
    for b in backends:
        got = np.asarray(k.on(b)(*args))
        if want.dtype.kind == "f":
            assert_close(got, want, reduction_n=terms(n), name=f"{kind} {form} on {b}")
        else:
            assert_close(got, want, name=f"{kind} {form} on {b}")


@pytest.mark.parametrize("kind, t, form", [c for c in LONG_CASES if c[1] == "f16"])
def test_long_f16_reductions_on_both_backends(kind, t, form):
    """8192 terms below 1: an f16 running sum stalls at 2048 (cpu_llvm returned 2048 for
    a full sum of ~4096), and 8192 f16 roundings of a product near 1 (on either backend,
    pairwise or not) miss the contract by 20-40%."""
    _check_long(kind, t, form, 8192, ("interp", "cpu_llvm"))


@pytest.mark.parametrize("kind, t, form", LONG_CASES)
def test_long_narrow_reductions_on_cpu_llvm_threads(kind, t, form):
    """Lengths past the inline threshold (2**17 work), so a full reduction is split into
    per-thread partials; f32 products of 2**22 factors (an f32 running product errs by
    ~1000 ulp there)."""
    n = (1 << 18) if t == "f16" else (1 << 22)
    _check_long(kind, t, form, n, ("cpu_llvm",))


@pytest.mark.parametrize("t, n, backends", [("f16", 1 << 14, ("interp", "cpu_llvm")),
                                            ("f16", 1 << 18, ("cpu_llvm",)),
                                            ("f32", 1 << 22, ("cpu_llvm",))])
def test_long_resonance_sums(t, n, backends):
    """resonance's scatter-add: cpu_llvm adds each contribution to its bin's partial in
    turn, so f16 bins stalled at 2048, and f32 bins of ~1.4M terms of 0.1 erred by ~20
    times the contract (each addition rounds the same way); they accumulate in f64 now.
    (The interpreter combines each bin pairwise.)"""
    import hologram as hg
    rng = np.random.default_rng(n)
    c = rng.integers(0, 3, n).astype(np.uint8)
    if t == "f16":
        v = (rng.random(n) * min(1.0, 2.0 ** 14 / n)).astype(np.float16)  # bins of ~2**13 at most: finite
    else:
        v = np.full(n, 0.1, np.float32)
    exact = np.zeros(96)
    np.add.at(exact, c, v.astype(np.float64))
    k = hg.compile(_doc({"c": "u8[n]", "v": f"{t}[n]"}, {"h": f"{t}[96]"}, "h = resonance(c, v)"), format="toml")
    for b in backends:
        assert_close(np.asarray(k.on(b)(c, v)), exact.astype(v.dtype), reduction_n=n, name=f"resonance on {b}")
