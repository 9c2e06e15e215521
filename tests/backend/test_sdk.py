"""hologram.backend, the backend SDK (docs/backends.md): its names, the `Backend` base
(required members abstract, optional capabilities with defaults the runtime relies on),
the declared capabilities (a program they leave out is refused before `prepare`), the one
launch binder (the same checks and messages on every backend), and the one program hash."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hologram
from hologram.backend import (API_VERSION, Backend, Capabilities, DType, LaunchBinding, convert_value, program_hash,
                              trace, zeroed_temporary)
from hologram.backend.binding import ALIGN_FROM, TEMP_ALIGN
from hologram.errors import ArgumentError, PluginError, UnsupportedProgram
from hologram.isa.asm import parse_program
from hologram.registry import plugins
from hologram.registry.lookups import get_backend

from repo_paths import EXAMPLES, KERNELS, ROOT

pytestmark = pytest.mark.usefixtures("fresh_plugins")

VADD = (KERNELS / "vadd.toml").read_text()
SUM = (KERNELS / "sum.toml").read_text()


class Delegating(Backend):
    """The interpreter's prepare and launch, and nothing optional: every optional member
    is the base class's default. `prepared` records each program prepare is given."""

    name = "delegating"
    priority = -5

    def __init__(self, capabilities: Capabilities | None = None):
        if capabilities is not None:
            self.capabilities = capabilities
        self.prepared: list = []

    def available(self) -> bool:
        return True

    def allocate(self, shape, dtype):
        return np.zeros(shape, dtype.np)

    def prepare(self, program):
        self.prepared.append(program)
        return get_backend("interp").prepare(program)

    def launch(self, executable, buffers, scalars, symbols):
        get_backend("interp").launch(executable, buffers, scalars, symbols)


def _register(register_plugin, backend: Backend) -> str:
    plugin = type("Plugin", (), {"hologram_register_backends": staticmethod(
        hologram.hookimpl(lambda register: register(backend)))})
    register_plugin(plugin, backend.name)
    return backend.name


# ---------------------------------------------------------------------------- names
def test_every_name_of_the_sdk_resolves_and_the_api_is_versioned():
    import hologram.backend as sdk

    assert isinstance(API_VERSION, int) and API_VERSION >= 1
    missing = [n for n in sdk.__all__ if not hasattr(sdk, n)]
    assert not missing, missing
    assert {"OPCODES", "OpSpec", "Program", "Instr", "verify", "program_hash", "lane_work", "Formula", "trace",
            "LaunchBinding", "Capabilities", "AccessObserver", "hookimpl"} <= set(sdk.__all__)
    with pytest.raises(AttributeError, match="SDK's names are its __all__"):
        sdk.compile_kdef  # noqa: B018 - the compiler is not the SDK's


def test_importing_the_sdk_loads_only_what_a_plugin_reads():
    """A name is imported at its first use: registering a backend costs its own imports."""
    code = textwrap.dedent("""
        import sys
        import hologram.backend
        from hologram.backend import Backend, DType
        loaded = sorted(m for m in sys.modules if m.startswith("hologram"))
        assert not any(m.startswith(("hologram.verify", "hologram.passes", "hologram.registry", "hologram.compiler",
                                     "hologram.call", "hologram.compile_api", "hologram.streaming",
                                     "hologram.isa.asm", "hologram.isa.encoding")) for m in loaded), loaded
        from hologram.backend import verify
        assert "hologram.verify.verifier" in sys.modules
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_hologram_errors_is_one_module_however_it_is_reached():
    import hologram.errors as imported

    assert hologram.errors is imported and imported.ArgumentError is ArgumentError
    assert issubclass(imported.UnsupportedProgram, imported.PluginError)


# ------------------------------------------------------------------------ the base
def test_a_backend_lacking_a_required_member_cannot_be_made():
    class Half(Backend):
        name, priority = "half", 0

        def available(self):
            return True

    with pytest.raises(TypeError, match="abstract method"):
        Half()


def test_registering_anything_but_a_backend_is_refused():
    class Duck:  # every member, but not the SDK's Backend
        name, priority = "duck", 0
        available = allocate = prepare = launch = None

    plugin = type("P", (), {"hologram_register_backends": staticmethod(
        hologram.hookimpl(lambda register: register(Duck())))})
    plugins.plugin_manager().register(plugin, name="duck")  # a failed plugin is dropped: fresh_plugins resets
    with pytest.warns(Warning, match="expected an instance of a subclass of hologram.backend.Backend"):
        assert "duck" not in hologram.list_backends(available_only=False)


def test_the_optional_members_defaults_serve_the_runtime(register_plugin, tmp_path):
    """A backend with no optional member: kernels call it (full path, then the fast path
    through `launch`, no launcher), clear_cache works, `emit` of a form it lacks is an
    ArgumentError, it ships no native code, it reports no accesses."""
    backend = Delegating()
    name = _register(register_plugin, backend)
    k = hologram.compile(VADD).on(name)
    x = np.arange(5, dtype=np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(k(x, x), 2 * x)
    assert backend.launcher(None, {}) is None and backend.text_forms == {}
    hologram.clear_cache()
    with pytest.raises(ArgumentError, match="backend 'delegating' has no text form 'llvm'"):
        backend.emit(k.program, "llvm")
    assert backend.native_targets() == () and not backend.runs_native("host")
    assert backend.prepare_native(k.program, [{}]) is None
    assert "ships no native code" in backend.check_native(k.program, {})
    with pytest.raises(PluginError, match="builds no native code"):
        backend.compile_native(k.program, "host")
    assert backend.observe(None, {}, {}, {}, None) is False and backend.max_test_elements is None
    from hologram.bundles.build import native_plan

    assert name not in {b for b, _, _ in native_plan("auto")}


# -------------------------------------------------------------------- capabilities
def test_capabilities_say_what_a_program_needs_that_they_leave_out():
    caps = Capabilities.of("MOV MOV_IMM LDG STG ADD EXIT", dtypes=(DType.F32, DType.I64), max_block_threads=128,
                           excluding=[("ADD", DType.I64)])
    assert caps.covers("ADD", DType.F32) and not caps.covers("ADD", DType.I64) and caps.covers("EXIT", None)
    vadd = hologram.compile(VADD).program
    assert caps.uncovered(vadd) == "stage 'z': blocks of 256 lanes (256,) (this backend runs at most 128 per block)"
    wide = Capabilities.of("MOV MOV_IMM LDG STG ADD EXIT", dtypes=(DType.F32, DType.I64))
    assert wide.uncovered(vadd) is None and Capabilities().complete and Capabilities().uncovered(vadd) is None
    total = hologram.compile(SUM).program
    assert wide.uncovered(total) == ("stage 'total': instruction 2 `ReduceAdd.f32 [total], %f0`: ReduceAdd.f32 is "
                                     "not declared")
    no_float_to_int = Capabilities(conversions=[(to, frm) for to in DType for frm in DType
                                                if not (frm.is_float and to.is_int)])
    assert no_float_to_int.covers_conversion(DType.F32, DType.I32)
    assert not no_float_to_int.covers_conversion(DType.I32, DType.F32)
    assert Capabilities(shared_memory=False).uncovered(parse_program(SHARED)) == (
        "stage 's': it declares block-shared memory, which this backend does not run")
    assert Capabilities(max_rank=1).uncovered(parse_program(SHARED.replace("[4] block [4]", "[4, 1] block [4, 1]"))) \
        == "stage 's': a domain of 2 axes (this backend runs at most 1)"
    with pytest.raises(ValueError, match="opcodes the op table does not have: FROB"):
        Capabilities.of("ADD FROB")
    with pytest.raises(ValueError, match="max_rank"):
        Capabilities(max_rank=4)


SHARED = """.program sh
.param out y: f32[4]
.stage s domain [4] block [4]
    .reg %i: i64
    .reg %v: f32
    .shared a: f32[4]
    MOV.i64 %i, %tid.x
    STS.f32 [a + %i], 1.0
    BarSync
    LDS.f32 %v, [a + %i]
    STG.f32 [y + %i], %v
    EXIT
"""


def test_a_program_the_capabilities_leave_out_is_refused_before_prepare(register_plugin):
    backend = Delegating(Capabilities.of("MOV MOV_IMM LDG STG ADD EXIT", dtypes=(DType.F32, DType.I64)))
    name = _register(register_plugin, backend)
    x = np.ones(4, np.float32)
    np.testing.assert_array_equal(hologram.compile(VADD).on(name)(x, x), 2 * x)
    total = hologram.compile(SUM).on(name)
    with pytest.raises(UnsupportedProgram) as e:
        total(x)
    assert e.value.message == ("backend 'delegating' cannot run program 'sum': stage 'total': instruction 2 "
                               "`ReduceAdd.f32 [total], %f0`: ReduceAdd.f32 is not declared")
    assert "its capabilities do not declare it" in e.value.hint
    assert [p.name for p in backend.prepared] == ["vadd"]  # never asked to prepare what it does not declare
    with pytest.raises(UnsupportedProgram):
        total.map(np.ones((2, 4), np.float32))  # the loop-dimension rewrite is held to the declaration too
    assert [p.name for p in backend.prepared] == ["vadd"]


# ------------------------------------------------------------------ the one binder
def _lanes() -> object:
    spec = importlib.util.spec_from_file_location("hologram_lanes",
                                                  EXAMPLES / "hologram-backend-lanes" / "hologram_lanes" / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCALE = """.program scale
.symbols n
.param a: f32
.param in x: f32[n]
.param out y: f32[n]
.stage s domain [n] block [4]
    .reg %i: i64
    .reg %v: f32
    MOV.i64 %i, %gid.x
    LDG.f32 %v, [x + %i]
    MUL.f32 %v, %v, $a
    STG.f32 [y + %i], %v
    EXIT
"""

x4, y4 = np.ones(4, np.float32), np.zeros(4, np.float32)
read_only = np.zeros(4, np.float32)
read_only.flags.writeable = False
BAD_LAUNCHES = [
    ({"x": x4}, {"a": 1.0}, {"n": 4}, "program 'scale' needs buffer(s) y"),
    ({"x": x4, "y": y4, "z": y4}, {"a": 1.0}, {"n": 4}, "program 'scale' has no buffer parameter(s) z"),
    ({"x": [1.0] * 4, "y": y4}, {"a": 1.0}, {"n": 4}, "buffer 'x': expected a numpy array of f32, got list"),
    ({"x": x4.astype(np.float64), "y": y4}, {"a": 1.0}, {"n": 4}, "buffer 'x': expected dtype f32, got float64"),
    ({"x": x4[:3], "y": y4}, {"a": 1.0}, {"n": 4}, "buffer 'x': expected 4 elements, got 3 (shape (3,))"),
    ({"x": np.ones(8, np.float32)[::2], "y": y4}, {"a": 1.0}, {"n": 4}, "buffer 'x' must be C-contiguous"),
    ({"x": x4, "y": read_only}, {"a": 1.0}, {"n": 4},
     "buffer 'y' is written by the program but the array is read-only"),
    ({"x": x4, "y": y4}, {}, {"n": 4}, "scalar parameter 'a' (f32) is missing"),
    ({"x": x4, "y": y4}, {"a": "2"}, {"n": 4}, "scalar parameter 'a': expected a number of type f32, got '2'"),
    ({"x": x4, "y": y4}, {"a": 1.0}, {}, "shape symbol 'n' must be bound to an integer, got None"),
    ({"x": x4, "y": y4}, {"a": 1.0}, {"n": 2**62},
     "shape symbol 'n' = 4611686018427387904 is outside the range a launch may bind a symbol to: 0 to 2**62 - 1 "
     "(the verifier's proofs assume it)"),
]


@pytest.mark.parametrize("buffers, scalars, symbols, message", BAD_LAUNCHES,
                         ids=[m.split(":")[0][:40] for *_, m in BAD_LAUNCHES])
def test_every_backend_refuses_a_bad_launch_with_the_same_words(register_plugin, buffers, scalars, symbols, message):
    """One binder: interp, cpu_llvm and the lanes example say the same thing."""
    register_plugin(_lanes(), "lanes")
    program = parse_program(SCALE)
    said = {}
    for name in ("interp", "cpu_llvm", "lanes"):
        if name not in hologram.list_backends():
            continue
        backend = get_backend(name)
        with pytest.raises(ArgumentError) as e:
            backend.launch(backend.prepare(program), dict(buffers), dict(scalars), dict(symbols))
        said[name] = e.value.message
    assert set(said.values()) == {message}, said


def test_the_binder_binds_and_converts_by_the_isa_rules():
    binding = LaunchBinding.of(parse_program(SCALE))
    bound = binding.bind({"x": np.ones(5, np.float32), "y": np.zeros(5, np.float32)}, {"a": 3}, {"n": np.int64(5)})
    assert bound.values == (5,) and bound.symbols == {"n": 5} and bound.sizes == (5, 5)
    assert type(bound.scalars[0]) is np.float32 and bound.scalars[0] == 3
    assert [b.written for b in binding.params] == [False, True]


def test_convert_value_follows_cvt():
    cv = convert_value
    assert cv(300, np.dtype(np.uint8)) == 44 and cv(-1, np.dtype(np.uint16)) == 65535
    assert cv(float("nan"), np.dtype(np.int32)) == 0 and cv(1e30, np.dtype(np.int8)) == 127
    assert cv(-2.7, np.dtype(np.int64)) == -2 and cv(float("-inf"), np.dtype(np.int16)) == -32768
    assert cv(2, np.dtype(np.bool_)) and cv(True, np.dtype(np.float32)) == 1.0
    assert cv(2**63 + 1, np.dtype(np.float32)) == np.float32(2.0**63)
    assert cv(np.float64(0.1), np.dtype(np.float16)) == np.float16(0.1)



@pytest.mark.parametrize("dtype", [DType.F32, DType.F64, DType.F16, DType.BOOL, DType.I8])
@pytest.mark.parametrize("size", [1, 3, 1000, 1 << 18])
def test_temporaries_are_zeroed_and_large_ones_start_on_a_cache_line(dtype, size):
    """numpy aligns to 16 bytes only; a large temp read in 512-bit vectors (a gemm's
    panels) must not straddle cache lines, wherever the allocator puts it."""
    for _ in range(4):
        t = zeroed_temporary("t", dtype, size)
        assert t.dtype == dtype.np and t.shape == (size,) and t.flags.c_contiguous and t.flags.writeable
        assert not t.any()
        if t.nbytes >= ALIGN_FROM:  # a small temp keeps numpy's alignment: finding the address costs more
            assert t.ctypes.data % TEMP_ALIGN == 0

# ------------------------------------------------------------------- one program hash
@pytest.mark.parametrize("backend", [b for b in ("interp", "cpu_llvm") if importlib.util.find_spec(f"hologram_{b}")])
def test_every_backend_names_a_program_by_the_one_hash(backend):
    """What a backend caches by and what its trace spans say is `program_hash`."""
    program = parse_program(SCALE)
    with trace.recording() as events:
        get_backend(backend).prepare(program)
    spans = [e for e in events if e.get("name") == f"{backend} prepare"]
    assert spans and {e["args"]["program"] for e in spans} == {program_hash(program)}


def test_the_sdk_is_documented_for_backend_authors():
    guide = (ROOT / "docs" / "backends.md").read_text()
    import hologram.backend as sdk

    undocumented = [n for n in sdk.__all__ if n[0] != "_" and f"`{n}" not in guide and n not in sdk._op_table_names()]
    assert not undocumented, f"docs/backends.md does not mention: {', '.join(undocumented)}"
