"""What the fuzzers' workers hand back, and the guarded arrays every launch writes into.

A `Problem` is one thing the oracle objects to in one case; a `CaseResult` is the verdict
on a case (its outcome plus its problems), small and picklable so a worker process can
send it to the parent. `Guarded` places a buffer inside a larger array between two
canary regions, so a launch that writes outside its arrays is seen even when nothing
crashes.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

# Problem kinds, as they appear in findings (docs/testing.md, "Fuzzing").
CRASH = "crash"              # the worker process died (a segfault, an abort)
TIMEOUT = "timeout"          # a phase ran past its budget where that is a defect
EXCEPTION = "exception"      # an exception that is not a HologramError escaped
WRONG_ERROR = "wrong-error"  # a HologramError of another class than the step promises
NO_POSITION = "no-position"  # a document error without file, line and column
CANARY = "canary"            # memory next to an array changed: a write out of bounds
INPUT_WRITTEN = "input-written"  # an `in` buffer changed
VERIFIER_HOLE = "verifier-hole"  # a verified program's unchecked access failed at run time
ROUND_TRIP = "round-trip"    # a verified program changed through its text or binary form
MISMATCH = "mismatch"        # two backends disagree on a deterministic launch
DIVERGENCE = "divergence"    # one backend raised and the other did not (or another error)
INTERNAL = "internal"        # a stage refused what an earlier stage produced
HARNESS = "harness"          # the checker itself failed (a bug in the fuzzer, or an unguarded call)
UNCHECKED = "unchecked"      # object code that had to be refused was linked

KINDS = (CRASH, TIMEOUT, EXCEPTION, WRONG_ERROR, NO_POSITION, CANARY, INPUT_WRITTEN, VERIFIER_HOLE,
         ROUND_TRIP, MISMATCH, DIVERGENCE, INTERNAL, HARNESS, UNCHECKED)


@attrs.frozen
class Problem:
    kind: str
    phase: str
    message: str


@attrs.frozen
class CaseResult:
    """outcome: how the case ended (`refused` by a checker, `ran`, `racy`, `skipped`,
    `timeout`, `crash`, ...); problems: what the oracle objects to (empty: the case
    passed); facts: counts for the run's statistics (`compared` outputs, ...)."""

    outcome: str
    problems: tuple[Problem, ...] = ()
    facts: tuple[tuple[str, int], ...] = ()


def describe_exception(exc: BaseException) -> str:
    text = str(exc)
    if len(text) > 2000:
        text = text[:2000] + f"... ({len(text)} characters)"
    return f"{type(exc).__name__}: {text}"


# ------------------------------------------------------------------ guarded arrays
GUARD_BYTES = 512


def _canary(nbytes: int) -> np.ndarray:
    """A byte pattern without long runs of one value, so a stray write of any value
    (zero, all ones, a copied element) changes it."""
    return ((np.arange(nbytes, dtype=np.uint32) * 167 + 0x5A) & 0xFF).astype(np.uint8)


class Guarded:
    """A C-contiguous array of `shape` and `dtype` that is a view into the middle of a
    larger 1-D array; the bytes before and after it hold a canary pattern."""

    def __init__(self, values: np.ndarray):
        values = np.asarray(values)
        self.dtype, self.shape = values.dtype, values.shape
        item = self.dtype.itemsize
        self.guard = max(8, GUARD_BYTES // item)
        n = values.size
        self.backing = np.empty(self.guard + n + self.guard, self.dtype)
        raw = self.backing.view(np.uint8)
        self.pattern = _canary(raw.size)
        raw[:] = self.pattern
        self.inner = self.backing[self.guard:self.guard + n].reshape(self.shape)
        self.inner[...] = values
        self.initial = values.copy()

    def intact(self) -> bool:
        raw = self.backing.view(np.uint8)
        lo = self.guard * self.dtype.itemsize
        hi = lo + self.inner.size * self.dtype.itemsize
        return bool(np.array_equal(raw[:lo], self.pattern[:lo]) and np.array_equal(raw[hi:], self.pattern[hi:]))

    def unchanged(self) -> bool:
        """The inner array holds the bytes it started with (for `in` buffers)."""
        return self.inner.tobytes() == self.initial.tobytes()


def guard_all(values: dict[str, np.ndarray]) -> dict[str, Guarded]:
    return {name: Guarded(v) for name, v in values.items()}


def check_guards(guards: dict[str, Guarded], read_only: set[str], phase: str, backend: str) -> list[Problem]:
    problems = []
    for name, g in guards.items():
        if not g.intact():
            problems.append(Problem(CANARY, phase, f"{backend}: the memory around buffer '{name}' "
                                                   f"({g.dtype}, shape {g.shape}) changed: a write out of bounds"))
        if name in read_only and not g.unchanged():
            problems.append(Problem(INPUT_WRITTEN, phase, f"{backend}: input buffer '{name}' changed"))
    return problems


# ------------------------------------------------------------------ random choices
def pick(rng: np.random.Generator, seq: Any) -> Any:
    """One element of `seq`, drawn by `rng` (also for sequences numpy would turn into an
    array of objects, or mix up: tuples of values, DType members)."""
    seq = list(seq)
    return seq[int(rng.integers(len(seq)))]


# ------------------------------------------------------------------ input values
def fill(rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Values for an input: small numbers mostly, with the type's edge values mixed in."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if dtype.kind == "b":
        out = rng.integers(0, 2, n).astype(bool)
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo = max(int(info.min), -9)
        out = rng.integers(lo, 10, n, endpoint=True).astype(dtype)
        edges = [int(info.min), int(info.max), 0, 1, 95, 96]
        for k in np.flatnonzero(rng.random(n) < 0.15):
            out[k] = edges[int(rng.integers(len(edges)))]
    else:
        out = (rng.standard_normal(n) * 4).astype(dtype)
        fi = np.finfo(dtype)
        edges = [np.nan, np.inf, -np.inf, -0.0, 0.0, float(fi.max), float(fi.smallest_subnormal), 1.0]
        with np.errstate(all="ignore"):
            for k in np.flatnonzero(rng.random(n) < 0.1):
                out[k] = edges[int(rng.integers(len(edges)))]
    return out.reshape(shape)


def scalar(rng: np.random.Generator, dtype: np.dtype) -> Any:
    return fill(rng, dtype, (1,))[0]
