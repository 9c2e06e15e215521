"""`hologram.stream`: a kernel over inputs larger than memory, through a fixed pool.

    total = hg.stream(k_sum, np.load("big.npy", mmap_mode="r"))           # a 0-d array
    hg.stream(k_scale, x_memmap, out=y_memmap, pool_bytes=32 << 20)      # y written as it goes
    hg.stream(k_softmax, (chunk for chunk in reader), out=y_memmap)      # chunks of rows

The data goes through one buffer of `pool_bytes` (64 MiB by default), allocated once
and reused for every chunk of every pass: a reader thread reads the next chunk of each
streamed input into it (from a memmap's file, never touching the mapping's pages) while
the current chunk computes, and a writer thread writes finished chunks of the outputs
back to their memmaps. Two ways to stream (docs/streaming.md):

- **over loop dimensions**: an input with more dimensions than declared (`x` of shape
  `(rows, n)` for a kernel on `f32[n]`) streams a chunk of rows at a time through
  `kernel.map`: any kernel, a bundle's included, with no compiler;
- **along a shape symbol** (the first dimension of the first array input, or
  `along="m"`): the kernel's IR is split into passes over the data
  (hologram.streaming.plan): elementwise and row-wise statements run per chunk,
  full reductions carry their state across chunks (hologram.streaming.reduce), and
  statements over the reductions' results run once in between. An elementwise kernel is
  its own pass; `sum`, `mean`, `min`, `max`, `argmax` and logsumexp read the data once,
  softmax twice.

Outputs with a row per streamed row are written to the arrays given as `out=` (a memmap
for data larger than memory; `out=` is required for them); outputs without (a
reduction's result) are returned as arrays, as a kernel call returns them.
"""

from __future__ import annotations

from typing import Any

from hologram.call.args import bind_arguments
from hologram.call.kernel import Kernel
from hologram.core.errors import ArgumentError
from hologram.streaming.args import DEFAULT_POOL_BYTES, classify, loop_rank
from hologram.streaming.args import pool_bytes as pool_bytes_of

__all__ = ["stream", "plan_for", "DEFAULT_POOL_BYTES"]


def stream(kernel: Kernel, /, *args: Any, out: Any = None, pool_bytes: int | None = None, cast: bool = False,
           along: str | None = None, **kwargs: Any) -> Any:
    """Run `kernel` over inputs of any size in chunks that fit `pool_bytes` (module
    docstring; docs/streaming.md). Inputs bind as in a kernel call; a streamed input is
    an array (a memmap) or an iterable of arrays of rows. Returns what a kernel call
    returns: `out=` arrays for the streamed outputs, arrays for the others."""
    if not isinstance(kernel, Kernel):
        raise ArgumentError(f"stream() expects a Kernel as its first argument, got {type(kernel).__name__}",
                            hint="compile one with hologram.compile_file(...) or take one from a bundle")
    budget = pool_bytes_of(pool_bytes)
    c = kernel._c
    c.program  # noqa: B018 - a bundle's program is verified before its signature is trusted
    sig = c.signature
    values = bind_arguments(sig, args, kwargs)
    given = {p.name: classify(sig.name, p, values[p.name], cast) for p in sig.inputs}
    if any(loop_rank(p, given[p.name]) for p in sig.inputs):
        if along is not None:
            raise ArgumentError(f"stream({sig.name}): along= streams along a shape symbol; these arguments have loop "
                                "dimensions, which stream on their own", hint="drop along=, or the loop dimensions")
        from hologram.streaming.loops import stream_loops

        return stream_loops(kernel, given, out, budget, cast)
    from hologram.streaming.rows import stream_rows

    return stream_rows(kernel, given, out, budget, cast, along)




def plan_for(kernel: Kernel, along: str | None = None) -> Any:
    """How `stream` runs `kernel` along a shape symbol (`along`, else its first array
    input's first dimension): a `hologram.streaming.plan.Plan` (`passes`, `steps`
    with each step's `KernelIR`, `streamed`, `row_outputs`; `print()` it to read the
    steps, its repr is one line), or the StreamError that says what stops it."""
    from hologram.streaming.rows import plan_of, stream_symbol

    return plan_of(kernel, stream_symbol(kernel._c.signature, along))[0]
