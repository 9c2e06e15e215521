# Everything a fresh machine needs: `make demo` and `make test` create .venv, install the
# distributions of this repo (editable) with their dependencies, then run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml plugins/interp/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]' -e plugins/interp
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

test: $(STAMP)
	HYPOTHESIS_PROFILE=ci $(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis
