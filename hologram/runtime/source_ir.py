"""A kernel's IR kept as its encoding (hologram.ir_codec), decoded at its first use.

A bundle's kernel and an unpickled one hold the IR the front end built as bytes; only
the stream planner reads it (streaming along a shape symbol), so neither loading a
bundle nor unpickling a kernel decodes it, and the codec is imported then, not before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from hologram.core.errors import HologramError
from hologram.runtime.args import Signature

if TYPE_CHECKING:
    from hologram.ir import KernelIR


def lazy_source_ir(data: bytes, signature: Signature, where: str,
                   error: type[HologramError] = HologramError) -> Callable[[], KernelIR]:
    """A function giving the IR `data` encodes, held to the kernel's `signature`: an
    encoding that is damaged or is another kernel's IR raises `error` naming `where`."""
    def decode() -> KernelIR:
        from hologram.ir_codec import decode as decode_ir

        try:
            kir = decode_ir(data)
        except ValueError as exc:
            raise error(f"{where}: not a kernel IR this hologram reads: {exc}") from None
        problem = foreign(kir, signature)
        if problem is not None:
            raise error(f"{where}: the IR is not this kernel's: {problem}")
        return kir
    return decode


def foreign(kir: KernelIR, signature: Signature) -> str | None:
    """How `kir`'s interface differs from `signature` (the one a call checks), or None:
    a stream planned from another interface would read and write other arrays."""
    if kir.name != signature.name:
        return f"its name is {kir.name!r}"
    theirs = Signature.of(kir)
    if theirs != signature:
        return f"its interface is {theirs}, the kernel's is {signature}"
    return None
