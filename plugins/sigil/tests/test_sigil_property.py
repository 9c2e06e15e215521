"""The property: a random circuit, compiled canonicalized or as written, gives on every
backend the class buffer the numpy model gives, within the accuracy contract (exact
where only data movement, signs and + - * / min max are involved; exp, log, sigmoid,
tanh and the reductions within their bounds, propagated: hologram.testing.bounds)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

import hologram
from hologram.testing import check_case
from hologram_sigil import compile_circuit
from hologram_sigil.cases import buffers, circuits, difftest_cases, expected
from hologram_sigil.circuit import format_circuit

NARROW = 16


@settings(max_examples=25, deadline=None)
@given(circuits(max_steps=8), buffers(width=NARROW))
def test_random_circuits_on_the_interpreter(node, x):
    """The reference interpreter, on a narrow buffer (it runs one lane at a time)."""
    want = expected(node, x)
    for canonical in (True, False):
        y = compile_circuit(node, canonical=canonical, width=NARROW, backend="interp")(x)
        want.check(y, name="y", context=f"{format_circuit(node)} (canonical={canonical}, interp)")


@pytest.mark.skipif("cpu_llvm" not in hologram.list_backends(), reason="cpu_llvm is not available here")
@settings(max_examples=25, deadline=None)
@given(circuits(max_steps=14), buffers())
def test_random_circuits_on_cpu_llvm(node, x):
    """The native backend, on the real 96 x 3072 buffer."""
    want = expected(node, x)
    for canonical in (True, False):
        y = compile_circuit(node, canonical=canonical, backend="cpu_llvm")(x)
        want.check(y, name="y", context=f"{format_circuit(node)} (canonical={canonical}, cpu_llvm)")


@pytest.mark.skipif("cpu_llvm" not in hologram.list_backends(), reason="cpu_llvm is not available here")
@settings(max_examples=10, deadline=None)
@given(circuits(max_steps=8), buffers(width=NARROW))
def test_the_backends_agree_at_every_level(node, x):
    for opt in ("O0", "O2"):
        a = compile_circuit(node, width=NARROW, backend="interp", opt=opt)(x)
        b = compile_circuit(node, width=NARROW, backend="cpu_llvm", opt=opt)(x)
        expected(node, x).check(a, name="interp")
        expected(node, x).check(b, name="cpu_llvm")


@pytest.mark.skipif("cpu_llvm" not in hologram.list_backends(), reason="cpu_llvm is not available here")
@settings(max_examples=8, deadline=None)
@given(difftest_cases())
def test_what_diff_test_draws(case):
    """The documents `hologram diff-test` draws from this plugin (a TOML `circuit` key)
    hold on the native backend, through hologram.testing's harness."""
    assert "circuit = " in case.source and case.args["x"].shape == (96, 3072)
    check_case(case, backend="cpu_llvm")


def test_diff_test_draws_circuits(tmp_path):
    from hologram.registry.lookups import translators
    from hologram.testing.difftest import run_difftest
    from hologram.testing.plugin_cases import plugin_cases

    assert translators()["sigil"].cases is not None and len(plugin_cases()) >= 1
    backends = [b for b in ("cpu_llvm",) if b in hologram.list_backends()] or ["interp"]
    report = run_difftest(backends, examples=16, seed=5, kinds=("kernels",), out_dir=str(tmp_path), opts=("O2",))
    assert report.ok, report


def test_the_model_copies_nothing_in():
    x = np.ones((96, 4), np.float32)
    from hologram_sigil import run_model

    y = run_model("mark@c01 . merge_exp@c02[c02]", x)
    assert (x == 1).all() and y[1, 0] == -1 and np.isclose(y[2, 0], np.e)
    with pytest.raises(ValueError, match="float32\\[96, width\\]"):
        run_model("mark@c01", np.ones((95, 4), np.float32))
