"""The benchmark matrix as Kubernetes manifests: one suspended Job per run, a ConfigMap, a ServiceAccount.

Pure functions from config to dicts (the chart in :mod:`hyperpod_k8s.benchmark.chart` only places them);
``hyperpod-dpd bench`` reads the synthesized file and resumes the Jobs one at a time.

* **One Job per run** (mode x scenario x concurrency), created ``suspend: true``: applying the file starts
  nothing; ``bench`` unsuspends one Job at a time, against the endpoint mode it has just applied.
* **Pinned client**: ``benchmark.client_image`` is pinned by digest (config rule) and genai-bench comes from
  ``genai-bench.lock.txt``, every package ``==`` pinned with its sha256, installed with
  ``pip install --require-hashes --no-deps``: no unpinned install at run time.
* **Target**: the router's in-cluster Service ``<name>-<namespace>-routing-service`` in
  ``hyperpod-inference-system`` on port 443 (AWS ML blog "Disaggregated prefill and decode for LLM inference
  on SageMaker HyperPod", 2026-07-10, "Invoke the endpoint": ``ROUTER_URL=http://...-routing-service.
  hyperpod-inference-system.svc.cluster.local:443``), or the load balancer over TLS with the endpoint's PEM
  mounted from a Secret as ``REQUESTS_CA_BUNDLE`` (genai-bench posts with ``requests``).
* Each run records the routing threshold and strategy and each engine's ``--gpu-memory-utilization`` it ran under
  (``bench-run.json``).
* **Two experiments, labelled** (``benchmark.experiments``): ``aws-reference`` runs the ``path: reference``
  scenarios at AWS's concurrency against AWS's layouts (``reference/``: 1P+1D vs one colocated replica),
  ``equal-gpu`` the other scenarios against the configured DPD endpoint with its replicas pinned (autoscaling off,
  ``reference/<name>-equal-gpu-pinned``) and its equal-GPU colocated baseline (the decision basis). The experiment
  is a Job label and goes into ``bench-run.json``; ``BENCH_GPUS`` is the GPUs of the layout the run applies.
* **Off the GPU nodes**: every HyperPod node carries ``hyperpod-dpd/pool`` (the instance groups' Kubernetes
  labels) and HyperPod nodes carry no taint by default, so the Jobs require that the label does *not* exist
  (node affinity ``DoesNotExist``): they land on the system node group, and their requests fit one of its
  ``m7i.xlarge`` nodes next to the cluster add-ons.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from hyperpod_core import bench_runner, sizing
from hyperpod_core.config import Config
from hyperpod_core.config.model import BenchmarkScenarioConfig
from hyperpod_core.inputs import EndpointInputs
from hyperpod_core.names import EndpointNames
from hyperpod_k8s.endpoint import defaults as d
from hyperpod_k8s.endpoint.props import endpoint_props

Mode = Literal["dpd", "colocated"]
MODES: Final[tuple[Mode, ...]] = ("dpd", "colocated")

HERE = Path(__file__).resolve().parent
LOCK_FILE: Final = HERE / "genai-bench.lock.txt"
#: The runner the Jobs execute (standard library + boto3; the report reads what it prints), and its name in the
#: ConfigMap.
RUNNER_FILE: Final = Path(bench_runner.__file__)
RUNNER_KEY: Final = "runner.py"

ROUTER_PORT: Final = 443
CA_MOUNT: Final = "/etc/bench-ca"
LABEL_PREFIX: Final = "hyperpod-dpd/benchmark"
#: Head room of a Job beyond its stop condition: venv install, tokenizer download, genai-bench start-up.
JOB_OVERHEAD_SECONDS: Final = 1800
Experiment = Literal["aws-reference", "equal-gpu"]
EXPERIMENTS: Final[tuple[Experiment, ...]] = ("aws-reference", "equal-gpu")
#: The label every HyperPod node of this project carries (``hyperpod_constructs.hyperpod_cluster.POOL_LABEL``).
GPU_POOL_LABEL: Final = d.POOL_NODE_LABEL
#: The client's requests: one genai-bench process with up to 32 streams (tokenizing, SSE parsing) needs about a
#: core and under 2 GiB; they fit a system node (m7i.xlarge: 4 vCPU, 16 GiB, EC2 general purpose specs) beside
#: CoreDNS, the load balancer controller and the DaemonSets. Limits let a burst use the rest of the node.
REQUESTS: Final = {"cpu": "1", "memory": "2Gi"}
LIMITS: Final = {"cpu": "3", "memory": "6Gi"}


@dataclass(frozen=True, kw_only=True)
class BenchmarkRun:
    """One cell of the matrix."""

    mode: Mode
    experiment: Experiment
    scenario: str
    traffic: str
    path: str
    concurrency: int
    job_name: str

    @property
    def key(self) -> str:
        """``<mode>-<scenario>-c<n>``: the runner's experiment folder and the results sub-folder."""
        return f"{self.mode}-{self.scenario}-c{self.concurrency}"


def router_service_url(config: Config) -> str:
    return f"http://{EndpointNames.of(config).router_service_host}:{ROUTER_PORT}"


def api_base(config: Config) -> str:
    b = config.benchmark
    if b.target == "load_balancer":
        return (b.load_balancer_url or "").rstrip("/")
    return router_service_url(config)


def resource_name(config: Config) -> str:
    """Name of the ConfigMap and ServiceAccount: ``<endpoint>-benchmark``."""
    return EndpointNames.of(config).benchmark_resource


def scenarios_of(config: Config, experiment: Experiment) -> list[BenchmarkScenarioConfig]:
    """The scenarios ``experiment`` runs (none when ``benchmark.experiments`` leaves it out)."""
    if experiment not in config.benchmark.experiments:
        return []
    return [s for s in config.benchmark_scenarios() if s.experiment == experiment]


def benchmark_runs(config: Config) -> list[BenchmarkRun]:
    """Every run in execution order: per experiment (aws-reference first), all of DPD, then all of colocated
    (one switch per experiment and mode)."""
    runs: list[BenchmarkRun] = []
    for experiment in EXPERIMENTS:
        for mode in MODES:
            for s in scenarios_of(config, experiment):
                for n in config.benchmark_concurrency(s):
                    name = f"{config.endpoint.name}-bench-{mode}-{s.name}-c{n}"  # <= 63: a config rule
                    runs.append(BenchmarkRun(mode=mode, experiment=experiment, scenario=s.name, traffic=s.traffic,
                                             path=s.path, concurrency=n, job_name=name))
    return runs


def gpus_per_mode(config: Config, inputs: EndpointInputs, experiment: Experiment = "equal-gpu") -> dict[Mode, int]:
    """GPUs each endpoint mode holds in ``experiment`` (the GPU-normalized comparison divides by these): the
    replicas of the layout that experiment applies, whose autoscaling is always off
    (:func:`hyperpod_k8s.benchmark.reference.experiment_props`), so the count is what runs."""
    from hyperpod_k8s.benchmark.reference import experiment_props

    p = endpoint_props(config, inputs)
    dpd, colocated = experiment_props(p, experiment, "dpd"), experiment_props(p, experiment, "colocated")
    return {"dpd": dpd.prefill.replicas * dpd.prefill.gpus + dpd.decode.replicas * dpd.decode.gpus,
            "colocated": colocated.colocated_replicas * colocated.gpus_per_replica}


def gpu_memory_utilization(config: Config, mode: Mode) -> str:
    """What each engine of ``mode`` runs with, for ``bench-run.json``: ``prefill=<u>,decode=<u>`` (each role's
    last ``--gpu-memory-utilization``) or ``colocated=<u>`` (the baseline's own, raised by the PD buffer's share:
    :func:`hyperpod_core.sizing.colocated_gpu_memory_utilization`)."""
    e = config.endpoint
    if mode == "colocated":
        return f"colocated={sizing.colocated_gpu_memory_utilization(e):g}"
    return ",".join(f"{role}={sizing.role_gpu_memory_utilization(e, role):g}" for role in ("prefill", "decode"))


def routing_strategy(config: Config, inputs: EndpointInputs, mode: Mode) -> str:
    """The router strategy the run's endpoint uses: the configured one on DPD, the spreading one colocated."""
    p = endpoint_props(config, inputs)
    return p.routing_strategy if mode == "dpd" else p.colocated_routing_strategy


def _labels(config: Config, run: BenchmarkRun | None = None) -> dict[str, str]:
    labels = {"app.kubernetes.io/name": f"{config.endpoint.name}-benchmark",
              "app.kubernetes.io/part-of": config.name, "app.kubernetes.io/managed-by": "cdk8s",
              f"{LABEL_PREFIX}-endpoint": config.endpoint.name}
    if run is not None:
        labels |= {f"{LABEL_PREFIX}-mode": run.mode, f"{LABEL_PREFIX}-experiment": run.experiment,
                   f"{LABEL_PREFIX}-scenario": run.scenario, f"{LABEL_PREFIX}-concurrency": str(run.concurrency)}
    return labels


def config_map(config: Config) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": resource_name(config), "namespace": config.endpoint.namespace,
                     "labels": _labels(config)},
        "data": {LOCK_FILE.name: LOCK_FILE.read_text(encoding="utf-8"),
                 RUNNER_KEY: RUNNER_FILE.read_text(encoding="utf-8")},
    }


def service_account(config: Config) -> dict[str, Any]:
    """The Jobs' identity; the platform stack gives it an EKS Pod Identity association with S3 read on the model
    prefix (tokenizer) and write on ``benchmark.results_s3_uri`` (docs/benchmark.md)."""
    return {
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": resource_name(config), "namespace": config.endpoint.namespace,
                     "labels": _labels(config)},
        "automountServiceAccountToken": False,
    }


def _install_and_run() -> str:
    return ("set -eu; python -m venv /tmp/venv; "
            f"/tmp/venv/bin/python -m pip install --quiet --no-cache-dir --require-hashes --no-deps "
            f"-r /bench/{LOCK_FILE.name}; "
            f"exec /tmp/venv/bin/python /bench/{RUNNER_KEY}")


def job(config: Config, inputs: EndpointInputs, run: BenchmarkRun) -> dict[str, Any]:
    b, e = config.benchmark, config.endpoint
    gpus = gpus_per_mode(config, inputs, run.experiment)[run.mode]
    bucket = inputs.model_bucket_name.value or ""
    props = endpoint_props(config, inputs)
    env: list[dict[str, str]] = [
        {"name": "BENCH_MODE", "value": run.mode},
        {"name": "BENCH_EXPERIMENT", "value": run.experiment},
        {"name": "BENCH_SCENARIO", "value": run.scenario},
        {"name": "BENCH_TRAFFIC", "value": run.traffic},
        {"name": "BENCH_PATH", "value": run.path},
        {"name": "BENCH_CONCURRENCY", "value": str(run.concurrency)},
        {"name": "BENCH_MAX_TIME_MINUTES", "value": str(b.max_time_per_run_minutes)},
        {"name": "BENCH_MAX_REQUESTS", "value": str(b.max_requests_per_run)},
        {"name": "BENCH_WARMUP_RATIO", "value": f"{b.warmup_ratio:g}"},
        {"name": "BENCH_COOLDOWN_RATIO", "value": f"{b.cooldown_ratio:g}"},
        {"name": "BENCH_API_BASE", "value": api_base(config)},
        # The name the endpoint serves (vLLM --served-model-name), the same for every revision of the weights.
        {"name": "BENCH_API_MODEL", "value": props.served_model_name},
        {"name": "BENCH_ENDPOINT", "value": f"{e.namespace}/{e.name}"},
        {"name": "BENCH_ROUTING_THRESHOLD", "value": str(e.routing_threshold_tokens)},
        {"name": "BENCH_ROUTING_STRATEGY", "value": routing_strategy(config, inputs, run.mode)},
        {"name": "BENCH_GPUS", "value": str(gpus)},
        {"name": "BENCH_GPU_MEMORY_UTILIZATION", "value": gpu_memory_utilization(config, run.mode)},
        {"name": "BENCH_INSTANCE_TYPE", "value": e.instance_type},
        # The tokenizer of the weights the endpoint mounts (their revision's own prefix when staged).
        {"name": "BENCH_TOKENIZER_S3", "value": f"s3://{bucket}/{props.model_location}"},
        {"name": "BENCH_OUTPUT_DIR", "value": "/tmp/bench"},
        {"name": "AWS_REGION", "value": config.region},
        {"name": "ENABLE_UI", "value": "false"},
        {"name": "HF_HUB_OFFLINE", "value": "1"},
        {"name": "HOME", "value": "/tmp"},
        {"name": "MPLCONFIGDIR", "value": "/tmp/matplotlib"},
        {"name": "PIP_DISABLE_PIP_VERSION_CHECK", "value": "1"},
    ]
    if b.results_s3_uri:
        env.append({"name": "BENCH_RESULTS_S3", "value": b.results_s3_uri.rstrip("/")})
    mounts: list[dict[str, Any]] = [{"name": "bench", "mountPath": "/bench", "readOnly": True},
                                    {"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[dict[str, Any]] = [{"name": "bench", "configMap": {"name": resource_name(config)}},
                                     {"name": "tmp", "emptyDir": {"sizeLimit": "8Gi"}}]
    if b.target == "load_balancer" and b.ca_secret_name:
        env.append({"name": "REQUESTS_CA_BUNDLE", "value": f"{CA_MOUNT}/ca.pem"})
        mounts.append({"name": "endpoint-ca", "mountPath": CA_MOUNT, "readOnly": True})
        volumes.append({"name": "endpoint-ca", "secret": {"secretName": b.ca_secret_name}})
    labels = _labels(config, run)
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": run.job_name, "namespace": e.namespace, "labels": labels,
                     "annotations": {f"{LABEL_PREFIX}-traffic": run.traffic, f"{LABEL_PREFIX}-path": run.path}},
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "activeDeadlineSeconds": b.max_time_per_run_minutes * 60 + JOB_OVERHEAD_SECONDS,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": resource_name(config),
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": GPU_POOL_LABEL, "operator": "DoesNotExist"}]}]}}},
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "genai-bench",
                        "image": b.client_image,
                        "command": ["/bin/sh", "-c", _install_and_run()],
                        "env": env,
                        "resources": {"requests": dict(REQUESTS), "limits": dict(LIMITS)},
                        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": mounts,
                    }],
                    "volumes": volumes,
                },
            },
        },
    }


def benchmark_manifests(config: Config, inputs: EndpointInputs) -> list[dict[str, Any]]:
    """ConfigMap, ServiceAccount, then one Job per run in execution order."""
    return [config_map(config), service_account(config),
            *(job(config, inputs, r) for r in benchmark_runs(config))]
