"""A training run's torchrun nodes on Kubernetes, one pod per node (``[training_launch] launcher = "k8s"``).

What ``rl_run`` creates in ``namespace`` for a run of ``nnodes`` nodes of ``nproc_per_node`` ranks:

- **node 0** (ranks 0 … P-1): a pod that dagster-k8s's ``PipesK8sClient`` launches and follows. Its
  logs are the Pipes channel, so rank 0, which reports back, must be here; the pod's hostname is
  ``<name>-0`` under the subdomain ``<name>``.
- **nodes 1 … N-1**: one indexed Job ``<name>-nodes`` (``completionMode: Indexed``, ``completions =
  parallelism = N - 1``, ``backoffLimit: 0``); the pod of index i is node i + 1. ``PipesK8sClient``
  launches a single pod, so these are created through the Kubernetes API beside it. They read the run
  from ``DAGSTER_PIPES_CONTEXT`` holding the run's extras only: no rank of theirs opens Pipes' channel.
- **a headless Service** ``<name>`` selecting the run's pods, which gives node 0 the stable name
  ``<name>-0.<name>.<namespace>.svc``: every node's torchrun meets there (``--master-addr``, port
  ``port``). The node ranks are fixed (``--node-rank``; torchrun's static rendezvous), not assigned
  by c10d, which orders nodes by their addresses: rank 0 must be in the pod Pipes follows.

A rank that fails appends its error as a line to its pod's termination log (``/dev/termination-log``);
the step then reads the pods' termination messages and fails with one line naming the first failing
rank and its node (or the first pod that failed, where no rank wrote one). While node 0 runs, the Job
is watched: when a pod of another node failed, node 0's pod is deleted, so a rank waiting for the
dead node at a collective (NCCL) does not hold the run for ``dist_timeout_s``. The Job, the Service
and node 0's pod are deleted when the step ends, however it ends.

The image must hold this project at the step's path (``workdir``) with the ``[distributed]`` extra, as
dagster-k8s's step pods do; ``volume_claim`` (ReadWriteMany) is mounted at ``data/`` and ``reports/``
in every node pod, where rank 0 writes checkpoints and the report database and the step reads them.
"""

from __future__ import annotations

import json
import os
import shlex
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg

from aerorl_ops.config.scale_out import TrainingLaunchSettings
from aerorl_ops.config.training import TrainingSettings
from assets.training.rank_failures import failure_line, root_cause

RUN_LABEL = "aerorl.dev/training-run"
NODE_LABEL = "aerorl.dev/node"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"  # the annotation of an indexed Job's pods
NODE_RANK_FROM_INDEX = "$((JOB_COMPLETION_INDEX + 1))"
TERMINATION_LOG = "/dev/termination-log"
POLL_S = 10.0
INSTALL_HINT = "install the scale-out extra: pip install -e '.[distributed]'"


@dataclass(frozen=True)
class NodePods:
    """What every node pod of one run shares."""

    name: str  # a DNS label: the Service, node 0's hostname (<name>-0), the Job (<name>-nodes), the pods' label
    namespace: str
    image: str
    workdir: str  # the project's folder in the image: the Dagster step's
    module: str  # what every rank runs (assets.training.torchrun_worker)
    nnodes: int
    nproc_per_node: int
    port: int
    resources: Mapping[str, str]  # each pod's requests and limits: cpu, memory, nvidia.com/gpu (none: empty)
    volume_claim: str  # "" = no shared volume

    @classmethod
    def of(cls, run_id: str, settings: TrainingSettings, launch: TrainingLaunchSettings, workdir: str,
           module: str) -> NodePods:
        """The pods of Dagster run ``run_id``'s training of ``settings``, as ``launch`` says."""
        resources = {"cpu": launch.cpu, "memory": launch.memory,
                     "nvidia.com/gpu": str(launch.gpus) if launch.gpus else ""}
        return cls(f"aerorl-{run_id[:8]}", launch.namespace, launch.image, workdir, module, settings.nnodes,
                   settings.nproc_per_node, launch.port, {name: value for name, value in resources.items() if value},
                   launch.volume_claim)

    @property
    def rendezvous_host(self) -> str:
        """Node 0's name through the headless Service."""
        return f"{self.name}-0.{self.name}.{self.namespace}.svc"

    @property
    def job_name(self) -> str:
        return f"{self.name}-nodes"


def node_command(pods: NodePods, node_rank: str) -> list[str]:
    """torchrun for node ``node_rank`` (a number, or the shell expression of an indexed Job's pods)."""
    return ["python", "-m", "torch.distributed.run", "--nnodes", str(pods.nnodes), "--nproc-per-node",
            str(pods.nproc_per_node), "--node-rank", node_rank, "--master-addr", pods.rendezvous_host,
            "--master-port", str(pods.port), "-m", pods.module]


def container(pods: NodePods, command: list[str], env: Iterable[Mapping[str, str]] = ()) -> dict[str, Any]:
    """The one container of a node pod: torchrun from the image, in the project's folder."""
    spec: dict[str, Any] = {"name": "torchrun", "image": pods.image, "workingDir": pods.workdir, "command": command,
                            "env": [dict(variable) for variable in env],
                            "terminationMessagePolicy": "FallbackToLogsOnError"}
    if pods.resources:
        spec["resources"] = {"requests": dict(pods.resources), "limits": dict(pods.resources)}
    if pods.volume_claim:
        spec["volumeMounts"] = [{"name": "shared", "mountPath": f"{pods.workdir}/{folder}", "subPath": folder}
                                for folder in ("data", "reports")]
    return spec


def pod_spec(pods: NodePods, node_container: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A node pod's spec: its container, never restarted (a node that fails fails the run), the shared volume."""
    spec = {**fields, "subdomain": pods.name, "restartPolicy": "Never", "containers": [node_container]}
    if pods.volume_claim:
        spec["volumes"] = [{"name": "shared", "persistentVolumeClaim": {"claimName": pods.volume_claim}}]
    return spec


def headless_service(pods: NodePods) -> dict[str, Any]:
    """The Service that names node 0 ``<name>-0.<name>`` (it must select the pod to give it a DNS record;
    published before the pod is ready, as the other nodes look it up while it starts)."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": pods.name, "namespace": pods.namespace, "labels": {RUN_LABEL: pods.name}},
            "spec": {"clusterIP": "None", "selector": {RUN_LABEL: pods.name}, "publishNotReadyAddresses": True,
                     "ports": [{"name": "rendezvous", "port": pods.port}]}}


def node0_pod(pods: NodePods) -> tuple[dict[str, Any], dict[str, Any]]:
    """Node 0's pod as ``PipesK8sClient.run`` takes it: ``(base_pod_meta, base_pod_spec)``; the client adds
    the Pipes variables to its container and names the pod."""
    meta = {"labels": {RUN_LABEL: pods.name, NODE_LABEL: "0"}}
    return meta, pod_spec(pods, container(pods, node_command(pods, "0")), hostname=f"{pods.name}-0")


def other_nodes_job(pods: NodePods, extras: Mapping[str, Any]) -> dict[str, Any]:
    """The indexed Job of nodes 1 … N-1: the pod of index i runs node i + 1, reading the run from
    ``extras`` (the Pipes context's data, without Pipes' channel)."""
    from dagster_pipes import encode_env_var

    others = pods.nnodes - 1
    shell = " ".join(arg if arg == NODE_RANK_FROM_INDEX else shlex.quote(arg)
                     for arg in node_command(pods, NODE_RANK_FROM_INDEX))
    context = {"name": "DAGSTER_PIPES_CONTEXT", "value": encode_env_var({"data": {"extras": dict(extras)}})}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": pods.job_name, "namespace": pods.namespace, "labels": {RUN_LABEL: pods.name}},
            "spec": {"completionMode": "Indexed", "completions": others, "parallelism": others, "backoffLimit": 0,
                     "template": {"metadata": {"labels": {RUN_LABEL: pods.name}},
                                  "spec": pod_spec(pods, container(pods, ["sh", "-c", f"exec {shell}"], [context]))}}}


def pod_node(pod: Any) -> int:
    """The node a pod of the run runs: 0 for the Pipes pod, its completion index + 1 for the Job's."""
    labels, annotations = pod.metadata.labels or {}, pod.metadata.annotations or {}
    if labels.get(NODE_LABEL) == "0":
        return 0
    return int(annotations[COMPLETION_INDEX]) + 1


def pod_failures(pods: Iterable[Any]) -> list[dict[str, Any]]:
    """Every rank record in the termination messages of ``pods`` that failed, and a node record per
    failed pod (its exit code and reason), timed by when it ended."""
    records = []
    for pod in pods:
        for status in pod.status.container_statuses or []:
            ended = status.state.terminated if status.state else None
            if ended is None or not ended.exit_code:
                continue
            records.append({"node": pod_node(pod), "time": ended.finished_at.timestamp() if ended.finished_at else 0,
                            "error": f"pod {pod.metadata.name} exited with code {ended.exit_code} ({ended.reason})"})
            for line in (ended.message or "").splitlines():
                try:
                    record = json.loads(line)
                except ValueError:  # the log's last lines, where no rank wrote its error
                    continue
                if isinstance(record, dict) and {"rank", "node", "time", "error"} <= set(record):
                    records.append(record)
    return records


@dataclass(frozen=True)
class KubernetesApi:
    core: Any  # kubernetes.client.CoreV1Api
    batch: Any  # kubernetes.client.BatchV1Api


def kubernetes_api() -> KubernetesApi:
    """The cluster's API, configured as dagster-k8s's Pipes client configures it: in-cluster when this
    runs in a pod, else the kubeconfig."""
    try:
        import kubernetes
    except ImportError as error:
        raise ImportError(f'[training_launch] launcher = "k8s" needs dagster-k8s; {INSTALL_HINT}') from error
    if os.getenv("KUBERNETES_SERVICE_HOST"):
        kubernetes.config.load_incluster_config()
    else:
        kubernetes.config.load_kube_config()
    return KubernetesApi(kubernetes.client.CoreV1Api(), kubernetes.client.BatchV1Api())


class NodeWatch:
    """While node 0 runs: every ``poll_s``, the other nodes' Job; once one of its pods failed, node 0's pod
    is deleted, which ends the Pipes client's wait."""

    def __init__(self, api: KubernetesApi, pods: NodePods, poll_s: float = POLL_S) -> None:
        self.api, self.pods, self.poll_s = api, pods, poll_s
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.watch, name="aerorl-node-watch", daemon=True)

    def watch(self) -> None:
        while not self.done.wait(self.poll_s):
            if self.api.batch.read_namespaced_job_status(self.pods.job_name, self.pods.namespace).status.failed:
                self.api.core.delete_collection_namespaced_pod(self.pods.namespace,
                                                               label_selector=node0_selector(self.pods))
                return

    def __enter__(self) -> NodeWatch:
        if self.pods.nnodes > 1:
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        if self.thread.is_alive():
            self.thread.join()


def node0_selector(pods: NodePods) -> str:
    return f"{RUN_LABEL}={pods.name},{NODE_LABEL}=0"


def launch_on_kubernetes(context: dg.AssetExecutionContext, pods: NodePods, extras: Mapping[str, Any],
                         client: Any = None, api: KubernetesApi | None = None,
                         poll_s: float = POLL_S) -> dg.PipesClientCompletedInvocation:
    """Create the Service and the other nodes' Job, run node 0 through ``client`` (a ``PipesK8sClient``),
    and delete them all when it ends; a node or rank that failed fails the step with one line naming it."""
    if client is None:
        try:
            from dagster_k8s import PipesK8sClient
        except ImportError as error:
            raise ImportError(f'[training_launch] launcher = "k8s" needs dagster-k8s; {INSTALL_HINT}') from error
        client = PipesK8sClient(poll_interval=poll_s)
    api = api or kubernetes_api()
    extras = {**extras, "failures": "", "failure_log": TERMINATION_LOG}
    created = []
    try:
        api.core.create_namespaced_service(pods.namespace, headless_service(pods))
        created.append("service")
        if pods.nnodes > 1:
            api.batch.create_namespaced_job(pods.namespace, other_nodes_job(pods, extras))
            created.append("job")
        meta, spec = node0_pod(pods)
        with NodeWatch(api, pods, poll_s):
            return client.run(context=context, extras=extras, namespace=pods.namespace, base_pod_meta=meta,
                              base_pod_spec=spec, delete_pod_on_completion=False)
    except Exception as error:
        if "service" not in created:  # nothing ran
            raise
        listed = api.core.list_namespaced_pod(pods.namespace, label_selector=f"{RUN_LABEL}={pods.name}")
        failure = root_cause(pod_failures(listed.items))
        if failure is None:
            raise
        raise dg.Failure(description=failure_line(failure, pods.nnodes * pods.nproc_per_node, pods.nnodes),
                         metadata={"pods": dg.MetadataValue.text(", ".join(p.metadata.name for p in listed.items))}
                         ) from error
    finally:
        api.core.delete_collection_namespaced_pod(pods.namespace, label_selector=node0_selector(pods))
        if "job" in created:
            api.batch.delete_namespaced_job(pods.job_name, pods.namespace, propagation_policy="Background")
        if "service" in created:
            api.core.delete_namespaced_service(pods.name, pods.namespace)
