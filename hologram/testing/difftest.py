"""The differential harness: generated kernels and programs, every backend, one verdict.

    report = run_difftest(["interp", "cpu_llvm"], examples=200, seed=1, opts=("O0", "O2"))
    report.ok, report.rows, report.reproducers

Two kinds of examples, each run as hypothesis tests:

- `kernels`: generated kernel documents (`hologram.testing.cases.kernels`, one in
  four a long reduction, `hologram.testing.long_cases`, and about one in eight written
  in what an installed translator plugin adds, `hologram.testing.plugin_cases`: the
  sigil plugin's circuits, say) run through the public API on
  every backend and held to the numpy oracle under the accuracy contract
  (`check_case`). Each backend is judged on its own, so one backend is enough. The
  reference interpreter runs ~1e5 lanes a second: a case whose inputs hold more than
  `INTERP_MAX_ELEMENTS` elements (a 2**24-term f32 reduction) is not run on it, nor on
  any backend declaring a smaller `max_test_elements` (`max_elements`), so their rows
  count fewer examples.
- `programs`: generated verified Atlas programs (`hologram.testing.isa_strategies`) run
  on the reference interpreter (the original program) and on every backend (the program
  after a `.hasm` text and a binary round trip, so a lone `interp` still tests something:
  both serializations and the interpreter's determinism). Outputs are compared per
  buffer at the precision the program's dataflow pins down (`precision`): bitwise where
  only exact instructions contributed, within 4 ULP where one approximated instruction
  (a transcendental) fed the buffer directly, and not at all where approximations were
  composed or reordered (composed error is what the `kernels` oracle bounds soundly).

Every example also runs at every optimization level in `opts` (default O0 and O2, see
docs/passes.md): a kernel is compiled with that pipeline; a program goes through that
pipeline's ISA passes before the tested backend runs it (the reference still runs the
program as drawn), so an optimizer pass that changes a result fails on every backend at
its level while the other level passes: the report says which level disagreed.

Every example runs on every (level, backend) first (counting passes and failures); then,
for each that failed, hypothesis replays the same seed with that one's check raising,
shrinks to a minimal example, and the example is written as a reproducer: a `.toml`
kernel document (a `.py` module for a kernel drawn as a Python function,
`hologram.testing.python_cases`) or a `.hasm` program, with the inputs (and, for kernels, the oracle's
answer with its tolerances) in a `.npz` beside it. `replay(path)` runs a reproducer again;
the CLI spells that `hologram diff-test --replay PATH`. A kernel file (or `.hasm`
program) with no `.npz` beside it, such as a user's own, is replayed on inputs drawn
from its signature at a fixed seed and held to the reference interpreter
(`difftest_checks.check_file_case`).

A backend that runs part of the ISA declares what it runs (`Backend.capabilities`,
docs/backends.md); a program needing anything else is refused before its `prepare` is
called (as its own `prepare` may still refuse one with `UnsupportedProgram`): such an
example is *not covered* by it, counted in `Outcome.not_covered` with the first
refusal's reason, never a failure (`NotCovered`).
"""

from __future__ import annotations

import hashlib
import os
import random
from typing import Any, Callable, Iterable, Mapping, Sequence

import attrs
import numpy as np
from hypothesis import HealthCheck, Phase, Verbosity, given, seed as hypothesis_seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from hologram.core.errors import ArgumentError
from hologram.isa.asm import format_program, parse_program
from hologram.testing.bounds import Val
from hologram.testing.cases import KernelCase
from hologram.testing.difftest_checks import (MAX_SIZE, REFERENCE, FileCase, FileKernels, NotCovered, ProgramCase,
                                              Verdict, check_file_case, check_kernel, check_program, fails, file_cases,
                                              launches, optimize_program, pipeline_of, program_cases)
from hologram.testing.plugin_cases import difftest_kernels
from hologram.testing.precision import precision

__all__ = ["KINDS", "OPTS", "REFERENCE", "INTERP_MAX_ELEMENTS", "DEFAULT_OUT", "Outcome", "Report", "ProgramCase",
           "NotCovered", "Verdict", "program_cases", "precision", "check_kernel", "check_program",
           "optimize_program", "max_elements", "run_difftest", "replay", "replay_command", "stored_inputs",
           "FileCase"]

KINDS = ("kernels", "programs")
OPTS = ("O0", "O2")  # the optimization levels compared by default: none, and everything
INTERP_MAX_ELEMENTS = 1 << 16  # what the reference interpreter declares: larger kernel cases skip it (~1 s a run)
DEFAULT_OUT = "difftest-failures"
Progress = Callable[[str, int, int], None]  # (kind, examples done, examples planned)


# ------------------------------------------------------------------------ results
@attrs.frozen
class Outcome:
    """One row of the report: how backend `backend` did on `examples` examples of `kind`
    compiled at optimization level `opt`. `reproducer` is the written `.toml`/`.hasm`
    path and `message` the (shrunk) failure; `culprit` the pass it was bisected to.
    `not_covered` counts the examples the backend declined (`UnsupportedProgram`: its
    capabilities leave them out, or its `prepare` refused them), not
    counted as passed or failed; `not_covered_reason` is the first such refusal."""

    kind: str
    backend: str
    examples: int
    passed: int
    failed: int
    reproducer: str | None = None
    message: str | None = None
    opt: str = "O2"
    culprit: str | None = None  # the optimizer pass bisection blames, if any (see `culprit`)
    not_covered: int = 0
    not_covered_reason: str | None = None


@attrs.frozen
class Report:
    seed: int
    backends: tuple[str, ...]
    rows: tuple[Outcome, ...]
    opts: tuple[str, ...] = OPTS

    @property
    def ok(self) -> bool:
        return all(r.failed == 0 for r in self.rows)

    @property
    def reproducers(self) -> tuple[str, ...]:
        return tuple(r.reproducer for r in self.rows if r.reproducer)


# ---------------------------------------------------------------------- checking
def _guarded(check: Callable[..., Verdict], *args: Any) -> Verdict:
    """A backend that raises anything unexpected has failed, not the harness."""
    try:
        return check(*args)
    except (KeyboardInterrupt, SystemExit, MemoryError):
        raise
    except Exception as exc:
        return f"unexpected {type(exc).__name__}: {exc}"


def _runs_on(case: Any, backend: str) -> bool:
    return True


def max_elements(backend: str) -> int | None:
    """The most input elements a generated kernel case may hold to be run on `backend`:
    what it declares (`Backend.max_test_elements`: INTERP_MAX_ELEMENTS for the reference
    interpreter, which runs one lane at a time), None for no limit."""
    from hologram.registry.lookups import get_backend

    return get_backend(backend).max_test_elements


def _kernel_runs_on(case: KernelCase, backend: str) -> bool:
    limit = max_elements(backend)
    return limit is None or sum(np.size(v) for _, v in case.inputs) <= limit


@attrs.frozen
class _Kind:
    strategy: Callable[[], st.SearchStrategy]
    check: Callable[[Any, str, str], Verdict]  # (case, backend, opt)
    write: Callable[[Any, str, str, str, str], str] | None  # (case, backend, opt, message, out_dir)
    runs_on: Callable[[Any, str], bool] = _runs_on  # (case, backend): whether exploring runs it there


# ------------------------------------------------------------------- reproducers
def _stem(out_dir: str, kind: str, backend: str, opt: str, text: str) -> str:
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    return os.path.join(out_dir, f"{kind[:-1]}-{backend}-{opt}-{digest}")


def replay_command(path: str, backend: str, opt: str | None = None) -> str:
    return f"hologram diff-test --replay {path} --backends {backend}" + (f" --opt {opt}" if opt else "")


def _write_notes(stem: str, path: str, backend: str, opt: str, message: str) -> None:
    with open(stem + ".txt", "w", encoding="utf-8") as f:
        f.write(f"backend: {backend}\nopt: {opt}\nreplay: {replay_command(path, backend, opt)}\n\n{message}\n")


def _write_kernel(case: KernelCase, backend: str, opt: str, message: str, out_dir: str) -> str:
    stem = _stem(out_dir, "kernels", backend, opt, case.source + repr(case.inputs))
    arrays: dict[str, np.ndarray] = {f"in/{k}": np.asarray(v) for k, v in case.inputs}
    for name, val in case.expected:
        arrays.update({f"expected/{name}/{f}": np.asarray(getattr(val, f)) for f in ("v", "err", "ulps", "fuzzy")})
    arrays["meta/errors"] = np.array([e.__name__ for e in case.error], dtype=str)
    arrays["meta/mapped"] = np.array(case.mapped)
    if case.stream is not None:  # pool_bytes, must (bit 0), shifted_out (bit 1), from_file (bit 2), the chunk sizes
        flags = int(case.stream.must) | int(case.stream.shifted_out) << 1 | int(case.stream.from_file) << 2
        arrays["meta/stream"] = np.array([case.stream.pool_bytes, flags, *case.stream.cuts], np.int64)
    if case.dask is not None:
        arrays["meta/dask"] = np.array(case.dask.to_json())
    arrays["meta/backend"] = np.array(backend)
    arrays["meta/opt"] = np.array(opt)
    path = stem + (".py" if case.format == "python" else ".toml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(case.source)
    np.savez_compressed(stem + ".npz", **arrays)  # a 2**24-element constant input compresses to ~100 KB
    _write_notes(stem, path, backend, opt, message)
    return path


def _write_program(case: ProgramCase, backend: str, opt: str, message: str, out_dir: str) -> str:
    text = format_program(case.program)
    stem = _stem(out_dir, "programs", backend, opt, text + repr(sorted(case.symbols.items())))
    arrays = {f"buf/{k}": v for k, v in case.buffers.items()}
    arrays.update({f"scalar/{k}": np.asarray(v) for k, v in case.scalars.items()})
    arrays.update({f"sym/{k}": np.asarray(v, np.int64) for k, v in case.symbols.items()})
    arrays["meta/backend"] = np.array(backend)
    arrays["meta/opt"] = np.array(opt)
    with open(stem + ".hasm", "w", encoding="utf-8") as f:
        f.write(text)
    np.savez(stem + ".npz", **arrays)
    _write_notes(stem, stem + ".hasm", backend, opt, message)
    return stem + ".hasm"


KIND_TABLE: dict[str, _Kind] = {
    "kernels": _Kind(difftest_kernels, check_kernel, _write_kernel, _kernel_runs_on),
    "programs": _Kind(program_cases, lambda case, backend, opt: check_program(case, backend, opt=opt),
                      _write_program),
}


def stored_inputs(path: str) -> str | None:
    """The `.npz` beside `path` that a reproducer keeps its inputs in, when there is one."""
    npz = os.path.splitext(path)[0] + ".npz"
    return npz if os.path.exists(npz) else None


def _load_npz(path: str) -> dict[str, np.ndarray]:
    npz = os.path.splitext(path)[0] + ".npz"
    try:
        with np.load(npz, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError) as exc:
        raise ArgumentError(f"{path}: cannot load its inputs {npz}: {exc}") from None


def _section(data: Mapping[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {k[len(prefix):]: v for k, v in data.items() if k.startswith(prefix)}


def _kernel_from_files(path: str) -> KernelCase:
    from hologram.core import errors

    with open(path, encoding="utf-8") as f:
        source = f.read()
    data = _load_npz(path)
    inputs = tuple((k, v[()] if v.ndim == 0 else v) for k, v in _section(data, "in/").items())
    fields = _section(data, "expected/")
    names = list(dict.fromkeys(k.rsplit("/", 1)[0] for k in fields))
    expected = tuple((n, Val(*(fields[f"{n}/{f}"] for f in ("v", "err", "ulps", "fuzzy")))) for n in names)
    error = tuple(getattr(errors, str(e)) for e in data.get("meta/errors", ()))
    stream = None
    if "meta/stream" in data:
        from hologram.testing.stream_cases import StreamSpec

        pool, flags, *cuts = (int(v) for v in data["meta/stream"])
        stream = StreamSpec(pool, tuple(cuts), bool(flags & 1), bool(flags & 2), bool(flags & 4))
    spec = None
    if "meta/dask" in data:
        from hologram.testing.dask_cases import DaskSpec

        spec = DaskSpec.from_json(str(data["meta/dask"]))
    return KernelCase(source, inputs, expected, error, mapped=bool(data.get("meta/mapped", False)),
                      format="python" if path.endswith(".py") else "toml", stream=stream, dask=spec)


def _program_from_files(path: str) -> ProgramCase:
    with open(path, encoding="utf-8") as f:
        program = parse_program(f.read(), file=path)
    data = _load_npz(path)
    scalars = {k: v[()] for k, v in _section(data, "scalar/").items()}
    symbols = {k: int(v) for k, v in _section(data, "sym/").items()}
    return ProgramCase(program, _section(data, "buf/"), scalars, symbols)


def replay(path: str, backends: Sequence[str] | None = None, opt: str | None = None, seed: int = 0,
           examples: int = 100) -> dict[str, Verdict]:
    """Run a reproducer again on `backends` (default: the backend it was written for) at
    optimization level `opt` (default: the level it failed at); returns backend ->
    failure message, `NotCovered` where the backend declines it, or None where it now
    passes.

    A file with no `.npz` beside it (a user's own kernel file, in any format
    `hologram.compile_file` reads, or a `.hasm` program) has no inputs to replay: then
    `examples` calls are drawn from its signature at `seed` (`difftest_checks`), each
    backend (default: every available one) held to the reference interpreter at `opt`
    (default: HOLOGRAM_OPT, else O2), and a failure is shrunk and described with its
    inputs."""
    from hologram.registry.pipelines import parse_opt, resolve

    if stored_inputs(path) is None and os.path.isfile(path):
        from hologram.registry.lookups import list_backends

        opt = parse_opt(opt) if opt is not None else resolve().name
        return _replay_drawn(path, list(backends or list_backends()), opt, seed, examples)
    if path.endswith((".toml", ".py")):
        kind, case = "kernels", _kernel_from_files(path)
    elif path.endswith(".hasm"):
        kind, case = "programs", _program_from_files(path)
    else:
        raise ArgumentError(f"{path}: a reproducer is a .toml or .py kernel or a .hasm program written by diff-test")
    meta = _load_npz(path)
    if not backends:
        backends = [str(meta.get("meta/backend", REFERENCE))]
    if opt is None:
        opt = str(meta.get("meta/opt", "O0"))  # a file written before levels existed: no passes
    opt = parse_opt(opt)
    return {b: _guarded(KIND_TABLE[kind].check, case, b, opt) for b in backends}


def _replay_drawn(path: str, backends: list[str], opt: str, seed: int, examples: int) -> dict[str, Verdict]:
    """`replay` of a file without inputs: `examples` drawn calls on every backend, the
    first failure per backend shrunk (else the first refusal, else None)."""
    if path.endswith(".hasm"):
        from hologram.verify.verifier import verify

        with open(path, encoding="utf-8") as f:
            program = parse_program(f.read(), file=path)
        verify(program)  # a program the verifier refuses is the file's fault: say so, not every backend's
        kind = _Kind(lambda: launches(program), lambda case, b, o: check_program(case, b, opt=o), None)
    else:
        kernels = FileKernels(path)
        if not kernels.signatures:
            raise ArgumentError(f"{path}: holds no kernel to run")
        kind = _Kind(lambda: file_cases(kernels.signatures),
                     lambda case, b, o: check_file_case(kernels, case, b, o), None)
    targets = [(opt, b) for b in dict.fromkeys(backends)]
    explored = _explore(kind, targets, examples, seed, lambda: None)
    if not any(sum(c) for c in explored.counts.values()):  # every draw rejected: no verdict to give
        raise ArgumentError(f"{path}: no call could be drawn (every shape symbol in 0..{MAX_SIZE} leaves a "
                            "dimension negative)")
    verdicts: dict[str, Verdict] = {}
    for t in targets:
        if t in explored.first:
            verdicts[t[1]] = (_shrink(kind, t, examples, seed) or explored.first[t])[1]
        else:
            verdicts[t[1]] = NotCovered(explored.declined[t]) if t in explored.declined else None
    return verdicts


def culprit(kind: str, case: Any, backend: str, opt: str) -> str | None:
    """The pass to blame for `case` failing at level `opt`: the first pass of that
    pipeline such that running the passes up to it fails. None when the example fails
    with no pass at all (or passes with every prefix: a failure that needs no single
    pass to explain, such as a nondeterministic backend)."""
    check = KIND_TABLE[kind].check
    names = pipeline_of(opt).names
    if not names or fails(_guarded(check, case, backend, ())):
        return None
    for k in range(1, len(names) + 1):
        if fails(_guarded(check, case, backend, names[:k])):
            return names[k - 1]
    return None


# ------------------------------------------------------------------------ running
class _Mismatch(Exception):
    """Raised inside a hypothesis test to make it shrink."""


def _settings(examples: int, shrink: bool) -> settings:
    return settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                    phases=(Phase.generate, Phase.shrink) if shrink else (Phase.generate,),
                    suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
                    report_multiple_bugs=False, print_blob=False)


Target = tuple[str, str]  # (opt, backend)


@attrs.frozen
class _Explored:
    """Per target: [passed, failed, not covered]; the first failing example and its
    message; the first refusal's reason."""

    counts: dict[Target, list[int]]
    first: dict[Target, tuple[Any, str]]
    declined: dict[Target, str]


def _explore(kind: _Kind, targets: Sequence[Target], examples: int, seed: int, tick: Callable[[], None]) -> _Explored:
    """Every example at every (level, backend), nothing raised."""
    found = _Explored({t: [0, 0, 0] for t in targets}, {}, {})

    @hypothesis_seed(seed)
    @_settings(examples, shrink=False)
    @given(kind.strategy())
    def run(case: Any) -> None:
        for t in targets:
            opt, b = t
            if not kind.runs_on(case, b):
                continue
            verdict = _guarded(kind.check, case, b, opt)
            if isinstance(verdict, NotCovered):
                found.counts[t][2] += 1
                found.declined.setdefault(t, verdict.reason)
            elif verdict is not None:
                found.counts[t][1] += 1
                found.first.setdefault(t, (case, verdict))
            else:
                found.counts[t][0] += 1
        tick()

    try:
        run()
    except Unsatisfiable:
        pass
    return found


def _shrink(kind: _Kind, target: Target, examples: int, seed: int) -> tuple[Any, str] | None:
    """The same search with `target`'s failures raising: hypothesis's minimal example."""
    seen: list[tuple[Any, str]] = []
    opt, backend = target

    @hypothesis_seed(seed)
    @_settings(examples, shrink=True)
    @given(kind.strategy())
    def run(case: Any) -> None:
        msg = _guarded(kind.check, case, backend, opt) if kind.runs_on(case, backend) else None
        if fails(msg):
            seen.append((case, msg))
            raise _Mismatch(msg)

    try:
        run()
    except Exception:  # _Mismatch; or hypothesis's Flaky when the backend is not deterministic
        pass
    return seen[-1] if seen else None  # hypothesis replays the minimal example last


def run_difftest(backends: Iterable[str], examples: int = 100, seed: int | None = None,
                 kinds: Iterable[str] = KINDS, out_dir: str = DEFAULT_OUT,
                 progress: Progress | None = None, opts: Iterable[str] = OPTS) -> Report:
    """Run `examples` generated examples of each kind on every backend at every level
    (see the module docs); write a shrunk reproducer into `out_dir` for every (level,
    backend) that failed. Examples a backend declines (`NotCovered`) are counted apart.

    backends  registered backend names (each must be available)
    seed      makes the run repeatable; None draws one (it is in the report)
    progress  called as progress(kind, done, planned) after every example
    opts      optimization levels ("O0", "O1", "O2"), each compared with the oracle
    """
    from hologram.registry.lookups import get_backend
    from hologram.registry.pipelines import parse_opt

    backends = tuple(dict.fromkeys(backends))
    kinds = tuple(kinds)
    opts = tuple(dict.fromkeys(parse_opt(o) for o in ([opts] if isinstance(opts, str) else opts)))
    if not backends:
        raise ArgumentError("run_difftest: name at least one backend")
    if not opts:
        raise ArgumentError("run_difftest: name at least one optimization level")
    for k in kinds:
        if k not in KIND_TABLE:
            raise ArgumentError(f"run_difftest: unknown kind {k!r}; expected one of {', '.join(KINDS)}")
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 1:
        raise ArgumentError(f"run_difftest: examples must be an integer >= 1, got {examples!r}")
    for b in backends + ((REFERENCE,) if "programs" in kinds else ()):
        get_backend(b)  # a clear PluginError for an unknown or unavailable backend, before any work
    if seed is None:
        seed = random.randrange(2**32)
    rows = []
    for k in kinds:
        kind = KIND_TABLE[k]
        done = [0]

        def tick(k: str = k) -> None:
            done[0] += 1
            if progress:
                progress(k, done[0], examples)

        targets = [(o, b) for o in opts for b in backends]
        explored = _explore(kind, targets, examples, seed, tick)
        for t in targets:
            opt, b = t
            passed, failed, declined = explored.counts[t]
            path = message = blamed = None
            if failed:
                case, message = _shrink(kind, t, examples, seed) or explored.first[t]
                blamed = culprit(k, case, b, opt)
                if blamed:
                    message += (f"\n\nbisected: passes with no optimizer pass; fails once pass {blamed!r} has "
                                f"run (with the passes of {opt} before it)")
                os.makedirs(out_dir, exist_ok=True)
                path = kind.write(case, b, opt, message, out_dir)
            rows.append(Outcome(k, b, passed + failed + declined, passed, failed, path, message, opt, blamed,
                                declined, explored.declined.get(t)))
    return Report(seed, backends, tuple(rows), opts)
