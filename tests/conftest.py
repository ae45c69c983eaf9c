"""Shared fixtures: the embedded models (built once per session), a few synthetic rows, and
isolated Dagster resources (model cache, DuckDB file, Parquet cache, ephemeral instance) under tmp.
Loaded before any test module, it first sets torch's OpenMP defaults for shared cores
(``aerorl_ops.cpu_threads``), as the ``aerorl`` command and the code location do."""

from __future__ import annotations

from aerorl_ops.cpu_threads import configure_cpu_threads

configure_cpu_threads()  # before any test module imports torch: OpenMP reads these once, as torch loads

from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING, NamedTuple  # noqa: E402

import pytest  # noqa: E402

from aerorl_ops.rows import TaskItem, synthetic_chartqa_rows, synthetic_docvqa_rows  # noqa: E402

if TYPE_CHECKING:
    import dagster as dg

    from aerorl_ops.models.loading import LoadedVLM

# transformers and dagster are imported inside the fixtures that need them, so test modules
# that use neither (rows, losses, ...) do not pay for importing them.

TINY_MODEL_KEY = "tiny-qwen2-vl"


class DagsterTestEnv(NamedTuple):
    """Resources and an instance that write only under ``root``."""

    root: Path
    resources: dict[str, object]
    instance: dg.DagsterInstance
    duckdb_path: Path
    cache_dir: Path


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where embedded models live for this session (what ``ModelRuntime.models_dir`` points at)."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def tiny_model_dir(models_dir: Path) -> Path:
    """The embedded tiny Qwen2-VL, built once, at the path ``ModelRuntime`` would build it."""
    from aerorl_ops.models.embedded_default import build_tiny_qwen2vl

    return build_tiny_qwen2vl(models_dir / TINY_MODEL_KEY)


@pytest.fixture(scope="session")
def easy_vqa_model_dir(models_dir: Path, tiny_model_dir: Path) -> Path:
    """The second embedded model (the tiny one after the shipped supervised recipe on easy-VQA, ~50 s),
    built once, where ``ModelRuntime`` would build it."""
    from aerorl_ops.models.entry import EMBEDDED_EASY_VQA
    from aerorl_ops.rl.run.embedded_builds import build_tiny_qwen2vl_easy_vqa

    return build_tiny_qwen2vl_easy_vqa(models_dir / EMBEDDED_EASY_VQA)


def load_tiny(model_dir: Path) -> LoadedVLM:
    import torch

    from aerorl_ops.models.loading import ModelSource, load_vlm

    torch.set_num_threads(1)  # the test machine's cores are shared
    return load_vlm(ModelSource(str(model_dir)), torch.device("cpu"))


@pytest.fixture(scope="session")
def tiny_vlm(tiny_model_dir: Path) -> LoadedVLM:
    """The tiny model loaded on CPU. Shared: tests must not modify it (load their own copy instead)."""
    return load_tiny(tiny_model_dir)


@pytest.fixture
def fresh_tiny_vlm(tiny_model_dir: Path) -> LoadedVLM:
    """A private copy of the tiny model, for tests that patch or hook it."""
    return load_tiny(tiny_model_dir)


@pytest.fixture(scope="session")
def few_rows() -> list[TaskItem]:
    """Three DocVQA-shaped and two ChartQA-shaped synthetic rows (seed 0)."""
    return synthetic_docvqa_rows(3, seed=0) + synthetic_chartqa_rows(2, seed=0)


def make_dagster_env(root: Path, models_dir: Path) -> DagsterTestEnv:
    import dagster as dg
    from dagster_duckdb import DuckDBResource

    from assets.io_managers import ParquetTableIOManager
    from assets.resources import ModelRuntime

    root.mkdir(parents=True, exist_ok=True)
    duckdb_path = root / "aerorl.duckdb"
    cache_dir = root / "cache"
    resources = {
        "model_runtime": ModelRuntime(models_dir=str(models_dir), device="cpu", torch_threads=1,
                                      telemetry_interval_s=0.05),
        "duckdb": DuckDBResource(database=str(duckdb_path)),
        "io_manager": ParquetTableIOManager(base_dir=str(cache_dir)),
    }
    return DagsterTestEnv(root, resources, dg.DagsterInstance.ephemeral(), duckdb_path, cache_dir)


@pytest.fixture(scope="session")
def dagster_env_factory(models_dir: Path, tiny_model_dir: Path) -> Callable[[Path], DagsterTestEnv]:
    """Makes isolated resources under a given folder; the tiny model is already built in ``models_dir``."""
    return lambda root: make_dagster_env(root, models_dir)


@pytest.fixture
def dagster_env(tmp_path: Path, dagster_env_factory) -> Iterator[DagsterTestEnv]:
    env = dagster_env_factory(tmp_path)
    yield env
    env.instance.dispose()


def point_commands_at(env: DagsterTestEnv, models_dir: Path, dagster_home: Path) -> None:
    """Make the `aerorl` commands of this process write only under ``env.root``: their jobs' resources,
    the report database, the models (checkpoints beside them) and the Dagster instance. A command
    driven in a process of its own calls it too (``tests/reliability/command_driver.py``)."""
    import os

    import aerorl_pipeline.definitions as definitions
    import assets.project as project
    import assets.resources as resources

    for module in (definitions, resources):  # the jobs' resources (eval builds its own from assets.resources)
        module.default_resources = lambda storage=None: dict(env.resources)
    project.MODELS_DIR, project.DUCKDB_PATH = models_dir, env.duckdb_path
    os.environ["DAGSTER_HOME"] = str(dagster_home)


@pytest.fixture
def isolated_commands(dagster_env: DagsterTestEnv, models_dir: Path, tmp_path: Path,
                      monkeypatch: pytest.MonkeyPatch) -> DagsterTestEnv:
    """``dagster_env``, with the `aerorl` commands run in this test writing only under it (undone after)."""
    import aerorl_pipeline.definitions as definitions
    import assets.project as project
    import assets.resources as resources

    for target, name in ((definitions, "default_resources"), (resources, "default_resources"),
                         (project, "MODELS_DIR"), (project, "DUCKDB_PATH")):
        monkeypatch.setattr(target, name, getattr(target, name))  # restored when the test ends
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    point_commands_at(dagster_env, models_dir, tmp_path / "dagster_home")
    return dagster_env


YES_TOKEN_LOGIT_SCALE = 0.7
"""How strongly the yes-sayer prefers its bigram (0.7: ~3/4 of temperature-1.0 samples follow it)."""


@pytest.fixture(scope="session")
def yes_model_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint of the tiny model that answers "yes" then EOS (greedy), so its accuracy is known.

    Every text layer's output projections are zeroed, so the last hidden state is the input token's
    embedding; the prompt's last token ("\\n") and "yes" get orthogonal embeddings, and the LM head
    maps the first to "yes" and the second to EOS. Sampling at temperature 1.0 strays from it now and
    then (see ``YES_TOKEN_LOGIT_SCALE``).
    """
    import shutil

    import torch

    folder = tmp_path_factory.mktemp("yes_model") / "yes-sayer"
    shutil.copytree(tiny_model_dir, folder)
    loaded = load_tiny(folder)
    model, tokenizer = loaded.model, loaded.tokenizer
    newline, yes = tokenizer.encode("\n", add_special_tokens=False)[-1], tokenizer.encode("yes",
                                                                                          add_special_tokens=False)[0]
    eos = model.generation_config.eos_token_id
    eos = eos[0] if isinstance(eos, list) else eos
    with torch.no_grad():
        for layer in model.model.language_model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        embeddings, head = model.get_input_embeddings().weight, model.get_output_embeddings().weight
        hidden = embeddings.shape[1]
        embeddings[newline] = torch.nn.functional.one_hot(torch.tensor(0), hidden).float()
        embeddings[yes] = torch.nn.functional.one_hot(torch.tensor(1), hidden).float()
        head[yes] = YES_TOKEN_LOGIT_SCALE * embeddings[newline]
        head[eos] = YES_TOKEN_LOGIT_SCALE * embeddings[yes]
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def yes_vlm(yes_model_dir: Path) -> LoadedVLM:
    """The yes-sayer loaded on CPU. Shared: tests must leave it as they found it."""
    return load_tiny(yes_model_dir)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A real S3-compatible server (moto in server mode) on a free local port, for the session."""
    import socket

    moto_server = pytest.importorskip("moto.server", reason="moto[server] is a dev dependency (pip install -e .[dev])")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="session")
def tiny_family_dir(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Builds a tiny checkpoint of a VLM family (``aerorl_ops.models.tiny_families``) once per session;
    call it with the family's name. A family whose processor needs a package that is not installed
    (SmolVLM2: num2words) is skipped."""
    from aerorl_ops.models.tiny_family_build import build_tiny_family

    root, built = tmp_path_factory.mktemp("tiny_families"), {}

    def build(name: str) -> Path:
        if name not in built:
            try:
                built[name] = build_tiny_family(name, root / name)
            except ImportError as error:
                built[name] = error
        if isinstance(built[name], ImportError):
            pytest.skip(f"tiny {name} cannot be built here: {built[name]}")
        return built[name]

    return build


@pytest.fixture(scope="session")
def tiny_family_vlm(tiny_family_dir) -> Callable[[str], LoadedVLM]:
    """A family's tiny checkpoint loaded on CPU, once per session. Shared: tests must not modify it."""
    loaded = {}

    def load(name: str) -> LoadedVLM:
        if name not in loaded:
            loaded[name] = load_tiny(tiny_family_dir(name))
        return loaded[name]

    return load
