"""PTX -> cubin with nvJitLink (the `nvidia-nvjitlink` wheel, through `cuda-bindings`):
ptxas as a library, so PTX is assembled and checked on a machine without a GPU.

A PTX that ptxas refuses is a `CompileError` carrying ptxas's own message (the line and
what it could not read); without the wheels, `have_nvjitlink()` is False and
`assemble` raises a `PluginError` naming what to install.
"""

from __future__ import annotations

import functools

from hologram.errors import CompileError, PluginError

from .targets import check_target

INSTALL_HINT = "pip install nvidia-nvjitlink cuda-bindings"


@functools.cache
def _nvjitlink():
    """The nvjitlink module, or None when the wheels (or their library) are missing."""
    try:
        from cuda.bindings import nvjitlink
        nvjitlink.version()  # loads libnvJitLink: a missing library fails here, not at the first link
    except Exception:  # ImportError, or the library not found
        return None
    return nvjitlink


def have_nvjitlink() -> bool:
    return _nvjitlink() is not None


def nvjitlink_version() -> str | None:
    """nvJitLink's version (`13.5`), part of the cache key of a cubin; None without it."""
    nvj = _nvjitlink()
    return None if nvj is None else ".".join(map(str, nvj.version()))


def assemble(ptx: str, target: str, name: str = "kernel") -> bytes:
    """The cubin (an ELF) of `ptx` for `target`; `name` labels the input in ptxas's
    messages (the program's name)."""
    nvj = _nvjitlink()
    if nvj is None:
        raise PluginError("cuda: assembling PTX needs nvJitLink, which is not installed", hint=INSTALL_HINT)
    handle = nvj.create(1, [f"-arch={check_target(target)}"])
    try:
        data = ptx.encode()
        try:
            nvj.add_data(handle, nvj.InputType.PTX, data, len(data), name)
            nvj.complete(handle)
        except nvj.nvJitLinkError as e:
            raise CompileError(f"cuda: ptxas refused the PTX of {name!r} for {target}: "
                               f"{_error_log(nvj, handle) or e}") from None
        cubin = bytearray(nvj.get_linked_cubin_size(handle))
        nvj.get_linked_cubin(handle, cubin)
        return bytes(cubin)
    finally:
        nvj.destroy(handle)


def _error_log(nvj, handle) -> str:
    size = nvj.get_error_log_size(handle)
    if not size:
        return ""
    log = bytearray(size)
    nvj.get_error_log(handle, log)
    return log.rstrip(b"\0").decode(errors="replace").strip()
