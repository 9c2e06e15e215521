#!/usr/bin/env python
"""How long reading a kernel document takes: every `kernels/*.toml` through the TOML
translator (the reader and the schema, up to the `KernelDef`s; the body is not parsed),
in one warm process, the median of `--repeat` rounds per document.

    python benchmarks/documents.py [--repeat N] [--json PATH]

Also times the stdlib's `tomllib.loads` of the same text, for scale (it gives values
without positions, so it is only a part of what the translator needs). Run the same
script against two checkouts (PYTHONPATH=OTHER_CHECKOUT) to compare them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tomllib
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
KERNELS = sorted((ROOT / "kernels").glob("*.toml"))


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Time reading kernels/*.toml into KernelDefs.")
    p.add_argument("--repeat", type=int, default=200, help="rounds per document (default 200)")
    p.add_argument("--json", metavar="PATH", help="write the figures there")
    args = p.parse_args(argv)
    from hologram.dsl.translators import parse_toml

    texts = {path.name: path.read_text(encoding="utf-8") for path in KERNELS}
    rows = {}
    for name, text in texts.items():
        parse_toml(text, name)  # warm: imports, the schema's caches
        rows[name] = {"translator": median_seconds(lambda: parse_toml(text, name), args.repeat),
                      "tomllib": median_seconds(lambda: tomllib.loads(text), args.repeat)}
    total = {k: sum(r[k] for r in rows.values()) for k in ("translator", "tomllib")}
    import hologram

    print(f"{'document':24} {'translator':>12} {'tomllib':>10}   ({hologram.__file__})")
    for name, r in rows.items():
        print(f"{name:24} {r['translator'] * 1e6:10.0f} us {r['tomllib'] * 1e6:8.0f} us")
    print(f"{'all ' + str(len(rows)):24} {total['translator'] * 1e6:10.0f} us {total['tomllib'] * 1e6:8.0f} us")
    if args.json:
        Path(args.json).write_text(json.dumps({"documents": rows, "total": total}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
