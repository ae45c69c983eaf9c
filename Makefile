# Two commands on a fresh machine:
#   make bench   set up .venv, then run the nightly benchmark on the embedded default
#   make test    set up .venv, then lint (ruff, import contracts) and run the test suite
PYTHON ?= python3
VENV ?= .venv
# CPU torch by default (a local wheel where one exists, no CUDA downloads). On a GPU machine:
#   make bench TORCH_SPEC="torch==2.13.0" PIP_TORCH_FLAGS="--index-url https://download.pytorch.org/whl/cu128"
TORCH_SPEC ?= torch==2.13.0
PIP_TORCH_FLAGS ?=
# Optional extras besides dev, e.g. EXTRAS=dev,distributed (CI installs the scale-out engines).
EXTRAS ?= dev
STAMP := $(VENV)/.installed

.PHONY: setup bench lint test train dev clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet $(PIP_TORCH_FLAGS) "$(TORCH_SPEC)"
	$(VENV)/bin/python -m pip install --quiet -e ".[$(EXTRAS)]"
	touch $(STAMP)

bench: $(STAMP)
	$(VENV)/bin/aerorl bench

# ruff (pyproject's [tool.ruff]) and the import contracts (pyproject's [tool.importlinter]).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

test: lint
	$(VENV)/bin/python -m pytest -q

train: $(STAMP)
	$(VENV)/bin/aerorl train

dev: $(STAMP)
	$(VENV)/bin/aerorl dev

clean:
	rm -rf $(VENV) data/cache data/models data/checkpoints reports/*.duckdb reports/*.json
