"""Dashboards assembled from segments: the DPD overview and the DPD-vs-colocated comparison.

Pure definitions (no Grafana, no cdk8s): a :class:`DashboardSpec` is rows of panels plus template
variables. ``grafana.py`` renders it with the Grafana Foundation SDK; ``delivery.py`` ships it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from hyperpod_infra.config import Config
from hyperpod_k8s.observability import catalogue as m
from hyperpod_k8s.observability.panels import COMMON_SEGMENTS, DPD_SEGMENTS, PanelSpec
from hyperpod_k8s.observability.promql import Target

#: Grafana variables the queries use. The rate window is Grafana's built-in ``$__rate_interval``.
NAMESPACE_VAR: Final = "$namespace"
ENDPOINT_VAR: Final = "$endpoint"
BASELINE_VAR: Final = "$baseline"
COLOCATED_SUFFIX: Final = "-colocated"


@dataclass(frozen=True, kw_only=True)
class Variable:
    name: str
    label: str
    kind: Literal["datasource", "query", "textbox"]
    default: str
    query: str = ""
    """For ``query``: a ``label_values(...)`` query. Default: none."""
    regex: str = ""
    """For ``query``: capture group that extracts the value. Default: none."""


@dataclass(frozen=True, kw_only=True)
class Row:
    title: str
    columns: tuple[tuple[PanelSpec, ...], ...]
    """Side-by-side columns of panels (one column for the overview, DPD | colocated for comparison)."""


@dataclass(frozen=True, kw_only=True)
class DashboardSpec:
    uid: str
    title: str
    description: str
    tags: tuple[str, ...]
    variables: tuple[Variable, ...]
    rows: tuple[Row, ...]

    @property
    def panels(self) -> tuple[PanelSpec, ...]:
        return tuple(p for row in self.rows for column in row.columns for p in column)


def _variables(config: Config, *, baseline: bool) -> tuple[Variable, ...]:
    pods = m.NUM_REQUESTS_RUNNING.series() + '{namespace="$namespace"}'
    variables: tuple[Variable, ...] = (
        Variable(name="datasource", label="Prometheus", kind="datasource", default="prometheus"),
        Variable(name="namespace", label="Namespace", kind="query", default=config.endpoint.namespace,
                 query=f"label_values({m.NUM_REQUESTS_RUNNING.series()}, namespace)"),
        # The DPD endpoints of the namespace, read back from their decode pods' names.
        Variable(name="endpoint", label="DPD endpoint", kind="query", default=config.endpoint.name,
                 query=f"label_values({pods}, pod)", regex="/^decode-(.+)-[a-z0-9]+-[a-z0-9]+$/"),
    )
    if baseline:
        variables += (Variable(name="baseline", label="Colocated endpoint", kind="textbox",
                               default=config.endpoint.name + COLOCATED_SUFFIX),)
    return variables


def _uid(config: Config, kind: str) -> str:
    return f"dpd-{kind}-{config.endpoint.name}"[:40]


def dpd_overview(config: Config) -> DashboardSpec:
    """One DPD endpoint: traffic, latency, queues, KV cache and transfer, errors, GPUs, router."""
    dpd = Target(namespace=NAMESPACE_VAR, endpoint=ENDPOINT_VAR, kind="dpd")
    return DashboardSpec(
        uid=_uid(config, "overview"), title=f"DPD overview ({config.endpoint.name})",
        description="Disaggregated prefill/decode endpoint on SageMaker HyperPod. Role and endpoint are "
                    "read from pod names (prefill-<endpoint>-*, decode-<endpoint>-*).",
        tags=("dpd", "hyperpod", "vllm"), variables=_variables(config, baseline=False),
        rows=tuple(Row(title=seg.title, columns=(seg.panels,)) for seg in (b(dpd) for b in DPD_SEGMENTS)),
    )


def dpd_vs_colocated(config: Config) -> DashboardSpec:
    """The same segments for the DPD endpoint (left) and its colocated baseline (right)."""
    dpd = Target(namespace=NAMESPACE_VAR, endpoint=ENDPOINT_VAR, kind="dpd")
    colocated = Target(namespace=NAMESPACE_VAR, endpoint=BASELINE_VAR, kind="colocated")
    rows = []
    for build in COMMON_SEGMENTS:
        left, right = build(dpd), build(colocated)
        rows.append(Row(title=left.title, columns=(
            tuple(_retitle(p, "DPD") for p in left.panels),
            tuple(_retitle(p, "Colocated") for p in right.panels),
        )))
    return DashboardSpec(
        uid=_uid(config, "vs-colocated"), title=f"DPD vs colocated ({config.endpoint.name})",
        description="The DPD endpoint (left) against a colocated endpoint serving the same model (right).",
        tags=("dpd", "hyperpod", "vllm", "comparison"), variables=_variables(config, baseline=True),
        rows=tuple(rows),
    )


def _retitle(panel: PanelSpec, prefix: str) -> PanelSpec:
    return PanelSpec(title=f"{prefix}: {panel.title}", description=panel.description, unit=panel.unit,
                     queries=panel.queries, kind=panel.kind)


def dashboards(config: Config) -> tuple[DashboardSpec, ...]:
    """Every dashboard we deliver, in a stable order."""
    return (dpd_overview(config), dpd_vs_colocated(config))
