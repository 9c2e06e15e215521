"""WGSL shipped in bundles: the native target `wgsl` (docs/bundles.md, "Native code";
docs/gpu.md, "Bundles").

A kernel's object is its stages' shaders, one after the other, as UTF-8 text (readable
with `unzip -p bundle.hgb native/wgpu/wgsl/<kernel>.o`); its `meta` is the launch-info
layout the shaders read (wgsl.ShaderSet: the buffers, symbols and scalars in info-word
order) and, per stage, the global buffers it binds and its shader's length in bytes:

    {"buffers": [...], "symbols": [...], "scalars": [...],
     "stages": [{"buffers": ["x", "y"], "bytes": 4180}, ...]}

Shaders are a function of the program and the code generator only (never of the
adapter), so the same program gives the same bytes on any machine. They are checked in
two steps: `shipped_shaders` holds the text to the program and the layout (every stage
there, its bindings exactly 0..k+1, one `main` entry point), with no device; naga
(through wgpu's `create_shader_module`, with the compute pipeline the driver compiles)
validates them wherever an adapter exists: at build time, in `hologram bundle verify`
and at every load, before a shader runs. A build on a machine without an adapter ships
shaders only the first step checked; a load validates them anyway.
"""

from __future__ import annotations

import functools
import hashlib
import re
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

from hologram.backend import Program, trace
from hologram.errors import CompileError, HologramWarning

from . import device as gpu_device
from .wgsl import ShaderSet, StageShader, generate, layout
from .wgsl_exprs import ATLAS_BINDING, PARTIALS_BINDING

__all__ = ["TARGET", "toolchain", "compile_native", "check_native", "load_shipped", "shipped_shaders"]

TARGET = "wgsl"
TRIPLE = "wgsl"  # what the manifest's `triple` says: WebGPU's shading language, for any adapter
_GENERATOR_SOURCES = "wgsl"  # wgsl.py, wgsl_exprs.py, wgsl_lib.py: the shaders and the info-word layout
_BINDING = re.compile(r"@group\((\d+)\)\s*@binding\((\d+)\)")
_ENTRY = re.compile(r"@compute\s+@workgroup_size\([^)]*\)\s*fn\s+main\s*\(")


@functools.cache
def toolchain() -> str:
    """The code generator that wrote the shaders: a digest of its sources, which fix the
    bindings and the launch-info layout the launch code fills. Shipped shaders are used
    only by the generator that wrote them (which wgpu compiles them does not matter)."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob(f"{_GENERATOR_SOURCES}*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"wgsl-codegen {digest.hexdigest()[:16]}"


def compile_native(program: Program) -> dict[str, Any]:
    """The shaders of the verified, covered `program` as the target `wgsl`, validated by
    naga when an adapter is here (a shader naga refuses is a code generator bug:
    CompileError)."""
    shaders = generate(program)
    native = {"target": TARGET, "triple": TRIPLE, "cpu": "any", "features": (), "toolchain": toolchain(),
              "meta": {"buffers": list(shaders.buffer_names), "symbols": list(shaders.symbol_names),
                       "scalars": list(shaders.scalar_names),
                       "stages": [{"buffers": list(s.buffers), "bytes": len(s.code.encode())} for s in shaders.stages]},
              "object": b"".join(s.code.encode() for s in shaders.stages)}
    problem = check_native(program, native)
    if problem is not None:
        raise CompileError(f"wgpu: the WGSL generated for program '{program.name}' is not valid (a code generator "
                           f"bug): {problem}")
    return native


def check_native(program: Program, native: Mapping[str, Any]) -> str | None:
    """What is wrong with shipped shaders for `program`: their form, then naga's verdict
    when an adapter is here; None when both hold."""
    try:
        shaders = shipped_shaders(program, native)
    except ValueError as e:
        return str(e)
    return _naga_problem(shaders)


def load_shipped(program: Program, natives: Sequence[Mapping[str, Any]]) -> tuple[ShaderSet, tuple] | None:
    """(shaders, pipelines) of the first shipped `wgsl` code of this code generator that
    passes `shipped_shaders` and naga, made into pipelines on this device, with no code
    generation; None when none does. Code refused is named in a HologramWarning, and the
    program is then generated here (docs/bundles.md, "Native code")."""
    mine = [n for n in natives if n.get("target") == TARGET and n.get("toolchain") == toolchain()]
    for n in mine:
        try:
            shaders = shipped_shaders(program, n)
            if gpu_device.device_refusal(program, tuple(2 + len(s.buffers) for s in shaders.stages)) is not None:
                return None  # this adapter cannot run it: `prepare` says why
            with trace.span("load shipped WGSL", "prepare", program=program.name):
                return shaders, gpu_device.make_pipelines(tuple(s.code for s in shaders.stages))
        except ValueError as e:
            problem = str(e)
        except Exception as e:  # naga's or the driver's refusal, as wgpu raises it
            problem = f"naga refuses it: {type(e).__name__}: {e}"
        warnings.warn(HologramWarning(f"wgpu: the WGSL shipped for program '{program.name}' is not used: {problem}; "
                                      f"the program is compiled here instead"), stacklevel=4)
    return None


def shipped_shaders(program: Program, native: Mapping[str, Any]) -> ShaderSet:
    """The ShaderSet shipped code describes, held to `program`: ValueError saying what
    does not hold."""
    meta, data = native.get("meta"), native.get("object")
    if native.get("target") != TARGET:
        raise ValueError(f"not WGSL: the target is {native.get('target')!r}")
    if not isinstance(data, (bytes, bytearray)):
        raise ValueError("no shader text")
    if not isinstance(meta, dict) or set(meta) != {"buffers", "symbols", "scalars", "stages"}:
        raise ValueError("its description is not {buffers, symbols, scalars, stages}")
    expected = layout(program)
    for field, names in (("buffers", expected.buffer_names), ("symbols", expected.symbol_names),
                         ("scalars", expected.scalar_names)):
        if meta[field] != list(names):
            raise ValueError(f"its {field} are {meta[field]!r}; the program's are {list(names)!r}")
    stages = meta["stages"]
    if not isinstance(stages, list) or len(stages) != len(program.stages):
        raise ValueError(f"it describes {len(stages) if isinstance(stages, list) else 'no'} stages; the program has "
                         f"{len(program.stages)}")
    known = set(expected.buffer_names) | {ATLAS_BINDING, PARTIALS_BINDING}
    shaders, offset = [], 0
    for k, (stage, item) in enumerate(zip(program.stages, stages)):
        where = f"stage {k} ({stage.name!r})"
        if not isinstance(item, dict) or set(item) != {"buffers", "bytes"} or not isinstance(item["buffers"], list) \
                or not all(isinstance(b, str) for b in item["buffers"]) \
                or type(item["bytes"]) is not int or item["bytes"] <= 0:
            raise ValueError(f"{where}: its description is not {{buffers: [names], bytes: a positive length}}")
        bound = item["buffers"]
        if len(set(bound)) != len(bound) or not set(bound) <= known:
            raise ValueError(f"{where}: it binds {bound!r}, not distinct buffers of the program")
        end = offset + item["bytes"]
        if end > len(data):
            raise ValueError(f"{where}: its shader runs past the end of the object ({end} > {len(data)} bytes)")
        try:
            code = bytes(data[offset:end]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{where}: its shader is not UTF-8 text ({e.reason} at byte {e.start})") from None
        _check_text(code, len(bound), where)
        shaders.append(StageShader(code, tuple(bound)))
        offset = end
    if offset != len(data):
        raise ValueError(f"the object holds {len(data) - offset} bytes after the last stage's shader")
    return ShaderSet(len(program.stages), expected.buffer_names, expected.symbol_names, expected.scalar_names,
                     tuple(shaders))


def _check_text(code: str, buffers: int, where: str) -> None:
    """A stage shader's interface: bindings 0 (the error record), 1 (the launch info) and
    one per bound buffer, all in group 0, each once; one compute entry point `main`."""
    bindings = [(int(g), int(b)) for g, b in _BINDING.findall(code)]
    if sorted(bindings) != [(0, b) for b in range(buffers + 2)]:
        raise ValueError(f"{where}: its shader declares bindings {sorted(bindings)}; expected group 0, bindings "
                         f"0..{buffers + 1} (the error record, the launch info and its {buffers} buffers)")
    if len(_ENTRY.findall(code)) != 1:
        raise ValueError(f"{where}: its shader has no single `@compute @workgroup_size(...) fn main` entry point")


def _naga_problem(shaders: ShaderSet) -> str | None:
    """naga's (and the driver's) verdict on the shaders, when an adapter is here; None when
    they pass, or when there is no adapter to ask (the form checks are then all there is)."""
    if gpu_device.unavailable_reason() is not None:
        return None
    for k, s in enumerate(shaders.stages):
        try:
            gpu_device.make_pipelines((s.code,))
        except Exception as e:  # wgpu's GPUValidationError (naga's message), or the driver's
            return f"stage {k}: naga refuses its shader: {type(e).__name__}: {e}"
    return None
