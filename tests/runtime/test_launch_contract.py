"""The launch contract on shape symbols, enforced on every launch path.

The verifier proves memory accesses for shape symbols in 0..SYMBOL_MAX (2**62 - 1):
that is what lets it take `2*n` or `n + 4` as free of i64 overflow. A fuzzing campaign
found a verified program computing `min(2*n, 3)` as an index that read `x[-2]` at
n = 2**63 - 1 and crashed cpu_llvm at n = 9223371487098961920, because no launch path
checked the range. Now the argument binder (`Kernel` calls, `hologram run --bind`),
both backends' `launch` and cpu_llvm's `launcher` refuse a symbol outside it with an
ArgumentError naming the symbol, its value and the range.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import hologram as hg
from hologram.call.args import bind_symbols
from hologram.compiler.signature import Param
from hologram.core.errors import ArgumentError
from hologram.core.types import Affine, DType
from hologram.isa.asm import parse_program
from hologram.registry.lookups import get_backend
from hologram.verify.intervals import SYMBOL_MAX

BACKENDS = ("interp", "cpu_llvm")
RANGE = "outside the range a launch may bind a symbol to: 0 to 2**62 - 1"
RANGE_RE = re.escape(RANGE)

# `min(2*n, 3)` indexes x. The verifier proves it in [0, 3] because 2*n cannot wrap for
# n <= SYMBOL_MAX; n only sizes an empty buffer (z: f32[n, m] with m = 0), so nothing
# else stops a huge n.
MIN_INDEX = """
.program min_index
.symbols n m
.param in z: f32[n, m]
.param in x: f32[4]
.param out y: f32[1]
.stage s domain [1] block [1]
    .reg %i: i64
    .reg %v: f32
    MUL.i64 %i, $n, 2
    MIN.i64 %i, %i, 3
    LDG.f32 %v, [x + %i]
    STG.f32 [y + 0], %v
    EXIT
"""


def _launch(backend: str, n: int) -> np.ndarray:
    """Launch MIN_INDEX with x a view 4 elements into a guard region of 99s, so a read of
    x[-2] (n = 2**63 - 1 before the check) returns 99 instead of crashing."""
    b = get_backend(backend)
    guarded = np.full(12, 99.0, np.float32)
    x = guarded[4:8]
    x[:] = np.arange(4)
    y = np.zeros(1, np.float32)
    b.launch(b.prepare(parse_program(MIN_INDEX)), {"z": np.zeros(0, np.float32), "x": x, "y": y}, {},
             {"n": n, "m": 0})
    return y


@pytest.mark.parametrize("backend", BACKENDS)
def test_largest_symbol_is_accepted(backend):
    assert _launch(backend, SYMBOL_MAX)[0] == 3  # 2*n does not wrap: x[min(2*n, 3)] = x[3]
    assert _launch(backend, 1)[0] == 2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [2**63 - 1, 2**64, -1, np.int64(2**63 - 1)])
def test_launch_refuses_a_symbol_outside_the_contract(backend, n):
    with pytest.raises(ArgumentError, match=rf"shape symbol 'n' = {int(n)} is {RANGE_RE}"):
        _launch(backend, n)


def test_launch_refuses_a_huge_symbol_without_printing_it():
    with pytest.raises(ArgumentError, match=r"shape symbol 'n' = <16610-bit integer, about 10\*\*5000> is outside"):
        _launch("cpu_llvm", 10**5000)


def test_cpu_llvm_launcher_refuses_a_symbol_outside_the_contract():
    b = get_backend("cpu_llvm")
    exe = b.prepare(parse_program(MIN_INDEX))
    with pytest.raises(ArgumentError, match=rf"shape symbol 'n' = {2**62} is {RANGE_RE}"):
        b.launcher(exe, {"n": 2**62, "m": 0})
    assert b.launcher(exe, {"n": SYMBOL_MAX, "m": 0}) is not None


def test_the_fuzzers_crashing_symbol_is_refused_on_cpu_llvm():
    """n = 9223371487098961920 made `2*n` wrap to -2**40 and cpu_llvm read x[-2**40]
    (a segfault before the check, hence the subprocess); 2**62 reads x[-2**63]."""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_launch_contract import _launch
        from hologram.core.errors import ArgumentError
        for n in (9223371487098961920, 2**62):
            try:
                _launch("cpu_llvm", n)
            except ArgumentError as e:
                print("refused:", e)
            else:
                print("ran with n =", n)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("refused: shape symbol 'n' = ") and RANGE in line
                                   for line in lines), done.stdout


# ------------------------------------------------------------------- through Kernel
def _kernel(x_type: str) -> hg.Kernel:
    return hg.compile(f'[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = {{ x = "{x_type}" }}\n'
                      f'outputs = {{ y = "{x_type}" }}\nbody = """\ny = x + 1\n"""\n')


@pytest.mark.parametrize("backend", BACKENDS)
def test_kernel_call_refuses_a_symbol_bound_beyond_the_contract(backend):
    # an empty array may have a dimension of any size numpy allows: the symbols it binds
    # must still be in range (bind_direct for `u8[n, m]`, bind_symbols for `u8[n - 2, m]`)
    k = _kernel("u8[n, m]").on(backend)
    assert k(np.zeros((SYMBOL_MAX, 0), np.uint8)).shape == (SYMBOL_MAX, 0)
    with pytest.raises(ArgumentError, match=rf"k\(\): argument 'x' dim 0 \(n\) has size {2**62}, "
                                            rf"so n = {2**62}, which is {RANGE_RE}"):
        k(np.zeros((2**62, 0), np.uint8))
    solved = _kernel("u8[n - 2, m]").on(backend)
    with pytest.raises(ArgumentError, match=rf"k\(\): argument 'x' dim 0 \(n - 2\) has size {SYMBOL_MAX}, "
                                            rf"so n = {2**62 + 1}, which is {RANGE_RE}"):
        solved(np.zeros((SYMBOL_MAX, 0), np.uint8))


def test_bound_symbols_given_by_the_caller_are_checked():
    x = Param("x", DType.F32, (Affine.of("n"),), "array")
    assert bind_symbols("k", [x], {}, ("n",), given={"n": SYMBOL_MAX}) == {"n": SYMBOL_MAX}
    with pytest.raises(ArgumentError, match=rf"k\(\): n = {2**62} \(--bind\) is {RANGE_RE}"):
        bind_symbols("k", [x], {}, ("n",), given={"n": 2**62})


def test_a_huge_scalar_argument_is_described_not_printed():
    """Formatting the message about a 5,000-digit int raised Python's ValueError."""
    k = hg.compile('[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = { x = "i32[n]", s = "i32" }\n'
                   'outputs = { y = "i32[n]" }\nbody = """\ny = x + s\n"""\n')
    with pytest.raises(ArgumentError, match=r"argument 's' = <16610-bit integer, about 10\*\*5000> is out of range"):
        k(np.zeros(3, np.int32), 10**5000)
