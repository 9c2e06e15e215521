"""A warm disk cache spares a new process all of LLVM: no codegen, no optimization, no
object compile, and no second verification (the entry certifies its program passed this
verifier: the key digests the verifier's modules, wherever the import system finds them)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from hologram_cpu_llvm import backend, loader

PREPARE = textwrap.dedent("""
    import sys
    import numpy as np
    import hologram as hg
    from hologram_cpu_llvm import backend, jit

    if sys.argv[2] == "warm":
        def refuse(*args, **kwargs):
            raise AssertionError("a warm prepare did LLVM or verifier work")
        backend.compile_program = jit.compile_object = jit.optimize = backend.verify = refuse
    k = hg.compile("[kernel]\\nname='axpy'\\nversion='1.0.0'\\ninputs={a='f32', x='f32[n]', y='f32[n]'}\\n"
                   "outputs={z='f32[n]'}\\nbody='z = a * x + y'\\n")
    exe = backend.CpuLlvmBackend(num_threads=1, cache_dir=sys.argv[1]).prepare(k.program)
    x = np.arange(5, dtype=np.float32)
    assert (k.on("cpu_llvm")(np.float32(2), x, x) == 3 * x).all()
    print(exe.from_cache)
""")


def prepare(cache: Path, mode: str) -> str:
    env = {**os.environ, "HOLOGRAM_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-c", PREPARE, str(cache), mode], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_warm_prepare_in_a_new_process_does_no_llvm_work(tmp_path):
    assert prepare(tmp_path, "cold") == "False"
    assert prepare(tmp_path, "warm") == "True"


def test_the_cache_key_follows_every_module_the_verifier_imports():
    """verifier_modules() reads imports with a regular expression (for speed); it must
    find what `ast` finds."""
    found = backend.verifier_modules()
    for name, path in found.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hologram."):
                modules = {node.module} | {f"{node.module}.{a.name}" for a in node.names}
                assert modules & found.keys(), f"{name} imports {node.module}, missing from the key"
    assert {"hologram.verify.verifier", "hologram.verify.dataflow", "hologram.isa.opcodes"} <= found.keys()
    from hologram.backend import verify

    assert verify.__module__ == backend._VERIFIER  # the key's root is where the SDK's verify lives


RUN = textwrap.dedent("""
    import sys
    import numpy as np
    import hologram as hg

    k = hg.compile("[kernel]\\nname='axpy'\\nversion='1.0.0'\\ninputs={a='f32', x='f32[n]', y='f32[n]'}\\n"
                   "outputs={z='f32[n]'}\\nbody='z = a * x + y'\\n")
    for n in (5, 1 << 20):  # inline, then on the native pool's workers
        x = np.arange(n, dtype=np.float32)
        assert (k.on("cpu_llvm")(np.float32(2), x, x) == 3 * x).all()
    from hologram_cpu_llvm import native_pool, trampoline
    print(sorted(m for m in ("llvmlite.binding", "llvmlite.ir", "hologram_cpu_llvm.offload",
                             "hologram_cpu_llvm.compile_worker") if m in sys.modules),
          trampoline._STATE.get("ok"), native_pool._STATE.get("ok"))
""")


def test_a_warm_process_never_imports_llvm(tmp_path):
    """Object code from the disk cache is linked by loader.py and carries the launch entry
    point and the thread pool: a warm process has no use for llvmlite.binding, nor for the
    compile worker."""
    env = {**os.environ, "HOLOGRAM_CACHE_DIR": str(tmp_path), "HOLOGRAM_NUM_THREADS": "2"}
    runs = [subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, env=env, timeout=120)
            for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    assert runs[0].stdout.split()[-2:] == ["True", "True"]
    if loader.supported():
        assert runs[1].stdout.strip() == "[] True True"
