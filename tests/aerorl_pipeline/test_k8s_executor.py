"""``[executor] kind = "k8s"``: the ``benchmark`` job runs on dagster-k8s's ``k8s_job_executor``; its config
validates against dagster-k8s's own schema, and the Kubernetes job it would create for a partition's
generation step requests the configured GPUs through the ``dagster-k8s/config`` op tag. Nothing is
launched (there is no cluster here): the step's job is rendered with dagster-k8s's own functions, as
its step handler does."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("dagster_k8s", reason="dagster-k8s is the scale-out extra: pip install -e '.[distributed]'")

from dagster_k8s.container_context import K8sContainerContext  # noqa: E402
from dagster_k8s.job import construct_dagster_k8s_job, get_user_defined_k8s_config  # noqa: E402

from aerorl_ops.config.benchmark import ConfigError  # noqa: E402
from aerorl_pipeline.definitions import build_definitions  # noqa: E402

IMAGE = "registry.example.com/aerorl-pipeline:nightly"
HELM_RUN_LAUNCHER = SimpleNamespace(job_image=None, dagster_home="/opt/dagster/dagster_home",
                                    instance_config_map="dagster-instance",
                                    postgres_password_secret="dagster-postgresql-secret")
"""The K8sRunLauncher settings the step handler reads (those of Dagster's Helm chart)."""
CONFIG = f"""
[benchmark]
batch_sizes = [1, 8]
[models.tiny-qwen2-vl]
source = "embedded:tiny-qwen2-vl"
[executor]
kind = "k8s"
k8s_namespace = "vlm-bench"
k8s_image = "{IMAGE}"
gpus_per_partition = 2
"""


@pytest.fixture
def k8s_defs(tmp_path: Path):
    path = tmp_path / "k8s.toml"
    path.write_text(CONFIG)
    return build_definitions(path)


def rendered_step_job(defs, asset: str):
    """The V1Job dagster-k8s's step handler builds for ``asset``'s step: executor config, then the op's tags."""
    job = defs.resolve_job_def("benchmark")
    executor_config = job.executor_def.config_schema.resolve_config({})
    assert executor_config.success, executor_config.errors
    config = executor_config.value["config"]
    context = K8sContainerContext(namespace=config["job_namespace"]).merge(
        K8sContainerContext(run_k8s_config=get_user_defined_k8s_config(defs.get_assets_def(asset).op.tags)))
    job_config = context.get_k8s_job_config(config["job_image"], run_launcher=HELM_RUN_LAUNCHER)
    return construct_dagster_k8s_job(job_config, args=["dagster", "api", "execute_step"],
                                     job_name=f"dagster-step-{asset}", user_defined_k8s_config=context.run_k8s_config)


def test_the_benchmark_job_runs_on_the_k8s_job_executor_with_a_valid_config(k8s_defs):
    job = k8s_defs.resolve_job_def("benchmark")
    assert job.executor_def.name == "k8s"
    resolved = job.executor_def.config_schema.resolve_config({})
    assert resolved.success, resolved.errors
    assert resolved.value["config"]["job_namespace"] == "vlm-bench"
    assert resolved.value["config"]["job_image"] == IMAGE


def test_each_partitions_generation_step_requests_its_gpus_and_the_report_none(k8s_defs):
    generation = rendered_step_job(k8s_defs, "generations")
    container = generation.spec.template.spec.containers[0]
    assert container.image == IMAGE
    assert container.resources.limits == {"nvidia.com/gpu": "2"}
    assert container.resources.requests == {"nvidia.com/gpu": "2"}
    report = rendered_step_job(k8s_defs, "benchmark_report").spec.template.spec.containers[0]
    assert not (report.resources and report.resources.limits)


def test_k8s_without_an_image_is_a_config_error_naming_the_setting(tmp_path: Path):
    path = tmp_path / "k8s.toml"
    path.write_text(CONFIG.replace(f'k8s_image = "{IMAGE}"', ""))
    with pytest.raises(ConfigError, match="k8s_image"):
        build_definitions(path)
