#!/usr/bin/env python
"""What the first call of a Python kernel costs, beside the same kernel as TOML.

    python benchmarks/python_kernels.py [--repeat N] [--backend cpu_llvm]

Each figure is timed inside a fresh child process (time.perf_counter() around the
measured code, after `import numpy`), N times (default 7), the rows taken in turn after
one untimed run of each that warms the caches; the table gives the median and the min.

- toml: `hologram.compile_file("kernels/softmax.toml")`, then one call on 1000 f32.
- python: importing a module holding the same softmax as a `@hologram.kernel` function
  (`m = x.max()`, `e = np.exp(x - m)`, `return e / e.sum()`), then one call.
- translate only: `hologram.compile_file` stopped after the translator (the parse of the
  module and the `KernelDef`), to show the translator's own share.

Both timed rows include `import hologram` and every compile stage (the front end, the
passes, lowering, the verifier) and the backend's preparation; `--cold` gives every run an
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

TOML = '''
import time, json, sys
import numpy as np
x = np.linspace(-3, 3, 1000, dtype=np.float32)
t0 = time.perf_counter()
import hologram
k = hologram.compile_file({path!r}).on({backend!r})
k(x)
print(json.dumps(time.perf_counter() - t0))
'''

PYTHON = '''
import time, json, sys
import numpy as np
x = np.linspace(-3, 3, 1000, dtype=np.float32)
sys.path.insert(0, {folder!r})
t0 = time.perf_counter()
import hologram
import pysoftmax
k = pysoftmax.softmax.on({backend!r})
k(x)
print(json.dumps(time.perf_counter() - t0))
'''

TRANSLATE = '''
import time, json
import numpy as np
t0 = time.perf_counter()
from hologram.runtime.compile import translate
from hologram.runtime.lookups import translator_for_path
text = open({path!r}).read()
translate(translator_for_path({path!r}), text, {path!r})
print(json.dumps(time.perf_counter() - t0))
'''


def child(code: str, env: dict[str, str]) -> float:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    if done.returncode:
        raise SystemExit(done.stderr)
    return float(done.stdout.strip().splitlines()[-1])


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
        rows = {
            "toml: compile_file + 1st call": TOML.format(path=toml, backend=args.backend),
            "python: import @hg.kernel module + 1st call": PYTHON.format(folder=str(folder), backend=args.backend),
            "python: translation alone (import + translate)": TRANSLATE.format(path=str(module)),
            "toml: translation alone (import + translate)": TRANSLATE.format(path=toml),
        }
        env = {**os.environ, "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pyc"), "HOLOGRAM_CACHE_DIR": str(Path(tmp) / "c")}
        for code in rows.values():
            child(code, env)  # warm: bytecode, and the disk cache unless --cold
        times: dict[str, list[float]] = {name: [] for name in rows}
        for k in range(args.repeat):
            for name, code in rows.items():
                run_env = {**env, "HOLOGRAM_CACHE_DIR": str(Path(tmp) / f"cold{k}-{len(times[name])}")} \
                    if args.cold else env
                times[name].append(child(code, run_env))
        print(f"{'row':<50} {'median':>9} {'min':>9}   ({args.backend}, {'cold' if args.cold else 'warm'} "
              f"disk cache, {args.repeat} runs)")
        for name, ts in times.items():
            print(f"{name:<50} {statistics.median(ts) * 1e3:8.1f}ms {min(ts) * 1e3:8.1f}ms")
        print(json.dumps({k: v for k, v in times.items()}))


if __name__ == "__main__":
    main()
