# Every target builds what it needs: a fresh clone with Python 3.11 and make is enough.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# mypy cannot follow setuptools' package-dir mapping, so it reads the sources
# through a tree of symlinks laid out as the installed package.
MYPY_TREE := .mypy-tree

.PHONY: all demo test lint typecheck unit property bench install-check mutation mutation-file clean

all: test

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
		|| { echo "interlude needs Python 3.11 or newer on PATH (python3.11 or python3)"; exit 1; }
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
	$(BIN)/ruff check core adapters tests property_tests bench conftest.py .ci/mutation
	$(BIN)/ruff format --check core adapters tests property_tests bench conftest.py .ci/mutation

typecheck: $(STAMP) $(MYPY_TREE)/interlude/core
	cd $(MYPY_TREE) && MYPYPATH=. ../$(BIN)/mypy --config-file ../pyproject.toml -p interlude.core -p interlude.adapters
	# Application code as the docs write it must pass --strict against the public types.
	cd $(MYPY_TREE) && MYPYPATH=. ../$(BIN)/mypy --config-file ../pyproject.toml --strict --follow-imports=silent ../tests/typed/usage.py

unit: $(STAMP)
	$(BIN)/python -m pytest tests

property: $(STAMP)
	HYPOTHESIS_PROFILE=ci $(BIN)/python -m pytest property_tests

test: lint typecheck unit property

# A non-editable install into a throwaway venv must import too.
install-check:
	rm -rf /tmp/interlude-install-check
	$(PYTHON) -m venv /tmp/interlude-install-check
	/tmp/interlude-install-check/bin/python -m pip install --quiet ".[server]"
	cd /tmp && /tmp/interlude-install-check/bin/python -c "import interlude.core, interlude.core.answers, interlude.adapters.fake, interlude.adapters.trio, interlude.adapters.httpx, interlude.adapters.agent, interlude.adapters.cli; print('install-check: imports ok')"
	test -f "$$(/tmp/interlude-install-check/bin/python -c 'import interlude.core, os; print(os.path.dirname(interlude.core.__file__))')/py.typed"
	/tmp/interlude-install-check/bin/interlude --help >/dev/null

bench: $(STAMP)
	$(BIN)/python -m bench

# Mutation testing, by hand (not in CI): make mutation FILE=core/commands.py [ARGS='--lines 10-40'].
# The coverage map is rebuilt when a library or test file changed (about 8 minutes).
MUTATION_SOURCES := $(shell git ls-files core adapters tests property_tests conftest.py 2>/dev/null)

.mutation/cover.json: $(STAMP) $(MUTATION_SOURCES) .ci/mutation/mutation_plugin.py
	$(BIN)/python .ci/mutation/run.py cover

mutation: mutation-file .mutation/cover.json
	$(BIN)/python .ci/mutation/run.py run $(FILE) $(ARGS)

mutation-file:
	@test -n "$(FILE)" || { echo "usage: make mutation FILE=core/commands.py [ARGS='--lines 10-40 -j 2']"; exit 2; }

clean:
	rm -rf $(VENV) $(MYPY_TREE) .mutation build *.egg-info
