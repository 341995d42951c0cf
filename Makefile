# The README's two fresh-machine commands are `make render` and `make test`.
# Python packages come from uv.lock (pyproject.toml) and tools/checkov/uv.lock, every one pinned with its hash;
# uv itself from tools/uv/requirements.txt (hashed), installed by pip into .venv-tools.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
OUT ?= out
UV := .venv-tools/bin/uv
# Bytecode compiled at install: a process then imports the SDKs from .pyc even where PYTHONDONTWRITEBYTECODE is
# set, which took a render's first second or four to recompile azure-native's modules in every test process.
SYNC := UV_PROJECT_ENVIRONMENT=$(VENV) $(UV) sync --locked --inexact --quiet --compile-bytecode
# The project's own modules too: every test process and `python -m` command reads them from __pycache__.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install install-azure install-dev install-checkov install-policy render docs test quick lock state-backend e2e clean

$(UV): tools/uv/requirements.txt
	$(PYTHON) -m venv .venv-tools
	.venv-tools/bin/python -m pip install --quiet --require-hashes -r tools/uv/requirements.txt
	touch $@

install: $(UV)  ## the runtime: what `pulumi up`, the workflows and the render need
	$(SYNC)

install-azure: $(UV)  ## the runtime plus Azure's SDK for the capacity preflight and the catalogue refresh
	$(SYNC) --group azure

install-dev: $(UV) tools/actionlint/bin/actionlint tools/mermaid/node_modules/.installed  ## the runtime plus tests, linters and the image code's CPU dependencies
	$(SYNC) --group dev

# actionlint from its own Go module at the release go.mod pins, every module checked against go.sum.
tools/actionlint/bin/actionlint: tools/actionlint/go.mod tools/actionlint/go.sum
	cd tools/actionlint && GOFLAGS=-mod=readonly go build -trimpath -o bin/actionlint github.com/rhysd/actionlint/cmd/actionlint

# npm ci wipes and reinstalls node_modules: only when its lock changed.
tools/%/node_modules/.installed: tools/%/package-lock.json
	npm ci --prefix tools/$* --no-audit --no-fund --loglevel=error
	touch $@

# checkov pins older packages than the project: its own lock and virtualenv.
CHECKOV_VENV := .venv-checkov
$(CHECKOV_VENV)/bin/checkov: tools/checkov/uv.lock $(UV)
	UV_PROJECT_ENVIRONMENT=$(CURDIR)/$(CHECKOV_VENV) $(UV) sync --locked --quiet --compile-bytecode --project tools/checkov
	touch $@

install-checkov: $(CHECKOV_VENV)/bin/checkov  ## checkov, which tests/test_checkov.py runs

# The policy pack's environment, at the path PulumiPolicy.yaml names, so `pulumi preview --policy-pack policy`
# uses the same virtualenv: the pack (pulumi-policy) beside the runtime its tests render stacks with.
POLICY_VENV := policy/venv
$(POLICY_VENV)/bin/pytest: uv.lock $(UV)
	UV_PROJECT_ENVIRONMENT=$(POLICY_VENV) $(UV) sync --locked --quiet --compile-bytecode --group policy-test
	touch $@

install-policy: $(POLICY_VENV)/bin/pytest  ## the policy pack's venv (pulumi-policy), its tests and the render check

render: install  ## install, then render every stack offline into $(OUT)/
	$(BIN)/python -m offline render --all --out $(OUT)

docs: install  ## regenerate the generated docs
	$(BIN)/python -m offline docs

test: install-dev install-checkov install-policy  ## install, lint, type-check, then run the test suites
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n auto --dist loadgroup
	$(POLICY_VENV)/bin/python -m pytest -q policy/tests

# The edit loop: lint, the config core and its rules, the house rules, and one stack rendered and held to its URN pins
# and the Kubernetes schemas (STACK=name for another).
STACK ?= dev
QUICK_TESTS := tests/test_config.py tests/test_architecture.py tests/test_node_pools.py tests/test_urns.py \
  tests/test_kubernetes_objects.py
quick: install-dev
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -p no:xdist $(QUICK_TESTS) --stack $(STACK) -k "not planted_rename"

# After changing a pin in pyproject.toml (or tools/checkov/pyproject.toml, or an image's requirements.in): relock,
# and export what pip installs from the locks (the policy pack's requirements for the Pulumi CLI).
lock: $(UV)
	$(UV) lock --quiet
	$(UV) lock --quiet --project tools/checkov
	$(UV) export --quiet --frozen --only-group policy --no-emit-project -o policy/requirements.txt
	for dir in $(patsubst %/requirements.in,%,$(wildcard docker/*/requirements.in)); do \
	  $(UV) pip compile $$dir/requirements.in --python-version 3.12 --python-platform x86_64-manylinux_2_28 \
	    --generate-hashes --no-header --quiet -o $$dir/requirements.txt; \
	done

# Once per team: the Azure Blob state backend and its Key Vault secrets provider (needs `az login`).
state-backend:
	scripts/create-state-backend.sh "$(RESOURCE_GROUP)" "$(STORAGE_ACCOUNT)" "$(KEY_VAULT)" "$(LOCATION)"

# One stack deployed to Azure end to end, measured, probed, drilled, destroyed and checked for leftovers (docs/e2e.md);
# it costs what the stack costs to run for one to two hours. E2E_FLAGS passes --keep, --results DIR,
# --timeout-minutes N or --drill-timeout-minutes N.
e2e: install-azure
	@if [ "$(origin STACK)" = file ]; then echo "make e2e deploys a stack to Azure: name it, make e2e STACK=<stack>" >&2; exit 2; fi
	$(BIN)/python -m ops e2e --stack="$(STACK)" $(E2E_FLAGS)

clean:
	rm -rf $(OUT) .pytest_cache build
