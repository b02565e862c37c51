# The two set-up commands of the README: `make demo` (main job) and `make test` (all tests).
PY ?= python3
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: setup demo test test-rust test-py bench clean

setup:
	bash scripts/setup.sh

demo: setup
	pltlab reproduce tfo --quick

test: setup
	$(MAKE) test-rust test-py

test-rust:
	cargo test --release --quiet

test-py:
	$(PY) -m pytest -q tests

bench: setup
	$(PY) benches/run.py

clean:
	pltlab clean
