"""What the HyperPod observability add-on collects: its ``metricsProvider`` categories and their levels.

The add-on scrapes only the categories its configuration turns on; which are on when a category is left out
is not published [I]. AWS's console template (aws/sagemaker-hyperpod-cluster-setup,
``eks/cloudformation/observability-template.yaml``) therefore passes every category, each with a level and a
scrape interval; so do we, with that template's default levels, raised to ``BASIC`` where our queries read
the category's series (:data:`~.catalogue.CATEGORY_OF_PATH`: DCGM from ``acceleratedComputeMetrics``,
kube-state-metrics from ``clusterMetrics``). The template also passes ``rayMetrics``; no Ray runs here and the
pinned add-on version's schema is not published, so it is left out [I].
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal

from hyperpod_core.telemetry.catalogue import CATALOGUE, Metric

Level = Literal["DISABLED", "BASIC", "ADVANCED"]

#: category -> (levels the template allows, the template's default level).
CATEGORIES: Final[dict[str, tuple[tuple[Level, ...], Level]]] = {
    "trainingMetrics": (("BASIC", "ADVANCED"), "BASIC"),
    "inferenceMetrics": (("BASIC",), "BASIC"),
    "taskGovernanceMetrics": (("DISABLED", "ADVANCED"), "DISABLED"),
    "scalingMetrics": (("DISABLED", "ADVANCED"), "DISABLED"),
    "clusterMetrics": (("BASIC", "ADVANCED"), "BASIC"),
    "nodeMetrics": (("BASIC", "ADVANCED"), "BASIC"),
    "acceleratedComputeMetrics": (("BASIC", "ADVANCED"), "BASIC"),
    "networkMetrics": (("DISABLED", "ADVANCED"), "DISABLED"),
}


def required_categories(metrics: Iterable[Metric] = CATALOGUE) -> frozenset[str]:
    """The categories that must be on for ``metrics`` (default: every metric a query reads) to be collected."""
    return frozenset(m.category for m in metrics)


def levels() -> dict[str, Level]:
    """Every category with its level: the template's default, never ``DISABLED`` for a category we read."""
    needed = required_categories()
    out: dict[str, Level] = {}
    for category, (allowed, default) in CATEGORIES.items():
        level = default
        if category in needed and level == "DISABLED":
            level = next(x for x in allowed if x != "DISABLED")
        out[category] = level
    return out


def metrics_provider(scrape_interval_seconds: int) -> dict[str, dict[str, object]]:
    """The add-on's ``metricsProvider`` value: every category with its level and the scrape interval."""
    return {category: {"level": level, "scrapeInterval": scrape_interval_seconds}
            for category, level in levels().items()}
