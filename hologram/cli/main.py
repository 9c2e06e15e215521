"""The `hologram` command, built on the public runtime API.

    hologram run FILE [--kernel K] [--backend B] [--input NAME=x.npy|VALUE ...] [--seed S]
                      [--bind n=1000 ...] [--cast] [--save-dir DIR] [--print] [--opt O2 | --passes a,b]
    hologram compile FILE [--kernel K] [--emit ast|ir|asm|stats|FORM] [--backend B] [--after PASS]
                          [-o OUT] [--opt O0|O1|O2 | --passes a,b,c]
    hologram profile FILE [--kernel K] [--bind n=1000 ...] [--calls N] [--cold] [--trace OUT.json] [run's options]
    hologram plugins
    hologram diff-test [--backends B1,B2] [--examples N] [--seed S] [--kind K] [--out DIR]   (difftest.py)
    hologram conformance --backend NAME [--examples N] [--seed S] [--verbose] [--json]      (conformance.py)
    hologram bench [--quick] [--only NAME,...]                                                (bench.py)

Plugins add subcommands through `hologram_register_commands(cli)`. Every error is one
message on stderr and exit status 1 (2 for usage errors); the traceback is shown only
with HOLOGRAM_DEBUG=1.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import traceback
import warnings
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from hologram import __version__
from hologram.call.args import bind_symbols, check_array, concrete_shape
from hologram.call.kernel import EMITTERS, Kernel, Library, backend_forms, form_choices
from hologram.cli.bench import add_bench
from hologram.cli.bundle import add_bundle
from hologram.cli.conformance import add_conformance
from hologram.cli.difftest import add_difftest
from hologram.cli.fuzz import add_fuzz
from hologram.cli.options import UsageError, add_opt, count_of, pipeline_of, rich_console
from hologram.cli.profile import caller_thread, record, render, summarize
from hologram.compile_api.compile import compile_file_all
from hologram.compiler.signature import Param
from hologram.core.errors import ArgumentError, HologramError, HologramWarning, PluginError, did_you_mean
from hologram.core.types import DType
from hologram.ir import format_kernel
from hologram.passes import manager
from hologram.passes.manager import Pipeline
from hologram.registry import pipelines
from hologram.registry.lookups import backends, get_backend, list_backends, unavailable_reason
from hologram.registry.plugins import PluginWarning, plugin_manager, plugin_report

DEFAULT_SIZE = 16  # a shape symbol that neither --bind nor an --input fixes
PRINT_OPTIONS = dict(threshold=64, edgeitems=4, linewidth=100)


# ---------------------------------------------------------------------------- helpers
def _name_value(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name.strip(), value.strip()


def _seed(text: str) -> int:
    try:
        seed = int(text)
    except ValueError:
        seed = -1
    if seed < 0:
        raise argparse.ArgumentTypeError(f"expected a seed (an integer >= 0), got {text!r}")
    return seed


def _binding(text: str) -> tuple[str, int]:
    name, value = _name_value(text)
    try:
        size = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--bind {name}: expected a size (an integer >= 0), got {value!r}") from None
    if size < 0:
        raise argparse.ArgumentTypeError(f"--bind {name}: expected a size (an integer >= 0), got {size}")
    return name, size


def _pick(lib: Library, name: str | None, file: str) -> Kernel:
    if name is not None:
        return lib[name]
    if len(lib) == 1:
        return next(iter(lib.values()))
    raise UsageError(f"{file} holds {len(lib)} kernels ({', '.join(lib)}); choose one with --kernel")


# -------------------------------------------------------------------------------- run
def _load_input(p: Param, value: str) -> Any:
    """An --input value: a .npy file, or (for a scalar) a number literal."""
    if value.endswith(".npy"):
        try:
            data = np.load(value, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise UsageError(f"--input {p.name}: cannot load {value}: {exc}") from None
        return data
    if p.kind != "scalar":
        raise UsageError(f"--input {p.name}: array input {p.type} needs a .npy file, got {value!r}")
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    for parse in (int, float):
        try:
            return parse(value)
        except ValueError:
            pass
    raise UsageError(f"--input {p.name}: expected a number for {p.type}, got {value!r}")


def random_input(rng: np.random.Generator, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    """Deterministic test data: floats in [-1, 1), integers in [-1000, 1000] clipped to the
    type's range (so u8 covers every byte), bools fair coin flips."""
    if dtype.is_bool:
        return rng.random(shape) < 0.5
    if dtype.is_float:
        return rng.uniform(-1.0, 1.0, shape).astype(dtype.np)
    lo, hi = max(int(dtype.min), -1000), min(int(dtype.max), 1000)
    return rng.integers(lo, hi, size=shape, endpoint=True, dtype=dtype.np)


def prepare_inputs(kernel: Kernel, given: dict[str, str], binds: dict[str, int], seed: int,
                   cast: bool) -> tuple[dict[str, Any], dict[str, int]]:
    """The call's inputs: --input values loaded, the rest generated from the seed, with
    shape symbols taken from --bind, then from the loaded arrays, else DEFAULT_SIZE."""
    sig = kernel.signature
    for name in given:
        if name not in sig.input_names:
            raise UsageError(f"--input {name}: kernel {sig.name!r} has no input {name!r}"
                             f"{did_you_mean(name, sig.input_names)} (inputs: {', '.join(sig.input_names)})")
    for name in binds:
        if name not in sig.symbols:
            have = ", ".join(sig.symbols) or "none"
            raise UsageError(f"--bind {name}: kernel {sig.name!r} has no shape symbol {name!r}"
                             f"{did_you_mean(name, sig.symbols)} (symbols: {have})")
    inputs = {p.name: _load_input(p, given[p.name]) for p in sig.inputs if p.name in given}
    arrays = {p.name: check_array(sig.name, p, inputs[p.name], cast)
              for p in sig.inputs if p.kind != "scalar" and p.name in inputs}
    inputs.update(arrays)
    symbols = bind_symbols(sig.name, sig.inputs, arrays, (), given=binds)
    symbols = {s: symbols.get(s, DEFAULT_SIZE) for s in sig.symbols}  # in declaration order
    generated = [p for p in sig.inputs if p.name not in inputs]
    check_memory(kernel, generated, symbols, set(binds))
    rng = np.random.default_rng(seed)
    for p in generated:
        shape = concrete_shape(sig.name, p, symbols)
        try:
            data = random_input(rng, p.dtype, shape)
        except (MemoryError, ValueError) as exc:  # numpy's "array is too big", or no memory left
            raise ArgumentError(f"cannot generate input {p.name!r} ({p.type}) of shape {shape} at "
                                f"{_bound(symbols, set(binds))}: {type(exc).__name__}: {exc}",
                                hint="choose smaller sizes with --bind") from None
        inputs[p.name] = data[()] if p.kind == "scalar" else data
    return inputs, symbols


def _bound(symbols: dict[str, int], from_bind: set[str]) -> str:
    """`n = 10 (--bind), m = 16`: the sizes, and which the command line gave."""
    return ", ".join(f"{k} = {v}" + (" (--bind)" if k in from_bind else "") for k, v in symbols.items()) \
        or "no shape symbols"


def _physical_memory() -> int | None:
    """This machine's memory in bytes, where the OS says (None on Windows)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _show_bytes(n: int) -> str:
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


def check_memory(kernel: Kernel, generated: Sequence[Param], symbols: dict[str, int], from_bind: set[str],
                 memory: int | None = None) -> None:
    """Refuse, before allocating anything, sizes whose generated inputs and outputs do
    not fit in this machine's memory (`memory` bytes; default: what the OS reports): a
    mistyped --bind is then an ArgumentError naming the sizes, not a MemoryError (or an
    out-of-memory kill of a process that allocated lazily)."""
    memory = _physical_memory() if memory is None else memory
    if memory is None:
        return
    sig = kernel.signature
    arrays = [p for p in (*generated, *sig.outputs) if p.kind != "scalar"]
    sizes = {p.name: math.prod(concrete_shape(sig.name, p, symbols)) * p.dtype.np.itemsize for p in arrays}
    total = sum(sizes.values())
    if total > memory:
        largest = max(arrays, key=lambda p: sizes[p.name])
        raise ArgumentError(f"{sig.name}: at {_bound(symbols, from_bind)} the generated inputs and the outputs take "
                            f"{_show_bytes(total)} ({total} bytes; {largest.name}: {largest.type} alone "
                            f"{_show_bytes(sizes[largest.name])}), more than this machine's "
                            f"{_show_bytes(memory)} of memory",
                            hint="choose smaller sizes with --bind")


def in_cli_terms(exc: ArgumentError) -> ArgumentError:
    """The runtime's hints are written for Python callers: `cast=True` is `--cast` here."""
    if exc.hint and "cast=True" in exc.hint:
        exc.hint = exc.hint.replace("cast=True", "--cast")
        exc.args = (exc.render(),)
    return exc


def cmd_run(args: argparse.Namespace) -> int:
    pipeline_of(args)  # a bad --passes or HOLOGRAM_OPT is a usage error, before any compiling
    lib = compile_file_all(args.file, backend=args.backend, opt=args.opt, passes=args.passes)
    kernel = _pick(lib, args.kernel, args.file)
    try:
        inputs, symbols = prepare_inputs(kernel, dict(args.input), dict(args.bind), args.seed, args.cast)
        result = kernel(**inputs, cast=args.cast)
    except ArgumentError as exc:
        raise in_cli_terms(exc) from None
    names = kernel.signature.output_names
    outputs = list(zip(names, result if len(names) > 1 else (result,)))
    bound = "".join(f", {k} = {v}" for k, v in symbols.items())
    print(f"{kernel.signature}  [backend {kernel.backend.name}{bound}, seed {args.seed}]")
    if args.save_dir:
        os.makedirs(args.save_dir, exist_ok=True)
        for name, value in outputs:
            path = os.path.join(args.save_dir, f"{name}.npy")
            np.save(path, value, allow_pickle=False)
            print(f"saved {name} to {path}")
    if args.print or not args.save_dir:
        with np.printoptions(**PRINT_OPTIONS):
            for name, value in outputs:
                print(f"{name} = {np.array_repr(value)}")
    return 0


# ---------------------------------------------------------------------------- profile
def cmd_profile(args: argparse.Namespace) -> int:
    """Trace compiling, preparing and `--calls` calls of one kernel (cli/profile.py),
    then print where the time went."""
    pipeline_of(args)

    def compile() -> Kernel:
        return _pick(compile_file_all(args.file, backend=args.backend, opt=args.opt, passes=args.passes),
                     args.kernel, args.file)
    try:
        run = record(compile, lambda k: prepare_inputs(k, dict(args.input), dict(args.bind), args.seed, args.cast),
                     args.calls, args.cast, args.trace, args.cold)
    except ArgumentError as exc:
        raise in_cli_terms(exc) from None
    bound = "".join(f", {k} = {v}" for k, v in run.symbols.items())
    title = f"{run.kernel.signature}  [backend {run.kernel.backend.name}{bound}, {args.calls} calls, seed {args.seed}]"
    console = rich_console()
    for part in render(summarize(run.events, caller_thread()), args.calls, title):
        console.print(part)
    if args.trace:
        console.print(f"trace written to {args.trace} (open it in https://ui.perfetto.dev or chrome://tracing)")
    return 0


# ---------------------------------------------------------------------------- compile
def _compile_lib(args: argparse.Namespace) -> tuple[Library, Pipeline]:
    pipeline = pipeline_of(args)
    return compile_file_all(args.file, backend=args.backend, opt=args.opt, passes=args.passes), pipeline


def _check_emit(args: argparse.Namespace) -> None:
    """--emit names a core form, stats, or a text form of the backend (--backend, else the
    default one); anything else is a usage error listing what there is."""
    if args.emit in EMITTERS or args.emit == "stats":
        return
    try:
        backend = get_backend(args.backend)
    except PluginError as exc:
        raise UsageError(f"--emit {args.emit}: {exc.message}", hint=exc.hint) from None
    if args.emit not in backend_forms(backend):
        raise UsageError(f"--emit: no text form {args.emit!r}{form_choices(args.emit, (*EMITTERS, 'stats'), backend)}",
                         hint="another backend may offer more forms: see `hologram plugins`")


def _emit_after(kernel: Kernel, pipeline: Pipeline, kind: str, name: str) -> str:
    """The kernel's IR or program right after pass `name`: for an IR pass, the IR after
    it (and, for asm, that IR lowered, before any ISA pass); for an ISA pass, the IR after
    every IR pass and the program after it."""
    from hologram.dsl.analyze import to_ir
    from hologram.lower.stages import lower

    kir = pipeline.run_ir(to_ir(kernel.kdef), stop_after=name)
    if kind == "ir":
        return format_kernel(kir)
    from hologram.isa.asm import format_program
    return format_program(pipeline.run_isa(lower(kir), stop_after=name))


def _emit_stats(kernel: Kernel) -> str:
    from rich.markup import escape

    from hologram.passes.stats_table import example_sizes, format_stats, render

    # O0, O1, O2 (and "custom" after them, for --passes): the last column is compared to O0,
    # at sizes where no dimension is degenerate (the caption names them); then what the
    # translator noted about the kernel (docs/plugins.md, "Notes")
    table = render(format_stats(kernel.stats(), symbols=example_sizes(kernel.program),
                                title=escape(str(kernel.signature))))
    return table + "".join(f"{label}: {text}\n" for label, text in kernel.kdef.notes)


def cmd_compile(args: argparse.Namespace) -> int:
    if args.after is not None and args.emit not in ("ir", "asm"):
        raise UsageError(f"--after shows the IR or the program after a pass: use it with --emit ir or --emit asm, "
                         f"not --emit {args.emit}")
    _check_emit(args)
    lib, pipeline = _compile_lib(args)
    kernels = [lib[args.kernel]] if args.kernel else list(lib.values())
    if args.after is not None:
        try:
            pipeline.find(args.after)
        except PluginError as exc:
            raise UsageError(f"--after: {exc.message}", hint=exc.hint) from None
        texts = [_emit_after(k, pipeline, args.emit, args.after) for k in kernels]
    elif args.emit == "stats":
        texts = [_emit_stats(k) for k in kernels]
    else:
        texts = [k.emit(args.emit) for k in kernels]
    text = "\n\n".join(t.rstrip("\n") for t in texts) + "\n"
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


# ---------------------------------------------------------------------------- plugins
STATUS_STYLE = {"ok": "green", "failed": "bold red", "disabled": "yellow", "missing": "yellow"}

def first_party_backends(environment: Mapping[str, str] | None = None) -> list[tuple[str, str, str | None]]:
    """The backends `pip install hologram-kernels` brings, read from its own metadata
    (docs/decisions.md, "What `pip install hologram-kernels` brings"): per backend
    distribution it depends on, (backend name: the distribution's name after
    `hologram-backend-`, `-` as `_`; the distribution; the condition under which the
    plain install brings it, when there is one and it does not hold here, or in
    `environment`: marker variables in place of this machine's). A new backend made a
    dependency needs no edit here."""
    from importlib import metadata

    from packaging.requirements import Requirement

    try:
        requires = metadata.requires("hologram-kernels") or []
    except metadata.PackageNotFoundError:
        return []
    found = []
    for requirement in map(Requirement, requires):
        marker = requirement.marker
        if not requirement.name.startswith("hologram-backend-") or (marker is not None and "extra" in str(marker)):
            continue
        where = None if marker is None or marker.evaluate(dict(environment or {})) else str(marker)
        found.append((requirement.name.removeprefix("hologram-backend-").replace("-", "_"), requirement.name, where))
    return found


def _summary(distribution: str) -> str:
    """` (what the installed distribution says it is)`, or ''."""
    from importlib import metadata

    try:
        summary = metadata.metadata(distribution).get("Summary")
    except metadata.PackageNotFoundError:
        return ""
    return f" ({summary})" if summary else ""


def cmd_plugins(args: argparse.Namespace) -> int:
    from rich.table import Table
    from rich.text import Text

    console = rich_console()
    list(backends())  # every backend built first: one that fails to build shows its plugin failed below
    report = plugin_report()
    table = Table(title=f"hologram {__version__} plugins", title_justify="left")
    table.add_column("plugin", no_wrap=True)
    table.add_column("version")
    table.add_column("registered")
    table.add_column("status", overflow="fold")
    for row in report:
        status = Text(row.status, style=STATUS_STYLE.get(row.status, ""))
        if row.error:
            status.append(f": {row.error}", style="")
        added = plugin_manager().commands_of(row.name)  # argparse ran the command hooks: name them
        registered = [f"commands {', '.join(added)}" if r == "commands" and added else r for r in row.registered]
        table.add_row(Text(row.name), Text(row.origin), Text("\n".join(registered) or "-"), status)
    if console.measure(table, options=console.options.update_width(10_000)).maximum > console.width:
        # Too wide for the terminal: wrap the version column between distribution name and
        # version, never inside a name (rich would shrink it like the others and fold
        # `hologram-backend-cpu-llvm` mid-word), and let `registered` and `status` wrap.
        table.columns[1].width = max((len(word) for row in report for word in row.origin.split()), default=1)
    console.print(table)
    _print_passes(console)

    found = backends()
    default = _default_backend_name()
    if found:
        bt = Table(title="backends", title_justify="left")
        for col in ("backend", "priority", "available", "default", "text forms (--emit)"):
            bt.add_column(col)
        ready = set(list_backends())
        for name in list_backends(available_only=False):
            bt.add_row(Text(name), str(found[name].priority), "yes" if name in ready else "no",
                       "*" if name == default else "", Text(", ".join(backend_forms(found[name])) or "-"))
        console.print(bt)
    for line in backend_notes(report, found, default):
        console.print(Text(line))
    return 0


def backend_notes(report: Sequence[Any], found: dict[str, Any], default: str | None) -> list[str]:
    """What runs kernels here, and how to add the first-party backends that are absent."""
    if default is not None:
        notes = [f"kernels run on {default} unless --backend or HOLOGRAM_BACKEND names another backend"]
    elif found:
        notes = ["no installed backend is available on this machine: kernels compile but cannot run"]
    else:
        notes = ["no backend is installed: kernels compile but cannot run"]
    ready = set(list_backends())
    for name, backend in sorted(found.items()):
        why = unavailable_reason(backend) if name not in ready else None
        if why is not None:
            notes.append(f"{name} is not available here: {why}")
    rows = {row.name: row for row in report}
    for name, distribution, where in first_party_backends():
        if name in found:
            continue
        row = rows.get(name)
        if row is not None and row.status == "disabled":
            notes.append(f"{name}{_summary(distribution)} is installed but left out by HOLOGRAM_PLUGINS")
        elif row is not None and row.status == "failed":
            notes.append(f"{name}{_summary(distribution)} is installed but failed to load (its row above says why); "
                         f"reinstall: pip install --force-reinstall {distribution}")
        elif where is not None:
            notes.append(f"{name} is not installed: the plain install brings {distribution} only where {where}; "
                         f"elsewhere pip install {distribution} builds its dependencies")
        else:
            notes.append(f"{name} is not installed: pip install {distribution}")
    return notes


def _print_passes(console: Any) -> None:
    """The registered passes in run order (IR, then ISA), with the pipelines that run them."""
    from rich.table import Table
    from rich.text import Text

    found = pipelines.registered()
    if not found:
        console.print("no optimizer passes registered")
        return
    try:
        ordered = manager.order(found)
    except PluginError as exc:  # a cycle: list them as registered, and say why no pipeline can run
        ordered = found
        console.print(Text(f"passes cannot be ordered: {exc.message}", style="bold red"))
    pt = Table(title="passes (in run order)", title_justify="left")
    for col in ("pass", "level", "pipelines", "summary"):
        pt.add_column(col, overflow="fold")
    for p in ordered:
        pt.add_row(Text(p.name), p.level, ", ".join(p.pipelines) or "by name only", Text(p.summary))
    console.print(pt)


def _default_backend_name() -> str | None:
    try:
        return get_backend().name
    except HologramError:
        return None


# ------------------------------------------------------------------------------ parser
def _add_run(sub: Any) -> None:
    p = sub.add_parser("run", help="compile a kernel file and run one kernel on generated or given inputs",
                       description="Compile FILE and run one of its kernels. Inputs come from --input, or are "
                       "generated from --seed; shape symbols from --bind, the given inputs, or "
                       f"{DEFAULT_SIZE}.")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--kernel", metavar="NAME", help="which kernel, when FILE holds several")
    p.add_argument("--backend", metavar="NAME", help="run on this backend (default: HOLOGRAM_BACKEND or the best)")
    p.add_argument("--input", metavar="NAME=PATH.npy|VALUE", type=_name_value, action="append", default=[],
                   help="an input from a .npy file (or a number, for a scalar); repeatable")
    p.add_argument("--seed", type=_seed, default=0, help="seed for generated inputs, an integer >= 0 (default 0)")
    p.add_argument("--bind", metavar="SYMBOL=SIZE", type=_binding, action="append", default=[],
                   help="a shape symbol's value; repeatable")
    p.add_argument("--cast", action="store_true", help="convert inputs to the declared dtypes (one copy)")
    p.add_argument("--save-dir", metavar="DIR", help="save each output as DIR/NAME.npy")
    p.add_argument("--print", action="store_true", help="print the outputs also when saving them")
    add_opt(p)
    p.set_defaults(func=cmd_run)


def _add_profile(sub: Any) -> None:
    p = sub.add_parser("profile", help="run a kernel a few times and show where the time went",
                       description="Compile FILE, run one of its kernels --calls times on inputs generated as `run` "
                       "makes them (sizes from --bind), and print the compile phases and launch stages with their "
                       "times and shares, from the spans of a trace (docs/tracing.md).")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--kernel", metavar="NAME", help="which kernel, when FILE holds several")
    p.add_argument("--backend", metavar="NAME", help="run on this backend (default: HOLOGRAM_BACKEND or the best)")
    p.add_argument("--bind", metavar="SYMBOL=SIZE", type=_binding, action="append", default=[],
                   help=f"a shape symbol's value; repeatable (default {DEFAULT_SIZE})")
    p.add_argument("--input", metavar="NAME=PATH.npy|VALUE", type=_name_value, action="append", default=[],
                   help="an input from a .npy file (or a number, for a scalar); repeatable")
    p.add_argument("--seed", type=_seed, default=0, help="seed for generated inputs, an integer >= 0 (default 0)")
    p.add_argument("--cast", action="store_true", help="convert inputs to the declared dtypes (one copy)")
    p.add_argument("--calls", type=count_of("calls"), default=10, metavar="N",
                   help="calls to make, the first allocating the outputs (default 10)")
    p.add_argument("--cold", action="store_true",
                   help="compile native code afresh (a temporary disk cache), so the JIT's phases show")
    p.add_argument("--trace", metavar="OUT.json", help="also write the trace there (Chrome Trace Event JSON)")
    add_opt(p)
    p.set_defaults(func=cmd_profile)


def _add_compile(sub: Any) -> None:
    p = sub.add_parser("compile", help="compile a kernel file and print a stage's text form",
                       description="Compile FILE and print the text of its kernels at one pipeline stage.")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--kernel", metavar="NAME", help="only this kernel (default: all of FILE's)")
    p.add_argument("--emit", metavar="FORM", default="asm",
                   help="which text form: ast, ir, asm (the default), stats (the table of what the passes "
                        "saved, O0 -> O2), or a form of the backend (cpu_llvm: llvm, llvm-opt, native)")
    p.add_argument("--backend", metavar="NAME",
                   help="the backend whose text form --emit names (default: HOLOGRAM_BACKEND or the best)")
    p.add_argument("--after", metavar="PASS", help="with --emit ir|asm: the kernel right after this pass")
    p.add_argument("-o", "--output", metavar="OUT", help="write to OUT instead of stdout")
    add_opt(p)
    p.set_defaults(func=cmd_compile)


def _add_plugins(sub: Any) -> None:
    p = sub.add_parser("plugins", help="list installed plugins, what they registered, and the backends")
    p.set_defaults(func=cmd_plugins)


BUILTIN_COMMANDS: tuple[Callable[[Any], None], ...] = (_add_run, _add_compile, _add_plugins, add_bundle, add_difftest,
                                                      add_conformance, add_fuzz, add_bench, _add_profile)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hologram", description="Compile and run Hologram kernels.")
    parser.add_argument("--version", action="version", version=f"hologram {__version__}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")
    for add in BUILTIN_COMMANDS:
        add(sub)
    plugin_manager().call_commands(sub)
    return parser


# -------------------------------------------------------------------------------- main
def _show_warning(message: Any, category: type, *_: Any, **__: Any) -> None:
    if isinstance(message, HologramWarning) and message.span is not None:
        # it reads `file:line:col: warning: ...` already, as an error with a span does
        print(message.render(), file=sys.stderr)
        return
    text = str(message).removeprefix("hologram: ")
    print(f"hologram: warning: {text}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `hologram` command; returns the exit status (0 ok, 1 error, 2 usage)."""
    debug = os.environ.get("HOLOGRAM_DEBUG", "") not in ("", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("always", PluginWarning)
        warnings.showwarning = _show_warning
        try:
            parser = build_parser()
            try:
                args = parser.parse_args(argv)
            except SystemExit as exc:  # --help, --version (0) and usage errors (2)
                return exc.code if isinstance(exc.code, int) else 2
            if getattr(args, "func", None) is None:
                parser.print_usage(sys.stderr)
                print("hologram: error: a command is required", file=sys.stderr)
                return 2
            return int(args.func(args) or 0)
        except HologramError as exc:
            if debug:
                traceback.print_exc()
            # with a span the message already reads `file:line:col: error: ...`, as a compiler's
            prefix = "" if exc.span is not None else "hologram: error: "
            print(prefix + exc.render(), file=sys.stderr)
            return 2 if isinstance(exc, UsageError) else 1
        except BrokenPipeError:  # `hologram compile ... | head`: the reader has seen enough
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
        except KeyboardInterrupt:
            print("hologram: interrupted", file=sys.stderr)
            return 130
        except OSError as exc:
            if debug:
                traceback.print_exc()
            where = f"{exc.filename}: " if exc.filename else ""
            print(f"hologram: error: {where}{exc.strerror or exc}", file=sys.stderr)
            return 1
        except Exception as exc:
            if debug:
                traceback.print_exc()
            print(f"hologram: internal error: {type(exc).__name__}: {exc}\n"
                  "  hint: set HOLOGRAM_DEBUG=1 for the traceback, and please report it", file=sys.stderr)
            return 1
