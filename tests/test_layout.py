"""The folder layout is the pipeline (docs/architecture.md): every import, at module
level or inside a function, runs from a later stage to an earlier one, and no files
import each other in a circle. Read from the sources with `ast`, so an import nobody
runs yet counts as much as one that runs at start-up."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from repo_paths import ROOT

PACKAGES = {"hologram": ROOT / "hologram",
            "hologram_interp": ROOT / "plugins/interp/hologram_interp",
            "hologram_cpu_llvm": ROOT / "plugins/cpu_llvm/hologram_cpu_llvm",
            "hologram_sigil": ROOT / "plugins/sigil/hologram_sigil",
            "hologram_python": ROOT / "plugins/python/hologram_python"}

# A module may import from its own folder or from a folder of a lower rank; folders of
# one rank are independent of each other (isa and dsl, verify and lower).
RANKS = {
    "hologram.core": 0,
    "hologram.ir": 1,
    "hologram.isa": 2, "hologram.dsl": 2,
    "hologram.verify": 3, "hologram.lower": 3,
    "hologram.passes": 4,
    "hologram.runtime": 5,
    "hologram.bundles": 6,
    "hologram": 7,  # the package's public face: hologram/__init__.py
    "hologram_interp": 8, "hologram_cpu_llvm": 8,  # the backends, installed as plugins
    "hologram_python": 8,  # the Python-function translator, installed as a plugin
    "hologram.testing": 9,
    "hologram_sigil": 10,  # the sigil translator, installed as a plugin (its generated circuits use the test kit)
    "hologram.cli": 10,
    "hologram.__main__": 11,  # `python -m hologram`: the command
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
    """docs/architecture.md lists every module under the heading of its folder."""
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
        where = {"hologram_interp": "The backends", "hologram_cpu_llvm": "The backends",
                 "hologram_python": "The Python translator"}.get(top, f"`{top.replace('.', '/')}/`")
        body = next((b for h, b in sections.items() if where in h), "")
        if path.name not in body:
            missing.append(f"{path.relative_to(ROOT)} (under the heading with {where})")
    assert not missing, "docs/architecture.md does not list:\n" + "\n".join(missing)


# --- translator plugins: hologram through its public translator API only -------------------
# (docs/plugins.md, "Translators"; the backend plugins have a rule of their own)

TRANSLATOR_PLUGINS = {"hologram_python": ROOT / "plugins/python/hologram_python",
                      "hologram_sigil": ROOT / "plugins/sigil/hologram_sigil",
                      "hologram_hgk": ROOT / "examples/hologram-translator-hgk/hologram_hgk"}
TRANSLATOR_API = {"hologram.translator", "hologram.errors"}
TEST_KIT = "hologram.testing"  # for a plugin's `cases` module only: its hook's contract is in the kit's types


def is_hologram_module(name: str) -> bool:
    return name in MODULES and (name == "hologram" or name.startswith("hologram.")) or \
        any(m.startswith(name + ".") for m in MODULES if m.startswith("hologram."))


def hologram_names(source: str, file: str = "<source>") -> set[str]:
    """The hologram modules a module uses: imported (`import`, `from ... import`, at any
    level), or named by a string handed to a call (`importlib.import_module("hologram.x")`,
    `__import__(...)`, a lazy loader of the plugin's own)."""
    found = set()
    for node in ast.walk(ast.parse(source, file)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.update(f"{node.module}.{a.name}" if is_hologram_module(f"{node.module}.{a.name}") else node.module
                         for a in node.names)
        elif isinstance(node, ast.Call):
            found.update(arg.value for arg in (*node.args, *(k.value for k in node.keywords))
                         if isinstance(arg, ast.Constant) and isinstance(arg.value, str))
    return {n for n in found if is_hologram_module(n)}


def allowed_for(module: str) -> set[str]:
    return TRANSLATOR_API | ({TEST_KIT} if module.rpartition(".")[2] == "cases" else set())


def translator_plugin_violations(plugins: dict[str, Path]) -> list[str]:
    bad = []
    for package, root in plugins.items():
        for path in sorted(root.rglob("*.py")):
            parts = [package, *path.relative_to(root).with_suffix("").parts]
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            allowed = allowed_for(module)
            for name in sorted(hologram_names(path.read_text(), str(path))):
                if not any(name == a or name.startswith(a + ".") for a in allowed):
                    bad.append(f"{module} uses {name}")
    return bad


def test_translator_plugins_import_only_the_translator_api():
    bad = translator_plugin_violations(TRANSLATOR_PLUGINS)
    assert not bad, ("a translator plugin imports hologram only through hologram.translator (its `cases` "
                     "module the test kit too):\n" + "\n".join(bad))


@pytest.mark.parametrize("source, found", [
    ("from hologram.translator import KernelDef", {"hologram.translator"}),
    ("import hologram.dsl.schema", {"hologram.dsl.schema"}),
    ("from hologram import testing", {"hologram.testing"}),
    ("def f():\n    from hologram.runtime.driver import compile_kdef", {"hologram.runtime.driver"}),
    ("import importlib\nm = importlib.import_module('hologram.runtime.compile')", {"hologram.runtime.compile"}),
    ("m = __import__('hologram.core.errors', fromlist=['x'])", {"hologram.core.errors"}),
    ("load = lazy(module='hologram.dsl')", {"hologram.dsl"}),
    ("from . import sibling\nif module == 'hologram.types': pass", set()),  # a name the plugin reads, not uses
])
def test_the_translator_rule_sees_every_kind_of_import(source, found):
    assert hologram_names(source) == found


def test_the_translator_rule_lets_only_cases_modules_use_the_test_kit():
    assert TEST_KIT in allowed_for("hologram_sigil.cases") and TEST_KIT not in allowed_for("hologram_sigil.api")
