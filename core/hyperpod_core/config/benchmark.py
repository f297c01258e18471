"""The benchmark section (`hyperpod-dpd bench` / `report`; the cdk8s chart `<endpoint>-benchmark`): the traffic
shapes, their concurrency and the stop conditions."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from hyperpod_core import pins
from hyperpod_core.config.endpoint import EndpointConfig
from hyperpod_core.config.section import Section
from hyperpod_core.config.types import (
    BENCHMARK_PATH_MARGIN,
    DigestPinnedImage,
    S3Uri,
    ScenarioName,
    TrafficScenario,
    unique,
)


class BenchmarkScenarioConfig(Section):
    """One traffic shape of the benchmark matrix."""

    name: ScenarioName
    """Short DNS label, unique among the scenarios (part of Job and file names). Required."""
    traffic: TrafficScenario
    """genai-bench `--traffic-scenario` string: `D(in,out)`, `N(mean,std)/(mean,std)` or `U(min,max)/(min,max)`
    tokens. Required."""
    path: Literal["dpd", "direct", "reference"] = "dpd"
    """Which router path the prompts must take on the DPD endpoint: `dpd` (input well above
    `endpoint.routing_threshold_tokens`), `direct` (well below: straight to decode), `reference` (reproduces a
    published setup as is, e.g. AWS's D(4096,256), even when it sits at the threshold; it runs in the
    `aws-reference` experiment, at AWS's concurrency 8, 16, 32). Default: `dpd`."""

    @property
    def experiment(self) -> Literal["aws-reference", "equal-gpu"]:
        """The experiment this scenario belongs to: `reference` scenarios reproduce AWS's setup."""
        return "aws-reference" if self.path == "reference" else "equal-gpu"


#: Concurrency of AWS's published D(4096,256) run (AWS ML blog "Disaggregated prefill and decode for LLM
#: inference on SageMaker HyperPod", 2026-07-10, "Benchmarking performance"): the aws-reference experiment's levels.
AWS_REFERENCE_CONCURRENCY: tuple[int, ...] = (8, 16, 32)

#: Output lengths of the adoption checklist's shapes: "long" is AWS's >= 256 output tokens and more.
_SHORT_OUTPUT, _LONG_OUTPUT = 128, 1024


def default_scenarios(endpoint: EndpointConfig) -> tuple[BenchmarkScenarioConfig, ...]:
    """AWS's D(4096,256) plus the adoption checklist's four shapes, sized from the endpoint's routing threshold
    (long prompts twice the threshold, short ones a quarter of it) and ``max_model_len``.

    Default endpoint (threshold 4096, max-model-len 16384): D(8192,1024), D(8192,128), D(1024,1024), D(1024,128).
    """
    s, t, cap = BenchmarkScenarioConfig, endpoint.routing_threshold_tokens, endpoint.max_model_len
    out: list[BenchmarkScenarioConfig] = []
    if cap >= 4096 + 256:
        # AWS's published DPD benchmark (1 prefill + 1 decode p5 vs one colocated node).
        out.append(s(name="aws-reference", traffic="D(4096,256)", path="reference"))
    long_in = min(2 * t if t else 8192, cap - _LONG_OUTPUT)
    if long_in >= t * (1 + BENCHMARK_PATH_MARGIN) and long_in > 0:
        out += [s(name="long-in-long-out", traffic=f"D({long_in},{_LONG_OUTPUT})", path="dpd"),
                s(name="long-in-short-out", traffic=f"D({long_in},{_SHORT_OUTPUT})", path="dpd")]
    short_in = max(128, t // 4) if t else 1024
    if short_in + _LONG_OUTPUT <= cap and (not t or short_in <= t * (1 - BENCHMARK_PATH_MARGIN)):
        path: Literal["dpd", "direct"] = "direct" if t else "dpd"
        out += [s(name="short-in-long-out", traffic=f"D({short_in},{_LONG_OUTPUT})", path=path),
                s(name="short-in-short-out", traffic=f"D({short_in},{_SHORT_OUTPUT})", path=path)]
    return tuple(out)


class BenchmarkConfig(Section):
    """The colocated-vs-DPD benchmark matrix (`hyperpod-dpd bench`; docs/benchmark.md)."""

    client_image: DigestPinnedImage = pins.BENCHMARK_CLIENT_IMAGE
    """Image of the benchmark Jobs, pinned by digest (genai-bench is installed from a hash-pinned lock file mounted
    from a ConfigMap). Default: the pinned image (`pins.BENCHMARK_CLIENT_IMAGE`)."""
    scenarios: Annotated[tuple[BenchmarkScenarioConfig, ...], Field(min_length=1, max_length=20)] | None = None
    """The traffic shapes (1 to 20). Default: AWS's D(4096,256) and four shapes sized from the endpoint's routing
    threshold and `max_model_len` (default endpoint: D(8192,1024), D(8192,128), D(1024,1024), D(1024,128))."""
    concurrency: Annotated[tuple[Annotated[int, Field(ge=1, le=1024)], ...], Field(min_length=1, max_length=10),
                           unique("a level")] = (8, 16, 32)
    """Concurrency levels; every scenario runs at each. Default: 8, 16, 32."""
    warmup_ratio: Annotated[float, Field(ge=0, lt=0.5)] = 0.1
    """Share of the first requests of each run left out of the statistics (genai-bench `--warmup-ratio`).
    Default: 0.1."""
    cooldown_ratio: Annotated[float, Field(ge=0, lt=0.5)] = 0.0
    """Share of the last requests of each run left out of the statistics (`--cooldown-ratio`). Default: 0."""
    max_time_per_run_minutes: Annotated[int, Field(ge=1, le=240)] = 15
    """Stop condition: a run ends after this many minutes (genai-bench `--max-time-per-run`), or after
    `max_requests_per_run` requests, whichever comes first. Default: 15."""
    max_requests_per_run: Annotated[int, Field(ge=1, le=100_000)] = 320
    """Stop condition: a run ends after this many requests (`--max-requests-per-run`), or after
    `max_time_per_run_minutes`, whichever comes first. Default: 320."""
    target: Literal["service", "load_balancer"] = "service"
    """`service`: the router's in-cluster Service; `load_balancer`: `load_balancer_url` over TLS. Default:
    `service`."""
    load_balancer_url: str | None = None
    """`https://<host>[:port]` of the endpoint's ALB; required when `target` is `load_balancer`, with
    `ca_secret_name`. Default: none."""
    ca_secret_name: str | None = None
    """Secret with key `ca.pem`: the endpoint's TLS certificate (from the TLS bucket), for `REQUESTS_CA_BUNDLE`;
    required when `target` is `load_balancer`. Default: none."""
    results_s3_uri: S3Uri | None = None
    """`s3://bucket/prefix/`: where each Job uploads its result files, below a folder per endpoint
    (`<prefix>/<endpoint>/<mode>/<run>/`). Default: none (the pod log only)."""
    split_min_saving: Annotated[float, Field(ge=0, lt=1)] = 0.10
    """The report recommends DPD only when it is at least this much cheaper per output token than colocated
    (within that, run-to-run noise and a second pool to operate are not worth it). Default: 0.10."""
    experiments: Annotated[tuple[Literal["aws-reference", "equal-gpu"], ...], Field(min_length=1, max_length=2),
                           unique("an experiment")] = ("aws-reference", "equal-gpu")
    """Which experiments run: `aws-reference` (the scenarios with `path: reference` at AWS's published
    concurrency 8, 16, 32: 1 prefill + 1 decode replica against one colocated replica) and `equal-gpu` (the
    other scenarios: the configured DPD endpoint against colocated replicas on as many GPUs, the decision
    basis). Default: both."""
    instance_hour_usd: Annotated[float, Field(gt=0)] | None = None
    """Price of one `endpoint.instance_type` node-hour in USD: the report (unless `--price`), `plan` (unless
    `--price`/`--prices`) and the dashboards' cost row price at it before the pinned price table
    (`hyperpod_core.prices`). Default: none (the pinned price; without one, costs in GPU-hours only)."""

