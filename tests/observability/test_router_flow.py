"""The TTFT users feel, the error ratio per request and the TP de-duplication, against a client's own numbers.

A fake DPD endpoint follows the router's published flow (``router_flow.py``: production-stack
``route_disaggregated_prefill_request``, prefill leg with ``max_tokens=1`` to completion, then decode), its pods
expose what vLLM 0.19, LMCache 0.4.3 and the reverse-proxy sidecar expose on HyperPod, and the session's real
Prometheus scrapes them. A client sends mixed traffic (disaggregated and direct prompts) through the router and
measures TTFT itself, as genai-bench does (first streamed chunk). The dashboards' queries, evaluated over the
run's window, must agree with the client; the queries they replace must not (so the checks bite).
"""

from __future__ import annotations

import math
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from tests.observability.conftest import FLOW_THRESHOLD
from tests.observability.router_flow import ClientResult, DpdFlow, request

from hyperpod_core.config import Config
from hyperpod_core.telemetry import catalogue as m
from hyperpod_core.telemetry import queries as q
from hyperpod_core.telemetry.dashboards import dpd_overview
from hyperpod_core.telemetry.panels import USER_TTFT_TITLE

pytestmark = pytest.mark.slow

SCRAPE_TIMEOUT_S = 15.0
CONCURRENCY = 4


def _drive(flow: DpdFlow, jobs: list[tuple[int, str]]) -> tuple[list[ClientResult], float, float]:
    """Send ``jobs`` (prompt words, tag) through the router, CONCURRENCY at a time: (results, start, end)."""
    start = time.time()
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        results = list(pool.map(lambda job: request(flow.url, job[0], tag=job[1]), jobs))
    return results, start, time.time()


def _scraped_after(prometheus, job: str, t: float) -> float:
    """Wait until Prometheus holds a scrape of ``job`` taken after ``t``; returns that scrape's time."""
    deadline = time.monotonic() + SCRAPE_TIMEOUT_S
    while time.monotonic() < deadline:
        result = prometheus.query(f'timestamp(up{{job="{job}"}})')
        if result and float(result[0]["value"][1]) > t:
            return float(result[0]["value"][1])
        time.sleep(0.2)
    pytest.fail(f"no scrape of {job} after the run within {SCRAPE_TIMEOUT_S}s", pytrace=False)


def _value(prometheus, expr: str, at: float) -> float:
    result = prometheus.query(expr, at=at)
    assert len(result) == 1, (expr, result)
    return float(result[0]["value"][1])


def _over_run(expr: str, flow: DpdFlow, start: float, at: float) -> str:
    """A dashboard expression for ``flow``'s pods over a window from before the run to ``at``: rates over the
    window are ratios of increases, the same for every series of one scrape (one target, same timestamps)."""
    window = f"{math.ceil(at - start) + 5}s"
    for var, value in (("$__rate_interval", window), ("$namespace", flow.namespace), ("$endpoint", flow.endpoint)):
        expr = expr.replace(var, value)
    assert "$" not in expr, expr
    return expr


def test_user_ttft_panel_mean_matches_the_client_within_ten_percent(prometheus, flows, default_config: Config):
    """Done-when of issue 22: the DPD TTFT panel's mean and the client's mean TTFT agree within 10 %."""
    flow = flows["ttft"]
    jobs = [(FLOW_THRESHOLD + 20, "")] * 20 + [(FLOW_THRESHOLD // 2, "")] * 8  # 20 disaggregated, 8 direct
    results, start, end = _drive(flow, jobs)
    assert all(r.ok for r in results)
    client = statistics.fmean(r.ttft_s for r in results if r.ttft_s is not None)
    at = _scraped_after(prometheus, "flow", end)
    (panel,) = [p for p in dpd_overview(default_config.spec()).panels if p.title == USER_TTFT_TITLE]
    mean = _value(prometheus, _over_run(panel.queries[0].expr, flow, start, at), at)
    assert mean == pytest.approx(client, rel=0.10), f"panel {mean:.4f}s vs client {client:.4f}s"

    # What the decode pods alone see leaves out the prefill queue and compute: far from what users feel.
    t = q.Target(namespace="$namespace", endpoint="$endpoint", kind="dpd")
    decode_only = _value(prometheus, _over_run(q.mean(m.TIME_TO_FIRST_TOKEN, t, "decode"), flow, start, at), at)
    assert abs(decode_only - client) / client > 0.10, (decode_only, client)

    # Same run, TP ranks: every rank's LMCache engine counts the same tokens (8 ranks here), so the KV tokens
    # decode receives per second equal the prompt tokens prefill computed per second (vLLM counts per pod).
    prefilled = _value(prometheus, _over_run(q.rate_sum(m.PROMPT_TOKENS, t, "prefill"), flow, start, at), at)
    received = _value(prometheus, _over_run(q.kv_tokens_received(t), flow, start, at), at)
    summed = _value(prometheus, _over_run(q.rate_sum(m.LMCACHE_HIT_TOKENS, t, "decode"), flow, start, at), at)
    assert prefilled > 0
    assert received == pytest.approx(prefilled, rel=1e-6)
    assert summed == pytest.approx(8 * prefilled, rel=1e-6), "the plain sum is TP times too high"


def test_error_ratio_counts_each_request_once(prometheus, flows, default_config: Config):
    """A disaggregated request is two invocations at the sidecars; the user sees one request fail or succeed.
    A failed prefill leg never reaches decode (the router ends the request)."""
    flow = flows["errors"]
    long_, short = FLOW_THRESHOLD + 20, FLOW_THRESHOLD // 2
    jobs = ([(long_, "")] * 12 + [(long_, "FAIL-PREFILL")] * 2 + [(long_, "FAIL-DECODE")] * 2
            + [(short, "")] * 7 + [(short, "FAIL-DECODE")])
    results, start, end = _drive(flow, jobs)
    client = sum(not r.ok for r in results) / len(results)
    assert client == pytest.approx(5 / 24)
    at = _scraped_after(prometheus, "flow", end)
    overview = dpd_overview(default_config.spec())
    (panel,) = [p for p in overview.panels if p.title == "Error ratio"]
    ratio = _value(prometheus, _over_run(panel.queries[0].expr, flow, start, at), at)
    assert ratio == pytest.approx(client, rel=1e-3)

    t = q.Target(namespace="$namespace", endpoint="$endpoint", kind="dpd")
    per_leg = (f"{q.rate_sum(m.MODEL_ERRORS, t, 'any')} / {q.rate_sum(m.MODEL_INVOCATIONS, t, 'any')}")
    old = _value(prometheus, _over_run(per_leg, flow, start, at), at)
    assert old == pytest.approx(5 / 38, rel=1e-3), "per invocation: each disaggregated request counted twice"
