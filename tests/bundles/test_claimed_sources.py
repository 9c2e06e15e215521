"""A folder of sources holds only the files a translator claims (Translator.claims):
a translator whose extension also names other files (the Python one: .py modules without
kernels) says which hold kernels; a file named on its own is always a document."""

from __future__ import annotations

import types

import pytest

from hologram.bundles.build import collect
from hologram.core.errors import BundleError, DocumentError
from hologram.core.hookspecs import Translator, hookimpl


def _plugin() -> types.SimpleNamespace:
    def parse(text: str, file: str) -> list:
        raise DocumentError(f"{file}: not parsed in this test")

    @hookimpl
    def hologram_register_translators(register):
        register(Translator("fake", (".fk",), parse, claims=lambda text: text.startswith("kernel")))

    return types.SimpleNamespace(hologram_register_translators=hologram_register_translators)


def test_a_folder_skips_the_files_its_translator_does_not_claim(tmp_path, fresh_plugins, register_plugin):
    register_plugin(_plugin(), "fake")
    (tmp_path / "a.fk").write_text("kernel a\n")
    (tmp_path / "b.fk").write_text("just a file\n")
    (tmp_path / "c.toml").write_text("[kernel]\n")
    assert sorted(collect([tmp_path])) == ["sources/a.fk", "sources/c.toml"]
    assert sorted(collect([tmp_path / "b.fk"])) == ["sources/b.fk"]  # named: a document
    (tmp_path / "a.fk").write_text("nothing\n")
    (tmp_path / "c.toml").unlink()
    with pytest.raises(BundleError, match="no kernel documents in this folder"):
        collect([tmp_path])
