"""Render a :class:`~.dashboards.DashboardSpec` to Grafana dashboard JSON with the Grafana Foundation SDK.

Pure Python, shared by both apps: the cdk8s app ships the JSON as sidecar ConfigMaps and files, the CDK app
into an Amazon Managed Grafana workspace. Output is deterministic: panel ids are assigned in order and keys
are sorted. SLO thresholds become threshold lines (time series) or colours (stat); a panel's time shift is
Grafana's per-panel ``timeShift``, which interpolates dashboard variables.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from grafana_foundation_sdk.builders import common as gc
from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as gcm
from grafana_foundation_sdk.models import dashboard as gm

from hyperpod_core.telemetry.dashboards import DATASOURCE_VAR, DashboardSpec, Variable
from hyperpod_core.telemetry.panels import PanelSpec

#: Panels and queries name their data source by the variable's uid only, not by plugin type: the same dashboard then
#: queries a core Prometheus data source (a self-run Grafana, the ConfigMaps) and Amazon Managed Grafana 12+'s
#: Amazon Managed Service for Prometheus plugin (``grafana-amazonprometheus-datasource``), whose type differs.
#: The variable lists the data sources of :data:`DATASOURCE_TYPE`; the AMG handler sets it to the type it creates.
_DATASOURCE = gm.DataSourceRef(uid="${" + DATASOURCE_VAR + "}")
DATASOURCE_TYPE = "prometheus"
_PANEL_HEIGHT = 8
_REF_IDS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _variable(v: Variable) -> Any:
    current = gm.VariableOption(selected=True, text=v.default, value=v.default)
    builder: Any
    if v.kind == "datasource":
        builder = gd.DatasourceVariable(v.name).label(v.label).type(DATASOURCE_TYPE).current(current)
    elif v.kind == "textbox":
        builder = gd.TextBoxVariable(v.name).label(v.label).default_value(v.default).current(current)
    else:
        builder = (gd.QueryVariable(v.name).label(v.label).datasource(_DATASOURCE).query(v.query)
                   .refresh(gm.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(gm.VariableSort.ALPHABETICAL_ASC)
                   .current(current))
        if v.regex:
            builder = builder.regex(v.regex)
    return builder.description(v.description) if v.description else builder


def _panel(spec: PanelSpec, panel_id: int, width: int) -> Any:
    builder: Any = (stat.Panel() if spec.kind == "stat" else timeseries.Panel())
    builder = (builder.id(panel_id).title(spec.title).description(spec.description).unit(spec.unit)
               .datasource(_DATASOURCE).height(_PANEL_HEIGHT).span(width))
    if spec.slo is not None:
        builder = builder.thresholds(gd.ThresholdsConfig().mode(gm.ThresholdsMode.ABSOLUTE).steps([
            gm.Threshold(value=None, color="green"), gm.Threshold(value=spec.slo, color="red")]))
        if spec.kind == "timeseries":
            builder = builder.thresholds_style(
                gc.GraphThresholdsStyleConfig().mode(gcm.GraphThresholdsStyleMode.DASHED))
    if spec.time_shift:
        builder = builder.time_shift(spec.time_shift)
    for ref_id, q in zip(_REF_IDS, spec.queries, strict=False):
        query = prometheus.Dataquery().expr(q.expr).legend_format(q.legend).ref_id(ref_id)
        builder = builder.with_target(query.instant() if spec.kind == "stat" else query.range())
    return builder


def render(spec: DashboardSpec) -> dict[str, Any]:
    """The dashboard model as a JSON-ready dict (what Grafana's "Import dashboard" accepts)."""
    too_many = [p.title for p in spec.panels if len(p.queries) > len(_REF_IDS)]
    if too_many:
        raise ValueError(f"panels {too_many} have more than {len(_REF_IDS)} queries")
    builder = (gd.Dashboard(spec.title).uid(spec.uid).description(spec.description).tags(list(spec.tags))
               .editable().refresh("30s").time("now-1h", "now").timezone("browser")
               .tooltip(gm.DashboardCursorSync.CROSSHAIR))
    for v in spec.variables:
        builder = builder.with_variable(_variable(v))
    ids = itertools.count(1)
    for row in spec.rows:
        builder = builder.with_row(gd.Row(row.title).id(next(ids)))
        width = 24 // len(row.columns) if len(row.columns) > 1 else 12
        # Interleave the columns so that panel i of every column sits on the same line.
        for line in itertools.zip_longest(*row.columns):
            for panel in line:
                if panel is not None:
                    builder = builder.with_panel(_panel(panel, next(ids), width))
    return json.loads(json.dumps(builder.build(), cls=JSONEncoder))


def to_json_text(model: dict[str, Any]) -> str:
    """Deterministic JSON text: sorted keys, two-space indent, trailing newline."""
    return json.dumps(model, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
