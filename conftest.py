"""Hypothesis profiles for every test root (tests/, plugins/*/tests/): hence the repository root.

`ci` (selected when CI is set, and by the README test command) keeps the suite inside
its time budget on a 2-core machine; `dev` is the default; `long` is for `make difftest`-
style soak runs (HYPOTHESIS_PROFILE=long).
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=50, deadline=None)
settings.register_profile(
    "ci", max_examples=30, deadline=None, derandomize=True, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("long", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def pytest_sessionstart(session) -> None:
    """HOLOGRAM_REQUIRE_BACKENDS=wgpu,... (set by .ci/run): a named backend that cannot run
    here stops the session with its reason, where its tests would otherwise skip: in CI a
    skipped GPU test is a missing driver, not a pass."""
    wanted = [n for n in os.environ.get("HOLOGRAM_REQUIRE_BACKENDS", "").split(",") if n.strip()]
    if not wanted:
        return
    import pytest

    from hologram.registry.lookups import backends, unavailable_reason

    found = backends()
    for name in (n.strip() for n in wanted):
        if name not in found:
            raise pytest.UsageError(f"HOLOGRAM_REQUIRE_BACKENDS: backend {name!r} is not installed")
        if not found[name].available():
            raise pytest.UsageError(f"HOLOGRAM_REQUIRE_BACKENDS: backend {name!r} is not available here: "
                                    f"{unavailable_reason(found[name]) or 'it gives no reason'}")
