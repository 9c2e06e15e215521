"""PTX generation and assembly without a GPU: every stdlib kernel the declaration covers
becomes PTX for sm_80 and sm_90 and assembles with nvJitLink; hand-written programs
cover what the stdlib does not use (shared memory, barriers, loops, calls, checks)."""

from __future__ import annotations

import glob
import os
import re

import pytest

import hologram
from hologram.errors import ArgumentError, CompileError, UnsupportedProgram
from hologram.isa.asm import parse_program
from hologram_cuda.abi import tree_sums
from hologram_cuda.assemble import assemble, have_nvjitlink
from hologram_cuda.ptx import emit_ptx
from hologram_cuda.targets import PTX_VERSIONS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
KERNELS = sorted(glob.glob(os.path.join(ROOT, "kernels", "*.toml")))
needs_nvjitlink = pytest.mark.skipif(not have_nvjitlink(), reason="nvJitLink is not installed "
                                     "(pip install nvidia-nvjitlink cuda-bindings)")

# Each lane stores its x into shared memory, the block waits, then lane t sums the
# block's first t + 1 values (a LOOP), through a subroutine that reads shared memory
# checked; the result goes to y[gid] with a checked store. Shared memory, BarSync,
# LOOP, CALL/RET, BRA, SET, CVT and checked LDG/STG/LDS in one kernel.
BLOCK_SCAN = """
.program block_scan
.symbols n
.param in x: f32[n]
.param out y: f64[n]
.stage scan domain [n] block [64]
.reg %i, %t, %j, %c: i64
.reg %v, %acc: f32
.reg %w: f64
.reg %p: bool
.shared sh: f32[64]
    MOV.i64 %i, %gid.x
    MOV.i64 %t, %tid.x
    LDG.f32.chk %v, [x + %i]
    STS.f32 [sh + %t], %v
    BarSync
    ADD.i64 %c, %t, 1
    SET.ge.i64 %p, %c, 65
    @%p BRA done
again:
    CALL add
    ADD.i64 %j, %j, 1
    LOOP %c, again
done:
    CVT.f64.f32 %w, %acc
    STG.f64.chk [y + %i], %w
    EXIT
add:
    LDS.f32.chk %v, [sh + %j]
    ADD.f32 %acc, %acc, %v
    RET
"""


def _program(text: str):
    return parse_program(text)


def _stdlib(path: str):
    return hologram.compile_file(path, backend="interp").program


def test_every_stdlib_kernel_becomes_ptx_and_assembles(cuda):
    """PTX for each target at its pinned version, one `.entry` per stage, per stage
    with `.init` stores and per stage with full float sums (sum, mean, dot, softmax);
    cubins when nvJitLink is here. Every one of the 19 stdlib kernels is declared and
    builds: one that stops building fails here by name."""
    assert len(KERNELS) == 19
    for path in KERNELS:
        program = _stdlib(path)
        exe = cuda.prepare(program)
        entries = len(program.stages) + sum(1 for stage in program.stages if stage.inits) \
            + sum(1 for stage in program.stages if tree_sums(program, stage))
        assert len(exe.kernels) == entries, path
        for target, version in PTX_VERSIONS.items():
            ptx = exe.ptx[target]
            assert f".version {version[3]}.{version[4:]}" in ptx
            assert f".target {target}" in ptx
            assert len(re.findall(r"^\.visible \.entry ", ptx, re.M)) == entries, path
            assert exe.cubins[target][:4] == b"\x7fELF", path  # nvJitLink is a dependency: never skipped


@pytest.mark.parametrize("target", sorted(PTX_VERSIONS))
def test_shared_memory_barriers_loops_and_calls_make_ptx(target):
    ptx = emit_ptx(_compile(BLOCK_SCAN), target)
    assert re.search(r"^\s*\.shared \.align 8 \.b8 hg_block_scan_0_scan\S*sh\[256\];", ptx, re.M)
    assert re.search(r"\bbar\.sync\s+0;", ptx)  # after the zero-fill: the aligned barrier
    assert re.search(r"\bbarrier\.sync\s+0;", ptx)  # BarSync: the non-aligned form
    assert re.search(r"^\s*exit;", ptx, re.M)  # a lane ends with `exit`: barriers stop waiting for it
    # The LOOP can walk past the 64-element array, so the checked LDS stays: a failure
    # claims err[0] with code 2 (shared) and writes stage 0, instruction 17, index 64.
    assert re.search(r"atom\.[a-z.]*cas\.b64\s+%rd\d+, \[%rd\d+\], 0, 2;", ptx)
    if have_nvjitlink():
        assert assemble(ptx, target, "block_scan")[:4] == b"\x7fELF"


def _compile(text: str) -> str:
    from hologram_cuda.codegen import compile_program

    return compile_program(_program(text)).module_ir


@needs_nvjitlink
def test_broken_ptx_is_refused_with_ptxas_message(cuda):
    ptx = cuda.prepare(_stdlib(os.path.join(ROOT, "kernels", "vadd.toml"))).ptx["sm_80"]
    broken = ptx.replace("add.rn.f32", "add.bogus.f32", 1)
    assert broken != ptx
    with pytest.raises(CompileError, match=r"ptxas refused the PTX of 'vadd' for sm_80: ptxas application ptx "
                                           r"input, line \d+; error\s+: Unknown modifier '\.bogus'"):
        assemble(broken, "sm_80", "vadd")


ERFC64 = """
.program erfc64
.symbols n
.param in x: f64[n]
.param out y: f64[n]
.stage s domain [n] block [64]
.reg %i: i64
.reg %v: f64
    MOV.i64 %i, %gid.x
    LDG.f64 %v, [x + %i]
    ERFC.f64 %v, %v
    STG.f64 [y + %i], %v
    EXIT
"""


def test_undeclared_instruction_is_refused_before_prepare(cuda, monkeypatch):
    """The declaration refuses ERFC.f64 (libdevice's is documented at 5 ulp, past the
    contract's 4), what the runtime asks before `prepare`, and `prepare` asks it too:
    the program never reaches the code generator."""
    from hologram_cuda import codegen

    def reached(program):
        raise AssertionError("the code generator was reached")

    monkeypatch.setattr(codegen, "compile_program", reached)
    for refuse in (cuda.check_covers, cuda.prepare):
        with pytest.raises(UnsupportedProgram, match=r"backend 'cuda' cannot run program 'erfc64': stage 's': "
                                                     r"instruction 2 `ERFC\.f64 %v, %v`: ERFC\.f64 is not declared"):
            refuse(_program(ERFC64))


SEEDED = """
.program seeded
.param out y: f32[4]
.stage s domain [4] block [4]
.init y[0] = 1.5
.init y[2] = -3
.reg %v: f32
    EXIT
"""


@pytest.mark.parametrize("target", sorted(PTX_VERSIONS))
def test_inits_are_a_one_thread_kernel_before_the_stage(cuda, target):
    """Each `.init` store happens once per launch, before the stage: a kernel of its own
    (kind `init`, listed first), storing each value converted to the buffer's
    type (the verifier proved the offsets inside the buffer)."""
    exe = cuda.prepare(_program(SEEDED))
    assert [(k.name, k.kind, k.block) for k in exe.kernels] == [
        ("hg_seeded_0_s_init", "init", (1, 1, 1)), ("hg_seeded_0_s", "stage", (4, 1, 1))]
    ptx = exe.ptx[target]
    init = ptx[ptx.index(".entry hg_seeded_0_s_init"):ptx.index(".entry hg_seeded_0_s(")]
    # the f32 bits, as LLVM stores them: y[0] = 1.5 (0x3FC00000), y[2] = -3.0 (0xC0400000)
    assert re.search(r"st\.global\.[bu]32\s+\[%rd\d+\], 1069547520;", init)
    assert re.search(r"st\.global\.[bu]32\s+\[%rd\d+\+8\], -1069547520;", init)
    assert exe.cubins[target][:4] == b"\x7fELF"


def test_a_block_deeper_than_cuda_allows_is_refused_by_prepare(cuda):
    text = """
.program deep
.symbols n
.param out y: f32[n, n, n]
.stage s domain [n, n, n] block [1, 1, 128]
    EXIT
"""
    with pytest.raises(UnsupportedProgram, match=r"block \[1, 1, 128\] is deeper than CUDA's 64 lanes on z"):
        cuda.prepare(_program(text))


def test_text_forms(cuda):
    program = _stdlib(os.path.join(ROOT, "kernels", "vadd.toml"))
    assert "ptx_kernel" in cuda.emit(program, "llvm")
    assert ".target sm_90" in cuda.emit(program, "ptx-sm_90")
    assert ".version 7.8" in cuda.emit(program, "ptx")
    with pytest.raises(ArgumentError, match="cuda has no text form 'sass'"):
        cuda.emit(program, "sass")


# PTX `.param` types and their sizes (the C layout aligns each to its size)
_PARAM_BYTES = {"u8": 1, "s8": 1, "b8": 1, "u16": 2, "s16": 2, "b16": 2, "u32": 4, "s32": 4, "b32": 4, "f32": 4,
                "u64": 8, "s64": 8, "b64": 8, "f64": 8}
MIXED = """
.program mix
.symbols n
.param in x: f32[n]
.param a: bool
.param b: i16
.param c: f32
.param d: u8
.param e: f64
.param out y: f32[n]
.stage s domain [n] block [32]
    EXIT
"""


@pytest.mark.parametrize("target", sorted(PTX_VERSIONS))
def test_packed_arguments_follow_the_ptx_parameter_list(target):
    """The parameter buffer's layout is the C layout of the kernel's `.param` list: each
    parameter at its natural alignment, in order (what cuLaunchKernel reads)."""
    from hologram_cuda.arguments import ArgumentLayout

    program = _program(MIXED)
    ptx = emit_ptx(_compile(MIXED), target)
    params = re.findall(r"\.param \.(\w+)\b[^\n]*_param_(\d+)", ptx)
    offset, want = 0, []
    for kind, _ in params:
        size = _PARAM_BYTES[kind]
        offset = -(-offset // size) * size
        want.append(offset)
        offset += size
    layout = ArgumentLayout.of(program)
    assert layout.offsets() == tuple(want) and layout.size == -(-offset // 8) * 8
    import numpy as np

    packed = layout.pack([0x1000, 0x2000], [7], [np.bool_(True), np.int16(-2), np.float32(1.5), np.uint8(9),
                                                 np.float64(-0.25)], 0x3000, 0x4000)
    record = np.frombuffer(packed, layout.struct)[0]
    assert [record[name].item() for name in layout.struct.names] == [0x1000, 0x2000, 7, 1, -2, 1.5, 9, -0.25,
                                                                      0x3000, 0x4000]


def test_loading_the_plugin_imports_no_llvm():
    """Every process that lists backends loads the plugin: LLVM is imported by prepare only."""
    import subprocess
    import sys

    code = ("import sys, hologram_cuda; hologram_cuda.CudaBackend().available(); "
            "print(sorted(m for m in sys.modules if m.startswith(('llvmlite', 'hologram_cuda.codegen', "
            "'hologram_cuda.ptx'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
