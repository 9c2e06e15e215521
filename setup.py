"""The wheel carries the standard library compiled: `build_py` also builds the `stdlib`
bundle from kernels/ into the package (hologram/bundles/stdlib-VERSION.hgb, with native
code for the build architecture's CPU levels), so `hologram.load_bundle("stdlib")` needs
no compiler after `pip install`. Everything else about the distribution is in
pyproject.toml."""

import sys
from pathlib import Path

from setuptools import setup

sys.path.insert(0, str(Path(__file__).resolve().parent))  # this checkout's hologram builds it
from hologram.bundles.shipping import build_py_with_bundle  # noqa: E402

setup(cmdclass={"build_py": build_py_with_bundle("stdlib", "hologram.bundles")})
