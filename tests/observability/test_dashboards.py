"""Dashboards: SDK-valid JSON, the required panels and variables, deterministic delivery."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import Dashboard

from hyperpod_core.config import Config, parse_config
from hyperpod_core.telemetry.dashboards import dashboards, dpd_overview, dpd_vs_colocated
from hyperpod_core.telemetry.panels import PER_LEG, USER_TTFT_TITLE
from hyperpod_core.telemetry.render import render
from hyperpod_k8s.observability.delivery import write_dashboard_files
from hyperpod_k8s.observability.props import dashboard_files

OVERVIEW_PANELS = {
    "Request rate", "Tokens per second", "Time to first token as users see it (lower bound)",
    "Time to first token (decode leg)",
    "Prefill time", "Time per output token / inter-token latency", "End-to-end latency (decode leg)", "Prefill queue",
    "Decode running sequences", "Decode KV-cache usage", "Decode preemptions", "KV retrieve time on decode",
    "KV transfer throughput", "KV hit ratio", "Error ratio", "Aborted or failed requests",
    "Pod restarts (1h)", "GPU utilisation per role", "GPU memory used per role", "USD per 1M tokens",
    "Idle GPU share",
}


def test_dashboards_load_with_the_sdk_model(default_config: Config) -> None:
    for text in dashboard_files(default_config.spec()).values():
        raw = json.loads(text)
        model = Dashboard.from_json(raw)
        assert json.loads(json.dumps(model, cls=JSONEncoder)) == raw, "SDK round trip changed the JSON"
        ids = [p["id"] for p in raw["panels"]]
        assert len(ids) == len(set(ids))
        for panel in raw["panels"]:
            assert panel["type"] in ("row", "timeseries", "stat")
            assert panel["gridPos"]["w"] > 0


def test_overview_shows_every_dpd_signal(default_config: Config) -> None:
    titles = {p.title for p in dpd_overview(default_config.spec()).panels}
    assert titles >= OVERVIEW_PANELS
    split = next(p for p in dpd_overview(default_config.spec()).panels if p.title == "Request rate")
    assert [q.legend for q in split.queries] == ["total", "disaggregated (prefill + decode)",
                                                 "direct (decode only)"]


def _same_signal(title: str) -> str:
    """A panel title without its side and without DPD's leg qualifiers: a DPD request's decode leg is the whole
    request on the colocated side (the router finishes prefill before it opens the decode request), and DPD's
    run-summary TTFT p95 is shown per leg."""
    for prefix in ("DPD: ", "Colocated: ", "Decode-leg "):
        title = title.removeprefix(prefix)
    return title.replace(" (decode leg)", "").replace(PER_LEG, "")


def test_comparison_puts_the_same_panels_side_by_side(default_config: Config) -> None:
    spec = dpd_vs_colocated(default_config.spec())
    for row in spec.rows:
        left, right = row.columns
        assert [_same_signal(p.title) for p in left] == [_same_signal(p.title) for p in right]
    raw = render(spec)
    lines: dict[int, list[str]] = {}
    for panel in raw["panels"]:
        if panel["type"] != "row":
            lines.setdefault(panel["gridPos"]["y"], []).append(panel["title"].split(":")[0])
    assert all(sides == ["DPD", "Colocated"] for sides in lines.values()), lines
    colocated_exprs = [q.expr for row in spec.rows for p in row.columns[1] for q in p.queries]
    assert all("$baseline" in e and "$endpoint" not in e for e in colocated_exprs)


def test_run_summary_colours_only_a_ttft_p95_users_feel(default_config: Config) -> None:
    """The DPD decode pods' TTFT leaves out the prefill leg (the router finishes it before it opens the decode
    request: production-stack route_disaggregated_prefill_request), so DPD's p95 stat shows both legs and is not
    coloured against the users' SLO; the colocated engine's TTFT is the users' and is."""
    raw = render(dpd_vs_colocated(default_config.spec()))
    stats = {p["title"]: p for p in raw["panels"] if p["type"] == "stat" and "TTFT p95" in p["title"]}
    dpd = stats[f"DPD: TTFT p95 over the run{PER_LEG}"]
    colocated = stats["Colocated: TTFT p95 over the run"]
    assert "thresholds" not in dpd["fieldConfig"]["defaults"]
    assert [t["legendFormat"] for t in dpd["targets"]] == ["prefill leg p95", "decode-leg TTFT p95"]
    prefill_leg, decode_leg = (t["expr"] for t in dpd["targets"])
    assert "e2e_request_latency_seconds_bucket" in prefill_leg and 'pod_name=~"prefill-$endpoint-' in prefill_leg
    assert "time_to_first_token_seconds_bucket" in decode_leg and 'pod_name=~"decode-$endpoint-' in decode_leg
    assert _thresholds(colocated) == [default_config.observability.slo.ttft_p95_seconds]


def _p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile (the smallest value with at least 95 % of the observations at or below)."""
    ordered = sorted(values)
    return ordered[-(-95 * len(ordered) // 100) - 1]


def test_user_ttft_panel_claims_only_the_lower_bound(default_config: Config) -> None:
    """Quantiles are not subadditive: X = 10 on 5 % of requests else 1, Y = 10 on another 5 % else 1 gives
    p95(X) = p95(Y) = 1 and p95(X + Y) = 11, above their sum 2. The lower bound holds for non-negative legs
    (X + Y >= X pointwise)."""
    x = [10.0 if i < 5 else 1.0 for i in range(100)]
    y = [10.0 if 5 <= i < 10 else 1.0 for i in range(100)]
    both = [a + b for a, b in zip(x, y, strict=True)]
    assert (_p95(x), _p95(y), _p95(both)) == (1.0, 1.0, 11.0)
    assert _p95(both) >= max(_p95(x), _p95(y))
    (panel,) = [p for p in dpd_overview(default_config.spec()).panels if p.title == USER_TTFT_TITLE]
    assert "at least the larger of the two p95s" in panel.description
    assert "their sum" not in panel.description and "between" not in panel.description


def test_the_users_ttft_is_called_a_lower_bound(default_config: Config) -> None:
    """vLLM measures TTFT and E2E from the engine's own arrival_time (vLLM docs/design/metrics.md, "Frontend Stats
    Collection"), so the sum of the legs leaves out the router, the proxies, the hops and the first chunk's way
    back (fourth review, observability finding 6): no panel may call it exact."""
    spec = default_config.spec()
    panels = [p for d in (dpd_overview(spec), dpd_vs_colocated(spec)) for p in d.panels if "as users see it" in p.title]
    assert len(panels) == 5  # the overview's, and each comparison side's panel and run-summary stat
    for panel in panels:
        assert panel.title.endswith("(lower bound)"), panel.title
        assert "A lower bound: vLLM measures each interval inside the engine" in panel.description
        assert "docs/design/metrics.md" in panel.description and "is exact" not in panel.description


def test_each_run_has_its_own_time_window(default_config: Config) -> None:
    """The runs are sequential (the colocated manifest replaces the DPD one), so each column is shifted by its
    own variable: Grafana's per-panel timeShift interpolates dashboard variables."""
    raw = render(dpd_vs_colocated(default_config.spec()))
    shifts: dict[str, set[str]] = {}
    for panel in raw["panels"]:
        if panel["type"] != "row":
            shifts.setdefault(panel["title"].split(":")[0], set()).add(panel.get("timeShift"))
    assert shifts == {"DPD": {"$dpd_shift"}, "Colocated": {"$baseline_shift"}}
    variables = {v["name"]: v for v in raw["templating"]["list"]}
    assert variables["dpd_shift"]["type"] == variables["baseline_shift"]["type"] == "textbox"
    assert variables["baseline_shift"]["current"]["value"] == "0h"
    # Run summaries cover exactly each run's (shifted) window.
    summary = [p for p in raw["panels"] if p["type"] == "stat"]
    # TTFT as users see it, TTFT p95, TPOT p95, output tokens/s, error ratio: per side
    assert len(summary) == 10 and all("$__range" in t["expr"] for p in summary for t in p["targets"])


def _thresholds(panel: dict) -> list[float]:
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    return [s["value"] for s in steps if s.get("value") is not None]


def test_slo_thresholds_from_config_are_drawn_on_the_latency_panels(default_config_dict: dict) -> None:
    data = json.loads(json.dumps(default_config_dict))
    # Bucket boundaries (the config refuses others): TTFT 5 s between 2.5 and 7.5, TPOT 75 ms between 50 and 100
    # (shared/metrics/vllm-0.19.0.json: vllm:time_to_first_token_seconds, vllm:request_time_per_output_token_seconds).
    data["observability"]["slo"].update(ttft_p95_seconds=5.0, tpot_p95_seconds=0.075)
    config = parse_config(data)
    for spec in dashboards(config.spec()):
        panels = {p["title"]: p for p in render(spec)["panels"] if p["type"] != "row"}
        ttft = [p for t, p in panels.items() if "Time to first token" in t]
        tpot = [p for t, p in panels.items() if t.endswith("Time per output token / inter-token latency")]
        assert ttft and tpot
        for panel in ttft:
            assert _thresholds(panel) == [5.0]
            assert panel["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"]["mode"] == "dashed"
        for panel in tpot:
            assert _thresholds(panel) == [0.075]


def test_every_slo_line_says_its_resolution(default_config: Config) -> None:
    """A p95 curve is interpolated inside the exporter's buckets; each latency panel with an SLO line says which
    buckets surround the line (TTFT 1 -> 2.5 -> 5 s, TPOT 0.075 -> 0.1 -> 0.15 s: vllm-0.19.0.json buckets)."""
    around = {default_config.observability.slo.ttft_p95_seconds: "1 -> 2.5 -> 5 s",
              default_config.observability.slo.tpot_p95_seconds: "0.075 -> 0.1 -> 0.15 s"}
    lines = 0
    for spec in dashboards(default_config.spec()):
        for panel in render(spec)["panels"]:
            defaults = panel.get("fieldConfig", {}).get("defaults", {})
            if defaults.get("unit") != "s" or "thresholds" not in defaults:
                continue
            (line,) = _thresholds(panel)
            assert "Resolution:" in panel["description"] and around[line] in panel["description"], panel["title"]
            lines += 1
    assert lines >= 6


def test_the_users_ttft_line_names_the_resolution_of_both_legs(default_config: Config) -> None:
    """DPD's users'-TTFT panel draws the prefill leg's p95 from vllm:e2e_request_latency_seconds and the decode TTFT's
    from vllm:time_to_first_token_seconds: its SLO line's resolution is each histogram's, the buckets on either side
    of the line taken from the contract (vllm-0.19.0.json; E2E's request_latency_buckets: ... 2.0, 2.5, 5.0 ...)."""
    from tests.observability import contract

    from hyperpod_core.telemetry import catalogue as m
    from hyperpod_core.telemetry.targets import collector_labels

    slo = default_config.observability.slo.ttft_p95_seconds
    buckets = {f.name: f.buckets for f in contract.families(collector_labels(default_config.observability))}
    (panel,) = [p for p in dpd_overview(default_config.spec()).panels if p.title == USER_TTFT_TITLE]
    assert [q.legend for q in panel.queries][1:] == ["prefill leg p95", "decode TTFT p95"]
    for metric in (m.TIME_TO_FIRST_TOKEN, m.E2E_LATENCY):
        bounds = buckets[metric.family]
        assert bounds is not None
        below, above = max(b for b in bounds if b < slo), min(b for b in bounds if b > slo)
        assert f"{metric.name}: {below:g} -> {slo:g} -> {above:g} s" in panel.description, metric.name


def test_template_variables_default_to_the_configured_endpoint(default_config: Config) -> None:
    for spec in dashboards(default_config.spec()):
        variables = {v["name"]: v for v in render(spec)["templating"]["list"]}
        assert variables["namespace"]["current"]["value"] == default_config.spec().endpoint.namespace
        assert variables["endpoint"]["current"]["value"] == default_config.spec().endpoint.name
        assert variables["datasource"]["type"] == "datasource"


def test_the_endpoint_variable_names_the_endpoint_of_every_revisions_decode_pods(default_config: Config) -> None:
    """Grafana applies the variable's regex to each decode pod's name and keeps the first group (Grafana docs, "Query
    variable", Regex): a blue/green revision's pods (``decode-<endpoint>-r<N>-<rs>-<pod>``, hyperpod-dpd rollout) list
    their endpoint, whose queries cover every revision, not a name of their own. Python's ``re`` reads these
    constructs (lazy group, non-capturing optional group, anchors) as JavaScript does."""
    import re

    (spec,) = dashboards(default_config.spec())[:1]
    variables = {v["name"]: v for v in render(spec)["templating"]["list"]}
    regex = re.compile(variables["endpoint"]["regex"].strip("/"))
    for pod in ("decode-llama-3-3-70b-5b8c9d7f6-klm2n", "decode-llama-3-3-70b-r1-5b8c9d7f6-klm2n",
                "decode-llama-3-3-70b-r12-6c7d8e9f5-ab2cd"):
        match = regex.fullmatch(pod)
        assert match is not None and match[1] == "llama-3-3-70b", pod


def test_baseline_defaults_to_the_name_the_colocated_manifest_keeps(default_config: Config) -> None:
    """The colocated manifest is the rollback and keeps the DPD endpoint's name (colocated_endpoint.py), so
    an endpoint "<name>-colocated" never exists."""
    import yaml

    manifest = Path(__file__).parents[1] / "k8s" / "snapshots" / "default" / \
        f"{default_config.spec().endpoint.name}-colocated.k8s.yaml"
    (colocated,) = list(yaml.safe_load_all(manifest.read_text()))
    comparison = {v["name"]: v for v in render(dpd_vs_colocated(default_config.spec()))["templating"]["list"]}
    assert comparison["baseline"]["current"]["value"] == colocated["metadata"]["name"]


def test_dashboard_files_are_byte_identical_across_runs(default_config: Config, tmp_path: Path) -> None:
    first = write_dashboard_files(default_config.specs(), tmp_path / "a")
    second = write_dashboard_files(default_config.specs(), tmp_path / "b")
    assert [p.name for p in first] == [p.name for p in second] == sorted(dashboard_files(default_config.spec()))
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]


def test_docs_list_every_panel_query_and_metric_source(default_config: Config) -> None:
    """docs/observability.md carries the generated reference (queries and sources) for the default config."""
    from hyperpod_core.telemetry.reference import markdown

    doc = (Path(__file__).parents[2] / "docs" / "observability.md").read_text()
    assert markdown(default_config.spec()) in doc, "regenerate: python -m hyperpod_core.telemetry.reference"


def test_the_reference_is_generated_from_the_configs_only_endpoint(default_config: Config, capsys) -> None:
    """``python -m hyperpod_core.telemetry.reference`` prints the block of the config's one endpoint; a config of
    several is refused naming them, never documented by whichever comes first (before: ``specs()[0]``)."""
    from hyperpod_core.errors import ConfigError
    from hyperpod_core.telemetry.reference import main, markdown

    root = Path(__file__).parents[2]
    main([str(root / "config" / "default.yaml")])
    assert capsys.readouterr().out == markdown(default_config.spec()) + "\n"
    with pytest.raises(ConfigError, match=r"^endpoint must be named: this config serves 2 endpoints \("):
        main([str(root / "config" / "examples" / "two-models.yaml")])
    assert capsys.readouterr().out == ""


def test_docs_show_the_autoscaling_triggers_the_endpoint_manifest_carries(default_config_dict: dict) -> None:
    """The doc's trigger rows are the queries of the synthesized DPD manifest's KEDA triggers (the default config with
    autoscaling on: same namespace and name), character for character: its own pods only, no revision group."""
    import cdk8s
    from tests.k8s.endpoint_props import props_of
    from tests.observability.conftest import autoscaling_config

    from hyperpod_core.telemetry.queries import REVISION
    from hyperpod_k8s.endpoint.endpoint_chart import EndpointChart
    from hyperpod_k8s.endpoint.props import EndpointChartProps

    config = autoscaling_config(default_config_dict)
    (manifest,) = EndpointChart(cdk8s.App(), "dpd", props=EndpointChartProps(
        mode="dpd", endpoint=props_of(config))).to_json()
    scaling = manifest["spec"]["pdSpec"]["autoScalingSpec"]
    carried = {"prefill": scaling["prefillAutoScaling"]["prometheusTrigger"]["query"],
               "decode": scaling["decodingAutoScaling"]["prometheusTrigger"]["query"]}
    doc = (Path(__file__).parents[2] / "docs" / "observability.md").read_text()
    section = doc.split("### Autoscaling triggers", 1)[1].split("###", 1)[0]
    rows = dict(re.findall(r"^\| (\w+) \| `(.+)` \|$", section, flags=re.MULTILINE))
    assert rows == carried
    assert all(REVISION not in query for query in rows.values())


# --- several deployments in one Grafana, several endpoints in one deployment (issue 34) ---------------------------

#: Grafana's longest uid (Grafana HTTP API reference, "Dashboard API": "The uid can have a maximum length of 40
#: characters"; the Amazon Managed Grafana user guide's "Dashboard API" says the same) and the characters it accepts
#: in one (grafana/grafana ``pkg/util/shortid_generator.go``: ``^[a-zA-Z0-9\-\_]*$``).
GRAFANA_UID_MAX = 40
GRAFANA_UID_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


def test_two_deployments_of_the_default_endpoint_never_share_a_dashboard_uid(default_config_dict: dict) -> None:
    """Both deployments keep the default endpoint name; their dashboards, pushed into one Grafana, must not overwrite
    each other (the fourth review's defect 8)."""
    data = json.loads(json.dumps(default_config_dict))
    data["name"] = "staging"
    ours, theirs = (parse_config(d).spec() for d in (default_config_dict, data))
    assert {d.uid for d in dashboards(ours)} == {"hyperpod-dpd_llama-3-3-70b_overview",
                                                  "hyperpod-dpd_llama-3-3-70b_vs-colocated"}
    assert not {d.uid for d in dashboards(ours)} & {d.uid for d in dashboards(theirs)}


def test_a_long_uid_is_shortened_with_a_hash_and_stays_unique() -> None:
    """A 40-character deployment name and a long endpoint name: every uid fits Grafana's 40 characters and two uids
    that share their first 31 characters still differ; deployment and endpoint are joined by '_', which neither name
    holds, so ``a-b`` + ``c`` and ``a`` + ``b-c`` differ too."""
    from hyperpod_core.telemetry.dashboards import dashboard_uid

    deployment = "d" * 38 + "-x"
    uids = {dashboard_uid(deployment, endpoint, kind) for endpoint in ("chat-large", "chat-small")
            for kind in ("overview", "vs-colocated")}
    assert len(uids) == 4
    for uid in uids:
        assert len(uid) == GRAFANA_UID_MAX and set(uid) <= GRAFANA_UID_CHARS and uid.startswith("d" * 31)
    assert dashboard_uid("a-b", "c", "overview") != dashboard_uid("a", "b-c", "overview")
    assert dashboard_uid("hyperpod-dpd", "llama-3-3-70b", "vs-colocated") == "hyperpod-dpd_llama-3-3-70b_vs-colocated"


def test_each_endpoint_has_its_dashboards_with_its_own_objectives() -> None:
    """config/examples/two-models.yaml: one overview and one comparison per endpoint, each defaulting its variables
    to its endpoint and drawing its own TTFT objective (the 8B's 1 s, the 70B's deployment-wide 2.5 s): Grafana's
    thresholds are constants of a panel, so one dashboard per endpoint is what draws each endpoint's line."""
    from hyperpod_core.config import load_config

    config = load_config(Path(__file__).parents[2] / "config" / "examples" / "two-models.yaml")
    seen = set()
    for spec in config.specs():
        for dashboard in dashboards(spec):
            raw = render(dashboard)
            assert raw["uid"] == f"two-models_{spec.name}_{dashboard.kind}" and raw["uid"] not in seen
            seen.add(raw["uid"])
            variables = {v["name"]: v["current"]["value"] for v in raw["templating"]["list"]}
            assert (variables["namespace"], variables["endpoint"]) == (spec.namespace, spec.name)
            ttft = [p for p in raw["panels"] if p["type"] != "row" and "Time to first token" in p["title"]]
            assert ttft and {v for p in ttft for v in _thresholds(p)} == {spec.slo.ttft_p95_seconds}
    assert {s.slo.ttft_p95_seconds for s in config.specs()} == {1.0, 2.5}


def test_the_dashboard_files_of_every_endpoint_go_to_one_folder(tmp_path: Path) -> None:
    from hyperpod_core.config import load_config

    config = load_config(Path(__file__).parents[2] / "config" / "examples" / "two-models.yaml")
    written = write_dashboard_files(config.specs(), tmp_path)
    assert [p.name for p in written] == sorted(f"{d.uid}.json" for s in config.specs() for d in dashboards(s))
    assert len(written) == 4 and {p.parent for p in written} == {tmp_path}
