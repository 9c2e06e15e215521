"""The files bundles live in: the modes they are written with, and the cache a source
checkout builds the standard library into (docs/bundles.md, "The standard library")."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hologram.bundles.build import build

DOCUMENT = '''
[kernel]
name = "vadd"
version = "1.0.0"
inputs = { x = "f32[n]", y = "f32[n]" }
outputs = { z = "f32[n]" }
body = "z = x + y"
'''


@pytest.mark.skipif(os.name != "posix", reason="file modes and the umask are POSIX's")
@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_bundle_is_written_with_the_mode_the_umask_gives(tmp_path, umask, mode):
    (tmp_path / "v.toml").write_text(DOCUMENT)
    old = os.umask(umask)
    try:
        for out in (tmp_path / "v-1.0.0.hgb", tmp_path / "v-1.0.0.hgb"):  # new, then replaced
            build([tmp_path / "v.toml"], "v", "1.0.0", out, cache_dir=tmp_path / "cache", jobs=1, native="none")
            assert stat.S_IMODE(out.stat().st_mode) == mode
        assert all(stat.S_IMODE(p.stat().st_mode) == mode for p in (tmp_path / "cache").iterdir())
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "v-1.0.0.hgb", "v.toml"]  # no temporary left
