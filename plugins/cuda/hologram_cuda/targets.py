"""What the backend builds for, without LLVM: the dtypes the code generator emits and the
GPU targets with their pinned PTX versions. backend.py reads these when the plugin loads,
so loading it (every `hologram` process that lists backends) never imports llvmlite.
"""

from __future__ import annotations

from hologram.backend import DType
from hologram.errors import ArgumentError

# Registers and memory of every dtype (f16 is PTX's own `.f16`). Integer emission is
# width-generic: signedness picks the comparison, division, shift and extension.
DTYPES = tuple(DType)

# target -> the PTX ISA version it is emitted at (LLVM's feature name); docs/gpu.md,
# "Toolchain and the PTX version policy"
PTX_VERSIONS = {"sm_80": "ptx78", "sm_90": "ptx80"}
TARGETS = tuple(PTX_VERSIONS)


def check_target(target: str) -> str:
    if target not in PTX_VERSIONS:
        raise ArgumentError(f"cuda: unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    return target
