"""wgpu's device arrays (docs/gpu.md, "How arrays move"): wgpu buffers that stay on the
device between kernels. What moves is counted (`hologram_wgpu.arrays.transfers`), never
timed; every dtype round-trips bit for bit through the packed layouts; kernels on device
arrays compute what they compute on numpy arrays, and fail with the interpreter's words."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

import hologram
from hologram.backend import DeviceArray, DType
from hologram.errors import ArgumentError, ExecutionError

SCALE = """
[kernel]
name = "scale"
version = "1.0.0"
inputs  = { x = "f32[n]", k = "f32" }
outputs = { y = "f32[n]" }
body = "y = x * k"
"""

VADD = """
[kernel]
name = "vadd"
version = "1.0.0"
inputs  = { x = "f32[n]", y = "f32[n]" }
outputs = { z = "f32[n]" }
body = "z = x + y"
"""

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

SHIFTED = """
[kernel]
name = "shifted"
version = "1.0.0"
inputs  = { x = "u8[n]" }
outputs = { y = "u8[n]" }
body = "y[i] = x[(i + 1) % n]"
"""

GATHER = """
[kernel]
name = "gather"
version = "1.0.0"
inputs  = { x = "f32[n]", idx = "i32[m]" }
outputs = { y = "f32[m]" }
body = "y[i] = x[idx[i]]"
"""


@pytest.fixture
def transfers(wgpu_backend):
    from hologram_wgpu.arrays import transfers

    return transfers


def _moved(transfers) -> tuple[int, int]:
    return transfers["to_device"], transfers["to_host"]


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint8)


def test_a_chain_of_kernels_makes_no_host_copies(wgpu_backend, transfers):
    scale, vadd = hologram.compile(SCALE).on("wgpu"), hologram.compile(VADD).on("wgpu")
    x = np.linspace(-3, 3, 1001, dtype=np.float32)
    xd = hologram.to_device(x, "wgpu")
    before = _moved(transfers)
    y = scale(xd, 3.0)
    z = vadd(y, xd)
    assert _moved(transfers) == before  # nothing moved either way
    assert isinstance(z, DeviceArray) and (z.shape, z.dtype, z.backend.name) == ((1001,), np.float32, "wgpu")
    want = vadd.on("interp")(scale.on("interp")(x, 3.0), x)
    assert np.array_equal(_bits(z.numpy()), _bits(want))
    assert _moved(transfers) == (before[0], before[1] + 1)  # the one read


def test_numpy_inputs_move_as_before(wgpu_backend, transfers):
    vadd = hologram.compile(VADD).on("wgpu")
    x = np.arange(9, dtype=np.float32)
    before = _moved(transfers)
    z = vadd(x, x)
    assert type(z) is np.ndarray and np.array_equal(z, 2 * x)
    # x and y up, and z (an output keeps what the program does not write), z back
    assert _moved(transfers) == (before[0] + 3, before[1] + 1)


@pytest.mark.parametrize("n", [0, 1, 3, 5, 8, 1001])
def test_every_dtype_round_trips_bit_for_bit(wgpu_backend, n):
    """Packed storage (bool and 8-bit four to a word, 16-bit two) and the padding of the last
    word: a length that is no multiple of a word leaves neighbours that must come back as
    they went, and so do NaN payloads, -0.0 and subnormals."""
    rng = np.random.default_rng(n)
    for d in DType:
        bits = rng.integers(0, 256, n * d.np.itemsize, dtype=np.uint8)
        x = bits.view(d.np) if d is not DType.BOOL else bits.astype(bool)
        back = hologram.to_device(x, "wgpu").numpy()
        assert back.dtype == x.dtype and back.shape == x.shape and np.array_equal(_bits(back), _bits(x)), d
    scalar = hologram.to_device(np.float16(-0.0), "wgpu")
    assert scalar.shape == () and _bits(scalar.numpy()).tolist() == [0, 0x80]


def test_sub_word_kernels_on_device_arrays_match_the_numpy_path(wgpu_backend, transfers):
    k = hologram.compile(MIXED).on("wgpu")
    rng = np.random.default_rng(3)
    a, b = (rng.integers(-32768, 32767, 501, endpoint=True).astype(np.int16) for _ in range(2))
    b[:50] = a[:50]
    x = (rng.standard_normal(501) * 300).astype(np.float16)
    x[:6] = [0.0, -0.0, np.inf, np.nan, 6e-8, 65504]
    want = k.on("interp")(a, b, x)
    got = k(*(hologram.to_device(v, "wgpu") for v in (a, b, x)))
    assert all(isinstance(g, DeviceArray) for g in got)
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(_bits(g.numpy()), _bits(w))


def test_out_and_an_aliased_input_stay_on_the_device(wgpu_backend, transfers):
    shifted = hologram.compile(SHIFTED).on("wgpu")
    x = np.arange(7, dtype=np.uint8)  # seven bytes: the last word half padding
    xd = hologram.to_device(x, "wgpu")
    before = _moved(transfers)
    copies = transfers["on_device"]
    assert shifted(xd, out=xd) is xd
    assert _moved(transfers) == before and transfers["on_device"] == copies + 1  # the input copied on the device
    assert np.array_equal(xd.numpy(), np.roll(x, -1))
    out = wgpu_backend.allocate_device((7,), DType.U8)
    assert np.array_equal(out.numpy(), np.zeros(7, np.uint8))  # made zeroed
    assert shifted(x, out=out) is out and np.array_equal(out.numpy(), np.roll(x, -1))


def test_the_interpreters_errors_surface_from_device_arrays(wgpu_backend):
    k = hologram.compile(GATHER, file="gather.toml")
    x = np.arange(10, dtype=np.float32)
    idx = np.array([1, 2, 3, 10, 4], np.int32)
    with pytest.raises(ExecutionError) as want:
        k.on("interp")(x, idx)
    xd, idxd = hologram.to_device(x, "wgpu"), hologram.to_device(idx, "wgpu")
    with pytest.raises(ExecutionError) as got:
        k.on("wgpu")(xd, idxd)
    assert str(got.value) == str(want.value)
    good = hologram.to_device(np.array([9, 0, 3], np.int32), "wgpu")
    assert np.array_equal(k.on("wgpu")(xd, good).numpy(), x[[9, 0, 3]])  # and the next launch runs


def test_a_wgpu_device_array_elsewhere_is_an_argument_error(wgpu_backend):
    xd = hologram.to_device(np.ones(3, np.float32), "wgpu")
    k = hologram.compile(VADD)
    with pytest.raises(ArgumentError, match="argument 'x' is a device array of backend 'wgpu', but backend "
                                            "'cpu_llvm' has no device arrays"):
        k.on("cpu_llvm")(xd, np.ones(3, np.float32))
    with pytest.raises(ArgumentError, match="buffer 'x' is a device array of backend 'wgpu', but this backend "
                                            "has no device arrays"):
        hologram.get_backend("interp").launch(k.program, {"x": xd, "y": np.ones(3, np.float32),
                                                          "z": np.ones(3, np.float32)}, {}, {"n": 3})


def test_an_array_the_device_cannot_bind_is_refused_before_any_copy(wgpu_backend, transfers, monkeypatch):
    from hologram_wgpu import device

    monkeypatch.setattr(device, "_gpu", attrs.evolve(device.gpu(), max_binding_bytes=64))
    before = _moved(transfers)
    for make in (lambda: hologram.to_device(np.ones(17, np.float32), "wgpu"),
                 lambda: wgpu_backend.allocate_device((17,), DType.F32)):
        with pytest.raises(ArgumentError, match="cannot make a device array of 68 bytes; this wgpu device binds at "
                                                "most 64 bytes per buffer"):
            make()
    assert _moved(transfers) == before
    with pytest.raises(ExecutionError, match="buffer '[xyz]' is 68 bytes; this wgpu device binds at most 64 bytes"):
        hologram.compile(VADD).on("wgpu")(np.ones(17, np.float32), np.ones(17, np.float32))
