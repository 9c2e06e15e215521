"""Fixtures of the cuda backend's tests: one backend for the session (its memory cache
makes a second prepare of a stdlib kernel free), and the backend on a dry-run device."""

from __future__ import annotations

import pytest

from hologram_cuda import CudaBackend


@pytest.fixture(scope="session")
def cuda() -> CudaBackend:
    return CudaBackend()


@pytest.fixture
def dry_run_device(monkeypatch):
    """The cuda backend as if an sm_90 device were here, every driver call the yielded
    cuda_dry_run.DryRunDriver's, whose kernels run on the interpreter."""
    from cuda_dry_run import install

    yield install(monkeypatch)
