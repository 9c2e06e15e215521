"""The call fast path (hologram.call.fastcall) and the backends' launchers: a call that
matches the last fully checked one skips re-deriving its checks, and anything else,
in any order, behaves exactly as the full path (same result, same error message)."""

from __future__ import annotations

import glob
import os
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hologram as hg
from hologram.call import kernel as kernel_module
from hologram.call.kernel import Kernel
from hologram.core.errors import ArgumentError, ExecutionError, HologramError
from hologram.core.types import Affine
from hologram.isa.program import BufferParam, ScalarParam

from dsl_helpers import TWO_KERNELS

BACKENDS = ("cpu_llvm", "interp")


def compiled(path: str) -> hg.Kernel:
    return hg.compile_file(path)


AXPY = compiled("kernels/axpy.toml")
STENCIL = compiled("kernels/stencil3.toml")
MAX = compiled("kernels/max.toml")
HIST = compiled("kernels/class_histogram.toml")


def fresh(k: hg.Kernel, backend: str) -> Kernel:
    """The same compiled kernel with no call history: its first call takes the full path."""
    return Kernel(k._c, backend)


def outcome(call):
    """('ok', result) or ('error', type, message): what a call did, comparable."""
    try:
        return ("ok", call())
    except HologramError as e:
        return ("error", type(e), e.message)


def assert_same(got, want, rtol=0.0):
    assert got[0] == want[0], (got, want)
    if got[0] == "error":
        assert got[1:] == want[1:]
        return
    g, w = got[1], want[1]
    if isinstance(w, tuple):
        assert type(g) is type(w)
        for a, b in zip(g, w):
            np.testing.assert_allclose(a, b, rtol=rtol)
    else:
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol)


ADDK = hg.compile('[kernel]\nname = "addk"\nversion = "1.0.0"\ninputs = { k = "i16", x = "i16[n]", y = "i16[n]" }\n'
                  'outputs = { z = "i16[n]" }\nbody = "z = x + y + k"\n')

# One call, described by plain data so it can be rebuilt fresh (outputs and aliased
# inputs get written): a size, how `out` is passed, and at most one argument that
# deviates from a well-formed call (so that most calls are fast-path candidates and a
# deviation usually follows a good call of the same shape).
SCALARS = {"axpy": ["np", "float", "int", "f64", "str", "huge", "nan"],
           "addk": ["np", "int", "float", "i64", "bool", "huge", "str"]}
DEVIATIONS = ([("x", v) for v in ("f64", "strided", "list", "2d", "readonly", "big-endian")]
              + [("y", v) for v in ("longer", "f64")]
              + [("out", v) for v in ("short", "f64", "strided", "readonly", "alias_x", "alias_y", "pair", "list")]
              + [("args", "extra"), ("args", "missing")])


def calls(kernel: str):
    return st.tuples(st.sampled_from([3, 3, 3, 4, 0]), st.sampled_from(["tuple", "none", "array"]),
                     st.one_of(st.none(), st.none(), st.sampled_from([("a", v) for v in SCALARS[kernel]]),
                               st.sampled_from(DEVIATIONS)),
                     st.booleans())


def build(kernel: str, spec):
    """((args, kwargs), out) for `spec`, freshly allocated."""
    n, outv, dev, kw = spec
    dt = np.float32 if kernel == "axpy" else np.int16
    rng = np.random.default_rng(n)
    x = rng.uniform(-2, 2, n).astype(dt) if kernel == "axpy" else rng.integers(-99, 99, n).astype(dt)
    y = rng.uniform(-2, 2, n).astype(dt) if kernel == "axpy" else rng.integers(-99, 99, n).astype(dt)
    a = np.float32(1.5) if kernel == "axpy" else np.int16(3)
    outv = dev[1] if dev and dev[0] == "out" else outv
    which, v = dev if dev else (None, None)
    if which == "a":
        a = {"np": a, "float": -0.25, "int": 3, "f64": np.float64(2.0), "str": "2", "huge": 10 ** 40,
             "nan": float("nan"), "i64": np.int64(-7), "bool": True}[v]
        if kernel == "addk" and v == "huge":
            a = 40000
    elif which == "x":
        x = {"f64": lambda: x.astype(np.float64), "strided": lambda: np.repeat(x, 2)[::2], "list": x.tolist,
             "2d": lambda: x.reshape(1, n), "readonly": lambda: x,
             "big-endian": lambda: x.astype(x.dtype.newbyteorder())}[v]()
        if v == "readonly":
            x.flags.writeable = False
    elif which == "y":
        y = np.append(y, dt(1)) if v == "longer" else y.astype(np.float64)
    out = {"tuple": (np.full(n, 7, dt),), "array": np.full(n, 7, dt), "list": [np.empty(n, dt)],
           "short": (np.empty(max(n - 1, 0), dt),), "f64": (np.empty(n, np.float64),),
           "strided": (np.empty(2 * n, dt)[::2],), "pair": (np.empty(n, dt), np.empty(n, dt))}.get(outv)
    if outv == "readonly":
        out = np.empty(n, dt)
        out.flags.writeable = False
    elif outv == "alias_x":
        out = x
    elif outv == "alias_y":
        out = (y,)
    args, kwargs = ((a, x), {"y": y}) if kw else ((a, x, y), {})
    if which == "args":
        args = args + (x,) if v == "extra" else args[:-1]
    return (args, kwargs), out


def run(k, kernel: str, spec):
    (args, kwargs), out = build(kernel, spec)
    return outcome(lambda: k(*args, **kwargs) if out is None else k(*args, out=out, **kwargs))


def check_sequence(source: hg.Kernel, kernel: str, sequence) -> None:
    cached = {b: fresh(source, b) for b in BACKENDS}  # one history per backend, across the sequence
    for spec in sequence:
        want = run(fresh(source, "interp"), kernel, spec)
        for b in BACKENDS:
            assert_same(run(cached[b], kernel, spec), run(fresh(source, b), kernel, spec))
            assert_same(run(cached[b], kernel, spec), want, rtol=1e-6)
        if want[0] == "ok" and kernel == "axpy":
            (args, kwargs), _ = build(kernel, spec)
            a, x, y = args[0], args[1], kwargs.get("y", args[-1])
            with np.errstate(over="ignore"):  # 10**40 is inf as an f32, as the kernel has it
                ref = np.float32(a) * np.asarray(x, np.float32) + np.asarray(y, np.float32)
            np.testing.assert_allclose(want[1], ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kernel", ["axpy", "addk"])
@pytest.mark.parametrize("deviation", [None, *DEVIATIONS, "scalars"], ids=str)
@pytest.mark.parametrize("outv", ["tuple", "none", "array"])
def test_each_deviation_after_a_good_call_is_rechecked(kernel, deviation, outv):
    """Every single deviation, right after a good call of the same shape (the case the
    fast path must not wave through), then a good call again."""
    devs = [("a", v) for v in SCALARS[kernel]] if deviation == "scalars" else [deviation]
    for dev in devs:
        for kw in (False, True):
            check_sequence(AXPY if kernel == "axpy" else ADDK, kernel,
                           [(3, outv, None, False), (3, outv, dev, kw), (3, outv, None, False)])


@settings(max_examples=60, deadline=None)
@given(sequence=st.lists(calls("axpy"), min_size=2, max_size=10))
def test_sequences_of_calls_agree_with_the_full_path_numpy_and_interp(sequence):
    check_sequence(AXPY, "axpy", sequence)


@settings(max_examples=40, deadline=None)
@given(sequence=st.lists(calls("addk"), min_size=2, max_size=10))
def test_sequences_of_integer_calls_agree_with_the_full_path(sequence):
    check_sequence(ADDK, "addk", sequence)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_repeated_call_skips_the_full_path(backend, monkeypatch):
    k = fresh(AXPY, backend)
    x, y, out = np.arange(5, dtype=np.float32), np.ones(5, np.float32), np.empty(5, np.float32)
    assert k(np.float32(2), x, y, out=(out,)) is out

    def refuse(*args, **kwargs):
        raise AssertionError("the full path ran")
    monkeypatch.setattr(kernel_module, "bind_arguments", refuse)
    out[:] = 0
    assert k(np.float32(2), x, y, out=(out,)) is out
    np.testing.assert_array_equal(out, 2 * x + y)
    np.testing.assert_array_equal(k(0.5, x, y), 0.5 * x + y)  # a Python float, a fresh output
    with pytest.raises(AssertionError, match="full path"):
        k(np.float32(2), x[:4], y[:4])  # another shape is re-checked in full


@pytest.mark.parametrize("backend", BACKENDS)
def test_aliasing_on_the_fast_path_gives_the_unaliased_result(backend):
    k = fresh(STENCIL, backend)
    base = np.arange(12, dtype=np.float32) ** 2
    want = STENCIL.on("interp")(base.copy())
    for _ in range(3):  # the first call is the full path, the others the fast one
        x = base.copy()
        k(x, out=x[:-2])
        np.testing.assert_array_equal(x[:-2], want)
        x = base.copy()
        k(x, out=x[2:])  # the output starts inside the input
        np.testing.assert_array_equal(x[2:], want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_aliasing_through_two_mappings_of_one_file_gives_the_unaliased_result(backend, tmp_path):
    """Two mappings of one file are two addresses for the same bytes: the output written
    through one overlaps the input read through the other, though their addresses do
    not. As np.memmap objects (the full path) and as plain views of them (which the
    fast path takes, after the first call)."""
    k = fresh(STENCIL, backend)
    base = np.arange(40, dtype=np.float32) ** 2
    want = STENCIL.on("interp")(base.copy())
    path = tmp_path / "x.npy"
    for view in (lambda m: m, np.asarray):
        for _ in range(3):
            np.save(path, base)
            x = view(np.load(path, mmap_mode="r"))
            y = view(np.load(path, mmap_mode="r+"))  # another mapping of the same bytes
            assert not np.may_share_memory(x, y)
            k(x, out=y[2:])  # the output starts inside the input
            np.testing.assert_array_equal(np.load(path)[2:], want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_shape_changes_reach_symbols_and_empty_reductions(backend):
    k = fresh(MAX, backend)
    for n in (3, 3, 0, 3, 0, 5, 5):
        x = np.arange(n, dtype=np.float32)
        if n:
            assert k(x) == n - 1
        else:
            with pytest.raises(ArgumentError, match=r"max\(\) over an empty extent"):
                k(x)
    s = fresh(STENCIL, backend)
    for n in (5, 5, 1, 5, 2, 2):
        x = np.arange(n, dtype=np.float32)
        got = outcome(lambda: s(x))
        assert_same(got, outcome(lambda: fresh(STENCIL, backend)(x)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_several_outputs_on_the_fast_path(backend):
    k = fresh(HIST, backend)
    data = np.arange(256, dtype=np.uint8)
    want = HIST.on("interp")(data)
    for _ in range(2):
        h, m = np.full(96, -1, np.int64), np.full(96, -1, np.int64)
        got = k(data, out=[h, m])
        assert got.hist is h and got.mirrored is m
        np.testing.assert_array_equal(h, want.hist)
        np.testing.assert_array_equal(m, want.mirrored)
        res = k(data)
        assert res._fields == ("hist", "mirrored")
        np.testing.assert_array_equal(res.mirrored, want.mirrored)
    with pytest.raises(ArgumentError, match="share memory"):
        k(data, out=(h, h))
    for _ in range(2):  # None allocates that output, on either path
        m = np.full(96, -1, np.int64)
        got = k(data, out=(None, m))
        assert got.mirrored is m
        np.testing.assert_array_equal(got.hist, want.hist)
        np.testing.assert_array_equal(m, want.mirrored)


def test_native_launcher_reports_execution_errors():
    """A checked access out of bounds raises from the native launcher (the second call
    with these shapes) exactly as from the full path (the first)."""
    src = ('[kernel]\nname = "shift"\nversion = "1.0.0"\ninputs = { x = "f32[n]" }\n'
           'outputs = { y = "f32[n]" }\nbody = "y[i] = x[i + 1]"\n')
    k = hg.compile(src, backend="cpu_llvm")
    messages = []
    for _ in range(2):
        with pytest.raises(ExecutionError, match="index 5 is out of bounds for global buffer 'x' of 5 elements") as e:
            k(np.zeros(5, np.float32))
        messages.append(e.value.message)
    assert messages[0] == messages[1]
    assert type(k._hit[0].run).__name__ == "builtin_function_or_method"  # it was the native launcher


def test_direct_launch_stays_fully_checked():
    """The backend's own `launch` never trusts its caller, fast path or not."""
    k = fresh(AXPY, "cpu_llvm")
    x = np.ones(4, np.float32)
    k(np.float32(1), x, x)
    backend, exe = k.backend, k._prepare()[1]
    with pytest.raises(ArgumentError, match="expected 4 elements, got 3"):
        backend.launch(exe, {"x": x, "y": x[:3], "z": np.empty(4, np.float32)}, {"alpha": np.float32(1)}, {"n": 4})


def random_args(k: hg.Kernel, size: int, rng: np.random.Generator) -> list:
    symbols = dict.fromkeys(k.signature.symbols, size)
    args = []
    for p in k.signature.inputs:
        shape = tuple(Affine.of(d).evaluate(symbols) for d in p.shape)
        if p.dtype.is_float:
            v = rng.uniform(-2, 2, shape)
        elif p.dtype.is_bool:
            v = rng.integers(0, 2, shape)
        else:
            v = rng.integers(0, 50, shape)
        args.append(p.dtype.np.type(v) if p.kind == "scalar" else np.ascontiguousarray(v, p.dtype.np))
    return args


@pytest.mark.parametrize("path", sorted(glob.glob("kernels/*.toml")))
def test_every_shipped_kernel_agrees_on_both_paths(path):
    """Full path, then the fast one (native launcher, or the general one for temporaries
    and reductions), against the interpreter, over changing sizes."""
    k, ref = fresh(compiled(path), "cpu_llvm"), fresh(compiled(path), "interp")
    rng = np.random.default_rng(7)
    for size in (5, 5, 5, 9, 9, 5):
        args = random_args(k, size, rng)
        want = ref(*args)
        for out in (None, "given"):
            if out is None:
                got = k(*args)
            else:
                res = k(*args)
                given = tuple(np.empty_like(r) for r in (res if isinstance(res, tuple) else (res,)))
                got = k(*args, out=given)
                assert all(g is o for g, o in zip(got if isinstance(got, tuple) else (got,), given))
            for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
                np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)


def test_calls_from_several_threads_each_get_their_own_result():
    k = fresh(AXPY, "cpu_llvm")
    errors = []

    def work(n: int) -> None:
        x, y = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
        try:
            for _ in range(300):
                np.testing.assert_array_equal(k(np.float32(2), x, y), 2 * x + y)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)
    threads = [threading.Thread(target=work, args=(n,)) for n in (3, 4, 5, 6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


@pytest.mark.parametrize("path", ["kernels/axpy.toml", "kernels/vadd.toml", "kernels/softmax.toml"])
def test_launcher_declines_what_it_was_not_made_for(path):
    """`backend.launcher` (native for axpy and vadd, the Python one for softmax, which
    has temporaries) never runs on arguments `launch` would not get for its symbols."""
    k = fresh(compiled(path), "cpu_llvm")
    backend, exe = k._prepare()
    run = backend.launcher(exe, {"n": 4})
    scalars = [p.dtype.np.type(2) for p in exe.program.params if isinstance(p, ScalarParam)]
    bufs = [np.full(4, 1, np.float32) for p in exe.program.params if isinstance(p, BufferParam)]
    out = bufs[-1]

    def declines(*args) -> None:
        out[:] = -1
        assert run(*args) is False
        assert (out == -1).all()  # nothing ran
    good = [*bufs, *scalars]
    assert run(*good) is None and (out != -1).any()
    for i in range(len(bufs)):
        for bad in (bufs[i].astype(np.float64), bufs[i][:3].copy(), np.repeat(bufs[i], 2)[::2],
                    bufs[i].reshape(2, 2), bufs[i].tolist(), None, bufs[i].astype(">f4"),
                    bufs[i].view(np.matrix)):
            declines(*good[:i], bad, *good[i + 1:])
    readonly = out.copy()
    readonly.flags.writeable = False
    declines(*good[:len(bufs) - 1], readonly, *scalars)
    declines(*good[:-1])
    declines(*good, good[0])
    for i in range(len(bufs), len(good)):
        for bad in (2.0, 2, np.float64(2), None):
            declines(*good[:i], bad, *good[i + 1:])


# -- call styles: keywords, mixed, cast=True, out= as one array ------------------------
def refuse_full_path(monkeypatch) -> None:
    """From now on, entering the full path (`Kernel._call`) fails the test."""
    def refuse(self, *args, **kwargs):
        raise AssertionError("the full path ran")
    monkeypatch.setattr(Kernel, "_call", refuse)


AXPY_STYLES = {  # each call style of axpy(alpha, x, y) -> z, given (a, x, y, o)
    "positional": lambda k, a, x, y, o: k(a, x, y, out=(o,)),
    "keywords": lambda k, a, x, y, o: k(alpha=a, x=x, y=y, out=(o,)),
    "keywords reordered": lambda k, a, x, y, o: k(y=y, x=x, alpha=a, out=(o,)),
    "mixed": lambda k, a, x, y, o: k(a, x, y=y, out=(o,)),
    "mixed 1+2": lambda k, a, x, y, o: k(a, y=y, x=x, out=(o,)),
    "cast=True": lambda k, a, x, y, o: k(a, x, y, out=(o,), cast=True),
    "keywords, cast=True": lambda k, a, x, y, o: k(alpha=a, x=x, y=y, out=(o,), cast=True),
    "cast=False": lambda k, a, x, y, o: k(a, x, y, out=(o,), cast=False),
    "out= one array": lambda k, a, x, y, o: k(a, x, y, out=o),
    "out= a list": lambda k, a, x, y, o: k(a, x, y, out=[o]),
    "keywords, out= one array": lambda k, a, x, y, o: k(alpha=a, x=x, y=y, out=o),
    "keywords, no out": lambda k, a, x, y, o: k(alpha=a, x=x, y=y),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("style", AXPY_STYLES)
def test_every_call_style_takes_the_fast_path(backend, style, monkeypatch):
    """After one full call of these shapes, keywords (any order), mixed positional and
    keyword, cast=True with nothing to cast, and out= as one array or a sequence all skip
    the full path, and compute what numpy does."""
    call = AXPY_STYLES[style]
    k = fresh(AXPY, backend)
    x, y = np.arange(6, dtype=np.float32), np.linspace(-1, 1, 6, dtype=np.float32)
    call(k, np.float32(2), x, y, np.empty(6, np.float32))  # the full path, remembered
    refuse_full_path(monkeypatch)
    for a in (np.float32(1.5), -0.25):  # a numpy scalar, a Python float that converts exactly
        o = np.full(6, np.nan, np.float32)
        got = call(k, a, x, y, o)
        np.testing.assert_array_equal(got, np.float32(a) * x + y)
        if "no out" not in style:
            assert got is o


LIBRARY_TEXT = TWO_KERNELS
LIBRARY = hg.compile_all(LIBRARY_TEXT)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_library_attribute_call_takes_the_fast_path(backend, monkeypatch):
    """`lib.scale(...)` is the Kernel itself: the same fast path, keywords included."""
    lib = LIBRARY.on(backend)
    x = np.arange(4, dtype=np.float64)
    lib.scale(a=2.0, x=x)
    lib["vadd"](x=x.astype(np.float32), y=x.astype(np.float32))
    refuse_full_path(monkeypatch)
    np.testing.assert_array_equal(lib.scale(a=3.0, x=x), 3 * x)
    np.testing.assert_array_equal(lib.scale(3.0, x=x), 3 * x)
    np.testing.assert_array_equal(lib.vadd(y=x.astype(np.float32), x=x.astype(np.float32)), 2 * x)


def test_a_library_kernel_attribute_is_an_ordinary_attribute(monkeypatch):
    """`lib.scale` is found without `Library.__getattr__` (whose failed lookup costs more
    than a fast call); names that are Library attributes still mean those, a missing name
    still raises KernelNotFoundError, and a library stays read-only."""
    lib = hg.compile_all(LIBRARY_TEXT.replace('name = "vadd"', 'name = "items"'))

    def refuse(self, name):
        raise AssertionError(f"__getattr__({name!r}) ran")
    monkeypatch.setattr(hg.Library, "__getattr__", refuse)
    assert lib.scale is lib["scale"]
    assert callable(lib.items) and not isinstance(lib.items, Kernel) and isinstance(lib["items"], Kernel)
    monkeypatch.undo()
    with pytest.raises(hg.errors.KernelNotFoundError, match="no kernel named 'scal'; did you mean 'scale'"):
        lib.scal  # noqa: B018 - the lookup is the test
    with pytest.raises(AttributeError, match="read-only"):
        lib.scale = None
    assert "scale" in dir(lib) and lib.scale is lib["scale"]


BAD_CALLS = {  # axpy calls the full path refuses, each with its own message
    "unknown keyword": lambda k, a, x, y: k(a, x, yy=y),
    "output name as keyword": lambda k, a, x, y: k(a, x, y=y, z=y),
    "duplicate": lambda k, a, x, y: k(a, x, y, alpha=a),
    "duplicate, right count": lambda k, a, x, y: k(a, x, alpha=a),
    "missing": lambda k, a, x, y: k(alpha=a, x=x),
    "missing, mixed": lambda k, a, x, y: k(a, y=y),
    "too many": lambda k, a, x, y: k(a, x, y, x),
    "too many with keyword": lambda k, a, x, y: k(a, x, y, x, y=y),
    "none": lambda k, a, x, y: k(),
    "cast=True, float64": lambda k, a, x, y: k(a, x.astype(np.float64), y, cast=True, out=x.astype(np.float64)),
    "out= a bare tuple of two": lambda k, a, x, y: k(a, x, y, out=(np.empty_like(x), np.empty_like(x))),
    "out= wrong dtype array": lambda k, a, x, y: k(alpha=a, x=x, y=y, out=x.astype(np.float64)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", BAD_CALLS)
def test_bad_calls_after_a_good_one_get_the_full_path_errors(backend, bad):
    """The fast path only declines: a wrong keyword, a duplicate, a missing argument...
    right after a good call of the same shapes raises exactly what a first call does."""
    x, y = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    a = np.float32(2)
    warm = fresh(AXPY, backend)
    warm(alpha=a, x=x, y=y, out=np.empty(4, np.float32))
    want = outcome(lambda: BAD_CALLS[bad](fresh(AXPY, backend), a, x, y))
    assert want[0] == "error"
    assert outcome(lambda: BAD_CALLS[bad](warm, a, x, y)) == want


ODD_NAMES = hg.compile('[kernel]\nname = "odd"\nversion = "1.0.0"\n'
                       'inputs = { cast = "f32", out = "f32[n]", kw = "f32[n]", args = "f32[n]", self = "f32" }\n'
                       'outputs = { r = "f32[n]" }\nbody = "r = kw + args * cast + out - self"\n')


@pytest.mark.parametrize("backend", BACKENDS)
def test_inputs_named_like_the_call_machinery(backend, monkeypatch):
    """Inputs named kw, args and self bind by keyword, on the fast path too; cast= and
    out= stay the call's options (as on the full path), so inputs named so are
    positional only."""
    k = fresh(ODD_NAMES, backend)
    p, q, s = np.arange(3, dtype=np.float32), np.ones(3, np.float32), np.full(3, 10, np.float32)
    want = p + q * 2 + s - 1
    np.testing.assert_array_equal(k(np.float32(2), s, p, self=np.float32(1), args=q), want)  # the full path
    refuse_full_path(monkeypatch)
    np.testing.assert_array_equal(k(np.float32(2), s, kw=p, args=q, self=np.float32(1)), want)
    np.testing.assert_array_equal(k(np.float32(2), s, p, q, np.float32(1), cast=True), want)
    monkeypatch.undo()
    r = np.empty(3, np.float32)
    assert k(2.0, s, p, q, 1.0, out=r) is r  # out= is the output, never the input 'out'
    np.testing.assert_array_equal(r, want)
    with pytest.raises(ArgumentError, match=r"odd\(\) missing inputs 'cast', 'out'"):
        k(kw=p, args=q, cast=np.float32(2), out=s, self=1.0)


def test_the_benchmark_times_every_call_style_on_the_fast_path(monkeypatch):
    """benchmarks/bench.py's launch-overhead rows: one per call style, each a fast call
    (so the rows compare call styles, not the full path) that agrees with numpy's row."""
    for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # bench drops them when imported: put them back after
        if name in os.environ:
            monkeypatch.setenv(name, os.environ[name])
    monkeypatch.syspath_prepend("benchmarks")
    bench = pytest.importorskip("bench")
    d = bench.make_data(bench.QUICK)
    styles = list(bench.CALL_STYLES)
    assert {"launch", "launch_out", "launch_kw", "launch_mixed", "launch_cast"} <= set(styles) <= set(bench.BENCHES)
    impls, numpy = bench.hologram_impls("interp", d, styles), bench.numpy_impls(d)
    for style in styles:
        impls[style]()  # the first call of these shapes: the full path
    refuse_full_path(monkeypatch)
    for style in styles:
        np.testing.assert_allclose(impls[style](), numpy[style](), rtol=1e-6)
