"""``hyperpod-dpd logs ROLE`` and the log signatures (:mod:`hyperpod_dpd.dpd_logs`).

``fixtures/decode-lmcache-0.4.3.log`` holds decoder lines rendered with LMCache 0.4.3's own format strings
(``day2_fakes.lmcache_line``); ``fixtures/router.log`` the router lines of AWS's DPD guide (S2/S13 in
``shared/reference/operator.md``). Pod and container names: operator.md, section (e).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from day2_fakes import NAME, NAMESPACE, FakeCluster, dead_kubeconfig, one_line_error, pod

from hyperpod_dpd import dpd_logs

pytest_plugins = ("day2_fixtures",)

FIXTURES = Path(__file__).parent / "fixtures"
DECODE_LOG = (FIXTURES / "decode-lmcache-0.4.3.log").read_text().splitlines()
ROUTER_LOG = (FIXTURES / "router.log").read_text().splitlines()
DECODE_POD, DECODE_CONTAINER = f"decode-{NAME}-5c6b7-fghij", f"decode-{NAME}"
ROUTER_POD = f"{NAME}-{NAMESPACE}-router-6f7d8-klmno"


# --- signatures ------------------------------------------------------------------------------------------------


def test_transfers_are_parsed_from_lmcache_lines_with_colour_codes() -> None:
    found = dpd_logs.transfers(DECODE_LOG)
    assert [(t.retrieved_tokens, t.required_tokens, t.throughput_gbps) for t in found] == [
        (8192, 8192, 23.9), (0, 6144, 0.0), (6144, 6144, 0.62)]
    assert found[0].req_id == "chatcmpl-7f3c1a" and found[0].complete and not found[1].complete


@pytest.mark.parametrize(("index", "severity", "meaning"), [
    (1, "ok", "KV cache received from the prefiller at 23.9 GB/s"),
    (2, "error", "the KV cache was recomputed on the decoder, not transferred from the prefiller"),
    (3, "error", "KV moved below 1 GB/s: not over EFA RDMA (TCP fallback)"),
    (4, "error", "the decoder's KV receive buffer (PD_BUFFER_SIZE) is too small"),
], ids=["transferred", "recomputed", "tcp-fallback", "pd-buffer"])
def test_each_signature_has_its_meaning(index: int, severity: str, meaning: str) -> None:
    finding = dpd_logs.classify(DECODE_LOG[index], pd_buffer_size_bytes=8 << 30)
    assert finding is not None and finding.severity == severity and finding.meaning == meaning
    if severity == "error":
        assert finding.fix


def test_buffer_fix_names_the_config_field_and_current_size() -> None:
    finding = dpd_logs.classify(DECODE_LOG[4], pd_buffer_size_bytes=8 << 30)
    assert finding is not None
    assert finding.fix.startswith("raise endpoint.pd_buffer_size_bytes (now 8 GiB) to 16 or 32 GiB")


def test_plain_lines_carry_no_signature() -> None:
    assert dpd_logs.classify(DECODE_LOG[0]) is None


def test_router_decisions() -> None:
    assert [dpd_logs.routing_decision(line) for line in ROUTER_LOG] == [(38, 4096, False), (8204, 4096, True), None]


def test_kubernetes_timestamps_are_split_off() -> None:
    stamp, text = dpd_logs.split_timestamp("2026-12-01T00:00:01.250000123Z hello")
    assert stamp is not None and stamp.isoformat() == "2026-12-01T00:00:01.250000+00:00" and text == "hello"
    assert dpd_logs.split_timestamp("no stamp") == (None, "no stamp")


# --- the command ------------------------------------------------------------------------------------------------


@pytest.fixture
def deployed(cluster: FakeCluster) -> FakeCluster:
    cluster.dpd_endpoint()
    for line in DECODE_LOG:
        cluster.log(NAMESPACE, DECODE_POD, DECODE_CONTAINER, line)
    cluster.log(NAMESPACE, "decode-another-endpoint-1-y", "decode-another-endpoint", "NOT THIS ENDPOINT")
    for line in ROUTER_LOG:
        cluster.log("hyperpod-inference-system", ROUTER_POD, "router-container", line)
    cluster.log("hyperpod-inference-system", "hyperpod-inference-controller-manager-6d-abc", "manager",
                "reconciled InferenceEndpointConfig default/llama-3-3-70b")
    return cluster


def _logs(cli, config_file, kubeconfig, *args):  # type: ignore[no-untyped-def]
    return cli("logs", *args, "--config", str(config_file), "--kubeconfig", str(kubeconfig))


def test_decode_reads_the_decode_container_of_this_endpoint_with_signatures_marked(
        cli, config_file, kubeconfig, deployed) -> None:
    result = _logs(cli, config_file, kubeconfig, "decode")
    assert result.code == 0, result.err
    assert "NOT THIS ENDPOINT" not in result.out
    assert "\x1b[" not in result.out  # LMCache's colour codes are stripped, ours apply only on a terminal
    assert "Retrieved 0 out of 6144 required tokens" in result.out
    assert "<- the KV cache was recomputed on the decoder" in result.out
    assert "<- KV moved below 1 GB/s: not over EFA RDMA (TCP fallback)" in result.out
    assert "fix: raise endpoint.pd_buffer_size_bytes (now 8 GiB)" in result.out
    log_calls = [r for r in deployed.requests if r.endswith("/log") or "/log?" in r]
    assert log_calls == [f"/api/v1/namespaces/{NAMESPACE}/pods/{DECODE_POD}/log?container={DECODE_CONTAINER}"
                         "&tailLines=200&timestamps=False"]


def test_signatures_only_drops_plain_lines(cli, config_file, kubeconfig, deployed) -> None:
    result = _logs(cli, config_file, kubeconfig, "decode", "--signatures-only")
    assert result.code == 0, result.err
    assert "POST /v1/chat/completions" not in result.out
    assert result.out.count("Retrieved") == 3


def test_router_reads_router_container_in_the_operator_namespace(cli, config_file, kubeconfig, deployed) -> None:
    result = _logs(cli, config_file, kubeconfig, "router")
    assert result.code == 0, result.err
    assert "<- 8204 estimated tokens vs threshold 4096: prefill -> decode" in result.out
    assert "<- 38 estimated tokens vs threshold 4096: decode only" in result.out
    assert any(f"/namespaces/hyperpod-inference-system/pods/{ROUTER_POD}/log?container=router-container" in r
               for r in deployed.requests)


def test_operator_pods_come_from_the_deployment_selector(cli, config_file, kubeconfig, deployed) -> None:
    result = _logs(cli, config_file, kubeconfig, "operator")
    assert result.code == 0, result.err
    assert "reconciled InferenceEndpointConfig" in result.out


def test_follow_merges_several_pods_with_their_names(cli, config_file, kubeconfig, deployed) -> None:
    second = f"prefill-{NAME}-7d9f8-zzzzz"
    deployed.pods.append(pod(second, NAMESPACE, {"inference.sagemaker.aws.amazon.com/dpd-role": "prefill"}))
    deployed.log(NAMESPACE, f"prefill-{NAME}-7d9f8-abcde", f"prefill-{NAME}", "first prefill line")
    deployed.log(NAMESPACE, second, f"prefill-{NAME}", "second prefill line")
    result = _logs(cli, config_file, kubeconfig, "prefill", "--follow")
    assert result.code == 0, result.err
    assert f"prefill-{NAME}-7d9f8-abcde first prefill line" in result.out
    assert f"{second} second prefill line" in result.out
    assert any("follow=True" in r for r in deployed.requests)


def test_no_pods_is_one_line_with_the_next_step(cli, config_file, kubeconfig, cluster) -> None:
    result = _logs(cli, config_file, kubeconfig, "decode")
    assert result.code == 1
    assert one_line_error(result) == (f"error: no decode pods (decode-{NAME}-* in {NAMESPACE}); "
                                      "run 'hyperpod-dpd status'")


@pytest.mark.parametrize(("args", "message"), [
    (("gateway",), "error: ROLE must be one of prefill, decode, router, operator, got 'gateway'"),
    (("decode", "--tail", "-1"), "error: --tail must be between 0 and 100000, got -1"),
])
def test_bad_input_is_exit_2(cli, config_file, kubeconfig, args, message) -> None:
    result = _logs(cli, config_file, kubeconfig, *args)
    assert result.code == 2
    assert one_line_error(result) == message


def test_unreachable_api_server_is_one_line(cli, config_file, tmp_path) -> None:
    dead = dead_kubeconfig(tmp_path / "kubeconfig")
    result = _logs(cli, config_file, dead, "decode")
    assert result.code == 1
    assert one_line_error(result).startswith("error: listing the decode pods: Kubernetes API unreachable")


def test_help_lists_the_day2_commands(cli) -> None:
    result = cli("--help")
    assert result.code == 0
    for command in ("status", "smoke", "logs", "sweep"):
        assert command in result.out
