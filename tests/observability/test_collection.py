"""The observability add-on collects what we read.

Every series family a dashboard, an alert or a KEDA trigger reads maps to the ``metricsProvider`` category of the
HyperPod observability add-on that produces it, and the configuration the stack passes turns that category on.
Expected values, from outside the catalogue:

* categories, their allowed levels and AWS's defaults: AWS's console template (aws/sagemaker-hyperpod-cluster-setup,
  ``eks/cloudformation/observability-template.yaml``: parameters ``TrainingMetricLevel`` ... ``NetworkMetricLevel``;
  ``inferenceMetrics`` is written as ``BASIC``), which passes every category;
* which category produces which series: the inference operator's model-container and reverse-proxy metrics come
  with ``inferenceMetrics`` (AWS inference observability page), DCGM with ``acceleratedComputeMetrics`` and
  kube-state-metrics with ``clusterMetrics`` (HyperPod cluster metrics page; lifecycle-facts.md).
"""

from __future__ import annotations

import json

import promql_parser
from tests.observability.conftest import every_query

from hyperpod_core.config import Config
from hyperpod_core.telemetry import catalogue as m
from hyperpod_core.telemetry.collection import levels, metrics_provider

TEMPLATE_LEVELS = {
    "trainingMetrics": {"BASIC", "ADVANCED"}, "inferenceMetrics": {"BASIC"},
    "taskGovernanceMetrics": {"DISABLED", "ADVANCED"}, "scalingMetrics": {"DISABLED", "ADVANCED"},
    "clusterMetrics": {"BASIC", "ADVANCED"}, "nodeMetrics": {"BASIC", "ADVANCED"},
    "acceleratedComputeMetrics": {"BASIC", "ADVANCED"}, "networkMetrics": {"DISABLED", "ADVANCED"},
}
#: Series-name prefix -> the category that produces it (sources in the module docstring).
PRODUCER = {"vllm:": "inferenceMetrics", "lmcache:": "inferenceMetrics", "model_": "inferenceMetrics",
            "DCGM_FI_": "acceleratedComputeMetrics", "kube_": "clusterMetrics"}


def _series_names(expr: str) -> set[str]:
    found: set[str] = set()

    def visit(node: object) -> bool:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            found.add(node.name)
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def test_every_series_we_read_comes_from_a_category_that_is_on(default_config: Config,
                                                               default_config_dict: dict,
                                                               grafana_substitute) -> None:
    by_series = {m_.series(s): m_ for m_ in m.CATALOGUE for s in ("", "_bucket", "_sum", "_count")
                 if m_.type == "histogram" or not s}
    on = {c for c, level in levels().items() if level != "DISABLED"}
    read: dict[str, str] = {}
    for where, expr in every_query(default_config, default_config_dict):
        for name in _series_names(grafana_substitute(expr)):
            (category,) = [c for prefix, c in PRODUCER.items() if name.startswith(prefix)]
            assert by_series[name].category == category, f"{where}: {name}"
            read[name] = category
    assert {"DCGM_FI_DEV_GPU_UTIL", "kube_pod_status_ready", "kube_pod_container_status_restarts_total",
            "vllm:kv_cache_usage_perc", "lmcache:num_hit_tokens_total", "model_errors_total"} <= set(read)
    missing = {name: c for name, c in read.items() if c not in on}
    assert not missing, f"read but not collected: {missing}"


def test_every_template_category_is_passed_with_a_level_the_template_allows() -> None:
    provider = metrics_provider(15)
    assert set(provider) == set(TEMPLATE_LEVELS), "pass every category: defaults of omitted ones are unpublished"
    for category, settings in provider.items():
        assert settings["level"] in TEMPLATE_LEVELS[category], category
        assert settings["scrapeInterval"] == 15


def test_the_stack_configures_the_addon_with_it(templates, default_config: Config) -> None:
    (addon,) = templates["ObservabilityAddon"].find_resources("AWS::EKS::Addon").values()
    parts = addon["Properties"]["ConfigurationValues"]["Fn::Join"][1]
    text = "".join(p if isinstance(p, str) else "TOKEN" for p in parts)
    assert json.loads(text)["metricsProvider"] == metrics_provider(default_config.observability.scrape_interval_seconds)
