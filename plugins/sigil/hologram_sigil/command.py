"""`hologram sigil CIRCUIT`: a circuit's canonical form and what canonicalization did.

    $ hologram sigil "copy@c05->c06 . mark@c21 . copy@c05->c06 . mark@c21"
    circuit    copy@c05->c06 . mark@c21 . copy@c05->c06 . mark@c21
    canonical  copy@c05->c06
               4 ops -> 1 op (75% reduction); rules: involution 1, idempotent copy 1

CIRCUIT is circuit text, or a `.sigil` file (every kernel in it). `--body` also prints
the kernel body the canonical circuit compiles to.
"""

from __future__ import annotations

import argparse
import os
from typing import Any


def add_command(cli: Any) -> None:
    p = cli.add_parser("sigil", help="show a sigil circuit's canonical form (docs/sigil.md)",
                       description="Canonicalize a sigil circuit (text, or a .sigil file) and show what it took.")
    p.add_argument("circuit", help="circuit text such as 'copy@c05->c06 . mark@c21', or a .sigil file")
    p.add_argument("--body", action="store_true", help="also print the kernel body the circuit compiles to")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hologram_sigil.canon import canonicalize
    from hologram_sigil.circuit import WIDTH, format_circuit
    from hologram_sigil.lower import lower
    from hologram_sigil.syntax import parse_circuit, parse_file
    from hologram_sigil.translator import own_origin

    source = args.circuit
    if source.lower().endswith(".sigil") and os.path.isfile(source):
        from hologram.translator import DocumentError

        try:
            with open(source, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise DocumentError(f"cannot read {source}: {exc}") from None
        circuits = [(k.name or os.path.basename(source), k.circuit) for k in parse_file(text, own_origin(text, source))]
    else:
        circuits = [(None, parse_circuit(source, own_origin(source, "<circuit>")))]
    for n, (name, node) in enumerate(circuits):
        canonical, report = canonicalize(node)
        if n:
            print()
        if name is not None:
            print(f"kernel     {name}")
        print(f"circuit    {format_circuit(node)}")
        print(f"canonical  {format_circuit(canonical)}")
        print(f"           {report.note()}; rules: {report.fired()}")
        if args.body:
            print("body")
            print("".join(f"    {line}\n" for line in lower(canonical, WIDTH).text.splitlines()), end="")
    return 0
