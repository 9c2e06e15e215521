"""The object fuzzer's oracle: what must hold for any object code a trusted bundle ships.

`check_object_case(case, phase)` runs in a worker process (fuzz_pool.py) and judges one
mutated object (fuzz_mutate_objects.py) of a kernel's program, as cpu_llvm receives it
from a bundle loaded with `trust_native=True`:

1. `check_native` (what `hologram bundle verify` runs) says what is wrong, or nothing;
   it never raises.
2. `prepare_native`, on a fresh backend, links the object or refuses it, saying why in
   a HologramWarning; it never raises, never crashes the process, never runs past its
   budget, and never links what `check_native` refused. A mutation that must be refused
   (a section, symbol or relocation outside the file or its section, a limit passed,
   ...) and was linked is an `unchecked` finding.
3. Linked code runs: launched with guarded arrays beside the reference interpreter, it
   writes nothing outside its arrays and computes what the interpreter computes (at the
   precision the program pins down, as the program fuzzer compares).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import attrs
import numpy as np

from hologram.testing.fuzz_common import (DIVERGENCE, EXCEPTION, INTERNAL, UNCHECKED, CaseResult, Problem,
                                          describe_exception)
from hologram.testing.fuzz_program_oracle import _compare, _launch, _said, choose_launch

Phase = Callable[..., None]


@attrs.frozen
class ObjectCase:
    """One mutant: `program` (a kernel's encoded program) with `native`, what cpu_llvm's
    `compile_native` made of it, its object mutated. `origin` names the kernel,
    `mutations` what was done, `refuse` whether one of them must make the loader refuse
    the object; `input_seed` draws the launch."""

    origin: str
    mutations: tuple[str, ...]
    input_seed: int
    program: bytes
    native: dict[str, Any] = attrs.field(hash=False)
    refuse: bool = False

    def describe(self) -> str:
        return (f"the {self.native.get('target')} object code of kernel '{self.origin}' "
                f"({len(self.native['object'])} bytes), mutated: the .o file beside this one")


class _Linked:
    """A backend whose `prepare` is the executable `prepare_native` made (for `_launch`)."""

    def __init__(self, backend: Any, executable: Any):
        self.backend, self.executable = backend, executable

    def prepare(self, program: Any) -> Any:
        return self.executable

    def launch(self, executable: Any, buffers: Any, scalars: Any, symbols: Any) -> None:
        self.backend.launch(executable, buffers, scalars, symbols)


def check_object_case(case: ObjectCase, phase: Phase) -> CaseResult:
    """Judge one mutant (see the module docstring)."""
    from hologram.isa.encoding import decode
    from hologram.testing.run import fresh_backend

    program = decode(case.program)
    backend = fresh_backend("cpu_llvm", num_threads=2, cache_dir=False)  # nothing prepared, nothing cached
    phase("check", True)
    try:
        problem = backend.check_native(program, case.native)
    except Exception as exc:  # noqa: BLE001 - the point of the oracle
        return CaseResult("refused", (Problem(EXCEPTION, "check", f"check_native raised {describe_exception(exc)}"),))
    phase("load", True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            exe = backend.prepare_native(program, [case.native])
        except Exception as exc:  # noqa: BLE001
            return CaseResult("refused", (Problem(EXCEPTION, "load", f"prepare_native raised "
                                                                     f"{describe_exception(exc)}"),))
    said = [str(w.message) for w in caught if "is not used" in str(w.message)]
    if exe is None:
        quiet = () if said else (Problem(INTERNAL, "load", "prepare_native refused the object without saying why"),)
        return CaseResult("refused", quiet)
    problems = []
    if problem is not None:
        problems.append(Problem(INTERNAL, "load", f"prepare_native linked what check_native refuses: {problem}"))
    if case.refuse:
        problems.append(Problem(UNCHECKED, "load", "malformed object code was linked: " + "; ".join(case.mutations)))
    if problems:
        return CaseResult("linked", tuple(problems))
    return _run(program, backend, exe, fresh_backend("interp"), case.input_seed, phase)


def _run(program: Any, backend: Any, exe: Any, interp: Any, input_seed: int, phase: Phase) -> CaseResult:
    """The linked code against the interpreter, on one launch."""
    launch = choose_launch(program, np.random.default_rng(input_seed))
    phase("interp", False)
    want = _launch(interp, "interp", program, launch)
    phase("cpu_llvm", want.error is None)
    got = _launch(_Linked(backend, exe), "cpu_llvm", program, launch)
    problems = list(want.problems + got.problems)
    facts = {"linked": 1}
    if not problems:
        if (want.error is None) != (got.error is None):
            problems.append(Problem(DIVERGENCE, "compare", f"interp {_said(want.error)}, cpu_llvm {_said(got.error)}"))
        elif want.error is None:  # both finished (both raising: nothing to compare)
            problems += _compare(program, want.outputs, got.outputs, facts)
    return CaseResult("ran", tuple(problems), tuple(sorted(facts.items())))
