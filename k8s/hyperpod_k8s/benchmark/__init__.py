"""The colocated-vs-DPD benchmark: genai-bench Jobs (one per run) in the ``<endpoint>-benchmark`` chart."""

from hyperpod_k8s.benchmark.manifests import (
    LOCK_FILE,
    MODES,
    RUNNER_FILE,
    BenchmarkRun,
    benchmark_manifests,
    benchmark_runs,
    gpus_per_mode,
)

__all__ = ["LOCK_FILE", "MODES", "RUNNER_FILE", "BenchmarkRun", "benchmark_manifests", "benchmark_runs",
           "gpus_per_mode"]
