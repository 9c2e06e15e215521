"""Hologram: compute kernels written as a dataflow DSL in TOML, compiled ahead of time to
the Atlas ISA, run on pluggable backends.

    import hologram as hg
    k = hg.compile_file("kernels/softmax.toml")
    y = k(x)                      # outputs allocated and returned
    k(x, out=y)                   # written in place, zero-copy
    k.on("interp")(x)             # the same kernel on another backend

See docs/api.md for the runtime API and docs/plugins.md for writing plugins.
"""

import os

from hologram.core import errors
from hologram.core.distribution import hologram_version
from hologram.core.hookspecs import hookimpl
from hologram.runtime.compile import clear_cache, compile, compile_all, compile_file, compile_file_all
from hologram.runtime.kernel import Kernel, Library
from hologram.runtime.lookups import get_backend, list_backends


def load_bundle(name_or_path: str | os.PathLike, version: str | None = None, backend: str | None = None,
                trust_native: bool | None = None) -> Library:
    """The kernels of a bundle, by path or by name (the highest version the PEP 440
    specifier `version` admits), ready to call: see hologram.bundles.load, docs/bundles.md."""
    from hologram.bundles.load import load_bundle as load  # zipfile, tomllib: ~13 ms, paid by the first bundle

    return load(name_or_path, version, backend, trust_native)


def __getattr__(name: str) -> str:
    # `__version__` is read from the distribution's metadata when asked for: importing
    # importlib.metadata costs ~20 ms, more than a third of what `import hologram` adds to numpy
    if name != "__version__":
        raise AttributeError(f"module 'hologram' has no attribute {name!r}")
    return hologram_version()


__all__ = ["compile", "compile_file", "compile_all", "compile_file_all", "load_bundle", "get_backend", "list_backends",
           "clear_cache", "Kernel", "Library", "hookimpl", "errors", "__version__"]
