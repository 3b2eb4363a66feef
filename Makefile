# Entry points for a fresh machine with Python 3.11:
#   make demo   - create .venv, install ember, run the main job (ember demo)
#   make test   - create .venv, install ember with test dependencies, run the whole test suite
#   make differential - the differential tester against torch in its long mode
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev

.PHONY: demo test differential bench gen clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed: $(VENV)/bin/python pyproject.toml
	$(PY) -m pip install -q -e ".[io,fast,onnx]"
	touch $@

$(STAMP): $(VENV)/bin/python pyproject.toml
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/ember demo

test: $(STAMP)
	$(PY) tools/gen_autograd.py --check
	$(PY) -m pytest -q -n 2 --dist loadfile tests

# the differential tester's long mode (docs/differential.md): 50x the examples, a random seed
differential: $(STAMP)
	EMBER_DIFFERENTIAL=long $(PY) -m pytest -q tests/differential

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

gen: $(STAMP)
	$(PY) tools/gen_autograd.py

clean:
	rm -rf $(VENV) .pytest_cache
