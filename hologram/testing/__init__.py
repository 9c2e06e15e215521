"""Public testing tools: the accuracy contract, test data, generated kernels, the oracle.

    from hologram.testing import assert_close, kernels, check_case

    assert_close(actual, expected, ulps=4)         # the accuracy contract (contract.py)

    @given(kernels())                              # random well-typed kernels (generated.py)
    def test_my_backend(case):
        check_case(case, backend="mybackend")      # run + hold to numpy (run.py)

Modules: `contract` (assert_close, ULP helpers), `values` (edge-value strategies),
`bounds` (error propagation through composed expressions), `exprgen` (expression trees
and their vocabulary), `cases`, `view_cases` and `gather_cases` (kernel strategies;
`generated` mixes them), `run` (the harness), `fuzz` (the
program, document and object-code fuzzers: `fuzz_programs`, `fuzz_documents`,
`fuzz_objects`). The oracle (numpy's
semantics of every DSL operation) is `hologram.core.semantics`, which the compiler's
constant folding shares; it is re-exported here as `ORACLE`. See docs/testing.md.

This is the test kit: it needs the `test` extra (hypothesis), which the compiler and
the runtime never import.
"""

from __future__ import annotations

from hologram.core.semantics import ORACLE
from hologram.testing.bounds import Val
from hologram.testing.cases import KernelCase, atlas_kernels, expression_kernels, index_kernels
from hologram.testing.contract import AccuracyError, assert_close, reduction_tolerance, spacing, ulp_distance, ulp_step
from hologram.testing.exprgen import VOCABULARY, GenConfig
from hologram.testing.fuzz import Finding, fuzz_documents, fuzz_objects, fuzz_programs
from hologram.testing.gather_cases import gather_kernels, scatter_kernels
from hologram.testing.generated import kernels
from hologram.testing.run import check_case, run_kernel_text
from hologram.testing.values import arrays, dtypes, edge_values, scalars, shapes

__all__ = ["AccuracyError", "assert_close", "reduction_tolerance", "spacing", "ulp_distance", "ulp_step",
           "edge_values", "scalars", "arrays", "shapes", "dtypes", "ORACLE", "Val", "GenConfig", "VOCABULARY",
           "KernelCase", "kernels", "expression_kernels", "index_kernels", "atlas_kernels", "gather_kernels",
           "scatter_kernels", "run_kernel_text",
           "check_case", "fuzz_programs", "fuzz_documents", "fuzz_objects", "Finding"]
