# Two commands: `make run` (the main job) and `make test` (the whole suite).
# Each target creates .venv when missing and installs the project with the extras it needs
# (again when pyproject.toml changes): run and bench need the experiment harness only
# (no torch, no dev tools); test and lint need everything.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: install run test test-fast test-fidelity lint bench docs clean
.PRECIOUS: $(VENV)/.installed-%

# $(VENV)/.installed-<extras>: the project installed with those extras.
$(VENV)/.installed-%: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[$*]"
	touch $@

install: $(VENV)/.installed-all

run: $(VENV)/.installed-experiments
	rm -rf results/run  # a fresh run: results of older code must not be resumed
	$(VENV)/bin/ballad-env compare --datasets wdbc --seeds 10 \
		--agents ballad all-in-al all-in-lr --per-round --output results/run

# The suite on two worker processes (pytest-xdist; CI has two cores), a test file's tests on
# one worker (--dist loadfile) so that a module's fixtures are built once;
# PYTEST_WORKERS=0 runs it in this process.
PYTEST_WORKERS ?= 2
XDIST := -n $(PYTEST_WORKERS) --dist loadfile
test: $(VENV)/.installed-all
	$(PY) -m pytest -q $(XDIST)

test-fast: $(VENV)/.installed-all
	$(PY) -m pytest -q $(XDIST) -m "not slow"

# The fidelity tests: recorded published episodes and fixtures compared to 1e-12, whose last
# bits can depend on the BLAS kernel (tests/arithmetic.py). .ci/run runs them again under
# other kernels (OPENBLAS_CORETYPE=Sandybridge make test-fidelity): all of the published
# episodes' tests, and the other fixtures' fast tests (their slow searches, minutes each,
# run in `make test`).
FIDELITY_TESTS := tests/test_arithmetic.py tests/test_authors_cosine.py
FIXTURE_TESTS := tests/test_authors_fixture.py tests/test_sadal_fixture.py tests/test_ssif.py
test-fidelity: $(VENV)/.installed-all
	$(PY) -m pytest -q $(FIDELITY_TESTS)
	$(PY) -m pytest -q -m "not slow" $(FIXTURE_TESTS)

lint: $(VENV)/.installed-all
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# The documentation site into site/, offline; any warning (a broken link, a missing
# reference, a docstring that does not render) fails the build, and so does what strict mode
# misses (scripts/tools/site_check.py: literal Sphinx roles, run-on docstring sections, split
# table rows, unwrapped code, search that needs a server, flat nested lists). The API and
# CLI reference pages are generated from the code (docs/hooks/reference.py), which needs the
# harness but not torch.
docs: $(VENV)/.installed-experiments $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site
	$(PY) -m scripts.tools.site_check site docs

bench: $(VENV)/.installed-experiments
	$(VENV)/bin/ballad-env bench

clean:
	rm -rf $(VENV) site .pytest_cache .ruff_cache .mypy_cache .hypothesis
