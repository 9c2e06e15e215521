"""The disk cache of PTX and cubins: a second process (a fresh backend) prepares from it
without the code generator, LLVM or nvJitLink; keys differ by program, target and
toolchain; a damaged entry is a miss that is rebuilt."""

from __future__ import annotations

import os

import pytest

import hologram
from hologram_cuda import CudaBackend, codegen
from hologram_cuda.abi import KernelEntry
from hologram_cuda.assemble import have_nvjitlink, nvjitlink_version
from hologram_cuda.cache import DiskCache, Entry, cache_key, decode_entry, encode_entry

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _program(name: str = "vadd"):
    return hologram.compile_file(os.path.join(ROOT, "kernels", f"{name}.toml"), backend="interp").program


def _no_codegen(monkeypatch):
    def reached(program):
        raise AssertionError("the code generator ran")

    monkeypatch.setattr(codegen, "compile_program", reached)


def test_a_fresh_backend_prepares_from_the_disk_cache_without_compiling(tmp_path, monkeypatch):
    program = _program()
    built = CudaBackend(cache_dir=tmp_path).prepare(program)
    assert len(list(tmp_path.glob("*.hgcubin"))) == 2  # one entry per target
    _no_codegen(monkeypatch)
    again = CudaBackend(cache_dir=tmp_path).prepare(program)
    assert again.ptx == built.ptx and again.cubins == built.cubins
    assert again.kernels == built.kernels
    assert again.arguments == built.arguments
    if have_nvjitlink():
        assert set(again.cubins) == {"sm_80", "sm_90"}


def test_a_cached_program_is_still_checked_against_the_declaration(tmp_path, monkeypatch):
    """A hit skips LLVM, not the checks: a program the backend refuses is refused alike."""
    from hologram.errors import UnsupportedProgram

    CudaBackend(cache_dir=tmp_path).prepare(_program())
    backend = CudaBackend(cache_dir=tmp_path)
    monkeypatch.setattr(type(backend), "check_covers", lambda self, p: (_ for _ in ()).throw(
        UnsupportedProgram("refused by the declaration")))
    with pytest.raises(UnsupportedProgram, match="refused by the declaration"):
        backend.prepare(_program())


def test_no_disk_cache_when_disabled(tmp_path, monkeypatch):
    monkeypatch.setenv("HOLOGRAM_CACHE_DIR", str(tmp_path))
    CudaBackend(cache_dir=False).prepare(_program())
    assert not list(tmp_path.rglob("*.hgcubin"))
    CudaBackend().prepare(_program())  # the default: $HOLOGRAM_CACHE_DIR/cuda
    assert len(list((tmp_path / "cuda").glob("*.hgcubin"))) == 2


def test_keys_differ_by_program_target_and_toolchain():
    keys = {cache_key("p1", "sm_80", "13.5"), cache_key("p2", "sm_80", "13.5"), cache_key("p1", "sm_90", "13.5"),
            cache_key("p1", "sm_80", "13.6"), cache_key("p1", "sm_80", None)}
    assert len(keys) == 5
    key = cache_key("p1", "sm_80", "13.5")
    assert "llvmlite " in key and "sources " in key and "nvjitlink 13.5" in key


def test_entries_round_trip_and_damage_is_a_miss(tmp_path):
    entry = Entry(".version 7.8\n", b"\x7fELF...", (KernelEntry("hg_k_0_s", 0, (256, 1, 1)),))
    data = encode_entry("k", entry)
    assert decode_entry("k", data) == entry
    assert decode_entry("other", data) is None
    flipped = bytearray(data)
    flipped[-1] ^= 1
    assert decode_entry("k", bytes(flipped)) is None
    assert decode_entry("k", data[:-1]) is None
    assert decode_entry("k", b"HGCUDA\x00\x01{not json\n") is None
    assert decode_entry("k", b"garbage") is None

    cache = DiskCache(tmp_path)
    assert cache.store("k", entry) and cache.load("k") == entry
    cache.path("k").write_bytes(bytes(flipped))
    assert cache.load("k") is None and not cache.path("k").exists()  # deleted, for the next store


def test_a_damaged_entry_is_rebuilt(tmp_path):
    program = _program()
    built = CudaBackend(cache_dir=tmp_path).prepare(program)
    for path in tmp_path.glob("*.hgcubin"):
        path.write_bytes(path.read_bytes()[:-3])
    again = CudaBackend(cache_dir=tmp_path).prepare(program)
    assert again.ptx == built.ptx and again.cubins == built.cubins
    nvjitlink = nvjitlink_version()
    disk = CudaBackend(cache_dir=tmp_path).disk
    assert all(disk.load(cache_key(built.key, t, nvjitlink)) is not None for t in ("sm_80", "sm_90"))


def test_a_fifo_in_the_cache_is_a_miss_not_a_hang(tmp_path):
    cache = DiskCache(tmp_path)
    os.mkfifo(cache.path("k"))
    assert cache.load("k") is None
    entry = Entry("ptx", b"", (KernelEntry("k", 0, (1, 1, 1), "init"),))
    assert cache.store("k", entry) and cache.load("k") == entry
