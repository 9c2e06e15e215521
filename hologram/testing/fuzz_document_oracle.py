"""The document fuzzer's oracle: what must hold for any kernel document, however mutated.

`check_document_case(case, phase)` runs in a worker process (fuzz_pool.py):

1. `hologram.compile_all(text, format, file)` either succeeds or raises a HologramError
   that points into the document: a `span` naming the file, a line within it and a
   column >= 1. Any other exception, an error without a position, a `PluginError` (a
   built-in translator crashed) or a `VerifyError` (the compiler produced a program the
   verifier refuses) is a finding; so is a compile that overruns its time budget.
2. Up to two kernels of a compiled document run on both backends (interp, then cpu_llvm),
   each called twice (the fully checked call and the fast path), with small shape symbols,
   every input and output a view between canaries (`out=`). A call may return or raise a
   HologramError (an ArgumentError for sizes the kernel refuses, an ExecutionError); never
   another exception, never a change to the canaries or to an input.
3. When both backends return, each output is compared at the precision its program pins
   down (`precision.precision`) with `assert_close`; when one
   raises and the other returns, or they raise different error classes, that is a
   divergence (a compiled program has no races: the compiler writes none).
"""

from __future__ import annotations

from typing import Any, Callable

import attrs
import numpy as np

from hologram.core.errors import HologramError, PluginError, VerifyError
from hologram.testing.fuzz_common import (DIVERGENCE, EXCEPTION, INTERNAL, MISMATCH, NO_POSITION, CaseResult, Guarded,
                                          Problem, check_guards, describe_exception, fill, scalar)
from hologram.testing.precision import compare_outputs, precision

Phase = Callable[..., None]
EXTENSIONS = {"toml": "toml", "yaml": "yaml", "json": "json"}
MAX_ELEMENTS = 1 << 14
KERNELS_RUN = 2


@attrs.frozen
class DocumentCase:
    origin: str
    mutations: tuple[str, ...]
    format: str
    text: str
    input_seed: int

    @property
    def file(self) -> str:
        return f"fuzz.{EXTENSIONS.get(self.format, self.format)}"


def position_problem(exc: HologramError, case: DocumentCase, phase: str) -> Problem | None:
    """None when `exc` is a clean document error: a class that belongs to documents and a
    span inside this document."""
    if isinstance(exc, VerifyError):
        return Problem(INTERNAL, phase, f"the compiler produced a program the verifier refuses: "
                                        f"{describe_exception(exc)}")
    if isinstance(exc, PluginError):
        return Problem(INTERNAL, phase, f"a built-in translator failed: {describe_exception(exc)}")
    span = exc.span
    lines = case.text.count("\n") + 1
    if span is None:
        return Problem(NO_POSITION, phase, f"{type(exc).__name__} without a position: {exc.message[:500]}")
    if span.file != case.file or not (1 <= span.line <= lines + 1) or span.col < 1:
        return Problem(NO_POSITION, phase, f"{type(exc).__name__} points at {span.file}:{span.line}:{span.col}, "
                                           f"outside {case.file} ({lines} lines): {exc.message[:300]}")
    return None


@attrs.frozen
class _Call:
    error: BaseException | None
    outputs: dict[str, np.ndarray]
    problems: tuple[Problem, ...]


ABSURD_BYTES = 1 << 44  # an output this large cannot be allocated anywhere: the call must refuse it


def _arguments(kernel: Any, rng: np.random.Generator) -> tuple[dict[str, Any], list[tuple[int, ...]] | None] | None:
    """Inputs and output shapes under small symbol values, or None when no binding tried
    gives every dimension a size >= 0 within MAX_ELEMENTS. The output shapes are None
    when inputs fit but an output is absurdly large (a constant dimension in the
    trillions): the kernel is then called without `out=`, and must refuse cleanly."""
    sig = kernel.signature
    for attempt in range(6):
        top = 4 if attempt < 4 else 1
        symbols = {s: int(rng.integers(0 if rng.random() < 0.1 else 1, top + 1)) for s in sig.symbols}
        try:
            shapes = {p.name: tuple(int(d.evaluate(symbols)) for d in p.shape) for p in sig.inputs + sig.outputs}
        except (KeyError, TypeError, ValueError, OverflowError):
            continue
        if any(min(s, default=0) < 0 for s in shapes.values()):
            continue
        sizes = {p.name: int(np.prod(shapes[p.name], dtype=object)) for p in sig.inputs + sig.outputs}
        absurd = [p for p in sig.outputs if sizes[p.name] * p.dtype.np.itemsize >= ABSURD_BYTES]
        if sum(sizes[p.name] for p in sig.inputs) + sum(sizes[p.name] for p in sig.outputs if p not in absurd) \
                > MAX_ELEMENTS or any(max(shapes[p.name], default=0) > MAX_ELEMENTS for p in sig.inputs):
            continue
        inputs = {p.name: scalar(rng, p.dtype.np) if p.kind == "scalar" else fill(rng, p.dtype.np, shapes[p.name])
                  for p in sig.inputs}
        return inputs, None if absurd else [shapes[p.name] for p in sig.outputs]
    return None


def _call(kernel: Any, backend: str, inputs: dict[str, Any], out_shapes: list[tuple[int, ...]] | None) -> _Call:
    sig = kernel.signature
    problems: list[Problem] = []
    outputs: dict[str, np.ndarray] = {}
    error: BaseException | None = None
    try:
        k = kernel.on(backend)
    except HologramError as exc:
        return _Call(exc, {}, ())
    for call in ("checked", "fast"):  # the second call with the same shapes takes the fast path
        arrays = {n: Guarded(v) for n, v in inputs.items() if isinstance(v, np.ndarray)}
        outs = {p.name: Guarded(np.zeros(shape, p.dtype.np)) for p, shape in zip(sig.outputs, out_shapes or ())}
        args = {n: arrays[n].inner if n in arrays else v for n, v in inputs.items()}
        try:
            k(**args, out=tuple(g.inner for g in outs.values()) if out_shapes is not None else None)
        except HologramError as exc:
            error = exc
        except Exception as exc:  # noqa: BLE001 - the point of the oracle
            error = exc
            problems.append(Problem(EXCEPTION, backend, f"{backend}: the {call} call raised "
                                                        f"{describe_exception(exc)}"))
        problems += check_guards({**arrays, **outs}, set(arrays), backend, f"{backend} ({call} call)")
        outputs = {n: g.inner.copy() for n, g in outs.items()}
        if error is not None:
            break
    return _Call(error, outputs, tuple(problems))


def check_document_case(case: DocumentCase, phase: Phase) -> CaseResult:
    """Judge one mutant document (see the module docstring)."""
    import hologram

    phase("compile", True)
    try:
        lib = hologram.compile_all(case.text, format=case.format, file=case.file)
    except HologramError as exc:
        problem = position_problem(exc, case, "compile")
        return CaseResult("refused", (problem,) if problem else ())
    except Exception as exc:  # noqa: BLE001
        return CaseResult("refused", (Problem(EXCEPTION, "compile", f"compile raised {describe_exception(exc)}"),))
    rng = np.random.default_rng(case.input_seed)
    names = sorted(lib)
    chosen = [names[int(j)] for j in sorted(rng.choice(len(names), min(KERNELS_RUN, len(names)), replace=False))]
    problems: list[Problem] = []
    facts = {"compiled": 1}
    for name in chosen:
        kernel = lib[name]
        args = _arguments(kernel, rng)
        if args is None:
            facts["unbindable"] = facts.get("unbindable", 0) + 1
            continue
        inputs, out_shapes = args
        phase("interp", False)
        want = _call(kernel, "interp", inputs, out_shapes)
        phase("cpu_llvm", want.error is None)
        got = _call(kernel, "cpu_llvm", inputs, out_shapes)
        facts["launched"] = facts.get("launched", 0) + 1
        found = list(want.problems + got.problems)
        if not found and ((want.error is None) != (got.error is None) or type(want.error) is not type(got.error)):
            found.append(Problem(DIVERGENCE, "compare", f"kernel {name!r}: interp {_said(want.error)}, "
                                                        f"cpu_llvm {_said(got.error)}"))
        elif not found and want.error is None:
            found += _compare(kernel, want.outputs, got.outputs, facts)
        shapes = ", ".join(f"{n}: {np.shape(v)}" for n, v in inputs.items())  # to reproduce it by hand
        problems += [attrs.evolve(p, message=f"{p.message} [inputs {shapes}]") for p in found]
    return CaseResult("ran" if facts.get("launched") else "compiled", tuple(problems), tuple(sorted(facts.items())))


def _said(error: BaseException | None) -> str:
    return "returned" if error is None else f"raised {describe_exception(error)}"


def _compare(kernel: Any, want: dict[str, np.ndarray], got: dict[str, np.ndarray], facts: dict[str, int]) -> list[Problem]:
    return [Problem(MISMATCH, "compare", f"kernel {kernel.name!r}, cpu_llvm against interp: {failure}")
            for failure in compare_outputs(kernel.signature.outputs, precision(kernel.program), want, got, facts)]
