#!/usr/bin/env python
"""Whole-process start-up figures: what a new process pays before its first result.

    python benchmarks/startup.py [--repeat N] [--json PATH]

Every figure is timed inside fresh child processes (`python -c ...`, time.perf_counter()
around the measured code, printed as JSON), N times each (default 7; the figures taken in
turn, after one untimed run of each that warms every cache); the table gives the median,
the min, a ratio and, where the issue sets one, the target. Rows:

- import numpy: the baseline.
- import hologram: ratio to import numpy (target <= 1.3x).
- import numba: for scale, when numba is installed.
- load_bundle + 1st softmax, cpu_llvm (warm): from just after `import hologram` to the
  first result of `hologram.load_bundle(stdlib.hgb).softmax.on("cpu_llvm")(x)`, x 1000
  f32, the cpu_llvm disk cache warm (target <= 10 ms).
- load_bundle + 1st softmax, native code: the same, the bundle trusted
  (`trust_native=True`) so the object code it ships for this CPU's level is loaded, with
  an empty JIT cache in every run: no LLVM work at all (the check fails if there is any;
  target <= 5 ms). What earlier processes record (hologram.core.records: the verifier's
  verdicts, kept manifests) is kept from the warm-up run: a process that has loaded the
  stdlib bundle before.
- import hologram + load_bundle + 1st softmax, native code: the row above with the import
  timed too (numpy imported first): `import hologram` imports its parts when first used,
  so this is the figure that holds the import's and the load's targets together
  (<= 0.3x import numpy + 5 ms).
- load_bundle + 1st softmax, interp: the same with `.on("interp")`.
- compile_file + 1st softmax, cpu_llvm (warm): `hologram.compile_file("kernels/softmax.toml")`
  instead of the bundle, cache warm: what a user pays today without bundles.
- numba 1st softmax (warm cache): from just after `import numba` to the first result of
  an `@njit(cache=True)` softmax, numba's cache (NUMBA_CACHE_DIR) warm.
- build stdlib (no cache) / (warm build cache): `hologram.bundles.build.build()` of
  kernels/*.toml with `cache_dir=False`, and again into an already filled build cache.

The stdlib bundle, HOLOGRAM_CACHE_DIR, NUMBA_CACHE_DIR and the children's bytecode
(PYTHONPYCACHEPREFIX, so an install without writable or present __pycache__ does not pay
compiling every module at each import) live in a temporary folder: the user's caches
and source tree are never touched. `--json PATH` writes the raw figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from importlib import metadata, util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS = sorted(str(p) for p in (ROOT / "kernels").glob("*.toml"))
SOFTMAX = str(ROOT / "kernels" / "softmax.toml")

# A child: `setup` (not the figure; its time is kept as "setup"), then the timed `code`,
# then `check`, which tells whether the result is right. json is imported after the clock.
CHILD = """import time
t0 = time.perf_counter()
{setup}
t1 = time.perf_counter()
{code}
t2 = time.perf_counter()
import json
print(json.dumps({{"setup": t1 - t0, "seconds": t2 - t1, "ok": bool({check})}}))
"""
X = "import numpy as np\nx = np.linspace(-4, 4, 1000, dtype=np.float32)"
SOFTMAX_OK = "np.allclose(y, np.exp(x - x.max()) / np.exp(x - x.max()).sum(), rtol=1e-4, atol=1e-7)"
NUMBA_MODULE = """import numba
import numpy as np


@numba.njit(cache=True)
def softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()
"""


def figures(tmp: Path, bundle: Path) -> dict[str, tuple[str, str, str, str]]:
    """key -> (title, setup, timed code, check)."""
    build = f"build({KERNELS!r}, 'stdlib', '0.0.0', {str(tmp / 'out.hgb')!r}, cache_dir={{}})"
    warm = repr(str(tmp / "build-cache"))
    hg = f"import hologram\n{X}"
    # an empty cache folder for each run, but for the records earlier processes keep (the
    # verifier's verdicts, kept manifests: hologram.core.records), which every run shares
    # (links): the bundle was loaded by an earlier process, the JIT cache is empty
    fresh_cache = (f"import os, tempfile\nos.environ['HOLOGRAM_CACHE_DIR'] = cache = tempfile.mkdtemp(dir={str(tmp)!r})")
    for kind in ("verdicts", "manifests"):
        (tmp / kind).mkdir(mode=0o700, exist_ok=True)
        fresh_cache += f"\nos.symlink({str(tmp / kind)!r}, os.path.join(cache, {kind!r}))"
    return {
        "import_numpy": ("import numpy", "", "import numpy", "True"),
        "import_hologram": ("import hologram", "", "import hologram", "True"),
        "import_numba": ("import numba", "", "import numba", "True"),
        "bundle_cpu_llvm": ("load_bundle + 1st softmax, cpu_llvm (warm)", hg,
                            f"y = hologram.load_bundle({str(bundle)!r}).softmax.on('cpu_llvm')(x)", SOFTMAX_OK),
        "bundle_native": ("load_bundle + 1st softmax, native code",
                          f"{fresh_cache}\n{hg}",
                          f"y = hologram.load_bundle({str(bundle)!r}, trust_native=True).softmax.on('cpu_llvm')(x)",
                          f"{SOFTMAX_OK} and __import__('hologram_cpu_llvm.jit', fromlist=['jit']).STATS['emit'] == 0"),
        "whole_native": ("import hologram + load_bundle + 1st softmax, native code",
                         f"{fresh_cache}\n{X}",
                         f"import hologram\ny = hologram.load_bundle({str(bundle)!r}, trust_native=True)"
                         ".softmax.on('cpu_llvm')(x)", SOFTMAX_OK),
        "bundle_interp": ("load_bundle + 1st softmax, interp", hg,
                          f"y = hologram.load_bundle({str(bundle)!r}).softmax.on('interp')(x)", SOFTMAX_OK),
        "compile_file": ("compile_file + 1st softmax, cpu_llvm (warm)", hg,
                         f"y = hologram.compile_file({SOFTMAX!r}).on('cpu_llvm')(x)", SOFTMAX_OK),
        "numba": ("numba 1st softmax (warm cache)", f"import sys\nsys.path.insert(0, {str(tmp)!r})\nimport numba\n{X}",
                  "from startup_numba_softmax import softmax\ny = softmax(x)", SOFTMAX_OK),
        "build_cold": (f"build stdlib, {len(KERNELS)} kernels (no cache)",
                       "from hologram.bundles.build import build", build.format("False"), "True"),
        "build_warm": ("build stdlib (warm build cache)",
                       "from hologram.bundles.build import build", build.format(warm), "True"),
    }


# the figure a row's ratio is taken against (and its label); the backend a row needs; the
# targets (a bound on the ratio, or on milliseconds)
BUNDLE = ("bundle_cpu_llvm", "bundle, cpu_llvm")
RATIO_TO = {"import_hologram": ("import_numpy", "import numpy"), "import_numba": ("import_numpy", "import numpy"),
            "bundle_interp": BUNDLE, "compile_file": BUNDLE, "numba": BUNDLE, "build_warm": ("build_cold", "no cache")}
NEEDS = {"bundle_cpu_llvm": "cpu_llvm", "bundle_native": "cpu_llvm", "whole_native": "cpu_llvm", "compile_file": "cpu_llvm", "bundle_interp": "interp"}
# (the value judged is a function of the row and of every figure)
TARGETS = {"import_hologram": ("<= 1.3x import numpy", lambda f, r: f["ratio"], 1.3),
           "bundle_native": ("<= 5 ms over the import", lambda f, r: f["median"] * 1e3, 5.0),
           "bundle_cpu_llvm": ("<= 10 ms over the import", lambda f, r: f["median"] * 1e3, 10.0),
           # `import hologram` imports its parts when first used, so the two targets above are
           # judged together too: the import's 0.3x numpy and the load's 5 ms, in one process
           "whole_native": ("<= 0.3x import numpy + 5 ms",
                            lambda f, r: f["median"] * 1e3 - 0.3 * r["import_numpy"]["median"] * 1e3, 5.0)}


def child(setup: str, code: str, check: str, env: dict[str, str], cwd: Path) -> dict:
    """One fresh process: {setup, seconds, ok}, plus its wall time as the parent saw it."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD.format(setup=setup, code=code, check=check)],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        raise RuntimeError(lines[-1] if lines else f"exit {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1]) | {"wall": wall}


def skipped(key: str, backends: list[str], has_numba: bool) -> str:
    """Why a figure is not measured ('' when it is)."""
    if key in ("import_numba", "numba") and not has_numba:
        return "numba not installed"
    if key in NEEDS and NEEDS[key] not in backends:
        return f"{NEEDS[key]} backend not available"
    return ""


def measure(repeat: int, console) -> dict:
    no = os.environ.get("HOLOGRAM_BENCH_NO", "").split(",")  # as in bench.py: pretend these are missing
    has_numba = util.find_spec("numba") is not None and "numba" not in no
    with tempfile.TemporaryDirectory(prefix="hologram-startup-") as name:
        tmp = Path(name)
        # bytecode is written to (and read from) a folder of its own, whatever the install's
        # __pycache__ or PYTHONDONTWRITEBYTECODE: imports compile nothing after the warm-up
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"HOLOGRAM_CACHE_DIR": str(tmp / "cache"), "NUMBA_CACHE_DIR": str(tmp / "numba-cache"),
                "PYTHONPYCACHEPREFIX": str(tmp / "pycache")}
        (tmp / "startup_numba_softmax.py").write_text(NUMBA_MODULE, encoding="utf-8")
        bundle = tmp / "stdlib-0.0.0.hgb"
        with console.status("building the stdlib bundle, listing the backends"):
            child("from hologram.bundles.build import build",
                  f"build({KERNELS!r}, 'stdlib', '0.0.0', {str(bundle)!r}, cache_dir=False)", "True", env, tmp)
            backends = json.loads(subprocess.run(
                [sys.executable, "-c", "import hologram, json; print(json.dumps(hologram.list_backends()))"],
                capture_output=True, text=True, env=env, cwd=tmp, check=True).stdout)
        todo = figures(tmp, bundle)
        results = {key: {"title": title, "runs": [], "note": skipped(key, backends, has_numba), "ok": True}
                   for key, (title, *_) in todo.items()}
        with console.status("") as status:
            for r in range(-1, repeat):  # round -1: one untimed run of each, warming every cache
                for key, (title, setup, code, check) in todo.items():
                    if results[key]["note"]:
                        continue  # not measured here, or failed in an earlier round
                    what = f"{'warm-up' if r < 0 else f'run {r + 1}/{repeat}'}: {title}"
                    status.update(what)
                    if not console.is_terminal:  # no spinner in a log: say what is running
                        print(f"startup: {what}", file=sys.stderr, flush=True)
                    try:
                        run = child(setup, code, check, env, tmp)
                    except Exception as exc:  # a broken install: report it in its row, keep going
                        results[key]["note"] = f"error: {str(exc)[:100]}"
                        continue
                    results[key]["ok"] &= run["ok"]
                    if r >= 0:
                        results[key]["runs"].append(run)
    for key, f in results.items():
        seconds = [run["seconds"] for run in f["runs"]]
        f["median"] = statistics.median(seconds) if seconds and not f["note"] else None
        f["min"] = min(seconds) if seconds and not f["note"] else None
    for key, (ref, _) in RATIO_TO.items():
        a, b = results[key]["median"], results[ref]["median"]
        results[key]["ratio"] = a / b if a and b else None
    return results


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def report(console, results: dict, targets: list[dict], repeat: int) -> None:
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=f"start-up, fresh processes (median and min of {repeat}; softmax on 1000 f32)",
              title_justify="left")
    for c in ("figure", "median", "min", "ratio", "target", "met"):
        t.add_column(c, justify="right" if c in ("median", "min", "ratio") else "left")
    judged = {row["key"]: row for row in targets}
    for key, f in results.items():
        median = f"[dim]{escape(f['note'])}[/dim]" if f["note"] else _ms(f["median"])
        if not f["ok"]:
            median += " [bold red]WRONG RESULT[/bold red]"
        ratio = f"{f['ratio']:.2f}x {RATIO_TO[key][1]}" if f.get("ratio") else ""
        row = judged.get(key)
        met = "" if row is None else "[dim]n/a[/dim]" if row["met"] is None else \
            "[green]met[/green]" if row["met"] else "[bold red]not met[/bold red]"
        t.add_row(escape(f["title"]), median, _ms(f["min"]), escape(ratio), escape(row["target"]) if row else "", met)
    console.print(t)
    console.print("load/compile/numba rows: time after the import (import hologram, import numba) to the first result")


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    p = argparse.ArgumentParser(description="Whole-process start-up figures of hologram, numpy and numba.")
    p.add_argument("--repeat", type=int, default=7, help="fresh processes per figure (default 7)")
    p.add_argument("--json", metavar="PATH", help="write the raw figures there")
    args = p.parse_args(argv)
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    results = measure(max(1, args.repeat), console)
    targets = []
    for key, (text, value, bound) in TARGETS.items():
        f = results[key]
        ready = f["median"] is not None and results["import_numpy"]["median"] is not None
        v = value(f, results) if ready and (key not in RATIO_TO or f["ratio"]) else None
        targets.append({"key": key, "target": text, "value": v, "met": None if v is None else v <= bound})
    report(console, results, targets, args.repeat)
    if args.json:
        versions = {}
        for dist in ("hologram-kernels", "numpy", "numba", "llvmlite"):
            try:
                versions[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                versions[dist] = None
        raw = {"timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"), "repeat": args.repeat,
               "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(),
                           "python": platform.python_version(), **versions},
               "figures": results, "targets": targets}
        Path(args.json).write_text(json.dumps(raw, indent=2) + "\n", encoding="utf-8")
        print(f"results: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
