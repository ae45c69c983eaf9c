"""Several torchrun nodes on Kubernetes (``assets.training.k8s_nodes``): the manifests, field by field,
accepted by dagster-k8s's strict conversion to the Kubernetes models; the Job's shell gives each pod its
node rank; and the launch, against a fake cluster API and Pipes client (there is no cluster here):
what it creates, what it deletes however it ends, and the one line naming a failed rank or node."""

from __future__ import annotations

import os
import subprocess
import threading
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import pytest

pytest.importorskip("dagster_k8s", reason="dagster-k8s is the scale-out extra: pip install -e '.[distributed]'")

import kubernetes  # noqa: E402
from dagster_k8s.models import k8s_model_from_dict, k8s_snake_case_dict  # noqa: E402
from dagster_k8s.pipes import build_pod_body  # noqa: E402
from dagster_pipes import decode_env_var  # noqa: E402

from aerorl_ops.config.scale_out import TrainingLaunchSettings  # noqa: E402
from aerorl_ops.config.training import TrainingSettings  # noqa: E402
from assets.training.k8s_nodes import (  # noqa: E402
    NODE_RANK_FROM_INDEX,
    KubernetesApi,
    NodePods,
    headless_service,
    launch_on_kubernetes,
    node0_pod,
    other_nodes_job,
)

PODS = NodePods(name="aerorl-1a2b3c4d", namespace="train", image="reg/aerorl:1", workdir="/app", module="pkg.worker",
                nnodes=3, nproc_per_node=2, port=29500, resources={"cpu": "8", "nvidia.com/gpu": "2"},
                volume_claim="shared-rwx")
HOST = "aerorl-1a2b3c4d-0.aerorl-1a2b3c4d.train.svc"
LABEL = {"aerorl.dev/training-run": "aerorl-1a2b3c4d"}
EXTRAS = {"config_path": "/app/config/benchmark.toml", "failures": "", "failure_log": "/dev/termination-log"}


def torchrun(node_rank: str) -> list[str]:
    return ["python", "-m", "torch.distributed.run", "--nnodes", "3", "--nproc-per-node", "2", "--node-rank",
            node_rank, "--master-addr", HOST, "--master-port", "29500", "-m", "pkg.worker"]


def node_container(command: list[str], env: list[dict]) -> dict:
    return {"name": "torchrun", "image": "reg/aerorl:1", "workingDir": "/app", "command": command, "env": env,
            "terminationMessagePolicy": "FallbackToLogsOnError",
            "resources": {"requests": {"cpu": "8", "nvidia.com/gpu": "2"},
                          "limits": {"cpu": "8", "nvidia.com/gpu": "2"}},
            "volumeMounts": [{"name": "shared", "mountPath": "/app/data", "subPath": "data"},
                             {"name": "shared", "mountPath": "/app/reports", "subPath": "reports"}]}


VOLUMES = [{"name": "shared", "persistentVolumeClaim": {"claimName": "shared-rwx"}}]


def test_the_pods_come_from_the_run_id_the_training_settings_and_the_launch_table():
    launch = TrainingLaunchSettings(launcher="k8s", namespace="train", image="reg/aerorl:1", cpu="8", gpus=2,
                                    volume_claim="shared-rwx")
    assert NodePods.of("1a2b3c4d-5e6f-7788-99aa-bbccddeeff00", TrainingSettings(nnodes=3, nproc_per_node=2),
                       launch, "/app", "pkg.worker") == PODS
    assert NodePods.of("1a2b3c4d", TrainingSettings(nnodes=2), TrainingLaunchSettings(launcher="k8s", image="i"),
                       "/app", "m").resources == {}  # no cpu, memory or GPU asked: none requested


def test_the_headless_service_names_node_0():
    assert headless_service(PODS) == {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "aerorl-1a2b3c4d", "namespace": "train", "labels": LABEL},
        "spec": {"clusterIP": "None", "selector": LABEL, "publishNotReadyAddresses": True,
                 "ports": [{"name": "rendezvous", "port": 29500}]}}


def test_node_0_is_the_pipes_pod_with_the_stable_hostname():
    meta, spec = node0_pod(PODS)
    assert meta == {"labels": {**LABEL, "aerorl.dev/node": "0"}}
    assert spec == {"hostname": "aerorl-1a2b3c4d-0", "subdomain": "aerorl-1a2b3c4d", "restartPolicy": "Never",
                    "containers": [node_container(torchrun("0"), [])], "volumes": VOLUMES}


def test_the_other_nodes_are_one_indexed_job():
    job = other_nodes_job(PODS, EXTRAS)
    (context,) = job["spec"]["template"]["spec"]["containers"][0]["env"]
    assert context["name"] == "DAGSTER_PIPES_CONTEXT"
    assert decode_env_var(context["value"]) == {"data": {"extras": EXTRAS}}  # read by pipes_extras() on every rank
    shell = ("exec python -m torch.distributed.run --nnodes 3 --nproc-per-node 2 --node-rank "
             f"$((JOB_COMPLETION_INDEX + 1)) --master-addr {HOST} --master-port 29500 -m pkg.worker")
    assert job == {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "aerorl-1a2b3c4d-nodes", "namespace": "train", "labels": LABEL},
        "spec": {"completionMode": "Indexed", "completions": 2, "parallelism": 2, "backoffLimit": 0,
                 "template": {"metadata": {"labels": LABEL},
                              "spec": {"subdomain": "aerorl-1a2b3c4d", "restartPolicy": "Never",
                                       "containers": [node_container(["sh", "-c", shell], [context])],
                                       "volumes": VOLUMES}}}}


def test_the_manifests_are_valid_kubernetes_objects():
    """dagster-k8s's own conversion, which refuses any key the Kubernetes model does not have."""
    service = k8s_model_from_dict(kubernetes.client.V1Service,
                                  k8s_snake_case_dict(kubernetes.client.V1Service, headless_service(PODS)))
    job = k8s_model_from_dict(kubernetes.client.V1Job,
                              k8s_snake_case_dict(kubernetes.client.V1Job, other_nodes_job(PODS, EXTRAS)))
    assert service.spec.cluster_ip == "None" and job.spec.completion_mode == "Indexed"
    assert job.spec.template.spec.containers[0].volume_mounts[1].mount_path == "/app/reports"
    meta, spec = node0_pod(PODS)
    pod = build_pod_body("dagster-run-rl-run-1", None, None, {"DAGSTER_PIPES_CONTEXT": "ctx"}, meta, spec)
    assert (pod.spec.hostname, pod.spec.subdomain, pod.metadata.labels["aerorl.dev/node"]) == (
        "aerorl-1a2b3c4d-0", "aerorl-1a2b3c4d", "0")
    (node,) = pod.spec.containers  # the Pipes client's variables join our container, which it keeps
    assert node.command == torchrun("0") and node.env[-1].name == "DAGSTER_PIPES_CONTEXT"
    assert node.resources.limits == {"cpu": "8", "nvidia.com/gpu": "2"}


def test_each_job_pod_runs_the_node_after_its_index(tmp_path: Path):
    """The Job's shell, run as Kubernetes runs it, with a ``python`` that prints its arguments."""
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\necho "$@"\n')
    fake.chmod(0o755)
    command = other_nodes_job(PODS, EXTRAS)["spec"]["template"]["spec"]["containers"][0]["command"]
    ran = subprocess.run(command, env={"PATH": f"{tmp_path}:{os.environ['PATH']}", "JOB_COMPLETION_INDEX": "1"},
                         capture_output=True, text=True, check=True)
    assert ran.stdout.split() == torchrun("2")[1:]
    assert NODE_RANK_FROM_INDEX not in ran.stdout


class FakeCluster:
    """The calls the launch makes, in order; the run's pods as ``list_namespaced_pod`` returns them; the
    Job failed once ``job_failed`` is set."""

    def __init__(self, pods=()) -> None:
        self.calls, self.pods = [], list(pods)
        self.job_failed = threading.Event()
        self.node0_deleted = threading.Event()
        self.api = KubernetesApi(core=SimpleNamespace(
            create_namespaced_service=lambda ns, body: self.calls.append(("create", body["kind"], ns)),
            delete_namespaced_service=lambda name, ns: self.calls.append(("delete", "Service", name)),
            list_namespaced_pod=lambda ns, label_selector: SimpleNamespace(items=self.pods),
            delete_collection_namespaced_pod=self.delete_pods,
        ), batch=SimpleNamespace(
            create_namespaced_job=lambda ns, body: self.calls.append(("create", body["kind"], ns)),
            delete_namespaced_job=lambda name, ns, propagation_policy: self.calls.append(
                ("delete", "Job", name, propagation_policy)),
            read_namespaced_job_status=lambda name, ns: SimpleNamespace(status=SimpleNamespace(
                failed=1 if self.job_failed.is_set() else None)),
        ))

    def delete_pods(self, ns, label_selector):
        self.calls.append(("delete", "Pod", label_selector))
        self.node0_deleted.set()


class FakePipesClient:
    """``PipesK8sClient.run``: records its arguments; ``outcome`` returns or raises what it is given, or
    waits until node 0's pod is deleted and fails as the real client's wait then fails."""

    def __init__(self, cluster: FakeCluster, outcome) -> None:
        self.cluster, self.outcome, self.runs = cluster, outcome, []

    def run(self, **arguments):
        self.cluster.calls.append(("run", "node 0"))
        self.runs.append(arguments)
        return self.outcome(self.cluster)


def finished() -> object:
    return "the completed invocation"


def failed(cluster):
    raise RuntimeError("pod failed")  # what the client raises when node 0's pod fails


def waits_for_node_0(cluster):
    assert cluster.node0_deleted.wait(5), "node 0's pod was never deleted"
    cluster.calls.append(("run", "ended"))
    raise RuntimeError("pod not found")


def terminated(name: str, exit_code: int, message: str, reason: str = "Error", index: str | None = None, at=10):
    """A pod of the run whose container ended: node 0's (no index) or the Job's of completion ``index``."""
    return kubernetes.client.V1Pod(
        metadata=kubernetes.client.V1ObjectMeta(
            name=name, labels={**LABEL, **({} if index else {"aerorl.dev/node": "0"})},
            annotations={"batch.kubernetes.io/job-completion-index": index} if index else None),
        status=kubernetes.client.V1PodStatus(container_statuses=[kubernetes.client.V1ContainerStatus(
            name="torchrun", image="reg/aerorl:1", image_id="", ready=False, restart_count=0,
            state=kubernetes.client.V1ContainerState(terminated=kubernetes.client.V1ContainerStateTerminated(
                exit_code=exit_code, reason=reason, message=message,
                finished_at=datetime.fromtimestamp(at, UTC))))]))


CLEANUP = [("delete", "Pod", "aerorl.dev/training-run=aerorl-1a2b3c4d,aerorl.dev/node=0"),
           ("delete", "Job", "aerorl-1a2b3c4d-nodes", "Background"), ("delete", "Service", "aerorl-1a2b3c4d")]


def test_the_launch_creates_the_service_and_job_runs_node_0_through_pipes_and_deletes_them():
    cluster = FakeCluster()
    client = FakePipesClient(cluster, lambda _: finished())
    context = object()
    assert launch_on_kubernetes(context, PODS, {"config_path": "c"}, client, cluster.api, poll_s=0.01) == finished()
    assert cluster.calls == [("create", "Service", "train"), ("create", "Job", "train"), ("run", "node 0"), *CLEANUP]
    meta, spec = node0_pod(PODS)
    assert client.runs == [{"context": context, "extras": {**EXTRAS, "config_path": "c"},
                            "namespace": "train", "base_pod_meta": meta, "base_pod_spec": spec,
                            "delete_pod_on_completion": False}]


def test_a_failed_rank_is_named_with_its_node_from_the_termination_messages():
    """Node 1's rank 2 failed first; rank 0 failed after it (its peer left): rank 2 is the root cause."""
    cluster = FakeCluster([
        terminated("dagster-rl-run-1", 1, '{"rank": 0, "node": 0, "time": 20.0, "error": "RuntimeError: peer left"}\n'),
        terminated("aerorl-1a2b3c4d-nodes-0-x", 1, 'Traceback (most recent call last):\n'
                   '{"rank": 2, "node": 1, "time": 12.5, "error": "ValueError: bad batch"}\n', index="0"),
    ])
    with pytest.raises(dg.Failure) as raised:
        launch_on_kubernetes(object(), PODS, {}, FakePipesClient(cluster, failed), cluster.api, poll_s=0.01)
    assert raised.value.description == "training rank 2 of 6 (node 1 of 3) failed: ValueError: bad batch"
    assert cluster.calls[-3:] == CLEANUP


def test_a_node_that_failed_without_a_rank_record_is_named_by_its_pod():
    cluster = FakeCluster([terminated("aerorl-1a2b3c4d-nodes-1-y", 137, "", reason="OOMKilled", index="1")])
    with pytest.raises(dg.Failure) as raised:
        launch_on_kubernetes(object(), PODS, {}, FakePipesClient(cluster, failed), cluster.api, poll_s=0.01)
    assert raised.value.description == (
        "training node 2 of 3 failed: pod aerorl-1a2b3c4d-nodes-1-y exited with code 137 (OOMKilled)")


def test_a_failed_job_pod_stops_node_0_instead_of_leaving_it_at_a_collective():
    cluster = FakeCluster([terminated("aerorl-1a2b3c4d-nodes-0-z", 1, "", index="0")])
    cluster.job_failed.set()
    with pytest.raises(dg.Failure, match=r"^training node 1 of 3 failed: pod aerorl-1a2b3c4d-nodes-0-z exited"):
        launch_on_kubernetes(object(), PODS, {}, FakePipesClient(cluster, waits_for_node_0), cluster.api, poll_s=0.01)
    assert cluster.calls[2:] == [("run", "node 0"), CLEANUP[0], ("run", "ended"), *CLEANUP]  # deleted while it ran
