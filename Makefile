# Everything a fresh machine needs: `make demo` and `make test` create .venv, install the
# distributions of this repo (editable) with their dependencies, then run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test venv clean bench startup difftest wheel-check gpu-check sweep

venv: $(STAMP)

# Every plugin of this repository is a folder under plugins/ with its own pyproject.toml:
# found here, not listed, so a new backend or translator folder needs no edit.
PLUGINS := $(sort $(patsubst %/pyproject.toml,%,$(wildcard plugins/*/pyproject.toml)))

$(STAMP): pyproject.toml setup.py $(addsuffix /pyproject.toml,$(PLUGINS))
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]' $(addprefix -e ,$(PLUGINS))
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

# The software Vulkan driver first (.ci/vulkan.sh: installed as root with apt), so the wgpu
# tests run. The held-out acceptance suite pins the reference interpreter; it runs once more
# on cpu_llvm, and on wgpu with a 300-example diff-test (.ci/gpu.sh). Then the plain install,
# from wheels (wheel-check).
# The suite runs on every core (pytest-xdist; a module's tests stay on one worker, so its
# fixtures are built once).
test: $(STAMP)
	bash .ci/vulkan.sh
	HYPOTHESIS_PROFILE=ci $(BIN)/python -m pytest -q -n auto --dist loadscope
	HOLOGRAM_HELDOUT_BACKEND=cpu_llvm $(BIN)/python -m pytest -q tests/heldout
	bash .ci/gpu.sh $(BIN)/python
	bash .ci/wheels.sh $(BIN)/python

# What `pip install hologram-kernels` gives a user: its wheel and every plugin's built and installed into a
# fresh venv in a temporary directory, without extras or editable paths; the CLI, a kernel on
# every backend and the demo run there (.ci/wheels.sh; 9 s idle, with pip's cache warm).
wheel-check: $(STAMP)
	bash .ci/wheels.sh $(BIN)/python

# Benchmarks need numexpr and numba (the `bench` extra) and the native backend when present;
# OpenBLAS tuning variables are dropped so numpy's gemm, the baseline, runs at its own speed.
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(BIN)/python benchmarks/bench.py $(BENCH_ARGS)

# The size sweep (1e3 to 1e8 elements) drawn into docs/perf: one figure per kernel.
sweep: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(BIN)/python benchmarks/sweep.py $(SWEEP_ARGS)

# Whole-process start-up (imports, a bundle's first call, compile_file, numba), each figure in
# fresh processes, against temporary caches (benchmarks/README.md, "Start-up").
startup: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/startup.py $(STARTUP_ARGS)

# A soak run of the differential harness on every installed backend (DIFFTEST_ARGS adds
# e.g. --backends interp,cpu_llvm --seed 1); failures are shrunk into ./difftest-failures/.
DIFFTEST_EXAMPLES ?= 500
difftest: $(STAMP)
	$(BIN)/python -m hologram diff-test --examples $(DIFFTEST_EXAMPLES) $(DIFFTEST_ARGS)

# On a machine with an NVIDIA GPU: the conformance kit on cuda and wgpu, diff-test on
# interp,cuda,wgpu, the cuda device tests and the GPU benchmarks, in one table, in under
# 5 minutes (benchmarks/gpu_check.py; docs/gpu.md, "Running on a GPU"). Fails, saying why,
# when cuda is not available. GPU_CHECK_ARGS=--dry-run runs the wgpu columns alone.
gpu-check: $(STAMP)
	XDG_RUNTIME_DIR=$${XDG_RUNTIME_DIR:-/tmp} $(BIN)/python benchmarks/gpu_check.py $(GPU_CHECK_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis

# A long run of the fuzzers (hologram.testing.fuzz): FUZZ_ITERATIONS program mutants and as
# many document and object-code mutants, pathological sizes at full scale; each finding is written to
# ./fuzz-findings/ with a reproducer (docs/testing.md, "Fuzzing"). FUZZ_ARGS adds e.g. --workers 4.
FUZZ_ITERATIONS ?= 5000
FUZZ_SEED ?= 0
.PHONY: fuzz
fuzz: $(STAMP)
	$(BIN)/hologram fuzz --programs $(FUZZ_ITERATIONS) --documents $(FUZZ_ITERATIONS) --objects $(FUZZ_ITERATIONS) \
		--seed $(FUZZ_SEED) --out fuzz-findings $(FUZZ_ARGS)
