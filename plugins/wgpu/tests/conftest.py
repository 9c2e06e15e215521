"""The wgpu backend's tests need wgpu and an adapter (on a machine without a GPU, Mesa's
software Vulkan driver: apt-get install mesa-vulkan-drivers libvulkan1); without them
every test here is skipped, saying which is missing."""

from __future__ import annotations

import importlib.util

import pytest


@pytest.fixture(scope="session")
def wgpu_backend():
    if importlib.util.find_spec("wgpu") is None:
        pytest.skip("wgpu is not installed (pip install wgpu)")
    if importlib.util.find_spec("hologram_wgpu") is None:
        pytest.skip("the hologram-backend-wgpu plugin is not installed (pip install -e plugins/wgpu)")
    import hologram
    from hologram_wgpu.device import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    return hologram.get_backend("wgpu")
