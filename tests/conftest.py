"""Fixtures shared across tests/: a clean plugin state, the command line run in process, and
plugins registered in process for one test. (The hypothesis profiles are in the repository
root's conftest.py, for the plugins' tests too.)"""

from __future__ import annotations

import re
from typing import Callable, Iterator

import pytest

from hologram.cli import main as cli
from hologram.errors import UnsupportedProgram
from hologram.registry import plugins


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A test run on every available backend skips, with the reason, where a *partial*
    backend (one whose capabilities leave part of the ISA out, as wgpu's do) refuses the
    program before prepare: such a backend is described, not failing (docs/backends.md,
    "Capabilities"). A refusal by a backend that declares the whole ISA still fails."""
    try:
        return (yield)
    except UnsupportedProgram as exc:
        named = re.match(r"backend '([^']+)' cannot run program", exc.message)
        if named is None:
            raise
        from hologram.registry.lookups import backends

        backend = backends().get(named.group(1))
        if backend is None or backend.capabilities.complete:
            raise
        pytest.skip(f"{backend.name} does not declare what this test runs: {exc.message.splitlines()[0]}")


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
