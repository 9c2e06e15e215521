"""PTX and cubins shipped in bundles: the native targets `sm_80` and `sm_90` (spelled
`cuda:sm_80`, `cuda:sm_90` on the command line; docs/bundles.md, "Native code";
docs/gpu.md, "Bundles").

A kernel's object for a target is its PTX (ASCII text, at the target's pinned PTX
version) followed by the cubin nvJitLink assembled from that PTX; `meta` gives the
PTX's length and the kernels in launch order (a stage's one-thread `.init` kernel, when it
has inits, the stage's own, then the kernel of its full float sums, when it has any:
`abi.kernel_shapes`):

    {"ptx_bytes": 5120, "kernels": [{"name": "hg_axpy_0_z", "stage": 0, "block": [256, 1, 1], "kind": "stage"}, ...]}

Shipping a target takes nvJitLink (a dependency of this distribution): without it the
backend offers no targets, since a target is PTX *and* cubin. Neither needs a GPU, so a
bundle built on a machine without one carries both. At load, `choose` picks per device:
the cubin of the highest target of the device's major version not above its minor one
(a cubin runs on its own major version only), else the PTX of the highest target not
above the device, for the driver to JIT, when the driver knows its PTX version; else
nothing, and the program is compiled as any other.

Checks (`check_native`, run by `hologram bundle verify` and before shipped code is
used): the form — the PTX's header names the target and its pinned version and declares
every stage kernel the description lists (one per stage, the stage's block), the cubin
is a CUDA ELF for the target naming every kernel — and, when nvJitLink is installed,
ptxas accepts the PTX and, when the nvJitLink that built the bundle is the one here, the
cubin is exactly the PTX assembled (nvJitLink's output is deterministic); with another
version, nvJitLink must accept the cubin for the target.
"""

from __future__ import annotations

import functools
import hashlib
import re
import struct
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

import attrs

from hologram.backend import Program
from hologram.errors import CompileError, HologramWarning

from .abi import KernelEntry, kernel_shapes
from .assemble import assemble, have_nvjitlink, nvjitlink_version
from .targets import PTX_VERSIONS, TARGETS, check_target

__all__ = ["Shipped", "targets", "toolchain", "compile_native", "check_native", "shipped", "choose",
           "shipped_for_device"]

TRIPLE = "nvptx64-nvidia-cuda"
# what fixes the kernels' names, parameters and launch shape: the code generator, the
# argument layout the launch packs, the PTX emission and its pinned versions
_GENERATOR_SOURCES = ("codegen", "arguments", "ptx", "targets")
# the oldest CUDA driver (cuDriverGetVersion's 1000 * major + 10 * minor) that JITs each PTX version
DRIVER_FOR_PTX = {"ptx78": 11080, "ptx80": 12000}
EM_CUDA = 190
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,200}$")


@attrs.frozen
class Shipped:
    """One target's shipped code for one program, its form checked."""

    target: str
    ptx: str
    cubin: bytes = attrs.field(repr=False)
    kernels: tuple[KernelEntry, ...]  # in launch order


def targets() -> tuple[str, ...]:
    """The targets `compile_native` builds here: every one when nvJitLink is installed, else none."""
    return TARGETS if have_nvjitlink() else ()


@functools.cache
def generator() -> str:
    """The code generator's identity: a digest of its sources (the toolchain's first field)."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        if path.stem.startswith(_GENERATOR_SOURCES):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"codegen {digest.hexdigest()[:16]}"


def toolchain() -> str:
    """What builds shipped code: the code generator, LLVM (the PTX), nvJitLink (the cubin)."""
    from .ptx import toolchain as llvm_toolchain

    return f"{generator()}; {llvm_toolchain()}; nvJitLink {nvjitlink_version()}"


def compile_native(program: Program, module: Any, target: str) -> dict[str, Any]:
    """The PTX and cubin for `target` of the program whose code generator output
    (codegen.KernelModule) is `module`."""
    from .ptx import emit_ptx

    try:
        ptx = emit_ptx(module.module_ir, check_target(target))
    except RuntimeError as e:
        raise CompileError(f"cuda: LLVM rejected the code generated for program '{program.name}' "
                           f"(a code generator bug): {e}") from None
    cubin = assemble(ptx, target, program.name)
    kernels = [{"name": k.name, "stage": k.stage_index, "block": list(k.block), "kind": k.kind}
               for k in module.kernels]
    return {"target": target, "triple": TRIPLE, "cpu": target, "features": (PTX_VERSIONS[target],),
            "toolchain": toolchain(), "meta": {"ptx_bytes": len(ptx.encode()), "kernels": kernels},
            "object": ptx.encode() + cubin}


def check_native(program: Program, native: Mapping[str, Any]) -> str | None:
    """What is wrong with shipped code for `program` (the module docstring's checks), or None."""
    try:
        code = shipped(program, native)
    except ValueError as e:
        return str(e)
    if not have_nvjitlink():
        return None
    try:
        assembled = assemble(code.ptx, code.target, program.name)
    except CompileError as e:
        return f"ptxas refuses its PTX: {e.message}"
    built_by = str(native.get("toolchain", "")).rpartition("; nvJitLink ")[2]
    if built_by == nvjitlink_version():
        if assembled != code.cubin:
            return "its cubin is not its PTX assembled (by the nvJitLink that built it, the one here)"
        return None
    return _cubin_refusal(code.cubin, code.target)


def shipped(program: Program, native: Mapping[str, Any]) -> Shipped:
    """The PTX, cubin and kernels shipped code holds, its form held to `program`:
    ValueError saying what does not hold."""
    target, meta, data = native.get("target"), native.get("meta"), native.get("object")
    if target not in PTX_VERSIONS:
        raise ValueError(f"not a CUDA target: {target!r} (expected one of {', '.join(TARGETS)})")
    if native.get("cpu") != target or tuple(native.get("features", ())) != (PTX_VERSIONS[target],):
        raise ValueError(f"its cpu and features are not {target!r} and [{PTX_VERSIONS[target]!r}]")
    if not isinstance(data, (bytes, bytearray)):
        raise ValueError("no object")
    if not isinstance(meta, dict) or set(meta) != {"ptx_bytes", "kernels"} or type(meta["ptx_bytes"]) is not int \
            or not 0 < meta["ptx_bytes"] < len(data) or not isinstance(meta["kernels"], list):
        raise ValueError("its description is not {ptx_bytes: the PTX's length, within the object; kernels: [...]}")
    kernels = _kernels(program, meta["kernels"])
    try:
        ptx = bytes(data[:meta["ptx_bytes"]]).decode("ascii")
    except UnicodeDecodeError as e:
        raise ValueError(f"its PTX is not ASCII text (byte {e.start})") from None
    _check_ptx(ptx, target, kernels)
    cubin = bytes(data[meta["ptx_bytes"]:])
    _check_cubin(cubin, target, kernels)
    return Shipped(target, ptx, cubin, kernels)


def _kernels(program: Program, listed: list) -> tuple[KernelEntry, ...]:
    shapes = kernel_shapes(program)
    if len(listed) != len(shapes):
        raise ValueError(f"it lists {len(listed)} kernels; the program has {len(shapes)} (its stages and their inits)")
    out = []
    for k, ((stage, block, kind), item) in enumerate(zip(shapes, listed)):
        if not isinstance(item, dict) or set(item) != {"name", "stage", "block", "kind"} \
                or not isinstance(item["name"], str) or not _NAME.match(item["name"]):
            raise ValueError(f"kernel {k}: its description is not {{name: a PTX identifier, stage, block, kind}}")
        if (item["stage"], item["block"], item["kind"]) != (stage, list(block), kind):
            raise ValueError(f"kernel {k} ({item['name']}): stage {item['stage']!r} of block {item['block']!r}, "
                             f"kind {item['kind']!r}; the program's kernel {k} is stage {stage} "
                             f"({program.stages[stage].name!r}) of block {list(block)}, kind {kind!r}")
        out.append(KernelEntry(item["name"], stage, block, kind))
    if len({k.name for k in out}) != len(out):
        raise ValueError("two kernels have the same name")
    return tuple(out)


def _check_ptx(ptx: str, target: str, kernels: tuple) -> None:
    version = PTX_VERSIONS[target].removeprefix("ptx")
    header = {"version": f"{version[0]}.{version[1:]}", "target": target, "address_size": "64"}
    for directive, want in header.items():
        found = re.findall(rf"(?m)^\.{directive}\s+(\S+)\s*$", ptx)
        if found != [want]:
            raise ValueError(f"its PTX says .{directive} {', '.join(found) or 'nothing'}; expected {want}")
    for kernel in kernels:
        if not re.search(rf"(?m)^\.visible \.entry {kernel.name}\(", ptx):
            raise ValueError(f"its PTX does not declare kernel {kernel.name} (stage {kernel.stage_index})")


def _check_cubin(cubin: bytes, target: str, kernels: tuple) -> None:
    if len(cubin) < 64 or cubin[:4] != b"\x7fELF" or cubin[4] != 2 or cubin[5] != 1:
        raise ValueError("its cubin is not a 64-bit little-endian ELF file")
    machine, = struct.unpack_from("<H", cubin, 18)
    flags, = struct.unpack_from("<I", cubin, 48)
    arch = int(target.removeprefix("sm_"))
    # the SM is e_flags' second byte in the ELF ABI version 8 cubins CUDA 12.8+ writes, its low byte before
    if machine != EM_CUDA or arch not in ((flags >> 8) & 0xFF, flags & 0xFF):
        raise ValueError(f"its cubin is not CUDA code for {target} (e_machine {machine}, e_flags {flags:#x})")
    for kernel in kernels:
        if b"\0" + kernel.name.encode() + b"\0" not in cubin:
            raise ValueError(f"its cubin does not name kernel {kernel.name} (stage {kernel.stage_index})")


def _cubin_refusal(cubin: bytes, target: str) -> str | None:
    from cuda.bindings import nvjitlink as nvj

    handle = nvj.create(1, [f"-arch={target}"])
    try:
        nvj.add_data(handle, nvj.InputType.CUBIN, cubin, len(cubin), "shipped")
        nvj.complete(handle)
    except nvj.nvJitLinkError as e:
        return f"nvJitLink refuses its cubin for {target}: {e}"
    finally:
        nvj.destroy(handle)
    return None


def choose(natives: Sequence[Mapping[str, Any]], capability: tuple[int, int],
           driver_version: int) -> tuple[Mapping[str, Any], str] | None:
    """(code, 'cubin' or 'ptx'): what a device of compute `capability` (major, minor)
    runs, under a driver of `driver_version` (cuDriverGetVersion's number); None when
    nothing shipped fits it (the module docstring says the order)."""
    def sm(n: Mapping[str, Any]) -> tuple[int, int]:
        number = int(str(n.get("target")).removeprefix("sm_"))
        return number // 10, number % 10

    known = [n for n in natives if n.get("target") in PTX_VERSIONS]
    cubins = [n for n in known if sm(n)[0] == capability[0] and sm(n)[1] <= capability[1]]
    if cubins:
        return max(cubins, key=sm), "cubin"
    ptx = [n for n in known if sm(n) <= capability and DRIVER_FOR_PTX[PTX_VERSIONS[n["target"]]] <= driver_version]
    if ptx:
        return max(ptx, key=sm), "ptx"
    return None


def shipped_for_device(program: Program, natives: Sequence[Mapping[str, Any]]) -> tuple[Shipped, str] | None:
    """The shipped code of this code generator that the current device runs, checked,
    with how ('cubin', or 'ptx' for the driver to JIT); None when none fits. Needs a
    device (the backend asks only when `available()`)."""
    from cuda.bindings import driver

    mine = [n for n in natives if str(n.get("toolchain", "")).split("; ", 1)[0] == generator()]
    _, device = driver.cuDeviceGet(0)
    attr = driver.CUdevice_attribute
    _, major = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device)
    _, minor = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device)
    _, version = driver.cuDriverGetVersion()
    picked = choose(mine, (major, minor), version)
    if picked is None:
        return None
    native, kind = picked
    try:
        return shipped(program, native), kind
    except ValueError as e:
        warnings.warn(HologramWarning(f"cuda: the code shipped for program '{program.name}' ({native.get('target')}) "
                                      f"is not used: {e}; the program is compiled here instead"), stacklevel=4)
        return None
