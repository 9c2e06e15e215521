#!/usr/bin/env python
"""What the first call of a Python kernel costs, beside the same kernel as TOML.

    python benchmarks/python_kernels.py [--repeat N] [--backend cpu_llvm]

Each figure is timed inside a fresh child process, N times (default 7), the rows taken in
turn after one untimed run of each that warms the caches; the table gives the median and
the min of the wall time (time.perf_counter) and of the process's CPU time
(time.process_time, steadier on a shared machine). Every child first imports numpy and
hologram and loads the plugins' registrations (untimed), so the rows differ only in the
kernel's own path.

- toml: `hologram.compile_file("kernels/softmax.toml")`, then one call on 1000 f32.
- python: importing a module holding the same softmax as a `@hologram.kernel` function
  (`m = x.max()`, `e = np.exp(x - m)`, `return e / e.sum()`), then one call.
- translate only: `hologram.compile_file` stopped after the translator (the parse of the
  module and the `KernelDef`), to show the translator's own share.

Both timed rows include every compile stage (the translator's import and run, the
analyzer, the passes, lowering, the verifier) and the backend's preparation; `--cold` gives every run an
empty HOLOGRAM_CACHE_DIR (cpu_llvm then runs LLVM), by default the disk cache is warm (a
temporary one, filled by the untimed run). Bytecode goes to a temporary
PYTHONPYCACHEPREFIX, so no run compiles hologram's modules.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MODULE = '''import numpy as np
import hologram as hg
from hologram.types import f32


@hg.kernel
def softmax(x: f32["n"]) -> f32["n"]:
    m = x.max()
    e = np.exp(x - m)
    return e / e.sum()
'''

# Every child imports the same things before the clock starts (numpy, hologram's compile
# API, the plugins' registrations), so the rows differ only in the kernel's own path: the
# translator's import and run, analysis, passes, lowering, verifying, preparing, the call.
PRELUDE = """
import json, sys, time
import numpy as np
x = np.linspace(-3, 3, 1000, dtype=np.float32)
import hologram
from hologram.registry.lookups import find_translator
find_translator("toml"), find_translator("python")
sys.path.insert(0, {folder!r})
t0, c0 = time.perf_counter(), time.process_time()
"""
TOML = """
k = hologram.compile_file({path!r}).on({backend!r})
k(x)
"""
PYTHON = """
import pysoftmax
k = pysoftmax.softmax.on({backend!r})
k(x)
"""
TRANSLATE = """
from hologram.compile_api.compile import translate
from hologram.registry.lookups import translator_for_path
translate(translator_for_path({path!r}), open({path!r}).read(), {path!r})
"""
REPORT = """
print(json.dumps([time.perf_counter() - t0, time.process_time() - c0]))
"""


def child(code: str, env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of the measured part, in a fresh process."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    if done.returncode:
        raise SystemExit(done.stderr)
    wall, cpu = json.loads(done.stdout.strip().splitlines()[-1])
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--backend", default="cpu_llvm")
    ap.add_argument("--cold", action="store_true", help="an empty disk cache in every run")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "mod"
        folder.mkdir()
        module = folder / "pysoftmax.py"
        module.write_text(MODULE)
        toml = str(ROOT / "kernels" / "softmax.toml")
        prelude = PRELUDE.format(folder=str(folder))
        rows = {name: prelude + code + REPORT for name, code in {
            "toml: compile_file + 1st call": TOML.format(path=toml, backend=args.backend),
            "python: import the @hg.kernel module + 1st call": PYTHON.format(backend=args.backend),
            "toml: translation alone": TRANSLATE.format(path=toml),
            "python: translation alone": TRANSLATE.format(path=str(module)),
        }.items()}
        env = {**os.environ, "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pyc"), "HOLOGRAM_CACHE_DIR": str(Path(tmp) / "c")}
        for code in rows.values():
            child(code, env)  # warm: bytecode, and the disk cache unless --cold
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in rows}
        for k in range(args.repeat):
            for name, code in rows.items():
                run_env = {**env, "HOLOGRAM_CACHE_DIR": str(Path(tmp) / f"cold{k}-{len(times[name])}")} \
                    if args.cold else env
                times[name].append(child(code, run_env))
        print(f"{args.backend}, {'cold' if args.cold else 'warm'} disk cache, {args.repeat} runs; ms")
        print(f"{'row':<50} {'wall median':>12} {'wall min':>9} {'CPU median':>11} {'CPU min':>8}")
        for name, ts in times.items():
            wall, cpu = [t[0] for t in ts], [t[1] for t in ts]
            print(f"{name:<50} {statistics.median(wall) * 1e3:12.1f} {min(wall) * 1e3:9.1f} "
                  f"{statistics.median(cpu) * 1e3:11.1f} {min(cpu) * 1e3:8.1f}")
        print(json.dumps(times))


if __name__ == "__main__":
    main()
