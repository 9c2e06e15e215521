"""Every `pip install` / `pip wheel` command the docs show would work as written.

Read statically (running pip needs the index and minutes): the commands in fenced
blocks and in `code spans` of README.md, docs/*.md and examples/*/README.md, and the
Makefile's install line. For each:

- every local path (`-e plugins/sigil`, `examples/hologram-backend-lanes`, `.` in an
  example's README) exists, relative to the repository or to the document's folder; a
  wheel file is named after a distribution of this repository at its version;
- every requirement names a distribution of this repository, or a package one of them
  declares as a dependency (what the index is asked for), and its extras exist;
- a command that installs local paths with their dependencies (no `--no-deps`, no
  `--find-links` to wheels at hand) names every distribution of this repository those
  need, transitively, that the environment does not already hold; pip would otherwise
  ask the index for it, where it is not ("No matching distribution found for
  hologram-translator-sigil"). In a block that creates a venv the environment holds
  nothing; elsewhere it holds the development install (the Makefile's line);
- a `--no-deps` install of this repository's distributions by name is followed by the
  install of exactly the third-party packages they declare;
- `pip wheel` of a local project offline (`--no-index`) passes `--no-deps`: without it
  pip builds its dependencies too and finds none offline;
- the Makefile's install line and getting-started's "install by hand" install the same,
  every plugin folder under plugins/ (found, not listed: `$(printf -- '-e %s ' plugins/*/)`).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import attrs
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from repo_paths import DOCS, EXAMPLES, ROOT

DOCUMENTS = sorted([ROOT / "README.md", *DOCS.glob("*.md"), *EXAMPLES.glob("*/README.md")])
PROJECTS = sorted(p.parent for p in [ROOT / "pyproject.toml", *ROOT.glob("plugins/*/pyproject.toml"),
                                     *EXAMPLES.glob("*/pyproject.toml")])

TAKES_VALUE = {"-e", "--editable", "-f", "--find-links", "--target", "-t", "-w", "--wheel-dir", "--python", "-r",
               "--requirement", "-c", "--constraint"}
FLAGS = {"--no-deps", "--quiet", "-q", "--no-build-isolation", "--no-index", "--upgrade", "-U", "--force-reinstall",
         "--pre", "--user", "--dry-run"}


@attrs.frozen
class Project:
    path: Path
    name: str
    version: str | None
    requires: tuple[Requirement, ...]
    extras: dict[str, tuple[Requirement, ...]]


def _project(path: Path) -> Project:
    meta = tomllib.loads((path / "pyproject.toml").read_text())["project"]
    version = meta.get("version")
    if version is None:  # dynamic, from the package's __version__
        init = next(path.glob("*/__init__.py")).read_text()
        version = re.search(r'__version__ = "([^"]+)"', init).group(1)
    extras = {k: tuple(map(Requirement, v)) for k, v in meta.get("optional-dependencies", {}).items()}
    return Project(path, canonicalize_name(meta["name"]), version, tuple(map(Requirement, meta["dependencies"])),
                   extras)


BY_PATH = {p: _project(p) for p in PROJECTS}
BY_NAME = {p.name: p for p in BY_PATH.values()}
DECLARED = {canonicalize_name(r.name) for p in BY_PATH.values() for r in (*p.requires, *(r for rs in p.extras.values()
                                                                                       for r in rs))}


def _applies(req: Requirement, extras: set[str]) -> bool:
    return req.marker is None or any(req.marker.evaluate({"extra": e}) for e in extras or {""})


def needs(name: str, extras: set[str]) -> set[str]:
    """The distributions of this repository that installing `name[extras]` with its
    dependencies installs (itself included), on this machine."""
    found, todo = set(), [(name, extras)]
    while todo:
        each, wanted = todo.pop()
        if each in found:
            continue
        found.add(each)
        project = BY_NAME[each]
        for req in (*project.requires, *(r for e in wanted for r in project.extras.get(e, ()))):
            if canonicalize_name(req.name) in BY_NAME and _applies(req, wanted):
                todo.append((canonicalize_name(req.name), set(req.extras)))
    return found


@attrs.frozen
class Command:
    doc: Path
    line: int
    text: str  # from `pip` on
    fresh: bool  # in a block that creates a venv: nothing is installed yet

    def __str__(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}: {self.text}"


FENCE = r"^ *```[^\n]*\n(.*?)^ *```"  # a fenced block, also one indented in a list item
PIP = re.compile(r"\bpip3?\s+(?:install|wheel)\b[^\n`]*")


def commands(doc: Path) -> list[Command]:
    """The pip commands in `doc`'s fenced blocks (one a line, a comment cut off) and
    `code spans` (which may run over a line break)."""
    text = doc.read_text()
    found = []
    fences = list(re.finditer(FENCE, text, re.S | re.M))
    for block in fences:
        fresh = " -m venv " in block.group(1)
        for m in PIP.finditer(block.group(1)):
            found.append(Command(doc, text.count("\n", 0, block.start(1) + m.start()) + 1, m.group(0), fresh))
    prose = re.sub(FENCE, lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S | re.M)
    for span in re.finditer(r"`([^`]+)`", prose):
        inner = span.group(1).replace("\n", " ")
        for m in PIP.finditer(inner):
            found.append(Command(doc, prose.count("\n", 0, span.start()) + 1, m.group(0), False))
    return found


ALL = [c for doc in DOCUMENTS for c in commands(doc)]


@attrs.frozen
class Parsed:
    verb: str
    options: frozenset[str]
    paths: tuple[tuple[Path, set[str]], ...]  # local projects and their extras
    wheels: tuple[str, ...]
    names: tuple[Requirement, ...]


# `$(printf -- '-e %s ' plugins/*/)`: the shell's way of naming every plugin folder,
# expanded here as the shell would (a new plugin folder needs no edit of the command)
EVERY_FOLDER = re.compile(r"\$\(printf -- '-e %s ' ([\w./*-]+)\)")


def parse(command: Command) -> Parsed:
    text = EVERY_FOLDER.sub(lambda m: " ".join(f"-e {p.relative_to(ROOT)}" for p in sorted(ROOT.glob(m.group(1)))),
                            command.text)
    words = shlex.split(text, comments=True)
    verb, args = words[1], words[2:]
    options, paths, wheels, names = set(), [], [], []
    k = 0
    while k < len(args):
        word = args[k]
        if word in TAKES_VALUE:
            if word in ("-e", "--editable"):
                paths.append(_local(command, args[k + 1]))
            options.add(word)
            k += 2
            continue
        k += 1
        if word == "...":
            continue  # "and the rest, as above"
        if word.startswith("-"):
            assert word in FLAGS, f"{command}: option {word} is unknown to this test: add it to FLAGS or TAKES_VALUE"
            options.add(word)
        elif word.endswith(".whl"):
            wheels.append(word)
        elif "/" in word or word.startswith("."):
            paths.append(_local(command, word))
        else:
            names.append(Requirement(word))
    return Parsed(verb, frozenset(options), tuple(paths), tuple(wheels), tuple(names))


def _local(command: Command, word: str) -> tuple[Path, set[str]]:
    """A local project argument (`.[test]`, `plugins/interp`): its folder and extras."""
    path, _, extras = word.partition("[")
    extras = {e.strip() for e in extras.rstrip("]").split(",") if e.strip()}
    for base in (ROOT, command.doc.parent):
        if (base / path).resolve() in BY_PATH:
            return (base / path).resolve(), extras
    raise AssertionError(f"{command}: {path} is no project folder of this repository (from the repository root "
                         f"or from {command.doc.parent.relative_to(ROOT) or '.'})")


def test_the_docs_show_install_commands():
    installed = {path for c in ALL for path, _ in parse(c).paths}
    assert len(ALL) > 10 and ROOT / "plugins" / "interp" in installed, ALL  # the extraction finds what it must


@pytest.mark.parametrize("command", ALL, ids=str)
def test_every_install_command_names_what_exists(command):
    parsed = parse(command)
    for path, extras in parsed.paths:
        unknown = extras - BY_PATH[path].extras.keys()
        assert not unknown, f"{command}: {path.relative_to(ROOT)} has no extra {', '.join(sorted(unknown))}"
    for wheel in parsed.wheels:
        name, version = Path(wheel).name.split("-")[:2]
        project = BY_NAME.get(canonicalize_name(name))
        assert project is not None and project.version == version, \
            f"{command}: {wheel} is the wheel of no distribution of this repository at its version"
    for req in parsed.names:
        name = canonicalize_name(req.name)
        assert name in BY_NAME or name in DECLARED, \
            f"{command}: {req.name} is neither a distribution of this repository nor a declared dependency"
        if name in BY_NAME:
            unknown = set(req.extras) - BY_NAME[name].extras.keys()
            assert not unknown, f"{command}: {req.name} has no extra {', '.join(sorted(unknown))}"


def makefile_install() -> Parsed:
    """The Makefile's install line as make runs it (its plugin folders found by a
    wildcard): `make --dry-run` prints the command with every variable expanded."""
    made = subprocess.run(["make", "--dry-run", "--always-make", "venv", "PYTHON=python3"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    line = next(m.group(0) for m in re.finditer(r"pip install [^\n]*-e [^\n]*", made.stdout))
    return parse(Command(ROOT / "Makefile", 0, line.replace("--quiet", ""), True))


DEVELOPMENT = {BY_PATH[path].name for path, _ in makefile_install().paths}


@pytest.mark.parametrize("command", [c for c in ALL if c.text.split()[1] == "install"], ids=str)
def test_every_install_with_dependencies_names_the_repositorys_distributions_it_needs(command):
    parsed = parse(command)
    if "--no-deps" in parsed.options or "--find-links" in parsed.options or "-f" in parsed.options:
        return
    present = set() if command.fresh else DEVELOPMENT
    named = {BY_PATH[path].name for path, _ in parsed.paths}
    wanted = set().union(*(needs(BY_PATH[path].name, extras) for path, extras in parsed.paths))
    missing = wanted - named - present
    folders = " -e ".join(str(BY_NAME[m].path.relative_to(ROOT)) for m in sorted(missing))
    assert not missing, (f"{command}: pip would look for {', '.join(sorted(missing))} on the index, where this "
                         f"repository's distributions are not; name their folders (-e {folders})")


def _third_party(names: set[str]) -> set[str]:
    return {canonicalize_name(r.name) for n in names for r in BY_NAME[n].requires
            if canonicalize_name(r.name) not in BY_NAME and _applies(r, set())}


@pytest.mark.parametrize("command", [c for c in ALL if "--no-deps" in c.text and c.text.split()[1] == "install"],
                         ids=str)
def test_an_install_without_dependencies_by_name_is_followed_by_their_dependencies(command):
    parsed = parse(command)
    ours = {canonicalize_name(r.name) for r in parsed.names} & BY_NAME.keys()
    if not ours:
        return  # local folders or wheels into an environment that has what they need (the examples' READMEs)
    later = sorted((c for c in ALL if c.doc == command.doc and command.line <= c.line <= command.line + 3
                    and c != command), key=lambda c: c.line)
    assert later, f"{command}: installs without dependencies and never says how to install them"
    then = {canonicalize_name(r.name) for r in parse(later[0]).names}
    assert then == _third_party(ours), (f"{later[0]}: the dependencies of {', '.join(sorted(ours))} are "
                                        f"{' '.join(sorted(_third_party(ours)))}")


@pytest.mark.parametrize("command", [c for c in ALL if c.text.split()[1] == "wheel"], ids=str)
def test_an_offline_wheel_build_does_not_ask_for_dependencies(command):
    parsed = parse(command)
    if "--no-index" in parsed.options:
        assert "--no-deps" in parsed.options, (f"{command}: offline, pip wheel would build every dependency "
                                               "too and find none: add --no-deps")


def test_the_makefile_installs_what_getting_started_installs_by_hand():
    by_hand = [c for c in commands(DOCS / "getting-started.md") if c.fresh and "-e" in c.text.split()]
    assert len(by_hand) == 1, by_hand
    shown, made = parse(by_hand[0]), makefile_install()
    assert sorted(map(str, shown.paths)) == sorted(map(str, made.paths)), (by_hand[0], made)
    plugins = {p.parent for p in ROOT.glob("plugins/*/pyproject.toml")}
    assert plugins <= {path for path, _ in made.paths}, "the Makefile does not install every plugin folder"
