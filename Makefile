# Two entry points for a fresh machine with Python 3.11:
#   make demo   - create .venv, install ember, run the main job (ember demo)
#   make test   - create .venv, install ember with test dependencies, run the whole test suite
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev

.PHONY: demo test bench gen clean

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

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

gen: $(STAMP)
	$(PY) tools/gen_autograd.py

clean:
	rm -rf $(VENV) .pytest_cache
