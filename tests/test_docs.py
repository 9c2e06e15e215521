"""The reference docs keep up with the tables they document, and their examples print
what they show."""

import contextlib
import io
import os
import re
import shlex
import traceback

import pytest

from hologram.dsl.functions import FUNCTIONS
from hologram.isa.opcodes import OPCODES

from repo_paths import DOCS, ROOT



@pytest.mark.parametrize("op", sorted(OPCODES))
def test_every_opcode_is_in_the_isa_reference(op):
    assert re.search(rf"`{re.escape(op)}[`.\s]", (DOCS / "isa.md").read_text()), f"docs/isa.md lacks {op}"


def code_words(text: str) -> set[str]:
    """Identifiers inside `code spans` (the reference lists functions as `sin cos tan`)."""
    return {w for span in re.findall(r"`+([^`]+)`+", text) for w in re.findall(r"[A-Za-z_]\w*", span)}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_function_is_in_the_dsl_reference(name):
    assert name in code_words((DOCS / "dsl.md").read_text()), f"docs/dsl.md lacks {name}"


def test_every_doc_the_readme_links_exists():
    readme = (ROOT / "README.md").read_text()
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / link).is_file(), link


# --------------------------------------------------------------------- the environment
CODE_FOLDERS = ("hologram", "plugins", "benchmarks", "tests", "examples", ".ci")


def environment_variables_read() -> dict[str, str]:
    """Every HOLOGRAM_* name in the repository's code (Python, shell, the Makefile), with
    one file that names it: a name written in code is read, or set for a process that
    reads it."""
    found: dict[str, str] = {}
    paths = [p for folder in CODE_FOLDERS for p in (ROOT / folder).rglob("*")
             if p.suffix in (".py", ".sh") and ".egg-info" not in str(p)] + [ROOT / "Makefile"]
    for path in paths:
        for name in re.findall(r"\bHOLOGRAM_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(errors="replace")):
            found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def environment_table() -> set[str]:
    """The variables docs/api.md's "Environment" table lists (`HOLOGRAM_DEBUG=1` counts as
    HOLOGRAM_DEBUG)."""
    api = (DOCS / "api.md").read_text()
    section = api[api.index("## Environment"):]
    section = section[:section.find("\n## ", 1) if "\n## " in section[1:] else len(section)]
    return set(re.findall(r"^\| `(HOLOGRAM_[A-Z0-9_]+)", section, re.M))


def test_every_environment_variable_is_in_the_api_reference():
    read, listed = environment_variables_read(), environment_table()
    assert "HOLOGRAM_NUM_THREADS" in read and "HOLOGRAM_CACHE_DIR" in listed  # the scan finds what it must
    missing = {name: where for name, where in read.items() if name not in listed}
    assert not missing, f"docs/api.md's Environment table lacks {missing} (name: a file that reads it)"
    stale = listed - read.keys()
    assert not stale, f"docs/api.md's Environment table lists variables nothing reads: {sorted(stale)}"


# ------------------------------------------------------------- the docs' examples, run
# A fenced block a doc marks with an HTML comment just before it is run, and what it
# shows must be what running it prints (docs/testing.md, "Examples in the docs"):
#
#   <!-- doc-test: file NAME -->                    the block is the file NAME
#   <!-- doc-test: file NAME from OTHER replace "OLD" "NEW" -->   (no block) NAME is OTHER with OLD -> NEW
#   <!-- doc-test: shell -->                        `$ hologram ...` / `$ python -c ...` lines, each
#                                                   followed by what it prints (stdout, then stderr)
#   <!-- doc-test: python -->                       a `>>>` session: each expression's repr, or
#                                                   `ErrorClass: message` for what it raises
#
# In shown output a line `...` stands for any lines. The files and commands of one doc
# share a folder and one Python session, in the order the doc has them.
MARKER = re.compile(r"<!-- doc-test: (.*?) -->\n(?:(```[^\n]*\n(.*?)^```\n?))?", re.S | re.M)
EXAMPLE_DOCS = ("getting-started.md",)


def doc_examples(doc: str) -> list[tuple[int, list[str], str | None]]:
    """(line, directive words, block text or None) for every marked example of `doc`."""
    text = (DOCS / doc).read_text()
    return [(text.count("\n", 0, m.start()) + 1, shlex.split(m.group(1)), m.group(3))
            for m in MARKER.finditer(text)]


def matches(shown: list[str], printed: list[str]) -> bool:
    """Whether `printed` is `shown`, a `...` line of `shown` standing for any lines."""
    if not shown:
        return not printed
    if shown[0].strip() == "...":
        return any(matches(shown[1:], printed[k:]) for k in range(len(printed) + 1))
    return bool(printed) and shown[0].rstrip() == printed[0].rstrip() and matches(shown[1:], printed[1:])


def _shell(block: str, run_cli) -> list[tuple[str, list[str], list[str]]]:
    """(command, shown, printed) per `$` line of a shell example."""
    out, command, shown = [], None, []
    for line in block.splitlines() + ["$ "]:
        if not line.startswith("$ "):
            shown.append(line)
            continue
        if command:
            while shown and not shown[-1].strip():
                shown.pop()
            out.append((command, shown, _run_command(command, run_cli)))
        command, shown = line[2:].strip(), []
    return out


def _run_command(command: str, run_cli) -> list[str]:
    words = shlex.split(command)
    if words[0] == "hologram":
        _, printed, errors = run_cli(*words[1:])
        return (printed + errors).splitlines()
    assert words[:2] == ["python", "-c"], f"doc-test runs hologram and python -c commands, not {command!r}"
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        exec(words[2], {})
    return captured.getvalue().splitlines()


def _python(block: str, scope: dict) -> list[tuple[str, list[str], list[str]]]:
    """(statement, shown, printed) per `>>>` statement of a Python session, run in
    `scope` (one session per doc: a later block uses what an earlier one defined)."""
    statements: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith(">>> "):
            statements.append((line[4:], []))
        elif line.startswith("... ") and statements:
            statements[-1] = (statements[-1][0] + "\n" + line[4:], statements[-1][1])
        elif statements:
            statements[-1][1].append(line)
    out = []
    for source, shown in statements:
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                try:
                    value = eval(compile(source, "<doc>", "eval"), scope)
                except SyntaxError:
                    exec(compile(source, "<doc>", "exec"), scope)
                    value = None
            text = printed.getvalue() + ("" if value is None else repr(value))
        except Exception as exc:  # noqa: BLE001 - the doc shows it as a session would
            text = "".join(traceback.format_exception_only(type(exc), exc)).removeprefix(
                f"{type(exc).__module__}.").strip()
        out.append((source, shown, text.splitlines()))
    return out


def test_shown_output_matches_with_ellipses_only_where_it_says_so():
    assert matches(["a", "...", "d"], ["a", "b", "c", "d"]) and matches(["a", "..."], ["a"])
    assert not matches(["a", "d"], ["a", "b", "d"]) and not matches(["a", "...", "d"], ["a", "b"])
    assert not matches(["a"], ["a", "b"]) and matches(["a  "], ["a"])


@pytest.fixture
def docs_folder(tmp_path, monkeypatch, fresh_plugins):
    for name in [n for n in os.environ if n.startswith("HOLOGRAM_") and n != "HOLOGRAM_CACHE_DIR"]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("doc", EXAMPLE_DOCS)
def test_the_docs_examples_print_what_they_show(doc, docs_folder, run_cli):
    """Each marked example of `doc` runs, in order, and prints what the doc shows."""
    pytest.importorskip("hologram_cpu_llvm")  # the shown output names the default backend, cpu_llvm
    examples, session = doc_examples(doc), {}
    assert examples, f"docs/{doc} marks no example with <!-- doc-test: ... -->"
    for line, words, block in examples:
        where = f"docs/{doc}:{line}"
        if words[0] == "file" and block is not None:
            (docs_folder / words[1]).write_text(block)
        elif words[0] == "file":
            name, _, other, _, old, new = words[1:]
            text = (docs_folder / other).read_text()
            assert text.count(old) == 1, f"{where}: {other} holds {old!r} {text.count(old)} times, not once"
            (docs_folder / name).write_text(text.replace(old, new))
        else:
            assert block is not None, f"{where}: a doc-test {words[0]} example must come before its block"
            runs = _shell(block, run_cli) if words[0] == "shell" else _python(block, session)
            for command, shown, printed in runs:
                assert matches(shown, printed), (f"{where}: `{command}` prints\n" + "\n".join(printed)
                                                 + "\nbut the doc shows\n" + "\n".join(shown))
