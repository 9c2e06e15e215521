"""loader.py links object code without LLVM: it must compute what MCJIT-loaded code
computes, keep code pages never writable, and refuse what it cannot take (so the backend
falls back to MCJIT) or what is malformed, without crashing."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import hologram as hg
from hologram.testing import fuzz_mutate_objects as objects
from hologram_cpu_llvm import CpuLlvmBackend, backend, cpu, elf, jit, loader

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


def test_what_it_cannot_take_is_unsupported_and_only_our_own_code_goes_to_mcjit(softmax_object, monkeypatch):
    obj, names = softmax_object
    unlinked = _retyped(obj, 10)  # R_X86_64_32: well formed, not in the loader's table
    with pytest.raises(loader.Unsupported, match="relocation kind 10"):
        loader.link(unlinked, names)
    other_machine = obj[:18] + struct.pack("<H", 183) + obj[20:]  # EM_AARCH64
    with pytest.raises(loader.Unsupported, match="not an x86-64"):
        loader.link(other_machine, names)
    renamed = obj.replace(b"memset\0", b"memsex\0")
    if renamed != obj:
        with pytest.raises(loader.Unsupported, match="memsex"):
            loader.link(renamed, names)
    with pytest.raises(RuntimeError, match="not defined"):
        loader.link(obj, names + ["no_such_stage"])
    with pytest.raises(RuntimeError, match="malformed object code: a relocation of kind 37"):
        loader.link(_retyped(obj, 37), names)  # R_X86_64_IRELATIVE: a dynamic linker's, never an object's
    assert set(backend._load(obj, names).addresses) == set(names)
    mcjit = []
    monkeypatch.setattr(jit, "load_object", lambda o, symbols: mcjit.append(o) or "by MCJIT")
    assert backend._load(unlinked, names) == "by MCJIT"  # code this process's LLVM made
    with pytest.raises(RuntimeError, match="the loader cannot link it: relocation kind 10"):
        backend._load(unlinked, names, shipped=True)
    monkeypatch.setattr(loader, "supported", lambda: False)
    with pytest.raises(RuntimeError, match="linked by cpu_llvm's loader only"):
        backend._load(obj, names, shipped=True)
    assert mcjit == [unlinked]


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


STAGE = "hg_softmax_0_m"
MALFORMED = {  # softmax's object, hand-edited (hologram.testing.fuzz_mutate_objects), and what is said
    "relocation-past-text": (lambda o: objects.misplace_relocation(o, ".text", 1), "a relocation outside its section"),
    "relocation-symbol": (lambda o: _entry(o, 0, "info", (10**6) << 32 | 2), "names symbol 1000000"),
    "stage-at-2**40": (lambda o: objects.move_symbol(o, STAGE, 1 << 40), f"symbol {STAGE!r} (entry"),
    "stage-size": (lambda o: objects.set_symbol(o, STAGE, "size", 1 << 62), "lies outside its section"),
    "stage-section": (lambda o: objects.set_symbol(o, STAGE, "shndx", 0xFEFF), "which does not exist"),
    "stage-not-code": (lambda o: objects.set_symbol(o, STAGE, "info", 0x11), f"symbol {STAGE!r} is not a function"),
    "symbol-name": (lambda o: objects.set_symbol(o, STAGE, "name", 1 << 31), "outside its string table"),
    "alignment-8192": (lambda o: objects.set_alignment(o, ".text", 8192), "alignment 8192"),
    "alignment-24": (lambda o: objects.set_alignment(o, ".rodata.cst8", 24), "alignment 24"),
    "zero-fill-past-limit": (lambda o: objects.add_zero_fill(o, objects.MAX_ZERO_FILL + 1), "zero-filled"),
    "zero-fill-2**64-1": (lambda o: objects.add_zero_fill(o, (1 << 64) - 1), "zero-filled"),
    "overlap": (lambda o: _section(o, ".rodata.cst8", "offset", objects.section_named(o, ".text").offset + 8),
                "share bytes"),
    "onto-section-table": (lambda o: _section(o, ".rodata.cst8", "offset", objects._get(o, objects.E_SHOFF, "<Q")),
                           "share bytes"),
    "past-the-file": (lambda o: _section(o, ".text", "size", len(o)), "lies outside the file"),
    "code-zero-filled": (lambda o: _section(o, ".text", "type", objects.SHT_NOBITS), "executable but of type 8"),
    "string-table-unterminated": (lambda o: o[:objects.section_named(o, ".strtab").offset
                                              + objects.section_named(o, ".strtab").size - 1] + b"A"
                                  + o[objects.section_named(o, ".strtab").offset
                                      + objects.section_named(o, ".strtab").size:], "does not end in NUL"),
    "section-names-in-code": (lambda o: objects._put(o, objects.E_SHSTRNDX, "<H", objects.section_named(o, ".text")
                                                     .index), "which is no string table"),
    "no-sections": (lambda o: objects._put(o, objects.E_SHNUM, "<H", 0), "0 sections"),
    "section-entry-size": (lambda o: objects._put(o, objects.E_SHENTSIZE, "<H", 65), "section headers of 65 bytes"),
}


def _section(obj: bytes, name: str, field: str, value: int) -> bytes:
    return objects.set_section(obj, objects.section_named(obj, name).index, field, value)


def _entry(obj: bytes, k: int, field: str, value: int) -> bytes:
    """`obj` with relocation `k`'s `field` set."""
    off, fmt = objects.R_FIELDS[field]
    return objects._put(obj, objects.relocations(obj)[k][1] + off, fmt, value)


@pytest.mark.parametrize("label", list(MALFORMED))
def test_malformed_objects_are_refused_before_anything_is_mapped(softmax_object, label, monkeypatch):
    """Each is refused by the check `hologram bundle verify` and prepare_native run
    (cpu.object_problem) and by the loader, with the same reason, and never mapped."""
    obj, names = softmax_object
    damage, reason = MALFORMED[label]
    bad = damage(obj)
    problem = cpu.object_problem(bad, names)
    assert problem is not None and reason in problem, problem
    monkeypatch.setattr(loader.mmap, "mmap", lambda *a, **k: pytest.fail("mapped"))
    with pytest.raises(elf.Malformed) as caught:
        loader.link(bad, names)
    assert str(caught.value) == problem


def test_harmless_changes_within_the_limits_link_and_compute_the_same():
    target = objects.native_target()
    if target is None:
        pytest.skip("cpu_llvm ships no object code this machine runs")
    k = hg.compile_file("kernels/softmax.toml")
    built = CpuLlvmBackend(cache_dir=False).compile_native(k.program, target)
    changed = objects.set_alignment(objects.set_alignment(built["object"], ".text", objects.MAX_ALIGNMENT),
                                    ".rodata.cst8", objects.MAX_ALIGNMENT)
    changed = objects.add_zero_fill(changed, objects.MAX_ZERO_FILL)  # mapped, never touched: no memory spent
    fresh = CpuLlvmBackend(num_threads=1, cache_dir=False)
    assert fresh.check_native(k.program, {**built, "object": changed}) is None
    exe = fresh.prepare_native(k.program, [{**built, "object": changed}])
    assert exe is not None
    x = np.linspace(-3, 3, 50, dtype=np.float32)
    y = np.empty_like(x)
    fresh.launch(exe, {"x": x, "y": y}, {}, {"n": 50})
    np.testing.assert_allclose(y, k.on("interp")(x), rtol=1e-6)


def test_an_imported_name_is_looked_up_among_the_process_symbols_only():
    """An object's undefined symbol named like an attribute of ctypes' CDLL resolved to
    that attribute (`_handle`: the library handle, as a function's address) or raised
    ctypes.ArgumentError (`__init__`) out of the loader."""
    assert loader.process_symbol("memset") != 0
    for name in ("_handle", "_name", "__init__", "_FuncPtr", "__getattr__", "\ufffd", ""):
        assert loader.process_symbol(name) == 0, name


def test_the_limits_are_the_ones_the_fuzzer_holds_the_loader_to():
    assert (elf.MAX_ALIGNMENT, elf.MAX_ZERO_FILL) == (objects.MAX_ALIGNMENT, objects.MAX_ZERO_FILL)
