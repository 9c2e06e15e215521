"""Compile and verify times of the inputs that once took seconds to minutes (issue 11,
item 7; docs/hasm.md and docs/dsl.md, "Limits"). Prints CPU and wall time per size and
what happened (compiled, verified, or the limit's error).

    python benchmarks/pathological.py rank 4 8 12 16     # y = x + 1 on a rank-r array
    python benchmarks/pathological.py nest 25 50 100 200 # verify LOOPs nested d deep
    python benchmarks/pathological.py chain 500 1000 3000   # t_k = t_(k-1) + 1, k statements
    python benchmarks/pathological.py reversed 200 1000     # t_k[i] = t_(k-1)[n - 1 - i] + x[i]
"""

from __future__ import annotations

import sys
import time
from typing import Callable

import hologram
from hologram.core.errors import HologramError
from hologram.isa.asm import parse_program
from hologram.verify.verifier import verify


def _kernel(name: str, body: str, inputs: str = 'x = "f32[n]"', outputs: str = 'y = "f32[n]"') -> str:
    return (f'[kernel]\nname = "{name}"\nversion = "1.0.0"\ninputs = {{ {inputs} }}\n'
            f'outputs = {{ {outputs} }}\nbody = """\n{body}\n"""\n')


def rank(r: int) -> Callable[[], object]:
    dims = ", ".join(f"d{k}" for k in range(r))
    text = _kernel(f"rank{r}", "y = x + 1", f'x = "f32[{dims}]"', f'y = "f32[{dims}]"')
    return lambda: hologram.compile(text, file=f"rank{r}.toml")


def chain(n: int) -> Callable[[], object]:
    lines = ["t0 = x + 1"] + [f"t{k} = t{k - 1} + 1" for k in range(1, n)] + [f"y = t{n - 1} + 1"]
    text = _kernel(f"chain{n}", "\n".join(lines))
    return lambda: hologram.compile(text, file=f"chain{n}.toml")


def reversed_chain(n: int) -> Callable[[], object]:
    lines = ["t0[i] = x[n - 1 - i] + x[i]"] + [f"t{k}[i] = t{k - 1}[n - 1 - i] + x[i]" for k in range(1, n)]
    text = _kernel(f"reversed{n}", "\n".join(lines + [f"y = t{n - 1} + 1"]))
    return lambda: hologram.compile(text, file=f"reversed{n}.toml")


def nest(depth: int) -> Callable[[], object]:
    lines = [".program nest", ".isa 1", ".symbols n", ".param out y: f32[n]", ".stage y domain [n] block [1]",
             f"    .reg {', '.join(f'%c{k}' for k in range(depth))}, %i: i64", "    .reg %f: f32"]
    for k in range(depth):
        lines += [f"    MOV_IMM.i64 %c{k}, 2", f"h{k}:"]
    lines += [f"    LOOP %c{k}, h{k}" for k in reversed(range(depth))]
    lines += ["    MOV.i64 %i, %gid.x", "    MOV_IMM.f32 %f, 1.0", "    STG.f32 [y + %i], %f", "    EXIT"]
    program = parse_program("\n".join(lines) + "\n")
    return lambda: verify(program)


CASES = {"rank": rank, "nest": nest, "chain": chain, "reversed": reversed_chain}


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] not in CASES:
        raise SystemExit(__doc__)
    hologram.compile(_kernel("warm", "y = x + 1"))  # imports and plugin loading, not measured
    for size in map(int, argv[1:]):
        run = CASES[argv[0]](size)
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            run()
            outcome = "ok"
        except HologramError as exc:
            outcome = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        print(f"{argv[0]} {size}: {time.process_time() - cpu:.2f} s CPU, {time.perf_counter() - wall:.2f} s wall, "
              f"{outcome}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
