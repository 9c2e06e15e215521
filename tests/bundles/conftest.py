"""Fixtures the bundle tests share: a small bundle built once per module, and a cache
folder of the test's own (HOLOGRAM_CACHE_DIR)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hologram.bundles.build import build


@pytest.fixture(scope="module")
def tiny_bundle(tmp_path_factory) -> Path:
    """tiny 1.0.0: softmax and vadd."""
    path = tmp_path_factory.mktemp("tiny") / "tiny-1.0.0.hgb"
    build(["kernels/softmax.toml", "kernels/vadd.toml"], "tiny", "1.0.0", path, cache_dir=False, jobs=1)
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HOLOGRAM_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"
