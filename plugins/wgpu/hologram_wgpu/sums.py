"""The passes after a stage with full f32 sums (hologram.backend.gathered_sums; docs/gpu.md,
"Full float sums"): the stage left one partial per workgroup and per sum; each fold
adds them as a tree, FOLD at a time in one workgroup, until one is left per sum, and a
merge adds that into memory, as the ISA merges a stage's contributions when it ends
(docs/isa.md, "Reductions").

With a lane's contributions compensated (Kahan) and a tree in each workgroup, a sum of
n contributions errs by about log2(n) roundings, what the accuracy contract's bound
grows with; and it is the same tree for every launch of a shape, so the result is too. A fold or merge after a stage that failed writes what it
likes: the launch raises the stage's error and returns no outputs.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from . import device as gpu_device

__all__ = ["FOLD", "encode"]

FOLD = 256  # partials a workgroup adds per fold

# partials [segment][count] -> [segment][groups], groups = ceil(count / FOLD); the
# workgroups loop over their groups (there may be more than a dispatch names)
_FOLD_WGSL = f"""
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<storage, read> shape: array<u32, 2>;  // count, groups
var<workgroup> t: array<f32, {FOLD}>;

@compute @workgroup_size({FOLD})
fn main(@builtin(local_invocation_index) lix: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
  let count = shape[0];
  let groups = shape[1];
  for (var g = wid.x; g < groups; g += nwg.x) {{
    let i = g * {FOLD}u + lix;
    t[lix] = bitcast<f32>(0x80000000u);  // -0.0, the identity
    if (i < count) {{ t[lix] = src[wid.y * count + i]; }}
    workgroupBarrier();
    for (var half = {FOLD // 2}u; half > 0u; half >>= 1u) {{
      if (lix < half) {{ t[lix] = t[lix] + t[lix + half]; }}
      workgroupBarrier();
    }}
    if (lix == 0u) {{ dst[wid.y * groups + g] = t[0]; }}
    workgroupBarrier();
  }}
}}
"""

# memory[at[0]] = memory[at[0]] + total[at[1]], unless a stage failed
_MERGE_WGSL = """
@group(0) @binding(0) var<storage, read> total: array<f32>;
@group(0) @binding(1) var<storage, read_write> memory: array<f32>;
@group(0) @binding(2) var<storage, read> at: array<u32, 2>;
@group(0) @binding(3) var<storage, read> err: array<u32>;

@compute @workgroup_size(1)
fn main() {
  if (err[0] == 0u) { memory[at[0]] = memory[at[0]] + total[at[1]]; }
}
"""


@functools.cache
def _pipelines() -> tuple[Any, Any]:
    """The fold and merge pipelines, made once per process (on its one device)."""
    fold, merge = gpu_device.make_pipelines((_FOLD_WGSL, _MERGE_WGSL))
    return fold, merge


def encode(encoder: Any, partials: Any, blocks: int, targets: list[tuple[Any, int]], err: Any) -> None:
    """Fold `partials` (one f32 per block, `blocks` per target, target after target) and
    merge each total into its element: `targets` are (device buffer, element offset)."""
    import wgpu

    gpu = gpu_device.gpu()
    device, (fold, merge) = gpu.device, _pipelines()

    def words(*values: int) -> Any:
        return device.create_buffer_with_data(data=np.array(values, np.uint32), usage=wgpu.BufferUsage.STORAGE)

    def dispatch(pipeline: Any, resources: list[Any], groups: tuple[int, int, int]) -> None:
        group = device.create_bind_group(layout=pipeline.get_bind_group_layout(0),
                                         entries=[{"binding": b, "resource": {"buffer": r}}
                                                  for b, r in enumerate(resources)])
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(pipeline)
        compute.set_bind_group(0, group)
        compute.dispatch_workgroups(*groups)
        compute.end()

    src, count = partials, blocks
    while count > 1:
        groups = -(-count // FOLD)
        dst = device.create_buffer(size=4 * groups * len(targets), usage=wgpu.BufferUsage.STORAGE)
        dispatch(fold, [src, dst, words(count, groups)], (min(groups, gpu.max_groups), len(targets), 1))
        src, count = dst, groups
    for j, (memory, offset) in enumerate(targets):
        dispatch(merge, [src, memory, words(offset, j), err], (1, 1, 1))
