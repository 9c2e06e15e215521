"""Public testing tools: the accuracy contract, test data, generated kernels, the oracle.

    from hologram.testing import assert_close, kernels, check_case

    assert_close(actual, expected, ulps=4)         # the accuracy contract (contract.py)

    @given(kernels())                              # random well-typed kernels (cases.py)
    def test_my_backend(case):
        check_case(case, backend="mybackend")      # run + hold to numpy (run.py)

Modules: `contract` (assert_close, ULP helpers), `values` (edge-value strategies),
`oracle` (numpy semantics of every DSL operation), `bounds` (error propagation through
composed expressions), `exprgen` (expression trees and their vocabulary), `cases`
(kernel strategies), `run` (the harness), `fuzz` (the program and document fuzzers:
`fuzz_programs`, `fuzz_documents`). See docs/testing.md.

Only `contract` is imported eagerly; the rest load on first use, so `assert_close` works
without hypothesis installed.
"""

from __future__ import annotations

import importlib
from typing import Any

from .contract import AccuracyError, assert_close, reduction_tolerance, spacing, ulp_distance, ulp_step

_LAZY = {
    "edge_values": "values", "scalars": "values", "arrays": "values", "shapes": "values", "dtypes": "values",
    "ORACLE": "oracle", "Val": "bounds", "GenConfig": "exprgen", "VOCABULARY": "exprgen",
    "KernelCase": "cases", "kernels": "cases", "expression_kernels": "cases", "index_kernels": "cases",
    "atlas_kernels": "cases", "run_kernel_text": "run", "check_case": "run",
    "fuzz_programs": "fuzz", "fuzz_documents": "fuzz", "Finding": "fuzz",
}

__all__ = ["AccuracyError", "assert_close", "reduction_tolerance", "spacing", "ulp_distance", "ulp_step", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
