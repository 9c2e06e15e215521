"""This CPU, told without LLVM: what object code may run here, and a key for caches.

A process that only runs cached or shipped object code must not pay for llvmlite.binding
(~22 ms) to learn what CPU it is on: the operating system already says. On Linux the
features come from /proc/cpuinfo's flags (the kernel's names, mapped to LLVM's below);
where that is not enough (another OS, a feature outside the table) the answer is None
and the caller asks LLVM (jit.py).
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from typing import Iterable

from . import elf

# The x86-64 micro-architecture levels of the psABI, as the LLVM features each requires
# beyond baseline x86-64. Native code built for a level runs on a CPU that has all of
# them: the check is a feature superset, never a comparison of CPU names.
_V2 = ("cx16", "popcnt", "sahf", "sse3", "sse4.1", "sse4.2", "ssse3")
_V3 = _V2 + ("avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave")
_V4 = _V3 + ("avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl")
X86_64_LEVELS = {"x86-64-v2": _V2, "x86-64-v3": _V3, "x86-64-v4": _V4}
# LLVM's name -> Linux's /proc/cpuinfo flag, for every feature of the levels
_LINUX_FLAG = {"sahf": "lahf_lm", "sse3": "pni", "sse4.1": "sse4_1", "sse4.2": "sse4_2", "bmi": "bmi1",
               "lzcnt": "abm"} | {f: f for f in _V4 if f not in ("sahf", "sse3", "sse4.1", "sse4.2", "bmi", "lzcnt")}
_ARCH = {"amd64": "x86_64", "x86_64": "x86_64", "arm64": "aarch64", "aarch64": "aarch64"}


@functools.cache
def arch() -> str:
    """The machine's architecture as LLVM's triples spell it (x86_64, aarch64, ...)."""
    if hasattr(os, "uname"):
        m = os.uname().machine.lower()
    else:  # Windows: the platform module (~1.5 ms to import) is what knows
        import platform

        m = platform.machine().lower()
    return _ARCH.get(m, m)


def same_platform(triple: str) -> bool:
    """Whether code for `triple` (arch-vendor-os[-env]) is for this architecture and OS."""
    parts = triple.split("-")
    os_name = parts[2] if len(parts) > 2 else ""
    here = {"linux": ("linux",), "darwin": ("darwin", "macos"), "win32": ("windows", "win32")}
    return parts[0] == arch() and os_name.startswith(here.get(sys.platform, (sys.platform,)))


@functools.cache
def _cpuinfo() -> tuple[str, frozenset[str]] | None:
    """(model name, flags) of the first CPU in /proc/cpuinfo, or None where there is none."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 16)
    except OSError:
        return None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    if "flags" not in fields:
        return None
    return fields.get("model name", ""), frozenset(fields["flags"].split())


def has_features(features: Iterable[str]) -> bool | None:
    """Whether this CPU has every LLVM feature in `features`; None when the OS does not
    say (then ask LLVM)."""
    info = _cpuinfo()
    features = list(features)
    if info is None or arch() != "x86_64" or not all(f in _LINUX_FLAG for f in features):
        return None
    return all(_LINUX_FLAG[f] in info[1] for f in features)


def fingerprint() -> str | None:
    """What a cache key needs to know about this machine (architecture, OS, the CPU's
    model and every feature flag), or None when the OS does not say."""
    info = _cpuinfo()
    if info is None:
        return None
    digest = hashlib.sha256("\0".join([info[0], *sorted(info[1])]).encode()).hexdigest()[:16]
    return f"{arch()}-{sys.platform}; cpu {digest}"


# ------------------------------------------------------------------- object code form
def undefined_symbols(obj: bytes) -> list[str] | None:
    """The undefined symbols an ELF64 little-endian object references (what the loader
    must resolve), or None for another object format. A malformed object raises
    RuntimeError (elf.Malformed)."""
    if not elf.is_elf64(obj):
        return None
    return [s.name for s in elf.read(obj).symbols if s.name and s.shndx == elf.SHN_UNDEF]


def object_problem(obj: bytes, functions: Iterable[str] = ()) -> str | None:
    """Why object code from elsewhere must not be linked here, or None: it must be an
    x86-64 ELF relocatable object that `elf.read` finds well formed (every section,
    symbol and relocation inside the file and inside its section, alignments and
    zero-filled sizes within the limits) and that defines each of `functions` as a
    function in its code. This checks form, not meaning: shipped code is still trusted
    code."""
    try:
        checked = elf.read(obj)
        if checked.machine != elf.EM_X86_64:
            return f"an object for machine {checked.machine}; cpu_llvm links x86-64 objects only"
        elf.functions(checked, functions)
    except RuntimeError as e:
        return str(e)
    return None
