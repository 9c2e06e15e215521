"""The folder layout is the pipeline (docs/architecture.md): every import, at module
level or inside a function, runs from a later stage to an earlier one, and no files
import each other in a circle. Read from the sources with `ast`, so an import nobody
runs yet counts as much as one that runs at start-up."""

from __future__ import annotations

import ast
import textwrap
import tomllib
from pathlib import Path

import pytest

from repo_paths import ROOT


def plugin_packages(folder: str = "plugins") -> dict[str, Path]:
    """The plugins under `folder`, found by their pyproject.toml: the package each
    `hologram` entry point names -> its folder. A new plugin folder needs no edit here."""
    found = {}
    for pyproject in sorted((ROOT / folder).glob("*/pyproject.toml")):
        entry_points = tomllib.loads(pyproject.read_text())["project"].get("entry-points", {}).get("hologram", {})
        for target in entry_points.values():
            top = target.split(":")[0].split(".")[0]
            found[top] = pyproject.parent / top
    return found


PLUGINS = plugin_packages()
PACKAGES = {"hologram": ROOT / "hologram", **PLUGINS}

# A module may import from its own folder or from a folder of a lower rank; folders of
# one rank are independent of each other (isa and dsl, verify and lower).
PLUGIN_RANK = 12  # every package under plugins/, unless PLUGIN_RANKS says otherwise
PLUGIN_RANKS = {"hologram_sigil": 14}  # the sigil translator: its generated circuits use the test kit
RANKS = {
    "hologram.core": 0,
    "hologram.ir": 1,
    "hologram.isa": 2, "hologram.dsl": 2, "hologram.ir_codec": 2,
    "hologram.verify": 3, "hologram.lower": 3,
    "hologram.passes": 4,
    "hologram.backend": 5, "hologram.errors": 5,  # the SDK a backend imports, and the public errors
    "hologram.registry": 6,  # plugins loaded and looked up, the pass pipelines
    "hologram.compiler": 7,  # the driver: a definition to a Compiled kernel, and its interface
    "hologram.call": 8,  # the call path: Kernel, arguments, loop dimensions, the fast path
    "hologram.compile_api": 9, "hologram.streaming": 9,  # hologram.compile & co; hologram.stream
    "hologram.bundles": 10, "hologram.dask": 10, "hologram.xarray": 10,  # bundles; Dask arrays; xarray
    "hologram": 11,  # the package's public face: hologram/__init__.py
    **{package: PLUGIN_RANKS.get(package, PLUGIN_RANK) for package in PLUGINS},  # installed as plugins
    "hologram.testing": 13,
    "hologram.cli": 14,
    "hologram.__main__": 15,  # `python -m hologram`: the command
}


def modules() -> dict[str, Path]:
    found = {}
    for package, root in PACKAGES.items():
        for path in root.rglob("*.py"):
            parts = [package, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = modules()


def imports(name: str, path: Path) -> set[str]:
    """The modules of ours that `name` imports: `from hologram.isa import program` is the
    module hologram.isa.program, `from hologram.isa.program import Instr` the module too."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for a in node.names:
                out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base)
    return {m for m in out if m in MODULES and m != name}


GRAPH = {name: imports(name, path) for name, path in MODULES.items()}


def folder(name: str) -> str:
    """The longest key of RANKS that `name` is, or is inside."""
    best = max((k for k in RANKS if name == k or name.startswith(k + ".")), key=len, default=None)
    if best is None:
        raise AssertionError(f"{name} is in no folder of the layout: add its folder to RANKS (and to "
                             "docs/architecture.md)")
    return best


def test_every_module_has_a_place():
    for name in MODULES:
        folder(name)


def test_imports_run_down_the_pipeline():
    upward = []
    for name, targets in sorted(GRAPH.items()):
        for target in sorted(targets):
            a, b = folder(name), folder(target)
            if a != b and RANKS[a] <= RANKS[b]:
                upward.append(f"{name} ({a}, rank {RANKS[a]}) imports {target} ({b}, rank {RANKS[b]})")
    assert not upward, "imports against the layout:\n" + "\n".join(upward)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles():
    found = cycles(GRAPH)
    assert not found, "modules importing each other:\n" + "\n".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
])
def test_cycles_are_found(graph, expected):
    assert cycles(graph) == expected


def test_the_reader_sees_relative_and_function_level_imports():
    assert "hologram.dsl.analyze" in GRAPH["hologram.compiler.driver"]  # imported inside compile_kdef
    assert "hologram_cpu_llvm.jit" in GRAPH["hologram_cpu_llvm.backend"]  # `from . import jit`
    assert "hologram.isa.program" in GRAPH["hologram.verify.verifier"]


def test_the_architecture_map_names_every_module():
    """docs/architecture.md lists every module under the heading of its folder; a plugin's
    modules are listed in a section that names its folder (`plugins/interp/`) or in the
    plugin's own README.md, so a new plugin folder documents itself."""
    text = (ROOT / "docs/architecture.md").read_text()
    sections = {}
    for block in text.split("\n### ")[1:]:
        heading, _, body = block.partition("\n")
        sections[heading] = body
    missing = []
    for name, path in MODULES.items():
        if name in ("hologram", "hologram.ir", "hologram.__main__"):
            continue  # each has a section (or row) of its own
        if path.name == "__init__.py" and len(ast.parse(path.read_text()).body) <= 1:
            continue  # a docstring only: the folder's heading says it
        top = folder(name)
        if top in PLUGINS:  # the section naming its folder, or the plugin's own README
            where = f"{PLUGINS[top].parent.relative_to(ROOT).as_posix()}/"
            readme = PLUGINS[top].parent / "README.md"
            body = "".join(f"{h}\n{b}" for h, b in sections.items() if where in h or where in b)
            body += readme.read_text() if readme.exists() else ""
        else:
            where = f"`{top.replace('.', '/')}{'/' if (ROOT / top.replace('.', '/')).is_dir() else '.py'}`"
            body = next((b for h, b in sections.items() if where in h), "")
        if path.name not in body:
            missing.append(f"{path.relative_to(ROOT)} (under the heading with {where})")
    assert not missing, "docs/architecture.md (or the plugin's README.md) does not list:\n" + "\n".join(missing)


# ------------------------------------------------------------------- what plugins import
# A backend plugin imports Hologram only through the SDK (docs/backends.md), a translator
# plugin only through the translator API (docs/plugins.md, "Translators"); neither imports
# another plugin, and the compiler, runtime, test kit and command import no plugin.
SDK = frozenset({"hologram.backend", "hologram.errors"})
TRANSLATOR_API = frozenset({"hologram.translator", "hologram.errors"})
TEST_KIT = "hologram.testing"  # for a translator's `cases` module only: its hook's contract is in the kit's types


def is_ours(name: str) -> bool:
    """A module of hologram or of a plugin, or a package above one."""
    return name in MODULES or any(m.startswith(name + ".") for m in MODULES)


def hologram_imports(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """Every module of `hologram` (or of a plugin) `source` uses, with its line: import
    statements anywhere (`from hologram import testing` is hologram.testing), and modules
    named by a string handed to a call (`importlib.import_module("...")`, `__import__`, a
    lazy loader of the plugin's own); `import_module` of a name computed at run time is
    reported as `<computed>`, since nobody can check it, unless the name is a parameter
    of the function calling it (a lazy loader: its callers' strings are checked)."""
    tree = ast.parse(source, filename)
    parameters: dict[int, set[str]] = {}  # a call -> the parameters of the functions around it
    for f in ast.walk(tree):
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            names = {a.arg for a in ast.walk(f.args) if isinstance(a, ast.arg)}
            for call in ast.walk(f):
                if isinstance(call, ast.Call):
                    parameters.setdefault(id(call), set()).update(names)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found += [(node.lineno, f"{node.module}.{a.name}" if is_ours(f"{node.module}.{a.name}") else node.module)
                      for a in node.names]
        elif isinstance(node, ast.Call):
            f = node.func
            called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            named = [arg.value for arg in (*node.args, *(k.value for k in node.keywords))
                     if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
            found += [(node.lineno, n) for n in named if is_ours(n)]
            first = node.args[0] if node.args else None
            if called in ("import_module", "__import__") and first is not None and not isinstance(first, ast.Constant) \
                    and not (isinstance(first, ast.Name) and first.id in parameters.get(id(node), ())):
                found.append((node.lineno, "<computed>"))
    return sorted({(line, m) for line, m in found if m == "<computed>" or is_ours(m)})


def registers(package: Path, hook: str) -> bool:
    """Whether the plugin module (the package's __init__) implements `hook`."""
    tree = ast.parse((package / "__init__.py").read_text())
    return any(isinstance(n, ast.FunctionDef) and n.name == hook for n in tree.body)


ALL_PLUGINS = {**PLUGINS, **plugin_packages("examples")}
BACKEND_PLUGINS = {n: p for n, p in ALL_PLUGINS.items() if registers(p, "hologram_register_backends")}
TRANSLATOR_PLUGINS = {n: p for n, p in ALL_PLUGINS.items() if registers(p, "hologram_register_translators")}


def allowed_for(module: str, api: frozenset[str]) -> frozenset[str]:
    return api | ({TEST_KIT} if api is TRANSLATOR_API and module.rpartition(".")[2] == "cases" else set())


def violations(package: str, root: Path, api: frozenset[str]) -> list[str]:
    """The imports of `package`'s modules that are neither its own nor in `api`."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        allowed = allowed_for(module, api)
        for line, name in hologram_imports(path.read_text(), str(path)):
            if name.split(".")[0] != package and not any(name == a or name.startswith(a + ".") for a in allowed):
                bad.append(f"{path.relative_to(ROOT)}:{line} uses {name}")
    return bad


def test_the_plugins_are_found_by_their_hooks():
    assert {"hologram_interp", "hologram_cpu_llvm", "hologram_lanes"} <= set(BACKEND_PLUGINS)
    assert {"hologram_python", "hologram_sigil", "hologram_hgk"} <= set(TRANSLATOR_PLUGINS)
    assert not set(BACKEND_PLUGINS) & set(TRANSLATOR_PLUGINS)


@pytest.mark.parametrize("package", sorted(BACKEND_PLUGINS))
def test_backend_plugins_import_only_the_sdk(package):
    """A backend imports `hologram.backend` and `hologram.errors` and nothing else of
    Hologram, by statement or by string (docs/backends.md), so the compiler can change
    under it without breaking it."""
    bad = violations(package, BACKEND_PLUGINS[package], SDK)
    assert not bad, f"{package} imports more than hologram.backend and hologram.errors:\n" + "\n".join(bad)


@pytest.mark.parametrize("package", sorted(TRANSLATOR_PLUGINS))
def test_translator_plugins_import_only_the_translator_api(package):
    bad = violations(package, TRANSLATOR_PLUGINS[package], TRANSLATOR_API)
    assert not bad, (f"{package} imports hologram only through hologram.translator (its `cases` module the "
                     "test kit too):\n" + "\n".join(bad))


def test_the_import_check_sees_every_way_of_importing():
    source = textwrap.dedent("""
        import hologram.core.types
        from hologram.call.args import symbol_value
        from hologram.backend import Backend
        from hologram.errors import ArgumentError
        from hologram import testing
        from . import machine

        def late():
            import importlib
            importlib.import_module("hologram.verify.verifier")
            __import__("hologram.isa.opcodes", fromlist=["x"])
            importlib.import_module(name_of_the_day())
            importlib.import_module(".decode", __package__)
            lazy = lambda module: importlib.import_module(module)  # checked where it is called
            load = lazy(module="hologram.dsl")
            if module == "hologram.ir": pass  # a name the plugin reads, not uses
            from hologram_cpu_llvm import cpu
    """)
    found = [m for _, m in hologram_imports(source, "<test>") if m not in SDK]
    assert found == ["hologram.core.types", "hologram.call.args", "hologram.testing", "hologram.verify.verifier",
                     "hologram.isa.opcodes", "<computed>", "hologram.dsl", "hologram_cpu_llvm.cpu"]


def test_only_a_translators_cases_module_may_use_the_test_kit():
    assert TEST_KIT in allowed_for("hologram_sigil.cases", TRANSLATOR_API)
    assert TEST_KIT not in allowed_for("hologram_sigil.api", TRANSLATOR_API)
    assert TEST_KIT not in allowed_for("hologram_lanes.cases", SDK)


LLVM_KIT = "hologram.backend.llvm"  # the SDK's part for llvmlite backends: every module imports llvmlite


def _uses_llvm_kit(name: str, path: Path) -> bool:
    return any(m == LLVM_KIT or m.startswith(LLVM_KIT + ".") for _, m in hologram_imports(path.read_text(), str(path)))


def test_only_backends_that_depend_on_llvmlite_import_the_llvm_kit():
    """hologram-kernels does not depend on llvmlite, so nothing of `hologram` outside the
    kit imports it (`import hologram`, a bundle's load and a launch never reach llvmlite),
    and a plugin that does lists llvmlite among its own dependencies (docs/backends.md)."""
    inside = [name for name, path in MODULES.items() if name.split(".")[0] == "hologram"
              and not (name == LLVM_KIT or name.startswith(LLVM_KIT + ".")) and _uses_llvm_kit(name, path)]
    assert not inside, f"hologram modules importing {LLVM_KIT}: {inside}"
    users = {name.split(".")[0] for name, path in MODULES.items() if name.split(".")[0] in PLUGINS
             and _uses_llvm_kit(name, path)}
    assert users, "no plugin uses the LLVM kit: the test has lost its subject"
    for package in sorted(users):
        project = tomllib.loads((PLUGINS[package].parent / "pyproject.toml").read_text())["project"]
        assert any(d.split(">")[0].split("=")[0].strip() == "llvmlite" for d in project.get("dependencies", ())), \
            f"{package} imports {LLVM_KIT} but does not depend on llvmlite"


def test_hologram_imports_no_plugin():
    """Neither the compiler, nor the runtime, the test kit or the command import a plugin
    by name (statement or string): they find plugins through the registry, so the
    in-repo ones are exactly as pluggable as a third party's."""
    bad = [f"{path.relative_to(ROOT)}:{line} imports {module}" for name, path in MODULES.items()
           if name.split(".")[0] == "hologram"
           for line, module in hologram_imports(path.read_text(), str(path))
           if module.split(".")[0] in PLUGINS]
    assert not bad, "hologram/ imports plugins by name:\n" + "\n".join(bad)


def test_compiled_is_built_in_the_driver_alone():
    """`Compiled` is built by `Compiled.of` (from IR) and `Compiled.stored` (from a
    bundle's or a pickle's parts), both in hologram/compiler/driver.py: the interface is
    derived from the IR in one place."""
    builders = [f"{path.relative_to(ROOT)}:{node.lineno}" for name, path in MODULES.items()
                for node in ast.walk(ast.parse(path.read_text(), str(path)))
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Compiled"
                and name != "hologram.compiler.driver"]
    assert not builders, "Compiled built outside the driver:\n" + "\n".join(builders)
