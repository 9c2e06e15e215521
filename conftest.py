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
