"""loader.py links object code without LLVM: it must compute what MCJIT-loaded code
computes, keep code pages never writable, and refuse what it cannot take (so the backend
falls back to MCJIT) or what is malformed, without crashing."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import hologram as hg
from hologram_cpu_llvm import CpuLlvmBackend, backend, jit, loader

pytestmark = pytest.mark.skipif(not loader.supported(), reason="the loader serves x86-64 Linux only")
KERNELS = ("softmax", "gemm", "sum", "argmax", "layernorm")


@pytest.fixture(scope="module")
def softmax_object():
    k = hg.compile_file("kernels/softmax.toml")
    support, _ = backend._support()
    result = CpuLlvmBackend(cache_dir=False)._generate(k.program)
    names = [e.name for e in result.stages]
    return jit.compile_object(result.module_ir, support=support), names


def _run(name: str, use_loader: bool, monkeypatch) -> list[np.ndarray]:
    monkeypatch.setattr(loader, "supported", lambda: use_loader)
    links = []
    real = loader.link
    monkeypatch.setattr(loader, "link", lambda obj, wanted: links.append(1) or real(obj, wanted))
    k = hg.compile_file(f"kernels/{name}.toml")
    rng = np.random.default_rng(7)
    args = []
    sizes = {}
    for p in k.signature.inputs:
        shape = tuple(sizes.setdefault(str(d), int(rng.integers(3, 40))) for d in p.shape)
        args.append(rng.standard_normal(shape).astype(p.dtype.np) if shape else p.dtype.np.type(1.5))
    hg.clear_cache()  # the backend's memory cache would skip loading
    out = k.on("cpu_llvm")(*args)
    assert bool(links) == use_loader
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("name", KERNELS)
def test_linked_here_computes_what_mcjit_computes(name, monkeypatch):
    ours = _run(name, True, monkeypatch)
    theirs = _run(name, False, monkeypatch)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)


def test_code_pages_are_never_writable(softmax_object):
    obj, names = softmax_object
    loaded = loader.link(obj, names)
    at = loaded.addresses[names[0]]
    with open("/proc/self/maps") as f:
        for line in f:
            span, perms = line.split()[:2]
            lo, hi = (int(x, 16) for x in span.split("-"))
            if lo <= at < hi:
                assert perms.startswith("r-x"), line
                break
        else:
            pytest.fail("the stage's address is in no mapping")


def _retyped(obj: bytes, kind: int) -> bytes:
    """`obj` with its first relocation's kind replaced."""
    data = bytearray(obj)
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    _, shnum = struct.unpack_from("<HH", data, 0x3A)
    for i in range(shnum):
        _, stype, _, _, offset, _ = struct.unpack_from("<IIQQQQ", data, shoff + 64 * i)
        if stype == 4:  # SHT_RELA
            (info,) = struct.unpack_from("<Q", data, offset + 8)
            struct.pack_into("<Q", data, offset + 8, (info >> 32) << 32 | kind)
            return bytes(data)
    raise AssertionError("no relocations")


def test_what_it_cannot_take_is_unsupported_and_mcjit_takes_over(softmax_object):
    obj, names = softmax_object
    with pytest.raises(loader.Unsupported, match="relocation kind 37"):
        loader.link(_retyped(obj, 37), names)
    other_machine = obj[:18] + struct.pack("<H", 183) + obj[20:]  # EM_AARCH64
    with pytest.raises(loader.Unsupported, match="not an x86-64"):
        loader.link(other_machine, names)
    renamed = obj.replace(b"memset\0", b"memsex\0")
    if renamed != obj:
        with pytest.raises(loader.Unsupported, match="memsex"):
            loader.link(renamed, names)
    with pytest.raises(RuntimeError, match="not defined"):
        loader.link(obj, names + ["no_such_stage"])
    assert set(backend._load(obj, names).addresses) == set(names)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_damaged_objects_are_refused_never_a_crash(softmax_object, data):
    """Linking writes only inside its own image, whatever the object says; nothing is run."""
    obj, names = softmax_object
    damaged = bytearray(obj)
    if data.draw(st.booleans(), label="truncate"):
        damaged = damaged[:data.draw(st.integers(0, len(obj) - 1), label="length")]
    for _ in range(data.draw(st.integers(0, 8), label="flips")):
        if damaged:
            at = data.draw(st.integers(0, len(damaged) - 1), label="at")
            damaged[at] ^= 1 << data.draw(st.integers(0, 7), label="bit")
    try:
        loader.link(bytes(damaged), names)
    except (loader.Unsupported, RuntimeError):
        pass
