"""neg-cancel: an IR pass that removes negations that cancel, bit for bit.

    a - (-b)     -> a + b        IEEE defines a - b as a + (-b); integers wrap alike
    a + (-b)     -> a - b
    (-a) + b     -> b - a        + is commutative in IEEE arithmetic
    (-a) * (-b)  -> a * b        the signs cancel; the magnitude rounds the same
    (-a) / (-b)  -> a / b        (floats; true division is a float operation)

Each rule keeps every value exactly, signed zeros, infinities and NaN included, so the
pass may run at O2. What it does *not* do, because IEEE forbids it: `-(a - b) -> b - a`
(for a == b the left side is -0.0 and the right +0.0).

A rule applies only when the negation and the node have the same dtype and the
negation's operand does too: the IR converts an operand to its node's dtype, and
`f32(-x)` for an `i8` x is not `-f32(x)` (negating -128 wraps in i8).

Ordering: after `canonicalize` (which has removed `--x` and moved constants right) and
before `cse` (so the simpler forms are shared), in O2 only.
"""

from __future__ import annotations

from typing import Callable

import attrs

import hologram
from hologram.ir import Expr, KernelIR, map_statement
from hologram.passes import Pass

__all__ = ["neg_cancel", "PASS"]


def _plain_neg(e: Expr, dtype: object) -> Expr | None:
    """The operand of `e` when `e` is a negation computed in `dtype` of a `dtype` value."""
    if e.op == "NEG" and e.dtype is dtype and e.srcs[0].dtype is dtype:
        return e.srcs[0]
    return None


def _rule(e: Expr) -> Expr | None:
    if e.op not in ("ADD", "SUB", "MUL", "DIV") or e.dtype.is_bool:
        return None
    dt = e.dtype
    a, b = e.srcs
    if a.dtype is not dt or b.dtype is not dt:
        return None
    na, nb = _plain_neg(a, dt), _plain_neg(b, dt)
    if e.op == "SUB" and nb is not None:
        return Expr("ADD", dt, (a, nb))
    if e.op == "ADD" and nb is not None:
        return Expr("SUB", dt, (a, nb))
    if e.op == "ADD" and na is not None:
        return Expr("SUB", dt, (b, na))
    if e.op == "MUL" and na is not None and nb is not None:
        return Expr("MUL", dt, (na, nb))
    if e.op == "DIV" and dt.is_float and na is not None and nb is not None:
        return Expr("DIV", dt, (na, nb))
    return None


def _rewrite(e: Expr) -> Expr:
    # each rule removes a NEG node, so this reaches its fixpoint in a few rounds
    while True:
        changed = False

        def fn(node: Expr) -> Expr | None:
            nonlocal changed
            new = _rule(node)
            changed |= new is not None
            return new

        e = e.replace(fn)
        if not changed:
            return e


def neg_cancel(kir: KernelIR) -> KernelIR:
    """`kir` with every cancelling negation removed (a pure function of `kir`)."""
    # every expression of every kind of statement (Compute, Accumulate, Scan, ...)
    body = tuple(map_statement(st, _rewrite) for st in kir.body)
    return kir if body == kir.body else attrs.evolve(kir, body=body)


PASS = Pass("neg-cancel", "ir", neg_cancel, after=("canonicalize",), before=("cse",), pipelines=("O2",),
            summary="a - (-b) -> a + b, a + (-b) -> a - b, (-a) * (-b) -> a * b, (-a) / (-b) -> a / b")


@hologram.hookimpl
def hologram_register_passes(register: Callable[[Pass], None]) -> None:
    register(PASS)
