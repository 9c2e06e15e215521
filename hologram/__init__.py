"""Hologram: compute kernels written as a dataflow DSL in TOML, compiled ahead of time to
the Atlas ISA, run on pluggable backends.

    import hologram as hg
    k = hg.compile_file("kernels/softmax.toml")
    y = k(x)                      # outputs allocated and returned
    k(x, out=y)                   # written in place, zero-copy
    k.on("interp")(x)             # the same kernel on another backend
    lib = hg.load_bundle("stdlib")  # kernels compiled ahead of time: no compiler work
    with hg.trace.recording("trace.json"):  # spans for Perfetto (or HOLOGRAM_TRACE=trace.json)
        k(x)
    hg.stream(k, x_memmap, out=y_memmap)  # inputs larger than memory, through a fixed pool
    z = k.on("wgpu")(hg.to_device(x, "wgpu"))  # arrays kept in a GPU's memory between kernels

    @hg.kernel                    # a Python function, translated (never run): docs/python-kernels.md
    def scale(x: f32["n"], k: f32) -> f32["n"]:
        return x * k

See docs/api.md for the runtime API, docs/tracing.md for tracing and docs/plugins.md for
writing plugins.

Every public name is imported when first used (PEP 562), so `import hologram` costs
almost nothing: a process that loads a bundle never imports the compiler (the DSL front
end, the passes, lowering), one that compiles pays for it at its first compile
(docs/decisions.md, "Start-up").
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hologram import errors
    from hologram.core import trace
    from hologram.core.hookspecs import hookimpl
    from hologram.compile_api.compile import clear_cache, compile, compile_all, compile_file, compile_file_all
    from hologram.compile_api.decorator import kernel
    from hologram.call.kernel import Kernel, Library
    from hologram.registry.lookups import get_backend, list_backends
    from hologram.streaming.stream import stream
    from hologram.call.device import to_device
    from hologram.backend.device import DeviceArray

# public name -> the module that defines it (the module itself for `errors`)
_HOME = {
    "compile": "hologram.compile_api.compile", "compile_all": "hologram.compile_api.compile",
    "compile_file": "hologram.compile_api.compile", "compile_file_all": "hologram.compile_api.compile",
    "clear_cache": "hologram.compile_api.compile", "Kernel": "hologram.call.kernel",
    "Library": "hologram.call.kernel", "get_backend": "hologram.registry.lookups",
    "list_backends": "hologram.registry.lookups", "hookimpl": "hologram.core.hookspecs",
    "errors": "hologram.errors", "kernel": "hologram.compile_api.decorator", "trace": "hologram.core.trace",
    "stream": "hologram.streaming.stream", "to_device": "hologram.call.device",
    "DeviceArray": "hologram.backend.device",
}


def load_bundle(name_or_path: str | os.PathLike, version: str | None = None, backend: str | None = None,
                trust_native: bool | None = None) -> Library:
    """The kernels of a bundle, by path or by name (the highest version the PEP 440
    specifier `version` admits), ready to call: see hologram.bundles.load, docs/bundles.md."""
    from hologram.bundles.load import load_bundle as load

    return load(name_or_path, version, backend, trust_native)


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from hologram.core.distribution import hologram_version

        return hologram_version()
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'hologram' has no attribute {name!r}")
    module = importlib.import_module(home)
    value = module if name in ("errors", "trace") else getattr(module, name)
    globals()[name] = value  # found once: later lookups do not come back here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = ["compile", "compile_file", "compile_all", "compile_file_all", "load_bundle", "get_backend", "list_backends",
           "clear_cache", "Kernel", "Library", "hookimpl", "errors", "kernel", "trace", "stream", "to_device",
           "DeviceArray", "__version__"]

if os.environ.get("HOLOGRAM_TRACE"):  # trace this whole process (docs/tracing.md)
    from hologram.core.trace import start_from_environment

    start_from_environment()
