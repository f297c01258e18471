"""Fixtures for the observability tests: a synthetic exporter and a real Prometheus, both on loopback.

The exporter serves every catalogue metric with the catalogue's names and labels, for the pods of a DPD
endpoint (two prefill replicas, one decode), its colocated baseline, the router, and a decoy endpoint in
the same namespace. Pod names are written out the way the operator names pods, not derived from our
regexes, so the selectors are tested too. Counters and histograms grow with time, so rates are non-zero.

Prometheus (Debian package ``prometheus``) is started once per session on a free 127.0.0.1 port with a
temporary config and storage, and always stopped. Every wait is bounded.
"""

from __future__ import annotations

import itertools
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from hyperpod_infra.config import Config
from hyperpod_k8s.observability import catalogue as m
from hyperpod_k8s.observability.promql import ROUTER_NAMESPACE

SCRAPE_INTERVAL = "1s"
#: What ``$__rate_interval`` becomes in the tests: several 1 s scrapes.
RATE_INTERVAL = "15s"
STARTUP_TIMEOUT_S = 20.0
DATA_TIMEOUT_S = 20.0
MIN_SAMPLES = 4

INSTALL_HINT = "run: apt-get update && apt-get install -y prometheus (Debian package, provides promtool)"


def require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed; {INSTALL_HINT}", pytrace=False)
    return path


@pytest.fixture(scope="session")
def promtool() -> str:
    return require_tool("promtool")


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    role: str  # prefill | decode | worker | router


def synthetic_pods(config: Config) -> tuple[Pod, ...]:
    ep, ns = config.endpoint.name, config.endpoint.namespace
    return (
        Pod(ns, f"prefill-{ep}-6d5f7c8b9-x2k4p", "prefill"),
        Pod(ns, f"prefill-{ep}-6d5f7c8b9-q7w8e", "prefill"),
        Pod(ns, f"decode-{ep}-5b8c9d7f6-klm2n", "decode"),
        Pod(ns, f"{ep}-colocated-7f6d5c4b3-pq9rs", "worker"),
        # A different DPD endpoint in the same namespace: must never show up in our panels.
        Pod(ns, "prefill-other-model-58b7c6d5f4-zz9yy", "prefill"),
        Pod(ns, "decode-other-model-7c6d5f4b8-yy8zz", "decode"),
        Pod(ROUTER_NAMESPACE, f"{ep}-{ns}-router-5c4b3a2d1-uv8xy", "router"),
    )


_LATENCY_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0)
_SPEED_BUCKETS = (128.0, 1024.0, 8192.0, 65536.0)
_GAUGE_VALUES = {
    m.NUM_REQUESTS_WAITING: 3.0, m.NUM_REQUESTS_RUNNING: 12.0, m.KV_CACHE_USAGE: 0.6,
    m.ROUTER_HEALTHY_PODS: 3.0, m.ROUTER_CURRENT_QPS: 2.5, m.GPU_UTIL: 70.0, m.GPU_FB_USED: 60000.0,
    m.GPU_FB_FREE: 20000.0,
}
_COUNTER_RATES = {
    m.LMCACHE_RETRIEVE_REQUESTED_TOKENS: 1000.0, m.LMCACHE_RETRIEVE_RETRIEVED_TOKENS: 990.0,
    m.MODEL_INVOCATIONS: 5.0, m.MODEL_ERRORS: 0.05, m.POD_RESTARTS: 0.1,
}


def _label_values(label: str, pod: Pod, config: Config) -> tuple[str, ...]:
    values = {
        "model_name": (config.model.name,), "engine": ("0",), "finished_reason": ("stop", "length", "abort"),
        "worker_id": ("0",), "gpu": ("0", "1"), "modelName": ("NVIDIA H100 80GB HBM3",),
        "Hostname": ("hyperpod-i-0abc123",), "container": (pod.name.rsplit("-", 2)[0],),
        "server": ("http://10.1.0.11:8081", "http://10.1.0.12:8081"),
        "cluster_name": (config.hyperpod.cluster_name,), "resource_name": (config.endpoint.name,),
        "metric_source": ("reverse-proxy",), "uid": (f"uid-{pod.name}",),
    }
    return values.get(label, (f"{label}-value",))


def _fmt(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def exposition(config: Config, elapsed_s: float) -> str:
    """Prometheus text format for every catalogue metric on every pod that exposes it."""
    lines: list[str] = []
    for metric in m.CATALOGUE:
        lines.append(f"# TYPE {metric.name} {metric.type}")
        for pod in synthetic_pods(config):
            if (metric.source is m.ROUTER) != (pod.role == "router"):
                continue
            weight = 4.0 if pod.role == "decode" else 1.0
            base = {"namespace": pod.namespace, metric.pod_label: pod.name}
            for combo in itertools.product(*(_label_values(lbl, pod, config) for lbl in metric.labels)):
                labels = {**base, **dict(zip(metric.labels, combo, strict=True))}
                if metric.type == "gauge":
                    lines.append(f"{metric.name}{_fmt(labels)} {_GAUGE_VALUES[metric]}")
                elif metric.type == "counter":
                    value = _COUNTER_RATES.get(metric, 2.0) * weight * elapsed_s
                    lines.append(f"{metric.name}{_fmt(labels)} {value:.3f}")
                else:
                    buckets = _SPEED_BUCKETS if metric is m.LMCACHE_RETRIEVE_SPEED else _LATENCY_BUCKETS
                    count = 2.0 * weight * elapsed_s
                    for i, le in enumerate(buckets):
                        cumulative = count * (i + 1) / (len(buckets) + 1)
                        lines.append(f"{metric.name}_bucket{_fmt({**labels, 'le': str(le)})} {cumulative:.3f}")
                    lines.append(f"{metric.name}_bucket{_fmt({**labels, 'le': '+Inf'})} {count:.3f}")
                    lines.append(f"{metric.name}_sum{_fmt(labels)} {count * buckets[2]:.3f}")
                    lines.append(f"{metric.name}_count{_fmt(labels)} {count:.3f}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def exporter(default_config: Config) -> Iterator[str]:
    """A tiny HTTP exporter on 127.0.0.1; yields its host:port."""
    started = time.monotonic()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = exposition(default_config, 1.0 + time.monotonic() - started).encode()
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


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrometheusApi:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def query(self, expr: str) -> list[dict]:
        """Instant query at "now"; returns the result vector (raises on an API error)."""
        url = f"{self.base_url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
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
            pytest.fail(f"prometheus exited with {proc.returncode} while waiting for {what}:\n"
                        f"{log.read_text()[-2000:]}", pytrace=False)
        try:
            if ready():
                return
        except OSError:
            pass
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout_s}s waiting for {what}:\n{log.read_text()[-2000:]}", pytrace=False)


@pytest.fixture(scope="session")
def prometheus(exporter: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusApi]:
    """A real Prometheus scraping the exporter every second, with at least MIN_SAMPLES samples stored."""
    binary = require_tool("prometheus")
    workdir = tmp_path_factory.mktemp("prometheus")
    (workdir / "prometheus.yml").write_text(json.dumps({  # JSON is YAML
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
        "scrape_configs": [{"job_name": "synthetic", "honor_labels": True,
                            "static_configs": [{"targets": [exporter]}]}],
    }))
    port = _free_port()
    log = workdir / "prometheus.log"
    with log.open("w") as log_file:
        proc = subprocess.Popen(
            [binary, f"--config.file={workdir / 'prometheus.yml'}", f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
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
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def substitute(expr: str, config: Config) -> str:
    """Replace the dashboards' Grafana variables the way Grafana would for the default config."""
    from hyperpod_k8s.observability.dashboards import COLOCATED_SUFFIX

    values = {
        "$__rate_interval": RATE_INTERVAL,
        "$namespace": config.endpoint.namespace,
        "$endpoint": config.endpoint.name,
        "$baseline": config.endpoint.name + COLOCATED_SUFFIX,
    }
    for var, value in values.items():
        expr = expr.replace(var, value)
    assert "$" not in expr, f"unsubstituted variable in {expr!r}"
    return expr


@pytest.fixture(scope="session")
def grafana_substitute(default_config: Config) -> Callable[[str], str]:
    return lambda expr: substitute(expr, default_config)
