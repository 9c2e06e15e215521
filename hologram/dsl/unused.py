"""Temporaries a kernel body assigns and never reads.

The compiler keeps only what its outputs need, so a statement whose temporary nothing
reads is dropped by the first cleanup pass, silently; a name the writer meant to use (a
typo in the later statement, a forgotten `return`) then shows nowhere. The analyzer
warns about each such temporary with a `CompileWarning` at its assignment, whichever
translator wrote the body (TOML, a Python function: docs/dsl.md, "The body"), unless
the translator generated the temporaries' names itself (`KernelDef.authored_temporaries`).
"""

from __future__ import annotations

from typing import Collection

from hologram.core.errors import CompileWarning
from hologram.dsl import ast


def unused_temporaries(body: ast.Body, outputs: Collection[str]) -> list[CompileWarning]:
    """A warning for every name `body` assigns that is not in `outputs` and that no
    statement reads (its target's own name excluded: assigning is not reading)."""
    read = {n.id for st in body.statements
            for part in (*(st.indices or ()), st.value) for n in ast.walk(part) if isinstance(n, ast.Name)}
    return [CompileWarning(f"temporary {st.target.id!r} is assigned but never used: the kernel computes it for "
                           "nothing", st.target.span,
                           hint=f"remove the statement, or use {st.target.id!r}; only outputs are returned")
            for st in body.statements if st.target.id not in outputs and st.target.id not in read]
