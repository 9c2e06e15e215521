"""InterpBackend as a backend: the protocol, prepare()'s cache and verifier hook, and
registration through the `hologram` entry-point group like any third-party plugin."""

from __future__ import annotations

import importlib.metadata as metadata
import types
import warnings

import numpy as np
import pluggy
import pytest

import hologram_interp
from hologram.backend import Backend
from hologram.core import hookspecs
from hologram.core.errors import ArgumentError, VerifyError
from hologram.core.types import DType
from hologram.isa.asm import parse_program
from hologram_interp import InterpBackend, backend as backend_module

SAXPY = """
.program saxpy
.symbols n
.param a: f32
.param in x: f32[n]
.param inout y: f32[n]
.stage main domain [n] block [64]
    .reg %i: i64
    .reg %xv, %yv: f32
    MOV.i64 %i, %gid.x
    LDG.f32 %xv, [x + %i]
    LDG.f32 %yv, [y + %i]
    MAD.f32 %yv, %xv, $a, %yv
    STG.f32 [y + %i], %yv
    EXIT
"""


@pytest.fixture
def fake_verifier(monkeypatch):
    """A stand-in for the verifier the backend calls, recording what it is asked to verify."""
    calls = types.SimpleNamespace(calls=[])
    calls.verify = lambda p: calls.calls.append(p) or p
    monkeypatch.setattr(backend_module, "verify", lambda p: calls.verify(p))
    return calls


def test_backend_protocol():
    b = InterpBackend()
    assert isinstance(b, Backend)
    assert (b.name, b.priority, b.available()) == ("interp", 10, True)
    a = b.allocate((3, 4), DType.F16)
    assert a.shape == (3, 4) and a.dtype == np.float16 and a.flags.c_contiguous and not a.any()


def test_saxpy_end_to_end():
    # Through prepare(), so through the real verifier.
    b = InterpBackend()
    x, y = np.arange(100, dtype=np.float32), np.ones(100, np.float32)
    b.launch(b.prepare(parse_program(SAXPY)), {"x": x, "y": y}, {"a": np.float32(3)}, {"n": 100})
    np.testing.assert_array_equal(y, 3 * np.arange(100, dtype=np.float32) + 1)


def test_prepare_verifies_once_and_caches_by_content(fake_verifier):
    b = InterpBackend()
    p, q = parse_program(SAXPY), parse_program(SAXPY)
    assert p is not q and b.prepare(p) is b.prepare(q)
    assert fake_verifier.calls == [p]
    # 0.0 and -0.0 compare equal as floats, but they make different programs.
    zero, negzero = (parse_program(SAXPY.replace("$a", v)) for v in ("0.0", "-0.0"))
    assert b.prepare(zero) is not b.prepare(negzero)
    y = np.full(1, -0.0, np.float32)
    b.launch(b.prepare(negzero), {"x": np.zeros(1, np.float32), "y": y}, {"a": 1.0}, {"n": 1})
    assert np.signbit(y[0])  # -0*0 + -0 = -0; with +0.0 it would be +0


def test_verifier_rejection_propagates(monkeypatch, fake_verifier):
    def refuse(p):
        raise VerifyError("no")
    monkeypatch.setattr(fake_verifier, "verify", refuse)
    with pytest.raises(VerifyError, match="no"):
        InterpBackend().prepare(parse_program(SAXPY))


def test_launch_prepares_a_program_and_rejects_other_things():
    b = InterpBackend()
    y = np.zeros(2, np.float32)
    b.launch(parse_program(SAXPY), {"x": np.ones(2, np.float32), "y": y}, {"a": 2}, {"n": 2})
    assert (y == 2).all()
    with pytest.raises(ArgumentError, match="prepare expects a hologram.isa.program.Program"):
        b.prepare("SAXPY")


def test_registered_through_the_entry_point_group():
    (ep,) = [e for e in metadata.entry_points(group="hologram") if e.name == "interp"]
    assert ep.value == "hologram_interp" and ep.load() is hologram_interp
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(ep.load(), name="interp")
    found = []
    pm.hook.hologram_register_backends(register=found.append)
    # registered by name, built when first asked for (hologram.backend.lazy)
    assert [(type(b).__name__, b.name, b.priority) for b in found] == [("LazyBackend", "interp", InterpBackend.priority)]
    assert found[0].load == "hologram_interp.backend:InterpBackend"


def test_the_plugin_manager_finds_it():
    lookups = pytest.importorskip("hologram.registry.lookups")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # other plugins may warn while loading; not this test's business
        backends = lookups.backends()
    assert isinstance(backends["interp"], InterpBackend)
