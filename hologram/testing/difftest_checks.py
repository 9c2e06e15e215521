"""What the differential harness checks on one example, and the examples it draws for
a file (hologram.testing.difftest runs, shrinks and reports them).

Each check returns a `Verdict`: None (the backend agreed), a message (it failed), or
`NotCovered` (the example needs what the backend's `capabilities` do not declare, found
before `prepare` is called; or its `prepare` declined it with `UnsupportedProgram`: the
declared refusal of a backend that runs part of the ISA, docs/backends.md).

- `check_kernel`: a generated kernel case, held to the numpy oracle (`check_case`).
- `check_program`: a verified program after the `.hasm` and binary round trips and the
  ISA passes of a level, against the reference interpreter running it as drawn.
- `check_file_case`: a kernel of a user's file with inputs drawn from its signature
  (`file_cases`), against the reference interpreter running it compiled at O0, at the
  precision both programs' dataflow pins down: there is no oracle answer for a kernel
  nobody generated, so the interpreter's is the reference, as it is for programs.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import attrs
import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from hologram.core.errors import HologramError, UnsupportedProgram
from hologram.isa.asm import format_program, parse_program
from hologram.isa.encoding import decode, encode
from hologram.isa.program import BufferParam, Program
from hologram.testing import values
from hologram.testing.cases import KernelCase
from hologram.testing.isa_strategies import programs
from hologram.testing.precision import OPEN, compare_outputs, precision
from hologram.testing.run import check_case

__all__ = ["REFERENCE", "NotCovered", "Verdict", "ProgramCase", "program_cases", "launches", "check_program",
           "check_kernel", "optimize_program", "FileKernels", "FileCase", "file_cases", "check_file_case"]

REFERENCE = "interp"  # what programs, and kernels without an oracle answer, are compared against
MAX_SIZE = 5  # the largest shape symbol drawn: the reference interpreter runs one lane at a time


@attrs.frozen
class NotCovered:
    """An example a backend declined: its capabilities leave out something the program
    needs, or its `prepare` raised `UnsupportedProgram` (docs/backends.md). Neither a pass
    nor a failure; `reason` is the refusal, whole."""

    reason: str

    @staticmethod
    def of(exc: UnsupportedProgram) -> "NotCovered":
        return NotCovered(exc.render())


Verdict = str | NotCovered | None  # a failure, a declined example, or a pass


def fails(verdict: Verdict) -> bool:
    return isinstance(verdict, str)


# ------------------------------------------------------------------ program cases
@attrs.frozen(eq=False)
class ProgramCase:
    """A program and a launch of it: buffer params by name (inputs drawn, outputs zeroed),
    scalar params, shape symbols."""

    program: Program
    buffers: Mapping[str, np.ndarray]
    scalars: Mapping[str, np.generic]
    symbols: Mapping[str, int]


def _size(p: BufferParam, symbols: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(d.evaluate(symbols) for d in p.shape)


@st.composite
def launches(draw: Callable, prog: Program, max_size: int = MAX_SIZE) -> ProgramCase:
    """Arguments for one launch of `prog`: every symbol in 1..max_size, `in`/`inout`
    buffers full of edge values, `out` buffers zeroed."""
    symbols = {s: draw(st.integers(1, max_size)) for s in prog.symbols}
    buffers = {}
    for p in prog.params:
        if isinstance(p, BufferParam):
            shape = _size(p, symbols)
            assume(min(shape, default=0) >= 0)  # a hand-written `n - 3` at n = 2
            buffers[p.name] = draw(values.arrays(p.dtype.np, shape)) if p.role in ("in", "inout") \
                else np.zeros(shape, p.dtype.np)
    scalars = {name: draw(values.scalars(p.dtype.np)) for name, p in prog.scalars().items()}
    return ProgramCase(prog, buffers, scalars, symbols)


@st.composite
def program_cases(draw: Callable, max_size: int = MAX_SIZE) -> ProgramCase:
    """A generated verified program with arguments for one launch (`launches`; the
    generator's programs need every symbol >= 1)."""
    return draw(launches(draw(programs()), max_size))


def launch_on_copies(be: Any, program: Program, buffers: Mapping[str, np.ndarray], scalars: Mapping[str, Any],
                     symbols: Mapping[str, int]) -> tuple[dict[str, np.ndarray], str | None]:
    """`program` on backend `be`, on fresh copies of `buffers`: (buffers after, the error
    as `Type: message` or None). A declared refusal from `prepare` is raised."""
    bufs = {k: np.array(v, copy=True) for k, v in buffers.items()}
    try:
        executable = be.prepare(program)
    except UnsupportedProgram:
        raise
    except HologramError as exc:
        return bufs, f"{type(exc).__name__}: {exc}"
    try:
        be.launch(executable, bufs, dict(scalars), dict(symbols))
    except HologramError as exc:
        return bufs, f"{type(exc).__name__}: {exc}"
    return bufs, None


def _run_program(program: Program, backend: str, case: ProgramCase) -> tuple[dict[str, np.ndarray], str | None]:
    """`launch_on_copies` on the backend named `backend`, its declaration checked first
    (what it leaves out is not covered: `check_covers` raises)."""
    from hologram.registry.lookups import get_backend

    be = get_backend(backend)
    be.check_covers(program)
    return launch_on_copies(be, program, case.buffers, case.scalars, case.symbols)


def _round_trip(program: Program) -> Program:
    return decode(encode(parse_program(format_program(program), file="<difftest>")))


Opt = str | tuple[str, ...]  # a level ("O2"), or exactly these passes (for bisecting)


def pipeline_of(opt: Opt) -> Any:
    """The pipeline of level `opt`, or of exactly the passes `opt` names."""
    from hologram.registry.pipelines import resolve

    return resolve(opt) if isinstance(opt, str) else resolve(passes=opt)


def optimize_program(program: Program, opt: Opt) -> Program:
    """`program` after the ISA passes of pipeline `opt` (O0: none), verified."""
    return pipeline_of(opt).run_isa(program)


def check_program(case: ProgramCase, backend: str, reference: str = REFERENCE, opt: Opt = "O0") -> Verdict:
    """None when `backend`, running the program after the round trips and the ISA passes
    of `opt`, agrees with `reference` running it as drawn; NotCovered when it declines
    the program; else what differs."""
    want, want_err = _run_program(case.program, reference, case)
    tested = optimize_program(_round_trip(case.program), opt)
    try:
        got, got_err = _run_program(tested, backend, case)
    except UnsupportedProgram as exc:
        return NotCovered.of(exc)
    if tested != case.program:
        # messages name instruction positions, which passes move: compare error types
        want_err, got_err = (e and e.split(":", 1)[0] for e in (want_err, got_err))
    if want_err != got_err:
        return f"{reference} gave {want_err or 'no error'}, {backend} at {opt} gave {got_err or 'no error'}"
    if want_err:
        return None
    outputs = [p for p in case.program.params if isinstance(p, BufferParam) and p.role != "in"]
    return "\n".join(compare_outputs(outputs, precision(case.program), want, got)) or None


def check_kernel(case: KernelCase, backend: str, opt: Opt | None = None) -> Verdict:
    """None when `backend` runs `case`, compiled at optimization level `opt` (None: the
    default; a tuple: exactly those passes), as the oracle allows; NotCovered when it
    declines the kernel's program; else the failure."""
    try:
        if isinstance(opt, tuple):
            check_case(case, backend, passes=opt)
        else:
            check_case(case, backend, opt=opt)
    except AssertionError as exc:
        return str(exc)
    except UnsupportedProgram as exc:
        return NotCovered.of(exc)
    return None


# ------------------------------------------------------- a user's kernel file, no inputs
class FileKernels:
    """The kernels of one file (any format `hologram.compile_file` reads), compiled once
    per optimization level (or list of passes) and backend."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._compiled: dict[tuple[Opt, str], Any] = {}
        self.signatures = {name: k.signature for name, k in self._library("O0").items()}

    def _library(self, opt: Opt) -> Any:
        from hologram.compile_api.compile import compile_file_all

        if isinstance(opt, tuple):
            return compile_file_all(self.path, opt="O0", passes=list(opt))
        return compile_file_all(self.path, opt=opt)

    def kernel(self, name: str, opt: Opt, backend: str) -> Any:
        if (opt, name) not in self._compiled:
            for each, k in self._library(opt).items():
                self._compiled[opt, each] = k
        return self._compiled[opt, name].on(backend)


@attrs.frozen(eq=False)
class FileCase:
    """One call of kernel `kernel` of a file: its shape symbols and drawn inputs."""

    kernel: str
    symbols: Mapping[str, int]
    inputs: Mapping[str, Any]

    def describe(self) -> str:
        sizes = ", ".join(f"{k} = {v}" for k, v in self.symbols.items()) or "no shape symbols"
        with np.printoptions(threshold=64, edgeitems=4, linewidth=100):
            args = "\n".join(f"  {name} = {np.array_repr(np.asarray(v))}" for name, v in self.inputs.items())
        return f"kernel {self.kernel!r} at {sizes}, with the inputs\n{args}"


@st.composite
def file_cases(draw: Callable, signatures: Mapping[str, Any], max_size: int = MAX_SIZE) -> FileCase:
    """A kernel of the file and inputs for one call of it, drawn from its signature with
    the test kit's strategies (edge values, NaN and infinities included): every shape
    symbol in 0..max_size, such that no input or output has a negative dimension."""
    name = draw(st.sampled_from(sorted(signatures)))
    sig = signatures[name]
    symbols = {s: draw(st.integers(0, max_size)) for s in sig.symbols}
    shapes = {p.name: tuple(int(d.evaluate(symbols)) for d in p.shape) for p in sig.inputs + sig.outputs}
    assume(all(min(shape, default=0) >= 0 for shape in shapes.values()))
    inputs = {p.name: draw(values.scalars(p.dtype.np)) if p.kind == "scalar"
              else draw(values.arrays(p.dtype.np, shapes[p.name])) for p in sig.inputs}
    return FileCase(name, symbols, inputs)


def _call(kernel: Any, case: FileCase) -> tuple[dict[str, np.ndarray], HologramError | None]:
    try:
        result = kernel(**{k: np.array(v, copy=True) for k, v in case.inputs.items()})
    except UnsupportedProgram:
        raise
    except HologramError as exc:
        return {}, exc
    names = kernel.signature.output_names
    return {n: np.asarray(r) for n, r in zip(names, result if len(names) > 1 else (result,))}, None


def _said(error: HologramError | None) -> str:
    return "returned" if error is None else f"raised {type(error).__name__}: {error.message}"


def check_file_case(kernels: FileKernels, case: FileCase, backend: str, opt: Opt) -> Verdict:
    """None when `backend`, running the kernel compiled at `opt`, agrees with the
    reference interpreter running it compiled at O0: the same class of error, or the
    same outputs at the precision both programs pin down (`precision`)."""
    reference = kernels.kernel(case.kernel, "O0", REFERENCE)
    tested = kernels.kernel(case.kernel, opt, backend)
    want, want_err = _call(reference, case)
    try:
        got, got_err = _call(tested, case)
    except UnsupportedProgram as exc:
        return NotCovered.of(exc)
    if type(want_err) is not type(got_err):
        return f"{REFERENCE} at O0 {_said(want_err)}; {backend} at {opt} {_said(got_err)}\n{case.describe()}"
    if want_err is not None:
        return None
    wanted, tested_levels = precision(reference.program), precision(tested.program)
    levels = {name: max(level, tested_levels.get(name, OPEN)) for name, level in wanted.items()}
    failures = compare_outputs(reference.signature.outputs, levels, want, got)
    return "\n".join([*failures, case.describe()]) if failures else None

