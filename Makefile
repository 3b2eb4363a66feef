# Entry points for a fresh machine with Python 3.11:
#   make demo   - create .venv, install ember, compile its common kernels (ember prebuild), run
#                 the main job (ember demo)
#   make test   - create .venv, install ember with test dependencies, run the whole test suite
#   make differential - the differential tester against torch in its long mode
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev

.PHONY: demo test differential bench gen clean pytorch-examples

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed: $(VENV)/bin/python pyproject.toml
	$(PY) -m pip install -q -e ".[io,fast,onnx]"
	$(VENV)/bin/ember prebuild
	touch $@

$(STAMP): $(VENV)/bin/python pyproject.toml
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/ember demo

test: $(STAMP) pytorch-examples
	$(PY) tools/gen_autograd.py --check
	$(PY) -m pytest -q -n 2 --dist loadfile tests

# pytorch/examples at the commit pinned in tests/programs/pytorch_examples/SOURCE.md (git
# objects only, git-ignored), read by tests/programs; offline, those tests skip
PE_DIR := tests/programs/pytorch_examples/upstream
PE_COMMIT := $(shell sed -n 's/.*commit `\([0-9a-f]\{40\}\)`.*/\1/p' tests/programs/pytorch_examples/SOURCE.md)
# a local mirror of the repository (a bare git directory), if the machine keeps one, is used
# before the network
PE_MIRROR ?= $(firstword $(wildcard ../.mirror/pytorch+examples/repo /work/.mirror/pytorch+examples/repo))
pytorch-examples:
	@git --git-dir=$(PE_DIR)/.git cat-file -e $(PE_COMMIT) 2>/dev/null || \
	 (test -n "$(PE_MIRROR)" && git --git-dir=$(PE_MIRROR) cat-file -e $(PE_COMMIT) 2>/dev/null && \
	  rm -rf $(PE_DIR) && mkdir -p $(PE_DIR) && ln -s $(abspath $(PE_MIRROR)) $(PE_DIR)/.git) || \
	 (rm -rf $(PE_DIR) && git init -q $(PE_DIR) && timeout 120 git -C $(PE_DIR) fetch -q \
	  --depth 1 https://github.com/pytorch/examples $(PE_COMMIT)) || \
	 echo "pytorch/examples not fetched: tests/programs will skip its programs"

# the differential tester's long mode (docs/differential.md): 50x the examples, a random seed
differential: $(STAMP)
	EMBER_DIFFERENTIAL=long $(PY) -m pytest -q tests/differential

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

gen: $(STAMP)
	$(PY) tools/gen_autograd.py

clean:
	rm -rf $(VENV) .pytest_cache
