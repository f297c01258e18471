"""One endpoint -> the typed props of its ``<endpoint>-benchmark`` chart (:class:`BenchmarkChartProps`), a pure
function.

:class:`~hyperpod_k8s.benchmark.benchmark_chart.BenchmarkChart` builds one suspended Job per run, a ConfigMap and a
ServiceAccount from these props; ``hyperpod-dpd bench`` reads the synthesized file and resumes the Jobs one at a time.

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
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from hyperpod_core.config.benchmark import BenchmarkScenarioConfig
from hyperpod_core.config.spec import EndpointSpec
from hyperpod_k8s.benchmark.reference import experiment_props
from hyperpod_k8s.endpoint.props import EndpointProps
from hyperpod_runtime import bench_runner

Mode = Literal["dpd", "colocated"]
MODES: Final[tuple[Mode, ...]] = ("dpd", "colocated")

HERE = Path(__file__).resolve().parent
LOCK_FILE: Final = HERE / "genai-bench.lock.txt"
#: The runner the Jobs execute (standard library + boto3; the report reads what it prints), and its name in the
#: ConfigMap.
RUNNER_FILE: Final = Path(bench_runner.__file__)
RUNNER_KEY: Final = "runner.py"

ROUTER_PORT: Final = 443
LABEL_PREFIX: Final = "hyperpod-dpd/benchmark"
#: Head room of a Job beyond its stop condition: venv install, tokenizer download, genai-bench start-up.
JOB_OVERHEAD_SECONDS: Final = 1800
Experiment = Literal["aws-reference", "equal-gpu"]
EXPERIMENTS: Final[tuple[Experiment, ...]] = ("aws-reference", "equal-gpu")


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


def router_service_url(spec: EndpointSpec) -> str:
    return f"http://{spec.names.router_service_host}:{ROUTER_PORT}"


def api_base(spec: EndpointSpec) -> str:
    b = spec.benchmark
    if b.target == "load_balancer":
        return (b.load_balancer_url or "").rstrip("/")
    return router_service_url(spec)


def resource_name(spec: EndpointSpec) -> str:
    """Name of the ConfigMap and ServiceAccount: ``<endpoint>-benchmark``."""
    return spec.names.benchmark_resource


def scenarios_of(spec: EndpointSpec, experiment: Experiment) -> list[BenchmarkScenarioConfig]:
    """The scenarios ``experiment`` runs against endpoint ``spec`` (none when ``benchmark.experiments`` leaves it
    out)."""
    if experiment not in spec.benchmark.experiments:
        return []
    return [s for s in spec.benchmark_scenarios() if s.experiment == experiment]


def benchmark_runs(spec: EndpointSpec) -> list[BenchmarkRun]:
    """Every run against endpoint ``spec`` in execution order: per experiment (aws-reference first), all of DPD,
    then all of colocated (one switch per experiment and mode)."""
    runs: list[BenchmarkRun] = []
    for experiment in EXPERIMENTS:
        for mode in MODES:
            for s in scenarios_of(spec, experiment):
                for n in spec.benchmark_concurrency(s):
                    name = f"{spec.name}-bench-{mode}-{s.name}-c{n}"  # <= 63: a config rule
                    runs.append(BenchmarkRun(mode=mode, experiment=experiment, scenario=s.name, traffic=s.traffic,
                                             path=s.path, concurrency=n, job_name=name))
    return runs


def gpus_per_mode(props: EndpointProps, experiment: Experiment = "equal-gpu") -> dict[Mode, int]:
    """GPUs each mode of the endpoint ``props`` holds in ``experiment`` (the GPU-normalized comparison divides by
    these): the replicas of the layout that experiment applies, whose autoscaling is always off
    (:func:`hyperpod_k8s.benchmark.reference.experiment_props`), so the count is what runs."""
    dpd, colocated = experiment_props(props, experiment, "dpd"), experiment_props(props, experiment, "colocated")
    return {"dpd": dpd.prefill.replicas * dpd.prefill.gpus + dpd.decode.replicas * dpd.decode.gpus,
            "colocated": colocated.colocated_replicas * colocated.gpus_per_replica}


def gpu_memory_utilization(spec: EndpointSpec, mode: Mode) -> str:
    """What each engine of ``mode`` runs with, for ``bench-run.json``: ``prefill=<u>,decode=<u>`` (each role's
    last ``--gpu-memory-utilization``) or ``colocated=<u>`` (the baseline's own, raised by the PD buffer's share:
    :meth:`hyperpod_core.config.endpoint.EndpointConfig.colocated_gpu_memory_utilization`)."""
    e = spec.endpoint
    if mode == "colocated":
        return f"colocated={e.colocated_gpu_memory_utilization():g}"
    return ",".join(f"{role}={e.role_gpu_memory_utilization(role):g}" for role in ("prefill", "decode"))


def routing_strategy(props: EndpointProps, mode: Mode) -> str:
    """The router strategy the run's endpoint uses: the configured one on DPD, the spreading one colocated."""
    return props.routing_strategy if mode == "dpd" else props.colocated_routing_strategy


def _labels(spec: EndpointSpec, run: BenchmarkRun | None = None) -> dict[str, str]:
    labels = {"app.kubernetes.io/name": f"{spec.name}-benchmark",
              "app.kubernetes.io/part-of": spec.deployment, "app.kubernetes.io/managed-by": "cdk8s",
              f"{LABEL_PREFIX}-endpoint": spec.name}
    if run is not None:
        labels |= {f"{LABEL_PREFIX}-mode": run.mode, f"{LABEL_PREFIX}-experiment": run.experiment,
                   f"{LABEL_PREFIX}-scenario": run.scenario, f"{LABEL_PREFIX}-concurrency": str(run.concurrency)}
    return labels


def environment(spec: EndpointSpec, props: EndpointProps, run: BenchmarkRun) -> tuple[tuple[str, str], ...]:
    """The runner's environment for ``run`` against endpoint ``spec`` (its endpoint props: ``props``), which
    :mod:`hyperpod_runtime.bench_runner` reads, in this order."""
    b, e = spec.benchmark, spec.endpoint
    env: list[tuple[str, str]] = [
        ("BENCH_MODE", run.mode),
        ("BENCH_EXPERIMENT", run.experiment),
        ("BENCH_SCENARIO", run.scenario),
        ("BENCH_TRAFFIC", run.traffic),
        ("BENCH_PATH", run.path),
        ("BENCH_CONCURRENCY", str(run.concurrency)),
        ("BENCH_MAX_TIME_MINUTES", str(b.max_time_per_run_minutes)),
        ("BENCH_MAX_REQUESTS", str(b.max_requests_per_run)),
        ("BENCH_WARMUP_RATIO", f"{b.warmup_ratio:g}"),
        ("BENCH_COOLDOWN_RATIO", f"{b.cooldown_ratio:g}"),
        ("BENCH_API_BASE", api_base(spec)),
        # The name the endpoint serves (vLLM --served-model-name), the same for every revision of the weights.
        ("BENCH_API_MODEL", props.served_model_name),
        ("BENCH_ENDPOINT", f"{e.namespace}/{e.name}"),
        ("BENCH_ROUTING_THRESHOLD", str(e.routing_threshold_tokens)),
        ("BENCH_ROUTING_STRATEGY", routing_strategy(props, run.mode)),
        ("BENCH_GPUS", str(gpus_per_mode(props, run.experiment)[run.mode])),
        ("BENCH_GPU_MEMORY_UTILIZATION", gpu_memory_utilization(spec, run.mode)),
        ("BENCH_INSTANCE_TYPE", e.instance_type),
        # The tokenizer of the weights the endpoint mounts (their revision's own prefix when staged), in the bucket
        # of the endpoint's model.
        ("BENCH_TOKENIZER_S3", f"s3://{props.bucket_name}/{props.model_location}"),
        # Everything the runner, pip and genai-bench write goes below /tmp, the Job's writable emptyDir (the root
        # filesystem is read-only: BenchmarkChart).
        ("BENCH_OUTPUT_DIR", "/tmp/bench"),
        ("AWS_REGION", spec.region),
        ("ENABLE_UI", "false"),
        ("HF_HUB_OFFLINE", "1"),
        ("HOME", "/tmp"),
        ("MPLCONFIGDIR", "/tmp/matplotlib"),
        ("PIP_DISABLE_PIP_VERSION_CHECK", "1"),
    ]
    if b.results_s3_uri:
        env.append(("BENCH_RESULTS_S3", b.results_s3_uri.rstrip("/")))
    return tuple(env)


@dataclass(frozen=True, kw_only=True)
class BenchmarkJobProps:
    """One suspended Job: one run of the matrix."""

    name: str
    """``metadata.name``: ``<endpoint>-bench-<mode>-<scenario>-c<n>`` (at most 63 characters: a config rule)."""
    labels: dict[str, str]
    """On the Job and its pod template: the chart's labels plus the run's mode, experiment, scenario, concurrency."""
    annotations: dict[str, str]
    environment: tuple[tuple[str, str], ...]
    """The runner's environment variables, in order (:func:`environment`)."""
    active_deadline_seconds: int
    """The run's time limit plus :data:`JOB_OVERHEAD_SECONDS`."""


@dataclass(frozen=True, kw_only=True)
class BenchmarkChartProps:
    """Everything the ``<endpoint>-benchmark`` chart writes; derived from one endpoint by :func:`benchmark_props`."""

    namespace: str
    resource_name: str
    """Name of the ConfigMap and of the ServiceAccount the Jobs run as: ``<endpoint>-benchmark``."""
    labels: dict[str, str]
    """On the ConfigMap and the ServiceAccount."""
    files: tuple[tuple[str, str], ...]
    """The ConfigMap's data, mounted read-only at ``/bench``: the hash-pinned lock and the runner, ``(key, text)``."""
    client_image: str
    """``benchmark.client_image``, pinned by digest (a config rule)."""
    jobs: tuple[BenchmarkJobProps, ...]
    """One per run, in execution order (:func:`benchmark_runs`)."""
    ca_secret_name: str | None = None
    """A Secret whose ``ca.pem`` is mounted as ``REQUESTS_CA_BUNDLE``. Default: none (the in-cluster router over
    plain HTTP; only ``benchmark.target: load_balancer`` talks TLS)."""


def benchmark_props(spec: EndpointSpec, endpoint: EndpointProps) -> BenchmarkChartProps:
    """Endpoint ``spec``'s benchmark (``endpoint``: its endpoint props, :func:`~hyperpod_k8s.endpoint.props.
    endpoint_props`): the ConfigMap, the ServiceAccount ``<endpoint>-benchmark``, then one Job per run in execution
    order, all in the endpoint's namespace."""
    b = spec.benchmark
    jobs = tuple(
        BenchmarkJobProps(
            name=run.job_name, labels=_labels(spec, run),
            annotations={f"{LABEL_PREFIX}-traffic": run.traffic, f"{LABEL_PREFIX}-path": run.path},
            environment=environment(spec, endpoint, run),
            active_deadline_seconds=b.max_time_per_run_minutes * 60 + JOB_OVERHEAD_SECONDS)
        for run in benchmark_runs(spec))
    return BenchmarkChartProps(
        namespace=spec.namespace, resource_name=resource_name(spec), labels=_labels(spec),
        files=((LOCK_FILE.name, LOCK_FILE.read_text(encoding="utf-8")),
               (RUNNER_KEY, RUNNER_FILE.read_text(encoding="utf-8"))),
        client_image=b.client_image, jobs=jobs,
        ca_secret_name=b.ca_secret_name if b.target == "load_balancer" else None)
