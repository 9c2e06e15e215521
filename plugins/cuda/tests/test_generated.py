"""What the conformance kit would run on cuda, and generated kernels, become PTX that
nvJitLink assembles: the code generator handles every instruction, conversion, memory
space, control form and stage shape it declares (running them needs a device)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import hologram
from hologram.errors import UnsupportedProgram
from hologram.testing.conformance_cases import hand_written_cases, instruction_cases, stage_shape_cases
from hologram.testing.generated import kernels
from hologram_cuda.assemble import have_nvjitlink
from hologram_cuda.backend import CAPABILITIES
from hologram_cuda.targets import TARGETS


def _built(exe) -> None:
    assert set(exe.ptx) == set(TARGETS)
    if have_nvjitlink():
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


@settings(max_examples=25, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(case=kernels())
def test_generated_kernels_assemble_or_are_refused_by_name(cuda, case):
    """A generated kernel (the differential harness's) either builds for both targets or
    is refused as not declared; nothing else (a code generator or ptxas failure)."""
    program = hologram.compile(case.source, opt="O0", backend="interp").program
    try:
        exe = cuda.prepare(program)
    except UnsupportedProgram as e:
        assert "not declared" in str(e) or "does not declare" in str(e) or "does not run yet" in str(e), str(e)
        return
    _built(exe)
