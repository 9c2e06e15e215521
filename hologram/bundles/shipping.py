"""Shipping a bundle inside a Python package: the wheel build that compiles it, and the
reference a plugin registers (docs/plugins.md, "Shipping kernels as a bundle").

    # setup.py
    from hologram.bundles.shipping import build_py_with_bundle
    setup(cmdclass={"build_py": build_py_with_bundle("mykernels", "my_package")})

    # my_package/__init__.py (entry point `mykernels = "my_package"` in group `hologram`)
    @hookimpl
    def hologram_register_bundles(register):
        ref = bundle_ref("mykernels", __version__, Path(__file__).parent, Path(__file__).parent.parent / "kernels")
        if ref is not None:
            register(ref)

A wheel carries `NAME-VERSION.hgb` beside the package's modules, built when the wheel was;
a source checkout (an editable install) has the documents instead, and the bundle is
built at its first load into the cache, under a digest of the documents and of the
hologram version, so an edited kernel or another hologram gives a new bundle. The file
in the package is trusted as the package's code is (the installer wrote both); the one
in the cache is not: anyone who can write the cache could have replaced it, so its
native code never runs, and loading holds it to the documents (hologram.bundles.load).
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path
from typing import Any

from hologram.core.distribution import hologram_version
from hologram.core.errors import HologramWarning
from hologram.core.files import cache_root
from hologram.core.hookspecs import BundleRef


def bundle_ref(name: str, version: str, package_dir: Path, sources: Path) -> BundleRef | None:
    """What a plugin registers for its bundle `name`: the file its wheel carries in
    `package_dir`, else (a source checkout) one built from the documents in `sources` at
    its first load; None when there is neither."""
    shipped = sorted(Path(package_dir).glob(f"{name}-*.hgb"))
    if shipped:
        return BundleRef(name, str(shipped[-1]))
    sources = Path(sources)
    if not sources.is_dir():
        return None
    digest = hashlib.sha256(hologram_version().encode() + b"\0")
    for doc in sorted(sources.rglob("*")):  # every file a build may read (it skips hidden ones)
        rel = doc.relative_to(sources).as_posix()
        if doc.is_file() and not any(part.startswith(".") for part in rel.split("/")):
            digest.update(rel.encode() + b"\0" + doc.read_bytes() + b"\0")
    path = cache_root() / "bundles" / digest.hexdigest()[:16] / f"{name}-{version}.hgb"

    def make() -> bytes | None:
        from hologram.bundles.build import build, write_atomically  # the compiler, for this first load only

        # no native code: a file in the cache is never trusted to run it, so this machine
        # JIT-compiles anyway (docs/bundles.md, "The standard library")
        report = build([sources], name, version, None, jobs=1, native="none")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, report.data)
        except OSError as exc:  # read-only, or a file where a folder should be
            warnings.warn(HologramWarning(
                f"cannot write the bundle {name} {version} to {path} ({exc.strerror or exc}): it was built in "
                f"memory, and every process will build it again",
                hint="set HOLOGRAM_CACHE_DIR to a folder you can write"), stacklevel=2)
            return report.data
        return None
    return BundleRef(name, str(path), make, str(sources))


def build_py_with_bundle(name: str, package: str, sources: str = "kernels", native: str = "auto") -> type:
    """A setuptools `build_py` command that also compiles the documents in `sources`
    (relative to setup.py) into `package/NAME-VERSION.hgb` (VERSION: the distribution's,
    a semantic version), with native code for `native`. Not in an editable install,
    which builds at the first load instead (`bundle_ref`)."""
    from setuptools.command.build_py import build_py  # build time only

    class BuildPyWithBundle(build_py):
        def run(self) -> None:
            super().run()
            if getattr(self, "editable_mode", False):
                return
            from hologram.bundles.build import build
            from hologram.core.errors import HologramError

            root = Path(self.distribution.src_root or Path.cwd())
            docs = root / sources
            if not docs.is_dir():
                raise SystemExit(f"{sources}/ is missing: the bundle {name} cannot be built (is it in MANIFEST.in?)")
            _register_builtins()
            version = semver_of(self.distribution.get_version())
            target = Path(self.build_lib, *package.split("."))
            target.mkdir(parents=True, exist_ok=True)
            for old in target.glob(f"{name}-*.hgb"):  # another version's, from an earlier build
                old.unlink()
            # hologram's own wheel is built from its uninstalled source: it names its version
            own = self.distribution.get_name() == "hologram-kernels"
            try:
                report = build([docs], name, version, target / f"{name}-{version}.hgb", cache_dir=False, jobs=1,
                               built_by=version if own else hologram_version(), native=native)
            except HologramError as e:  # a kernel that does not compile: its message, pointing into the document
                raise SystemExit(f"building the bundle {name} failed:\n{e.render()}") from None
            print(f"built {name} {version}: {len(report.kernels)} kernels, {len(report.data):,} bytes")
    return BuildPyWithBundle


def semver_of(version: str) -> str:
    """The semantic version a distribution's (PEP 440, as setuptools normalizes it) stands
    for: `1.2.0rc1` -> `1.2.0-rc.1`, `1.2.0.dev3` -> `1.2.0-dev.3`, `1.2.0+local` kept.
    A bundle's version is semver; a version with no semver spelling (`1.2`, an epoch, a
    post-release) raises SystemExit saying so."""
    from packaging.version import InvalidVersion, Version  # build time only

    try:
        v = Version(version)
    except InvalidVersion:
        raise SystemExit(f"version {version!r} is not a version") from None
    if len(v.release) != 3 or v.epoch or v.post is not None:
        raise SystemExit(f"version {version!r} has no semantic-version spelling (a bundle's version is "
                         "MAJOR.MINOR.PATCH, with an optional pre-release: 1.2.0, 1.2.0rc1, 1.2.0.dev3)")
    out = ".".join(map(str, v.release))
    pre = [f"{ {'a': 'alpha', 'b': 'beta', 'rc': 'rc'}[v.pre[0]]}.{v.pre[1]}"] if v.pre else []
    pre += [f"dev.{v.dev}"] if v.dev is not None else []
    if pre:
        out += "-" + ".".join(pre)
    return out + (f"+{v.local}" if v.local else "")


def _register_builtins() -> None:
    """The built-in translators and passes, when no installed hologram registered them
    (hologram's own wheel build, which runs its source tree uninstalled)."""
    from hologram.dsl import builtin as translators
    from hologram.passes import builtin as passes
    from hologram.registry.plugins import plugin_manager

    manager: Any = plugin_manager()
    for plugin_name, module in (("builtin_translators", translators), ("builtin_passes", passes)):
        if manager.get_plugin(plugin_name) is None:
            manager.register(module, name=plugin_name)
