"""The reference docs keep up with the tables they document."""

import re

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
