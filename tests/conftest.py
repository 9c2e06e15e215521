"""Fixtures shared across tests/: a clean plugin state, the command line run in process, and
plugins registered in process for one test. (The hypothesis profiles are in the repository
root's conftest.py, for the plugins' tests too.)"""

from __future__ import annotations

from typing import Callable, Iterator

import pytest

from hologram.cli import main as cli
from hologram.registry import plugins


@pytest.fixture
def fresh_plugins(monkeypatch) -> Iterator[None]:
    """No plugin or backend chosen by the environment (HOLOGRAM_PLUGINS, HOLOGRAM_BACKEND
    unset), and plugins loaded afresh before and after the test."""
    monkeypatch.delenv("HOLOGRAM_PLUGINS", raising=False)
    monkeypatch.delenv("HOLOGRAM_BACKEND", raising=False)
    plugins.reset()
    yield
    plugins.reset()


@pytest.fixture
def run_cli(capsys) -> Callable[..., tuple[int, str, str]]:
    """Runs `hologram ARGV...` in this process: (exit code, stdout, stderr)."""
    def run(*argv: str) -> tuple[int, str, str]:
        code = cli.main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err
    return run


@pytest.fixture
def register_plugin() -> Iterator[Callable[[object, str], object]]:
    """Registers an object with the plugin manager, as an installed plugin's hooks are, until
    the test ends."""
    registered = []

    def register(plugin: object, name: str) -> object:
        manager = plugins.plugin_manager()
        manager.register(plugin, name=name)
        registered.append((manager, plugin))
        return plugin
    yield register
    for manager, plugin in reversed(registered):
        manager.unregister(plugin)
