"""`hologram bundle`: build, inspect, verify, compare and find bundles (docs/bundles.md).

    hologram bundle build SOURCES... --name NAME --version X.Y.Z -o FILE.hgb [--opt O2] [--jobs N]
    hologram bundle inspect FILE [--kernel K [--emit asm|ir|stats|source]]
    hologram bundle verify FILE
    hologram bundle diff A B
    hologram bundle list [NAME]
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from hologram.bundles.build import build
from hologram.bundles.load import Bundle, discover, library, open_bundle
from hologram.bundles.manifest import Entry, Manifest
from hologram.cli.options import UsageError, add_opt, pipeline_of, rich_console
from hologram.core.errors import BundleError, did_you_mean
from hologram.isa.asm import format_program
from hologram.runtime.lookups import backends


def add_bundle(sub: Any) -> None:
    p = sub.add_parser("bundle", help="build, inspect, verify, compare and find bundles of compiled kernels",
                       description="Bundles: kernels compiled ahead of time into one versioned archive (.hgb), "
                       "loaded with hologram.load_bundle and no compiler work (docs/bundles.md).")
    verbs = p.add_subparsers(title="bundle commands", metavar="COMMAND")

    b = verbs.add_parser("build", help="compile documents (or folders of them) into a bundle",
                         description="Compile kernel documents into a bundle. A folder stands for every document in "
                         "it (every registered extension). Documents compile in worker processes, and only when "
                         "changed since the last build (the build cache).")
    b.add_argument("sources", nargs="+", metavar="SOURCE")
    b.add_argument("--name", required=True, help="the bundle's name (letters, digits, _ . -)")
    b.add_argument("--version", required=True, help="its semantic version, e.g. 1.0.0")
    b.add_argument("-o", "--output", metavar="FILE", help="where to write it (default NAME-VERSION.hgb)")
    b.add_argument("--jobs", type=int, metavar="N", help="worker processes (default: the CPU count)")
    b.add_argument("--no-cache", action="store_true", help="compile every document, ignoring the build cache")
    b.add_argument("--native", default="auto", metavar="auto|none|T1,T2",
                   help="object code to ship, from backends that build it: auto (this architecture's CPU levels, "
                   "e.g. x86-64-v2,x86-64-v3,x86-64-v4), none, or targets by name (host: this machine)")
    add_opt(b)
    b.set_defaults(func=cmd_build)

    i = verbs.add_parser("inspect", help="what a bundle holds, or one kernel's text forms")
    i.add_argument("file", metavar="FILE")
    i.add_argument("--kernel", metavar="NAME", help="one kernel")
    i.add_argument("--emit", choices=("asm", "ir", "stats", "source"), default="stats",
                   help="with --kernel: the form to print (default stats)")
    i.set_defaults(func=cmd_inspect)

    v = verbs.add_parser("verify", help="check every hash, version and program of a bundle; exit 0 only if all hold")
    v.add_argument("file", metavar="FILE")
    v.set_defaults(func=cmd_verify)

    d = verbs.add_parser("diff", help="kernels added, removed and changed between two bundles")
    d.add_argument("old", metavar="A")
    d.add_argument("new", metavar="B")
    d.set_defaults(func=cmd_diff)

    ls = verbs.add_parser("list", help="the bundles load_bundle finds by name (HOLOGRAM_BUNDLE_PATH, plugins)")
    ls.add_argument("name", nargs="?", metavar="NAME")
    ls.set_defaults(func=cmd_list)
    p.set_defaults(func=_no_command)


def _no_command(args: argparse.Namespace) -> int:
    raise UsageError("hologram bundle needs a command: build, inspect, verify, diff or list",
                     hint="hologram bundle --help")


# ------------------------------------------------------------------------------ build
def cmd_build(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table
    from rich.text import Text

    pipeline_of(args)  # a bad --passes or HOLOGRAM_OPT is a usage error, before any compiling
    output = args.output or f"{args.name}-{args.version}.hgb"
    console = rich_console()
    with Progress(TextColumn("compiling"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=console, transient=True) as bar:
        task = bar.add_task("", total=None)

        def progress(done: int, total: int, member: str) -> None:
            bar.update(task, completed=done, total=total, description=member)

        report = build(args.sources, args.name, args.version, output, opt=args.opt, passes=args.passes,
                       jobs=args.jobs, cache_dir=False if args.no_cache else None, progress=progress,
                       native=args.native)
    table = Table(title=f"{args.name} {args.version} ({report.manifest.opt})", title_justify="left")
    noted = any(k.entry.stats.get("notes") for k in report.kernels)  # a column only when a translator noted something
    for col, just in (("kernel", "left"), ("stages", "right"), ("instructions", "right"),
                      ("bytes per launch", "left"), ("native", "left"), ("build", "right"),
                      *((("notes", "left"),) if noted else ())):
        table.add_column(col, justify=just)
    for k in report.kernels:
        s = k.entry.stats
        table.add_row(Text(k.entry.name), str(s["stages"]), f"{s['instructions_before']} → {s['instructions']}",
                      Text(_bytes(s)), Text(_targets(report.manifest, k.entry)), "cached" if k.cached else f"{k.seconds * 1e3:.0f} ms",
                      *((Text(_notes(s)),) if noted else ()))
    console.print(table)
    n = len(report.kernels)
    console.print(Text(f"wrote {output}: {n} kernel{'' if n == 1 else 's'}, {len(report.data):,} bytes, "
                       f"in {report.seconds:.2f} s"))
    return 0


def _targets(m: Manifest, e: Entry) -> str:
    """`cpu_llvm: x86-64-v2, x86-64-v3`: the targets with an object for `e`, by backend."""
    by_backend: dict[str, list[str]] = {}
    for n in m.native:
        if e.name in n.kernels:
            by_backend.setdefault(n.backend, []).append(n.target)
    return "; ".join(f"{b}: {', '.join(ts)}" for b, ts in by_backend.items()) or "-"


def _notes(stats: dict) -> str:
    """`circuit: 4 ops -> 1 op`: what the kernel's translator noted (docs/plugins.md, "Notes")."""
    return "; ".join(f"{label}: {text}" for label, text in stats.get("notes", ()))


def _bytes(stats: dict) -> str:
    moved = f"{stats['bytes_read']} read + {stats['bytes_written']} written"
    return moved if stats.get("bytes_exact", True) else f"≤ {moved}"


# ---------------------------------------------------------------------------- inspect
def cmd_inspect(args: argparse.Namespace) -> int:
    bundle = open_bundle(args.file)
    m = bundle.manifest
    if args.kernel is None:
        from rich.table import Table
        from rich.text import Text

        console = rich_console()
        console.print(Text(f"{m.name} {m.version}: format {m.format}, ISA {m.isa}, built by hologram {m.hologram} "
                           f"(DSL {m.dsl}) at {m.opt}"))
        table = Table(title_justify="left")
        for col in ("kernel", "version", "signature", "stages", "instructions", "native", "source"):
            table.add_column(col, overflow="fold")
        for e in m.kernels:
            table.add_row(Text(e.name), Text(e.version), Text(_signature(e)), str(e.stats.get("stages", "?")),
                          f"{e.stats.get('instructions_before', '?')} → {e.stats.get('instructions', '?')}",
                          Text(_targets(m, e)), Text(e.source))
        console.print(table)
        return 0
    entry = _entry(bundle, args.kernel)
    if args.emit == "asm":
        print(format_program(bundle.program(entry)), end="")
    elif args.emit == "ir":
        print(bundle.ir(entry), end="")
    elif args.emit == "source":
        print(bundle.source(entry), end="")
    else:
        for key, value in entry.stats.items():
            print(f"{key} = {_notes(entry.stats) if key == 'notes' else value}")
    return 0


def _entry(bundle: Bundle, name: str) -> Entry:
    names = [e.name for e in bundle.manifest.kernels]
    if name not in names:
        raise UsageError(f"{bundle.where} has no kernel {name!r}{did_you_mean(name, names)}",
                         hint=f"its kernels: {', '.join(names)}")
    return bundle.manifest.kernel(name)


def _signature(e: Entry) -> str:
    ins = ", ".join(f"{p.name}: {p.type}" for p in e.inputs)
    outs = ", ".join(f"{p.name}: {p.type}" for p in e.outputs)
    return f"({ins}) -> {outs if len(e.outputs) == 1 else f'({outs})'}"


# ----------------------------------------------------------------------------- verify
def cmd_verify(args: argparse.Namespace) -> int:
    bundle = open_bundle(args.file)  # the archive, RECORD, the manifest and its versions
    lib = library(bundle, verify_now=True)  # every hash; every program decoded, held to the manifest, verified
    checked = 0
    for n in bundle.manifest.native:  # indexes and objects agree; objects well formed where the backend is here
        check = getattr(backends().get(n.backend), "check_native", None)
        for kernel in n.kernels:
            code = bundle.native_code(n, kernel)
            if not callable(check):
                continue
            problem = check(lib[kernel].program, code)
            if problem is not None:
                raise BundleError(f"{bundle.where}: {n.object(kernel)}: the {n.backend} object code for {n.target} "
                                  f"is not usable: {problem}")
            checked += 1
    print(f"ok: {bundle.where}: {bundle.manifest.name} {bundle.manifest.version}, {len(lib)} kernels verified"
          + (f", {checked} native objects well formed" if checked else ""))
    return 0


# ------------------------------------------------------------------------------- diff
def cmd_diff(args: argparse.Namespace) -> int:
    old, new = open_bundle(args.old).manifest, open_bundle(args.new).manifest
    before = {e.name: e for e in old.kernels}
    after = {e.name: e for e in new.kernels}
    print(f"{old.name} {old.version} -> {new.name} {new.version}")
    lines = [f"+ {n}{_signature(after[n])}" for n in sorted(after.keys() - before.keys())]
    lines += [f"- {n}{_signature(before[n])}" for n in sorted(before.keys() - after.keys())]
    for n in sorted(before.keys() & after.keys()):
        a, b = before[n], after[n]
        changes = []
        if _signature(a) != _signature(b):
            changes.append(f"signature {_signature(a)} -> {_signature(b)}")
        if a.version != b.version:
            changes.append(f"version {a.version} -> {b.version}")
        if a.program_sha256 != b.program_sha256:
            changes.append(f"program {a.program_sha256[:12]} -> {b.program_sha256[:12]}")
        for key in sorted(set(a.stats) | set(b.stats)):
            if a.stats.get(key) != b.stats.get(key):
                changes.append(f"{key} {a.stats.get(key)} -> {b.stats.get(key)}")
        if changes:
            lines.append(f"~ {n}: " + "; ".join(changes))
    print("\n".join(lines) if lines else "no kernel differs")
    return 0


# ------------------------------------------------------------------------------- list
def cmd_list(args: argparse.Namespace) -> int:
    found = discover(args.name)
    if not found:
        print("no bundles found by name: put NAME-VERSION.hgb files in a folder listed in HOLOGRAM_BUNDLE_PATH, "
              "or install a package that registers its bundles")
        return 0
    width = max(len(f"{f.name} {f.version}") for f in found)
    for f in sorted(found, key=lambda f: (f.name, f.version)):
        pending = ", built at its first load" if f.make is not None and not os.path.exists(f.path) else ""
        print(f"{f.name + ' ' + f.version:<{width}}  {f.path}  ({f.origin}{pending})")
    return 0
