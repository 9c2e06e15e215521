"""What the conformance kit would run on cuda, and what `hologram diff-test` draws,
become PTX that nvJitLink assembles for sm_80 and sm_90: the code generator handles
every instruction, conversion, memory space, control form and stage shape it declares
(running them needs a device). nvJitLink is a dependency: nothing here skips."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import HealthCheck, given, settings

import hologram
from hologram.errors import UnsupportedProgram
from hologram.testing.conformance_cases import hand_written_cases, instruction_cases, stage_shape_cases
from hologram.testing.difftest_checks import program_cases
from hologram.testing.plugin_cases import difftest_kernels
from hologram_cuda.backend import CAPABILITIES
from hologram_cuda.targets import TARGETS


def _built(exe) -> None:
    assert set(exe.ptx) == set(TARGETS)
    assert all(exe.cubins[t][:4] == b"\x7fELF" for t in TARGETS)


def test_every_declared_conformance_program_assembles(cuda):
    cases = []
    for make in (lambda: instruction_cases(CAPABILITIES, np.random.default_rng(0), 0),
                 lambda: hand_written_cases(CAPABILITIES), lambda: stage_shape_cases(CAPABILITIES)):
        declared, _ = make()
        cases += declared
    areas = {case.area for case in cases}
    assert areas == {"instructions", "conversions", "memory", "barriers", "control", "stage shapes", "reductions",
                     "pools"}, areas
    for case in cases:
        _built(cuda.prepare(case.program))


# The CI draw: as many examples of each diff-test kind as `hologram diff-test --examples
# 300` runs (docs/gpu.md, "CUDA", has the time it takes).
DRAW = 300
REFUSED_ONLY = re.compile(r"ERFC\.f64 is not declared|deeper than CUDA's 64 lanes on z")


def _settings():
    return settings(max_examples=DRAW, derandomize=True, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


def _builds_or_is_refused_by_name(cuda, program) -> None:
    """`program` builds for both targets, or is refused for what the declaration leaves
    out (ERFC.f64) or CUDA's block shape; a code generator, LLVM or ptxas failure fails."""
    try:
        exe = cuda.prepare(program)
    except UnsupportedProgram as e:
        assert REFUSED_ONLY.search(str(e)), str(e)
        return
    _built(exe)


@_settings()
@given(case=difftest_kernels())
def test_difftest_kernels_assemble(cuda, case):
    """diff-test's `kernels` kind (generated documents, Python forms, plugin cases),
    compiled as diff-test compiles them at O2."""
    try:
        kernel = hologram.compile(case.source, format=case.format, opt="O2", backend="interp")
    except case.error or ():
        return  # a case whose point is the compile error
    _builds_or_is_refused_by_name(cuda, kernel.program)


@_settings()
@given(case=program_cases())
def test_difftest_programs_assemble(cuda, case):
    """diff-test's `programs` kind: generated verified Atlas programs, which reach every
    instruction (pools, phase, reductions, calls, barriers) at every dtype."""
    _builds_or_is_refused_by_name(cuda, case.program)
