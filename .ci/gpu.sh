#!/usr/bin/env bash
# The wgpu backend's share of `make test` beyond its pytest files: the held-out suite and a
# differential run of 300 examples against the interpreter (docs/gpu.md, "Tests"). Where
# wgpu cannot run (no Vulkan, Metal or DX12 driver) it says why and passes, unless
# HOLOGRAM_REQUIRE_BACKENDS names wgpu (.ci/run does): then that is a failure.
#
#     .ci/gpu.sh [PYTHON]      # PYTHON: default .venv/bin/python
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}  # Mesa probes it for a display; unset, it prints an error
if ! why=$("$PY" -c "
import sys, hologram
from hologram.registry.lookups import backends, unavailable_reason
b = backends().get('wgpu')
if b is None: sys.exit('the hologram-backend-wgpu plugin is not installed')
if not b.available(): sys.exit(unavailable_reason(b) or 'unavailable')
" 2>&1); then
    echo "wgpu does not run here: $why"
    case ",${HOLOGRAM_REQUIRE_BACKENDS:-}," in *,wgpu,*) exit 1 ;; esac
    exit 0
fi
HOLOGRAM_HELDOUT_BACKEND=wgpu "$PY" -m pytest -q tests/heldout
"$PY" -m hologram diff-test --backends interp,wgpu --examples 300 --seed 23
