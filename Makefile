# The two set-up commands of the README: `make demo` (main job) and `make test` (the tests but those marked slow).
# CI (.ci/run) also runs `make lint` (style, imports), `make test-slow` (the tests marked slow) and
# `make test-user` (the tests that need no root, as a normal user).
PY ?= python3
export PATH := $(HOME)/.cargo/bin:$(PATH)
LINT_PY := src tests benches

.PHONY: setup demo test test-rust test-py test-slow test-user test-wheel bench clean \
	lint lint-ruff lint-format lint-imports lint-rustfmt lint-clippy

setup:
	bash scripts/setup.sh

demo: setup
	pltlab reproduce tfo --quick

test: setup
	$(MAKE) test-rust test-py

test-rust:
	cargo test --release --quiet

# --durations: the 25 slowest tests (set-up, call and teardown apart) at the end of CI's log, to see
# where the time goes.
test-py:
	$(PY) -m pytest -q -m "not slow" --durations=25 tests

# The tests marked slow (Ray clusters, soak, long Chromium runs, `reproduce tfo` end to end): CI runs them as a step of its own
# so that `make test` stays near 12 min on a fresh machine.
test-slow: setup
	$(PY) -m pytest -q -m slow --durations=25 tests

# `pytest -m "not root"` as a normal user (as root: as the user pltlab-ci, created if missing).
test-user:
	PY=$(PY) bash scripts/test-as-user.sh

# `make test-wheel` (as root): the built wheel in a fresh virtual environment, its non-root
# commands as a normal user, its root commands refused in one line (scripts/test-wheel.sh).
test-wheel:
	PY=$(PY) bash scripts/test-wheel.sh

# Every check, even after one failed (make -k): `make lint` after `make setup`.
lint:
	@$(MAKE) -k --no-print-directory lint-ruff lint-format lint-imports lint-rustfmt lint-clippy

lint-ruff:
	$(PY) -m ruff check --output-format concise $(LINT_PY)

lint-format:
	$(PY) -m ruff format --check --output-format concise $(LINT_PY)

lint-imports:
	lint-imports

lint-rustfmt:
	cargo fmt --check

lint-clippy:
	cargo clippy --release --all-targets --quiet -- -D warnings

# Every bench (long: run it on a quiet machine), one result file each in benches/results/, then
# docs/performance.md from them; non-zero exit when a target is missed. A subset or the small
# forms: `make bench BENCH="wan run"`, `make bench BENCH=--quick` (benches/run.py --help).
bench: setup
	$(PY) benches/run.py $(BENCH)

clean:
	pltlab clean
