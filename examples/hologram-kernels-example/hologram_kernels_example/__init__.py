"""hologram-kernels-example: a library of kernels shipped compiled, as the bundle `examplekernels`.

    import hologram
    lib = hologram.load_bundle("examplekernels")
    y = lib.clamp01(x)

An installed wheel carries the bundle beside this module (`examplekernels-VERSION.hgb`,
compiled from kernels/ by setup.py when the wheel was built), so loading compiles
nothing. A source checkout (an editable install) has kernels/ instead: the bundle is
built at its first load into Hologram's cache, under a digest of the documents and of
the hologram version, so an edited kernel or a new hologram gives a new bundle, never a
stale one. Either way the hook below registers it; the entry point in pyproject.toml
(group `hologram`) is how Hologram finds this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from hologram import hookimpl
from hologram.bundles.shipping import bundle_ref
from hologram.core.hookspecs import BundleRef

__version__ = "0.1.0"  # the distribution's version (pyproject.toml reads it) and the bundle's: semver

NAME = "examplekernels"  # the bundle's name; setup.py builds the file under it
HERE = Path(__file__).resolve().parent
SOURCES = HERE.parent / "kernels"  # in a source checkout only; a wheel has the .hgb instead


@hookimpl
def hologram_register_bundles(register: Callable[[BundleRef], None]) -> None:
    ref = bundle_ref(NAME, __version__, HERE, SOURCES)
    if ref is not None:
        register(ref)
