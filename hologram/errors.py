"""The exceptions Hologram raises, as users and plugins import them: `hologram.errors`.

Every user-facing error is a `HologramError` (docs/api.md, "Errors"). The classes live in
`hologram.core.errors`, the compiler's ground floor; this module is their public name,
the one a plugin imports (a backend imports only `hologram.backend` and this module:
docs/backends.md), so the compiler's layout can change without breaking them.
`hologram.errors` is this module whether reached as an attribute of `hologram` or
imported.
"""

from __future__ import annotations

from hologram.core.errors import (
    ArgumentError, BundleError, CompileError, CompileWarning, DocumentError, EmptyReductionError, ExecutionError,
    HologramError, HologramWarning, ISAError, KernelNotFoundError, PluginError, Site, Span, StreamError,
    UnsupportedProgram, VerifyError, out_of_bounds,
)

__all__ = ["ArgumentError", "BundleError", "CompileError", "CompileWarning", "DocumentError", "EmptyReductionError",
           "ExecutionError", "HologramError", "HologramWarning", "ISAError", "KernelNotFoundError", "PluginError",
           "Site", "Span", "StreamError", "UnsupportedProgram", "VerifyError", "out_of_bounds"]
