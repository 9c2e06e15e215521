"""hologram.ir_codec: the Kernel IR's encoding round-trips exactly (sites included) for
the standard library and generated kernels, is canonical, and its reader refuses a
damaged or hostile document with a ValueError saying where, never another exception."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repo_paths import EXAMPLES, KERNELS

import hologram as hg
from hologram.core.types import Affine, DType
from hologram.ir import Compute, Expr, KernelIR, TensorDecl
from hologram.ir_codec import FORMAT_VERSION, decode, encode
from hologram.testing import kernels

F32, I64 = DType.F32, DType.I64


def source_irs(text: str, fmt: str = "toml") -> list[KernelIR]:
    return [k._c.source_ir for k in hg.compile_all(text, format=fmt).values()]


def assert_round_trips(kir: KernelIR) -> None:
    data = encode(kir)
    back = decode(data)
    assert back == kir
    assert encode(back) == data  # the sites of loads (not part of Expr equality) too
    assert _load_sites(back) == _load_sites(kir)


def _load_sites(kir: KernelIR) -> set:
    from hologram.ir import statement_exprs

    return {(n.arg, str(n), n.site) for st in kir.body for root in statement_exprs(st) for n in root.walk()
            if n.op == "LOAD"}


DOCUMENTS = sorted(KERNELS.glob("*.toml")) + sorted(EXAMPLES.glob("*/kernels/*.toml"))


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_every_standard_kernel_round_trips(path):
    for kir in source_irs(path.read_text()):
        assert_round_trips(kir)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=kernels())
def test_generated_kernels_round_trip(case):
    try:
        irs = source_irs(case.source, case.format)
    except hg.CompileError:
        return  # a case that expects a compile error has no IR
    for kir in irs:
        assert_round_trips(kir)


def small() -> KernelIR:
    x = TensorDecl("x", F32, (Affine.of("n"),), "input")
    y = TensorDecl("y", F32, (Affine.of("n"),), "output")
    i = Expr.idx("i")
    body = Expr("ADD", F32, (Expr.load("x", F32, (i,), 0), Expr.const(-0.0, F32)))
    from hologram.core.errors import Site

    return KernelIR("k", "1.0.0", (x,), (y,), (), (Compute("y", ("i",), body, 0),), ("n",),
                    sites=(Site("k.toml", 3, 5, 9, "y = x + -0.0"),))


def test_float_constants_keep_their_bits():
    for value in (-0.0, 0.0, float("nan"), float("-inf"), 5e-324, 1 / 3):
        kir = small()
        st = kir.body[0]
        kir = KernelIR(kir.name, kir.version, kir.params, kir.outputs, kir.temps,
                       (Compute("y", ("i",), Expr("ADD", F32, (st.body.srcs[0], Expr.const(value, F32))), 0),),
                       kir.symbols, sites=kir.sites)
        back = decode(encode(kir)).body[0].body.srcs[1].arg
        assert struct.pack(">d", back) == struct.pack(">d", value)


def test_the_encoding_is_canonical_whatever_the_sharing():
    a = small()
    x = a.body[0].body.srcs[0]
    shared = Expr("ADD", F32, (x, x))
    unshared = Expr("ADD", F32, (x, Expr.load("x", F32, (Expr.idx("i"),), 0)))
    one = KernelIR("k", "1", a.params, a.outputs, (), (Compute("y", ("i",), shared, 0),), ("n",), sites=a.sites)
    two = KernelIR("k", "1", a.params, a.outputs, (), (Compute("y", ("i",), unshared, 0),), ("n",), sites=a.sites)
    assert encode(one) == encode(two)
    doc = json.loads(encode(one))
    assert doc["format"] == "hologram-kernel-ir" and doc["format_version"] == FORMAT_VERSION


def edit(fn) -> bytes:
    doc = json.loads(encode(small()))
    fn(doc)
    return json.dumps(doc).encode()


def _set(path, value):
    def fn(doc):
        at = doc
        for key in path[:-1]:
            at = at[key]
        at[path[-1]] = value
    return fn


HOSTILE = [
    (b"\xff\xfe", "not UTF-8"),
    (b"{", "not JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "nested deeper|not JSON"),
    (b"[]", "the document: expected an object, got an array"),
    (edit(lambda d: d.pop("nodes")), "the document: missing 'nodes'"),
    (edit(_set(["extra"], 1)), "unknown field 'extra'"),
    (edit(_set(["format"], "zip")), "format: expected 'hologram-kernel-ir'"),
    (edit(_set(["format_version"], FORMAT_VERSION + 1)), "format_version: 2 is newer than"),
    (edit(_set(["params", 0, "dtype"], "f128")), r"params\[0\].dtype: unknown type 'f128'"),
    (edit(_set(["params", 0, "kind"], "output")), r"params\[0\].kind: expected 'input' or 'scalar'"),
    (edit(_set(["params", 0, "shape", 0], [0, [["n", 1], ["n", 1]]])), r"params\[0\].shape\[0\]: expected its terms"),
    (edit(_set(["nodes", 0, 0], "FROB")), r"nodes\[0\]\[0\]: 'FROB' is not an IR op"),
    (edit(_set(["nodes", 0, 2], [5])), r"nodes\[0\]\[2\]\[0\]: expected the index of an earlier node"),
    (edit(_set(["nodes", 0], ["IDX", "i64", [], "i"])), r"nodes\[0\]: expected 5 items"),
    (edit(_set(["nodes", 3, 2], [1])), r"nodes\[3\]: ADD takes 2 operands, got 1"),
    (edit(_set(["nodes", 2, 3], 1.5)), r"nodes\[2\]\[3\]: expected a constant"),
    (edit(_set(["nodes", 1, 4], 7)), r"nodes\[1\]\[4\]: expected the index of a site"),
    (edit(_set(["nodes", 1, 3], "z")), r"body\[0\]: loads 'z', which is not an array"),
    (edit(_set(["nodes", 0, 3], "j")), r"body\[0\]: index variable 'j' is bound by no statement"),
    (edit(_set(["body", 0, "target"], "x")), r"body\[0\]: assigns 'x', which is not an output"),
    (edit(_set(["body", 0, "vars"], ["i", "j"])), r"body\[0\]: 2 index variables for 'y'"),
    (edit(_set(["body", 0, "statement"], "loop")), r"body\[0\]: expected an object whose 'statement'"),
    (edit(_set(["params", 0, "shape", 0], [0, [["m", 1]]])), "'m' is not one of the kernel's symbols"),
    (edit(_set(["symbols"], ["n", "n"])), "expected distinct identifiers"),
]


@pytest.mark.parametrize("data, message", HOSTILE, ids=[m for _, m in HOSTILE])
def test_a_damaged_encoding_is_refused_saying_where(data, message):
    with pytest.raises(ValueError, match=message):
        decode(data)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_damage_is_a_value_error_or_a_well_formed_ir(data):
    """A byte flipped, deleted or inserted anywhere: decode refuses with a ValueError or
    returns an IR that encodes back to itself. Never another exception."""
    good = encode(small())
    at = data.draw(st.integers(0, len(good) - 1))
    how = data.draw(st.sampled_from(["flip", "drop", "insert"]))
    byte = data.draw(st.integers(0, 255))
    bad = (good[:at] + bytes([byte]) + good[at + 1:] if how == "flip" else good[:at] + good[at + 1:]
           if how == "drop" else good[:at] + bytes([byte]) + good[at:])
    try:
        kir = decode(bad)
    except ValueError:
        return
    assert decode(encode(kir)) == kir
