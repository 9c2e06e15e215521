"""Fixtures of the cpu_llvm runtime's tests: backends around the hand-written modules of runtime_cases.py."""

from __future__ import annotations

from typing import Callable

import pytest

from hologram.isa.program import Program
from hologram_cpu_llvm import CpuLlvmBackend

from runtime_cases import REV, HandWritten, fake_codegen


@pytest.fixture
def fake_backend(tmp_path) -> Callable[..., tuple[CpuLlvmBackend, Callable]]:
    """Makes (backend, its code generator) for a hand-written module: two threads unless told
    otherwise, and one disk cache for every backend of a test, so that a second backend starts
    with an empty memory cache and a warm disk."""
    def make(module: HandWritten, *, threads: int = 2, codegen_version: str = "test-1"):
        codegen = fake_codegen(module.module_ir, *module.entries)
        backend = CpuLlvmBackend(num_threads=threads, cache_dir=tmp_path / "cache", codegen=codegen,
                                 codegen_version=codegen_version)
        return backend, codegen
    return make


@pytest.fixture
def rev(fake_backend) -> tuple[Program, CpuLlvmBackend]:
    """The reversal program and a two-thread backend for it."""
    return REV.program(), fake_backend(REV)[0]
