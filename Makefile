# Every target builds what it needs: a fresh clone with Python 3.11 and make is enough.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# mypy cannot follow setuptools' package-dir mapping, so it reads the sources
# through a tree of symlinks laid out as the installed package.
MYPY_TREE := .mypy-tree

.PHONY: all demo test lint typecheck unit property bench install-check clean

all: test

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) on PATH"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

$(MYPY_TREE)/interlude/core:
	mkdir -p $(MYPY_TREE)/interlude
	ln -sfn ../../core $(MYPY_TREE)/interlude/core
	ln -sfn ../../adapters $(MYPY_TREE)/interlude/adapters

demo: $(STAMP)
	$(BIN)/python -m interlude.adapters.demo

lint: $(STAMP)
	$(BIN)/ruff check core adapters tests property_tests bench conftest.py
	$(BIN)/ruff format --check core adapters tests property_tests bench conftest.py

typecheck: $(STAMP) $(MYPY_TREE)/interlude/core
	cd $(MYPY_TREE) && MYPYPATH=. ../$(BIN)/mypy --config-file ../pyproject.toml -p interlude.core -p interlude.adapters

unit: $(STAMP)
	$(BIN)/python -m pytest tests

property: $(STAMP)
	HYPOTHESIS_PROFILE=ci $(BIN)/python -m pytest property_tests

test: lint typecheck unit property

# A non-editable install into a throwaway venv must import too.
install-check:
	rm -rf /tmp/interlude-install-check
	$(PYTHON) -m venv /tmp/interlude-install-check
	/tmp/interlude-install-check/bin/python -m pip install --quiet .
	cd /tmp && /tmp/interlude-install-check/bin/python -c "import interlude.core, interlude.adapters.fake; print('install-check: imports ok')"

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) $(MYPY_TREE) build *.egg-info
