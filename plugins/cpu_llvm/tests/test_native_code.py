"""Object code to ship (hologram.bundles): built for a named CPU level, taken back only
when it fits this CPU and this code generator, checked for form by `check_native`."""

from __future__ import annotations

import numpy as np
import pytest
from repo_paths import KERNELS

import hologram as hg
from hologram.core.errors import ArgumentError, HologramWarning
from hologram_cpu_llvm import cpu, jit
from hologram_cpu_llvm.backend import CpuLlvmBackend


@pytest.fixture
def softmax():
    return hg.compile_file(KERNELS / "softmax.toml").program


def runnable_level() -> str:
    levels = [t for t in jit.level_targets() if jit.has_features(cpu.X86_64_LEVELS[t])]
    if not levels:
        pytest.skip("no x86-64 level this CPU runs")
    return levels[-1]


def test_shipped_code_runs_when_it_fits(tmp_path, softmax):
    level = runnable_level()
    built = CpuLlvmBackend(cache_dir=False).compile_native(softmax, level)
    assert built["cpu"] == level and set(built["features"]) == set(cpu.X86_64_LEVELS[level])
    fresh = CpuLlvmBackend(num_threads=1, cache_dir=False)
    before = dict(jit.STATS)
    exe = fresh.prepare_native(softmax, [built])
    assert exe is not None and jit.STATS["emit"] == before.get("emit", 0)  # loaded, not compiled
    x = np.linspace(-1, 1, 100, dtype=np.float32)
    y = np.empty_like(x)
    fresh.launch(exe, {"x": x, "y": y}, {}, {"n": 100})
    e = np.exp(x - x.max())
    np.testing.assert_allclose(y, e / e.sum(), rtol=1e-6)
    assert fresh.check_native(softmax, built) is None


def test_shipped_code_that_does_not_fit_is_never_loaded(softmax):
    level = runnable_level()
    backend = CpuLlvmBackend(num_threads=1, cache_dir=False)
    built = backend.compile_native(softmax, level)
    for bad in ({**built, "features": (*built["features"], "a-feature-no-cpu-has")},
                {**built, "toolchain": "codegen 0+another; LLVM 1.0.0"},
                {**built, "triple": "aarch64-unknown-linux-gnu"}):
        assert CpuLlvmBackend(num_threads=1, cache_dir=False).prepare_native(softmax, [bad]) is None
    with pytest.warns(HologramWarning, match="shipped for program 'softmax' .* is not used: malformed object code"):
        garbage = {**built, "object": b"\x7fELF garbage"}  # fits this CPU, but is no object: said so
        assert CpuLlvmBackend(num_threads=1, cache_dir=False).prepare_native(softmax, [garbage]) is None
    assert "malformed" in backend.check_native(softmax, {**built, "object": b"\x7fELF\x02\x01" + b"\0" * 8})
    assert backend.check_native(softmax, {**built, "meta": {"stages": []}}) is not None
    with pytest.raises(ArgumentError, match="no target 'x86-64-v9'"):
        backend.compile_native(softmax, "x86-64-v9")


def test_shipped_code_outlives_a_change_to_the_verifier(softmax, monkeypatch):
    """Shipped code depends on the code generator, not on the verifier (the program is
    verified at load by whichever runs there); the disk cache's key does include it."""
    level = runnable_level()
    built = CpuLlvmBackend(cache_dir=False).compile_native(softmax, level)
    before = CpuLlvmBackend(cache_dir=False).cache_key("p")
    from hologram_cpu_llvm import backend

    monkeypatch.setattr(backend, "_verifier_version", lambda: "verifier edited")
    fresh = CpuLlvmBackend(num_threads=1, cache_dir=False)
    assert fresh.cache_key("p") != before and "verifier edited" in fresh.cache_key("p")
    assert fresh.prepare_native(softmax, [built]) is not None


def test_the_os_tells_the_level_features_as_llvm_does():
    """cpu.py answers from /proc/cpuinfo without loading LLVM; wherever it answers, it must
    give LLVM's answer, and it leaves to LLVM the features its table does not map."""
    answered = 0
    for feature in cpu.X86_64_LEVELS["x86-64-v4"]:
        said = cpu.has_features([feature])
        if said is not None:
            assert said == jit.has_features([feature]), feature
            answered += 1
    assert answered == len(cpu.X86_64_LEVELS["x86-64-v4"]) or cpu.fingerprint() is None
    assert cpu.has_features(["a-feature-no-table-maps"]) is None
    assert cpu.same_platform(jit.host().triple)
    other = "aarch64-unknown-linux-gnu" if cpu.arch() != "aarch64" else "x86_64-unknown-linux-gnu"
    assert not cpu.same_platform(other)
