"""A kernel's arguments packed into one buffer, the first piece of the launch path.

`cuLaunchKernel` takes a kernel's parameters either as an array of pointers, one per
parameter, or as one buffer laid out as the parameters' C struct
(`CU_LAUNCH_PARAM_BUFFER_POINTER`), which is what tinygrad passes for a cheap launch.
The layout is fixed per program: every stage kernel takes the same parameters (codegen.py)
— each buffer's device pointer, each shape symbol (i64), each scalar parameter in its
memory type (bool a byte), then the error word's pointer and the scratch memory's (the
per-block partials of full float sums) — so `ArgumentLayout.of`
computes it once and `pack` fills it per launch. Each field is at its natural alignment,
as the PTX `.param` list's C layout puts it (tests hold the two to each other).
"""

from __future__ import annotations

from typing import Sequence

import attrs
import numpy as np

from hologram.backend import DType, Program

ERROR_WORD = "__err"  # the field name of the error word's pointer
SCRATCH = "__scratch"  # ... and of the scratch memory's


def _scalar_dtype(t: DType) -> np.dtype:
    return np.dtype(np.uint8) if t is DType.BOOL else np.dtype(t.np)


@attrs.frozen
class ArgumentLayout:
    """The C struct of a program's kernel parameters (a numpy aligned structured dtype)."""

    buffers: tuple[str, ...]
    symbols: tuple[str, ...]
    scalars: tuple[str, ...]
    struct: np.dtype

    @staticmethod
    def of(program: Program) -> "ArgumentLayout":
        buffers, symbols = tuple(program.buffers()), tuple(program.symbols)
        scalars = program.scalars()
        fields = ([(f"b.{name}", np.uint64) for name in buffers] + [(f"s.{name}", np.int64) for name in symbols]
                  + [(f"p.{name}", _scalar_dtype(p.dtype)) for name, p in scalars.items()]
                  + [(ERROR_WORD, np.uint64), (SCRATCH, np.uint64)])
        return ArgumentLayout(buffers, symbols, tuple(scalars), np.dtype(fields, align=True))

    @property
    def size(self) -> int:
        return self.struct.itemsize

    def offsets(self) -> tuple[int, ...]:
        """Each parameter's byte offset, in parameter order."""
        return tuple(self.struct.fields[name][1] for name in self.struct.names)

    def pack(self, pointers: Sequence[int], symbols: Sequence[int], scalars: Sequence[np.generic],
             error_word: int, scratch: int) -> bytes:
        """The parameter buffer: device pointers of the buffers (in `buffers` order), the
        symbols' values, the scalars (numpy scalars of their declared dtypes, as
        `LaunchBinding` gives them), the error word's and the scratch memory's device
        pointers."""
        if (len(pointers), len(symbols), len(scalars)) != (len(self.buffers), len(self.symbols), len(self.scalars)):
            raise ValueError(f"expected {len(self.buffers)} pointers, {len(self.symbols)} symbols and "
                             f"{len(self.scalars)} scalars; got {len(pointers)}, {len(symbols)}, {len(scalars)}")
        record = np.zeros((), self.struct)
        names = iter(self.struct.names)
        for value in (*pointers, *symbols, *scalars, error_word, scratch):
            record[next(names)] = value
        return record.tobytes()
