"""The pass manager: registration checks, ordering, pipelines, caching, stop_after, the
errors that name a pass, HOLOGRAM_OPT, and the CLI options (--opt, --passes, --after)."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

import hologram
from hologram.compiler import driver
from hologram.core.errors import CompileError, PluginError, VerifyError
from hologram.core.lru import LRUCache
from hologram.dsl.analyze import to_ir
from hologram.lower.stages import lower
from hologram.passes import Pass, manager
from hologram.passes.manager import Pipeline
from hologram.registry import pipelines
from hologram.registry import plugins

from repo_paths import DOCS

VADD = '''
[kernel]
name = "vadd"
version = "1.0.0"
inputs  = { x = "f32[n]", y = "f32[n]" }
outputs = { z = "f32[n]" }
body = "z = x + y"
'''


@pytest.fixture(autouse=True)
def fresh(fresh_plugins, monkeypatch):
    for var in ("HOLOGRAM_DEBUG", "HOLOGRAM_OPT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("COLUMNS", "200")  # rich wraps tables to the terminal width
    hologram.clear_cache()
    yield
    hologram.clear_cache()


def use(*passes: object, name: str = "testpasses") -> None:
    """Register `passes` from an in-process plugin called `name`."""
    def hook(register):
        for p in passes:
            register(p)
    plugin = type(name, (), {"hologram_register_passes": staticmethod(hologram.hookimpl(hook))})
    plugins.plugin_manager().register(plugin, name=name)


def ident(kir):
    return kir


def ir_pass(name: str, **kw) -> Pass:
    return Pass(name, "ir", ident, **kw)


def isa_pass(name: str, **kw) -> Pass:
    return Pass(name, "isa", ident, **kw)


def names(passes) -> list[str]:
    return [p.name for p in passes]


# Passes with a visible, harmless effect, for the pipeline and CLI tests.
def tag_version(kir):
    return attrs.evolve(kir, version=kir.version + "+tagged")


def half_blocks(program):
    stages = tuple(attrs.evolve(s, block=tuple(max(1, b // 2) for b in s.block)) for s in program.stages)
    return attrs.evolve(program, stages=stages)


def drop_first_instruction(program):
    """Breaks every program: the first instruction defines a register the rest reads."""
    return attrs.evolve(program, stages=tuple(attrs.evolve(s, body=s.body[1:]) for s in program.stages))


TAG = Pass("t_tag", "ir", tag_version, pipelines=("O1",), summary="appends +tagged to the version")
HALF = Pass("t_half", "isa", half_blocks, pipelines=("O1",), summary="halves every block")


# ------------------------------------------------------------------------------ ordering
def test_order_is_stable_topological_with_ir_first():
    a, b = ir_pass("a"), ir_pass("b")
    c = ir_pass("c", before=("a",))
    d = ir_pass("d", after=("b",), before=("nowhere",))  # a constraint on an absent pass is ignored
    x = isa_pass("x")
    y = isa_pass("y", before=("x",))
    assert names(manager.order([x, a, b, c, d, y])) == ["c", "a", "b", "d", "y", "x"]
    assert names(manager.order([a, b, c])) == ["c", "a", "b"]  # c pulled forward; b keeps its place
    assert names(manager.order([a, b, d])) == ["a", "b", "d"]
    # across levels, a constraint that agrees with "IR first" is fine
    assert names(manager.order([isa_pass("s", after=("a",)), a])) == ["a", "s"]


def test_cycle_is_an_error_naming_the_passes():
    a = ir_pass("a", after=("c",))
    b = ir_pass("b", after=("a",))
    c = ir_pass("c", after=("b",))
    free = ir_pass("free")
    with pytest.raises(PluginError, match=r"form a cycle: a -> b -> c -> a"):
        manager.order([free, a, b, c])
    use(free, a, b, c)
    with pytest.raises(PluginError, match="cycle"):
        pipelines.resolve("O2")
    assert names(pipelines.resolve(passes=["free", "a", "b"]).ir) == ["free", "a", "b"]  # c absent: no cycle


def test_cross_level_contradiction_is_an_error():
    with pytest.raises(PluginError, match="isa pass 's' asks to run before ir pass 'a'"):
        manager.order([ir_pass("a"), isa_pass("s", before=("a",))])


# ----------------------------------------------------------------------------- pipelines
def test_named_and_custom_pipelines():
    only1 = ir_pass("t_only1", pipelines=("O1",))
    both = isa_pass("t_both", before=("t_late",))
    late = isa_pass("t_late")
    manual = ir_pass("t_manual", pipelines=())
    use(late, only1, both, manual)
    assert pipelines.resolve("O0") == Pipeline("O0")
    o1, o2 = pipelines.resolve("O1"), pipelines.resolve("o2")
    assert o1.name == "O1" and {"t_only1", "t_both", "t_late"} <= set(o1.names) and "t_manual" not in o1.names
    assert "t_only1" not in o2.names and o2.names.index("t_both") < o2.names.index("t_late")
    custom = pipelines.resolve("O0", passes="t_late, t_manual,t_both")  # passes= wins over opt=
    assert custom.name == "custom" and custom.names == ("t_manual", "t_both", "t_late")
    assert names(custom.ir) == ["t_manual"] and names(custom.isa) == ["t_both", "t_late"]
    assert pipelines.resolve(passes=[]).names == ()
    assert pipelines.resolve("O1") is o1  # built once per registry


def test_unknown_pass_name_suggests_the_closest():
    use(ir_pass("t_fold"))
    with pytest.raises(PluginError, match=r"unknown pass 't_fodl'; did you mean 't_fold'\?") as exc:
        pipelines.resolve(passes=["t_fodl"])
    assert "t_fold" in exc.value.hint
    with pytest.raises(PluginError, match="unknown optimization level 'O3'"):
        pipelines.resolve("O3")


# -------------------------------------------------------------------------- registration
def _row(name: str) -> plugins.PluginInfo:
    return next(r for r in plugins.plugin_report() if r.name == name)


def test_bad_registrations_are_plugin_failures_not_crashes():
    bent = ir_pass("t_bent")
    object.__setattr__(bent, "level", "llvm")  # altered behind attrs' validators
    use(ir_pass("t_good"), name="good")
    use(lambda kir: kir, name="not_a_pass")
    use(ir_pass("t_good"), name="dup")
    use(bent, name="bent")
    with pytest.warns(plugins.PluginWarning):
        found = pipelines.registered()
    assert names(found).count("t_good") == 1 and "t_bent" not in names(found)
    assert _row("good").status == "ok" and _row("good").registered == ("pass t_good (ir; O1, O2)",)
    assert _row("not_a_pass").status == "failed" and "expected hologram.passes.Pass" in _row("not_a_pass").error
    assert _row("dup").status == "failed" and "pass 't_good' is already registered by plugin 'good'" in _row("dup").error
    assert _row("bent").status == "failed" and "level 'llvm'" in _row("bent").error
    assert "t_good" in pipelines.resolve("O2").names


def test_builtin_passes_load_unless_excluded(monkeypatch):
    monkeypatch.setenv("HOLOGRAM_PLUGINS", "interp")
    assert _row("builtin_passes").status == "ok"
    plugins.reset()
    monkeypatch.setenv("HOLOGRAM_PLUGINS", "interp,-builtin_passes")
    assert _row("builtin_passes").status == "disabled"


# ------------------------------------------------------------------------------- running
def counting(level: str, name: str, calls: list):
    def run(value):
        calls.append(name)
        return value
    return Pass(name, level, run, pipelines=())


def test_pipeline_result_is_cached_by_content():
    calls: list[str] = []
    use(counting("ir", "t_count_ir", calls), counting("isa", "t_count_isa", calls))
    pipe = pipelines.resolve(passes=["t_count_ir", "t_count_isa"])
    kdef = hologram.compile(VADD, passes=pipe.names).kdef
    assert calls == ["t_count_ir", "t_count_isa"]
    kir1, kir2 = to_ir(kdef), to_ir(kdef)
    assert kir1 is not kir2 and kir1 == kir2
    assert pipe.run_ir(kir1) == pipe.run_ir(kir2) == kir1
    prog = pipe.run_isa(lower(kir1))
    assert pipe.run_isa(lower(kir2)) == prog
    # the same document read again: equal inputs, so no pass runs again... (another file's
    # document is another IR: its statements carry their locations, for messages)
    hologram.compile(VADD, passes=pipe.names)
    assert calls == ["t_count_ir", "t_count_isa"]
    manager.clear_cache()
    pipe.run_ir(kir1)
    assert calls == ["t_count_ir", "t_count_isa", "t_count_ir"]  # ...until the cache is cleared


def test_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(manager, "_CACHE", LRUCache(2))
    calls: list[str] = []
    use(counting("ir", "t_count", calls))
    pipe = pipelines.resolve(passes=["t_count"])
    kirs = [to_ir(hologram.compile(VADD.replace("vadd", f"k{i}")).kdef) for i in range(3)]
    calls.clear()
    for kir in kirs:
        pipe.run_ir(kir)
    assert len(manager._CACHE) == 2
    pipe.run_ir(kirs[2])
    pipe.run_ir(kirs[0])  # the least recently used one was forgotten
    assert calls == ["t_count"] * 4


def test_stop_after():
    calls: list[str] = []
    p1, p2 = counting("ir", "t_one", calls), counting("ir", "t_two", calls)
    s1 = counting("isa", "t_three", calls)
    use(p1, p2, s1)
    pipe = pipelines.resolve(passes=["t_one", "t_two", "t_three"])
    kir = to_ir(hologram.compile(VADD, opt="O0").kdef)
    pipe.run_ir(kir, stop_after="t_one")
    assert calls == ["t_one"]
    calls.clear()
    pipe.run_ir(kir, stop_after="t_three")  # an ISA pass: every IR pass runs
    assert calls == ["t_one", "t_two"]
    calls.clear()
    pipe.run_isa(lower(kir), stop_after="t_two")  # an IR pass: no ISA pass runs
    assert calls == []
    with pytest.raises(PluginError, match="pass 't_thre' is not in pipeline custom; did you mean 't_three'"):
        pipe.run_ir(kir, stop_after="t_thre")


def test_a_failing_pass_is_named_with_the_kernel():
    def boom(kir):
        raise ZeroDivisionError("oops")

    use(Pass("t_boom", "ir", boom, pipelines=()), Pass("t_wrong", "isa", lambda p: "asm", pipelines=()),
        Pass("t_rename", "ir", lambda kir: attrs.evolve(kir, name="other"), pipelines=()))
    with pytest.raises(CompileError, match="ir pass 't_boom' failed on kernel 'vadd': ZeroDivisionError: oops"):
        hologram.compile(VADD, passes=["t_boom"])
    with pytest.raises(CompileError, match="isa pass 't_wrong' returned str for kernel 'vadd'; expected Program"):
        hologram.compile(VADD, passes=["t_wrong"])
    with pytest.raises(CompileError, match="ir pass 't_rename' changed the interface of kernel 'vadd'"):
        hologram.compile(VADD, passes=["t_rename"])


def test_the_pass_that_breaks_verification_is_named():
    use(Pass("t_half", "isa", half_blocks, pipelines=()),
        Pass("t_breaker", "isa", drop_first_instruction, after=("t_half",), pipelines=()),
        Pass("t_after", "isa", half_blocks, after=("t_breaker",), pipelines=()))
    with pytest.raises(VerifyError, match="isa pass 't_breaker' broke kernel 'vadd'") as exc:
        hologram.compile(VADD, passes=["t_after", "t_half", "t_breaker"])
    assert exc.value.rule is not None and exc.value.stage == "z"
    assert hologram.compile(VADD, passes=["t_half", "t_after"]).program.stages[0].block == (64,)


# ------------------------------------------------------------------- runtime integration
def test_opt_and_env_choose_the_pipeline(monkeypatch):
    use(TAG, HALF)
    block = lambda k: k.program.stages[0].block  # noqa: E731
    assert block(hologram.compile(VADD)) == (256,)  # O2: neither (both are O1 only)
    o1 = hologram.compile(VADD, opt="O1")
    assert block(o1) == (128,) and o1.ir.version == "1.0.0+tagged" and o1.version == "1.0.0+tagged"
    monkeypatch.setenv("HOLOGRAM_OPT", " o1 ")
    assert block(hologram.compile(VADD)) == (128,)
    assert block(hologram.compile(VADD, opt="O0")) == (256,)  # the argument wins over the environment
    monkeypatch.setenv("HOLOGRAM_OPT", "fast")
    with pytest.raises(PluginError, match="HOLOGRAM_OPT: unknown optimization level 'fast'"):
        hologram.compile(VADD)
    monkeypatch.setenv("HOLOGRAM_OPT", "")
    assert block(hologram.compile(VADD)) == (256,)


def test_compile_kdef_records_its_pipeline_and_results_agree():
    use(TAG, HALF)
    kdef = hologram.compile(VADD, opt="O0").kdef
    o1 = pipelines.resolve("O1")
    c = driver.compile_kdef(kdef, o1)
    assert c.pipeline is o1 and c.kir == tag_version(c.source_ir) and c.signature.name == "vadd"
    assert driver.compile_kdef(kdef, o1).program is c.program  # cached by (IR, pipeline)
    x, y = np.arange(300, dtype=np.float32), np.ones(300, np.float32)
    for backend in hologram.list_backends():
        np.testing.assert_array_equal(hologram.compile(VADD, opt="O1", backend=backend)(x, y), x + y)


# ----------------------------------------------------------------------------------- CLI
@pytest.fixture
def vadd_file(tmp_path):
    path = tmp_path / "vadd.toml"
    path.write_text(VADD)
    return str(path)


def test_cli_opt_and_passes(run_cli, vadd_file):
    use(TAG, HALF)
    assert "block [128]" in run_cli("compile", vadd_file, "--opt", "O1")[1]
    assert "block [256]" in run_cli("compile", vadd_file, "--opt", "O0")[1]
    assert "block [128]" in run_cli("compile", vadd_file, "--passes", "t_half")[1]
    code, out, err = run_cli("compile", vadd_file, "--emit", "ir", "--passes", "t_tag,t_half")
    assert code == 0 and "kernel vadd 1.0.0+tagged" in out
    code, _, err = run_cli("compile", vadd_file, "--opt", "O3")
    assert code == 2 and "argument --opt: unknown optimization level 'O3'" in err
    code, _, err = run_cli("compile", vadd_file, "--passes", "t_hlaf")
    assert code == 2 and "unknown pass 't_hlaf'; did you mean 't_half'?" in err
    code, out, err = run_cli("run", vadd_file, "--bind", "n=3", "--opt", "O1", "--backend", "interp")
    assert code == 0 and "z = array([" in out, err


def test_cli_after(run_cli, vadd_file):
    use(TAG, HALF)
    code, out, err = run_cli("compile", vadd_file, "--opt", "O1", "--emit", "ir", "--after", "t_tag")
    assert code == 0 and "kernel vadd 1.0.0+tagged" in out, err
    code, out, _ = run_cli("compile", vadd_file, "--opt", "O1", "--emit", "asm", "--after", "t_tag")
    assert code == 0 and "block [256]" in out  # lowered, before any ISA pass
    code, out, _ = run_cli("compile", vadd_file, "--opt", "O1", "--emit", "asm", "--after", "t_half")
    assert code == 0 and "block [128]" in out
    code, _, err = run_cli("compile", vadd_file, "--emit", "ir", "--after", "t_tag")  # O2 lacks it
    assert code == 2 and "--after: pass 't_tag' is not in pipeline O2" in err
    code, _, err = run_cli("compile", vadd_file, "--opt", "O1", "--emit", "ast", "--after", "t_tag")
    assert code == 2 and "use it with --emit ir or --emit asm" in err


def test_cli_emit_stats(run_cli, vadd_file):
    use(TAG, HALF)
    code, out, err = run_cli("compile", vadd_file, "--emit", "stats")
    assert code == 0, err
    assert out.startswith("vadd(x: f32[n], y: f32[n]) -> z: f32[n]") and "O0 -> O2" in out
    stages = next(line for line in out.splitlines() if "stages" in line)
    assert [c.strip() for c in stages.split("│")[2:6]] == ["1", "1", "1", "1 -> 1 (no change)"]
    code, out, err = run_cli("compile", vadd_file, "--emit", "stats", "--passes", "t_half")
    assert code == 0 and "O0 -> custom" in out, err


def test_cli_plugins_lists_passes(run_cli):
    use(TAG, HALF, ir_pass("t_manual", pipelines=(), before=("t_tag",)))
    code, out, err = run_cli("plugins")
    assert code == 0, err
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in out.splitlines() if line.startswith("│ t_")}
    assert rows["t_tag"] == ["ir", "O1", "appends +tagged to the version"]
    assert rows["t_half"] == ["isa", "O1", "halves every block"]
    assert rows["t_manual"][:2] == ["ir", "by name only"]
    order = [line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│ t_")]
    assert order.index("t_manual") < order.index("t_tag") < order.index("t_half")


def test_cli_plugins_survives_a_cycle_and_a_bad_pass(run_cli):
    use(ir_pass("t_a", after=("t_b",)), ir_pass("t_b", after=("t_a",)))
    use("not a pass", name="junk")
    code, out, err = run_cli("plugins")
    assert code == 0
    assert "passes cannot be ordered" in out and "t_a -> t_b -> t_a" in out
    assert "expected hologram.passes.Pass" in out and "plugin 'junk' skipped" in err


# --------------------------------------------------------------- the guide's example pass
def _guide_plugin():
    import re
    import types

    text = (DOCS / "plugins.md").read_text()
    section = text[text.index("## Writing a pass"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    module = types.ModuleType("hologram_xorself")
    exec(compile(code, "docs/plugins.md", "exec"), module.__dict__)
    return module


XOR = '''
[kernel]
name = "xorsum"
version = "1.0.0"
inputs  = { a = "i32[n]", b = "i32[n]" }
outputs = { z = "i32[n]" }
body = "z = (a ^ a) + b"
'''


def test_the_plugin_guide_example_pass_works():
    plugins.plugin_manager().register(_guide_plugin(), name="xorself")
    assert _row("xorself").registered == ("pass xor-self (ir; O2)",)
    o2 = pipelines.resolve("O2")
    assert "xor-self" in o2.names and "xor-self" not in pipelines.resolve("O1").names
    if "canonicalize" in o2.names:
        assert o2.names.index("canonicalize") < o2.names.index("xor-self")
    k = hologram.compile(XOR, passes=["xor-self"])
    assert "XOR" not in repr(k.ir) and "XOR" in repr(hologram.compile(XOR, opt="O0").ir)
    a = np.arange(-50, 50, dtype=np.int32)
    b = a * 3
    for backend in hologram.list_backends():
        np.testing.assert_array_equal(k.on(backend)(a, b), b)
