"""The files bundles live in: the modes they are written with, and the cache a source
checkout builds the standard library into (docs/bundles.md, "The standard library")."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hologram.bundles.build import build

from dsl_helpers import document

DOCUMENT = document("z = x + y", {"x": "f32[n]", "y": "f32[n]"}, {"z": "f32[n]"}, name="vadd")


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


# ------------------------------------------------- a bundle built at its first load
@pytest.fixture
def checkout(tmp_path, monkeypatch, register_plugin):
    """A plugin used from its source checkout, as the stdlib is (hologram.bundles.shipping):
    its documents in kernels/, its bundle built at the first load into the cache."""
    from hologram.bundles.shipping import bundle_ref
    from hologram.core.hookspecs import hookimpl

    def use(cache: Path) -> Path:
        monkeypatch.setenv("HOLOGRAM_CACHE_DIR", str(cache))
        docs = tmp_path / "kernels"
        docs.mkdir(exist_ok=True)
        (docs / "v.toml").write_text(DOCUMENT)
        ref = bundle_ref("minilib", "1.0.0", tmp_path / "package", docs)

        class Plugin:
            @hookimpl
            def hologram_register_bundles(self, register):
                register(ref)
        register_plugin(Plugin(), "minilib_plugin")
        return Path(ref.path)
    return use


def _load_warned(name: str = "minilib"):
    import warnings

    from hologram.bundles.load import load_bundle
    from hologram.core.errors import HologramWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lib = load_bundle(name)
    return lib, [str(w.message) for w in caught if issubclass(w.category, HologramWarning)]


def _ones(lib) -> list:
    import numpy as np

    return lib.vadd(np.ones(3, np.float32), np.ones(3, np.float32)).tolist()


def test_a_damaged_bundle_in_the_cache_is_built_again(checkout, tmp_path):
    path = checkout(tmp_path / "cache")
    lib, warned = _load_warned()
    assert path.is_file() and warned == [] and _ones(lib) == [2, 2, 2] and lib.path == str(path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    lib, warned = _load_warned()
    assert _ones(lib) == [2, 2, 2] and len(warned) == 1 and "built again" in warned[0]
    assert _load_warned()[1] == []  # the file written again is intact


def test_a_bundle_in_the_cache_that_is_not_the_checkouts_is_built_again(checkout, tmp_path):
    path = checkout(tmp_path / "cache")
    other = tmp_path / "other.toml"
    other.write_text(DOCUMENT.replace("x + y", "x - y"))
    path.parent.mkdir(parents=True)
    build([other], "minilib", "1.0.0", path, cache_dir=False, jobs=1, native="none")  # someone else's, same name
    lib, warned = _load_warned()
    assert _ones(lib) == [2, 2, 2] and len(warned) == 1 and "sources/other.toml is not a document of" in warned[0]


def test_a_cache_that_is_a_file_builds_the_bundle_in_memory(checkout, tmp_path):
    cache = tmp_path / "cache"
    cache.write_text("not a folder")
    checkout(cache)
    lib, warned = _load_warned()
    assert _ones(lib) == [2, 2, 2] and lib.path is None and "<Library minilib 1.0.0 (built in memory;" in repr(lib)
    assert len(warned) == 1 and "cannot write the bundle minilib 1.0.0" in warned[0] and "built in memory" in warned[0]


def test_a_read_only_cache_builds_the_bundle_in_memory(checkout, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    checkout(cache)
    cache.chmod(0o500)
    if os.name != "posix" or os.geteuid() == 0:  # root writes whatever the mode: the OS's refusal, injected
        def refuse(path, *args, **kwargs):
            raise PermissionError(13, "Permission denied", str(path))
        monkeypatch.setattr("hologram.bundles.build._create_temporary", refuse)
    try:
        lib, warned = _load_warned()
    finally:
        cache.chmod(0o700)
    assert _ones(lib) == [2, 2, 2] and lib.path is None and "cannot write the bundle" in warned[0]
    assert "Permission denied" in warned[0]


NATIVE_CHILD = """
import json, sys
import numpy as np
import hologram as hg
from hologram_cpu_llvm import jit

lib = hg.load_bundle(sys.argv[1])
ok = lib.vadd(np.ones(3, np.float32), np.ones(3, np.float32)).tolist() == [2, 2, 2]
print(json.dumps([ok, getattr(lib, "trusted", None), jit.STATS["optimize"], jit.STATS["emit"]]))
"""


def test_native_code_in_the_cache_never_runs(checkout, tmp_path):
    """The cache is no place to trust: whoever can write it could put object code there
    (the bundle built at the first load has none). The bundle is used, its programs
    verified as any bundle's, and compiled here."""
    import json
    import subprocess
    import sys

    jit = pytest.importorskip("hologram_cpu_llvm.jit")
    from hologram_cpu_llvm import cpu

    levels = [t for t in jit.level_targets() if jit.has_features(cpu.X86_64_LEVELS[t])]
    if not levels:
        pytest.skip("no x86-64 level this CPU runs")
    path = checkout(tmp_path / "cache")
    path.parent.mkdir(parents=True)
    # the checkout's own documents, with object code: what a writer of the cache can make
    build([tmp_path / "kernels"], "minilib", "1.0.0", path, cache_dir=False, jobs=1, native=levels[0])
    plugin = (f"import hologram.bundles.shipping as s, hologram.core.hookspecs as h, hologram.registry.plugins as p\n"
              f"class P:\n"
              f"    @h.hookimpl\n"
              f"    def hologram_register_bundles(self, register):\n"
              f"        register(s.bundle_ref('minilib', '1.0.0', {str(tmp_path / 'package')!r}, "
              f"{str(tmp_path / 'kernels')!r}))\n"
              f"p.plugin_manager().register(P(), name='minilib_plugin')\n")
    env = {**os.environ, "HOLOGRAM_CACHE_DIR": str(tmp_path / "cache"), "HOLOGRAM_BACKEND": "cpu_llvm"}
    done = subprocess.run([sys.executable, "-c", plugin + NATIVE_CHILD, "minilib"], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    ok, trusted, optimized, emitted = json.loads(done.stdout)
    assert ok and optimized == emitted == 1 and trusted is False  # compiled here, the shipped object unused
