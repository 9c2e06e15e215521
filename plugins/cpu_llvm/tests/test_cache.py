"""cpu_llvm's caches (hologram_cpu_llvm.cache): compiled objects on disk (hits, keys, corrupt
entries, the entry format, a fresh process's hit) and the bounded memory cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import hologram.backend as sdk
from hologram.core.errors import VerifyError
from hologram.isa.asm import parse_program
from hologram.testing import assert_close
from hologram_cpu_llvm import CpuLlvmBackend, cache, jit, threads

from runtime_cases import REV, TOTALS


# --------------------------------------------------------------------- the disk cache
def test_memory_cache_and_disk_cache(fake_backend, tmp_path):
    program = REV.program()
    b, codegen = fake_backend(REV)
    before = jit.STATS.copy()
    exe = b.prepare(program)
    assert b.prepare(program) is exe and len(codegen.calls) == 1 and not exe.from_cache
    assert jit.STATS["optimize"] == before["optimize"] + 1
    files = list((tmp_path / "cache").glob("*.hgo"))
    assert len(files) == 1
    # a fresh backend (empty memory cache) loads the object: no codegen, no optimizer
    b2, codegen2 = fake_backend(REV)
    exe2 = b2.prepare(program)
    assert exe2.from_cache and codegen2.calls == []
    assert jit.STATS["optimize"] == before["optimize"] + 1
    x = np.arange(5, dtype=np.float32)
    z = np.zeros_like(x)
    b2.launch(exe2, {"x": x, "z": z}, {"a": 1.0}, {"n": 5})
    np.testing.assert_array_equal(z, x[::-1])
    # another codegen version is another key
    b3, _ = fake_backend(REV, codegen_version="test-2")
    assert not b3.prepare(program).from_cache
    assert len(list((tmp_path / "cache").glob("*.hgo"))) == 2


def test_a_disk_hit_is_not_verified_again_and_a_bad_program_is_still_refused(fake_backend, monkeypatch):
    b, _ = fake_backend(REV)
    b.prepare(REV.program())
    calls = []
    real = sdk.verify  # what prepare imports when it compiles (`from hologram.backend import verify`)
    monkeypatch.setattr(sdk, "verify", lambda p: calls.append(p) or real(p))
    b2, codegen2 = fake_backend(REV)
    assert b2.prepare(REV.program()).from_cache and calls == [] and codegen2.calls == []
    # the entry certifies its own program only: an unprovable access is refused as before
    bad = parse_program(REV.asm.replace("[x + %", "[x + 1 + %", 1))
    with pytest.raises(VerifyError):
        b2.prepare(bad)
    assert len(calls) == 1


# Ways an entry can go bad: each takes (key, file bytes) and returns the new bytes.
CORRUPTIONS = {
    "truncated": lambda key, data: data[: len(data) // 2],
    "flipped": lambda key, data: data[:-10] + bytes([data[-10] ^ 0x40]) + data[-9:],
    "foreign": lambda key, data: cache.encode_entry("some other key", cache.decode_entry(key, data)),
    "stale stage table": lambda key, data: cache.encode_entry(key, cache.Entry(
        {"stages": [{"name": "nope", "stage_index": 0, "reduce_buffers": []}]}, cache.decode_entry(key, data).obj)),
    "no stage table": lambda key, data: cache.encode_entry(key, cache.Entry([], cache.decode_entry(key, data).obj)),
    "not an object": lambda key, data: cache.encode_entry(key, cache.Entry(
        cache.decode_entry(key, data).meta, b"\x7fELF\x02\x01" + bytes(100))),
    "empty": lambda key, data: b"",
    "garbage": lambda key, data: b"garbage" * 100,
}


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_corrupt_disk_entry_is_rebuilt(fake_backend, corruption):
    program = REV.program()
    b, _ = fake_backend(REV)
    key = b.cache_key(b.prepare(program).key)
    path = b.disk.path(key)
    path.write_bytes(CORRUPTIONS[corruption](key, path.read_bytes()))
    b2, codegen2 = fake_backend(REV)
    exe = b2.prepare(program)
    assert not exe.from_cache and len(codegen2.calls) == 1
    assert cache.decode_entry(key, path.read_bytes()) is not None  # rewritten whole
    x = np.arange(4, dtype=np.float32)
    z = np.zeros_like(x)
    b2.launch(exe, {"x": x, "z": z}, {"a": 1.0}, {"n": 4})
    np.testing.assert_array_equal(z, x[::-1])


def test_disk_cache_entry_format(tmp_path):
    entry = cache.Entry({"stages": [1, 2]}, b"\x7fELF" + bytes(range(256)))
    data = cache.encode_entry("k", entry)
    assert data.startswith(cache.MAGIC) and cache.decode_entry("k", data) == entry
    assert cache.decode_entry("k2", data) is None
    for cut in range(len(data)):
        assert cache.decode_entry("k", data[:cut]) is None
    d = cache.DiskCache(tmp_path / "c")
    assert d.load("k") is None and d.store("k", entry) and d.load("k") == entry
    assert [p.name for p in (tmp_path / "c").iterdir()] == [d.path("k").name]  # no temp files left


def test_unwritable_cache_dir_is_only_a_miss(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    d = cache.DiskCache(blocker / "sub")
    assert d.store("k", cache.Entry({}, b"x")) is False and d.load("k") is None


def test_cache_dir_and_thread_count_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("HOLOGRAM_CACHE_DIR", str(tmp_path / "here"))
    assert cache.default_cache_dir() == tmp_path / "here"
    monkeypatch.delenv("HOLOGRAM_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert cache.default_cache_dir() == tmp_path / "xdg" / "hologram" / "cpu_llvm"
    for value, expected in (("3", 3), ("1", 1), ("0", os.cpu_count()), ("many", os.cpu_count())):
        monkeypatch.setenv("HOLOGRAM_NUM_THREADS", value)
        assert threads.thread_count() == expected
        assert CpuLlvmBackend(cache_dir=False).num_threads == expected


# ------------------------------------------------------------------- the memory cache
def test_memory_cache_is_bounded():
    m = cache.MemoryCache(2)
    m.put("a", 1), m.put("b", 2), m.get("a"), m.put("c", 3)
    assert (m.get("a"), m.get("b"), m.get("c"), len(m)) == (1, None, 3, 2)


# -------------------------------------------------------------------- a fresh process
_CHILD = """
import json, sys
import numpy as np
import hologram as hg
from hologram_cpu_llvm import jit
k = hg.compile(sys.argv[1], format="toml").on("cpu_llvm")
n = int(sys.argv[2])
x = (np.arange(n, dtype=np.int64) * 2654435761) % 1000003 - 500000
f = np.sin(np.arange(n, dtype=np.float64))
s, m, t = k(x, f)
print(json.dumps({"stats": dict(jit.STATS), "s": int(s), "m": int(m), "t": float(t),
                  "threads": k.backend.num_threads}))
"""


def _child(tmp_path, env_extra, n=100_000):
    env = {**os.environ, "HOLOGRAM_CACHE_DIR": str(tmp_path / "cache"), **env_extra}
    env.pop("HOLOGRAM_BACKEND", None)
    proc = subprocess.run([sys.executable, "-c", _CHILD, TOTALS, str(n)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_fresh_process_hits_the_disk_cache_and_thread_counts_agree(tmp_path):
    cold = _child(tmp_path, {"HOLOGRAM_NUM_THREADS": "1"})
    assert cold["stats"].get("optimize") == 1 and cold["threads"] == 1
    warm = _child(tmp_path, {"HOLOGRAM_NUM_THREADS": "2"})
    assert warm["threads"] == 2
    assert warm["stats"].get("optimize", 0) == 0 and warm["stats"].get("emit", 0) == 0
    assert warm["stats"]["load"] == 1
    assert (warm["s"], warm["m"]) == (cold["s"], cold["m"])  # integers: bit for bit
    mag = np.array(np.abs(np.sin(np.arange(100_000, dtype=np.float64))).sum())
    assert_close(np.array(warm["t"]), np.array(cold["t"]), reduction_n=100_000, magnitude=mag)
