"""Fixtures for the observability tests: an exporter serving the real metric contract, and a real Prometheus.

The exporter is GENERATED from the exporters' contract (``contract.py``: ``shared/metrics/*.json`` and
SOURCES.md, read through ``$HYPERPOD_METRICS_DIR``): every family of vLLM 0.19.0 and LMCache 0.4.3 with its
exposed names and labels, plus the labels the HyperPod metrics path adds (``pod_name``, ``namespace``,
``metric_source``, cluster identity), the reverse-proxy sidecar's series, and the DCGM / kube-state-metrics
series under the collector labels of the config. Nothing here is derived from our catalogue, so a query that
names a series or label the pods do not expose returns nothing. Pods are a DPD endpoint (two prefill replicas,
one decode), its colocated baseline (the same endpoint name, pods without a role prefix) and a decoy
endpoint in the same namespace, named the way the operator names pods. Counters and histograms grow with
time, so rates are non-zero.

Prometheus (Debian package ``prometheus``) is started once per session on a free 127.0.0.1 port with a
temporary config and storage, and always stopped. Every wait is bounded.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from tests.observability import contract
from tests.observability.router_flow import DpdFlow, EngineShape, exporting

from fake_http import free_port
from hyperpod_core.config import Config
from hyperpod_core.telemetry import labels as lbl
from hyperpod_core.telemetry.queries import OPERATOR_NAMESPACE
from hyperpod_core.telemetry.targets import collector_labels

SCRAPE_INTERVAL = "1s"
#: What ``$__rate_interval`` becomes in the tests: several 1 s scrapes.
RATE_INTERVAL = "15s"
#: What ``$__range`` (a run-summary stat over the panel's window) becomes.
RUN_RANGE = "30s"
STARTUP_TIMEOUT_S = 20.0
DATA_TIMEOUT_S = 20.0
MIN_SAMPLES = 4

INSTALL_HINT = ("run: apt-get update && apt-get install -y prometheus prometheus-alertmanager (Debian packages: "
                "promtool, amtool)")
#: The SNS topic the test alert manager publishes to (the fake SNS records it).
TEST_TOPIC_ARN = "arn:aws:sns:us-west-2:111122223333:hyperpod-dpd-alerts"


def require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed; {INSTALL_HINT}", pytrace=False)
    return path


@pytest.fixture(scope="session")
def promtool() -> str:
    return require_tool("promtool")


@pytest.fixture(scope="session")
def contract_families(default_config: Config) -> list[contract.Family]:
    return contract.families(collector_labels(default_config.observability))


@pytest.fixture(scope="session")
def contract_series(contract_families: list[contract.Family]) -> dict[str, frozenset[str]]:
    return contract.series_labels(contract_families)


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    role: str  # prefill | decode | worker | router


def synthetic_pods(config: Config) -> tuple[Pod, ...]:
    ep, ns = config.spec().endpoint.name, config.spec().endpoint.namespace
    return (
        Pod(ns, f"prefill-{ep}-6d5f7c8b9-x2k4p", "prefill"),
        Pod(ns, f"prefill-{ep}-6d5f7c8b9-q7w8e", "prefill"),
        Pod(ns, f"decode-{ep}-5b8c9d7f6-klm2n", "decode"),
        # The colocated manifest keeps the DPD endpoint's name: its pods have no role prefix.
        Pod(ns, f"{ep}-7f6d5c4b3-pq9rs", "worker"),
        # Other endpoints in the same namespace: must never show up in our panels.
        Pod(ns, "prefill-other-model-58b7c6d5f4-zz9yy", "prefill"),
        Pod(ns, "decode-other-model-7c6d5f4b8-yy8zz", "decode"),
        Pod(ns, f"{ep}-extra-7f6d5c4b3-ab1cd", "worker"),
        # The endpoint's router, in the operator's namespace (operator.md (e): <iec>-<ns>-router-XXXX).
        Pod(OPERATOR_NAMESPACE, f"{ep}-{ns}-router-5d4c3b2a1-rt7uv", "router"),
    )


_GENERIC_BUCKETS = (0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6)
#: TP ranks of each synthetic pod's LMCache series (the default endpoint runs tensor parallel 8).
TP_RANKS = 2
_GAUGE_VALUES = {
    "vllm:num_requests_waiting": 3.0, "vllm:num_requests_running": 12.0, "vllm:kv_cache_usage_perc": 0.6,
    "DCGM_FI_DEV_GPU_UTIL": 70.0, "DCGM_FI_DEV_FB_USED": 60000.0, "DCGM_FI_DEV_FB_FREE": 20000.0,
}
_COUNTER_RATES = {
    "lmcache:num_requested_tokens": 1000.0, "lmcache:num_hit_tokens": 990.0,
    "model_invocations": 5.0, "model_errors": 0.05, "kube_pod_container_status_restarts": 0.1,
}


#: The weights' revision of the test endpoint (a staged one: ``sha256-<16 hex>``, hyperpod_core.staged_model).
REVISION = "sha256-1f6441a8da688874"


def _label_value(label: str, pod: Pod, config: Config, metric: str = "") -> tuple[str, ...]:
    # model_name: LMCache labels its series with vLLM's --model, the mount path /opt/ml/model/<model.name>/<revision>
    # (lmcache/observability.py:1814-1822, metadata.model_name); vLLM its own with --served-model-name.
    served = config.spec().model.name
    model = f"/opt/ml/model/{served}/{REVISION}" if metric.startswith("lmcache:") else served
    values = {
        "model_name": (model,), "engine": ("0",), lbl.FINISHED_REASON: contract.FINISHED_REASONS,
        # LMCache: one engine per TP rank, each counting the same tokens (lmcache/observability.py, 0.4.3).
        lbl.WORKER_ID: tuple(str(r) for r in range(TP_RANKS)), "role": ("worker",), "gpu": ("0", "1"),
        "container": (pod.name.rsplit("-", 2)[0],), lbl.CONDITION: ("true", "false", "unknown"),
        "cluster_name": (config.hyperpod.cluster_name,), "resource_name": (config.spec().endpoint.name,),
        "uid": (f"uid-{pod.name}",), **contract.SIDECAR_REQUESTS,
    }
    return values.get(label, (f"{label}-value",))


def _fmt(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def exposition(config: Config, families: list[contract.Family], elapsed_s: float) -> str:
    """Prometheus text format: every contract family on every pod, labelled the way HyperPod stores it."""
    collector = collector_labels(config.observability)
    identity = {
        "inference": (lbl.NAMESPACE, lbl.POD_NAME),
        "dcgm": (collector.dcgm_namespace, collector.dcgm_pod),
        "kube-state-metrics": (collector.kube_state_metrics_namespace, collector.kube_state_metrics_pod),
    }
    lines: list[str] = []
    for fam in families:
        ns_label, pod_label = identity[fam.path]
        own = [x for x in fam.labels if x not in (ns_label, pod_label, lbl.METRIC_SOURCE)]
        lines.append(f"# TYPE {fam.exposed_as[0] if fam.kind != 'histogram' else fam.name} {fam.kind}")
        for pod in synthetic_pods(config):
            weight = 4.0 if pod.role == "decode" else 1.0
            base = {ns_label: pod.namespace, pod_label: pod.name}
            if fam.metric_source is not None:
                base[lbl.METRIC_SOURCE] = fam.metric_source
            for combo in itertools.product(*(_label_value(x, pod, config, fam.name) for x in own)):
                labels = {**base, **dict(zip(own, combo, strict=True))}
                if fam.kind == "gauge":
                    value = _GAUGE_VALUES.get(fam.name, 1.0)
                    if lbl.CONDITION in labels:  # a Ready pod: 1 for condition="true", 0 for the others
                        value = 1.0 if labels[lbl.CONDITION] == "true" else 0.0
                    lines.append(f"{fam.name}{_fmt(labels)} {value}")
                elif fam.kind == "counter":
                    value = _COUNTER_RATES.get(fam.name, 2.0) * weight * elapsed_s
                    lines.append(f"{fam.exposed_as[0]}{_fmt(labels)} {value:.3f}")
                else:
                    buckets = fam.buckets or _GENERIC_BUCKETS
                    count = 2.0 * weight * elapsed_s
                    for i, le in enumerate(buckets):
                        cumulative = count * (i + 1) / (len(buckets) + 1)
                        lines.append(f"{fam.name}_bucket{_fmt({**labels, 'le': repr(float(le))})} {cumulative:.3f}")
                    lines.append(f"{fam.name}_bucket{_fmt({**labels, 'le': '+Inf'})} {count:.3f}")
                    lines.append(f"{fam.name}_sum{_fmt(labels)} {count * buckets[len(buckets) // 2]:.3f}")
                    lines.append(f"{fam.name}_count{_fmt(labels)} {count:.3f}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def exporter(default_config: Config, contract_families: list[contract.Family]) -> Iterator[str]:
    """A tiny HTTP exporter on 127.0.0.1 serving the contract's series; yields its host:port."""
    started = time.monotonic()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = exposition(default_config, contract_families, 1.0 + time.monotonic() - started).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class PrometheusApi:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def query(self, expr: str, at: float | None = None) -> list[dict]:
        """Instant query at ``at`` (Unix time; default "now"); returns the result vector (raises on an API error)."""
        params = {"query": expr} | ({"time": f"{at:.3f}"} if at is not None else {})
        url = f"{self.base_url}/api/v1/query?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                payload = json.load(resp)
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"Prometheus rejected {expr!r}: {exc.read().decode()}") from None
        assert payload["status"] == "success", payload
        return payload["data"]["result"]


def _wait(what: str, timeout_s: float, ready: Callable[[], bool], proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{Path(str(proc.args[0])).name} exited with {proc.returncode} while waiting for {what}:\n"
                        f"{log.read_text()[-2000:]}", pytrace=False)
        try:
            if ready():
                return
        except OSError:
            pass
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout_s}s waiting for {what}:\n{log.read_text()[-2000:]}", pytrace=False)


#: The fake DPD endpoints that follow the router's flow (router_flow.py), in a namespace of their own.
FLOW_NAMESPACE = "flow"
FLOW_THRESHOLD = 100
FLOW_PREFILL = EngineShape(max_num_seqs=1, prefill_s_per_word=0.001)
FLOW_DECODE = EngineShape(max_num_seqs=16, prefill_s_per_word=0.0005, kv_transfer_s=0.03, itl_s=0.005)


@pytest.fixture(scope="session")
def flows() -> Iterator[dict[str, DpdFlow]]:
    """Two fake DPD endpoints (one for latency, one for failures), idle until a test sends requests."""
    made = {k: DpdFlow(FLOW_NAMESPACE, f"flow-{k}", threshold=FLOW_THRESHOLD, prefill=FLOW_PREFILL,
                       decode=FLOW_DECODE, prefill_replicas=1 if k == "ttft" else 2) for k in ("ttft", "errors")}
    with ExitStack() as stack:
        for f in made.values():
            stack.enter_context(f)
        yield made


@pytest.fixture(scope="session")
def flow_exporter(flows: dict[str, DpdFlow]) -> Iterator[str]:
    with exporting(list(flows.values())) as address:
        yield address


class FakeSns:
    """The SNS ``Publish`` API as Alertmanager's SNS notifier calls it (AWS query protocol, form-encoded POST;
    SNS API reference, Publish): records each request's parameters and answers with a PublishResponse."""

    RESPONSE = (b'<PublishResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><PublishResult><MessageId>m-1'
                b'</MessageId></PublishResult><ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata>'
                b'</PublishResponse>')

    def __init__(self) -> None:
        self.published: list[dict[str, str]] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                with fake.lock:
                    fake.published.append(dict(urllib.parse.parse_qsl(body)))
                self.send_response(200)
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(FakeSns.RESPONSE)))
                self.end_headers()
                self.wfile.write(FakeSns.RESPONSE)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def attributes(self, message: dict[str, str]) -> dict[str, str]:
        """``MessageAttributes.entry.N.Name`` / ``.Value.StringValue`` pairs of one recorded Publish."""
        names = {k.split(".")[2]: v for k, v in message.items() if k.endswith(".Name")}
        return {v: message[f"MessageAttributes.entry.{n}.Value.StringValue"] for n, v in names.items()}


@pytest.fixture(scope="session")
def fake_sns() -> Iterator[FakeSns]:
    sns = FakeSns()
    thread = threading.Thread(target=sns.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield sns
    finally:
        sns.server.shutdown()
        sns.server.server_close()


class AlertmanagerApi:
    def __init__(self, base_url: str, config_file: Path) -> None:
        self.base_url, self.config_file = base_url, config_file

    def post(self, alerts: list[dict]) -> None:
        req = urllib.request.Request(f"{self.base_url}/api/v2/alerts", data=json.dumps(alerts).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200

    def alerts(self, **labels: str) -> list[dict]:
        query = urllib.parse.urlencode([("filter", f'{k}="{v}"') for k, v in labels.items()])
        with urllib.request.urlopen(f"{self.base_url}/api/v2/alerts?{query}", timeout=10) as resp:
            return json.load(resp)


@pytest.fixture(scope="session")
def alertmanager(default_config: Config, fake_sns: FakeSns,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[AlertmanagerApi]:
    """Alertmanager (Debian ``prometheus-alertmanager``) running our alert manager configuration once per session.

    The one change from what the workspace gets: each ``sns_configs`` entry carries ``api_url`` pointing at the
    fake SNS (AMP sets the URL itself and forbids the key; the tests check the real definition has none), and the
    process gets placeholder AWS credentials to sign with."""
    from hyperpod_core.telemetry.alertmanager import alertmanager_config

    binary = require_tool("prometheus-alertmanager")
    config = alertmanager_config(default_config.region, [TEST_TOPIC_ARN])
    for receiver in config["receivers"]:
        for sns in receiver["sns_configs"]:
            sns["api_url"] = fake_sns.url
    workdir = tmp_path_factory.mktemp("alertmanager")
    config_file = workdir / "alertmanager.yml"
    config_file.write_text(json.dumps(config))  # JSON is YAML
    port = free_port()
    log = workdir / "alertmanager.log"
    env = {"PATH": "/usr/bin:/bin", "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "example",
           "AWS_EC2_METADATA_DISABLED": "true"}
    with log.open("w") as log_file:
        proc = subprocess.Popen(
            [binary, f"--config.file={config_file}", f"--storage.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=", "--log.level=warn"],
            stdout=log_file, stderr=subprocess.STDOUT, cwd=workdir, env=env)
    api = AlertmanagerApi(f"http://127.0.0.1:{port}", config_file)
    try:
        def ready() -> bool:
            with urllib.request.urlopen(f"{api.base_url}/-/ready", timeout=2) as resp:
                return resp.status == 200

        _wait("alertmanager /-/ready", STARTUP_TIMEOUT_S, ready, proc, log)
        yield api
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def prometheus(exporter: str, flow_exporter: str, alertmanager: AlertmanagerApi, default_config: Config,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusApi]:
    """A real Prometheus scraping the exporter (and the router-flow fakes) every second, with at least
    MIN_SAMPLES samples stored. It evaluates our alert rules (every second instead of their interval) and sends
    what fires to the session's Alertmanager, as AMP's ruler hands alerts to the workspace's alert manager."""
    from hyperpod_core.telemetry.alerts import alert_rule_groups

    binary = require_tool("prometheus")
    workdir = tmp_path_factory.mktemp("prometheus")
    rules = alert_rule_groups(default_config.specs())
    for group in rules["groups"]:
        group["interval"] = SCRAPE_INTERVAL
    (workdir / "rules.yml").write_text(json.dumps(rules))
    (workdir / "prometheus.yml").write_text(json.dumps({  # JSON is YAML
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
        "rule_files": [str(workdir / "rules.yml")],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [alertmanager.base_url.removeprefix(
            "http://")]}]}]},
        "scrape_configs": [{"job_name": "synthetic", "honor_labels": True,
                            "static_configs": [{"targets": [exporter]}]},
                           {"job_name": "flow", "honor_labels": True,
                            "static_configs": [{"targets": [flow_exporter]}]}],
    }))
    port = free_port()
    log = workdir / "prometheus.log"
    with log.open("w") as log_file:
        proc = subprocess.Popen(
            [binary, f"--config.file={workdir / 'prometheus.yml'}", f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn",
             # Firing alerts are re-sent every second, not every minute: the first send may come before the
             # Alertmanager is discovered (and be dropped).
             "--rules.alert.resend-delay=1s"],
            stdout=log_file, stderr=subprocess.STDOUT, cwd=workdir,
        )
    api = PrometheusApi(f"http://127.0.0.1:{port}")
    try:
        def ready() -> bool:
            with urllib.request.urlopen(f"{api.base_url}/-/ready", timeout=2) as resp:
                return resp.status == 200

        _wait("/-/ready", STARTUP_TIMEOUT_S, ready, proc, log)
        _wait(f"{MIN_SAMPLES} scrapes", DATA_TIMEOUT_S,
              lambda: bool(api.query(f"min(count_over_time(up[{RATE_INTERVAL}])) >= {MIN_SAMPLES}")), proc, log)
        yield api
    finally:
        _stop(proc)


def substitute(expr: str, config: Config) -> str:
    """Replace the dashboards' Grafana variables the way Grafana would for the default config."""
    values = {
        "$__rate_interval": RATE_INTERVAL,
        "$__range": RUN_RANGE,
        "$namespace": config.spec().endpoint.namespace,
        "$endpoint": config.spec().endpoint.name,
        # The colocated manifest keeps the DPD endpoint's name.
        "$baseline": config.spec().endpoint.name,
    }
    for var, value in values.items():
        expr = expr.replace(var, value)
    # A Grafana variable starts with a letter or underscore; "$1" is label_replace's capture group.
    assert not re.search(r"\$\{?[A-Za-z_]", expr), f"unsubstituted variable in {expr!r}"
    return expr


@pytest.fixture(scope="session")
def grafana_substitute(default_config: Config) -> Callable[[str], str]:
    return lambda expr: substitute(expr, default_config)


def colocated_of(default_config_dict: dict) -> Config:
    """The default config with ``endpoint.apply: colocated`` (what ``plan`` recommends for it, docs/sizing.md)."""
    from hyperpod_core.config import parse_config

    data = json.loads(json.dumps(default_config_dict))
    data["endpoint"]["apply"] = "colocated"
    return parse_config(data)


@pytest.fixture(scope="session")
def colocated_config(default_config_dict: dict) -> Config:
    return colocated_of(default_config_dict)


@pytest.fixture(scope="session", params=["dpd", "colocated"])
def applied_config(request: pytest.FixtureRequest, default_config: Config, colocated_config: Config) -> Config:
    """The default config once per value of ``endpoint.apply``."""
    return default_config if request.param == "dpd" else colocated_config


def autoscaling_config(default_config_dict: dict) -> Config:
    from hyperpod_core.config import parse_config

    data = json.loads(json.dumps(default_config_dict))
    data["endpoint"]["autoscaling"]["enabled"] = True
    return parse_config(data)


def every_query(config: Config, default_config_dict: dict) -> list[tuple[str, str]]:
    """(where, expression) of every dashboard panel, alert and autoscaling trigger, Grafana variables kept."""
    from hyperpod_core.telemetry.alerts import alert_rule_groups
    from hyperpod_core.telemetry.dashboards import dashboards
    from hyperpod_k8s.endpoint.props import _scaling

    out = [(f"{d.uid}: {p.title} / {q.legend}", q.expr) for d in dashboards(config.spec()) for p in d.panels
           for q in p.queries]
    out += [(f"alert {r['alert']}", r["expr"]) for g in alert_rule_groups(config.specs())["groups"] for r in g["rules"]]
    scaling = autoscaling_config(default_config_dict)
    for role in ("prefill", "decode"):
        rs = _scaling(scaling.spec(), role)
        assert rs is not None
        out.append((f"autoscaling {role}", rs.query))
    return out
