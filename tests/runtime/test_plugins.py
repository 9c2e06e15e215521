"""The plugin manager: hooks, entry points, HOLOGRAM_PLUGINS, failures, backend choice."""

from __future__ import annotations

import importlib.metadata as metadata
import os
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import numpy as np
import pytest

import hologram
from hologram.backend import Backend, LazyBackend
from hologram.core.errors import PluginError
from hologram.core.hookspecs import BundleRef, Translator
from hologram.passes import Pass
from hologram.registry import lookups
from hologram.registry import plugins
from hologram.registry.plugins import HologramPluginManager, PluginWarning, Selection


pytestmark = pytest.mark.usefixtures("fresh_plugins")


class FakeBackend(Backend):
    def __init__(self, name: str, priority: int, ok: bool = True):
        self.name, self.priority, self.ok = name, priority, ok

    def available(self) -> bool:
        return self.ok

    def allocate(self, shape, dtype):
        return np.zeros(shape, dtype.np)

    def prepare(self, program):
        return program

    def launch(self, executable, buffers, scalars, symbols):
        pass


def _parse_nothing(text: str, file: str) -> list:
    return []


DEMO_PASS = Pass("demo_pass", "ir", lambda kir: kir, pipelines=())


class DemoPlugin:
    """Proves every register-style hook reaches the registry."""

    __version__ = "9.9"

    @staticmethod
    @hologram.hookimpl
    def hologram_register_translators(register):
        register(Translator("demo", ("dm", ".demo.toml"), _parse_nothing))

    @staticmethod
    @hologram.hookimpl
    def hologram_register_backends(register):
        register(FakeBackend("fake", 1000))

    @staticmethod
    @hologram.hookimpl
    def hologram_register_passes(register):
        register(DEMO_PASS)

    @staticmethod
    @hologram.hookimpl
    def hologram_register_bundles(register):
        register(BundleRef("demo_bundle", "/nowhere/demo.hgb"))

    @staticmethod
    @hologram.hookimpl
    def hologram_register_commands(cli):
        p = cli.add_parser("demo-cmd")
        p.set_defaults(func=lambda args: 0)


def _row(name: str):
    return next(r for r in plugins.plugin_report() if r.name == name)


def test_registered_plugin_object_reaches_every_registry():
    pm = plugins.plugin_manager()
    before = set(lookups.translators())
    pm.register(DemoPlugin, name="demo")
    assert set(lookups.translators()) == before | {"demo"}
    t = lookups.translators()["demo"]
    assert t.extensions == (".dm", ".demo.toml")  # normalized: leading dot, lower case
    assert plugins.registry().extensions[".dm"] is t
    assert lookups.backends()["fake"].priority == 1000
    assert DEMO_PASS in lookups.passes()
    assert lookups.bundles()["demo_bundle"].path == "/nowhere/demo.hgb"
    row = _row("demo")
    assert row.status == "ok" and row.error is None
    assert row.registered == ("translator demo (.dm, .demo.toml)", "backend fake", "pass demo_pass (ir; by name only)",
                              "bundle demo_bundle", "commands")
    assert row.origin == "9.9"  # no distribution: the module's __version__
    pm.unregister(name="demo")
    assert "demo" not in lookups.translators() and "fake" not in lookups.backends()


def test_plugin_whose_hook_raises_is_reported_and_skipped():
    class Broken:
        @staticmethod
        @hologram.hookimpl
        def hologram_register_translators(register):
            register(Translator("half", (".half",), _parse_nothing))
            raise RuntimeError("disk on fire")

    pm = plugins.plugin_manager()
    pm.register(Broken, name="broken")
    pm.register(DemoPlugin, name="demo")
    with pytest.warns(PluginWarning, match="plugin 'broken' skipped: RuntimeError: disk on fire"):
        reg = plugins.registry()
    assert "half" not in reg.translators and ".half" not in reg.extensions  # nothing half-registered
    assert "demo" in reg.translators
    row = _row("broken")
    assert (row.status, row.error, row.registered) == ("failed", "RuntimeError: disk on fire", ())


def test_a_kind_is_collected_when_first_asked_for_and_a_later_failure_drops_the_whole_plugin():
    """Looking up backends calls no passes hook; when the passes are asked for and the
    plugin's passes hook raises, its backend goes too: a plugin is all or nothing."""
    calls = []

    class Late:
        @staticmethod
        @hologram.hookimpl
        def hologram_register_backends(register):
            calls.append("backends")
            register(FakeBackend("late", 1))

        @staticmethod
        @hologram.hookimpl
        def hologram_register_passes(register):
            calls.append("passes")
            raise RuntimeError("no passes today")

    plugins.plugin_manager().register(Late, name="late")
    assert "late" in lookups.backends() and calls == ["backends"]
    assert "late" in lookups.backends() and calls == ["backends"]  # collected once
    with pytest.warns(PluginWarning, match="plugin 'late' skipped: RuntimeError: no passes today"):
        lookups.passes()
    assert calls == ["backends", "passes"]
    assert "late" not in lookups.backends() and "late" not in plugins.registry().backends
    assert _row("late").status == "failed"


def test_misspelled_hook_is_a_failure_with_a_suggestion():
    class Typo:
        @staticmethod
        @hologram.hookimpl
        def hologram_register_backend(register):
            register(FakeBackend("typo", 1))

    plugins.plugin_manager().register(Typo, name="typo")
    with pytest.warns(PluginWarning):
        plugins.registry()
    assert _row("typo").error == ("implements unknown hook 'hologram_register_backend'; "
                                  "did you mean 'hologram_register_backends'?")


@pytest.mark.parametrize("hook, obj, error", [
    ("hologram_register_translators", "toml", "registered str as a translator; expected hologram.core.hookspecs.Translator"),
    ("hologram_register_backends", object(), "registered object as a backend; expected an instance of a subclass of "
                                             "hologram.backend.Backend (the backend SDK, API version 1: "
                                             "docs/backends.md)"),
    ("hologram_register_bundles", "x.hgb", "registered str as a bundle; expected hologram.core.hookspecs.BundleRef"),
])
def test_registering_the_wrong_kind_of_object_is_a_failure(hook, obj, error):
    plugin = type("Bad", (), {hook: staticmethod(hologram.hookimpl(lambda register: register(obj)))})
    plugins.plugin_manager().register(plugin, name="bad")
    with pytest.warns(PluginWarning):
        plugins.registry()
    assert _row("bad").error == error


def test_name_conflict_keeps_the_first_and_reports_the_second():
    def backend_plugin(priority):
        return type("P", (), {"hologram_register_backends": staticmethod(
            hologram.hookimpl(lambda register: register(FakeBackend("same", priority))))})

    pm = plugins.plugin_manager()
    pm.register(backend_plugin(1), name="first")
    pm.register(backend_plugin(2), name="second")
    with pytest.warns(PluginWarning):
        assert lookups.backends()["same"].priority == 1
    assert _row("second").error == "backend 'same' is already registered by plugin 'first'"


# ----------------------------------------------------------------------- entry points
@pytest.fixture
def plugin_modules(tmp_path, monkeypatch):
    """Importable plugin modules: a good one, one that fails on import."""
    (tmp_path / "hg_good_plugin.py").write_text(textwrap.dedent("""
        import hologram
        from hologram.core.hookspecs import Translator

        @hologram.hookimpl
        def hologram_register_translators(register):
            register(Translator("good", (".good",), lambda text, file: []))
    """))
    (tmp_path / "hg_bad_plugin.py").write_text("import not_a_module_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for m in ("hg_good_plugin", "hg_bad_plugin"):
        sys.modules.pop(m, None)


def _eps(*pairs):
    return [metadata.EntryPoint(name, value, "hologram") for name, value in pairs]


def test_entry_points_load_and_an_import_failure_is_reported(plugin_modules):
    pm = HologramPluginManager()
    with pytest.warns(PluginWarning, match="plugin 'bad' skipped: failed to import 'hg_bad_plugin': "
                                           "ModuleNotFoundError"):
        pm.load_entry_points(_eps(("good", "hg_good_plugin"), ("bad", "hg_bad_plugin")))
    assert "good" in pm.registry.translators
    rows = {r.name: r for r in pm.registry.report}
    assert rows["good"].status == "ok"
    assert rows["bad"].status == "failed"
    assert "No module named 'not_a_module_anywhere'" in rows["bad"].error


def test_selection_parsing():
    assert Selection.parse(None) == Selection(None, frozenset())
    assert Selection.parse(" ") == Selection(None, frozenset())
    s = Selection.parse("interp, mine")
    assert s.include == {"interp", "mine", "builtin_translators", "builtin_passes", "builtin_bundles", "builtin_dask"}
    assert s.allows("builtin_translators") and s.allows("mine") and not s.allows("cpu_llvm")
    s = Selection.parse("-cpu_llvm")
    assert s.allows("interp") and not s.allows("cpu_llvm") and s.allows("builtin_translators")
    s = Selection.parse("interp,-builtin_translators")
    assert s.allows("interp") and not s.allows("builtin_translators")


def test_selection_restricts_entry_points(plugin_modules):
    pm = HologramPluginManager(Selection.parse("good,-bad,goods"))
    with pytest.warns(PluginWarning, match="plugin 'goods' named in HOLOGRAM_PLUGINS but not installed; "
                                           "did you mean 'good'?"):
        pm.load_entry_points(_eps(("good", "hg_good_plugin"), ("bad", "hg_bad_plugin"),
                                  ("other", "hg_bad_plugin")))
    rows = {r.name: (r.status, r.error) for r in pm.registry.report}
    assert rows["good"] == ("ok", None)
    assert rows["bad"] == ("disabled", "left out by HOLOGRAM_PLUGINS")
    assert rows["other"] == ("disabled", "left out by HOLOGRAM_PLUGINS")
    assert rows["goods"][0] == "missing"
    assert "hg_bad_plugin" not in sys.modules  # disabled plugins are never imported


def test_manager_is_cached_per_hologram_plugins_value(monkeypatch):
    first = plugins.plugin_manager()
    assert plugins.plugin_manager() is first
    monkeypatch.setenv("HOLOGRAM_PLUGINS", "interp")
    restricted = plugins.plugin_manager()
    assert restricted is not first and restricted.selection.include == {"interp", "builtin_translators", "builtin_passes",
                                                                 "builtin_bundles", "builtin_dask"}
    monkeypatch.delenv("HOLOGRAM_PLUGINS")
    assert plugins.plugin_manager() is first
    plugins.reset()
    assert plugins.plugin_manager() is not first


def test_installed_plugins_are_found():
    names = {r.name: r for r in plugins.plugin_report()}
    assert names["builtin_translators"].status == "ok"
    assert names["builtin_translators"].distribution == "hologram-kernels"
    assert {"toml", "yaml", "json"} <= set(lookups.translators())
    assert names["interp"].registered == ("backend interp",)
    assert names["interp"].origin.startswith("hologram-backend-interp ")


def test_hologram_plugins_env_excludes_a_backend(monkeypatch):
    monkeypatch.setenv("HOLOGRAM_PLUGINS", "-interp")
    assert "interp" not in lookups.backends()
    assert "toml" in lookups.translators()
    monkeypatch.setenv("HOLOGRAM_PLUGINS", "interp,-builtin_translators")
    assert "interp" in lookups.backends() and not lookups.translators()


# --------------------------------------------------------------------------- look-ups
def test_find_translator_by_name_or_extension_and_errors():
    assert lookups.find_translator("toml").name == "toml"
    assert lookups.find_translator("TOML").name == "toml"
    assert lookups.find_translator(".yml").name == "yaml"
    with pytest.raises(PluginError) as e:
        lookups.find_translator("tomll")
    assert e.value.message == "unknown kernel format 'tomll'; did you mean 'toml'?"
    assert e.value.hint.startswith("available formats: ") and "json" in e.value.hint


def test_translator_for_path_prefers_the_longest_extension():
    plugins.plugin_manager().register(DemoPlugin, name="demo")
    assert lookups.translator_for_path("k/a.toml").name == "toml"
    assert lookups.translator_for_path("k/a.demo.toml").name == "demo"
    assert lookups.translator_for_path("A.DM").name == "demo"
    with pytest.raises(PluginError, match=r"^k/a\.tml: no translator for extension \.tml; did you mean '\.toml'\?"):
        lookups.translator_for_path("k/a.tml")
    with pytest.raises(PluginError, match="no translator for extension \\(none\\)"):
        lookups.translator_for_path("Makefile")


def _only_backends(monkeypatch, *bs):
    """A manager whose only backends are `bs`: every installed backend distribution's
    plugin excluded (whichever of plugins/ are installed, cuda's included)."""
    installed = sorted({ep.name for ep in metadata.entry_points(group="hologram")
                        if ep.dist is not None and ep.dist.name.startswith("hologram-backend-")})
    monkeypatch.setenv("HOLOGRAM_PLUGINS", ",".join(f"-{name}" for name in installed))
    pm = plugins.plugin_manager()
    pm.register(type("B", (), {"hologram_register_backends": staticmethod(
        hologram.hookimpl(lambda register: [register(b) for b in bs]))}), name="fakes")


def test_get_backend_priority_env_and_argument(monkeypatch):
    _only_backends(monkeypatch, FakeBackend("slow", 1), FakeBackend("fast", 50), FakeBackend("gone", 99, ok=False))
    assert hologram.get_backend().name == "fast"  # highest priority that is available
    assert hologram.list_backends() == ["fast", "slow"]
    assert hologram.list_backends(available_only=False) == ["gone", "fast", "slow"]
    monkeypatch.setenv("HOLOGRAM_BACKEND", "slow")
    assert hologram.get_backend().name == "slow"
    assert hologram.get_backend("fast").name == "fast"  # the argument beats the environment
    monkeypatch.setenv("HOLOGRAM_BACKEND", "fats")
    with pytest.raises(PluginError) as e:
        hologram.get_backend()
    assert e.value.message == "unknown backend 'fats' (from HOLOGRAM_BACKEND); did you mean 'fast'?"
    assert e.value.hint == ("available backends: gone (priority 99, unavailable), fast (priority 50), "
                            "slow (priority 1)")
    with pytest.raises(PluginError) as e:
        hologram.get_backend("gone")
    assert e.value.message == "backend 'gone' is not available on this machine"


class ReasonedBackend(FakeBackend):
    def unavailable_reason(self):
        return None if self.ok else "no CUDA driver: libcuda.so not found"


def test_an_unavailable_backend_says_why(monkeypatch):
    """`unavailable_reason` (a Backend's optional member) is in get_backend's refusal;
    one that raises says nothing."""
    broken = ReasonedBackend("broken", 5, ok=False)
    broken.unavailable_reason = lambda: 1 / 0
    _only_backends(monkeypatch, ReasonedBackend("gpu", 99, ok=False), FakeBackend("cpu", 1), broken)
    with pytest.raises(PluginError) as e:
        hologram.get_backend("gpu")
    assert e.value.message == "backend 'gpu' is not available on this machine: no CUDA driver: libcuda.so not found"
    with pytest.raises(PluginError) as e:
        hologram.get_backend("broken")
    assert e.value.message == "backend 'broken' is not available on this machine"
    assert lookups.unavailable_reason(FakeBackend("cpu", 1)) is None  # the default: nothing to say


def test_get_backend_without_any_backend(monkeypatch):
    _only_backends(monkeypatch, FakeBackend("gone", 99, ok=False))
    with pytest.raises(PluginError) as e:
        hologram.get_backend()
    assert (e.value.message, e.value.hint) == ("no backend is available",
                                               "available backends: gone (priority 99, unavailable)")


def test_get_backend_default_is_interp_when_installed():
    assert hologram.get_backend().name in hologram.list_backends()
    assert hologram.get_backend("interp").name == "interp"


def test_a_lazy_backend_is_built_when_first_asked_for_and_only_then(monkeypatch):
    """A LazyBackend is built by its name's look-up alone, once; choosing the default
    builds in order of declared priority and stops at the first available one."""
    built = []

    def factory(name: str, priority: int, ok: bool = True):
        return lambda: built.append(name) or FakeBackend(name, priority, ok)

    lazy = [LazyBackend("gpu", factory("gpu", 99, ok=False), priority=99),
            LazyBackend("cpu", factory("cpu", 50), priority=50), LazyBackend("slow", factory("slow", 1), priority=1)]
    _only_backends(monkeypatch, *lazy)
    assert lookups.backends().by_priority() == ["gpu", "cpu", "slow"] and built == []
    assert hologram.get_backend("slow").name == "slow" and built == ["slow"]
    assert hologram.get_backend().name == "cpu" and built == ["slow", "gpu", "cpu"]  # gpu probed: unavailable
    assert hologram.get_backend("cpu") is hologram.get_backend() and built == ["slow", "gpu", "cpu"]
    assert hologram.list_backends(available_only=False) == ["gpu", "cpu", "slow"]
    assert [b.name for b in lookups.backends().built()] == ["gpu", "cpu", "slow"]


def test_a_lazy_backend_by_module_and_class(monkeypatch):
    _only_backends(monkeypatch, LazyBackend("interp", "hologram_interp.backend:InterpBackend", priority=10))
    assert type(hologram.get_backend("interp")).__name__ == "InterpBackend"


@pytest.mark.parametrize(("lazy", "error"), [
    (LazyBackend("odd", lambda: FakeBackend("odd", 2), priority=1),
     "backend 'odd' failed to load: registered as backend 'odd' of priority 1, it built backend 'odd' of priority 2"),
    (LazyBackend("odd", "no_such_module_here:Backend", priority=1),
     "backend 'odd' failed to load: ModuleNotFoundError: No module named 'no_such_module_here'"),
    (LazyBackend("odd", lambda: object(), priority=1),
     "backend 'odd' failed to load: registered object as a backend; expected an instance of a subclass of "
     "hologram.backend.Backend"),
])
def test_a_lazy_backend_that_fails_to_build_drops_its_plugin(monkeypatch, lazy, error):
    _only_backends(monkeypatch, lazy, FakeBackend("fine", 5))
    with pytest.warns(PluginWarning, match="plugin 'fakes' skipped"), pytest.raises(PluginError) as e:
        hologram.get_backend("odd")
    assert e.value.message.startswith(error)
    (row,) = [r for r in plugins.plugin_report() if r.name == "fakes"]
    assert row.status == "failed" and row.error.startswith(error)
    assert "fine" not in lookups.backends()  # the plugin is dropped with all it registered


@pytest.mark.parametrize(("lazy", "error"), [
    (LazyBackend("", "m:C", priority=1), "a lazy backend needs a name"),
    (LazyBackend("x", "m:C", priority=True), "lazy backend 'x' has priority True; expected a number"),
    (LazyBackend("x", "no colon", priority=1), "lazy backend 'x' has load='no colon'; expected a 'module:Class'"),
])
def test_a_malformed_lazy_backend_is_refused_when_registered(monkeypatch, lazy, error):
    _only_backends(monkeypatch, lazy)
    with pytest.warns(PluginWarning, match="plugin 'fakes' skipped"):
        assert "x" not in lookups.backends()
    (row,) = [r for r in plugins.plugin_report() if r.name == "fakes"]
    assert row.status == "failed" and error in row.error


# ----------------------------------------------------------------- a real pip install
PLUGIN_PYPROJECT = """
[build-system]
requires = []
build-backend = "tinybuild"
backend-path = ["."]

[project]
name = "hologram-translator-demo"
version = "0.4.2"

[project.entry-points.hologram]
demo_translator = "hologram_demo"
"""

PLUGIN_MODULE = """
import hologram
from hologram.core.hookspecs import Translator

@hologram.hookimpl
def hologram_register_translators(register):
    register(Translator("demo", (".demo",), lambda text, file: []))
"""

# A complete PEP 517 backend in a few lines, so the install needs neither the network
# nor `wheel`: it zips the package with its metadata and entry points.
TINY_BUILD = '''
import base64, hashlib, os, zipfile
NAME, VERSION, PKG = "hologram_translator_demo", "0.4.2", "hologram_demo"
INFO = f"{NAME}-{VERSION}.dist-info"
FILES = {
    f"{PKG}/__init__.py": open(os.path.join(PKG, "__init__.py"), "rb").read(),
    f"{INFO}/METADATA": b"Metadata-Version: 2.1\\nName: hologram-translator-demo\\nVersion: 0.4.2\\n",
    f"{INFO}/WHEEL": b"Wheel-Version: 1.0\\nGenerator: tinybuild\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
    f"{INFO}/entry_points.txt": b"[hologram]\\ndemo_translator = hologram_demo\\n",
}

def _digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    record = "".join(f"{p},{_digest(d)},{len(d)}\\n" for p, d in FILES.items()) + f"{INFO}/RECORD,,\\n"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for path, data in FILES.items():
            z.writestr(path, data)
        z.writestr(f"{INFO}/RECORD", record)
    return name
'''


def test_pip_installed_plugin_is_listed_by_hologram_plugins(tmp_path):
    src = tmp_path / "src"
    (src / "hologram_demo").mkdir(parents=True)
    (src / "pyproject.toml").write_text(PLUGIN_PYPROJECT)
    (src / "tinybuild.py").write_text(TINY_BUILD)
    (src / "hologram_demo" / "__init__.py").write_text(PLUGIN_MODULE)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    # --system-site-packages gives the base interpreter's packages; hologram lives in the
    # venv running this test, so its site-packages (with the editable install's finder) is
    # added through a .pth file, as a layered virtualenv would.
    site_dir = Path(subprocess.check_output([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                            text=True).strip())
    here = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site_dir / "zz_parent_env.pth").write_text("".join(f"import site; site.addsitedir({p!r})\n" for p in here))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps",
                    "--no-build-isolation", "--no-index", "--quiet", str(src)], check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOLOGRAM_")}
    env["COLUMNS"] = "200"
    done = subprocess.run([py, "-m", "hologram", "plugins"], capture_output=True, text=True, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    line = next(l for l in done.stdout.splitlines() if "demo_translator" in l)
    assert "hologram-translator-demo 0.4.2" in line and "translator demo (.demo)" in line and " ok" in line
    assert "builtin_translators" in done.stdout


# ------------------------------------------------ translators that misbehave
# (the guide's example translator and backend are tests/test_example_plugins.py's)
def test_a_crashing_translator_is_a_plugin_error():
    def crash(text, file):
        raise ZeroDivisionError("oops")

    plugins.plugin_manager().register(type("T", (), {"hologram_register_translators": staticmethod(
        hologram.hookimpl(lambda register: register(Translator("crashy", (".crash",), crash))))}), name="crashy")
    with pytest.raises(PluginError) as e:
        hologram.compile("x", format="crashy", file="a.crash")
    assert e.value.message == "translator 'crashy' failed on a.crash: ZeroDivisionError: oops"


def test_a_translator_returning_the_wrong_thing_is_a_plugin_error():
    plugins.plugin_manager().register(type("T", (), {"hologram_register_translators": staticmethod(
        hologram.hookimpl(lambda register: register(Translator("odd", (".odd",), lambda text, file: [text]))))}),
        name="odd")
    with pytest.raises(PluginError) as e:
        hologram.compile("x", format="odd", file="a.odd")
    assert e.value.message == "translator 'odd' returned str for a.odd; expected hologram.dsl.document.KernelDef"
