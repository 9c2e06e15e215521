"""The `hologram` command: run, compile, plugins, plugin commands, errors and exit codes."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import hologram
from hologram.backend import Backend
from hologram.cli import main as cli
from hologram.core.types import DType
from hologram.registry import plugins

from dsl_helpers import TWO_KERNELS


@pytest.fixture(autouse=True)
def fresh(fresh_plugins, monkeypatch):
    monkeypatch.delenv("HOLOGRAM_DEBUG", raising=False)
    monkeypatch.setenv("COLUMNS", "200")  # rich wraps tables to the terminal width


@pytest.fixture
def two(tmp_path):
    path = tmp_path / "two.toml"
    path.write_text(TWO_KERNELS)
    return str(path)


# ---------------------------------------------------------------------------------- run
def test_run_generates_inputs_deterministically(run_cli):
    code, out, err = run_cli("run", "kernels/relu.toml", "--bind", "n=5", "--seed", "7")
    assert code == 0, err
    head, body = out.split("\n", 1)
    default = hologram.get_backend().name  # cpu_llvm when installed, else interp
    assert head == f"relu(x: f32[n]) -> y: f32[n]  [backend {default}, n = 5, seed 7]"
    x = cli.random_input(np.random.default_rng(7), DType.F32, (5,))
    expected = np.maximum(x, 0)
    with np.printoptions(**cli.PRINT_OPTIONS):
        assert body == f"y = {np.array_repr(expected)}\n"
    assert run_cli("run", "kernels/relu.toml", "--bind", "n=5", "--seed", "7")[1] == out


def test_run_unbound_symbols_default_and_long_outputs_are_truncated(run_cli):
    code, out, _ = run_cli("run", "kernels/relu.toml", "--bind", "n=1000")
    assert code == 0 and "..." in out and len(out) < 1000
    code, out, _ = run_cli("run", "kernels/relu.toml")
    assert code == 0 and f"n = {cli.DEFAULT_SIZE}" in out


def test_run_with_npy_inputs_scalars_and_save_dir(run_cli, two, tmp_path):
    x = np.arange(4, dtype=np.float64)
    np.save(tmp_path / "x.npy", x)
    save = tmp_path / "outputs"
    code, out, err = run_cli("run", two, "--kernel", "scale", "--input", f"x={tmp_path / 'x.npy'}",
                         "--input", "a=2.5", "--save-dir", str(save))
    assert code == 0, err
    assert "y = " not in out and f"saved y to {save / 'y.npy'}" in out
    np.testing.assert_array_equal(np.load(save / "y.npy"), 2.5 * x)
    code, out, _ = run_cli("run", two, "--kernel", "scale", "--input", f"x={tmp_path / 'x.npy'}",
                       "--input", "a=2", "--save-dir", str(save), "--print")
    assert code == 0 and "y = array([0., 2., 4., 6.])" in out


def test_run_symbols_come_from_given_inputs(run_cli, two, tmp_path):
    np.save(tmp_path / "x.npy", np.ones(3, np.float32))
    code, out, err = run_cli("run", two, "--kernel", "vadd", "--input", f"x={tmp_path / 'x.npy'}")
    assert code == 0, err
    assert "n = 3" in out
    code, _, err = run_cli("run", two, "--kernel", "vadd", "--input", f"x={tmp_path / 'x.npy'}",
                       "--bind", "n=4")
    assert code == 1
    assert err == ("hologram: error: vadd(): shape mismatch for symbol 'n': n = 4 from --bind, but argument 'x' "
                   "dim 0 (n) has size 3, which needs n = 3\n")


def test_run_dtype_errors_and_cast(run_cli, two, tmp_path):
    np.save(tmp_path / "x.npy", np.ones(3))  # float64 for an f32 input
    code, _, err = run_cli("run", two, "--kernel", "vadd", "--input", f"x={tmp_path / 'x.npy'}")
    assert code == 1
    assert err == ("hologram: error: vadd(): argument 'x' must have dtype f32 (float32), got float64\n"
                   "  hint: pass --cast to convert it (one explicit copy)\n")  # the CLI's flag, not cast=True
    code, out, _ = run_cli("run", two, "--kernel", "vadd", "--input", f"x={tmp_path / 'x.npy'}", "--cast")
    assert code == 0 and "n = 3" in out


def test_run_scalar_cast_hint_names_the_flag(run_cli, tmp_path):
    path = tmp_path / "shift.toml"
    path.write_text('[kernel]\nname = "shift"\nversion = "1.0.0"\ninputs = { k = "i32", x = "i32[n]" }\n'
                    'outputs = { y = "i32[n]" }\nbody = "y = x + k"\n')
    code, _, err = run_cli("run", str(path), "--input", "k=2.5")
    assert code == 1 and "hint: pass --cast to truncate it toward zero" in err and "cast=True" not in err
    code, out, _ = run_cli("run", str(path), "--input", "k=2.5", "--cast", "--bind", "n=2")
    assert code == 0 and "y = array(" in out


def test_run_refuses_sizes_beyond_memory_naming_them(run_cli):
    code, _, err = run_cli("run", "kernels/vadd.toml", "--bind", "n=99999999999")
    assert code == 1 and "internal error" not in err
    assert err.startswith("hologram: error: vadd: at n = 99999999999 (--bind) the generated inputs and the outputs "
                          "take 1.2 TB (1199999999988 bytes; x: f32[n] alone 400 GB), more than this machine's ")
    assert err.endswith("of memory\n  hint: choose smaller sizes with --bind\n")
    code, _, err = run_cli("run", "kernels/vadd.toml", "--bind", f"n={2**80}")  # past numpy's largest array
    assert code == 1 and "internal error" not in err and f"n = {2**80} (--bind)" in err


def test_check_memory_counts_generated_inputs_and_outputs_only():
    kernel = hologram.compile_file("kernels/axpy.toml")  # alpha: f32, x, y: f32[n] -> z: f32[n]
    sig = kernel.signature
    x = next(p for p in sig.inputs if p.name == "x")
    cli.check_memory(kernel, [x], {"n": 1000}, set(), memory=8000)  # x and z: 8000 bytes, which fit
    with pytest.raises(hologram.errors.ArgumentError, match=r"at n = 1001 the generated inputs and the outputs "
                       r"take 8.01 kB \(8008 bytes; x: f32\[n\] alone 4 kB\), more than this machine's 8 kB"):
        cli.check_memory(kernel, [x], {"n": 1001}, set(), memory=8000)


@pytest.mark.parametrize("argv, status, error", [
    (["run", "{two}"], 2, "{two} holds 2 kernels (vadd, scale); choose one with --kernel"),
    (["run", "{two}", "--kernel", "vad"], 1, "no kernel named 'vad'; did you mean 'vadd'?\n"
                                             "  hint: kernels here: vadd, scale"),
    (["run", "{two}", "--kernel", "vadd", "--input", "w=x.npy"], 2,
     "--input w: kernel 'vadd' has no input 'w' (inputs: x, y)"),
    (["run", "{two}", "--kernel", "vadd", "--bind", "m=3"], 2,
     "--bind m: kernel 'vadd' has no shape symbol 'm' (symbols: n)"),
    (["run", "{two}", "--kernel", "vadd", "--input", "x=3"], 2, "--input x: array input f32[n] needs a .npy file, got '3'"),
    (["run", "{two}", "--kernel", "scale", "--input", "a=two"], 2, "--input a: expected a number for f64, got 'two'"),
    (["run", "nowhere.toml"], 1, "cannot read nowhere.toml: No such file or directory"),
    (["run", "kernels/relu.toml", "--backend", "intrep"], 1,
     "unknown backend 'intrep'; did you mean 'interp'?\n  hint: available backends: "),
])
def test_run_errors(run_cli, two, argv, status, error):
    code, _, err = run_cli(*(a.format(two=two) for a in argv))
    assert code == status
    assert err.startswith("hologram: error: " + error.format(two=two))
    assert "Traceback" not in err


@pytest.mark.parametrize("argv", [["run", "k.toml", "--bind", "n=x"], ["run", "k.toml", "--bind", "n=-1"],
                                  ["run", "k.toml", "--seed", "-1"], ["run", "k.toml", "--seed", "1.5"],
                                  ["run", "k.toml", "--input", "x"], ["frobnicate"], []])
def test_usage_errors_exit_2(run_cli, argv):
    code, _, err = run_cli(*argv)
    assert code == 2 and "usage: hologram" in err


def test_a_negative_seed_is_a_usage_error_naming_the_option(run_cli):
    code, _, err = run_cli("run", "kernels/vadd.toml", "--seed", "-1")
    assert code == 2 and "argument --seed: expected a seed (an integer >= 0), got '-1'" in err


# ------------------------------------------------------------------------------ compile
WINDOW = """[kernel]
name = "window"
version = "1.0.0"
inputs  = { x = "f32[n]", k = "f32[w]" }
outputs = { y = "f32[n - w + 1]" }
body = "y[i] = sum(x[i + j] * k[j], j)"
"""


def test_emit_stats_compares_at_sizes_where_no_dimension_is_degenerate(run_cli, tmp_path):
    path = tmp_path / "window.toml"
    path.write_text(WINDOW)
    code, out, err = run_cli("compile", str(path), "--emit", "stats")
    assert code == 0, err
    assert "change at n=1024, w=512" in out  # n = w = 1024 would make y one element long
    written = re.search(r"bytes written .*│\s+(\d+) -> (\d+)", out)
    assert written and int(written.group(1)) == 4 * (1024 - 512 + 1)
    code, out, _ = run_cli("compile", "kernels/softmax.toml", "--emit", "stats")
    assert code == 0 and "change at n=1024" in out  # nothing degenerate: every symbol 1024


def test_example_sizes_keep_every_dimension_large():
    from hologram.passes.stats_table import NONDEGENERATE, example_sizes

    assert example_sizes(hologram.compile(WINDOW).program) == {"n": 1024, "w": 512}
    assert example_sizes(hologram.compile_file("kernels/gemm.toml").program) == {"k": 1024, "m": 1024, "n": 1024}
    flipped = hologram.compile(WINDOW.replace("n - w + 1", "w - n + 1").replace("x[i + j] * k[j]", "k[i + j] * x[j]"))
    assert example_sizes(flipped.program) == {"n": 1024, "w": 2048}  # as near 1024 as {"n": 512, "w": 1024}
    deep = hologram.compile(WINDOW.replace("n - w + 1", "n - 4*w - 1"))  # needs n > 4*w + 1
    sizes = example_sizes(deep.program)
    assert sizes["n"] - 4 * sizes["w"] - 1 >= NONDEGENERATE and sizes["w"] >= NONDEGENERATE, sizes


def test_compile_emits_each_stage(run_cli, tmp_path, two):
    k = hologram.compile_file("kernels/softmax.toml")
    for kind in ("ast", "ir", "asm"):
        code, out, err = run_cli("compile", "kernels/softmax.toml", "--emit", kind)
        assert code == 0, err
        assert out == k.emit(kind).rstrip("\n") + "\n"
    dest = tmp_path / "out.hasm"
    assert run_cli("compile", "kernels/softmax.toml", "-o", str(dest)) == (0, "", "")
    assert dest.read_text() == k.emit("asm").rstrip("\n") + "\n"
    code, out, _ = run_cli("compile", two, "--emit", "ir")
    assert code == 0 and "kernel vadd" in out and "kernel scale" in out
    code, out, _ = run_cli("compile", two, "--emit", "ir", "--kernel", "scale")
    assert code == 0 and "kernel vadd" not in out and "kernel scale" in out
    code, _, err = run_cli("compile", two, "-o", str(tmp_path / "no" / "such" / "dir.hasm"))
    assert code == 1 and err.startswith("hologram: error: ") and "No such file or directory" in err


def test_compile_emits_backend_text_forms(run_cli):
    pytest.importorskip("llvmlite")
    k = hologram.compile_file("kernels/axpy.toml")
    code, out, err = run_cli("compile", "kernels/axpy.toml", "--emit", "llvm", "--backend", "cpu_llvm")
    assert code == 0, err
    assert out == k.on("cpu_llvm").emit("llvm").rstrip("\n") + "\n" and "define void" in out
    code, out, err = run_cli("compile", "kernels/axpy.toml", "--emit", "llvm-opt", "--backend", "cpu_llvm")
    assert code == 0 and "x float>" in out, err
    code, _, err = run_cli("compile", "kernels/axpy.toml", "--emit", "llvn", "--backend", "cpu_llvm")
    assert code == 2 and err == ("hologram: error: --emit: no text form 'llvn' (did you mean 'llvm'?): the text "
                                 "forms are ast, ir, asm and stats, and backend 'cpu_llvm' adds llvm, llvm-opt and "
                                 "native\n  hint: another backend may offer more forms: see `hologram plugins`\n")
    code, _, err = run_cli("compile", "kernels/axpy.toml", "--emit", "llvm", "--backend", "interp")
    assert code == 2 and "--emit: no text form 'llvm': the text forms are ast, ir, asm and stats (backend " \
                         "'interp' adds none)" in err
    code, _, err = run_cli("compile", "kernels/axpy.toml", "--emit", "llvm", "--backend", "intrep")
    assert code == 2 and "unknown backend 'intrep'" in err


def test_kernel_emit_asks_its_backend_for_other_forms():
    from hologram.core.errors import ArgumentError
    from hologram.call.kernel import backend_forms
    k = hologram.compile_file("kernels/axpy.toml")
    with pytest.raises(ArgumentError, match=r"cannot emit 'llvm': the text forms are ast, ir and asm \(backend "
                                            r"'interp' adds none\)"):
        k.on("interp").emit("llvm")
    if "cpu_llvm" in hologram.list_backends():  # one sentence: the suggestion, the core forms, the backend's
        with pytest.raises(ArgumentError) as e:
            k.on("cpu_llvm").emit("assm")
        assert e.value.message == ("cannot emit 'assm' (did you mean 'asm'?): the text forms are ast, ir and asm, "
                                   "and backend 'cpu_llvm' adds llvm, llvm-opt and native")
        assert e.value.hint is None

    class Forms(Backend):
        name, priority = "forms", 1
        text_forms = {"asm": "shadowed by the core form", "dot": "a graph", "stats": "shadowed too"}
        available = allocate = prepare = launch = None  # never called here

        def emit(self, program, form):
            return f"digraph {program.name} {{}}"
    assert backend_forms(Forms()) == {"dot": "a graph"}
    del Forms.text_forms  # the base class's default: no forms
    assert backend_forms(Forms()) == {}


def test_compile_prints_a_compile_warning_once_with_its_location(run_cli, tmp_path):
    path = tmp_path / "past.toml"
    path.write_text('[kernel]\nname = "past"\nversion = "1.0.0"\ninputs = { x = "f32[n]" }\n'
                    'outputs = { y = "f32[n]" }\nbody = "y[i] = x[i + n]"\n')
    code, out, err = run_cli("compile", str(path), "--emit", "ir")
    assert code == 0 and out.startswith("kernel past")
    first = err.splitlines()[0]
    assert first.startswith(f"{path}:6:18: warning: 'x' is indexed past its end") and first.count("warning") == 1, err
    assert "   6 | body" in err and "hint: declare y: f32[0]" in err


def test_compile_of_a_python_file_without_kernels_gives_the_python_hint(run_cli, tmp_path):
    pytest.importorskip("hologram_python")
    path = tmp_path / "helpers.py"
    path.write_text("import numpy as np\n\n\ndef double(x):\n    return 2 * x\n")
    code, _, err = run_cli("compile", str(path))
    assert code == 1 and err == (f"hologram: error: {path}: no kernels in this document\n"
                                 "  hint: decorate a function with @hologram.kernel (docs/python-kernels.md)\n")


def test_compile_names_the_optimization_levels(run_cli):
    code, _, err = run_cli("compile", "kernels/axpy.toml", "--opt", "O3")
    assert code == 2 and err.endswith("argument --opt: unknown optimization level 'O3': the levels are O0, O1 "
                                      "and O2\n"), err
    code, _, err = run_cli("compile", "kernels/axpy.toml", "--opt", "O22")
    assert code == 2 and "unknown optimization level 'O22' (did you mean 'O2'?): the levels are O0, O1 and O2" in err


def test_compile_reports_document_errors_with_location(run_cli, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[kernel]\nname = "bad"\nversion = "1.0.0"\ninputs = { x = "f32[n]" }\n'
                   'outputs = { y = "f32[n]" }\nbody = "y = expp(x)"\n')
    code, out, err = run_cli("compile", str(bad))
    assert code == 1 and out == ""
    assert err.startswith(f"{bad}:6:13: error: ") and "expp" in err and "Traceback" not in err


# ------------------------------------------------------------------------------ plugins
def test_plugins_lists_plugins_and_backends(run_cli):
    code, out, err = run_cli("plugins")
    assert code == 0, err
    lines = out.splitlines()
    builtin = next(l for l in lines if "builtin_translators" in l)
    assert f"hologram-kernels {hologram.__version__}" in builtin and "translator toml" in builtin and "ok" in builtin
    assert any("interp" in l and "backend interp" in l for l in lines)
    backends = lines[next(i for i, l in enumerate(lines) if l.startswith("backends")):]
    default = hologram.get_backend().name
    assert any(l.split() == ["│", "interp", "│", "10", "│", "yes", "│", *(["*"] if default == "interp" else []), "│",
                             "-", "│"] for l in backends)
    if "cpu_llvm" in hologram.list_backends():
        assert any(l.split()[:2] == ["│", "cpu_llvm"] and "llvm, llvm-opt, native" in l for l in backends)


def test_plugins_at_80_columns_never_breaks_a_distribution_name(run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli("plugins")
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 80
    for row in plugins.plugin_report():
        if row.distribution:
            assert row.distribution in out, f"{row.distribution} is broken across lines:\n{out}"
    assert "status" in out.splitlines()[2]  # the last column is not cut off


def test_plugins_says_what_runs_kernels_and_how_to_add_a_missing_backend(run_cli, monkeypatch):
    code, out, _ = run_cli("plugins")
    default = hologram.get_backend().name
    assert code == 0 and f"kernels run on {default} unless --backend or HOLOGRAM_BACKEND names another backend" in out
    monkeypatch.setenv("HOLOGRAM_PLUGINS", "-interp")
    plugins.reset()
    code, out, _ = run_cli("plugins")
    assert code == 0 and "interp (Reference interpreter backend for Hologram: executes Atlas ISA programs lane by " \
                         "lane) is installed but left out by HOLOGRAM_PLUGINS" in " ".join(out.split())


def test_plugins_says_why_a_backend_is_not_available(run_cli, monkeypatch):
    from hologram.backend import Backend

    class Driverless(Backend):
        name, priority = "gpu", 5

        def available(self):
            return False

        def unavailable_reason(self):
            return "no CUDA driver: libcuda.so not found"

        allocate = prepare = launch = None

    pm = plugins.plugin_manager()
    pm.register(type("P", (), {"hologram_register_backends": staticmethod(
        hologram.hookimpl(lambda register: register(Driverless())))}), name="driverless")
    code, out, _ = run_cli("plugins")
    assert code == 0 and "gpu is not available here: no CUDA driver: libcuda.so not found" in " ".join(out.split())


def test_backend_notes_name_the_distribution_to_install(monkeypatch):
    interp = plugins.PluginInfo("interp", "hologram-backend-interp", "0.1.0", ("backend interp",), "ok")
    notes = cli.backend_notes([interp], {"interp": object()}, "interp")
    assert notes[0] == "kernels run on interp unless --backend or HOLOGRAM_BACKEND names another backend"
    assert notes[1] == "cpu_llvm is not installed: pip install hologram-backend-cpu-llvm"
    assert len(notes) == 2
    notes = cli.backend_notes([], {}, None)
    assert notes[0] == "no backend is installed: kernels compile but cannot run"
    assert set(notes[1:]) == {"interp is not installed: pip install hologram-backend-interp",
                              "cpu_llvm is not installed: pip install hologram-backend-cpu-llvm"}
    broken = plugins.PluginInfo("cpu_llvm", "hologram-backend-cpu-llvm", "0.1.0", (), "failed", "ImportError: x")
    assert "failed to load (its row above says why); reinstall: pip install --force-reinstall " \
           "hologram-backend-cpu-llvm" in cli.backend_notes([broken, interp], {"interp": object()}, "interp")[1]
    elsewhere = cli.first_party_backends({"sys_platform": "plan9"})  # no native backend in the plain install
    monkeypatch.setattr(cli, "first_party_backends", lambda: elsewhere)
    assert cli.backend_notes([interp], {"interp": object()}, "interp")[1].startswith(
        "cpu_llvm is not installed: the plain install brings hologram-backend-cpu-llvm only where "
        "platform_python_implementation == \"CPython\"")


def test_the_first_party_backends_come_from_the_distributions_metadata():
    """Read from hologram-kernels' dependencies, not listed: a backend made a dependency is
    known to `hologram plugins` without an edit of the command."""
    names = {name: dist for name, dist, _ in cli.first_party_backends()}
    assert names == {"interp": "hologram-backend-interp", "cpu_llvm": "hologram-backend-cpu-llvm"}
    assert not hasattr(cli, "FIRST_PARTY_BACKENDS")


class CommandPlugin:
    @staticmethod
    @hologram.hookimpl
    def hologram_register_commands(cli):
        p = cli.add_parser("hello", help="say hello")
        p.add_argument("--to", default="world")
        p.set_defaults(func=lambda args: print(f"hello {args.to}") or 3)


class BrokenCommandPlugin:
    @staticmethod
    @hologram.hookimpl
    def hologram_register_commands(cli):
        raise RuntimeError("no commands today")


def test_plugin_commands_and_a_failing_one(run_cli):
    pm = plugins.plugin_manager()
    pm.register(CommandPlugin, name="hello_plugin")
    pm.register(BrokenCommandPlugin, name="broken_commands")
    code, out, err = run_cli("hello", "--to", "atlas")
    assert (code, out) == (3, "hello atlas\n")
    assert err == ("hologram: warning: plugin 'broken_commands' failed to add its commands: "
                   "RuntimeError: no commands today\n")
    code, out, _ = run_cli("plugins")
    assert code == 0 and any("hello_plugin" in l and "commands hello" in l for l in out.splitlines())


def test_failed_plugins_are_warned_about_and_listed(run_cli, monkeypatch):
    monkeypatch.setenv("HOLOGRAM_PLUGINS", "interp,ghost")
    code, out, err = run_cli("plugins")
    assert code == 0
    assert err == "hologram: warning: plugin 'ghost' named in HOLOGRAM_PLUGINS but not installed\n"
    ghost = next(l for l in out.splitlines() if "ghost" in l)
    assert "missing" in ghost and "not installed" in ghost


# ------------------------------------------------------------------------------- errors
def test_internal_errors_have_no_traceback_unless_debugging(run_cli, monkeypatch):
    def boom(args):
        raise RuntimeError("kaput")

    monkeypatch.setattr(cli, "cmd_plugins", boom)
    monkeypatch.setattr(cli, "BUILTIN_COMMANDS", cli.BUILTIN_COMMANDS[:2] + (
        lambda sub: sub.add_parser("plugins").set_defaults(func=boom),))
    code, _, err = run_cli("plugins")
    assert code == 1
    assert err == ("hologram: internal error: RuntimeError: kaput\n"
                   "  hint: set HOLOGRAM_DEBUG=1 for the traceback, and please report it\n")
    monkeypatch.setenv("HOLOGRAM_DEBUG", "1")
    code, _, err = run_cli("plugins")
    assert code == 1 and err.startswith("Traceback") and "RuntimeError: kaput" in err


def test_subprocess_entry_point(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOLOGRAM_")}
    ok = subprocess.run([sys.executable, "-m", "hologram", "run", "kernels/vadd.toml", "--bind", "n=3"],
                        capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("vadd(") and "z = array([" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "hologram", "compile", str(tmp_path / "none.toml")],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr == f"hologram: error: cannot read {tmp_path / 'none.toml'}: No such file or directory\n"
    version = subprocess.run([sys.executable, "-m", "hologram", "--version"], capture_output=True, text=True, env=env)
    assert version.stdout == f"hologram {hologram.__version__}\n"


def test_bench_names_its_targets_as_a_user_can_find_them(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOLOGRAM_")}
    env["COLUMNS"] = "120"
    done = subprocess.run([sys.executable, "-m", "hologram", "bench", "--quick", "--only", "axpy", "--repeat", "1",
                           "--results-dir", str(tmp_path)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "performance targets (see benchmarks/README.md)" in done.stdout
    assert "issue" not in done.stdout.lower()  # no reference to a tracker a user cannot see
