"""Generated kernels run through `hologram.stream`, with their oracle.

    streamed(cases)        any generated case run through `hologram.stream` instead of a
                           call (`KernelCase.stream`, a `StreamSpec`): a drawn pool (from
                           chunks of one row to one chunk of everything) and the streamed
                           inputs given as arrays, as lists of chunks cut at drawn sizes, or
                           as read-only memmaps of files (which a backend with a fault guard
                           reads in place, in windows of the file, and others with `pread`);
                           the oracle is the case's own, as the contract holds for any pool.
                           A kernel stream cannot split must be refused with a StreamError
                           (anything else fails the case); then it is called whole
    softmax_kernels(cfg)   the online max-and-sum and what feeds on it: softmax and
                           logsumexp of a drawn expression, written in one statement or
                           through temporaries (`top = max(v)`, `ex = exp(v - top)`), next to
                           elementwise outputs, other full reductions and reductions of
                           those outputs; these must stream

`run_streamed` is how the harness (hologram.testing.run.check_case) runs such a case.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import attrs
import numpy as np
from hypothesis import strategies as st

from hologram.core.types import Affine
from hologram.testing.cases import KernelCase, Param, Statement, _finish, _leaf
from hologram.testing.exprgen import Builder, GenConfig, Node, render

__all__ = ["StreamSpec", "streamed", "softmax_kernels", "run_streamed"]

POOLS = (1, 300, 1024, 4096, 1 << 16)  # bytes; 1 is the least that holds a row (chunks of one row)


@attrs.frozen
class StreamSpec:
    """How a case is streamed: `pool_bytes` (raised to the least that holds a row when
    smaller), `cuts` the sizes of the chunks (cycled) the streamed inputs are given in
    (empty: as arrays), `must` whether a StreamError fails the case; `shifted_out`: first
    try a row output given as the bytes of a streamed input of its size shifted by one
    element, which must be refused (issue 21: answers depended on the pool); `from_file`:
    the streamed inputs given as read-only memmaps of temporary files (without cuts)."""

    pool_bytes: int
    cuts: tuple[int, ...] = ()
    must: bool = False
    shifted_out: bool = False
    from_file: bool = False


@st.composite
def streamed(draw: Callable, cases: st.SearchStrategy[KernelCase], must: bool = False) -> KernelCase:
    """A case of `cases` run through `hologram.stream` (module docstring)."""
    case = draw(cases)
    if case.error:  # an error case: the call checks it (its outputs' shapes are not known here)
        return case
    return attrs.evolve(case, stream=draw(_specs(must)))


def _specs(must: bool) -> st.SearchStrategy[StreamSpec]:
    """A drawn pool, and the streamed inputs as arrays or as chunks of drawn sizes (empty
    chunks among them; never all empty, which would cut nothing)."""
    cuts = st.one_of(st.just(()), st.lists(st.integers(0, 4), min_size=1, max_size=4).filter(any).map(tuple))
    return st.builds(StreamSpec, st.sampled_from(POOLS), cuts, st.just(must), st.booleans(), st.booleans())


@st.composite
def softmax_kernels(draw: Callable, cfg: GenConfig = GenConfig()) -> KernelCase:
    """A kernel with softmax or logsumexp of a drawn float expression (module docstring)."""
    floats = [d for d in ("f16", "f32", "f64") if d in cfg.dtypes] or ["f32"]
    dt = np.dtype({"f16": np.float16, "f32": np.float32, "f64": np.float64}[draw(st.sampled_from(floats))])
    n = Affine.of("n")
    inputs = [Param("x", dt, (n,))]
    if draw(st.booleans()):
        inputs.append(Param("w", dt, (n,)))
    if draw(st.booleans()):
        inputs.append(Param("s", dt))
    sizes = {"n": draw(st.integers(1, max(cfg.max_n, 1)))}
    plain = attrs.evolve(cfg, reductions=(), scans=(), ops=frozenset(o for o in cfg.ops if o in _ELEMENTWISE))
    builder = Builder(draw, plain, [_leaf(p) for p in inputs])
    v = builder.expr(("n",), max(cfg.max_depth - 1, 1))
    if v.dtype is None or v.dtype.kind != "f":
        v = Node("cast", dt, v.shape, (v,), dt)
    statements: list[Statement] = []
    outputs: list[Param] = []
    m = builder._reduce("max", v, None, False)
    if draw(st.booleans()):  # through temporaries, as softmax.toml writes it
        # not `m` and `e`, as softmax.toml names them: `e` is Euler's number, which v may use
        statements.append(("top", f"top = {render(m)}", m))
        m = Node("input", m.dtype, (), (), "top")
        e = builder.combine("exp", [builder.combine("-", [v, m])])
        statements.append(("ex", f"ex = {render(e)}", e))
        e = Node("input", e.dtype, ("n",), (), "ex")
    else:
        e = builder.combine("exp", [builder.combine("-", [v, m])])
    total = builder._reduce("sum", e, None, False)
    form = draw(st.sampled_from(("softmax", "logsumexp", "both")))
    if form in ("softmax", "both"):
        y = builder.combine("/", [e, total])
        statements.append(("y", f"y = {render(y)}", y))
        outputs.append(Param("y", y.dtype, (n,)))
    if form in ("logsumexp", "both"):
        lse = builder.combine("+", [m, builder.combine("log", [total])])
        statements.append(("l", f"l = {render(lse)}", lse))
        outputs.append(Param("l", lse.dtype))
    if draw(st.booleans()):  # another full reduction beside them, and an elementwise output
        kind = draw(st.sampled_from(("sum", "mean", "min", "max", "argmin", "argmax", "prod")))
        r = builder._reduce(kind, v, None, False)
        statements.append(("r", f"r = {render(r)}", r))
        outputs.append(Param("r", r.dtype))
    z = builder.expr(("n",), 2)
    if z.dtype is not None and draw(st.booleans()):
        statements.append(("z", f"z = {render(z)}", z))
        outputs.append(Param("z", z.dtype, tuple(Affine.of(d) for d in z.shape)))
        if z.shape == ("n",) and z.dtype.kind in "fiu" and draw(st.booleans()):
            # a reduction of the row output: an earlier pass computes z, the last writes it
            zr = builder._reduce(draw(st.sampled_from(("sum", "max"))), Node("input", z.dtype, z.shape, (), "z"),
                                 None, False)
            statements.append(("zr", f"zr = {render(zr)}", zr))
            outputs.append(Param("zr", zr.dtype))
    return attrs.evolve(_finish(draw, sizes, inputs, statements, outputs), stream=draw(_specs(True)))


_ELEMENTWISE = frozenset("+ - * / neg abs exp log sqrt sin cos tanh sigmoid minimum maximum where < > == "
                         "floor relu".split())


def _cut(a: np.ndarray, cuts: Sequence[int]) -> list[np.ndarray]:
    assert any(cuts), cuts  # all-empty chunks would never reach the end
    out, at, k = [], 0, 0
    while at < len(a):
        size = cuts[k % len(cuts)]
        out.append(a[at:at + size])
        at, k = at + size, k + 1
    return out or [a]


def run_streamed(kernel: Any, inputs: Mapping[str, Any], spec: StreamSpec,
                 shapes: Sequence[tuple[int, ...]]) -> dict[str, np.ndarray]:
    """`kernel` run by `hologram.stream` as `spec` says, every output given as `out=` (of
    `shapes`, in declared order); a StreamError when the kernel does not stream is
    answered by calling it whole (unless the spec says it must stream)."""
    args = dict(inputs)
    mapped = any(isinstance(args[p.name], np.ndarray) and np.ndim(args[p.name]) > len(p.shape)
                 for p in kernel.signature.inputs)
    with tempfile.TemporaryDirectory(prefix="hologram-stream-case-") as folder:
        try:
            return _run(kernel, inputs, args, spec, shapes, mapped, Path(folder))
        finally:
            args.clear()  # the memmaps go before their folder does


def _run(kernel: Any, inputs: Mapping[str, Any], args: dict[str, Any], spec: StreamSpec,
         shapes: Sequence[tuple[int, ...]], mapped: bool, folder: Path) -> dict[str, np.ndarray]:
    from hologram.core.errors import StreamError
    from hologram.streaming.stream import plan_for

    sig = kernel.signature
    try:
        if spec.cuts and not mapped:
            for name in plan_for(kernel).streamed:
                args[name] = _cut(np.asarray(args[name]), spec.cuts)
        elif spec.from_file and not mapped:
            for name in plan_for(kernel).streamed:
                args[name] = _on_file(np.asarray(args[name]), folder / f"{name}.bin")
        outs = tuple(np.empty(shape, p.dtype.np) for p, shape in zip(sig.outputs, shapes))
        if spec.shifted_out and not spec.cuts and not mapped:
            _refuses_a_shifted_out(kernel, args, outs, spec.pool_bytes)
        _stream(kernel, [args[p.name] for p in sig.inputs], outs, spec.pool_bytes)
    except StreamError:
        if spec.must:
            raise
        result = (kernel.map if mapped else kernel)(*(inputs[p.name] for p in sig.inputs))
        outs = (result,) if len(sig.outputs) == 1 else tuple(result)
    return {p.name: np.asarray(o) for p, o in zip(sig.outputs, outs)}


def _on_file(a: np.ndarray, path: Path) -> np.ndarray:
    """`a` written to `path` and mapped back read-only (a 0-byte file cannot be mapped: an
    empty array stays in memory)."""
    if a.size == 0:
        return a
    a.tofile(path)
    return np.memmap(path, dtype=a.dtype, mode="r", shape=a.shape)


def _refuses_a_shifted_out(kernel: Any, args: Mapping[str, Any], outs: Sequence[np.ndarray], pool_bytes: int) -> None:
    """Where a row output has the size and dtype of a streamed input, stream with that
    output written over the input's bytes one element on (`x = buf[:-1]`, `out = buf[1:]`):
    refused with a StreamError before anything is written, or the case fails."""
    from hologram.core.errors import StreamError
    from hologram.streaming.stream import plan_for

    plan, sig = plan_for(kernel), kernel.signature
    for k, p in enumerate(sig.outputs):
        source = next((q.name for q in sig.inputs if q.name in plan.streamed and p.name in plan.row_outputs
                       and np.asarray(args[q.name]).dtype == outs[k].dtype
                       and np.size(args[q.name]) == outs[k].size > 1), None)  # one element on: they share size - 1
        if source is None:
            continue
        x = np.asarray(args[source])
        buf = np.empty(x.size + 1, x.dtype)
        buf[:-1] = x.reshape(-1)
        before = buf.copy()
        shifted = dict(args, **{source: buf[:-1].reshape(x.shape)})
        out = tuple(buf[1:].reshape(o.shape) if j == k else o for j, o in enumerate(outs))
        try:
            _stream(kernel, [shifted[q.name] for q in sig.inputs], out, pool_bytes)
        except StreamError as exc:
            if "overlaps" not in exc.message:
                raise
        else:
            raise AssertionError(f"hologram.stream accepted out {p.name!r} overlapping input {source!r} one "
                                 f"element on (the answer would depend on the pool and the order of chunks)")
        assert np.array_equal(buf, before, equal_nan=True), "a refused stream wrote its output"
        return


def _stream(kernel: Any, inputs: Sequence[Any], outs: Sequence[np.ndarray], pool_bytes: int) -> None:
    """`hologram.stream` with `pool_bytes`, raised to the least pool that runs every pass
    when the stream refuses it as too small (before anything ran, naming that pool)."""
    import hologram
    from hologram.core.errors import ArgumentError

    try:
        hologram.stream(kernel, *inputs, out=tuple(outs), pool_bytes=pool_bytes)
    except ArgumentError as exc:
        if "cannot hold one row" not in exc.message or exc.hint is None:
            raise
        hologram.stream(kernel, *inputs, out=tuple(outs), pool_bytes=int(exc.hint.rsplit(" ", 1)[1]))
