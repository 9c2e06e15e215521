"""What a backend is: the interface every backend plugin implements.

A plugin registers backend objects through `hologram_register_backends(register)`.
The compiler and the runtime never import a backend; they find them through the
plugin manager (hologram.runtime.lookups), so the in-repo backends are exactly as
pluggable as a third party's.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, runtime_checkable

import numpy as np

from hologram.core.types import DType
from hologram.isa.program import Program


@runtime_checkable
class Backend(Protocol):
    """A place programs run.

    name        short unique name (`interp`, `cpu_llvm`); what `HOLOGRAM_BACKEND` names
    priority    the highest-priority available backend is the default

    Optionally, a backend may also define

        launcher(executable, symbols) -> run

    a launch with the argument checks done by the caller, for one binding of the shape
    symbols: `run(*buffers, *scalars)` takes the program's buffer params in declared
    order, each a C-contiguous array of the declared dtype whose shape matches the
    declared shape under `symbols` (writeable if the program writes it), then its scalar
    params in declared order as numpy scalars of the declared dtype; it returns None.
    It must still handle overlapping buffers as `launch` does (copy an input that
    overlaps a written buffer, or refuse). `Kernel` calls it after its own checks, on
    every call whose arguments match a call already fully checked (docs/api.md, "Fast
    path"); it is the only caller that may skip them. Without `launcher`, `Kernel`
    calls `launch`. `launch` itself stays fully checked.

    and

        text_forms: Mapping[str, str]      form name -> a one-line description
        emit(program, form) -> str         the program's text in that form

    readable forms of what the backend makes of a verified program (cpu_llvm: `llvm`,
    `llvm-opt`, `native`), shown by `Kernel.emit(form)` and `hologram compile --emit
    form --backend name`. A form named like a core one (`ast`, `ir`, `asm`, `stats`) is
    never reached: the core form wins. `emit` does not prepare or cache anything.

    and

        clear_cache() -> None              forget every prepared program it holds

    which `hologram.clear_cache()` calls on every loaded backend. A backend that caches
    what it prepares should bound the cache (interp and cpu_llvm keep 256 programs) and
    define this, so a user can give the memory back.
    """

    name: str
    priority: int

    def available(self) -> bool:
        """True when this backend can run on this machine now."""

    def allocate(self, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
        """A new C-contiguous array this backend can launch on (zeroed)."""

    def prepare(self, program: Program) -> Any:
        """A verified program made ready to launch (an executable). Backends cache this
        by program hash; preparing the same program twice is cheap."""

    def launch(self, executable: Any, buffers: Mapping[str, np.ndarray],
               scalars: Mapping[str, Any], symbols: Mapping[str, int]) -> None:
        """Run every stage of the program, in order.

        buffers   every buffer *param* by name: C-contiguous arrays of the declared dtype
                  whose sizes match the declared shapes under `symbols`. `Kernel` checks
                  this (with messages in the user's terms) and copies inputs that overlap
                  outputs; `launch` is public too, so a backend whose code would crash on
                  a wrong size or rely on no-aliasing must still refuse such input with an
                  ArgumentError (`launcher` is the unchecked way in, for `Kernel` only).
                  Temporaries are the backend's to allocate.
        scalars   every scalar param by name, as numpy scalars of the declared dtype
        symbols   every shape symbol's value; one outside 0..2**62 - 1 (the launch contract
                  the verifier proved the program under) must be refused with an
                  ArgumentError, here and in `launcher` (hologram.runtime.args.symbol_value)
        Raises ExecutionError (never crashes) when a checked access is out of bounds.
        """
