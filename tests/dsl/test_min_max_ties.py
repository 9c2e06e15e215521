"""`minimum`/`maximum` of `-0.0` and `+0.0` give the zero numpy gives: the second operand
for f32 and f64, the first for f16 (numpy's f16 loop is not its f32 one; docs/isa.md,
"MIN/MAX"), on every backend, elementwise and with the operands swapped."""

from __future__ import annotations

import numpy as np
import pytest

import hologram as hg

BACKENDS = [b for b in ("interp", "cpu_llvm") if b in hg.list_backends()]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["f16", "f32", "f64"])
def test_a_tie_of_zeros_gives_numpys_zero(backend, dtype):
    k = hg.compile(f'[kernel]\nname = "ties"\nversion = "1.0.0"\ninputs = {{ a = "{dtype}[n]", b = "{dtype}[n]" }}\n'
                   f'outputs = {{ lo = "{dtype}[n]", hi = "{dtype}[n]" }}\n'
                   'body = """\nlo = minimum(a, b)\nhi = maximum(a, b)\n"""\n')
    t = np.dtype({"f16": np.float16, "f32": np.float32, "f64": np.float64}[dtype])
    a = np.array([-0.0, 0.0, -0.0, 0.0], t)
    b = np.array([0.0, -0.0, -0.0, 0.0], t)
    lo, hi = k.on(backend)(a, b)
    assert np.signbit(lo).tolist() == np.signbit(np.minimum(a, b)).tolist()
    assert np.signbit(hi).tolist() == np.signbit(np.maximum(a, b)).tolist()
    if dtype == "f16":  # the rule docs/isa.md states, in case numpy's loops ever agree
        assert np.signbit(lo).tolist() == [True, False, True, False]
