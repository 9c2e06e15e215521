"""Fixtures of the cuda backend's tests: one backend for the session (its memory cache
makes a second prepare of a stdlib kernel free)."""

from __future__ import annotations

import pytest

from hologram_cuda import CudaBackend


@pytest.fixture(scope="session")
def cuda() -> CudaBackend:
    return CudaBackend()
