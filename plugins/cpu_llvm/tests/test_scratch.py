"""Block scratch (docs/isa.md, "Block scratch"; docs/cpu-llvm.md, "Scratch and the stack"):
the programs at the limit run as on the interpreter, the programs that smashed the stack
(issue 21) are refused by both backends, and no stage function's frame is large or skips
a page of the stack.

Launches of these programs run in a child process with a timeout: before issue 21 they
killed the process (SIGSEGV), or wrote below the thread's stack into whatever was mapped
there.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from hologram.testing import scratch_cases
from hologram_cpu_llvm import CpuLlvmBackend, jit
from hologram_cpu_llvm.codegen import compile_program
from hologram_cpu_llvm.codegen_memory import STACK_SCRATCH_BYTES

PAGE = 4096  # the stack probes' step: the smallest guard page


def _child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("name", scratch_cases.AT_LIMIT)
def test_programs_at_the_scratch_limit_run_as_on_the_interpreter(name):
    """Two blocks and a partial one, on one thread and on two (each chunk's scratch its own)."""
    child = _child(f"""
        import numpy as np
        import hologram_cpu_llvm.runtime as rt
        from hologram.testing.scratch_cases import at_limit
        from hologram_cpu_llvm import CpuLlvmBackend
        from hologram_interp import InterpBackend

        program = at_limit({name!r})
        lanes = program.stages[0].block[0]
        n = 2 * lanes + 3
        x = (np.arange(n) % 97 + 1).astype(program.params[0].dtype.np)
        want = np.zeros_like(x)
        InterpBackend().launch(program, {{"x": x, "y": want}}, {{}}, {{"n": n}})
        assert want.any()
        for threads in (1, 2):
            rt.INLINE_COST = 0 if threads == 2 else rt.INLINE_COST  # two: a chunk on a worker thread
            backend = CpuLlvmBackend(num_threads=threads, cache_dir=False)
            got = np.zeros_like(x)
            backend.launch(backend.prepare(program), {{"x": x, "y": got}}, {{}}, {{"n": n}})
            assert np.array_equal(got, want), (threads, np.flatnonzero(got != want)[:10])
        print("same")
    """)
    assert child.returncode == 0 and child.stdout.strip() == "same", (child.returncode, child.stderr[-3000:])


@pytest.mark.parametrize("name", scratch_cases.REPRODUCERS)
def test_the_programs_that_smashed_the_stack_are_refused_by_both_backends(name):
    """Issue 21: each was verified, and its first launch killed the process (SIGSEGV)."""
    child = _child(f"""
        import numpy as np
        from hologram.core.errors import VerifyError
        from hologram.testing.scratch_cases import reproducer
        from hologram_cpu_llvm import CpuLlvmBackend
        from hologram_interp import InterpBackend

        program = reproducer({name!r})
        n = 3000
        x, y = np.ones(n, program.params[0].dtype.np), np.zeros(n, program.params[0].dtype.np)
        for backend in (InterpBackend(), CpuLlvmBackend(num_threads=2, cache_dir=False)):
            try:
                exe = backend.prepare(program)
            except VerifyError as e:
                assert e.rule == "scratch", e
                print(type(backend).__name__, "refused")
                continue
            backend.launch(exe, {{"x": x, "y": y}}, {{}}, {{"n": n}})
            print(type(backend).__name__, "ran")
    """)
    assert child.returncode == 0, (child.returncode, child.stdout, child.stderr[-3000:])
    assert child.stdout.split() == ["InterpBackend", "refused", "CpuLlvmBackend", "refused"]


def _stage_ir(name: str) -> str:
    return compile_program(scratch_cases.at_limit(name)).module_ir


def _alloca_bytes(module_ir: str) -> int:
    """The bytes of every fixed-size alloca in the module (the stage functions' frames
    before spills)."""
    sizes = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "half": 2, "float": 4, "double": 8, "ptr": 8}
    total = 0
    for count, ty in re.findall(r"= alloca \[(\d+) x (\w+)\]", module_ir):
        total += int(count) * sizes[ty]
    total += sum(sizes[ty] for ty in re.findall(r"= alloca (\w+)(?:, align \d+)?$", module_ir, re.MULTILINE))
    return total


@pytest.mark.parametrize("name", scratch_cases.AT_LIMIT)
def test_the_largest_legal_stages_keep_their_scratch_off_the_stack(name):
    """At the limit a stage's scratch is 1 MiB (and, before issue 21, 12 MiB of pool
    allocation stacks); what stays in its frame is at most STACK_SCRATCH_BYTES of arrays
    and a few KiB of per-lane flags."""
    module_ir = _stage_ir(name)
    assert _alloca_bytes(module_ir) <= STACK_SCRATCH_BYTES + 8 * 1024


def test_small_scratch_stays_in_the_frame():
    """A heap block costs a malloc per call: a stage whose scratch is small keeps it in its
    frame, where LLVM promotes registers and the lane state."""
    small = compile_program(scratch_cases.scratch_program("small", lanes=64, pools=(16,), shared=(64,),
                                                          barrier="straight")).module_ir
    assert "@malloc" not in small and _alloca_bytes(small) > 64 * 8


@pytest.mark.parametrize("name", scratch_cases.AT_LIMIT)
def test_no_frame_skips_a_page_of_the_stack(name):
    """Every function is compiled with inline stack probes: its stack pointer moves at most a
    page before the page is touched, so a frame deeper than what is left of a thread's
    stack faults on the guard page instead of writing into whatever is mapped below it."""
    module_ir = _stage_ir(name)
    defined = re.findall(r"^define [^\n]*", module_ir, re.MULTILINE)
    assert defined and all('"probe-stack"="inline-asm"' in line for line in defined)
    asm = jit.native_assembly(module_ir)
    moves = [int(n) for n in re.findall(r"subq\s+\$(\d+), %rsp", asm)]
    assert max(moves, default=0) <= PAGE, sorted(moves)[-5:]


def test_a_failed_scratch_allocation_is_a_memory_error():
    """The heap block comes from malloc, which may fail: the launch raises MemoryError
    naming the stage and the size, and the process goes on."""
    program = scratch_cases.at_limit("one_lane_pools")
    real = compile_program(program)
    null_malloc = "define internal ptr @hg_test_malloc(i64 %n) {\n  ret ptr null\n}\n"
    calls = real.module_ir.replace('call ptr @"malloc"(', 'call ptr @hg_test_malloc(')
    assert calls != real.module_ir
    failing = type(real)(calls + null_malloc, real.stages)
    backend = CpuLlvmBackend(num_threads=1, cache_dir=False, codegen=lambda p: failing,
                             codegen_version="test-null-malloc")
    x = np.ones(4)
    with pytest.raises(MemoryError, match=r"stage 'main'.* 1,048,\d+ bytes of block scratch"):
        backend.launch(backend.prepare(program), {"x": x, "y": np.zeros(4)}, {}, {"n": 4})
