"""The wheel carries the kernels compiled: `build_py` also builds the bundle
`examplekernels` from kernels/ into the package (hologram_kernels_example/
examplekernels-VERSION.hgb, with native code for the build architecture's CPU levels),
so `hologram.load_bundle("examplekernels")` compiles nothing after `pip install`.
Everything else about the distribution is in pyproject.toml."""

from setuptools import setup

from hologram.bundles.shipping import build_py_with_bundle  # hologram-kernels is a build requirement

# the name must be hologram_kernels_example.NAME, which registers the file at run time
setup(cmdclass={"build_py": build_py_with_bundle("examplekernels", "hologram_kernels_example")})
