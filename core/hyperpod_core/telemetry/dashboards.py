"""Dashboards assembled from segments: the DPD overview and the DPD-vs-colocated comparison.

Pure definitions: a :class:`DashboardSpec` is rows of panels plus template variables; ``render.py`` turns
it into Grafana JSON.

The comparison works when the two runs happened one after the other. The colocated manifest keeps the DPD
endpoint's name (it is also the rollback), so the two never run at once: each column has its own time
shift variable (``$dpd_shift``, ``$baseline_shift``), and the dashboard's time range is the length of one
run. Set the range to the later run and the other column's shift to how much earlier its run started
(``2h``, ``1d``). The SLO thresholds from ``observability.slo`` are drawn on the latency panels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from hyperpod_core.config import Config
from hyperpod_core.prices import instance_price
from hyperpod_core.telemetry import catalogue as m
from hyperpod_core.telemetry import labels as lbl
from hyperpod_core.telemetry.panels import COMMON_SEGMENTS, DPD_SEGMENTS, PanelSpec, SegmentBuilder, cost_per_token
from hyperpod_core.telemetry.targets import target

#: Grafana variables the queries use. The rate window is Grafana's built-in ``$__rate_interval``.
NAMESPACE_VAR: Final = "$namespace"
ENDPOINT_VAR: Final = "$endpoint"
BASELINE_VAR: Final = "$baseline"
DPD_SHIFT_VAR: Final = "$dpd_shift"
BASELINE_SHIFT_VAR: Final = "$baseline_shift"
NO_SHIFT: Final = "0h"
DATASOURCE_VAR: Final = "datasource"


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
    description: str = ""
    """Shown as the variable's tooltip. Default: none."""


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


def _variables(config: Config, *, comparison: bool) -> tuple[Variable, ...]:
    running = m.NUM_REQUESTS_RUNNING.series()
    pods = f'{running}{{{lbl.NAMESPACE}="{NAMESPACE_VAR}"}}'
    variables: tuple[Variable, ...] = (
        Variable(name=DATASOURCE_VAR, label="Prometheus", kind="datasource", default="prometheus"),
        Variable(name="namespace", label="Namespace", kind="query", default=config.endpoint.namespace,
                 query=f"label_values({running}, {lbl.NAMESPACE})"),
        # The DPD endpoints of the namespace, read back from their decode pods' names.
        Variable(name="endpoint", label="DPD endpoint", kind="query", default=config.endpoint.name,
                 query=f"label_values({pods}, {lbl.POD_NAME})", regex="/^decode-(.+)-[a-z0-9]+-[a-z0-9]+$/"),
    )
    if comparison:
        variables += (
            # The colocated manifest keeps the DPD endpoint's name: same name, pods without a role prefix.
            Variable(name="baseline", label="Colocated endpoint", kind="textbox", default=config.endpoint.name,
                     description="Name of the colocated endpoint (the colocated manifest keeps the DPD name)."),
            Variable(name="dpd_shift", label="DPD run: time shift", kind="textbox", default=NO_SHIFT,
                     description="How long before the end of the dashboard's range the DPD run ended (0h, 2h, 1d)."),
            Variable(name="baseline_shift", label="Colocated run: time shift", kind="textbox", default=NO_SHIFT,
                     description="How long before the end of the dashboard's range the colocated run ended."),
        )
    return variables


def _uid(config: Config, kind: str) -> str:
    return f"dpd-{kind}-{config.endpoint.name}"[:40]


def _cost(config: Config) -> SegmentBuilder:
    """The cost row at the price the report uses without ``--price`` (``hyperpod_core.prices``)."""
    return cost_per_token(instance_price(config.endpoint.instance_type,
                                         configured=config.benchmark.instance_hour_usd))


def dpd_overview(config: Config) -> DashboardSpec:
    """One DPD endpoint: traffic, latency, queues, KV cache and transfer, errors, GPUs, cost per token."""
    dpd = target(config, "dpd", namespace=NAMESPACE_VAR, endpoint=ENDPOINT_VAR)
    slo = config.observability.slo
    return DashboardSpec(
        uid=_uid(config, "overview"), title=f"DPD overview ({config.endpoint.name})",
        description="Disaggregated prefill/decode endpoint on SageMaker HyperPod. Role and endpoint are "
                    "read from pod names (prefill-<endpoint>-*, decode-<endpoint>-*).",
        tags=("dpd", "hyperpod", "vllm"), variables=_variables(config, comparison=False),
        rows=tuple(Row(title=seg.title, columns=(seg.panels,))
                   for seg in (b(dpd, slo) for b in (*DPD_SEGMENTS, _cost(config)))),
    )


def dpd_vs_colocated(config: Config) -> DashboardSpec:
    """The same segments for the DPD run (left) and the colocated run (right), each in its own window."""
    dpd = target(config, "dpd", namespace=NAMESPACE_VAR, endpoint=ENDPOINT_VAR)
    colocated = target(config, "colocated", namespace=NAMESPACE_VAR, endpoint=BASELINE_VAR)
    slo = config.observability.slo
    rows = []
    for build in (*COMMON_SEGMENTS, _cost(config)):
        left = build(dpd, slo).shifted(DPD_SHIFT_VAR, "DPD")
        right = build(colocated, slo).shifted(BASELINE_SHIFT_VAR, "Colocated")
        rows.append(Row(title=left.title, columns=(left.panels, right.panels)))
    return DashboardSpec(
        uid=_uid(config, "vs-colocated"), title=f"DPD vs colocated ({config.endpoint.name})",
        description="The DPD run (left) against the colocated run of the same model (right). The runs happen "
                    "one after the other: set the time range to one run's length and each side's time shift "
                    "to when its run ended.",
        tags=("dpd", "hyperpod", "vllm", "comparison"), variables=_variables(config, comparison=True),
        rows=tuple(rows),
    )


def dashboards(config: Config) -> tuple[DashboardSpec, ...]:
    """Every dashboard we deliver, in a stable order."""
    return (dpd_overview(config), dpd_vs_colocated(config))
