"""The native entry point runs temporaries, `.init`s and reductions inline
(trampoline.py, launcher.py): which programs it takes, and that it computes what the
general path computes, call after call."""

from __future__ import annotations

import numpy as np
import pytest

import hologram as hg
from hologram.isa.asm import parse_program
from hologram.registry.lookups import get_backend

NATIVE = "builtin_function_or_method"

# a temporary read before it is written (zeroed per launch: the ISA's promise), a full
# sum seeded by `.init`, an integer sum into an unseeded buffer
PROGRAM = '''.program inline
.isa 1
.symbols n
.param in x: f32[n]
.param out total: f32[1]
.param out count: i64[2]
.param out y: f32[n]
.temp t: f32[n]

.stage bump domain [n] block [256]
    .reg %i: i64
    .reg %f, %g: f32
    MOV.i64     %i, %gid.x
    LDG.f32     %f, [t + %i]
    LDG.f32     %g, [x + %i]
    ADD.f32     %f, %f, %g
    STG.f32     [t + %i], %f
    EXIT

.stage sums domain [n] block [256]
    .init total[INIT] = -0.0
    .reg %i, %one: i64
    .reg %f: f32
    MOV.i64     %i, %gid.x
    LDG.f32     %f, [t + %i]
    STG.f32     [y + %i], %f
    ReduceAdd.f32 [total + 0], %f
    MOV_IMM.i64 %one, 1
    ReduceAdd.i64 [count + 1], %one
    EXIT
'''


def launcher(text: str, n: int):
    backend = get_backend("cpu_llvm")
    exe = backend.prepare(parse_program(text))
    return backend, exe, backend.launcher(exe, {"n": n})


@pytest.mark.parametrize("n", [0, 1, 37])
def test_temporaries_inits_and_reductions_run_natively_and_again(n):
    backend, exe, run = launcher(PROGRAM.replace("INIT", "0"), n)
    assert type(run).__name__ == NATIVE
    x = np.arange(n, dtype=np.float32)
    count = np.array([5, 5], np.int64)
    for call in range(3):
        total, y = np.full(1, 7, np.float32), np.empty(n, np.float32)
        assert run(x, total, count, y) is None
        np.testing.assert_array_equal(y, x)  # the temporary started at zero each time
        assert total[0] == x.sum() and np.signbit(total[0]) == (n == 0)  # seeded -0.0, even with no lane
        np.testing.assert_array_equal(count, [5, 5 + n * (call + 1)])  # an integer sum onto what was there


def test_an_unseeded_float_reduction_takes_the_general_path():
    unseeded = PROGRAM.replace("    .init total[INIT] = -0.0\n", "")
    _, _, run = launcher(unseeded, 4)
    assert type(run).__name__ != NATIVE
    total = np.full(1, 0.5, np.float32)
    run(np.arange(4, dtype=np.float32), total, np.zeros(2, np.int64), np.zeros(4, np.float32))
    assert total[0] == 6.5  # onto what was there


def test_a_stage_that_also_reads_what_it_reduces_into_takes_the_general_path():
    reads = PROGRAM.replace("INIT", "0").replace("    STG.f32     [y + %i], %f\n",
                                                 "    LDG.f32     %f, [total + 0]\n    STG.f32     [y + %i], %f\n")
    assert type(launcher(reads, 4)[2]).__name__ != NATIVE


@pytest.mark.parametrize("name", ["sum", "softmax", "mean", "max", "argmax", "dot", "layernorm", "class_histogram"])
def test_small_stdlib_reductions_take_the_native_path(name):
    k = hg.compile_file(f"kernels/{name}.toml").on("cpu_llvm")
    x = np.random.default_rng(1).standard_normal(100).astype(np.float32)
    if name == "layernorm":
        call = (x[:64].reshape(8, 8), np.ones(8, np.float32), np.zeros(8, np.float32), np.float32(1e-5))
    elif name == "class_histogram":
        call = (np.arange(200, dtype=np.uint8),)
    else:
        call = (x, x) if name == "dot" else (x,)
    first = k(*call)
    again = k(*call)
    assert type(k._hit[0].run).__name__ == NATIVE
    for a, b in zip(first if isinstance(first, tuple) else (first,), again if isinstance(again, tuple) else (again,)):
        np.testing.assert_array_equal(a, b)


def test_the_general_launcher_zeroes_the_temporaries_it_keeps_for_the_next_launch():
    from hologram_cpu_llvm.runtime import INLINE_COST
    n = INLINE_COST  # past the inline cost (every lane costs more than 1): the general launcher
    _, _, run = launcher(PROGRAM.replace("INIT", "0"), n)
    assert type(run).__name__ != NATIVE
    x = np.ones(n, np.float32)
    for _ in range(3):
        y = np.empty(n, np.float32)
        run(x, np.zeros(1, np.float32), np.zeros(2, np.int64), y)
        np.testing.assert_array_equal(y, x)  # the kept temporary was zeroed again
