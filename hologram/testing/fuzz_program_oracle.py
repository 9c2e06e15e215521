"""The program fuzzer's oracle: what must hold for any program, however mutated.

`check_program_case(case, phase)` runs in a worker process (fuzz_pool.py) and judges one
mutated program:

1. A binary or assembly form must decode or parse, or be refused with `ISAError`.
2. `verify` must accept the program or refuse it with `VerifyError`; nothing else. A
   program it accepts has every stage's block scratch within the limit (docs/isa.md,
   "Block scratch"): one past it was cpu_llvm's stack smashed (issue 21).
3. A verified program must survive its text and binary round trips unchanged.
4. It is launched on both backends (the reference interpreter and cpu_llvm) with small
   shape symbols, every buffer a view into a larger array between canaries. Each launch
   may finish or raise a HologramError (an ArgumentError, an ExecutionError), and then:
   no canary changed, no `in` buffer changed, and an ExecutionError of the interpreter
   that reports an out-of-bounds *unchecked* access is a verifier hole (the verifier
   claimed a proof).
5. When the launch is deterministic, the backends must agree: `find_race` (fuzz_trace.py)
   shows that no two lanes conflicted in memory; then one backend raising where the
   other finished is a divergence, and each output is compared at the precision the
   program's dataflow pins down (`precision`): bitwise, within 4 ULP after one
   approximated instruction, or not at all after composed approximations, reordered
   float sums or a sign copied from a NaN.

The worker announces each phase (`phase(name, timeout_is_defect)`) so the parent can
apply the phase's time budget: a verifier that does not finish is a defect, an
interpreter that is slow on a long loop is not, and cpu_llvm not finishing a launch the
interpreter finished is.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

import attrs
import numpy as np

from hologram.core.errors import ExecutionError, HologramError, ISAError, VerifyError
from hologram.isa.opcodes import OPCODES
from hologram.isa.program import BufferParam, Instr, Program
from hologram.testing.fuzz_common import (DIVERGENCE, EXCEPTION, INTERNAL, MISMATCH, ROUND_TRIP, VERIFIER_HOLE,
                                          WRONG_ERROR, CaseResult, Problem, check_guards, describe_exception, fill,
                                          guard_all, pick, scalar)
from hologram.testing.precision import compare_outputs, precision

Phase = Callable[..., None]

MAX_ELEMENTS = 1 << 16  # per launch, all buffers together
MAX_INTERP_LANES = 1 << 14  # beyond this the interpreter is too slow to be worth waiting for
MAX_NATIVE_LANES = 1 << 24


@attrs.frozen
class ProgramCase:
    """One mutant: a `Program` value, or its binary encoding (`data`), or its assembly
    (`text`). `input_seed` draws the symbols and the input values; `origin` names the
    seed program and `mutations` what was done to it."""

    origin: str
    mutations: tuple[str, ...]
    input_seed: int
    program: Program | None = None
    data: bytes | None = None
    text: str | None = None


# ------------------------------------------------------------------ launch arguments
@attrs.frozen
class Launch:
    symbols: dict[str, int]
    buffers: dict[str, np.ndarray]  # initial values, by buffer param
    scalars: dict[str, Any]
    lanes: int  # over all stages, under `symbols`


def _shape(p: BufferParam, symbols: Mapping[str, int]) -> tuple[int, ...] | None:
    try:
        return tuple(int(d.evaluate(symbols)) for d in p.shape)
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
        return None


def _lanes(program: Program, symbols: Mapping[str, int]) -> int:
    total = 0
    for st in program.stages:
        try:
            ext = [int(d.evaluate(symbols)) for d in st.domain]
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
            continue
        total += int(np.prod([max(e, 0) for e in ext], dtype=object)) if ext else 0
    return total


# Values for a symbol no shape or domain uses (it can still reach an index): the edges of
# the launch contract (0 <= symbol < 2**62, hologram.verify.intervals.SYMBOL_MAX), which
# a launch must enforce (an ArgumentError beyond them).
CONTRACT_EDGES = (2**62 - 1, 2**62, 2**63 - 1, -1)


def choose_launch(program: Program, rng: np.random.Generator) -> Launch:
    """Small symbol values (mostly 1..5, sometimes 0) under which every buffer fits; the
    last binding tried when none does (the backends must then refuse it cleanly). A
    symbol no shape or domain mentions is, one time in three, one of CONTRACT_EDGES."""
    params = [p for p in program.params if isinstance(p, BufferParam)]
    dims = [d for b in list(params) + list(program.temps) for d in b.shape] + \
        [d for st in program.stages for d in st.domain]
    sized = {name for d in dims for name, _ in getattr(d, "terms", ()) if isinstance(name, str)}
    edges = {s: int(pick(rng, CONTRACT_EDGES)) for s in program.symbols if s not in sized and rng.random() < 1 / 3}
    symbols: dict[str, int] = {}
    shapes: dict[str, tuple[int, ...] | None] = {}
    for attempt in range(6):
        top = 5 if attempt < 4 else 1
        symbols = {s: int(rng.integers(0 if rng.random() < 0.1 else 1, top + 1)) for s in program.symbols
                   if isinstance(s, str)}
        symbols.update(edges)
        shapes = {p.name: _shape(p, symbols) for p in params}
        sizes = [int(np.prod(s, dtype=object)) for s in shapes.values()
                 if s is not None and min(s, default=0) >= 0 and max(s, default=0) <= MAX_ELEMENTS]
        if len(sizes) == len(shapes) and sum(sizes) <= MAX_ELEMENTS:
            break
    buffers = {}
    for p in params:
        shape = shapes[p.name]
        if shape is None or min(shape, default=0) < 0 or max(shape, default=0) > MAX_ELEMENTS \
                or int(np.prod(shape, dtype=object)) > MAX_ELEMENTS:
            shape = (0,)  # a wrong size: the backends must say so
        values = fill(rng, p.dtype.np, shape)
        buffers[p.name] = values if p.role in ("in", "inout") else np.zeros_like(values)
    scalars = {name: scalar(rng, p.dtype.np) for name, p in program.scalars().items()}
    return Launch(symbols, buffers, scalars, _lanes(program, symbols))


# ------------------------------------------------------------------ one backend
@attrs.frozen
class Run:
    error: BaseException | None  # what the launch raised, if anything
    outputs: dict[str, np.ndarray]
    problems: tuple[Problem, ...]


def _launch(backend: Any, name: str, program: Program, launch: Launch) -> Run:
    guards = guard_all(launch.buffers)
    read_only = {p.name for p in program.params if isinstance(p, BufferParam) and p.role == "in"}
    problems: list[Problem] = []
    error: BaseException | None = None
    try:
        exe = backend.prepare(program)
    except VerifyError as exc:
        return Run(exc, {}, (Problem(INTERNAL, name, f"{name} refused a verified program: "
                                                     f"{describe_exception(exc)}"),))
    except HologramError as exc:  # CompileError: a code generator bug
        return Run(exc, {}, (Problem(INTERNAL, name, f"{name}.prepare failed on a verified program: "
                                                     f"{describe_exception(exc)}"),))
    except Exception as exc:  # noqa: BLE001 - the point of the oracle
        return Run(None, {}, (Problem(EXCEPTION, name, f"{name}.prepare raised {describe_exception(exc)}"),))
    try:
        backend.launch(exe, {k: g.inner for k, g in guards.items()}, dict(launch.scalars), dict(launch.symbols))
    except HologramError as exc:
        error = exc
    except Exception as exc:  # noqa: BLE001
        problems.append(Problem(EXCEPTION, name, f"{name}.launch raised {describe_exception(exc)}"))
        error = exc
    problems += check_guards(guards, read_only, name, name)
    return Run(error, {k: g.inner.copy() for k, g in guards.items()}, tuple(problems))


_OOB = re.compile(r"stage '(?P<stage>[^']*)': instruction (?P<k>\d+) .*index (?P<index>-?\d+) is out of bounds")


def unchecked_fault(program: Program, error: BaseException | None) -> str | None:
    """When `error` is the interpreter reporting an out-of-bounds access by an
    instruction without `.chk` (which the verifier must have proven in bounds): which."""
    if not isinstance(error, ExecutionError):
        return None
    m = _OOB.search(str(error))
    if m is None:
        return None
    k = int(m["k"])
    for st in program.stages:
        if st.name == m["stage"] and k < len(st.body):
            ins = st.body[k]
            if not isinstance(ins, Instr) or ins.addr is None or ins.checked:
                continue
            pool = {m.name: m.size for m in st.pools}.get(ins.addr.buffer)
            if OPCODES[ins.op].space == "pool" and pool is not None and 0 <= int(m["index"]) < pool:
                continue  # liveness (below the pool's top) is a run-time check of every access (docs/isa.md)
            return f"stage '{st.name}' instruction {k}"
    return None


def lanes_independent(program: Program) -> bool:
    """No stage reads global memory it also writes, and none uses shared memory: each
    lane's run depends only on the launch's inputs (so an error one lane raises on one
    backend must be raised on every backend)."""
    for st in program.stages:
        written = {i.addr.buffer for i in st.body if isinstance(i, Instr) and i.addr is not None
                   and OPCODES[i.op].space == "global" and i.dst is None}
        written |= {init.buffer for init in st.inits}
        for i in st.body:
            if not isinstance(i, Instr) or i.addr is None:
                continue
            if OPCODES[i.op].space == "shared" or (i.dst is not None and i.addr.buffer in written
                                                   and OPCODES[i.op].space == "global"):
                return False
    return True


def past_scratch_limit(program: Program) -> str | None:
    """Which stage of `program` holds more block scratch than the limits allow, if any."""
    from hologram.verify.decl_rules import MAX_BLOCK_SCRATCH_BYTES, MAX_SHARED_BYTES, block_scratch

    for st in program.stages:
        scratch = block_scratch(st)
        if scratch.shared > MAX_SHARED_BYTES or scratch.total > MAX_BLOCK_SCRATCH_BYTES:
            return f"stage '{st.name}' holds {scratch.describe()}"
    return None


# ------------------------------------------------------------------ the oracle
_INTERP = None
_NATIVE = None


def _backends() -> tuple[Any, Any]:
    """The two backends, made once per worker: cpu_llvm without a disk cache (mutants
    would fill it) and with two threads."""
    global _INTERP, _NATIVE
    if _INTERP is None:
        from hologram.testing.run import fresh_backend

        _INTERP, _NATIVE = fresh_backend("interp"), fresh_backend("cpu_llvm", num_threads=2, cache_dir=False)
    return _INTERP, _NATIVE


def _materialize(case: ProgramCase, phase: Phase) -> tuple[Program | None, CaseResult | None]:
    if case.program is not None:
        return case.program, None
    from hologram.isa.asm import parse_program
    from hologram.isa.encoding import decode

    step, make = ("decode", lambda: decode(case.data)) if case.data is not None else \
        ("parse", lambda: parse_program(case.text or "", "fuzz.hasm"))
    phase(step, True)
    try:
        return make(), None
    except ISAError:
        return None, CaseResult(f"refused-by-{step}")
    except HologramError as exc:
        return None, CaseResult(f"refused-by-{step}", (Problem(WRONG_ERROR, step, f"{step} raised "
                                                       f"{describe_exception(exc)} instead of ISAError"),))
    except Exception as exc:  # noqa: BLE001
        return None, CaseResult(f"refused-by-{step}", (Problem(EXCEPTION, step, f"{step} raised "
                                                       f"{describe_exception(exc)}"),))


def _round_trips(p: Program) -> list[Problem]:
    from hologram.isa.asm import format_program, parse_program
    from hologram.isa.encoding import decode, encode

    problems = []
    for name, there_and_back in (("text", lambda: parse_program(format_program(p), "fuzz.hasm")),
                                 ("binary", lambda: decode(encode(p)))):
        try:
            q = there_and_back()
        except Exception as exc:  # noqa: BLE001 - a verified program must serialize
            problems.append(Problem(ROUND_TRIP, "round-trip", f"the {name} round trip of a verified program "
                                                              f"raised {describe_exception(exc)}"))
            continue
        if q != p:
            problems.append(Problem(ROUND_TRIP, "round-trip", f"the {name} round trip changed a verified program"))
    return problems


def check_program_case(case: ProgramCase, phase: Phase) -> CaseResult:
    """Judge one mutant (see the module docstring)."""
    from hologram.verify.verifier import verify

    program, done = _materialize(case, phase)
    if done is not None:
        return done
    phase("verify", True)
    try:
        verify(program)
    except VerifyError:
        return CaseResult("refused")
    except HologramError as exc:
        return CaseResult("refused", (Problem(WRONG_ERROR, "verify", f"verify raised {describe_exception(exc)} "
                                                                     f"instead of VerifyError"),))
    except Exception as exc:  # noqa: BLE001
        return CaseResult("refused", (Problem(EXCEPTION, "verify", f"verify raised {describe_exception(exc)}"),))
    phase("round-trip", True)
    problems = _round_trips(program)
    past = past_scratch_limit(program)
    if past is not None:
        problems.append(Problem(VERIFIER_HOLE, "verify", f"verify accepted a program past the scratch limit: {past}"))
    launch = choose_launch(program, np.random.default_rng(case.input_seed))
    if launch.lanes > MAX_NATIVE_LANES:
        return CaseResult("skipped", tuple(problems))
    interp, native = _backends()
    ran_interp = launch.lanes <= MAX_INTERP_LANES
    want = None
    if ran_interp:
        phase("interp", False)  # a slow interpreter is no defect (a long loop is legal)
        want = _launch(interp, "interp", program, launch)
        problems += want.problems
        hole = unchecked_fault(program, want.error)
        if hole is not None:
            problems.append(Problem(VERIFIER_HOLE, "interp", f"the verifier proved the unchecked access at {hole} "
                                                             f"in bounds, but it was not: {want.error}"))
    phase("cpu_llvm", bool(ran_interp and want.error is None))
    got = _launch(native, "cpu_llvm", program, launch)
    problems += got.problems
    facts: dict[str, int] = {"verified": 1, "launched": 1, "interp-ran": int(ran_interp)}
    if want is None or want.problems or got.problems:
        return _result("ran", problems, facts, launch)
    if isinstance(want.error, HologramError) and isinstance(got.error, HologramError):
        return _result("ran", problems, facts, launch)  # both refused or failed: nothing to compare
    phase("trace", False)
    race = _race(program, launch)
    if race is not None:
        facts["racy"] = 1
        return _result("racy", problems, facts, launch)
    if (want.error is None) != (got.error is None):
        # an argument check precedes execution; an error raised while running is the same
        # on every backend when no lane depends on another
        deterministic = want.error is None or not isinstance(want.error, ExecutionError) \
            or lanes_independent(program)
        if deterministic:
            problems.append(Problem(DIVERGENCE, "compare", f"interp {_said(want.error)}, cpu_llvm {_said(got.error)}"))
        return _result("ran", problems, facts, launch)
    problems += _compare(program, want.outputs, got.outputs, facts)
    return _result("ran", problems, facts, launch)


def _race(program: Program, launch: Launch) -> str | None:
    from hologram.testing.fuzz_trace import find_race
    return find_race(program, launch.buffers, launch.scalars, launch.symbols)


def _said(error: BaseException | None) -> str:
    return "finished" if error is None else f"raised {describe_exception(error)}"


def _compare(program: Program, want: dict[str, np.ndarray], got: dict[str, np.ndarray],
             facts: dict[str, int]) -> list[Problem]:
    outputs = [p for p in program.params if isinstance(p, BufferParam) and p.role != "in"]
    return [Problem(MISMATCH, "compare", f"cpu_llvm against interp: {failure}")
            for failure in compare_outputs(outputs, precision(program), want, got, facts)]


def _result(outcome: str, problems: list[Problem], facts: dict[str, int], launch: Launch | None = None
            ) -> CaseResult:
    if launch is not None:  # what a launch problem needs to be reproduced by hand
        where = ", ".join(f"{k}={v}" for k, v in launch.symbols.items())
        problems = [attrs.evolve(p, message=f"{p.message} [symbols {where}]")
                    if p.phase in ("interp", "cpu_llvm", "compare") else p for p in problems]
    return CaseResult(outcome, tuple(problems), tuple(sorted(facts.items())))

