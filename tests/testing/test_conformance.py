"""The conformance kit (hologram.testing.conformance, `hologram conformance`): the
in-repo backends and the lanes example conform; a wrong instruction is found and blamed
on itself; what a backend does not declare is reported and never run; every opcode of
the table has a program."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import hologram
from hologram.backend import Backend, Capabilities, DType, Instr
from hologram.core.errors import UnsupportedProgram
from hologram.isa.opcodes import OPCODES
from hologram.registry.lookups import get_backend
from hologram.testing.conformance import FAILED, NOT_DECLARED, PASSED, run_cases, run_conformance
from hologram.testing.conformance_cases import hand_written_cases, instruction_cases, stage_shape_cases

from repo_paths import EXAMPLES

pytestmark = pytest.mark.usefixtures("fresh_plugins")
BACKENDS = [b for b in ("interp", "cpu_llvm") if importlib.util.find_spec(f"hologram_{b}")]


def _lanes():
    spec = importlib.util.spec_from_file_location("hologram_lanes",
                                                  EXAMPLES / "hologram-backend-lanes" / "hologram_lanes" / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _all_cases(caps: Capabilities) -> list:
    rng = np.random.default_rng(0)
    return [c for build in (lambda: instruction_cases(caps, rng, 1), lambda: hand_written_cases(caps),
                            lambda: stage_shape_cases(caps)) for c in build()[0]]


def test_every_opcode_of_the_table_is_run_by_some_program():
    """A new instruction of a value form is covered by the table-driven programs; any
    other needs a hand-written one here (conformance_cases.HAND_WRITTEN)."""
    used = {it.op for case in _all_cases(Capabilities()) for st in case.program.stages for it in st.body
            if isinstance(it, Instr)}
    assert set(OPCODES) <= used, f"no conformance program runs {', '.join(sorted(set(OPCODES) - used))}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_in_repo_backends_conform(backend):
    report = run_conformance(backend, examples=1)
    assert report.ok, report.format()
    areas = {area: (declared, not_declared) for area, declared, _, _, not_declared in report.table()}
    assert all(not_declared == 0 for _, not_declared in areas.values()), report.format()  # the whole ISA
    assert {"instructions", "conversions", "memory", "control", "barriers", "reductions", "pools",
            "stage shapes"} <= set(areas)


def test_a_partial_backend_is_described_not_failed(register_plugin):
    register_plugin(_lanes(), "lanes")
    report = run_conformance("lanes", examples=2)
    assert report.ok, report.format()
    table = {area: counts for area, *counts in report.table()}
    declared, passed, failed, not_declared = table["instructions"]
    assert passed == declared > 100 and not_declared > 100 and failed == 0
    assert table["reductions"][0] == 0 and table["reductions"][3] > 0  # it declares none
    assert table["stage shapes"][1] == table["stage shapes"][0] > 0
    undeclared = {c.item: c.message for c in report.not_declared()}
    assert undeclared["DIV.i32"] == "DIV.i32 is not declared" and "CVT.i32.f32" in undeclared


class Wrong(Backend):
    """The interpreter, except that every ADD.f32 result stored comes out negated, and
    its prepare refuses what holds a BarSync though its capabilities declare it."""

    name = "wrong"
    priority = -5
    capabilities = Capabilities.of([op for op in OPCODES if op != "ReduceMul"])  # everything but ReduceMul

    def __init__(self):
        self.prepared = []

    def available(self):
        return True

    def allocate(self, shape, dtype):
        return np.zeros(shape, dtype.np)

    def prepare(self, program):
        self.prepared.append(program)
        if any(isinstance(it, Instr) and it.op == "BarSync" for st in program.stages for it in st.body):
            raise UnsupportedProgram("wrong: no barriers after all")
        return program, get_backend("interp").prepare(program)

    def launch(self, executable, buffers, scalars, symbols):
        program, exe = executable
        get_backend("interp").launch(exe, buffers, scalars, symbols)
        for st in program.stages:
            adds = {it.dst for it in st.body if isinstance(it, Instr) and it.op == "ADD" and it.dtype is DType.F32}
            for it in st.body:
                if isinstance(it, Instr) and it.op == "STG" and it.srcs and it.srcs[0] in adds:
                    out = buffers[it.addr.buffer].reshape(-1)
                    out[:] = -out


def test_a_wrong_instruction_is_found_and_blamed_on_itself_alone():
    backend = Wrong()
    reference = get_backend("interp")
    rng = np.random.default_rng(0)
    cases, missing = instruction_cases(backend.capabilities, rng, 0)
    checks = {c.item: c for c in run_cases(backend, reference, cases)}
    assert checks["ADD.f32"].status == FAILED and "assert_close" in checks["ADD.f32"].message
    assert [item for item, c in checks.items() if c.status == FAILED] == ["ADD.f32"]
    assert checks["ADD.f64"].status == checks["SUB.f32"].status == PASSED


def test_what_is_not_declared_is_never_run_and_a_declared_refusal_fails():
    backend = Wrong()
    cases, missing = hand_written_cases(backend.capabilities)
    assert {m.item for m in missing if m.area == "reductions"} >= {"ReduceMul.f32 into one element (stage init)"}
    checks = run_cases(backend, get_backend("interp"), cases)
    assert not any("ReduceMul" in str(st.body) for p in backend.prepared for st in p.stages)  # never prepared
    barrier = [c for c in checks if c.area == "barriers"]
    assert barrier and all(c.status == FAILED and "declared, but prepare refused it" in c.message for c in barrier)
    assert all(c.status == PASSED for c in checks if c.area == "reductions")


def test_the_cli_prints_the_table_and_exits_0_for_every_backend(register_plugin, run_cli):
    register_plugin(_lanes(), "lanes")
    for backend in [*BACKENDS, "lanes"]:
        code, out, err = run_cli("conformance", "--backend", backend, "--examples", "1")
        assert code == 0, out + err
        assert out.startswith(f"conformance of {backend} against interp (seed 0, 1 generated examples)\n"
                              "area\tdeclared\tpassed\tfailed\tnot declared\n"), out
        assert out.rstrip().endswith("conformance: ok")
    code, out, err = run_cli("conformance", "--backend", "lanes", "--examples", "0", "--verbose")
    assert code == 0 and "not declared by lanes (not failures):" in out and "ReduceAdd.f32" in out
    code, out, err = run_cli("conformance", "--backend", "nope")
    assert code == 1 and "unknown backend 'nope'" in err


def test_the_cli_fails_on_a_failure(register_plugin, run_cli):
    register_plugin(type("P", (), {"hologram_register_backends": staticmethod(
        hologram.hookimpl(lambda register: register(Wrong())))}), "wrong")
    code, out, err = run_cli("conformance", "--backend", "wrong", "--examples", "0")
    assert code == 1, out + err
    assert "failed: instructions: ADD.f32" in out and out.rstrip().endswith("failed")
    assert NOT_DECLARED in out  # the table's heading
