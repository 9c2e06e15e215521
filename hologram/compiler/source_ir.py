"""A kernel's IR kept as its encoding (hologram.ir_codec), decoded at its first use.

A bundle's kernel and an unpickled one hold the IR the front end built as bytes; only
the stream planner reads it (streaming along a shape symbol), so neither loading a
bundle nor unpickling a kernel decodes it, and the codec is imported then, not before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from hologram.compiler.signature import Signature
from hologram.core.errors import HologramError

if TYPE_CHECKING:
    from hologram.ir import KernelIR


class EncodedIR:
    """The IR `data` encodes, given when called, held to the kernel's `signature`: an
    encoding that is damaged or is another kernel's IR raises `error` naming `where`.
    The bytes stay at hand, so a kernel pickles them as they are (`encoded`). A plain
    class, not an attrs one: it is created on the bundle load path, where each attrs
    class costs ~0.4 ms to create (docs/decisions.md, "Start-up")."""

    __slots__ = ("data", "signature", "where", "error")

    def __init__(self, data: bytes, signature: Signature, where: str,
                 error: type[HologramError] = HologramError) -> None:
        self.data, self.signature, self.where, self.error = data, signature, where, error

    def __call__(self) -> KernelIR:
        from hologram.ir_codec import decode

        try:
            kir = decode(self.data)
        except ValueError as exc:
            raise self.error(f"{self.where}: not a kernel IR this hologram reads: {exc}") from None
        problem = foreign(kir, self.signature)
        if problem is not None:
            raise self.error(f"{self.where}: the IR is not this kernel's: {problem}")
        return kir


def encoded(ir: KernelIR | Callable[[], KernelIR] | None) -> bytes | None:
    """The encoding of a `Compiled`'s source IR as it holds it: the bytes of one not yet
    decoded, else the IR encoded (None for none)."""
    if isinstance(ir, EncodedIR):
        return ir.data
    if ir is None:
        return None
    from hologram.ir_codec import encode

    return encode(ir() if callable(ir) else ir)


def foreign(kir: KernelIR, signature: Signature) -> str | None:
    """How `kir`'s interface differs from `signature` (the one a call checks), or None:
    a stream planned from another interface would read and write other arrays."""
    if kir.name != signature.name:
        return f"its name is {kir.name!r}"
    theirs = Signature.of(kir)
    if theirs != signature:
        return f"its interface is {theirs}, the kernel's is {signature}"
    return None
