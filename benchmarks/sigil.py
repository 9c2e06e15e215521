"""Sigil circuits: a compiled circuit beside the plugin's numpy model of it, on the
96 x 3072 class buffer (docs/sigil.md, "What a circuit compiles to").

    python benchmarks/sigil.py                  # the default backend, 200 repeats
    python benchmarks/sigil.py --backend interp --repeat 3

Each row: the circuit's size before and after canonicalization, the stages of its
kernel, the kernel's best and median time per call (output preallocated), the numpy
model's, and the first call's time (compile, verify, JIT). Needs hologram-translator-sigil.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import hologram
from hologram_sigil import canonicalize, compile_circuit, parse, run_model

CIRCUITS = {
    "seeds' example": "copy@c05->c06 . mark@c21 . copy@c05->c06 . mark@c21",
    "vector add": "merge_add@c00[c01,c02]",
    "softmax": "reduce_max@c00->c01 . split_sub@c02[c00,c01] . merge_exp@c02[c02] . reduce_sum@c02->c04 . "
               "split_div@c03[c02,c04]",
    "every generator": "merge_add@c00[c01,c02] . merge_mul@c03[c01,c02] . merge_min@c04[c01,c02] . "
                       "merge_max@c05[c01,c02] . merge_abs@c06[c01] . merge_neg@c07[c01] . merge_exp@c08[c01] . "
                       "merge_log@c09[c01] . merge_sqrt@c10[c01] . merge_sigmoid@c11[c01] . merge_tanh@c12[c01] . "
                       "merge_relu@c13[c01] . split_sub@c14[c01,c02] . split_div@c15[c01,c02] . "
                       "reduce_sum@c01->c16 . reduce_prod@c01->c17 . reduce_min@c01->c18 . reduce_max@c01->c19 . "
                       "reduce_mean@c01->c20 . mark@c21 . copy@c22->c23 . swap@c24<->c25 . quote@c26 . mark@c26 . "
                       "copy@c26->c27 . evaluate@c26",
}


def timed(f, repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default=None, help="a backend name (default: the best available)")
    ap.add_argument("--repeat", type=int, default=200, help="timed calls per row (default 200)")
    args = ap.parse_args()
    backend = hologram.get_backend(args.backend).name
    x = np.random.default_rng(0).standard_normal((96, 3072)).astype(np.float32)
    y = np.empty_like(x)
    print(f"backend {backend}, {args.repeat} calls each; times in ms (best / median)")
    print(f"{'circuit':<16} {'ops':>8} {'stages':>6} {'kernel':>16} {'numpy model':>16} {'first call':>10}")
    for name, text in CIRCUITS.items():
        node = parse(text)
        report = canonicalize(node)[1]
        start = time.perf_counter()
        k = compile_circuit(text, backend=backend)
        k(x, out=(y,))
        first = time.perf_counter() - start
        kb, km = timed(lambda: k(x, out=(y,)), args.repeat)
        mb, mm = timed(lambda: run_model(node, x), args.repeat)
        ops = f"{report.before}->{report.after}"
        print(f"{name:<16} {ops:>8} {len(k.program.stages):>6} {kb * 1e3:>7.3f} / {km * 1e3:<6.3f} "
              f"{mb * 1e3:>7.3f} / {mm * 1e3:<6.3f} {first * 1e3:>8.0f}")


if __name__ == "__main__":
    main()
