"""The wgpu backend against the reference interpreter: the conformance kit on everything
it declares, the elementwise standard library bit for bit, the interpreter's
ExecutionError for an access out of bounds, what it refuses and when, its caches."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

import hologram
from hologram.errors import ExecutionError, UnsupportedProgram
from hologram.isa.asm import parse_program
from hologram.registry.lookups import get_backend
from hologram.testing.conformance import run_conformance

from isa_helpers import OOB
from repo_paths import KERNELS
from stdlib_cases import ELEMENTWISE_STDLIB, elementwise_args, outputs


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint8)


def test_the_conformance_kit_passes_everything_wgpu_declares(wgpu_backend):
    report = run_conformance("wgpu", examples=2)
    assert report.ok, report.format()
    declared = {area: row for area, *row in report.table()}
    assert declared["instructions"][0] > 100 and declared["barriers"][0] >= 1, report.format()


@pytest.mark.parametrize("name", ELEMENTWISE_STDLIB)
def test_the_elementwise_stdlib_runs_bit_for_bit_as_interp(wgpu_backend, name):
    k = hologram.compile_file(KERNELS / f"{name}.toml")
    args = elementwise_args(k)
    for got, want in zip(outputs(k.on("wgpu")(*args)), outputs(k.on("interp")(*args)), strict=True):
        assert np.array_equal(_bits(got), _bits(want))


MIXED = """
[kernel]
name = "mixed"
version = "1.0.0"
inputs  = { a = "i16[n]", b = "i16[n]", x = "f16[n]" }
outputs = { y = "f16[n]", z = "i16[n]", m = "bool[n]" }
body = '''
y = where(a > b, x * x + 0.5, x / f16(a))
z = (a * b + 7) ^ (a - b) & ~b
m = (x < 0.5) | (a == b)
'''
"""


def test_f16_i16_and_bool_run_bit_for_bit_as_interp(wgpu_backend):
    """Types WGSL stores only packed (two or four to a word) and f16 rounded in software,
    over an odd length so the last word is shared with nothing."""
    k = hologram.compile(MIXED)
    rng = np.random.default_rng(3)
    a, b = (rng.integers(-32768, 32767, 501, endpoint=True).astype(np.int16) for _ in range(2))
    b[:50] = a[:50]
    x = (rng.standard_normal(501) * 300).astype(np.float16)
    x[:6] = [0.0, -0.0, np.inf, np.nan, 6e-8, 65504]
    for got, want in zip(k.on("wgpu")(a, b, x), k.on("interp")(a, b, x), strict=True):
        assert np.array_equal(_bits(got), _bits(want))


GATHER = """
[kernel]
name = "gather"
version = "1.0.0"
inputs  = { x = "f32[n]", idx = "i32[m]" }
outputs = { y = "f32[m]" }
body = "y[i] = x[idx[i]]"
"""


def test_an_access_out_of_bounds_raises_the_interpreters_execution_error(wgpu_backend):
    k = hologram.compile(GATHER, file="gather.toml")
    x = np.arange(10, dtype=np.float32)
    idx = np.array([1, 2, 3, 10, 4], np.int32)  # one lane out of bounds, so both name the same lane
    messages = []
    for backend in ("interp", "wgpu"):
        with pytest.raises(ExecutionError) as e:
            k.on(backend)(x, idx)
        messages.append(str(e.value))
    assert messages[0] == messages[1]
    assert "index 10 is out of bounds for global buffer 'x' of 10 elements" in messages[1]
    good = np.array([9, 0, 3], np.int32)
    assert np.array_equal(k.on("wgpu")(x, good), x[good])  # and the next launch runs


F64 = """
[kernel]
name = "twice"
version = "1.0.0"
inputs  = { x = "f64[n]" }
outputs = { y = "f64[n]" }
body = "y = x * 2.0"
"""


def test_a_program_of_an_undeclared_dtype_is_refused_before_prepare(wgpu_backend, monkeypatch):
    def never(program):
        raise AssertionError("prepare was called with a program the capabilities do not cover")

    monkeypatch.setattr(wgpu_backend, "prepare", never)
    k = hologram.compile(F64)
    with pytest.raises(UnsupportedProgram, match=r"backend 'wgpu' cannot run program 'twice': .*f64 is not declared"):
        k.on("wgpu")(np.ones(3))


WIDE_GRID = """
.program wide
.symbols n
.param in x: f32[n]
.param out y: f32[n]
.stage main domain [n] block [1]
.reg %i: i64
.reg %v: f32
    MOV.i64 %i, %gid.x
    LDG.f32 %v, [x + %i]
    ADD.f32 %v, %v, 1.0
    STG.f32 [y + %i], %v
    EXIT
"""


def test_a_grid_wider_than_a_dispatch_runs_every_block(wgpu_backend):
    """70,000 one-lane blocks: more than a dispatch names on an axis (65,535), so each
    workgroup runs several blocks."""
    program = parse_program(WIDE_GRID)
    x = np.arange(70_000, dtype=np.float32)
    y = np.zeros_like(x)
    wgpu_backend.launch(wgpu_backend.prepare(program), {"x": x, "y": y}, {}, {"n": x.size})
    assert np.array_equal(y, x + 1)


def test_prepare_is_cached_by_program_hash_and_emits_wgsl(wgpu_backend):
    program = parse_program(WIDE_GRID)
    first = wgpu_backend.prepare(program)
    assert wgpu_backend.prepare(parse_program(WIDE_GRID)) is first
    wgpu_backend.clear_cache()
    assert wgpu_backend.prepare(program) is not first
    text = wgpu_backend.emit(program, "wgsl")
    assert "@compute @workgroup_size(1, 1, 1)" in text and "fn run_lane()" in text


def test_shared_arrays_the_adapter_cannot_hold_are_refused_in_prepare(wgpu_backend):
    """32 KiB of bool, within the ISA's limit, is 128 KiB as WGSL holds it (a word per
    bool): more than the adapter's workgroup memory, so prepare refuses it, naming it."""
    text = WIDE_GRID.replace(".reg %i: i64", ".shared sh: bool[32768]\n.reg %i: i64")
    with pytest.raises(UnsupportedProgram, match=r"stage 'main': shared arrays of 131,072 bytes \(as WGSL holds "
                                                 r"them\); this adapter \(.*\) has [0-9,]+ bytes"):
        wgpu_backend.prepare(parse_program(text))


CHECKS = """
.program checks
.symbols n
.param in x: i32[n]
.param out y: f32[n]
.param out bins: i32[96]
.stage main domain [n] block [4]
    .reg %i, %h, %g, %c: i64
    .reg %v: i32
    .reg %f: f32
    .pool p: f32[4]
    MOV.i64 %i, %gid.x
    LDG.i32 %v, [x + %i]
    CVT.i64.i32 %c, %v
    PoolAlloc %h, p, 2
    PoolAlloc %g, p, 1
    MOV_IMM.f32 %f, 0.0
    {case}
    PoolFree %g
    PoolFree %h
    STG.f32 [y + %i], %f
    EXIT
"""


@pytest.mark.parametrize("case, words", [
    ("PoolLoad.f32.chk %f, [p + %c]", "index 3 is out of bounds for the allocated part of pool 'p' of 3 elements"),
    ("PoolAlloc %c, p, 2", "pool 'p' of 4 elements cannot allocate 2 more (3 in use)"),
    ("PoolFree %h", "PoolFree of handle 0, but the most recent starts at 2"),
    ("ResAccum.i32.chk [bins + %c], 1", "200 is not an Atlas class (0..95)"),
])
def test_pool_and_class_errors_are_the_interpreters(wgpu_backend, case, words):
    """One lane, so both backends name the same one."""
    program = parse_program(CHECKS.format(case=case))
    x = np.array([200 if "ResAccum" in case else 3], np.int32)
    messages = []
    for name in ("interp", "wgpu"):
        backend = hologram.get_backend(name)
        arrays = {"x": x, "y": np.zeros(1, np.float32), "bins": np.zeros(96, np.int32)}
        with pytest.raises(ExecutionError) as e:
            backend.launch(backend.prepare(program), arrays, {}, {"n": 1})
        messages.append(str(e.value))
    assert messages[0] == messages[1] and words in messages[1], messages


@pytest.mark.parametrize("limit, value, words", [
    ("max_bindings", 3, r"4 storage buffers \(its global buffers, the error record and the launch info\); this "
                        r"adapter \(.*\) binds at most 3 in a shader"),
    ("max_lanes", 1, r"blocks of \(2,\) lanes; this adapter \(.*\) runs workgroups of at most 1 invocations"),
])
def test_a_program_past_the_adapters_limits_is_refused_in_prepare(wgpu_backend, monkeypatch, limit, value, words):
    """Adapters differ (OpenGL binds 16 storage buffers, WebGPU promises 8): prepare holds a
    program to the device's own limits, here lowered."""
    from hologram_wgpu import device

    monkeypatch.setattr(device, "_gpu", attrs.evolve(device.gpu(), **{limit: value}))
    wgpu_backend.clear_cache()
    with pytest.raises(UnsupportedProgram, match=words):
        wgpu_backend.prepare(parse_program(WIDE_GRID.replace("block [1]", "block [2]")))


INIT_BYTES = """
.program seeded
.symbols n
.param in x: i32[n]
.param out y: i8[4]
.stage main domain [n] block [4]
    .init y[1] = 5
    .reg %i: i64
    EXIT
"""


def test_an_init_of_a_byte_buffer_is_refused_in_prepare(wgpu_backend):
    """The queue writes whole words between dispatches, so an .init of one byte is refused,
    the same way every time, rather than writing its neighbours."""
    with pytest.raises(UnsupportedProgram, match=r"stage 'main': \.init of 'y', a buffer of elements smaller than"):
        wgpu_backend.prepare(parse_program(INIT_BYTES))


CONSTANT_I16 = """
.program constant_i16
.symbols n
.param in x: i16[n]
.param out y: i16[n]
.stage s domain [n] block [64]
    .reg %i: i64
    .reg %a, %b: i16
    MOV.i64 %i, %gid.x
    BoundMap.i16 %a, 0, 32767, 0
    LDG.i16 %b, [x + %i]
    ADD.i16 %b, %b, %a
    STG.i16 [y + %i], %b
    EXIT
"""


def test_an_i16_op_on_immediates_wraps_without_a_constant_overflow(wgpu_backend):
    """An Atlas op on immediates is a constant WGSL expression; wrapping its i16 result
    by `<< 16 >> 16` overflowed there, which naga refuses (diff-test found it)."""
    program = parse_program(CONSTANT_I16)
    x = np.arange(-50, 50, dtype=np.int16)
    got = {}
    for backend in ("interp", "wgpu"):
        got[backend] = np.zeros_like(x)
        get_backend(backend).launch(program, {"x": x, "y": got[backend]}, {}, {"n": x.size})
    assert np.array_equal(got["wgpu"], got["interp"])


LONG_MIN = """
[kernel]
name = "long_min"
version = "1.0.0"
inputs = { x = "f32[m, n]" }
outputs = { y = "f32[m]" }
body = "y[i] = min(x[i, j], j)"
"""


def test_a_lane_past_llvmpipes_loop_limit_is_refused_not_wrong(wgpu_backend):
    """llvmpipe ends an invocation's loops after 65535 iterations in all, silently: a
    row minimum over 65533 ones came back 0 (found by diff-test once cases could be
    large). The shaders count their iterations against the adapter's budget."""
    from hologram_wgpu.device import LLVMPIPE_BUDGET, gpu

    kernel = hologram.compile(LONG_MIN).on("wgpu")
    x = np.ones((2, 60_000), np.float32)
    x[1, 59_999] = -2.0
    assert np.array_equal(kernel(x), [1.0, -2.0])
    if gpu().loop_budget != LLVMPIPE_BUDGET:
        pytest.skip(f"not llvmpipe: {gpu().adapter_name}")
    with pytest.raises(UnsupportedProgram, match=r"more than 65,000 loop iterations in one invocation"):
        kernel(np.ones((1, 65_533), np.float32))


def test_only_checked_accesses_are_checked_and_read_buffers_are_bound_read_only(wgpu_backend):
    """What keeps a streaming kernel vectorizable on lavapipe (docs/gpu.md, "Benchmarks"):
    axpy's accesses, which the verifier proved in bounds, carry no branch to `fail`, and
    the buffers its stage only reads are bound read-only; a `.chk` access is still checked."""
    axpy = hologram.compile_file(KERNELS / "axpy.toml").program
    shader = wgpu_backend.emit(axpy, "wgsl")
    assert "fail(1u" not in shader
    assert "var<storage, read> b_x" in shader and "var<storage, read> b_y" in shader
    assert "var<storage, read_write> b_z" in shader
    assert "fail(1u" in wgpu_backend.emit(parse_program(OOB), "wgsl")
