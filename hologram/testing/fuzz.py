"""Fuzzing: the structure-aware program, document and object-code mutators, as a function API.

    from hologram.testing.fuzz import fuzz_programs, fuzz_documents, fuzz_objects
    findings = fuzz_programs(iterations=300, seed=1)             # -> list[Finding]
    findings = fuzz_documents(iterations=300, seed=1, out_dir="fuzz-findings")
    findings = fuzz_objects(iterations=300, seed=1)
    for f in findings:
        print(f)                                                  # kind, phase, mutant, reproducer

`fuzz_programs` mutates verified Atlas programs (fuzz_mutate_programs.py) and holds every mutant
to the program oracle (fuzz_program_oracle.py): refused by the decoder, the parser or
the verifier with their own error class, or verified and then run on both backends with
guarded arrays, without a crash, a stray write or (for a deterministic launch) a
disagreement. `fuzz_documents` mutates kernel documents (fuzz_mutate_documents.py) and holds
them to the document oracle (fuzz_document_oracle.py): compiled, or refused with a
positioned HologramError, never another exception, never past the time budget; a
compiled kernel runs on both backends and they agree. `fuzz_objects` mutates the object
code cpu_llvm ships for a few kernels (fuzz_mutate_objects.py) and holds cpu_llvm's
loader to the object oracle (fuzz_object_oracle.py): refused with a reason, or linked
and agreeing with the interpreter; never a crash, never damage it must refuse linked.

Every case runs in a worker process (fuzz_pool.py), so a segfault or a hang costs one
case. A `Finding` carries the mutant itself (`.hasm` text, document text or encoded bytes)
and, with `out_dir`, is written there as files: the mutant (`.hasm` and `.hbc`, or the
document), a `.txt` with the finding, and a `.case.pkl` that `replay` runs again (an object finding:
the object as `.o` and its program as `.hbc`).

`hologram fuzz --programs N --documents N --objects N --seed S --out DIR` runs them (hologram.cli.fuzz;
`make fuzz` does, with FUZZ_ITERATIONS); docs/testing.md, "Fuzzing", has the details.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
import time
from collections import Counter
from typing import Any, Callable, Iterator, Mapping

import attrs
import numpy as np

from hologram.testing.fuzz_common import CaseResult
from hologram.testing.fuzz_document_oracle import DocumentCase
from hologram.testing.fuzz_object_oracle import ObjectCase
from hologram.testing.fuzz_pool import WorkerPool
from hologram.testing.fuzz_program_oracle import ProgramCase

__all__ = ["Finding", "KnownIssue", "KNOWN_ISSUES", "BUDGETS", "fuzz_programs", "fuzz_documents", "fuzz_objects",
           "replay"]

# Seconds per phase. A timeout is a finding where the worker said so (decode, parse,
# verify, round-trip, compile; cpu_llvm after the interpreter finished the same launch).
BUDGETS: Mapping[str, float] = {"decode": 10, "parse": 10, "verify": 20, "round-trip": 10, "interp": 20,
                                "cpu_llvm": 30, "trace": 20, "compile": 20, "check": 10, "load": 10,
                                "default": 20}


@attrs.frozen
class Finding:
    """One defect the oracle saw. kind: one of fuzz_common.KINDS; phase: where (verify,
    interp, cpu_llvm, compile, compare, ...); target: 'program', 'document'
    or 'object'; origin: the seed; mutations: what was done to it; reproducer: the mutant (assembly text, document
    text, or the hex of encoded bytes); files: where it was written (with out_dir);
    known: the label of a `KNOWN_ISSUES` entry it matches, if any."""

    kind: str
    phase: str
    message: str
    target: str
    origin: str
    mutations: tuple[str, ...]
    reproducer: str
    files: tuple[str, ...] = ()
    known: str | None = None

    def __str__(self) -> str:
        head = f"[{self.kind}] {self.target} fuzzing, phase {self.phase}" + (f" (known: {self.known})"
                                                                             if self.known else "")
        lines = [head, f"  {self.message}", f"  seed: {self.origin}", "  mutations:"]
        lines += [f"    - {m}" for m in self.mutations]
        if self.files:
            lines.append(f"  files: {', '.join(self.files)}")
        text = self.reproducer if len(self.reproducer) < 4000 else self.reproducer[:4000] + "\n  ... (truncated)"
        lines += ["  reproducer:", *("    " + ln for ln in text.splitlines())]
        return "\n".join(lines)


@attrs.frozen
class KnownIssue:
    """A defect already reported (and being fixed) that the fuzzers are known to find.
    `matches` recognizes its findings; a report lists them apart, and the bounded test
    in tests/testing/test_fuzz.py tolerates them until the entry is removed."""

    label: str
    description: str
    matches: Callable[[Finding], bool]


# Issue 11, section 7, and what the fuzzers found beyond it (docs/testing.md, "Fuzzing"):
# each entry goes when its fix has landed, and the bounded fuzz test then holds the line.
KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    # none open: issue 11's and the fuzzers' own findings are fixed (docs/testing.md, "Fuzzing")
)


def _known(f: Finding) -> Finding:
    for issue in KNOWN_ISSUES:
        try:
            if issue.matches(f):
                return attrs.evolve(f, known=issue.label)
        except Exception:  # noqa: BLE001 - a matcher must not hide a finding
            continue
    return f


# ------------------------------------------------------------------ reproducers
def _program_reproducer(case: ProgramCase) -> tuple[str, dict[str, bytes]]:
    """(the mutant as text, files to write by extension)."""
    from hologram.isa.asm import format_program
    from hologram.isa.encoding import encode

    files: dict[str, bytes] = {}
    if case.data is not None:
        files[".hbc"] = case.data
        return case.data.hex(), files
    if case.text is not None:
        files[".hasm"] = case.text.encode("utf-8", "surrogatepass")
        return case.text, files
    try:
        text = format_program(case.program)
        files[".hasm"] = text.encode("utf-8", "surrogatepass")
    except Exception:  # noqa: BLE001 - a malformed value has no assembly: its repr then
        try:
            text = repr(case.program)
        except ValueError:  # an integer past the digit limit
            text = "<program with an integer past Python's int-to-str limit; see the .case.pkl>"
    try:
        files[".hbc"] = encode(case.program)
    except Exception:  # noqa: BLE001
        pass
    return text, files


def _findings(target: str, case: Any, result: CaseResult, out_dir: str | None) -> list[Finding]:
    if not result.problems:
        return []
    if target == "program":
        text, files = _program_reproducer(case)
    elif isinstance(case, ObjectCase):
        text, files = case.describe(), {".o": bytes(case.native["object"]), ".hbc": case.program}
    else:
        text, files = case.text, {"." + case.file.rsplit(".", 1)[-1]: case.text.encode("utf-8", "surrogatepass")}
    found = [_known(Finding(p.kind, p.phase, p.message, target, case.origin, case.mutations, text))
             for p in result.problems]
    if out_dir is None:
        return found
    os.makedirs(out_dir, exist_ok=True)
    digest = hashlib.sha256(pickle.dumps(case)).hexdigest()[:12]
    stem = os.path.join(out_dir, f"{target}-{found[0].kind}-{digest}")
    written = []
    for ext, data in files.items():
        with open(stem + ext, "wb") as fh:
            fh.write(data)
        written.append(stem + ext)
    with open(stem + ".case.pkl", "wb") as fh:
        pickle.dump((target, case), fh)
    written.append(stem + ".case.pkl")
    with open(stem + ".txt", "w", encoding="utf-8", errors="replace") as fh:
        fh.write("\n\n".join(str(f) for f in found) + f"\n\nreplay: hologram fuzz --replay "
                                                         f"{stem}.case.pkl\n")
    written.append(stem + ".txt")
    return [attrs.evolve(f, files=tuple(written)) for f in found]


# ------------------------------------------------------------------ the runs
def _run(target: str, cases: Iterator[Any], workers: int, budgets: Mapping[str, float] | None,
         out_dir: str | None, stats: dict | None, progress: Callable[[int, int], None] | None,
         planned: int) -> list[Finding]:
    findings: list[Finding] = []
    outcomes: Counter = Counter()
    facts: Counter = Counter()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hologram-fuzz-") as cache:
        env = {"HOLOGRAM_CACHE_DIR": cache, "OPENBLAS_NUM_THREADS": "1", "HOLOGRAM_NUM_THREADS": "2"}
        with WorkerPool(workers, {**BUDGETS, **(budgets or {})}, env) as pool:
            for done, (case, result) in enumerate(pool.run((target, c) for c in cases), 1):
                outcomes[result.outcome] += 1
                facts.update(dict(result.facts))
                findings += _findings(target, case, result, out_dir)
                if progress is not None:
                    progress(done, planned)
    if stats is not None:
        stats.update({"cases": sum(outcomes.values()), "outcomes": dict(outcomes), "facts": dict(facts),
                      "seconds": round(time.monotonic() - started, 1)})
    return findings


def _unique(cases: Iterator[Any], count: int, stats: dict | None) -> Iterator[Any]:
    """`count` distinct cases (a mutant met before is drawn again)."""
    seen: set[str] = set()
    duplicates = 0
    while len(seen) < count:
        case = next(cases)
        key = hashlib.sha256(pickle.dumps(case.__class__(**{**attrs.asdict(case, recurse=False), "input_seed": 0})
                                          )).hexdigest()
        if key in seen:
            duplicates += 1
            if duplicates > 20 * count:
                break
            continue
        seen.add(key)
        yield case
    if stats is not None:
        stats["duplicates"] = duplicates


def fuzz_programs(iterations: int = 200, seed: int = 0, *, workers: int = 2, out_dir: str | None = None,
                  budgets: Mapping[str, float] | None = None, stats: dict | None = None,
                  strategy_examples: int = 40, scale: str = "ci",
                  progress: Callable[[int, int], None] | None = None) -> list[Finding]:
    """Run `iterations` distinct program mutants (reproducible from `seed`) through the
    program oracle; the findings, in completion order. `stats`, when given, is filled
    with the run's counts: outcomes (refused, ran, racy, ...), facts (verified, compared
    outputs, ...), duplicates skipped, seconds. `strategy_examples`: how many programs
    `isa_strategies.programs()` contributes as seeds (the compiled kernels are the rest);
    `scale`: "ci" nests loops 5-30 deep, "long" 50-300."""
    from hologram.testing.fuzz_program_cases import mutants, seed_programs

    seeds = seed_programs(strategy_examples, seed)
    compiled = tuple(s for s in seeds if not s[0].startswith("isa_strategies"))
    drawn = tuple(s for s in seeds if s[0].startswith("isa_strategies"))
    rng = np.random.default_rng(seed)

    def cases() -> Iterator[ProgramCase]:
        while True:  # the two families equally often, whatever their sizes
            family = compiled if compiled and (not drawn or rng.random() < 0.5) else drawn
            yield mutants(rng, family, scale)

    run_stats: dict = {}
    findings = _run("program", _unique(cases(), iterations, run_stats), workers, budgets, out_dir, stats,
                    progress, iterations)
    if stats is not None:
        stats.update(run_stats, seeds=len(seeds))
    return findings


def fuzz_documents(iterations: int = 200, seed: int = 0, *, workers: int = 2, out_dir: str | None = None,
                   budgets: Mapping[str, float] | None = None, stats: dict | None = None, scale: str = "ci",
                   progress: Callable[[int, int], None] | None = None) -> list[Finding]:
    """Run `iterations` distinct document mutants (reproducible from `seed`) through the
    document oracle. `scale`: "ci" keeps the pathological mutations small (ranks up to 9,
    chains up to 200 statements), "long" goes to ranks of 24 and chains of 5,000."""
    from hologram.testing.fuzz_mutate_documents import mutant, seed_documents

    seeds = seed_documents()
    rng = np.random.default_rng(seed)

    def cases() -> Iterator[DocumentCase]:
        while True:
            yield mutant(rng, seeds, scale)

    run_stats: dict = {}
    findings = _run("document", _unique(cases(), iterations, run_stats), workers, budgets, out_dir, stats,
                    progress, iterations)
    if stats is not None:
        stats.update(run_stats, seeds=len(seeds))
    return findings


def fuzz_objects(iterations: int = 200, seed: int = 0, *, workers: int = 2, out_dir: str | None = None,
                 budgets: Mapping[str, float] | None = None, stats: dict | None = None,
                 progress: Callable[[int, int], None] | None = None) -> list[Finding]:
    """Run `iterations` distinct mutants of the object code cpu_llvm builds for a few
    kernels (reproducible from `seed`) through the object oracle. None where cpu_llvm
    builds no object code this CPU runs (`stats` then says so: no cases)."""
    from hologram.testing.fuzz_mutate_objects import mutant, seed_objects

    seeds = seed_objects()
    if not seeds:
        if stats is not None:
            stats.update(cases=0, seeds=0, skipped="cpu_llvm builds no object code this CPU runs")
        return []
    rng = np.random.default_rng(seed)

    def cases() -> Iterator[ObjectCase]:
        while True:
            yield mutant(rng, seeds)

    run_stats: dict = {}
    findings = _run("object", _unique(cases(), iterations, run_stats), workers, budgets, out_dir, stats, progress,
                    iterations)
    if stats is not None:
        stats.update(run_stats, seeds=len(seeds))
    return findings


def replay(path: str, budgets: Mapping[str, float] | None = None) -> list[Finding]:
    """Run the case saved at `path` (a `.case.pkl` a finding wrote) again, in a worker;
    its findings now (empty when the defect is fixed). The file is a pickle: replay only
    files you wrote."""
    with open(path, "rb") as fh:
        target, case = pickle.load(fh)
    return _run(target, iter([case]), 1, budgets, None, None, None, 1)


# ------------------------------------------------------------------ command line
