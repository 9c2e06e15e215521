"""The program flag `.reassociate` and the instruction modifier `.reassoc`: text, binary
encoding, and what cpu_llvm does with them.

Both are a licence (docs/isa.md, "Program flags" and "Reassociable operations"): the
interpreter ignores them, cpu_llvm reassociates float + (and, for the flag, - and *) and
uses IEEE minimum/maximum, which lets a loop carrying a sum or a max inside one lane
vectorize. Results then differ from the plain program only as a reordered sum differs.
"""

import struct
import zlib

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hologram.core.errors import ISAError
from hologram.isa.asm import format_program, parse_program
from hologram.isa.encoding import decode, encode, program_hash
from hologram.registry.lookups import get_backend

LOOPS = """.program loops
.isa 1
.symbols n
{flag}.param in x: {t}[n]
.param out s: {t}[]
.param out m: {t}[]

.stage fold domain [1] block [1]
    .reg %k, %c: i64
    .reg %v, %acc, %hi: {t}
    .reg %p: bool
    SET.le.i64  %p, $n, 0
    @%p BRA     done
    MOV_IMM.{t} %acc, 0.0
    MOV_IMM.{t} %hi, -inf
    MOV_IMM.i64 %k, 0
    MOV.i64     %c, $n
top:
    LDG.{t}     %v, [x + %k]
    ADD{r}.{t}     %acc, %acc, %v
    MAX{r}.{t}     %hi, %hi, %v
    ADD.i64     %k, %k, 1
    LOOP        %c, top
    STG.{t}     [s], %acc
    STG.{t}     [m], %hi
done:
    EXIT
"""


def loops(t: str = "f32", flag: bool = True, modifier: bool = False) -> str:
    return LOOPS.format(t=t, flag=".reassociate\n" if flag else "", r=".reassoc" if modifier else "")


FORMS = {"flag": dict(flag=True), "modifier": dict(flag=False, modifier=True)}


def test_text_round_trip():
    p = parse_program(loops())
    assert p.reassociate
    assert format_program(p) == loops()
    assert not parse_program(loops(flag=False)).reassociate
    q = parse_program(loops(flag=False, modifier=True))
    assert not q.reassociate and [i.mod for i in q.stages[0].body if getattr(i, "op", "") in ("ADD", "MAX")
                                  and i.dtype.is_float] == ["reassoc", "reassoc"]
    assert parse_program(format_program(q)) == q


@pytest.mark.parametrize("text, message", [
    (".program p\n.reassociate\n.reassociate\n", "a second .reassociate"),
    (".program p\n.reassociate now\n", "end of line"),
    (".reassociate\n", "starts with '.program"),
])
def test_text_errors(text, message):
    with pytest.raises(ISAError, match=message):
        parse_program(text)


def test_binary_formats():
    plain, flagged = parse_program(loops(flag=False)), parse_program(loops())
    a, b = encode(plain), encode(flagged)
    assert a[4] == 1 and b[4] == 2  # a program without flags keeps format 1 (and its hash)
    assert decode(a) == plain and decode(b) == flagged
    assert program_hash(plain) != program_hash(flagged)
    assert attrs.evolve(flagged, reassociate=False) == plain
    modified = parse_program(loops(flag=False, modifier=True))
    assert encode(modified)[4] == 1 and decode(encode(modified)) == modified  # a modifier is an instruction's
    assert program_hash(modified) != program_hash(plain)


def _payload_flags_at(data: bytes) -> int:
    """Offset of the flags byte in `data` (format 2): after the header, string table,
    name and symbols of `loops()`."""
    plain = encode(attrs.evolve(decode(data), reassociate=False))
    # the two payloads differ first at the flags byte (1 byte longer payload: header lengths match)
    k = 6 + 1
    while plain[k] == data[k]:
        k += 1
    return k


@pytest.mark.parametrize("flags, message", [(0, "format 2 with no program flags"), (6, "unknown program flags 0x6")])
def test_corrupt_flags_are_rejected(flags, message):
    data = encode(parse_program(loops()))
    at = _payload_flags_at(data)
    bad = data[:at] + bytes([flags]) + data[at + 1:-4]
    with pytest.raises(ISAError, match=message):
        decode(bad + struct.pack("<I", zlib.crc32(bad)))


EDGE = st.sampled_from([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-310, 5e-324, 1e-40, 3.0e38])


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("t", ["f32", "f64"])
@given(data=st.data())
def test_cpu_llvm_reassociated_agrees_with_interp(form, t, data):
    dt = np.float32 if t == "f32" else np.float64
    n = data.draw(st.integers(0, 300))
    x = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))).uniform(-10, 10, n).astype(dt)
    for _ in range(data.draw(st.integers(0, 3)) if n else 0):
        x[data.draw(st.integers(0, n - 1))] = data.draw(EDGE)
    out = {}
    for backend in ("interp", "cpu_llvm"):
        be = get_backend(backend)
        s, m = np.zeros((), dt), np.zeros((), dt)
        be.launch(be.prepare(parse_program(loops(t, **FORMS[form]))), {"x": x, "s": s, "m": m}, {}, {"n": n})
        out[backend] = (float(s), float(m))
    (si, mi), (sc, mc) = out["interp"], out["cpu_llvm"]
    assert mi == mc or (np.isnan(mi) and np.isnan(mc))  # max is order-free (zeros compare equal)
    if np.isnan(si) or np.isnan(sc):
        # NaN in, or inf - inf: in any order when both infinities are among the terms
        assert np.isnan(si) and np.isnan(sc) or not np.isfinite(x).all()
        return
    eps = float(np.finfo(dt).eps)
    bound = n * eps * float(np.abs(x.astype(np.float64)).sum()) + float(np.finfo(dt).smallest_subnormal)
    if np.isinf(si) or np.isinf(sc):
        assert np.isinf(x).any() or float(np.abs(x.astype(np.float64)).sum()) > float(np.finfo(dt).max) / 2
        return
    assert abs(si - sc) <= bound


def _optimized_ir(text: str) -> str:
    from hologram_cpu_llvm import jit
    from hologram_cpu_llvm.codegen import compile_program
    out: list[str] = []
    jit.compile_object(compile_program(parse_program(text)).module_ir, out)
    return out[0]


@pytest.mark.parametrize("form", FORMS)
def test_the_licence_lets_cpu_llvm_vectorize_a_loop_carried_sum_and_max(form):
    vec = ("x float>", "x double>")
    assert any(v in _optimized_ir(loops(**FORMS[form])) for v in vec)
    assert not any(v in _optimized_ir(loops(flag=False)) for v in vec)
