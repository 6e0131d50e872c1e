# The two commands of the README. Both set up .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# pytest-xdist workers for the tests that do not measure time (see `test`); 3 is faster, and flakier.
TEST_WORKERS ?= 2

.PHONY: demo test setup test-tools lint

$(BIN)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

setup: $(BIN)/.installed

# The programs the suite runs besides Python (servers of its own, promtool, a
# Pushgateway): checked, and installed from Debian's packages where missing.
test-tools:
	bash scripts/test-tools.sh

# Static checks, as CI runs them before the tests: ruff, then mypy (both configured in pyproject.toml).
lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy

demo: setup
	$(BIN)/python scripts/demo.py

# Two runs, both always made: the tests that do not measure time on TEST_WORKERS
# workers (whole files per worker, slowest first: tests/conftest.py's SLOW_FILES, which
# --no-loadscope-reorder keeps), then the `timing` tests (rates and delays
# measured in real time) alone, with nothing else running beside them. Fails if either fails.
# The project's sources are compiled first: the suite starts a Python process of ours
# (a crawl, the simulator, an imitation) hundreds of times, and where the environment
# sets PYTHONDONTWRITEBYTECODE (this machine's does) none of them writes its .pyc, so
# each would compile every module it imports again (about 0.25 s of CPU per crawl).
test: setup test-tools
	$(BIN)/python -m compileall -q productcrawler simulator tests
	@status=0; \
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not timing" --durations=15 tests || status=1; \
	$(BIN)/python -m pytest -q -m timing --durations=10 tests || status=1; \
	exit $$status
