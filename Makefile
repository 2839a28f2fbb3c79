# Two commands: `make run` (the main job) and `make test` (the whole suite).
# Both create .venv when missing and (re)install the project when pyproject.toml changes.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
EXTRAS ?= all
STAMP := $(VENV)/.installed-$(EXTRAS)

.PHONY: install run test test-fast lint bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]"
	touch $@

install: $(STAMP)

run: $(STAMP)
	rm -rf results/run  # a fresh run: results of older code must not be resumed
	$(PY) scripts/compare_agents.py --datasets wdbc --seeds 10 \
		--agents ballad all-in-al all-in-lr --per-round --output results/run

test: $(STAMP)
	$(PY) -m pytest -q

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) scripts/bench.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis
