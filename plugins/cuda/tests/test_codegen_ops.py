"""The PTX the code generator picks for what the stdlib does not show: which atomic each
reduction becomes, PTX's own f16, libdevice inlined (no call left for the driver to
resolve), pools and the phase counter. Each program is also assembled by nvJitLink."""

from __future__ import annotations

import re

import pytest

from hologram.isa.asm import parse_program
from hologram_cuda.assemble import assemble
from hologram_cuda.codegen import compile_program
from hologram_cuda.codegen_math import LIBDEVICE
from hologram_cuda.ptx import emit_ptx
from hologram_cuda.targets import TARGETS


def _ptx(text: str, target: str) -> str:
    ptx = emit_ptx(compile_program(parse_program(text)).module_ir, target)
    assert assemble(ptx, target, "test")[:4] == b"\x7fELF"
    return ptx


def _reduction(op: str, dtype: str, buffer_dtype: str | None = None) -> str:
    return f"""
.program red
.symbols n
.param in x: {dtype}[n]
.param out r: {buffer_dtype or dtype}[n]
.stage s domain [n] block [64]
.reg %i: i64
.reg %v: {dtype}
    MOV.i64 %i, %gid.x
    LDG.{dtype} %v, [x + %i]
    {op}.{dtype} [r + %i], %v
    EXIT
"""


# (opcode, dtype, buffer dtype) -> the PTX atomic it must become, into an indexed element
# (a full sum, into a constant one, is a tree: below)
ATOMICS = [
    ("ReduceAdd", "f32", None, r"atom\.global\.add\.f32"),
    ("ReduceAdd", "f64", None, r"atom\.global\.add\.f64"),
    ("ReduceAdd", "f16", None, r"atom\.global\.add\.noftz\.f16"),
    ("ReduceAdd", "i32", None, r"atom\.global\.add\.u32"),
    ("ReduceAdd", "u64", None, r"atom\.global\.add\.u64"),
    ("ReduceMin", "i64", None, r"atom\.global\.min\.s64"),
    ("ReduceMax", "u32", None, r"atom\.global\.max\.u32"),
    # no PTX atomic propagates NaN, none multiplies, none converts: a CAS loop on the bits
    ("ReduceMax", "f32", None, r"atom\.[a-z.]*global\.cas\.b32"),
    ("ReduceMin", "f64", None, r"atom\.[a-z.]*global\.cas\.b64"),
    ("ReduceMul", "i32", None, r"atom\.[a-z.]*global\.cas\.b32"),
    ("ReduceAdd", "f32", "f64", r"atom\.[a-z.]*global\.cas\.b64"),
    # 8/16-bit: LLVM widens the swap to the 32-bit word holding the element
    ("ReduceAdd", "i8", None, r"atom\.[a-z.]*global\.cas\.b32"),
]


@pytest.mark.parametrize("op, dtype, buffer_dtype, atomic", ATOMICS,
                         ids=[f"{op}.{t}->{b or t}" for op, t, b, _ in ATOMICS])
def test_each_reduction_becomes_its_atomic(op, dtype, buffer_dtype, atomic):
    ptx = _ptx(_reduction(op, dtype, buffer_dtype), "sm_80")
    assert re.search(atomic, ptx), sorted(set(re.findall(r"atom\.[\w.]+", ptx)))


FULL_SUM = """
.program full
.symbols n
.param in x: {t}[n]
.param out r: {t}[2]
.stage s domain [n] block [{block}]
.reg %i: i64
.reg %v: {t}
    MOV.i64 %i, %gid.x
    LDG.{t} %v, [x + %i]
    ReduceAdd.{t} [r + 1], %v
    {barrier}
    EXIT
"""


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("block", [64, 96])
def test_a_full_float_sum_is_a_tree_and_a_sums_kernel_not_an_atomic(t, block):
    """docs/gpu.md, "Full float sums": the lane's share in registers, a tree in shared
    memory at the lane's end (a block of 96 has a level whose upper half is short), the
    block's partial in the scratch memory, a one-block kernel that folds and merges."""
    program = parse_program(FULL_SUM.format(t=t, block=block, barrier=""))
    module = compile_program(program)
    assert [k.kind for k in module.kernels] == ["stage", "sums"]
    assert module.kernels[1].name == module.kernels[0].name + "_sums"
    ptx = _ptx(FULL_SUM.format(t=t, block=block, barrier=""), "sm_90")
    assert not re.search(r"atom\.[a-z.]*global", ptx)  # no atomic anywhere
    stage = ptx[ptx.index(f".entry {module.kernels[0].name}("):ptx.index(f".entry {module.kernels[1].name}(")]
    assert stage.count("barrier.sync") == (block - 1).bit_length() + 1  # the store, then one per level
    assert re.search(rf"st\.global\.(b|f){t[1:]}", ptx)  # the partial, then the merge


def test_a_full_sum_in_a_stage_with_barriers_stays_an_atomic():
    """Its lanes exit early (not to hold a BarSync), so no tree can wait for them all."""
    text = FULL_SUM.format(t="f32", block=64, barrier="BarSync")
    assert [k.kind for k in compile_program(parse_program(text)).kernels] == ["stage"]
    assert re.search(r"atom\.global\.add\.f32", _ptx(text, "sm_80"))


def test_res_accum_checks_the_class_first():
    text = """
.program hist
.symbols n
.param in c: i64[n]
.param in w: f32[n]
.param out h: f32[96]
.stage s domain [n] block [64]
.init h[0] = 0
.reg %i, %c: i64
.reg %v: f32
    MOV.i64 %i, %gid.x
    LDG.i64 %c, [c + %i]
    LDG.f32 %v, [w + %i]
    ResAccum.f32 [h + %c], %v
    EXIT
"""
    ptx = _ptx(text, "sm_90")
    assert re.search(r"atom\.[a-z.]*cas\.b64\s+%rd\d+, \[%rd\d+\], 0, 4;", ptx)  # ERR_CLASS
    assert re.search(r"atom\.global\.add\.f32", ptx)


F16 = """
.program half
.symbols n
.param in x: f16[n]
.param out y: f16[n]
.stage s domain [n] block [64]
.reg %i: i64
.reg %v, %w: f16
    MOV.i64 %i, %gid.x
    LDG.f16 %v, [x + %i]
    FMA.f16 %w, %v, %v, %v
    ADD.f16 %w, %w, %v
    STG.f16 [y + %i], %w
    EXIT
"""


@pytest.mark.parametrize("target", TARGETS)
def test_f16_is_ptx_f16_and_its_fma_is_fused_once(target):
    """FMA.f16 rounds once (docs/isa.md): PTX's fma.rn.f16, not an f32 product and sum."""
    ptx = _ptx(F16, target)
    assert re.search(r"\bfma\.rn\.f16\b", ptx)
    assert re.search(r"\badd\.rn\.f16\b", ptx)


def _every_function(dtype: str) -> str:
    lines = []
    for op in sorted(LIBDEVICE):
        binary = op in ("ATAN2", "HYPOT", "FMOD", "POW")
        lines.append(f"    {op}.{dtype} %v, %v{', %v' if binary else ''}")
    body = "\n".join(lines)
    return f"""
.program every_{dtype}
.symbols n
.param in x: {dtype}[n]
.param out y: {dtype}[n]
.stage s domain [n] block [64]
.reg %i: i64
.reg %v: {dtype}
    MOV.i64 %i, %gid.x
    LDG.{dtype} %v, [x + %i]
{body}
    SIGMOID.{dtype} %v, %v
    REM.{dtype} %v, %v, %v
    STG.{dtype} [y + %i], %v
    EXIT
"""


@pytest.mark.parametrize("dtype", ["f16", "f32", "f64"])
def test_every_libdevice_function_is_linked_and_inlined(dtype):
    """libdevice is linked and internalized: every function the PTX calls is defined in
    it (the big ones, f64 trig's argument reduction, stay `.func`s), none is `.extern`
    for the driver to resolve."""
    ptx = _ptx(_every_function(dtype), "sm_80")
    assert ".extern" not in ptx
    defined = set(re.findall(r"^\.func\s+(?:\([^)]*\)\s*)?(\w+)", ptx, re.M))
    called = set(re.findall(r"^\s*call(?:\.uni)?\s*(?:\([^)]*\),\s*)?(\w+),", ptx, re.M))
    assert called <= defined, called - defined


# The lane's gid decides how much it allocates and which handle it frees, so no check
# can be folded away.
POOLS = """
.program pooled
.symbols n
.param in x: f32[n]
.param out y: f32[n]
.param out p: i64[n]
.stage s domain [n] block [64]
.pool scratch: f32[8]
.reg %i, %h, %g, %k: i64
.reg %v: f32
.reg %c: bool
    MOV.i64 %i, %gid.x
    LDG.f32 %v, [x + %i]
    PoolAlloc %h, scratch, 4
    AND.i64 %k, %i, 7
    PoolStore.f32 [scratch + %k], %v
    PoolLoad.f32 %v, [scratch + %k]
    SET.lt.i64 %c, %i, 3
    @%c BRA small
    PoolAlloc %g, scratch, 4
small:
    PoolAlloc %g, scratch, 2
    SEL.i64 %g, %c, %h, %g
    PoolFree %g
    PhaseAdv %i
    PhaseGet %k
    STG.f32 [y + %i], %v
    STG.i64 [p + %i], %k
    EXIT
"""


def test_pools_check_every_access_and_their_discipline():
    """Each pool access against the pool's top (3), PoolAlloc against its size (5),
    PoolFree against the most recent allocation (6): docs/isa.md's errors, each a code
    of the error word; the phase is modulo 768."""
    ptx = _ptx(POOLS, "sm_90")
    for code in (3, 5, 6):
        assert re.search(rf"atom\.[a-z.]*cas\.b64\s+%rd\d+, \[%rd\d+\], 0, {code};", ptx), code
    assert "768" in ptx


MAD = """
.program mad
.symbols n
.param in x: {t}[n]
.param out y: {t}[n]
.stage s domain [n] block [64]
.reg %i: i64
.reg %v: {t}
    MOV.i64 %i, %gid.x
    LDG.{t} %v, [x + %i]
    MAD.{t} %v, %v, %v, %v
    STG.{t} [y + %i], %v
    EXIT
"""


@pytest.mark.parametrize("dtype", ["f16", "f32", "f64"])
def test_mad_rounds_twice(dtype):
    """MAD is a product and a sum, each rounded (docs/isa.md): `.rn` on both keeps ptxas
    from fusing them, and LLVM contracts nothing (no fast-math)."""
    ptx = _ptx(MAD.format(t=dtype), "sm_80")
    assert re.search(rf"\bmul\.rn\.{dtype}\b", ptx) and re.search(rf"\badd\.rn\.{dtype}\b", ptx), ptx
    assert not re.search(r"\bfma\.", ptx)


def test_without_libdevice_the_error_names_the_wheel(monkeypatch):
    import cuda.pathfinder

    from hologram.errors import PluginError
    from hologram_cuda import ptx

    def missing(name):
        raise cuda.pathfinder.BitcodeLibNotFoundError('Failure finding "libdevice.10.bc"')

    monkeypatch.setattr(cuda.pathfinder, "locate_bitcode_lib", missing)
    with pytest.raises(PluginError, match=r"the transcendentals need libdevice, which was not found") as caught:
        ptx.libdevice_path()
    assert "pip install nvidia-nvvm" in caught.value.hint
