"""Bundles carrying GPU code (docs/bundles.md, "Native code"; docs/gpu.md, "Bundles"):
the targets `wgsl` (wgpu) and `cuda:sm_80`, `cuda:sm_90` (PTX + cubin) build on a
machine without a GPU, deterministically; `hologram bundle verify` checks them and
refuses damaged ones; wgpu runs the shipped shaders with no code generation; cuda picks
a cubin or PTX by the device's compute capability."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import hologram
from hologram.bundles import archive
from hologram.bundles.build import build, native_plan
from hologram.bundles.load import open_bundle
from hologram.bundles.manifest import MANIFEST
from hologram.core.errors import BundleError, HologramWarning
from hologram.registry.lookups import backends

wgpu_native = pytest.importorskip("hologram_wgpu.native", reason="hologram-backend-wgpu is not installed")
cuda_native = pytest.importorskip("hologram_cuda.native", reason="hologram-backend-cuda is not installed")

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
# vadd: every backend; mean: two stages, wgpu only; layernorm: three stages, cuda only; softmax: neither GPU backend
DOCUMENTS = ("vadd", "mean", "layernorm", "softmax")
DOCS_SORTED = tuple(sorted(DOCUMENTS))  # cuda runs all of them
GPU = "wgsl,cuda:sm_80,cuda:sm_90"


def _need_nvjitlink() -> None:
    if not cuda_native.targets():
        pytest.skip("nvJitLink is not installed: the cuda backend builds no targets")


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("gpu-sources")
    for name in DOCUMENTS:
        shutil.copy(KERNELS / f"{name}.toml", folder)
    return folder


@pytest.fixture(scope="module")
def gpu_bundle(sources, tmp_path_factory) -> Path:
    _need_nvjitlink()
    out = tmp_path_factory.mktemp("gpu-bundle") / "gpu-1.0.0.hgb"
    build([sources], "gpu", "1.0.0", out, cache_dir=False, jobs=1, native=GPU)
    return out


def _wgpu_here() -> None:
    if not backends()["wgpu"].available():
        pytest.skip(f"wgpu has no adapter here: {backends()['wgpu'].unavailable_reason()}")


# ------------------------------------------------------------------------- building
def test_gpu_targets_build_deterministically_without_a_gpu(gpu_bundle, sources, tmp_path, run_cli):
    bundle = open_bundle(gpu_bundle)
    listed = {(n.backend, n.target): n.kernels for n in bundle.manifest.native}
    shaders = listed.pop(("wgpu", "wgsl"))
    assert listed == {("cuda", "sm_80"): DOCS_SORTED, ("cuda", "sm_90"): DOCS_SORTED}
    # a kernel a backend does not run ships nothing there: wgpu declares no f64 (layernorm's accumulator)
    assert {"mean", "vadd"} <= set(shaders) and "layernorm" not in shaders
    shader = bundle.members["native/wgpu/wgsl/mean.o"].decode()
    assert shader.startswith("// program 'mean', stage") and shader.count("fn main(") == 2  # one per stage
    code = bundle.members["native/cuda/sm_90/vadd.o"]
    ptx_bytes = json.loads(bundle.members["native/cuda/sm_90/index.json"])["vadd"]["meta"]["ptx_bytes"]
    assert b".version 8.0\n.target sm_90\n" in code[:ptx_bytes] and code[ptx_bytes:].startswith(b"\x7fELF")
    # the same bytes again: in worker processes, and through the build cache
    again = build([sources], "gpu", "1.0.0", cache_dir=tmp_path / "cache", jobs=2, native=GPU).data
    cached = build([sources], "gpu", "1.0.0", cache_dir=tmp_path / "cache", jobs=1, native=GPU).data
    assert again == cached == gpu_bundle.read_bytes()
    # and from the command line, the targets spelled with and without their backend
    out = tmp_path / "cli.hgb"
    code, _, err = run_cli("bundle", "build", str(sources), "--name", "gpu", "--version", "1.0.0", "--jobs", "1",
                           "--no-cache", "--native", "wgpu:wgsl,sm_80,cuda:sm_90", "-o", str(out))
    assert code == 0 and out.read_bytes() == gpu_bundle.read_bytes(), err
    code, stdout, err = run_cli("bundle", "verify", str(out))
    assert code == 0 and f"4 kernels verified, {8 + len(shaders)} native objects well formed" in stdout, err


def test_native_targets_are_named_with_or_without_their_backend():
    _need_nvjitlink()
    cuda_toolchain = backends()["cuda"].native_toolchain()
    assert native_plan("cuda:sm_80") == (("cuda", cuda_toolchain, ("sm_80",)),)
    assert native_plan("sm_90,wgsl") == (("cuda", cuda_toolchain, ("sm_90",)),
                                         ("wgpu", wgpu_native.toolchain(), ("wgsl",)))
    auto = {name: targets for name, _, targets in native_plan("auto")}
    assert auto["cuda"] == ("sm_80", "sm_90") and auto["wgpu"] == ("wgsl",)
    assert "host" not in auto.get("cpu_llvm", ())
    with pytest.raises(BundleError, match="cannot build native code for wgpu:sm_80") as caught:
        native_plan("wgpu:sm_80")
    assert "cuda:sm_80" in caught.value.hint and "wgpu:wgsl" in caught.value.hint


def test_cuda_offers_no_targets_without_nvjitlink(monkeypatch):
    monkeypatch.setattr(cuda_native, "have_nvjitlink", lambda: False)
    assert "cuda" not in {name for name, _, _ in native_plan("auto")}
    with pytest.raises(BundleError, match="cannot build native code for cuda:sm_80"):
        native_plan("cuda:sm_80")


# -------------------------------------------------------------------------- loading
def test_wgpu_runs_the_shipped_shaders_without_generating_any(gpu_bundle, monkeypatch):
    _wgpu_here()
    import hologram_wgpu.backend as wgpu_backend

    generated = []
    real = wgpu_backend.generate
    monkeypatch.setattr(wgpu_backend, "generate", lambda program: generated.append(program.name) or real(program))
    monkeypatch.setattr(wgpu_native, "generate", lambda program: generated.append(program.name) or real(program))
    x = np.linspace(-3, 5, 1000, dtype=np.float32)
    y = np.arange(1000, dtype=np.float32)
    backends()["wgpu"].clear_cache()
    trusted = hologram.load_bundle(gpu_bundle, trust_native=True)
    assert np.array_equal(trusted.vadd.on("wgpu")(x, y), x + y)
    assert np.allclose(trusted.mean.on("wgpu")(x), x.mean(), rtol=1e-5)
    assert generated == []
    backends()["wgpu"].clear_cache()
    untrusted = hologram.load_bundle(gpu_bundle)  # a file found by path: its shaders are not used
    assert np.array_equal(untrusted.vadd.on("wgpu")(x, y), x + y)
    assert generated == ["vadd"]
    # the other backends as before; and cuda, with no device here, takes nothing
    assert np.array_equal(trusted.vadd.on("interp")(x, y), x + y)
    args = (x.reshape(10, 100), np.ones(100, np.float32), np.zeros(100, np.float32), np.float32(1e-5))
    assert np.allclose(trusted.layernorm.on("interp")(*args), trusted.layernorm.on("cpu_llvm")(*args), atol=1e-5)


def test_cuda_chooses_the_cubin_of_the_device_else_ptx_to_jit():
    shipped = [{"target": "sm_80"}, {"target": "sm_90"}]
    cuda_12 = 12040  # cuDriverGetVersion's number for CUDA 12.4

    def chosen(capability, natives=shipped, driver=cuda_12):
        picked = cuda_native.choose(natives, capability, driver)
        return None if picked is None else (picked[0]["target"], picked[1])
    assert chosen((8, 0)) == ("sm_80", "cubin")
    assert chosen((8, 9)) == ("sm_80", "cubin")  # a cubin runs on later minors of its major version
    assert chosen((9, 0)) == ("sm_90", "cubin")
    assert chosen((10, 0)) == ("sm_90", "ptx")  # a newer major version: the highest PTX, JIT-compiled
    assert chosen((9, 0), shipped[:1]) == ("sm_80", "ptx")
    assert chosen((9, 0), shipped[:1], driver=11070) is None  # PTX 7.8 needs CUDA 11.8's driver
    assert chosen((7, 5)) is None  # older than every target: compiled here instead


def test_cuda_takes_no_shipped_code_without_a_device(gpu_bundle):
    cuda = backends()["cuda"]
    if cuda.available():
        pytest.skip("a CUDA device is here")
    bundle = open_bundle(gpu_bundle)
    lib = hologram.load_bundle(gpu_bundle, trust_native=True)
    natives = [bundle.native_code(n, "vadd") for n in bundle.manifest.native if n.backend == "cuda"]
    assert len(natives) == 2 and cuda.prepare_native(lib.vadd.program, natives) is None


# ---------------------------------------------------------------- damaged GPU code
def reshipped(bundle: Path, out: Path, member: str, damage_object=None, damage_meta=None) -> Path:
    """`bundle` with `member` (a native object) replaced by `damage_object(bytes)` and/or
    its index entry's meta by `damage_meta(meta)`, the index, the manifest and RECORD
    rewritten to agree: only the checks of its form and content can tell."""
    members = archive.read(bundle.read_bytes())
    folder, _, file = member.rpartition("/")
    kernel = file.removesuffix(".o")
    index = f"{folder}/index.json"
    table = json.loads(members[index])
    if damage_object is not None:
        members[member] = damage_object(members[member])
        table[kernel]["object_sha256"] = hashlib.sha256(members[member]).hexdigest()
    if damage_meta is not None:
        table[kernel]["meta"] = damage_meta(table[kernel]["meta"])
    old = hashlib.sha256(members[index]).hexdigest()
    members[index] = json.dumps(table, sort_keys=True, separators=(",", ":")).encode()
    members[MANIFEST] = members[MANIFEST].replace(old.encode(), hashlib.sha256(members[index]).hexdigest().encode())
    out.write_bytes(archive.write(members))
    return out


def _swap_ptx(replace):
    """Damage to the PTX part of a cuda object (the cubin kept): `replace(ptx text)`."""
    def damage(data: bytes) -> bytes:
        ptx, cubin = data.split(b"\x7fELF", 1)
        return replace(ptx.decode()).encode() + b"\x7fELF" + cubin
    return damage


def _flip_in_cubin(offset_from_end: int):
    def damage(data: bytes) -> bytes:
        out = bytearray(data)
        out[len(out) - offset_from_end] ^= 0x5A
        return bytes(out)
    return damage


def _set_cubin_arch(data: bytes) -> bytes:
    start = data.index(b"\x7fELF")
    out = bytearray(data)
    out[start + 49] = 75  # e_flags' SM byte: sm_75
    return bytes(out)


def _rebind(data: bytes) -> bytes:
    return data.replace(b"@group(0) @binding(2)", b"@group(0) @binding(7)", 1)


def _break_syntax(data: bytes) -> bytes:
    return data.replace(b"var<private>", b"var<privat3>", 1)  # the same length: only naga can tell


WGSL = "native/wgpu/wgsl/vadd.o"
SM_80 = "native/cuda/sm_80/vadd.o"
DAMAGE = {  # label: (member, object damage, meta damage, what the refusal says, needs an adapter)
    "wgsl-binding-renumbered": (WGSL, _rebind, None, "declares bindings", False),
    "wgsl-stage-length": (WGSL, None, lambda m: {**m, "stages": [{**m["stages"][0], "bytes": m["stages"][0]["bytes"]
                                                                 - 1}]}, "bytes after the last stage", False),
    "wgsl-buffer-unknown": (WGSL, None, lambda m: {**m, "stages": [{**m["stages"][0], "buffers": ["x", "q", "z"]}]},
                            "not distinct buffers of the program", False),
    "wgsl-not-utf8": (WGSL, lambda d: d[:40] + b"\xff" + d[41:], None, "not UTF-8", False),
    "wgsl-naga-refuses": (WGSL, _break_syntax, None, "naga refuses", True),
    "ptx-target": (SM_80, _swap_ptx(lambda p: p.replace(".target sm_80", ".target sm_90")), None,
                   "says .target sm_90", False),
    "ptx-kernel-renamed": (SM_80, _swap_ptx(lambda p: p.replace(".entry hg_vadd_0_z(", ".entry hg_vadd_0_w(")), None,
                           "does not declare kernel hg_vadd_0_z", False),
    "ptx-ptxas-refuses": (SM_80, _swap_ptx(lambda p: p.replace("add.rn.f32", "add.xx.f32", 1)), None, "ptxas refuses",
                          False),
    "cubin-altered": (SM_80, _flip_in_cubin(200), None, "its cubin is not its PTX assembled", False),
    "cubin-arch": (SM_80, _set_cubin_arch, None, "not CUDA code for sm_80", False),
    "cuda-block": (SM_80, None, lambda m: {**m, "kernels": [{**m["kernels"][0], "block": [128, 1, 1]}]},
                   "of block [256, 1, 1]", False),
}


@pytest.mark.parametrize("label", list(DAMAGE))
def test_damaged_gpu_code_is_refused_by_verify(gpu_bundle, tmp_path, run_cli, label):
    member, damage_object, damage_meta, says, needs_adapter = DAMAGE[label]
    if needs_adapter:
        _wgpu_here()
    path = reshipped(gpu_bundle, tmp_path / "damaged.hgb", member, damage_object, damage_meta)
    code, _, err = run_cli("bundle", "verify", str(path))
    assert code != 0 and member in err and says in err, err


@pytest.mark.parametrize("label", [k for k, v in DAMAGE.items() if v[0] == WGSL])
def test_damaged_wgsl_is_not_used_and_the_program_is_generated(gpu_bundle, tmp_path, label):
    _wgpu_here()
    member, damage_object, damage_meta, says, _ = DAMAGE[label]
    path = reshipped(gpu_bundle, tmp_path / "damaged.hgb", member, damage_object, damage_meta)
    backends()["wgpu"].clear_cache()
    x, y = np.arange(50, dtype=np.float32), np.ones(50, np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        z = hologram.load_bundle(path, trust_native=True).vadd.on("wgpu")(x, y)
    assert np.array_equal(z, x + y)
    messages = [str(w.message) for w in caught if issubclass(w.category, HologramWarning)]
    assert any("WGSL shipped for program 'vadd' is not used" in m and says in m for m in messages), messages


def test_a_target_listed_for_another_backend_is_refused(gpu_bundle, tmp_path, run_cli):
    """WGSL handed to cuda's checks (a manifest naming the wrong backend's target) is not CUDA code."""
    bundle = open_bundle(gpu_bundle)
    lib = hologram.load_bundle(gpu_bundle)
    code = bundle.native_code(next(n for n in bundle.manifest.native if n.target == "wgsl"), "vadd")
    assert "not a CUDA target" in backends()["cuda"].check_native(lib.vadd.program, code)
    assert re.search("not WGSL", backends()["wgpu"].check_native(lib.vadd.program, {**code, "target": "sm_80"}))


def test_shaders_of_another_code_generator_are_not_used(gpu_bundle, tmp_path, monkeypatch):
    """Shipped WGSL is used only by the generator that wrote it (its bindings and launch-info
    layout are that generator's): another's is skipped, silently, and the program generated."""
    _wgpu_here()
    import hologram_wgpu.backend as wgpu_backend

    members = archive.read(gpu_bundle.read_bytes())
    toolchain = wgpu_native.toolchain().encode()
    members[MANIFEST] = members[MANIFEST].replace(toolchain, b"wgsl-codegen 0000000000000000")
    other = tmp_path / "other.hgb"
    other.write_bytes(archive.write(members))
    generated = []
    real = wgpu_backend.generate
    monkeypatch.setattr(wgpu_backend, "generate", lambda program: generated.append(program.name) or real(program))
    backends()["wgpu"].clear_cache()
    x = np.arange(20, dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", HologramWarning)
        assert np.array_equal(hologram.load_bundle(other, trust_native=True).vadd.on("wgpu")(x, x), x + x)
    assert generated == ["vadd"]
