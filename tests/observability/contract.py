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
#: The sidecar's own dimensions (AWS inference observability page, operator.md section d), and its request labels
#: ``method``, ``uri`` and ``status``: AWS's HyperPod inference dashboard filters ``model_invocations_total`` and
#: ``model_errors_total`` on ``method="POST", uri="/invocations"`` and splits errors by ``{{status}}``
#: (aws/sagemaker-hyperpod-cluster-setup @ 6e045f89fe89, eks/cloudformation/resources/grafana-lambda-function/
#: lambda_function/dashboards/templates/inference.json: "Percentage of Successful Requests", "Count of Failed
#: Requests per Error Code"; operator.md section d: "The 2025 dashboard filters on method="POST", uri="/invocations"").
SIDECAR_LABELS = ("cluster_id", "cluster_name", "resource_name", "resource_type", "namespace", "model_name",
                  "model_version", "model_container_type", "pod_name", "node_name", "instance_type",
                  "metric_source", "task_type", "method", "uri", "status")
#: Values of the sidecar's request labels in the served series: the inference requests AWS's dashboard counts, a
#: GET (a probe through the proxy) that must not count, and error statuses (inference.json's status=~"2.*").
SIDECAR_REQUESTS = {"method": ("POST", "GET"), "uri": ("/invocations", "/ping"), "status": ("200", "500")}
#: finished_reason values (SOURCES.md: stop|length|abort|error|repetition).
FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")


#: Bucket lists the contract names by the variable that holds them in the exporter's source (its extractor keeps
#: only literal lists), resolved from that source: vLLM's ``request_latency_buckets`` in ``vllm/v1/metrics/
#: loggers.py`` (E2E, queue, inference, prefill and decode time; the fourth review read "0.3, 0.5, 0.8, 1.0, 1.5,
#: 2.0, 2.5, ...", observability-review.md finding 2).
BUCKET_VARIABLES: dict[str, tuple[float, ...]] = {
    "request_latency_buckets": (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                                120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0),
}


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
    """``$HYPERPOD_METRICS_DIR``, else ``../shared/metrics`` beside the checkout or beside the local checkout it was
    cloned from (:func:`hyperpod_core.paths.beside_checkout`)."""
    from hyperpod_core.paths import beside_checkout

    given = os.environ.get(ENV_VAR)
    candidates = (Path(given),) if given else beside_checkout("shared", "metrics", root=REPO_ROOT)
    for path in candidates:
        missing = [f for f in (*EXPORTER_FILES, "SOURCES.md") if not (path / f).is_file()]
        if not missing:
            return path
    raise FileNotFoundError(f"{ENV_VAR} / ../shared/metrics ({', '.join(map(str, candidates))}) lacks "
                            f"{[*EXPORTER_FILES, 'SOURCES.md']}: point {ENV_VAR} at the directory holding the "
                            "exporters' metric contract")


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
            if isinstance(buckets, str) and buckets in BUCKET_VARIABLES:
                buckets = list(BUCKET_VARIABLES[buckets])
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


def series_buckets(fams: list[Family]) -> dict[str, tuple[float, ...]]:
    """``<histogram>_bucket`` -> the contract's literal bucket boundaries (histograms whose list is literal)."""
    return {f.name + "_bucket": f.buckets for f in fams if f.kind == "histogram" and f.buckets is not None}


def raw_buckets() -> dict[str, object]:
    """Family name -> the contract's ``buckets`` entry as written: a literal list, or the name of the variable
    that holds it in the exporter's source (``request_latency_buckets``), or ``None``."""
    path = metrics_dir()
    return {e["name"]: e["buckets"] for f in EXPORTER_FILES for e in json.loads((path / f).read_text())}


def exposed_le(bound: float) -> str:
    """``le`` as prometheus_client writes it (``floatToGoString``: ``repr`` of the float, e.g. ``1.0``, ``2.5``)."""
    return repr(float(bound))


def _le_problem(series: str, matcher: promql_parser.Matcher, bounds: tuple[float, ...]) -> str | None:
    """An ``le`` matcher that selects no bucket the exporter writes (a query against an invented boundary)."""
    written = [exposed_le(b) for b in bounds] + ["+Inf"]
    if str(matcher.op) == "MatchOp.Equal":
        hits = [w for w in written if w == matcher.value]
    elif str(matcher.op) == "MatchOp.Re":
        hits = [w for w in written if re.fullmatch(matcher.value, w)]
    else:
        return None
    return None if len(hits) == 1 else f'{series}{{le {matcher.op} "{matcher.value}"}} selects {len(hits)} buckets'


def violations(expr: str, contract: dict[str, frozenset[str]],
               buckets: dict[str, tuple[float, ...]] | None = None) -> list[str]:
    """Series and labels ``expr`` names that the contract does not have (empty: the query can return data); with
    ``buckets`` (:func:`series_buckets`), also ``le`` matchers that do not select exactly one real bucket."""
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
            elif matcher.name == lbl.LE and buckets is not None and sel.name in buckets:
                problem = _le_problem(sel.name, matcher, buckets[sel.name])
                if problem:
                    found.append(problem)
    for agg in aggregations:
        for label in (agg.modifier.labels if agg.modifier is not None else []):
            if label not in available:
                found.append(f"aggregation by {label!r}: no selected series has that label")
    return found
