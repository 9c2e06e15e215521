#!/usr/bin/env bash
# The plain install, as a user gets it: build the wheels (hologram-kernels and every plugin
# folder under plugins/, found by its pyproject.toml), install them into a fresh virtual environment with no extras and no editable paths (`pip install hologram-kernels`
# with the wheels as the only place our distributions come from), then run the CLI, a
# kernel on every backend and the README demo there. An install-path defect (a missing
# dependency or package file, a run-time import of the test extra, no backend) fails here.
#
#     .ci/wheels.sh [PYTHON]      # `make wheel-check`; PYTHON (default .venv/bin/python)
#                                 # needs pip and setuptools>=77, as the dev venv has
#     .ci/wheels.sh --plugins     # the plugin folders it builds, one a line, and nothing else
#
# Our distributions are built without build isolation (the given Python's setuptools), so
# nothing is downloaded for the build; their dependencies (numpy, llvmlite, ...) come from
# the configured index and pip's cache. Set KEEP_WHEEL_CHECK=1 to keep the temporary
# directory for a look.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PLUGINS=()  # every folder under plugins/ with a pyproject.toml: a new plugin needs no edit here
for project in plugins/*/pyproject.toml; do PLUGINS+=("$(dirname "$project")"); done
if [ "${1:-}" = "--plugins" ]; then printf '%s\n' "${PLUGINS[@]}"; exit 0; fi
PY=${1:-${PYTHON:-$ROOT/.venv/bin/python}}
case $PY in /*) ;; */*) PY=$ROOT/$PY ;; esac  # a relative path still names it after the cd below

WORK=$(mktemp -d "${TMPDIR:-/tmp}/hologram-wheel-check.XXXXXX")
cleanup() { if [ -z "${KEEP_WHEEL_CHECK:-}" ]; then rm -rf "$WORK"; else echo "kept $WORK"; fi; }
trap cleanup EXIT
step() { printf '\n== wheel-check: %s\n' "$*"; }

# Build from a copy of the sources, so the build leaves no build/ or *.egg-info in the tree.
step "building the wheels"
mkdir -p "$WORK/src" "$WORK/wheels"
tar -C "$ROOT" --exclude='__pycache__' --exclude='*.egg-info' --exclude='build' \
    -cf - pyproject.toml setup.py MANIFEST.in README.md kernels hologram "${PLUGINS[@]}" | tar -C "$WORK/src" -xf -
"$PY" -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir "$WORK/wheels" \
    "$WORK/src" "${PLUGINS[@]/#/$WORK/src/}"
ls "$WORK/wheels"

step "installing hologram-kernels into a fresh venv (no extras)"
"$PY" -m venv --without-pip "$WORK/venv"
VPY=$WORK/venv/bin/python
# pip runs from the build Python and installs into the new venv; our distributions can
# come only from the wheels (none is on the index), the rest from the index or pip's cache.
"$PY" -m pip --python "$VPY" install --quiet --find-links "$WORK/wheels" hologram-kernels

# From here on nothing of the checkout may be imported: run elsewhere, with a clean path.
cd "$WORK"
unset PYTHONPATH HOLOGRAM_BACKEND HOLOGRAM_PLUGINS HOLOGRAM_OPT
export HOLOGRAM_CACHE_DIR=$WORK/cache COLUMNS=100
"$VPY" - "$WORK/venv" <<'EOF'
import importlib.metadata as md, importlib.util, platform, sys
import hologram
venv = sys.argv[1]
assert hologram.__file__.startswith(venv), f"hologram imported from {hologram.__file__}, not the fresh venv"
have = {d.metadata["Name"]: d.version for d in md.distributions()}
ours = sorted(n for n in have if n.startswith("hologram"))
print("installed:", ", ".join(f"{n} {have[n]}" for n in ours))
assert "hologram-backend-interp" in have, "the plain install brought no reference interpreter"
assert "hologram-translator-sigil" in have, "the plain install brought no sigil translator"
assert "hologram-translator-python" in have, "the plain install brought no translator of Python functions"
native = platform.python_implementation() == "CPython" and (sys.platform, platform.machine()) in {
    ("linux", "x86_64"), ("linux", "aarch64"), ("darwin", "arm64"), ("win32", "AMD64")}
assert ("hologram-backend-cpu-llvm" in have) == native, f"cpu_llvm installed: {'hologram-backend-cpu-llvm' in have}"
for extra in ("hypothesis", "pytest"):
    assert importlib.util.find_spec(extra) is None, f"{extra} is installed: the test extra leaked into the plain install"
print("backends:", ", ".join(hologram.list_backends()), "- default:", hologram.get_backend().name)
EOF

HOLOGRAM=$WORK/venv/bin/hologram
step "hologram plugins"
"$HOLOGRAM" plugins
step "hologram run (every backend)"
for backend in $("$VPY" -c "import hologram; print(*hologram.list_backends())"); do
    "$HOLOGRAM" run "$ROOT/kernels/axpy.toml" --bind n=5 --input alpha=2 --backend "$backend"
done
step "hologram diff-test without the test extra says what to install"
if "$HOLOGRAM" diff-test --examples 1 2> "$WORK/difftest.err"; then
    echo "diff-test ran without hypothesis installed?"; exit 1
fi
grep -F "pip install 'hologram-kernels[test]'" "$WORK/difftest.err"
step "the stdlib bundle the wheel carries loads by name, with no compiler"
"$VPY" - "$WORK/venv" <<'EOF'
import sys
import numpy as np
import hologram
from hologram.bundles.load import discover
venv = sys.argv[1]
(found,) = discover("stdlib")
assert found.path.startswith(venv) and found.make is None, f"stdlib is not the wheel's: {found}"
lib = hologram.load_bundle("stdlib")
x = np.linspace(-3, 3, 1000, dtype=np.float32)
e = np.exp(x - x.max())
assert np.allclose(lib.softmax(x), e / e.sum(), rtol=1e-6)
assert "lark" not in sys.modules, "loading the stdlib bundle imported the parser"
print(f"stdlib {found.version}: {len(lib)} kernels from {found.path}")
EOF
"$HOLOGRAM" bundle list stdlib
"$HOLOGRAM" bundle verify "$("$VPY" -c "from hologram.bundles.load import discover; print(discover('stdlib')[0].path)")"

step "sigil circuits: a .sigil file, a circuit key, a bundle of both (every backend)"
mkdir -p "$WORK/circuits"
printf 'kernel seeds 1.0.0 "the seeds example"\n  copy@c05->c06 . mark@c21 . copy@c05->c06 . mark@c21\n' \
    > "$WORK/circuits/seeds.sigil"
printf '[kernel]\nname = "softmax"\nversion = "1.0.0"\ncircuit = """\n%s\n"""\n' \
    "reduce_max@c00->c01 . split_sub@c02[c00,c01] . merge_exp@c02[c02] . reduce_sum@c02->c04 . split_div@c03[c02,c04]" \
    > "$WORK/circuits/softmax.toml"
"$HOLOGRAM" compile "$WORK/circuits/seeds.sigil" --emit stats | grep -F "circuit: 4 ops -> 1 op"
"$HOLOGRAM" sigil "copy@c05->c06 . mark@c21 . copy@c05->c06 . mark@c21"
"$HOLOGRAM" bundle build "$WORK/circuits" --name circuits --version 1.0.0 --native none -o "$WORK/circuits.hgb"
"$VPY" - "$WORK/circuits.hgb" <<'EOF'
import sys
import numpy as np
import hologram
import hologram_sigil
x = np.random.default_rng(0).standard_normal((96, 3072)).astype(np.float32)
for backend in hologram.list_backends():
    lib = hologram.load_bundle(sys.argv[1], backend=backend)
    assert np.array_equal(lib.seeds(x), hologram_sigil.run_model("copy@c05->c06", x)), backend
    e = np.exp(x[0].astype(np.float64) - x[0].max())
    assert np.allclose(lib.softmax(x)[3], e / e.sum(), rtol=1e-5), backend
print("circuits ran on", ", ".join(hologram.list_backends()))
EOF

step "a Python kernel (@hologram.kernel) runs from the installed wheels, and translates"
cp "$ROOT/examples/python_kernels.py" "$WORK/python_kernels.py"
"$VPY" "$WORK/python_kernels.py"
"$HOLOGRAM" translate "$WORK/python_kernels.py" -o "$WORK/python_kernels.toml"
"$HOLOGRAM" run "$WORK/python_kernels.toml" --kernel vector_add --bind n=4

step "the README demo (every backend)"
for backend in $("$VPY" -c "import hologram; print(*hologram.list_backends())"); do
    "$VPY" "$ROOT/examples/demo.py" --backend "$backend"
done
step "the GPU backends from their wheels: wgpu runs where a driver is, cuda assembles without one"
"$PY" -m pip --python "$VPY" install --quiet --find-links "$WORK/wheels" hologram-backend-wgpu hologram-backend-cuda
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$WORK}  # Mesa probes it for a display; unset, it prints an error
"$HOLOGRAM" plugins | tee "$WORK/plugins.txt"
for backend in wgpu cuda; do  # a row of the backends table each (not an && list: set -e ignores those)
    grep -qE "(^|[[:space:]])$backend[[:space:]]" "$WORK/plugins.txt" || { echo "hologram plugins does not list $backend"; exit 1; }
done
if "$VPY" -c "import sys, hologram; sys.exit('wgpu' not in hologram.list_backends())"; then
    "$HOLOGRAM" run "$ROOT/kernels/axpy.toml" --bind n=5 --input alpha=2 --backend wgpu
fi
"$VPY" - "$ROOT/kernels/vadd.toml" <<'EOF'
import sys
import hologram
from hologram_cuda import CudaBackend
from hologram_cuda.assemble import nvjitlink_version
program = hologram.compile_file(sys.argv[1], backend="interp").program
executable = CudaBackend().prepare(program)  # PTX through llvmlite, cubins through nvJitLink: no GPU needed
assert sorted(executable.cubins) == ["sm_80", "sm_90"], f"no cubins: {sorted(executable.cubins)}"
print(f"cuda: {program.name} assembled for sm_80 and sm_90 (nvJitLink {nvjitlink_version()})")
EOF

step "ok: the wheels install and run without extras"
