"""docs/benchmark.md describes what the benchmark code does: every setting, both experiments, the DPD-path rule
and where the Jobs run. The values are read from the code that implements them (config model, report, manifests),
so a change there that the page does not follow fails here."""

from __future__ import annotations

import re
from pathlib import Path

from hyperpod_analysis.report.analysis import PATH_SHARE
from hyperpod_core.config.benchmark import AWS_REFERENCE_CONCURRENCY, BenchmarkConfig
from hyperpod_core.dist_layout import REFERENCE, REFERENCE_SUFFIX
from hyperpod_k8s.benchmark.benchmark_chart import GPU_POOL_LABEL, LIMITS, REQUESTS

DOC = (Path(__file__).resolve().parents[2] / "docs" / "benchmark.md").read_text(encoding="utf-8")
#: The prose with its line breaks folded, so a phrase may wrap anywhere.
TEXT = " ".join(DOC.split())


def _table_keys() -> set[str]:
    """The first cell of each row of the settings table (``| `key` | default | meaning |``)."""
    return {k for row in re.findall(r"^\| ([^|]+) \|", DOC, re.M) for k in re.findall(r"`([a-z_0-9\[\]]+)`", row)}


def test_every_benchmark_setting_is_in_the_table() -> None:
    keys = {k.removesuffix("[]") for k in _table_keys()}
    assert set(BenchmarkConfig.model_fields) <= keys, sorted(set(BenchmarkConfig.model_fields) - keys)


def test_both_experiments_and_their_layouts_are_described() -> None:
    assert "**`aws-reference`**" in TEXT and "**`equal-gpu`**" in TEXT
    levels = AWS_REFERENCE_CONCURRENCY
    assert f"concurrency {', '.join(map(str, levels[:-1]))} and {levels[-1]}" in TEXT
    for suffix in REFERENCE_SUFFIX.values():
        assert f"`<name>-{suffix}.k8s.yaml`" in TEXT
    assert f"`dist/<name>/{REFERENCE}/`" in TEXT and "deviates from AWS's" in TEXT
    assert "runs each experiment x mode in turn" in TEXT
    assert "in the aws-reference section only" in TEXT


def test_the_dpd_path_rule_states_the_reports_threshold() -> None:
    assert "`dpd-path.json`" in TEXT
    assert f"at least **{PATH_SHARE:.0%}** (`PATH_SHARE`)".replace("%", " %") in TEXT
    assert f"at most {1 - PATH_SHARE:.0%} did".replace("%", " %") in TEXT
    assert "**invalid**" in TEXT and "never compares" in TEXT


def test_the_jobs_node_affinity_and_requests_are_described() -> None:
    assert f"`{GPU_POOL_LABEL} DoesNotExist`" in TEXT
    assert f"requests {REQUESTS.cpu} CPU and {REQUESTS.memory_gib} GiB" in TEXT
    assert f"limits {LIMITS.cpu} CPU, {LIMITS.memory_gib} GiB" in TEXT
