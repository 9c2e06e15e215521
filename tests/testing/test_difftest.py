"""The differential harness: quiet on a correct backend, loud (and minimal) on a broken one.

`broken` is a test-time backend plugin registered with the plugin manager exactly as a
third party's would be: it runs the interpreter, then corrupts one element of the first
output buffer. The harness must catch it, shrink the example, write a reproducer that
replays (failing on `broken`, passing on `interp`), and the CLI must say so.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from hologram.backend import Backend
from hologram.cli.main import main
from hologram.core.errors import ArgumentError, PluginError
from hologram.core.hookspecs import hookimpl
from hologram.core.types import Affine, DType
from hologram.isa.program import Addr, BufferParam, Imm, Instr, Program, Reg, RegDecl, Special, Stage
from hologram.registry.lookups import get_backend
from hologram.testing.difftest import (INTERP_MAX_ELEMENTS, NotCovered, ProgramCase, check_program, max_elements, replay,
                                       run_difftest)
from hologram.testing.precision import EXACT, OPEN, ULPS, precision

from repo_paths import ROOT



class BrokenBackend(Backend):
    """The interpreter, except that the first non-empty output's element 0 comes out wrong."""

    name = "broken"
    priority = -1
    max_test_elements = 1 << 16  # it runs one lane at a time: no 2**24-term long reductions (difftest.max_elements)

    @property
    def inner(self):
        return get_backend("interp")  # looked up late: registering must not consult the registry

    def available(self) -> bool:
        return True

    def allocate(self, shape, dtype):
        return self.inner.allocate(shape, dtype)

    def prepare(self, program):
        return program, self.inner.prepare(program)

    def launch(self, executable, buffers, scalars, symbols):
        program, exe = executable
        self.inner.launch(exe, buffers, scalars, symbols)
        for p in program.params:
            if isinstance(p, BufferParam) and p.role != "in" and buffers[p.name].size:
                flat = buffers[p.name].reshape(-1)
                v = flat[0]
                if flat.dtype.kind == "b":
                    flat[0] = not v
                elif flat.dtype.kind == "f":
                    flat[0] = -v if np.isfinite(v) and v != 0 else 1.5
                else:
                    flat[0] = v ^ 1
                return


class _Plugin:
    @hookimpl
    def hologram_register_backends(self, register):
        register(BrokenBackend())


@pytest.fixture
def broken(register_plugin):
    register_plugin(_Plugin(), "test-broken-backend")
    return "broken"


def test_a_correct_backend_passes(tmp_path):
    report = run_difftest(["interp"], examples=15, seed=3, out_dir=str(tmp_path))
    assert report.ok, report
    assert [(r.kind, r.opt, r.backend, r.failed) for r in report.rows] == \
        [("kernels", "O0", "interp", 0), ("kernels", "O2", "interp", 0),
         ("programs", "O0", "interp", 0), ("programs", "O2", "interp", 0)]
    # kernel cases with more than INTERP_MAX_ELEMENTS input elements skip the interpreter
    kernels_o0, kernels_o2, *programs = report.rows
    assert 0 < kernels_o0.examples == kernels_o2.examples <= 15 and all(r.examples == 15 for r in programs)
    assert not os.listdir(tmp_path)


def test_long_cases_skip_only_slow_backends(broken):
    assert max_elements("interp") == INTERP_MAX_ELEMENTS and max_elements("cpu_llvm") is None
    assert get_backend("interp").max_test_elements == INTERP_MAX_ELEMENTS  # declared, not special-cased
    assert max_elements(broken) == BrokenBackend.max_test_elements


def test_progress_is_reported(tmp_path):
    seen = []
    run_difftest(["interp"], examples=4, seed=0, kinds=("programs",), out_dir=str(tmp_path),
                 progress=lambda kind, done, total: seen.append((kind, done, total)))
    assert seen == [("programs", k, 4) for k in range(1, 5)]


@pytest.mark.parametrize("kind, suffix", [("kernels", ".toml"), ("programs", ".hasm")])
def test_a_broken_backend_is_caught_shrunk_and_replayable(broken, tmp_path, kind, suffix):
    report = run_difftest(["interp", broken], examples=25, seed=7, kinds=(kind,), out_dir=str(tmp_path),
                          opts=("O2",))
    assert not report.ok
    good, bad = report.rows
    assert good.backend == "interp" and good.failed == 0 and good.reproducer is None
    assert bad.backend == "broken" and bad.failed > 0
    assert bad.passed + bad.failed == good.passed <= 25  # both run one lane at a time (max_elements)
    path = bad.reproducer
    assert path.endswith(suffix) and os.path.exists(path)
    assert os.path.exists(path[: -len(suffix)] + ".npz")
    assert "hologram diff-test --replay" in open(path[: -len(suffix)] + ".txt").read()
    text = open(path).read()
    # shrunk: hypothesis's minimal example is small
    assert len(text.splitlines()) < (12 if kind == "kernels" else 30), text
    verdict = replay(path, ["interp", broken])
    assert verdict["interp"] is None
    assert verdict["broken"]
    assert replay(path)["broken"]  # by default, the backend it was written for


def prog(*body, dtype=DType.F32):
    """y[i] = f(x[i]) with f the `body` (which reads %v and writes %w)."""
    regs = (RegDecl("i", DType.I64), RegDecl("v", dtype), RegDecl("w", dtype))
    n = (Affine.of("n"),)
    stage = Stage("s", n, (4,), regs, (), (), (), (Instr("MOV", DType.I64, Reg("i"), (Special("gid.x"),)),
                                                   Instr("LDG", dtype, Reg("v"), addr=Addr("x", Reg("i"))),
                                                   *body, Instr("STG", dtype, srcs=(Reg("w"),), addr=Addr("y", Reg("i"))),
                                                   Instr("EXIT")))
    return Program("p", (BufferParam("x", dtype, n, "in"), BufferParam("y", dtype, n, "out")), (), ("n",), (stage,))


EXP = Instr("EXP", DType.F32, Reg("w"), (Reg("v"),))
ADD = Instr("ADD", DType.F32, Reg("w"), (Reg("v"), Imm(1.0)))


def test_precision_levels():
    assert precision(prog(ADD))["y"] == EXACT
    assert precision(prog(EXP))["y"] == ULPS
    assert precision(prog(EXP, Instr("ADD", DType.F32, Reg("w"), (Reg("w"), Imm(1.0)))))["y"] == OPEN
    assert precision(prog(Instr("ADD", DType.I32, Reg("w"), (Reg("v"), Imm(1))), dtype=DType.I32))["y"] == EXACT


class NudgedBackend(BrokenBackend):
    """The interpreter with every float output moved by `ulps` ULPs: a conforming
    transcendental implementation when ulps <= 4, a wrong `+` when ulps > 0."""

    def __init__(self, name: str, ulps: int):
        self.name, self.ulps = name, ulps

    def launch(self, executable, buffers, scalars, symbols):
        program, exe = executable
        self.inner.launch(exe, buffers, scalars, symbols)
        y = buffers["y"]
        for _ in range(self.ulps):
            y[...] = np.nextafter(y, np.float32(np.inf))


class _Nudged:
    @hookimpl
    def hologram_register_backends(self, register):
        register(NudgedBackend("nudged3", 3))
        register(NudgedBackend("nudged6", 6))


def test_programs_are_compared_at_the_precision_their_dataflow_pins(tmp_path, register_plugin):
    register_plugin(_Nudged(), "test-nudged-backends")
    x = np.array([0.5, -1.25, 3.0, 10.0], np.float32)
    case = lambda p: ProgramCase(p, {"x": x, "y": np.zeros(4, np.float32)}, {}, {"n": 4})  # noqa: E731
    assert check_program(case(prog(EXP)), "nudged3") is None      # within the 4-ULP contract
    assert "assert_close(y)" in check_program(case(prog(EXP)), "nudged6")
    assert "assert_close(y)" in check_program(case(prog(ADD)), "nudged3")  # `+` is exact
    assert check_program(case(prog(ADD)), "interp") is None


def test_bad_arguments_are_clear_errors(tmp_path):
    with pytest.raises(ArgumentError, match="examples"):
        run_difftest(["interp"], examples=0)
    with pytest.raises(ArgumentError, match="unknown kind"):
        run_difftest(["interp"], examples=1, kinds=("nope",))
    with pytest.raises(PluginError, match="unknown backend"):
        run_difftest(["no_such_backend"], examples=1)
    with pytest.raises(ArgumentError, match="reproducer"):
        replay(str(tmp_path / "x.txt"))


def test_cli_diff_test(capsys, tmp_path):
    assert main(["diff-test", "--backends", "interp", "--examples", "5", "--seed", "1",
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "kernels" in out and "programs" in out and "passed" in out


def test_cli_diff_test_failure_and_replay(broken, capsys, tmp_path):
    code = main(["diff-test", "--backends", f"interp,{broken}", "--examples", "10", "--seed", "2",
                 "--kind", "programs", "--opt", "O2", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    hasm = [f for f in os.listdir(tmp_path) if f.endswith(".hasm")]
    assert len(hasm) == 1 and hasm[0] in out.replace("\n", "")
    path = str(tmp_path / hasm[0])
    assert main(["diff-test", "--replay", path]) == 1
    assert main(["diff-test", "--replay", path, "--backends", "interp"]) == 0
    capsys.readouterr()


def test_cli_usage_errors(capsys):
    assert main(["diff-test", "--backends", "interp", "--examples", "0"]) == 2
    assert main(["diff-test", "--backends", "", "--examples", "3"]) == 2
    assert main(["diff-test", "--backends", "interp", "--opt", "O7"]) == 2
    capsys.readouterr()


def test_bench_quick_runs_without_optional_libraries(tmp_path):
    env = dict(os.environ, HOLOGRAM_BENCH_NO="numexpr,numba")
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench.py"), "--quick",
                           "--results-dir", str(tmp_path)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "a*x + y" in proc.stdout and "skipped" in proc.stdout
    results = [f for f in os.listdir(tmp_path) if f.endswith(".json")]
    assert len(results) == 1


def test_the_size_sweep_runs_and_writes_its_table(tmp_path):
    env = dict(os.environ, HOLOGRAM_BENCH_NO="numexpr,numba")
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sweep.py"), "--sizes", "1e3,2e3",
                           "--only", "vadd,sum,xtv,logreg", "--repeat", "1", "--out", str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "disagrees" not in proc.stderr
    table = (tmp_path / "README.md").read_text()
    assert "## hologram / numpy" in table and all(f"| {k} |" in table for k in ("vadd", "sum", "xtv", "logreg"))


def test_cli_bench_is_registered(capsys):
    from hologram.cli.bench import bench_script

    assert os.path.exists(bench_script())
    assert main(["bench", "--help"]) == 0
    assert "--quick" in capsys.readouterr().out


# ------------------------------------------------------------------ a partial backend
def _lanes_module():
    """examples/hologram-backend-lanes, the documented partial backend, as installed."""
    import importlib.util

    path = ROOT / "examples" / "hologram-backend-lanes" / "hologram_lanes" / "__init__.py"
    spec = importlib.util.spec_from_file_location("hologram_lanes", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def lanes(register_plugin):
    register_plugin(_lanes_module(), "lanes")
    return "lanes"


def test_a_partial_backends_refusals_are_not_covered_not_failures(lanes, tmp_path):
    """lanes declares what it runs (`capabilities`); what it leaves out is refused before
    its `prepare` is called: those examples are counted apart (with the reason), the run
    passes, and no reproducer is written."""
    report = run_difftest([lanes], examples=12, seed=1, out_dir=str(tmp_path), opts=("O0",))
    assert report.ok, [r.message for r in report.rows]
    for row in report.rows:
        assert row.failed == 0 and row.reproducer is None
        assert row.not_covered > 0 and row.passed > 0, row
        assert row.examples == row.passed + row.not_covered
        assert row.not_covered_reason.startswith("backend 'lanes' cannot run program "), row.not_covered_reason
    assert not os.listdir(tmp_path)


def test_a_backend_that_declines_by_another_error_still_fails(broken, tmp_path, monkeypatch):
    """Only the declared refusal is 'not covered': a PluginError of any other kind from
    prepare is a failure, shown with its message on the reproducer's line."""
    def prepare(self, program):
        raise PluginError("backend 'broken' fell over")

    monkeypatch.setattr(BrokenBackend, "prepare", prepare)
    report = run_difftest([broken], examples=3, seed=1, kinds=("kernels",), out_dir=str(tmp_path), opts=("O0",))
    (row,) = report.rows
    assert row.failed > 0 and row.not_covered == 0
    assert row.message.splitlines()[0] == "the kernel raised PluginError: backend 'broken' fell over"


def test_cli_diff_test_lists_what_a_partial_backend_does_not_cover(lanes, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    code = main(["diff-test", "--backends", f"interp,{lanes}", "--examples", "8", "--seed", "1", "--opt", "O0",
                 "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "not covered" in out and "reproducers" not in out
    section = out[out.index("not covered by"):]
    assert all(len(line) <= 100 for line in section.splitlines()), section  # wrapped to the terminal
    joined = " ".join(line.strip() for line in section.splitlines())
    # the reason whole: the refused stage and instruction, and the hint, never cut
    assert "backend 'lanes' cannot run program" in joined and "is not declared" in joined
    assert "its capabilities do not declare it" in joined


def test_replay_declined_is_not_a_failure(lanes, tmp_path, capsys):
    kernel = tmp_path / "total.toml"
    kernel.write_text((ROOT / "kernels" / "sum.toml").read_text())
    verdict = replay(str(kernel), ["interp", lanes])
    assert verdict["interp"] is None
    assert isinstance(verdict[lanes], NotCovered) and "ReduceAdd" in verdict[lanes].reason
    assert main(["diff-test", "--replay", str(kernel), "--backends", lanes]) == 0
    assert "not covered" in capsys.readouterr().out


# ------------------------------------------------------------ replaying a user's own kernel
USER_KERNEL = """\
[kernel]
name = "scaled"
version = "0.1.0"
inputs = { x = "f32[n]", y = "f32[n]", s = "f32" }
outputs = { z = "f32[n]", t = "f32[n]" }
body = '''
z = x * s + y
t = exp(x)
'''
"""


def test_replay_of_a_users_kernel_draws_its_inputs(tmp_path):
    """A kernel file with no .npz beside it: inputs are drawn from its signature at a
    fixed seed, and every backend is held to the reference interpreter."""
    path = tmp_path / "scaled.toml"
    path.write_text(USER_KERNEL)
    verdict = replay(str(path), ["interp", "cpu_llvm"], seed=4, examples=10)
    assert verdict == {"interp": None, "cpu_llvm": None}


def test_replay_of_a_users_kernel_catches_a_broken_backend(broken, tmp_path):
    path = tmp_path / "scaled.toml"
    path.write_text(USER_KERNEL)
    failure = replay(str(path), [broken], seed=4, examples=10)[broken]
    assert "assert_close(z)" in failure or "assert_close(t)" in failure, failure
    assert "kernel 'scaled'" in failure and "n = " in failure, failure  # the drawn sizes, to reproduce by hand
    assert failure == replay(str(path), [broken], seed=4, examples=10)[broken]  # the same seed, the same example


def test_cli_replay_of_a_users_kernel_prints_the_seed(capsys, tmp_path):
    path = tmp_path / "scaled.toml"
    path.write_text(USER_KERNEL)
    assert main(["diff-test", "--replay", str(path), "--backends", "interp,cpu_llvm", "--examples", "5"]) == 0
    out = capsys.readouterr().out
    assert "no inputs beside it" in out and "seed 0" in out and "--seed 0" in out, out
    assert "cannot load its inputs" not in out


def test_replay_of_a_file_whose_calls_cannot_be_drawn_says_so(tmp_path):
    path = tmp_path / "wide.toml"
    path.write_text(USER_KERNEL.replace('x = "f32[n]", y = "f32[n]"', 'x = "f32[n + 9]", y = "f32[n + 9]"')
                    .replace('z = "f32[n]", t = "f32[n]"', 'z = "f32[n - 9]", t = "f32[n - 9]"')
                    .replace("z = x * s + y\nt = exp(x)", "z[i] = x[i] * s + y[i]\nt[i] = exp(x[i])"))
    with pytest.raises(ArgumentError, match="no call could be drawn"):
        replay(str(path), ["interp"], examples=5)
