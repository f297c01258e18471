"""The colocated-vs-DPD benchmark: genai-bench Jobs (one per run) in the ``<endpoint>-benchmark`` chart.

The props (:mod:`.props`) are plain Python; the chart (:mod:`.benchmark_chart`) imports cdk8s-plus, so importing
this package never starts jsii.
"""

from hyperpod_k8s.benchmark.props import (
    LOCK_FILE,
    MODES,
    RUNNER_FILE,
    BenchmarkChartProps,
    BenchmarkRun,
    benchmark_props,
    benchmark_runs,
    gpus_per_mode,
)

__all__ = ["LOCK_FILE", "MODES", "RUNNER_FILE", "BenchmarkChartProps", "BenchmarkRun", "benchmark_props",
           "benchmark_runs", "gpus_per_mode"]
