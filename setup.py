"""The wheel carries the standard library compiled: `build_py` builds the `stdlib` bundle
from kernels/ into the package (hologram/bundles/stdlib-VERSION.hgb), so
`hologram.load_bundle("stdlib")` needs no compiler after `pip install`. Everything else
about the distribution is in pyproject.toml."""

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithStdlib(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install builds the bundle from kernels/ at its first load instead
        kernels = ROOT / "kernels"
        if not kernels.is_dir():  # pragma: no cover - an sdist always has it (MANIFEST.in)
            raise SystemExit("setup.py: kernels/ is missing: the stdlib bundle cannot be built")
        sys.path.insert(0, str(ROOT))  # this checkout's hologram, whatever is installed
        from hologram.bundles import stdlib
        from hologram.bundles.build import build
        from hologram.dsl import translators
        from hologram.passes import builtin
        from hologram.runtime.plugins import plugin_manager

        version = self.distribution.get_version()
        manager = plugin_manager()  # the build environment may not have hologram installed:
        for name, module in (("builtin_translators", translators), ("builtin_passes", builtin)):
            if manager.get_plugin(name) is None:  # register what its entry points would
                manager.register(module, name=name)
        target = Path(self.build_lib) / "hologram" / "bundles"
        target.mkdir(parents=True, exist_ok=True)
        for old in target.glob(f"{stdlib.NAME}-*.hgb"):
            old.unlink()
        report = build([kernels], stdlib.NAME, version, target / f"{stdlib.NAME}-{version}.hgb", cache_dir=False,
                       jobs=1, built_by=version)
        print(f"built {stdlib.NAME} {version}: {len(report.kernels)} kernels, {len(report.data):,} bytes")


setup(cmdclass={"build_py": BuildPyWithStdlib})
