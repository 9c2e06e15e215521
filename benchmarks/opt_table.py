"""What the optimizer buys on the stdlib kernels: O0 vs O2, one row per kernel.

    python benchmarks/opt_table.py [--markdown] [--repeat 7] [--backend cpu_llvm]

Stages, instructions and bytes moved (read + written per launch, docs/passes.md
"Measuring: stats"; `<=` marks an upper bound) come from `Kernel.stats()`. The run
time is the fastest of `--repeat` launches after one warm-up launch (the fastest is the
one least disturbed by other work on the machine), inputs from the same generator as
`hologram run` (seed 0). Sizes: n = 2**20 for vectors; gemm 256^3; matvec and layernorm
1024 x 1024.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

import hologram
from hologram.cli.main import prepare_inputs
from hologram.passes.stats_table import reduction

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = {"gemm": {"m": 256, "k": 256, "n": 256}, "matvec": {"m": 1024, "n": 1024},
         "layernorm": {"m": 1024, "n": 1024}}
DEFAULT = 1 << 20


def _time(kernel: hologram.Kernel, inputs: dict, repeat: int) -> float:
    kernel(**inputs)  # warm-up: prepare (JIT) and first touch
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        kernel(**inputs)
        times.append(time.perf_counter() - t0)
    return min(times)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def rows(backend: str, repeat: int) -> list[list[str]]:
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "kernels", "*.toml"))):
        name = os.path.splitext(os.path.basename(path))[0]
        o0 = hologram.compile_file(path, opt="O0", backend=backend)
        o2 = hologram.compile_file(path, opt="O2", backend=backend)
        symbols = {s: SIZES.get(name, {}).get(s, DEFAULT) for s in o2.signature.symbols}
        inputs, _ = prepare_inputs(o2, {}, symbols, seed=0, cast=False)
        stats = o2.stats(**symbols)
        a, b = stats["O0"], stats["O2"]
        moved = [s.bytes_moved.evaluate({}) for s in (a, b)]
        bound = "" if a.bytes_exact and b.bytes_exact else "<= "
        t0, t2 = _time(o0, inputs, repeat), _time(o2, inputs, repeat)
        size = ", ".join(f"{k}={v}" for k, v in symbols.items())
        out.append([name, size, f"{a.stages} -> {b.stages}", f"{a.instructions} -> {b.instructions}",
                    f"{bound}{moved[0] / 2**20:.3g} -> {moved[1] / 2**20:.3g} MiB ({reduction(*moved)})",
                    f"{_ms(t0)} -> {_ms(t2)}"])
    return out


HEAD = ["kernel", "size", "stages", "instructions", "bytes moved", "time"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="cpu_llvm")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--markdown", action="store_true", help="a markdown table (for docs and notes)")
    args = ap.parse_args(argv)
    table = rows(args.backend, args.repeat)
    if args.markdown:
        print("| " + " | ".join(HEAD) + " |")
        print("|" + "---|" * len(HEAD))
        for r in table:
            print("| " + " | ".join(r) + " |")
        return 0
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"O0 -> O2 on {args.backend}", title_justify="left")
    for h in HEAD:
        t.add_column(h)
    for r in table:
        t.add_row(*r)
    Console(highlight=False).print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
