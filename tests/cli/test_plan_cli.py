"""``hyperpod-dpd plan``: the --json contract, --write, the Python entry point, and bad input as one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_analysis.plan import estimate_scenarios
from hyperpod_analysis.plan.write import merge_recommendation, role_groups_to_size
from hyperpod_core.config import load_config
from hyperpod_core.dist_layout import DistLayout
from hyperpod_core.errors import ConfigError
from hyperpod_core.instances import RESERVED_ONLY_INSTANCE_TYPES
from hyperpod_dpd.app import main

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT = REPO_ROOT / "config" / "default.yaml"
PHASE_KEYS = {"ttft_ms", "tpot_ms", "e2e_p50_ms", "output_tokens_per_s"}


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(["plan", *args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def default_json() -> dict[str, Any]:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()), pytest.raises(SystemExit) as exit:
        main(["plan", "--config", str(DEFAULT), "--concurrency", "8,32", "--json"])
    assert exit.value.code == 0
    parsed: dict[str, Any] = json.loads(buf.getvalue())
    return parsed


def test_json_is_exactly_the_issue_structure(default_json: dict[str, Any]) -> None:
    """Issue 15: {"scenarios": [{"traffic", "concurrency", "colocated": {...}, "dpd": {...}, "improvement_pct":
    {"tpot", "e2e_p50", "output_throughput"}}], "recommendation": {...}}; issue 34 adds the endpoint sized and the
    fleet's GPUs at peak per instance group."""
    assert set(default_json) == {"schema_version", "endpoint", "scenarios", "recommendation",  # schema: issue 24
                                 "fleet"}
    assert default_json["endpoint"] == "llama-3-3-70b"
    # The default config: each role pinned by its pool to its own group of 8 GPUs, both full at peak (1 replica of
    # 8 GPUs each: config/default.yaml), 16 GPUs in all.
    assert default_json["fleet"] == [
        {"groups": ["prefill"], "gpus": 8, "peak_gpus": 8, "free_gpus": 0,
         "roles": [{"endpoint": "llama-3-3-70b", "role": "prefill", "peak_gpus": 8}]},
        {"groups": ["decode"], "gpus": 8, "peak_gpus": 8, "free_gpus": 0,
         "roles": [{"endpoint": "llama-3-3-70b", "role": "decode", "peak_gpus": 8}]},
        {"groups": ["prefill", "decode"], "gpus": 16, "peak_gpus": 16, "free_gpus": 0,
         "roles": [{"endpoint": "llama-3-3-70b", "role": "prefill", "peak_gpus": 8},
                   {"endpoint": "llama-3-3-70b", "role": "decode", "peak_gpus": 8}]}]
    assert [(s["traffic"], s["concurrency"]) for s in default_json["scenarios"]] == [("D(4096,256)", 8),
                                                                                    ("D(4096,256)", 32)]
    for s in default_json["scenarios"]:
        assert set(s) == {"traffic", "concurrency", "colocated", "dpd", "improvement_pct"}
        assert set(s["colocated"]) == set(s["dpd"]) == PHASE_KEYS
        assert set(s["improvement_pct"]) == {"tpot", "e2e_p50", "output_throughput"}


def test_improvement_is_positive_when_dpd_is_better(default_json: dict[str, Any]) -> None:
    for s in default_json["scenarios"]:
        c, d, imp = s["colocated"], s["dpd"], s["improvement_pct"]
        assert (imp["tpot"] > 0) == (d["tpot_ms"] < c["tpot_ms"])
        assert (imp["output_throughput"] > 0) == (d["output_tokens_per_s"] > c["output_tokens_per_s"])
        assert imp["e2e_p50"] == pytest.approx(100 * (c["e2e_p50_ms"] - d["e2e_p50_ms"]) / c["e2e_p50_ms"], abs=0.1)


def test_recommendation_names_split_replicas_threshold_buffer_and_batch(default_json: dict[str, Any]) -> None:
    rec = default_json["recommendation"]
    for key in ("split", "prefill_replicas", "decode_replicas", "routing_threshold_tokens", "routing_strategy",
                "pd_buffer_size_bytes", "max_num_seqs", "cost_per_1m_output_tokens_usd", "price_source"):
        assert key in rec
    assert set(rec["max_num_seqs"]) == {"prefill", "decode"}


def test_table_output_prints_bands_cold_start_and_the_recommended_row(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "--config", str(DEFAULT), "--concurrency", "8")
    assert code == 0
    assert "equal GPUs" in out and "USD/1M" in out and "price 63.296 USD per instance-hour" in out
    assert "validation (plan --calibration" in out and "+-9 pts" in out
    assert "cold start per scale-out event" in out and "s3 5.0-10.0 min" in out
    assert "(recommended)" in out and "recommendation (* row)" in out
    assert "warning: the config holds 2 ml.p5.48xlarge node(s); the colocated recommendation uses 1" in err


def test_a_recommended_layout_outside_the_fixed_rows_is_simulated_and_printed(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 23: a recommendation of several prefill nodes had no row; now it is one, marked with *."""
    code, out, err = _run(capsys, "--config", str(DEFAULT), "--concurrency", "32", "--tpot-p95", "0.018",
                          "--ttft-p95", "1.0", "--json")
    assert code == 0, err
    rec = json.loads(out)["recommendation"]
    assert rec["split"] and rec["prefill_replicas"] >= 2, rec
    code, text, _ = _run(capsys, "--config", str(DEFAULT), "--concurrency", "32", "--tpot-p95", "0.018",
                         "--ttft-p95", "1.0")
    assert f"* DPD {rec['prefill_replicas']} prefill + {rec['decode_replicas']} decode" in text


def test_estimate_scenarios_is_the_json_scenarios(default_json: dict[str, Any]) -> None:
    """The benchmark report imports this function to show estimates beside measurements."""
    got = estimate_scenarios(load_config(DEFAULT).spec(), ["D(4096,256)"], [8, 32])
    assert got == default_json["scenarios"]
    assert estimate_scenarios(DEFAULT, ["D(4096,256)"], [8]) == got[:1]  # a path works too


def test_write_merges_a_split_recommendation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.yaml"
    shutil.copy(DEFAULT, cfg)
    before = yaml.safe_load(cfg.read_text())
    # TTFT 2 s given explicitly: the scenario (a split wins) was written against it; the config's default is 2.5 s.
    code, out, err = _run(capsys, "--config", str(cfg), "--concurrency", "32", "--tpot-p95", "0.018",
                          "--ttft-p95", "2", "--json", "--write")
    assert code == 0, err
    rec = json.loads(out)["recommendation"]
    assert rec["split"] is True
    after = yaml.safe_load(cfg.read_text())
    assert after["endpoint"]["prefill"]["replicas"] == rec["prefill_replicas"]
    assert after["endpoint"]["decode"]["max_num_seqs"] == rec["max_num_seqs"]["decode"]
    assert after["endpoint"]["pd_buffer_size_bytes"] == rec["pd_buffer_size_bytes"]
    if rec["prefill_replicas"] > 1:  # operator.md: roundrobin when there are several prefillers
        assert after["endpoint"]["routing_strategy"] == rec["routing_strategy"] == "roundrobin"
    prefill_group = next(g for g in after["hyperpod"]["instance_groups"] if g["pool"] == "prefill")
    assert prefill_group["instance_count"] == rec["prefill_nodes"]
    assert after["network"] == before["network"] and after["eks"] == before["eks"]  # the rest is kept
    load_config(cfg)  # still a valid config
    text = cfg.read_text()
    assert "# Reference deployment: the AWS DPD walkthrough" in text  # comments survive
    assert "pd_buffer_size_bytes: 8589934592   # 8 GiB per rank (AWS default)" in text  # unchanged value untouched
    changed = [a for a, b in zip(DEFAULT.read_text().splitlines(), text.splitlines(), strict=True) if a != b]
    assert changed and all(("replicas" in line or "instance_count" in line or "routing_strategy" in line
                            or "max_num_seqs" in line) for line in changed)


def test_write_reserializes_when_a_key_is_missing(tmp_path: Path) -> None:
    data = yaml.safe_load(DEFAULT.read_text())
    del data["endpoint"]["routing_threshold_tokens"]
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(data))
    rec = {"prefill_replicas": 1, "decode_replicas": 1, "prefill_nodes": 1, "decode_nodes": 1,
           "max_num_seqs": {"prefill": 16, "decode": 64}, "routing_threshold_tokens": 2048,
           "pd_buffer_size_bytes": 8 << 30}
    changes = merge_recommendation(cfg, rec, groups=role_groups_to_size(load_config(cfg).spec()))
    assert changes == ["endpoint.decode.max_num_seqs: 32 -> 64", "endpoint.routing_threshold_tokens: None -> 2048"]
    merged = load_config(cfg)
    assert (merged.spec().endpoint.decode.max_num_seqs, merged.spec().endpoint.routing_threshold_tokens) == (64, 2048)


def test_write_does_not_touch_the_file_when_colocated_wins(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.yaml"
    shutil.copy(DEFAULT, cfg)
    code, _, err = _run(capsys, "--config", str(cfg), "--concurrency", "8", "--write")
    assert code == 0
    # REV34 defect 11: the folder is the endpoint's (hyperpod_core.dist_layout), not "the endpoint folder of dist/".
    folder = DistLayout.of(tmp_path / "c.out" / "dist", "llama-3-3-70b", "colocated").endpoint_dir
    assert err.splitlines()[0] == ("not written: the recommendation is colocated; set endpoint.apply: colocated "
                                   f"({folder}/ then holds the colocated manifest) instead of the DPD one")
    assert cfg.read_bytes() == DEFAULT.read_bytes()


def test_write_validates_before_writing(tmp_path: Path) -> None:
    """Operator v3.2 runs one decoder: a merge that breaks a config rule fails and leaves the file as it was."""
    cfg = tmp_path / "c.yaml"
    shutil.copy(DEFAULT, cfg)
    rec = {"prefill_replicas": 1, "decode_replicas": 2, "prefill_nodes": 1, "decode_nodes": 2,
           "max_num_seqs": {"prefill": 16, "decode": 32}, "routing_threshold_tokens": 4096,
           "pd_buffer_size_bytes": 8 << 30}
    with pytest.raises(ConfigError, match=r"^endpoint.decode.replicas must be <= 1"):
        merge_recommendation(cfg, rec, groups=role_groups_to_size(load_config(cfg).spec()))
    assert cfg.read_bytes() == DEFAULT.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


@pytest.mark.parametrize(("args", "code", "message"), [
    (("--model", "gpt-9"), 2, "error: --model must be one of "),
    (("--traffic", "D(4096)"), 2, "error: --traffic must be D(in,out), "),
    (("--concurrency", "0,8"), 2, "error: --concurrency must be comma-separated integers from 1 to 1024"),
    (("--concurrency", "8", "--request-rate", "2"), 2, "error: pass either --concurrency or --request-rate"),
    (("--prefix-reuse", "1.5"), 2, "error: --prefix-reuse must be in [0, 1), got 1.5"),
    (("--price", "ml.p5.48xlarge=-3"), 2, "error: --price ml.p5.48xlarge must be a positive USD amount"),
    (("--traffic", "D(16000,1024)"), 2, "error: --traffic D(16000,1024) needs prompt + output up to 17024 tokens"),
    (("--engine", "vidur"), 2, "error: --engine must be roofline or aiconfigurator, got 'vidur'"),
    (("--prices", "/nonexistent/prices.yaml"), 2, "error: --prices '/nonexistent/prices.yaml' must be a readable"),
    (("--request-rate", "50"), 1, "error: no layout meets the SLO (TTFT p95 <= 2.5 s, TPOT p95 <= 0.1 s) for "
     "D(4096,256) at 50 requests/s"),
    (("--tpot-p95", "0.005", "--concurrency", "32"), 1,
     "error: no layout meets the SLO (TTFT p95 <= 2.5 s, TPOT p95 <= 0.005 s) for D(4096,256) at concurrency 32"),
])
def test_bad_input_is_one_line_with_its_exit_code(capsys: pytest.CaptureFixture[str], args: tuple[str, ...],
                                                  code: int, message: str) -> None:
    got, out, err = _run(capsys, "--config", str(DEFAULT), *args)
    assert got == code
    assert err.startswith(message), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert out == ""


def test_tp_that_does_not_divide_the_node_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load(DEFAULT.read_text())
    data["endpoint"]["tensor_parallel_size"] = 3
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(data))
    code, _, err = _run(capsys, "--config", str(cfg))
    assert code == 2
    assert err.startswith("error: endpoint.tensor_parallel_size must divide the 8 GPUs")


@pytest.mark.parametrize("instance_type", ["ml.p5e.48xlarge", "ml.p5en.48xlarge", "ml.p6-b200.48xlarge",
                                           "ml.p6-b300.48xlarge"])
def test_every_instance_type_runs_without_a_price(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  instance_type: str) -> None:
    """Issue 23: latency and throughput always; cost columns only with a price, and a one-line note otherwise."""
    data = yaml.safe_load(DEFAULT.read_text())
    for i, g in enumerate(data["hyperpod"]["instance_groups"]):
        g["instance_type"] = instance_type
        if instance_type in RESERVED_ONLY_INSTANCE_TYPES:  # the config requires a training plan for it
            g["training_plan_arn"] = f"arn:aws:sagemaker:us-west-2:123456789012:training-plan/p5e-{i}"
    data["endpoint"]["instance_type"] = instance_type
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(data))
    code, out, err = _run(capsys, "--config", str(cfg), "--concurrency", "8")
    assert code == 0, err
    assert "USD/1M" not in out and "node-h/1M out" in out
    assert f"no price for {instance_type} (none pinned from a public price page)" in out
    if instance_type != "ml.p5en.48xlarge":
        return
    code, out, err = _run(capsys, "--config", str(cfg), "--price", f"{instance_type}=80", "--concurrency", "8",
                          "--json")
    assert code == 0, err
    rec = json.loads(out)["recommendation"]
    assert rec["price_usd_per_instance_hour"] == 80.0
    hours = rec["instance_hours_per_1m_output_tokens"]
    assert rec["cost_per_1m_output_tokens_usd"]["colocated"] == pytest.approx(80 * hours["colocated"], abs=0.01)


def test_request_rate_replaces_concurrency_in_the_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "--config", str(DEFAULT), "--request-rate", "1.5", "--json")
    assert code == 0, err
    (scenario,) = json.loads(out)["scenarios"]
    assert set(scenario) == {"traffic", "request_rate", "colocated", "dpd", "improvement_pct"}
    assert scenario["request_rate"] == 1.5


def test_an_unknown_config_model_asks_for_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load(DEFAULT.read_text())
    data["model"] = {"name": "my-finetune", "s3_prefix": "models/my-finetune/"}
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(data))
    code, _, err = _run(capsys, "--config", str(cfg))
    assert code == 2
    assert err.startswith("error: --model is needed: model.name 'my-finetune' (s3 folder 'my-finetune')")


# --- a fleet: each endpoint sized, and the fleet's GPUs per instance group (issue 34 item 3) -------------------------

TWO_MODELS = REPO_ROOT / "config" / "examples" / "two-models.yaml"


def test_plan_sizes_the_named_endpoint_and_shows_the_fleet(capsys: pytest.CaptureFixture[str]) -> None:
    """two-models.yaml: the 70B's roles pinned to groups prefill and decode, the 8B's both to group small, one
    ml.p5.48xlarge each (8 GPUs: AWS's P5 instance type page lists 8 H100 per p5.48xlarge). At peak (no autoscaling:
    the configured replicas) the 70B holds 8 + 8 GPUs and the 8B 1 + 1 (gpus: 1 per role). Fails before:
    Config.endpoint raised TypeError."""
    code, out, err = _run(capsys, "--config", str(TWO_MODELS), "--endpoint", "llama-3-1-8b", "--concurrency", "8",
                          "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["endpoint"] == "llama-3-1-8b"
    assert report["recommendation"]["instance_type"] == "ml.p5.48xlarge"
    big, small = "llama-3-3-70b", "llama-3-1-8b"
    assert [(r["groups"], r["gpus"], r["peak_gpus"], r["free_gpus"]) for r in report["fleet"]] == [
        (["prefill"], 8, 8, 0), (["decode"], 8, 8, 0), (["small"], 8, 2, 6),
        (["prefill", "decode", "small"], 24, 18, 6)]
    assert report["fleet"][2]["roles"] == [{"endpoint": small, "role": "prefill", "peak_gpus": 1},
                                           {"endpoint": small, "role": "decode", "peak_gpus": 1}]
    assert [(r["endpoint"], r["role"]) for r in report["fleet"][3]["roles"]] == [
        (big, "prefill"), (big, "decode"), (small, "prefill"), (small, "decode")]
    table = _run(capsys, "--config", str(TWO_MODELS), "--endpoint", "llama-3-1-8b", "--concurrency", "8")[1]
    assert "fleet: GPUs the endpoints' roles may hold at peak" in table
    assert "llama-3-1-8b prefill 1, llama-3-1-8b decode 1" in table


def test_two_roles_on_one_group_share_its_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    """REV34 defect 8: the 8B's prefill and decode both name group ``small`` (one ml.p5.48xlarge, 8 GPUs: AWS's P5
    instance type page), so its configured 1P+1D of TP 1 packs onto ONE node (2 GPUs of 8); the 70B's roles name two
    groups and take one node each (TP 8 fills a node). Fails before: Layout.nodes always added each role's nodes (2
    nodes, 16 GPUs for the 8B)."""
    from hyperpod_analysis.plan import planner

    config = load_config(TWO_MODELS)
    small, big = (planner.inputs_of(config.spec(n)) for n in ("llama-3-1-8b", "llama-3-3-70b"))
    assert planner.Layout(prefill_replicas=1, decode_replicas=1).nodes(small) == 1
    assert planner.Layout(prefill_replicas=8, decode_replicas=1).nodes(small) == 2  # 9 engines of 1 GPU
    assert planner.Layout(prefill_replicas=1, decode_replicas=1).nodes(big) == 2
    out = _run(capsys, "--config", str(TWO_MODELS), "--endpoint", "llama-3-1-8b", "--concurrency", "8")[1]
    for layout in ("DPD 1P+1D (config)", "(equal GPUs)"):  # the colocated row on DPD's nodes: 1 too
        row = next(line for line in out.splitlines() if layout in line)
        assert row.split("│")[2].strip() == "1", row


def test_a_split_on_one_shared_group_counts_its_nodes_once() -> None:
    """REV34 defect 8: the idle-node warning of a split whose roles share group ``small`` (3 nodes here) counts the
    recommendation's nodes once (``nodes``: the roles packed), not prefill's plus decode's. Fails before: "needs 2
    of them: 1 idle" for a layout that takes 1 node."""
    from hyperpod_analysis.plan.write import unused_nodes

    data = yaml.safe_load(TWO_MODELS.read_text(encoding="utf-8"))
    data["hyperpod"]["instance_groups"][2]["instance_count"] = 3
    from hyperpod_core.config import parse_config

    small = parse_config(data).spec("llama-3-1-8b")
    rec = {"instance_type": "ml.p5.48xlarge", "split": True, "prefill_nodes": 1, "decode_nodes": 1, "nodes": 1}
    assert unused_nodes(small, rec, others={"prefill", "decode"}) == [
        "shared instance groups hold 3 node(s); the recommendation needs 1 of them: 2 idle"]


def test_plan_of_a_fleet_sizes_each_endpoint_and_the_fleet(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 34 item 4 ("plan sizes each endpoint and the fleet"), REV34 defect 8: without --endpoint on a config of
    several endpoints, plan prints one summary per endpoint and the fleet table (--json: ``endpoints`` with each
    one's scenarios and recommendation, and ``fleet``). Fails before: exit 2, "--endpoint must name the endpoint"."""
    code, out, err = _run(capsys, "--config", str(TWO_MODELS), "--concurrency", "8", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert set(report) == {"schema_version", "endpoints", "fleet"}
    assert [e["endpoint"] for e in report["endpoints"]] == ["llama-3-3-70b", "llama-3-1-8b"]
    for e in report["endpoints"]:
        assert set(e) == {"endpoint", "scenarios", "recommendation"}
        assert [(s["traffic"], s["concurrency"]) for s in e["scenarios"]] == [("D(4096,256)", 8)]
    assert [r["groups"] for r in report["fleet"]] == [["prefill"], ["decode"], ["small"],
                                                     ["prefill", "decode", "small"]]
    code, out, err = _run(capsys, "--config", str(TWO_MODELS), "--concurrency", "8")
    assert code == 0, err
    summaries = [line for line in out.splitlines() if line.startswith("llama-3-")]
    assert [line.split(":")[0] for line in summaries] == ["llama-3-3-70b", "llama-3-1-8b"]
    assert "configured DPD 1P+1D on 2 node(s)" in summaries[0]
    assert "configured DPD 1P+1D on 1 node(s)" in summaries[1]
    assert all("recommendation: " in line for line in summaries)
    assert "fleet: GPUs the endpoints' roles may hold at peak" in out
    assert "hyperpod-dpd plan --endpoint NAME" in out


@pytest.mark.parametrize("flag", [("--write",), ("--model", "llama-3-1-8b-instruct")])
def test_plan_of_a_fleet_needs_the_endpoint_named_to_write_or_swap_the_model(
        capsys: pytest.CaptureFixture[str], flag: tuple[str, ...]) -> None:
    code, out, err = _run(capsys, "--config", str(TWO_MODELS), *flag)
    assert (code, out) == (2, "")
    assert err == (f"error: --endpoint must name the endpoint hyperpod-dpd plan {flag[0]} acts on: {TWO_MODELS} "
                   "serves 2 endpoints (llama-3-3-70b, llama-3-1-8b)\n")


def test_write_into_a_fleet_sets_that_endpoints_keys_only(tmp_path: Path) -> None:
    """--write merges into ``endpoints[1]`` (the 8B), never the 70B; the 8B's group ``small`` holds both its roles,
    so no role owns it and its node count stays (a role's own group would take the role's node count)."""
    cfg = tmp_path / "c.yaml"
    shutil.copy(TWO_MODELS, cfg)
    config = load_config(cfg)
    small, big = config.spec("llama-3-1-8b"), config.spec("llama-3-3-70b")
    others = {g.name for role in ("prefill", "decode") for g in big.role_groups(role)}
    assert role_groups_to_size(small, others) == {}
    assert role_groups_to_size(big, {"small"}) == {"prefill": 0, "decode": 1}
    rec = {"prefill_replicas": 2, "decode_replicas": 1, "prefill_nodes": 1, "decode_nodes": 1,
           "max_num_seqs": {"prefill": 16, "decode": 64}, "routing_threshold_tokens": 2048,
           "pd_buffer_size_bytes": 8 << 30}
    changes = merge_recommendation(cfg, rec, at=small.at, groups=role_groups_to_size(small, others))
    assert changes == ["endpoints[1].prefill.replicas: None -> 2", "endpoints[1].prefill.max_num_seqs: None -> 16",
                       "endpoints[1].decode.replicas: None -> 1", "endpoints[1].decode.max_num_seqs: None -> 64",
                       "endpoints[1].routing_threshold_tokens: None -> 2048",
                       "endpoints[1].pd_buffer_size_bytes: None -> 8589934592"]
    merged = load_config(cfg)
    assert merged.spec("llama-3-1-8b").endpoint.prefill.replicas == 2
    assert merged.spec("llama-3-3-70b").endpoint == big.endpoint
    assert merged.hyperpod == config.hyperpod


def test_the_readme_says_why_the_default_is_dpd_when_plan_says_do_not_split(
        default_json: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """Newcomer friction 14: ``plan`` on the default config recommends one colocated node and warns of an idle node
    (test_table_output_prints_bands_cold_start_and_the_recommended_row), and the README said nothing about why the
    default deploys DPD. Its paragraph's claims, checked here: the default SLO gives "do not split" at the default
    load (the recommendation is judged at the highest concurrency, 32 in both); ``--tpot-p95 0.02`` gives the split
    of the default layout. Fails on main: the README has no such paragraph."""
    readme = " ".join((REPO_ROOT / "README.md").read_text(encoding="utf-8").split())
    assert 'Why the default config is DPD when `plan` says "do not split".' in readme
    assert default_json["recommendation"]["split"] is False
    claim = "hyperpod-dpd plan -c config/default.yaml --tpot-p95 0.02"
    assert f"`{claim}` recommends the split" in readme
    code, out, _ = _run(capsys, "--config", str(DEFAULT), *claim.split()[4:], "--json")
    rec = json.loads(out)["recommendation"]
    assert code == 0 and rec["split"] and (rec["prefill_replicas"], rec["decode_replicas"]) == (1, 1)
    assert set(rec["instance_hours_per_1m_output_tokens"]) == {"colocated", "dpd"}


def test_a_shared_group_beside_the_pools_leaves_every_role_without_a_group_of_its_own(tmp_path: Path) -> None:
    """Review finding: one more ``shared`` p5 group beside config/default.yaml's pools takes both roles' selectors
    away (:meth:`EndpointSpec.role_groups`: either role may land on prefill, decode or spare), so neither role owns
    a group and the roles share nodes. Fails before: ``role_groups_to_size`` gave {prefill: 0, decode: 1} (``plan
    --write`` set each group's count as if one role owned it) and ``roles_share_nodes`` was False."""
    from hyperpod_analysis.plan import planner
    from hyperpod_core.config import parse_config

    data = yaml.safe_load(DEFAULT.read_text(encoding="utf-8"))
    data["hyperpod"]["instance_groups"].append({**data["hyperpod"]["instance_groups"][1], "name": "spare",
                                                "pool": "shared"})
    spec = parse_config(data).spec()
    assert [[g.name for g in spec.role_groups(r)] for r in ("prefill", "decode")] == [["prefill", "decode",
                                                                                        "spare"]] * 2
    assert (spec.node_selector("prefill"), spec.node_selector("decode")) == ({}, {})
    assert role_groups_to_size(spec) == {}
    assert planner.inputs_of(spec).roles_share_nodes is True
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    rec = {"prefill_replicas": 1, "decode_replicas": 1, "prefill_nodes": 2, "decode_nodes": 1,
           "max_num_seqs": {"prefill": 16, "decode": 32}, "routing_threshold_tokens": 4096,
           "pd_buffer_size_bytes": 8 << 30}
    assert merge_recommendation(cfg, rec, groups=role_groups_to_size(spec)) == []
    assert yaml.safe_load(cfg.read_text())["hyperpod"] == data["hyperpod"]


def test_roles_own_a_group_only_when_the_other_role_may_not_land_on_it() -> None:
    """The default config: each role's pool label pins it to its own group, so each role owns it and the roles take
    whole nodes of their own."""
    from hyperpod_analysis.plan import planner
    spec = load_config(DEFAULT).spec()
    assert role_groups_to_size(spec) == {"prefill": 0, "decode": 1}
    assert role_groups_to_size(spec, {"decode"}) == {"prefill": 0}
    assert planner.inputs_of(spec).roles_share_nodes is False
