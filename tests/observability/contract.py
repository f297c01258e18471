"""The exporters' real metric contract, read from ``shared/metrics``, and a checker for queries against it.

Where the contract comes from (never copied into this repository):

* ``$HYPERPOD_METRICS_DIR``, else ``../shared/metrics`` next to the repository root: ``vllm-0.19.0.json`` and
  ``lmcache-0.4.3.json`` (every metric family of the worker image's exporters, read from their wheels by
  ``extract.py``) and ``SOURCES.md`` (the labels the HyperPod metrics path adds, and the sidecar's names).
* Series that do not come from those exporters, each with its source:
  - the reverse-proxy sidecar: names from SOURCES.md, labels from AWS's inference observability page
    ("Metric dimensions", ``shared/reference/operator.md`` section d);
  - DCGM exporter and kube-state-metrics (the observability add-on's cluster metrics): the labels the
    exporters emit themselves (dcgm-exporter Kubernetes pod mapping: ``namespace``, ``pod``, ``container``;
    kube-state-metrics pod metrics: ``namespace``, ``pod``, ``uid``, ``container``), under the names
    ``observability.collector_labels`` says the collector keeps.

:func:`series_labels` maps every exposed series name to the label names it carries on HyperPod;
:func:`violations` lists what a PromQL expression asks for that the contract does not have.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import promql_parser

from hyperpod_core.telemetry import labels as lbl
from hyperpod_core.telemetry.labels import CollectorLabels

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV_VAR = "HYPERPOD_METRICS_DIR"
EXPORTER_FILES = ("vllm-0.19.0.json", "lmcache-0.4.3.json")

#: SOURCES.md: "every inference metric carries cluster identity labels and pod labels including pod_name
#: and namespace, and metric_source". Cluster identity labels as listed on the same AWS page.
HYPERPOD_PATH_LABELS = ("namespace", "pod_name", "metric_source", "cluster_id", "cluster_name")
#: The sidecar's own dimensions (AWS inference observability page, operator.md section d).
SIDECAR_LABELS = ("cluster_id", "cluster_name", "resource_name", "resource_type", "namespace", "model_name",
                  "model_version", "model_container_type", "pod_name", "node_name", "instance_type",
                  "metric_source", "task_type")
#: finished_reason values (SOURCES.md: stop|length|abort|error|repetition).
FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")


@dataclass(frozen=True)
class Family:
    name: str
    kind: str  # counter | gauge | histogram
    exposed_as: tuple[str, ...]
    labels: tuple[str, ...]
    """Every label the series carry on HyperPod (exporter labels plus those the path adds)."""
    buckets: tuple[float, ...] | None
    path: str  # inference | dcgm | kube-state-metrics
    metric_source: str | None
    source: str


def metrics_dir() -> Path:
    given = os.environ.get(ENV_VAR)
    path = Path(given) if given else REPO_ROOT.parent / "shared" / "metrics"
    missing = [f for f in (*EXPORTER_FILES, "SOURCES.md") if not (path / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{ENV_VAR} / ../shared/metrics ({path}) lacks {missing}: point {ENV_VAR} at "
                                "the directory holding the exporters' metric contract")
    return path


@functools.cache  # the contract files are read once per process (families() is called per series)
def _exporter_families(path: Path) -> tuple[Family, ...]:
    out = []
    for file_name in EXPORTER_FILES:
        for entry in json.loads((path / file_name).read_text()):
            name, names = entry["name"], entry["labelnames"]
            # Names built with f-strings and label lists built at run time cannot be served literally.
            if "{" in name or not isinstance(names, list) or entry["kind"] not in ("counter", "gauge", "histogram"):
                continue
            buckets = entry["buckets"]
            out.append(Family(
                name=name, kind=entry["kind"], exposed_as=tuple(entry["exposed_as"]),
                labels=tuple(dict.fromkeys((*names, *HYPERPOD_PATH_LABELS))),
                buckets=tuple(float(b) for b in buckets) if isinstance(buckets, list) else None,
                path="inference", metric_source=lbl.MODEL_CONTAINER, source=f"{file_name} {entry['defined_at']}"))
    return tuple(out)


@functools.cache
def _sidecar_families(path: Path) -> tuple[Family, ...]:
    text = (path / "SOURCES.md").read_text()
    names = sorted(set(re.findall(r"`(model_[a-z_]+)`", text)))
    assert names, "SOURCES.md lists no sidecar metrics"
    out = []
    for name in names:
        if name.endswith("_total"):
            kind, exposed = "counter", (name,)
            family = name.removesuffix("_total")
        elif name.endswith("_milliseconds"):
            kind, exposed, family = "histogram", tuple(name + s for s in ("_bucket", "_sum", "_count")), name
        else:
            kind, exposed, family = "gauge", (name,), name
        out.append(Family(name=family, kind=kind, exposed_as=exposed, labels=SIDECAR_LABELS, buckets=None,
                          path="inference", metric_source=lbl.REVERSE_PROXY, source="SOURCES.md (sidecar)"))
    return tuple(out)


def _cluster_families(collector: CollectorLabels) -> list[Family]:
    dcgm = ("gpu", "UUID", "device", "modelName", "Hostname", "container", collector.dcgm_namespace,
            collector.dcgm_pod)
    ksm = ("uid", "container", collector.kube_state_metrics_namespace, collector.kube_state_metrics_pod)
    return [
        *(Family(name=n, kind="gauge", exposed_as=(n,), labels=dcgm, buckets=None, path="dcgm", metric_source=None,
                 source="dcgm-exporter etc/default-counters.csv")
          for n in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE")),
        Family(name="kube_pod_container_status_restarts", kind="counter",
               exposed_as=("kube_pod_container_status_restarts_total",), labels=ksm, buckets=None,
               path="kube-state-metrics", metric_source=None, source="kube-state-metrics pod-metrics.md"),
        # kube_pod_status_ready: gauge, labels pod, namespace, uid, condition (true|false|unknown); no container.
        Family(name="kube_pod_status_ready", kind="gauge", exposed_as=("kube_pod_status_ready",),
               labels=("uid", "condition", collector.kube_state_metrics_namespace, collector.kube_state_metrics_pod),
               buckets=None, path="kube-state-metrics", metric_source=None, source="kube-state-metrics pod-metrics.md"),
    ]


def families(collector: CollectorLabels | None = None) -> list[Family]:
    path = metrics_dir()
    return [*_exporter_families(path), *_sidecar_families(path), *_cluster_families(collector or CollectorLabels())]


def series_labels(fams: list[Family]) -> dict[str, frozenset[str]]:
    """Exposed series name -> label names on HyperPod (``le`` on histogram buckets)."""
    out: dict[str, frozenset[str]] = {}
    for f in fams:
        for s in f.exposed_as:
            out[s] = frozenset((*f.labels, lbl.LE) if s.endswith("_bucket") else f.labels)
    return out


def violations(expr: str, contract: dict[str, frozenset[str]]) -> list[str]:
    """Series and labels ``expr`` names that the contract does not have (empty: the query can return data)."""
    found: list[str] = []
    selectors: list[promql_parser.VectorSelector] = []
    aggregations: list[promql_parser.AggregateExpr] = []

    def visit(node: object) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            selectors.append(node)
        elif isinstance(node, promql_parser.AggregateExpr):
            aggregations.append(node)
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    available: set[str] = set()
    for sel in selectors:
        labels = contract.get(sel.name)
        if labels is None:
            found.append(f"series {sel.name} is not in the contract")
            continue
        available |= labels
        for matcher in sel.matchers.matchers:
            if matcher.name not in labels:
                found.append(f"{sel.name} has no label {matcher.name!r}")
    for agg in aggregations:
        for label in (agg.modifier.labels if agg.modifier is not None else []):
            if label not in available:
                found.append(f"aggregation by {label!r}: no selected series has that label")
    return found
