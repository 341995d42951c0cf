# The two fresh-machine commands of the README: `make render` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
OUT ?= out

.PHONY: install render test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt

render: install  ## install everything, then render every stack offline into $(OUT)/
	$(BIN)/python -m stacks render --all --out $(OUT)

test: install  ## install everything, then run the test suite
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(OUT) .pytest_cache
