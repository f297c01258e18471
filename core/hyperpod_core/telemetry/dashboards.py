"""Dashboards assembled from segments: the DPD overview and the DPD-vs-colocated comparison, one of each per endpoint.

Pure definitions: a :class:`DashboardSpec` is rows of panels plus template variables; ``render.py`` turns
it into Grafana JSON.

One set per endpoint (:func:`dashboards` takes one endpoint's spec), not one set for the deployment with the endpoint
as a variable: what a dashboard draws besides its queries is the endpoint's own. Its SLO lines are its ``slo`` (an
endpoint may override the deployment's) and its cost row is priced at its instance type; Grafana's thresholds are
constants of a panel, so one dashboard switched between endpoints by a variable would draw one endpoint's objectives
over another's curves. Each still has the ``$namespace`` and ``$endpoint``
variables (defaulting to its endpoint) to read another endpoint's series at a glance.

Uids hold the deployment's and the endpoint's names (:func:`dashboard_uid`), so two deployments sharing one Grafana
never overwrite each other's dashboards, and stay within Grafana's 40-character uid limit; the folder title names the
deployment too (:func:`folder_title`).

The comparison works when the two runs happened one after the other. The colocated manifest keeps the DPD
endpoint's name (one replaces the other), so the two never run at once: each column has its own time
shift variable (``$dpd_shift``, ``$baseline_shift``), and the dashboard's time range is the length of one
run. Set the range to the later run and the other column's shift to how much earlier its run started
(``2h``, ``1d``). The SLO thresholds from ``observability.slo`` are drawn on the latency panels.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final, Literal

from hyperpod_core.config.spec import EndpointSpec
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
#: Grafana's longest uid, of a dashboard and of a folder: "The uid can have a maximum length of 40 characters"
#: (Grafana HTTP API reference, "Dashboard API" and "Folder API", identifier (id) vs unique identifier (uid); the
#: same sentences in the Amazon Managed Grafana user guide's "Dashboard API" and "Folder API" pages). Grafana refuses
#: a longer one ("uid too long, max 40 characters": ``pkg/util/shortid_generator.go``, ``IsShortUIDTooLong``).
UID_MAX: Final = 40
#: Hex digits of the SHA-256 that ends a shortened uid.
UID_HASH_HEX: Final = 8


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
    kind: str
    """Which dashboard of the endpoint: ``overview`` or ``vs-colocated``."""
    uid: str
    title: str
    description: str
    tags: tuple[str, ...]
    variables: tuple[Variable, ...]
    rows: tuple[Row, ...]

    @property
    def panels(self) -> tuple[PanelSpec, ...]:
        return tuple(p for row in self.rows for column in row.columns for p in column)


def grafana_uid(*parts: str) -> str:
    """A Grafana uid made of ``parts`` joined by ``_``, shortened to :data:`UID_MAX` characters when longer: its first
    characters, ``-`` and the first :data:`UID_HASH_HEX` hex digits of the SHA-256 of the whole, so that two long uids
    that share a beginning still differ. ``_`` joins the parts because deployment and endpoint names never hold one:
    ``a-b`` + ``c`` and ``a`` + ``b-c`` give two uids. Only letters, digits, ``-`` and ``_``, the characters Grafana
    accepts in a uid (``pkg/util/shortid_generator.go``, ``IsValidShortUID``: ``^[a-zA-Z0-9\\-\\_]*$``)."""
    whole = "_".join(parts)
    if len(whole) <= UID_MAX:
        return whole
    digest = hashlib.sha256(whole.encode()).hexdigest()[:UID_HASH_HEX]
    return f"{whole[:UID_MAX - UID_HASH_HEX - 1]}-{digest}"


def dashboard_uid(deployment: str, endpoint: str, kind: str) -> str:
    """``<deployment>_<endpoint>_<kind>`` (``kind``: ``overview`` or ``vs-colocated``), shortened when longer than
    Grafana allows (:func:`grafana_uid`)."""
    return grafana_uid(deployment, endpoint, kind)


#: Grafana's regex (JavaScript) that reads an endpoint's name back from one of its decode pods' names:
#: ``decode-<endpoint>[-r<N>]-<rs>-<pod>``; the lazy name leaves a revision's ``-r<N>`` out (no endpoint name ends in
#: one: the config rules).
ENDPOINT_OF_DECODE_POD: Final = "/^decode-(.+?)(?:-r[0-9]+)?-[a-z0-9]+-[a-z0-9]+$/"


def folder_title(deployment: str) -> str:
    """The Grafana folder of a deployment's dashboards: its name, so two deployments in one Grafana keep apart."""
    return f"HyperPod DPD ({deployment})"


def _variables(spec: EndpointSpec, *, comparison: bool) -> tuple[Variable, ...]:
    running = m.NUM_REQUESTS_RUNNING.series()
    pods = f'{running}{{{lbl.NAMESPACE}="{NAMESPACE_VAR}"}}'
    variables: tuple[Variable, ...] = (
        Variable(name=DATASOURCE_VAR, label="Prometheus", kind="datasource", default="prometheus"),
        Variable(name="namespace", label="Namespace", kind="query", default=spec.namespace,
                 query=f"label_values({running}, {lbl.NAMESPACE})"),
        # The DPD endpoints of the namespace, read back from their decode pods' names: a blue/green revision's pods
        # (decode-<endpoint>-r<N>-...) name their endpoint, whose queries cover every revision (queries.REVISION).
        Variable(name="endpoint", label="DPD endpoint", kind="query", default=spec.name,
                 query=f"label_values({pods}, {lbl.POD_NAME})", regex=ENDPOINT_OF_DECODE_POD),
    )
    if comparison:
        variables += (
            # The colocated manifest keeps the DPD endpoint's name: same name, pods without a role prefix.
            Variable(name="baseline", label="Colocated endpoint", kind="textbox", default=spec.name,
                     description="Name of the colocated endpoint (the colocated manifest keeps the DPD name)."),
            Variable(name="dpd_shift", label="DPD run: time shift", kind="textbox", default=NO_SHIFT,
                     description="How long before the end of the dashboard's range the DPD run ended (0h, 2h, 1d)."),
            Variable(name="baseline_shift", label="Colocated run: time shift", kind="textbox", default=NO_SHIFT,
                     description="How long before the end of the dashboard's range the colocated run ended."),
        )
    return variables


def _uid(spec: EndpointSpec, kind: str) -> str:
    return dashboard_uid(spec.deployment, spec.name, kind)


def _cost(spec: EndpointSpec) -> SegmentBuilder:
    """The cost row at the price the report uses without ``--price`` (``hyperpod_core.prices``)."""
    return cost_per_token(instance_price(spec.endpoint.instance_type, configured=spec.benchmark.instance_hour_usd))


def dpd_overview(spec: EndpointSpec) -> DashboardSpec:
    """One DPD endpoint: traffic, latency, queues, KV cache and transfer, errors, GPUs, cost per token; the SLO lines
    are the endpoint's."""
    dpd = target(spec, "dpd", namespace=NAMESPACE_VAR, endpoint=ENDPOINT_VAR)
    slo = spec.slo
    return DashboardSpec(
        kind="overview", uid=_uid(spec, "overview"), title=f"DPD overview ({spec.name})",
        description="Disaggregated prefill/decode endpoint on SageMaker HyperPod. Role and endpoint are "
                    "read from pod names (prefill-<endpoint>-*, decode-<endpoint>-*).",
        tags=("dpd", "hyperpod", "vllm"), variables=_variables(spec, comparison=False),
        rows=tuple(Row(title=seg.title, columns=(seg.panels,))
                   for seg in (b(dpd, slo) for b in (*DPD_SEGMENTS, _cost(spec)))),
    )


def dpd_vs_colocated(spec: EndpointSpec) -> DashboardSpec:
    """The same segments for the DPD run (left) and the colocated run (right), each in its own window."""
    dpd = target(spec, "dpd", namespace=NAMESPACE_VAR, endpoint=ENDPOINT_VAR)
    colocated = target(spec, "colocated", namespace=NAMESPACE_VAR, endpoint=BASELINE_VAR)
    slo = spec.slo
    rows = []
    for build in (*COMMON_SEGMENTS, _cost(spec)):
        left = build(dpd, slo).shifted(DPD_SHIFT_VAR, "DPD")
        right = build(colocated, slo).shifted(BASELINE_SHIFT_VAR, "Colocated")
        rows.append(Row(title=left.title, columns=(left.panels, right.panels)))
    return DashboardSpec(
        kind="vs-colocated", uid=_uid(spec, "vs-colocated"), title=f"DPD vs colocated ({spec.name})",
        description="The DPD run (left) against the colocated run of the same model (right). The runs happen "
                    "one after the other: set the time range to one run's length and each side's time shift "
                    "to when its run ended.",
        tags=("dpd", "hyperpod", "vllm", "comparison"), variables=_variables(spec, comparison=True),
        rows=tuple(rows),
    )


def dashboards(spec: EndpointSpec) -> tuple[DashboardSpec, ...]:
    """Endpoint ``spec``'s dashboards, in a stable order (a deployment delivers every endpoint's)."""
    return (dpd_overview(spec), dpd_vs_colocated(spec))
