"""`hologram bundle`: build, inspect, verify, compare and find bundles (docs/bundles.md).

    hologram bundle build SOURCES... --name NAME --version X.Y.Z -o FILE.hgb [--opt O2] [--jobs N] [--json]
    hologram bundle inspect FILE [--kernel K [--emit asm|ir|stats|source]] [--json]
    hologram bundle verify FILE [--json]
    hologram bundle diff A B [--json]
    hologram bundle list [NAME] [--json]

Tables are rich tables on a terminal and tab-separated rows elsewhere (hologram.cli.tables);
`--json` prints the same facts as JSON.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from hologram.bundles.build import build
from hologram.bundles.load import Bundle, discover, library, open_bundle
from hologram.bundles.manifest import Entry, Manifest
from hologram.cli.options import UsageError, add_opt, pipeline_of, rich_console
from hologram.cli.tables import print_json, print_table
from hologram.core.errors import BundleError, did_you_mean
from hologram.isa.asm import format_program
from hologram.registry.lookups import backends


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
                   help="object code to ship, from installed backends that build it: auto (every target but host: "
                   "this architecture's CPU levels, e.g. x86-64-v2,x86-64-v3,x86-64-v4; wgsl; cuda:sm_80,cuda:sm_90), "
                   "none, or targets by name, each TARGET or BACKEND:TARGET (host: this machine)")
    add_opt(b)
    _add_json(b, "the bundle written and each kernel's row")
    b.set_defaults(func=cmd_build)

    i = verbs.add_parser("inspect", help="what a bundle holds, or one kernel's text forms")
    i.add_argument("file", metavar="FILE")
    i.add_argument("--kernel", metavar="NAME", help="one kernel")
    i.add_argument("--emit", choices=("asm", "ir", "stats", "source"),
                   help="with --kernel: the form to print (default stats)")
    _add_json(i, "the manifest (with --kernel: that kernel's entry)")
    i.set_defaults(func=cmd_inspect)

    v = verbs.add_parser("verify", help="check every hash, version and program of a bundle; exit 0 only if all hold")
    v.add_argument("file", metavar="FILE")
    _add_json(v, "what was verified")
    v.set_defaults(func=cmd_verify)

    d = verbs.add_parser("diff", help="kernels added, removed and changed between two bundles")
    d.add_argument("old", metavar="A")
    d.add_argument("new", metavar="B")
    _add_json(d, "the kernels added, removed and changed")
    d.set_defaults(func=cmd_diff)

    ls = verbs.add_parser("list", help="the bundles load_bundle finds by name (HOLOGRAM_BUNDLE_PATH, plugins)")
    ls.add_argument("name", nargs="?", metavar="NAME")
    _add_json(ls, "the bundles found")
    ls.set_defaults(func=cmd_list)
    p.set_defaults(func=_no_command)


def _add_json(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--json", action="store_true", help=f"print {what} as JSON, for scripts")


def _no_command(args: argparse.Namespace) -> int:
    raise UsageError("hologram bundle needs a command: build, inspect, verify, diff or list",
                     hint="hologram bundle --help")


# ------------------------------------------------------------------------------ build
def cmd_build(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.text import Text

    pipeline_of(args)  # a bad --passes or HOLOGRAM_OPT is a usage error, before any compiling
    output = args.output or f"{args.name}-{args.version}.hgb"
    # the bar goes to stderr, and only to a terminal: elsewhere a live display leaves a blank
    # line (it cannot erase itself) before whatever follows, such as a compile error
    status = Console(stderr=True, highlight=False)
    with Progress(TextColumn("compiling"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=status, transient=True,
                  disable=not status.is_terminal) as bar:
        task = bar.add_task("", total=None)

        def progress(done: int, total: int, member: str) -> None:
            bar.update(task, completed=done, total=total, description=member)

        report = build(args.sources, args.name, args.version, output, opt=args.opt, passes=args.passes,
                       jobs=args.jobs, cache_dir=False if args.no_cache else None, progress=progress,
                       native=args.native)
    n = len(report.kernels)
    if args.json:
        print_json({"output": output, "name": args.name, "version": args.version, "opt": report.manifest.opt,
                    "bytes": len(report.data), "seconds": report.seconds,
                    "kernels": [{"name": k.entry.name, **dict(k.entry.stats), "native": _target_list(report.manifest,
                                                                                                       k.entry),
                                 "cached": k.cached, "seconds": k.seconds} for k in report.kernels]})
        return 0
    noted = any(k.entry.stats.get("notes") for k in report.kernels)  # a column only when a translator noted something
    columns = [("kernel", "left"), ("stages", "right"), ("instructions", "right"), ("bytes per launch", "left"),
               ("native", "left"), ("build", "right"), *((("notes", "left"),) if noted else ())]
    rows = [[k.entry.name, str(k.entry.stats["stages"]),
             f"{k.entry.stats['instructions_before']} → {k.entry.stats['instructions']}", _bytes(k.entry.stats),
             _targets(report.manifest, k.entry), "cached" if k.cached else f"{k.seconds * 1e3:.0f} ms",
             *((_notes(k.entry.stats),) if noted else ())] for k in report.kernels]
    console = rich_console()
    print_table(console, columns, rows, title=f"{args.name} {args.version} ({report.manifest.opt})")
    console.print(Text(f"wrote {output}: {n} kernel{'' if n == 1 else 's'}, {len(report.data):,} bytes, "
                       f"in {report.seconds:.2f} s"))
    return 0


def _targets(m: Manifest, e: Entry) -> str:
    """`cpu_llvm: x86-64-v2, x86-64-v3`: the targets with an object for `e`, by backend."""
    by_backend: dict[str, list[str]] = {}
    for backend, target in _target_list(m, e):
        by_backend.setdefault(backend, []).append(target)
    return "; ".join(f"{b}: {', '.join(ts)}" for b, ts in by_backend.items()) or "-"


def _target_list(m: Manifest, e: Entry) -> list[tuple[str, str]]:
    """(backend, target) of each object `e` has."""
    return [(n.backend, n.target) for n in m.native if e.name in n.kernels]


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
    if args.json and args.emit is not None:
        raise UsageError("--json prints a kernel's manifest entry; --emit prints one of its text forms",
                         hint="drop one of them")
    if args.kernel is None:
        if args.emit is not None:
            raise UsageError("--emit needs --kernel: it prints one kernel's text form")
        if args.json:
            print_json(_manifest_json(m))
            return 0
        from rich.text import Text

        console = rich_console()
        console.print(Text(f"{m.name} {m.version}: format {m.format}, ISA {m.isa}, built by hologram {m.hologram} "
                           f"(DSL {m.dsl}) at {m.opt}"))
        columns = [(c, "left") for c in ("kernel", "version", "signature", "stages", "instructions", "native",
                                         "source")]
        rows = [[e.name, e.version, _signature(e), str(e.stats.get("stages", "?")),
                 f"{e.stats.get('instructions_before', '?')} → {e.stats.get('instructions', '?')}", _targets(m, e),
                 e.source] for e in m.kernels]
        print_table(console, columns, rows)
        return 0
    entry = _entry(bundle, args.kernel)
    if args.json:
        print_json(_entry_json(m, entry))
    elif args.emit == "asm":
        print(format_program(bundle.program(entry)), end="")
    elif args.emit == "ir":
        print(bundle.ir(entry), end="")
    elif args.emit == "source":
        print(bundle.source(entry), end="")
    else:
        for key, value in entry.stats.items():
            print(f"{key} = {_notes(entry.stats) if key == 'notes' else value}")
    return 0


def _manifest_json(m: Manifest) -> dict:
    return {"name": m.name, "version": m.version, "format": m.format, "isa": m.isa, "hologram": m.hologram,
            "dsl": m.dsl, "opt": m.opt, "kernels": [_entry_json(m, e) for e in m.kernels],
            "native": [{"backend": n.backend, "target": n.target, "triple": n.triple, "cpu": n.cpu,
                        "features": list(n.features), "toolchain": n.toolchain, "kernels": list(n.kernels)}
                       for n in m.native]}


def _entry_json(m: Manifest, e: Entry) -> dict:
    return {"name": e.name, "version": e.version, "summary": e.summary, "source": e.source,
            "program_sha256": e.program_sha256, "symbols": list(e.symbols),
            "inputs": [{"name": p.name, "type": p.type, "kind": p.kind} for p in e.inputs],
            "outputs": [{"name": p.name, "type": p.type} for p in e.outputs],
            "reductions": [{"kind": kind, "axes": [list(a) for a in axes]} for kind, axes in e.reductions],
            "stats": dict(e.stats), "native": [list(t) for t in _target_list(m, e)]}


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
        backend = backends().get(n.backend)
        for kernel in n.kernels:
            code = bundle.native_code(n, kernel)
            if backend is None:
                continue
            problem = backend.check_native(lib[kernel].program, code)
            if problem is not None:
                raise BundleError(f"{bundle.where}: {n.object(kernel)}: the {n.backend} object code for {n.target} "
                                  f"is not usable: {problem}")
            checked += 1
    m = bundle.manifest
    if args.json:
        print_json({"ok": True, "path": bundle.where, "name": m.name, "version": m.version, "kernels": len(lib),
                    "native_objects_checked": checked})
        return 0
    print(f"ok: {bundle.where}: {m.name} {m.version}, {len(lib)} kernels verified"
          + (f", {checked} native objects well formed" if checked else ""))
    return 0


# ------------------------------------------------------------------------------- diff
def cmd_diff(args: argparse.Namespace) -> int:
    old, new = open_bundle(args.old).manifest, open_bundle(args.new).manifest
    before = {e.name: e for e in old.kernels}
    after = {e.name: e for e in new.kernels}
    changed: dict[str, dict[str, list]] = {}
    for n in sorted(before.keys() & after.keys()):
        a, b = before[n], after[n]
        changes = {"signature": [_signature(a), _signature(b)], "version": [a.version, b.version],
                   "program": [a.program_sha256, b.program_sha256],
                   **{key: [a.stats.get(key), b.stats.get(key)] for key in sorted(set(a.stats) | set(b.stats))}}
        changes = {k: v for k, v in changes.items() if v[0] != v[1]}
        if changes:
            changed[n] = changes
    added, removed = sorted(after.keys() - before.keys()), sorted(before.keys() - after.keys())
    if args.json:
        print_json({"old": {"name": old.name, "version": old.version}, "new": {"name": new.name, "version": new.version},
                    "added": {n: _signature(after[n]) for n in added},
                    "removed": {n: _signature(before[n]) for n in removed}, "changed": changed})
        return 0
    print(f"{old.name} {old.version} -> {new.name} {new.version}")
    lines = [f"+ {n}{_signature(after[n])}" for n in added] + [f"- {n}{_signature(before[n])}" for n in removed]
    for n, changes in changed.items():
        lines.append(f"~ {n}: " + "; ".join(f"{key} {a[:12] if key == 'program' else a} -> "
                                            f"{b[:12] if key == 'program' else b}" for key, (a, b) in changes.items()))
    print("\n".join(lines) if lines else "no kernel differs")
    return 0


# ------------------------------------------------------------------------------- list
def cmd_list(args: argparse.Namespace) -> int:
    found = sorted(discover(args.name), key=lambda f: (f.name, f.version))
    if args.json:
        print_json([{"name": f.name, "version": f.version, "path": f.path, "origin": f.origin,
                     "trusted": f.trusted, "built": f.make is None or os.path.exists(f.path)} for f in found])
        return 0
    if not found:
        print("no bundles found by name: put NAME-VERSION.hgb files in a folder listed in HOLOGRAM_BUNDLE_PATH, "
              "or install a package that registers its bundles")
        return 0
    width = max(len(f"{f.name} {f.version}") for f in found)
    for f in found:
        pending = ", built at its first load" if f.make is not None and not os.path.exists(f.path) else ""
        print(f"{f.name + ' ' + f.version:<{width}}  {f.path}  ({f.origin}{pending})")
    return 0
