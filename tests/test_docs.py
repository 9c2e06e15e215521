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
