"""Loop dimensions (issue 14, point 8; docs/api.md, "Loop dimensions"): `kernel.map`
maps a kernel declared on core shapes over its arguments' leading dimensions as a numpy
gufunc does, the loop shapes broadcasting together, in one launch of a batched program
(one more launch axis), on every backend; against the kernel applied item by item."""

from __future__ import annotations

import numpy as np
import pytest

import hologram as hg
from hologram.core.errors import ArgumentError, ExecutionError
from hologram.isa.asm import format_program
from repo_paths import KERNELS

BACKENDS = [b for b in ("interp", "cpu_llvm") if b in hg.list_backends()]
RNG = np.random.default_rng(14)


def kernel(body: str, inputs: str, outputs: str) -> hg.Kernel:
    return hg.compile(f'[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = {{ {inputs} }}\noutputs = {{ {outputs} }}\n'
                      f'body = """\n{body}\n"""\n')


def per_item(k: hg.Kernel, args: list, loop: tuple[int, ...], ranks: list[int]) -> list[np.ndarray]:
    """The kernel called once per item of the loop shape (the gufunc's definition)."""
    results: list[list] = []
    for idx in np.ndindex(*loop):
        item = []
        for a, r in zip(args, ranks):
            if isinstance(a, np.ndarray) and a.ndim > r:
                lead = a.ndim - r
                sub = idx[len(idx) - lead:]
                item.append(a[tuple(0 if s == 1 else i for s, i in zip(a.shape[:lead], sub))])
            else:
                item.append(a)
        out = k.on("interp")(*item)
        results.append(list(out) if isinstance(out, tuple) else [out])
    return [np.stack([r[j] for r in results]).reshape(loop + np.shape(results[0][j]))
            for j in range(len(results[0]))] if results else []


def check(k: hg.Kernel, args: list, loop: tuple[int, ...], ranks: list[int], backend: str,
          atol: float = 1e-6) -> None:
    """`k` on `backend` against the interpreter item by item (`atol`: for sums whose order
    may differ, a bound on their rounding)."""
    got = k.on(backend).map(*args)
    got = list(got) if isinstance(got, tuple) else [got]
    want = per_item(k, args, loop, ranks)
    for g, w in zip(got, want):
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=atol)


def stdlib(name: str) -> hg.Kernel:
    return hg.compile_file(KERNELS / f"{name}.toml")


@pytest.mark.parametrize("backend", BACKENDS)
def test_softmax_over_leading_dimensions(backend):
    x = RNG.standard_normal((4, 7, 10)).astype(np.float32)
    y = stdlib("softmax").on(backend).map(x)
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(-1, keepdims=True), rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name, args, ranks, loop", [
    ("axpy", [np.float32(2), RNG.standard_normal((3, 5)).astype(np.float32),
              RNG.standard_normal((3, 5)).astype(np.float32)], [0, 1, 1], (3,)),
    # a scalar parameter with loop dimensions; y broadcast over the first loop dimension
    ("axpy", [RNG.standard_normal((2, 3)).astype(np.float32), RNG.standard_normal((2, 3, 5)).astype(np.float32),
              RNG.standard_normal((3, 5)).astype(np.float32)], [0, 1, 1], (2, 3)),
    ("gemm", [np.float32(0.5), RNG.standard_normal((2, 8, 40)).astype(np.float32),
              RNG.standard_normal((40, 33)).astype(np.float32)], [0, 2, 2], (2,)),  # the tiled stage
    ("gemm", [np.float32(1), RNG.standard_normal((3, 1, 7, 5)).astype(np.float32),
              RNG.standard_normal((2, 5, 4)).astype(np.float32)], [0, 2, 2], (3, 2)),  # both broadcast
    ("layernorm", [RNG.standard_normal((3, 4, 6)).astype(np.float32), np.ones(6, np.float32),
                   np.zeros(6, np.float32), np.float32(1e-5)], [2, 1, 1, 0], (3,)),
    ("argmax", [RNG.standard_normal((5, 9)).astype(np.float32)], [1], (5,)),
    ("class_histogram", [RNG.integers(0, 256, (2, 3, 50), dtype=np.uint8)], [1], (2, 3)),
    ("stencil3", [RNG.standard_normal((4, 12)).astype(np.float32)], [1], (4,)),
    ("matvec", [RNG.standard_normal((3, 4, 6)).astype(np.float32), RNG.standard_normal((3, 6)).astype(np.float32)],
     [2, 1], (3,)),
    ("sum", [RNG.standard_normal((2, 2, 3)).astype(np.float32)], [1], (2, 2)),
])
def test_stdlib_kernels_map_over_loop_dimensions(backend, name, args, ranks, loop):
    check(stdlib(name), args, loop, ranks, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_three_axis_stages_fold_the_batch_into_z(backend):
    k = kernel("y = x * 2 + sum(x)", 'x = "f32[a, b, c]"', 'y = "f32[a, b, c]"')
    x = RNG.standard_normal((3, 2, 4, 5, 6)).astype(np.float32)
    check(k, [x], (3, 2), [3], backend, atol=1e-4)  # sum(x) of 120 terms, in another order
    bmm = kernel("c = a @ b", 'a = "f32[z, m, k]", b = "f32[z, k, n]"', 'c = "f32[z, m, n]"')
    check(bmm, [RNG.standard_normal((2, 3, 7, 9)).astype(np.float32),
                RNG.standard_normal((3, 9, 33)).astype(np.float32)], (2,), [3, 3], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_arrays_and_zero_items(backend):
    k = stdlib("softmax").on(backend)
    x = RNG.standard_normal((2, 3, 5)).astype(np.float32)
    out = np.empty_like(x)
    assert k.map(x, out=out) is out
    np.testing.assert_allclose(out, k.map(x))
    with pytest.raises(ArgumentError, match=r"must have shape \(2, 3, 5\)"):
        k.map(x, out=np.empty((3, 5), np.float32))
    assert k.map(np.zeros((0, 5), np.float32)).shape == (0, 5)
    np.testing.assert_array_equal(k.map(x[0, 0]), k(x[0, 0]))  # no loop dimensions: a plain call


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_item_out_of_bounds_raises_instead_of_reading_its_neighbour(backend):
    k = kernel("y[i] = x[i + 1]", 'x = "f32[n]"', 'y = "f32[n]"').on(backend)
    with pytest.raises(ExecutionError, match=r"an index is out of bounds for its dimension or for its item's part of "
                                             r"global buffer 'x' \(12 elements\)"):
        k.map(np.zeros((3, 4), np.float32))  # the last element of item 0 would be item 1's first


def test_loop_dimensions_that_do_not_broadcast_are_an_argument_error():
    k = stdlib("vadd")
    with pytest.raises(ArgumentError, match=r"loop dimensions of the arguments do not broadcast"):
        k.map(np.zeros((3, 4), np.float32), np.zeros((2, 4), np.float32))
    with pytest.raises(ArgumentError, match=r"must have dtype f32"):
        k.map(np.zeros((3, 4), np.float64), np.zeros((3, 4), np.float32))
    with pytest.raises(ArgumentError, match=r"call vadd.map"):  # a plain call keeps the declared rank
        k(np.zeros((3, 4), np.float32), np.zeros((3, 4), np.float32))


def test_the_batched_program_keeps_the_proofs_and_is_made_once():
    k = stdlib("softmax").on(BACKENDS[-1])
    k.map(np.zeros((2, 4), np.float32))
    k.map(np.zeros((5, 3), np.float32))
    (batched, _), = k._loops.values()
    text = format_program(batched.program)
    assert "[x + " in text and "LDG.f32.chk" not in text  # proven in bounds, item by item
    assert ".param in x: f32[batch, n]" in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_batched_full_sums_keep_the_accuracy_contract(backend):
    """A full reduction per item becomes a reduction into the item's element; cpu_llvm
    still sums it per block, compensated across blocks (its index is block-uniform)."""
    k = stdlib("sum").on(backend)
    n = 300_000 if backend != "interp" else 3_000
    x = RNG.random((3, n)).astype(np.float32)
    want = x.astype(np.float64).sum(-1)
    got = k.map(x).astype(np.float64)
    bound = 2 * (np.log2(n) + 1) * np.finfo(np.float32).eps * np.abs(x).astype(np.float64).sum(-1)
    assert (np.abs(got - want) <= bound).all(), (got - want) / bound
