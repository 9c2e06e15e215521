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
PLUGIN_RANK = 9  # every package under plugins/, unless PLUGIN_RANKS says otherwise
PLUGIN_RANKS = {"hologram_sigil": 11}  # the sigil translator: its generated circuits use the test kit
RANKS = {
    "hologram.core": 0,
    "hologram.ir": 1,
    "hologram.isa": 2, "hologram.dsl": 2,
    "hologram.verify": 3, "hologram.lower": 3,
    "hologram.passes": 4,
    "hologram.backend": 5, "hologram.errors": 5,  # the SDK a backend imports, and the public errors
    "hologram.runtime": 6,
    "hologram.bundles": 7,
    "hologram": 8,  # the package's public face: hologram/__init__.py
    **{package: PLUGIN_RANKS.get(package, PLUGIN_RANK) for package in PLUGINS},  # installed as plugins
    "hologram.testing": 10,
    "hologram.cli": 11,
    "hologram.__main__": 12,  # `python -m hologram`: the command
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
    assert "hologram.dsl.analyze" in GRAPH["hologram.runtime.driver"]  # imported inside compile_kdef
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
SDK = frozenset({"hologram.backend", "hologram.errors"})  # all of Hologram a backend plugin may import


def hologram_imports(source: str, filename: str) -> list[tuple[int, str]]:
    """Every module of `hologram` (or of a plugin) `source` imports, with its line: import
    statements anywhere, and imports by name (`importlib.import_module("...")`,
    `import_module(...)`, `__import__(...)`); a name computed at run time is reported as
    `<computed>`, since nobody can check it."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call):
            f = node.func
            called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if called in ("import_module", "__import__") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    if not arg.value.startswith("."):
                        found.append((node.lineno, arg.value))
                else:
                    found.append((node.lineno, "<computed>"))
    return sorted((line, m) for line, m in found if m == "<computed>" or m.split(".")[0] == "hologram"
                  or m.split(".")[0] in PLUGINS)


def registers_backends(package: Path) -> bool:
    """Whether the plugin module (the package's __init__) implements `hologram_register_backends`."""
    tree = ast.parse((package / "__init__.py").read_text())
    return any(isinstance(n, ast.FunctionDef) and n.name == "hologram_register_backends" for n in tree.body)


BACKEND_PLUGINS = {name: path for name, path in {**PLUGINS, **plugin_packages("examples")}.items()
                   if registers_backends(path)}


def sdk_violations(package: str, root: Path) -> list[str]:
    """The imports of `package`'s modules that are neither its own nor the SDK's."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        for line, module in hologram_imports(path.read_text(), str(path)):
            if module.split(".")[0] != package and module not in SDK:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return bad


def test_the_backend_plugins_are_found():
    assert {"hologram_interp", "hologram_cpu_llvm", "hologram_lanes"} <= set(BACKEND_PLUGINS)
    assert "hologram_sigil" not in BACKEND_PLUGINS  # a translator: held to its own API


@pytest.mark.parametrize("package", sorted(BACKEND_PLUGINS))
def test_backend_plugins_import_only_the_sdk(package):
    """A backend imports `hologram.backend` and `hologram.errors` and nothing else of
    Hologram, by statement or by string (docs/backends.md), so the compiler can change
    under it without breaking it."""
    bad = sdk_violations(package, BACKEND_PLUGINS[package])
    assert not bad, f"{package} imports more than hologram.backend and hologram.errors:\n" + "\n".join(bad)


def test_the_sdk_check_sees_every_way_of_importing():
    source = textwrap.dedent("""
        import hologram.core.types
        from hologram.runtime.args import symbol_value
        from hologram.backend import Backend
        from hologram.errors import ArgumentError
        from . import machine

        def late():
            import importlib
            importlib.import_module("hologram.verify.verifier")
            __import__("hologram.isa.opcodes")
            importlib.import_module(name_of_the_day())
            importlib.import_module(".decode", __package__)
            from hologram_cpu_llvm import cpu
    """)
    found = [m for _, m in hologram_imports(source, "<test>") if m not in SDK]
    assert found == ["hologram.core.types", "hologram.runtime.args", "hologram.verify.verifier",
                     "hologram.isa.opcodes", "<computed>", "hologram_cpu_llvm"]


def test_hologram_imports_no_plugin():
    """Neither the compiler, nor the runtime, the test kit or the command import a plugin
    by name (statement or string): they find plugins through the registry, so the
    in-repo ones are exactly as pluggable as a third party's."""
    bad = [f"{path.relative_to(ROOT)}:{line} imports {module}" for name, path in MODULES.items()
           if name.split(".")[0] == "hologram"
           for line, module in hologram_imports(path.read_text(), str(path))
           if module.split(".")[0] in PLUGINS]
    assert not bad, "hologram/ imports plugins by name:\n" + "\n".join(bad)
