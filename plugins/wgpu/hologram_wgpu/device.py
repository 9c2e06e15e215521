"""One wgpu device per process, made at the first `prepare` (about a second on the
software Vulkan driver), and the compute pipelines made from a program's shaders."""

from __future__ import annotations

import threading
from typing import Any

import attrs
import numpy as np

from .wgsl_exprs import ATLAS_TABLE_WORDS

__all__ = ["Gpu", "gpu", "unavailable_reason", "make_pipelines", "device_refusal"]


@attrs.frozen
class Gpu:
    """The device and what the backend needs of its adapter."""

    device: Any
    adapter_name: str
    max_binding_bytes: int
    max_groups: int  # workgroups per dispatch axis
    max_block: tuple[int, int, int]  # workgroup size per axis
    max_lanes: int  # invocations per workgroup
    max_shared_bytes: int  # workgroup memory
    max_bindings: int  # storage buffers a shader may bind (16 on the OpenGL backend)
    atlas_tables: Any  # the Atlas tables' read-only storage buffer (wgsl.ATLAS_TABLE_WORDS)
    loop_budget: int  # loop iterations one invocation may run (ShaderSet.budget_word): unlimited but on llvmpipe


# Mesa's llvmpipe (lavapipe, the software Vulkan driver) ends an invocation's loops after
# 65535 iterations in all (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS: nested and successive
# loops share the count), silently; the shaders count their own and stop below it, so a
# launch that needs more is refused, never wrong (docs/gpu.md, "Traps").
LLVMPIPE_BUDGET = 65000
UNLIMITED = 0xFFFFFFFF

_lock = threading.Lock()
_gpu: Gpu | None = None
_failure: str | None = None


def _open() -> Gpu:
    import wgpu  # the one import of wgpu-native: made only when the backend is first used

    install = ("install a Vulkan, Metal or DX12 driver; on Linux without a GPU: apt-get install "
               "mesa-vulkan-drivers libvulkan1")
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    if adapter is None:
        raise RuntimeError(f"wgpu found no adapter ({install})")
    if adapter.info["backend_type"] == "OpenGL":
        # OpenGL binds 16 storage buffers per shader, fewer than programs of many buffers
        # need (docs/gpu.md, "Traps"): another adapter, or none
        adapter = next((a for a in wgpu.gpu.enumerate_adapters_sync() if a.info["backend_type"] != "OpenGL"), None)
        if adapter is None:
            raise RuntimeError(f"wgpu found only OpenGL adapters, which this backend does not use ({install})")
    limits = adapter.limits
    wanted = {name: limits[name] for name in ("max-storage-buffer-binding-size", "max-buffer-size",
                                              "max-compute-workgroups-per-dimension",
                                              "max-compute-workgroup-storage-size",
                                              "max-compute-invocations-per-workgroup",
                                              "max-compute-workgroup-size-x", "max-compute-workgroup-size-y",
                                              "max-compute-workgroup-size-z", "max-storage-buffers-per-shader-stage")}
    device = adapter.request_device_sync(required_limits=wanted)
    tables = device.create_buffer_with_data(data=np.array(ATLAS_TABLE_WORDS, np.uint32),
                                            usage=wgpu.BufferUsage.STORAGE)
    return Gpu(device, f"{adapter.info.get('device', '?')} on {adapter.info.get('backend_type', '?')}",
               min(wanted["max-storage-buffer-binding-size"], wanted["max-buffer-size"]),
               wanted["max-compute-workgroups-per-dimension"],
               tuple(wanted[f"max-compute-workgroup-size-{a}"] for a in "xyz"),
               wanted["max-compute-invocations-per-workgroup"], wanted["max-compute-workgroup-storage-size"],
               wanted["max-storage-buffers-per-shader-stage"], tables,
               LLVMPIPE_BUDGET if "llvmpipe" in str(adapter.info.get("device", "")) else UNLIMITED)


def gpu() -> Gpu:
    """The process's device, opened once; a RuntimeError saying why there is none."""
    global _gpu, _failure
    with _lock:
        if _gpu is None and _failure is None:
            try:
                _gpu = _open()
            except Exception as exc:  # no wgpu, no driver, no adapter: remembered, said by available()
                _failure = f"{type(exc).__name__}: {exc}"
        if _gpu is None:
            raise RuntimeError(f"wgpu: no device: {_failure}")
        return _gpu


def unavailable_reason() -> str | None:
    """Why the backend cannot run here (None when it can); opens the device to find out."""
    try:
        gpu()
    except RuntimeError as exc:
        return str(exc)
    return None


def make_pipelines(codes: tuple[str, ...]) -> tuple[Any, ...]:
    """A compute pipeline per shader text (naga validates each: a rejected shader is a
    bug of the code generator, raised as the error wgpu gives)."""
    device = gpu().device
    out = []
    for code in codes:
        module = device.create_shader_module(code=code)
        out.append(device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"}))
    return tuple(out)


def device_refusal(program: Any, bindings: tuple[int, ...]) -> str | None:
    """What in `program` this device's limits cannot run (a block wider than a workgroup
    may be, shared arrays larger than workgroup memory, more storage buffers than a
    shader may bind: `bindings` per stage), in words, or None. The capability
    declaration says 1024 lanes per block, what most adapters give; the adapter decides,
    and only the device knows it."""
    limits = gpu()
    for stage, bound in zip(program.stages, bindings):
        if bound > limits.max_bindings:
            return (f"stage {stage.name!r}: {bound} storage buffers (its global buffers, the error record and the "
                    f"launch info); this adapter ({limits.adapter_name}) binds at most {limits.max_bindings} "
                    f"in a shader")
        block = tuple(stage.block) + (1,) * (3 - len(stage.block))
        lanes = block[0] * block[1] * block[2]
        if lanes > limits.max_lanes or any(b > m for b, m in zip(block, limits.max_block)):
            return (f"stage {stage.name!r}: blocks of {tuple(stage.block)} lanes; this adapter ({limits.adapter_name}) "
                    f"runs workgroups of at most {limits.max_lanes} invocations, {limits.max_block} per axis")
        shared = sum(m.size * (8 if m.dtype.itemsize == 8 else 4) for m in stage.shared)
        if shared > limits.max_shared_bytes:
            return (f"stage {stage.name!r}: shared arrays of {shared:,} bytes (as WGSL holds them); this adapter "
                    f"({limits.adapter_name}) has {limits.max_shared_bytes:,} bytes of workgroup memory")
    return None
