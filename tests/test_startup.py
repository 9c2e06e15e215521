"""What a new process pays: `import hologram` imports nothing heavy, and loading a
bundle and calling a kernel imports neither the compiler nor LLVM (docs/decisions.md,
"Start-up"; benchmarks/startup.py has the figures)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import hologram

HEAVY = ("numpy", "attr", "attrs", "lark", "llvmlite", "pluggy", "rich", "hypothesis", "packaging", "yaml")


def _child(code: str, **env: str) -> list:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, **env})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_hologram_imports_nothing_heavy():
    loaded = _child(f"""
        import json, sys
        import hologram
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r})))
    """)
    assert loaded == []


def test_every_public_name_is_found_when_first_used():
    for name in hologram.__all__:
        assert getattr(hologram, name) is not None
    from hologram import Kernel, compile_file, errors

    assert callable(compile_file) and isinstance(Kernel, type) and errors.HologramError
    assert hologram.compile.__module__ == "hologram.compile_api.compile"
    assert set(hologram.__all__) <= set(dir(hologram))
    try:
        hologram.not_a_name
    except AttributeError as e:
        assert "not_a_name" in str(e)
    else:
        raise AssertionError("an unknown name must raise AttributeError")


COMPILER = ("lark", "hologram.dsl.parser", "hologram.dsl.analyze", "hologram.dsl.document", "hologram.lower.stages",
            "hologram.passes.manager", "hologram.compile_api.compile", "hologram.registry.pipelines", "llvmlite.binding",
            "llvmlite.ir", "importlib.metadata", "hologram_interp.decode", "hologram_cpu_llvm.jit",
            "hologram_cpu_llvm.codegen", "rich", "hypothesis", "hologram.passes.ir_fold",
            "hologram.passes.isa_passes")


# every backend's module: a kernel run on one imports none of the others' (each registers
# lazily, by name: hologram.backend.lazy), nor their drivers
BACKEND_MODULES = ("hologram_cpu_llvm.backend", "hologram_interp.backend", "hologram_wgpu.backend",
                   "hologram_cuda.backend", "wgpu", "cuda")


# The modules whose attrs classes a process that loads a bundle and calls a kernel
# builds: the IR's and the ISA's values and what they rest on (frozen attrs classes by
# the project's rule), and the run-time values not yet plain classes (Compiled, a
# backend's Capabilities and DeviceArray, the cost model's Formula). Every other value on
# that path is a hologram.core.values.Value: an attrs class costs ~0.3-1 ms to create.
ATTRS_ON_THE_CALL_PATH = frozenset({
    "hologram.isa.program", "hologram.isa.asm_lexer", "hologram.core.instructions", "hologram.core.types",
    "hologram.core.dims", "hologram.core.errors", "hologram.verify.intervals",
    "hologram.compiler.driver", "hologram.backend.capabilities", "hologram.backend.device", "hologram.passes.work"})


def test_a_bundle_loads_and_runs_without_the_compiler(tmp_path):
    """By path, trusted native code (cpu_llvm) or a warm cache: nothing of the compiler,
    LLVM, the test kit or importlib.metadata is imported, nor another backend; and once
    the verifier has passed the program (a verdict: the second process), the only attrs
    classes built are those of ATTRS_ON_THE_CALL_PATH's modules."""
    from hologram.bundles.build import build

    path = tmp_path / "tiny-1.0.0.hgb"
    build(["kernels/softmax.toml"], "tiny", "1.0.0", path, cache_dir=False, jobs=1)
    backend = "cpu_llvm" if "cpu_llvm" in hologram.list_backends() else "interp"
    code = f"""
        import json, sys
        import numpy as np
        import hologram

        x = np.linspace(-4, 4, 1000, dtype=np.float32)
        y = hologram.load_bundle({str(path)!r}, trust_native=True).softmax.on({backend!r})(x)
        e = np.exp(x - x.max())
        assert np.allclose(y, e / e.sum(), rtol=1e-4, atol=1e-7)
        attrs_classes = sorted({{c.__module__ for m in list(sys.modules.values()) for c in vars(m).values()
                                if isinstance(c, type) and "__attrs_attrs__" in vars(c)
                                and c.__module__.startswith("hologram")}})
        print(json.dumps([sorted(m for m in sys.modules if m in {COMPILER + BACKEND_MODULES!r}), attrs_classes]))
    """
    for _ in range(2):  # the first process verifies the program and records its verdict
        loaded, attrs_modules = _child(code, HOLOGRAM_CACHE_DIR=str(tmp_path / "cache"))
        assert loaded == [f"hologram_{backend}.backend"]
    assert set(attrs_modules) <= ATTRS_ON_THE_CALL_PATH, set(attrs_modules) - ATTRS_ON_THE_CALL_PATH
