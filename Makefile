# Every target creates (or reuses) the local virtualenv .venv, so a fresh
# machine needs nothing but Python 3.11 and make.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# What running needs (the package with its server extra: `assocdb demo` and
# `assocdb serve`), and what testing needs on top of it (every extra, pytest,
# mypy, ruff, schemathesis, and the MySQL C driver when it builds).
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed

.PHONY: run test check bench format clean

$(RUN_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[server]'
	touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP)
	$(BIN)/python -m pip install -q -e '.[dev]'
	@$(BIN)/python -m pip install -q -e '.[mysqlclient]' > $(VENV)/mysqlclient.log 2>&1 \
		|| echo "mysqlclient not built (needs libmariadb-dev and pkg-config; see $(VENV)/mysqlclient.log): using PyMySQL"
	touch $(STAMP)

run: $(RUN_STAMP)  ## load ego-Facebook into ./data/demo, answer a few questions, serve it on :8080
	$(BIN)/assocdb demo data/demo
	$(BIN)/assocdb serve data/demo --port 8080

test: $(STAMP)  ## the whole test suite (MySQL/Redis tests skip unless their env vars are set)
	$(BIN)/python -m pytest -q $(ARGS)

check: $(STAMP)  ## formatting, lint, strict typing
	$(BIN)/ruff format --check src tests bench
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy src

bench: $(STAMP)  ## the benchmarks of bench/, ratios against bare SQL in the same run
	$(BIN)/python -m bench

format: $(STAMP)
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache
