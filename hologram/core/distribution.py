"""What the installed distribution says about itself."""

from __future__ import annotations


def hologram_version() -> str:
    """The installed hologram-kernels version ("0+unknown" for a source tree never installed)."""
    from importlib import metadata  # not at start-up: ~20 ms to import

    try:
        return metadata.version("hologram-kernels")
    except metadata.PackageNotFoundError:
        return "0+unknown"
