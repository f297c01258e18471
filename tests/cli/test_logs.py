"""``hyperpod-dpd logs ROLE`` and the log signatures (:mod:`hyperpod_dpd.dpd_logs`).

``fixtures/decode-lmcache-0.4.3.log`` holds decoder lines rendered with LMCache 0.4.3's own format strings
(``day2_fakes.lmcache_line``); ``fixtures/router.log`` the router lines of AWS's DPD guide (S2/S13 in
``shared/reference/operator.md``). Pod and container names: operator.md, section (e).

The EFA-path lines come from ``day2_fakes``, each rendered with the format string of the wheel that writes it
(downloaded with ``pip download --no-deps vllm==0.19.0 lmcache==0.4.3 nixl-cu12==1.0.0``):

* ``LMCache Configuration: {config_dict}``: lmcache 0.4.3 ``lmcache/v1/config.py:611``;
* ``(Worker_TP<rank> pid=<pid>) ``: vllm 0.19.0 ``vllm/utils/system_utils.py:204`` (cyan: ``:206``), the name from
  ``vllm/v1/executor/multiproc_executor.py:986``;
* ``Creating v1 connector with name: %s and engine_id: %s``: vllm ``vllm/distributed/kv_transfer/kv_connector/
  factory.py:65``;
* ``Skipping backend registration %s due to the missing plugin.``: nixl-cu12 1.0.0 ``nixl_cu12/_api.py:222``,
  in the format of ``nixl_cu12/logging.py:44``;
* ``[req_id=%s] Stored %d out of total %d tokens. ...``: lmcache ``lmcache/v1/cache_engine.py:553``;
  ``[req_id=%s] Retrieved %d out of %d required tokens ...``: ``:887``; layer-wise ``... out of total %d tokens``:
  ``:1048``; ``Failed to allocate memory object, retrying...``: ``lmcache/v1/storage_backend/pd_backend.py:540``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from day2_fakes import (
    NAME,
    NAMESPACE,
    FakeCluster,
    alloc_failed_line,
    dead_kubeconfig,
    deployed_at,
    lmcache_config_line,
    lmcache_line,
    nixl_missing_plugin_line,
    one_line_error,
    retrieved_line,
    role_pod,
    rolled_out,
    server_of,
    stored_line,
    worker_line,
    worker_startup,
)

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


# --- proving the EFA path: start-up lines and per-rank rates (formats: dpd_logs module docstring) --------------


def test_the_lmcache_set_up_line_gives_role_transport_and_buffer() -> None:
    """lmcache/v1/config.py:611 logs the config dict's repr; vLLM prefixes the rank (system_utils.py:204)."""
    line = worker_line(3, lmcache_config_line(pd_role="receiver", nixl_backends=["LIBFABRIC"]))
    setup = dpd_logs.parse_worker_setup(line)
    assert setup == dpd_logs.WorkerSetup(rank=3, pd_role="receiver", enable_pd=True, nixl_backends=("LIBFABRIC",),
                                         buffer_device="cuda")
    unset = dpd_logs.parse_worker_setup(lmcache_config_line(pd_role="sender", nixl_backends=None))
    assert unset is not None and unset.rank is None and unset.nixl_backends is None
    assert unset.transport == ("UCX",)  # nixl_channel.py:610-612: None -> ["UCX"]
    finding = dpd_logs.classify(line)
    assert finding is not None and finding.meaning == "pd_role receiver, KV transport NIXL LIBFABRIC"


def test_the_rank_comes_from_vllms_prefix_in_colour_too() -> None:
    """system_utils.py:206 writes the prefix in cyan (CYAN = "\\033[0;36m", RESET = "\\033[0;0m", :27-28)."""
    coloured = f"\033[0;36m(Worker_TP6 pid=4206)\033[0;0m {retrieved_line('r', 10, 10, 12, 9.0)}"
    assert dpd_logs.rank_of(coloured) == 6
    assert dpd_logs.rank_of(worker_line(None, "x")) is None and dpd_logs.rank_of("plain") is None
    assert dpd_logs.rank_of("(Worker_DP1_TP2 pid=9) x") == 2  # multiproc_executor.py: _DP<n> comes before _TP<n>


def test_the_layerwise_retrieve_line_is_a_transfer_too() -> None:
    """lmcache/v1/cache_engine.py:1048 (use_layerwise): 'Retrieved %d out of %d out of total %d tokens'."""
    line = lmcache_line(20, "[req_id=%s] Retrieved %d out of %d out of total %d tokens", ("r1", 0, 4096, 4100),
                        filename="cache_engine.py", lineno=1047, logger="lmcache.v1.cache_engine")
    (t,) = dpd_logs.transfers([line])
    assert (t.retrieved_tokens, t.required_tokens, t.total_tokens, t.throughput_gbps) == (0, 4096, 4100, None)


def _errors(findings: list[dpd_logs.Finding]) -> list[dpd_logs.Finding]:
    return [f for f in findings if f.severity == "error"]


def test_libfabric_roles_and_fast_ranks_prove_the_path() -> None:
    decode = worker_startup("decode") + [worker_line(r, retrieved_line(f"c{r}", 8192, 8192, 8200, 20.0 + r))
                                         for r in range(8)]
    findings = dpd_logs.efa_findings("decode", decode)
    assert [f.signature for f in findings] == ["'pd_role': 'receiver'", "NIXL LIBFABRIC", "8 rank(s) >= 20 GB/s"]
    assert dpd_logs.efa_verdict(findings) == "proven"
    prefill = [*worker_startup("prefill"), worker_line(0, stored_line("c0", 8192, 8200, 18.5))]
    assert dpd_logs.efa_verdict(dpd_logs.efa_findings("prefill", prefill)) == "proven"
    assert dpd_logs.rank_rates(prefill, side="sender") == [
        dpd_logs.RankRate(rank=0, transfers=1, min_gbps=18.5, empty=0)]


@pytest.mark.parametrize(("role", "lines", "signature", "fix"), [
    ("prefill", worker_startup("prefill", pd_role="receiver"), "'pd_role': 'receiver'",
     "a prefill worker must be the sender"),
    ("decode", worker_startup("decode", pd_role="sender"), "'pd_role': 'sender'", "a decode worker the receiver"),
    ("decode", worker_startup("decode", enable_pd=False), "'enable_pd': False", "spec.pdSpec"),
    ("prefill", [*worker_startup("prefill"), nixl_missing_plugin_line("LIBFABRIC")],
     "NIXL: Skipping backend registration LIBFABRIC", "libplugin_LIBFABRIC"),
    ("decode", worker_startup("decode", nixl_backends=None), "NIXL UCX (LMCache's default: nixl_backends unset)",
     "set LMCACHE_NIXL_BACKENDS=LIBFABRIC in the InferenceEndpointConfig's worker.environmentVariables"),
    ("decode", [*worker_startup("decode", nixl_backends=("UCX",)),
                worker_line(0, retrieved_line("a", 64, 64, 70, 0.3))], "NIXL UCX", "aws-samples/awsome-inference#72"),
    ("decode", worker_startup("decode") + [worker_line(r, retrieved_line(f"c{r}", 8192, 8192, 8200,
                                                                         0.62 if r == 2 else 21.0)) for r in range(8)],
     "rank 2: 0.62 GB/s", "vpc.amazonaws.com/efa devices"),
], ids=["prefill-as-receiver", "decode-as-sender", "pd-off", "libfabric-plugin-missing", "ucx-default-no-transfer",
        "ucx-configured-slow", "one-rank-slow"])
def test_each_way_off_efa_is_refuted_with_its_fix(role: str, lines: list[str], signature: str, fix: str) -> None:
    findings = dpd_logs.efa_findings(role, lines)  # type: ignore[arg-type]
    assert dpd_logs.efa_verdict(findings) == "refuted"
    (match,) = [f for f in _errors(findings) if f.signature == signature]
    assert fix in match.fix


def test_ucx_that_moves_fast_is_a_warning_not_a_proof() -> None:
    lines = [*worker_startup("decode", nixl_backends=("UCX",)), worker_line(0, retrieved_line("a", 64, 64, 70, 5.0))]
    findings = dpd_logs.efa_findings("decode", lines)
    (ucx,) = [f for f in findings if f.signature == "NIXL UCX"]
    assert ucx.severity == "warn" and "fails the EFA handshake elsewhere" in ucx.meaning
    assert dpd_logs.efa_verdict(findings) == "unproven"


@pytest.mark.parametrize(("lines", "cause", "fix"), [
    (worker_startup("decode", nixl_backends=None), "the transport is UCX", "LMCACHE_NIXL_BACKENDS=LIBFABRIC"),
    ([*worker_startup("decode"), alloc_failed_line()], "the receive buffer was full",
     "raise endpoint.pd_buffer_size_bytes (now 8 GiB) to 16 or 32 GiB"),
    (worker_startup("decode"), "the prefiller did not send (its log shows why), or the two roles hash prompts",
     "PYTHONHASHSEED=0"),
], ids=["ucx", "buffer-full", "keys-or-sender"])
def test_retrieved_0_out_of_n_names_its_likely_cause(lines: list[str], cause: str, fix: str) -> None:
    zero = worker_line(0, retrieved_line("chatcmpl-9b2e44", 0, 6144, 6150, 0.0))
    findings = dpd_logs.efa_findings("decode", [*lines, zero, zero], pd_buffer_size_bytes=8 << 30)
    (empty,) = [f for f in findings if f.signature.startswith("Retrieved 0 out of N")]
    assert empty.signature == "Retrieved 0 out of N (2 times)" and cause in empty.meaning and fix in empty.fix


def test_without_start_up_lines_the_path_is_unproven_and_says_how_to_see_them() -> None:
    findings = dpd_logs.efa_findings("decode", DECODE_LOG[:2])
    assert findings[0].severity == "warn" and findings[0].signature == "no 'LMCache Configuration' line"
    assert "hyperpod-dpd logs decode" in findings[0].fix
    assert dpd_logs.efa_verdict(findings) == "unproven"


def test_the_last_set_up_of_a_rank_wins_after_a_restart() -> None:
    lines = [worker_line(0, lmcache_config_line(pd_role="receiver", nixl_backends=None)),
             worker_line(0, lmcache_config_line(pd_role="receiver", nixl_backends=["LIBFABRIC"]))]
    (setup,) = dpd_logs.worker_setups(lines)
    assert setup.nixl_backends == ("LIBFABRIC",)


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
    deployed.pods.append(role_pod(NAME, "prefill", "7d9f8", "zzzzz"))
    deployed.log(NAMESPACE, f"prefill-{NAME}-7d9f8-abcde", f"prefill-{NAME}", "first prefill line")
    deployed.log(NAMESPACE, second, f"prefill-{NAME}", "second prefill line")
    result = _logs(cli, config_file, kubeconfig, "prefill", "--follow")
    assert result.code == 0, result.err
    assert f"prefill-{NAME}-7d9f8-abcde first prefill line" in result.out
    assert f"{second} second prefill line" in result.out
    assert any("follow=True" in r for r in deployed.requests)


def test_previous_reads_the_container_instance_before_its_restart(cli, config_file, kubeconfig, deployed) -> None:
    """``kubectl logs --previous``: Kubernetes read_namespaced_pod_log ``previous=true``."""
    deployed.previous_logs[(NAMESPACE, DECODE_POD, DECODE_CONTAINER)] = [(time.time(), "before the crash")]
    result = _logs(cli, config_file, kubeconfig, "decode", "--previous")
    assert result.code == 0, result.err
    assert "before the crash" in result.out
    assert not set(result.out.splitlines()) & set(DECODE_LOG)  # the running instance's lines are not shown


@pytest.mark.parametrize("follow", [(), ("--follow",)])
def test_since_drops_older_lines_while_reading_or_following(cli, config_file, kubeconfig, deployed,
                                                            follow: tuple[str, ...]) -> None:
    """``--since 1h30m`` is 5400 s (Kubernetes ``sinceSeconds``), applied together with ``--tail``."""
    deployed.logs[(NAMESPACE, DECODE_POD, DECODE_CONTAINER)] = [
        (time.time() - 5500, "an hour and a half ago"), (time.time() - 5000, "within the window")]
    result = _logs(cli, config_file, kubeconfig, "decode", "--since", "1h30m", *follow)
    assert result.code == 0, result.err
    assert result.out.splitlines() == ["within the window"]


def test_no_pods_is_one_line_with_the_next_step(cli, config_file, kubeconfig, cluster) -> None:
    result = _logs(cli, config_file, kubeconfig, "decode")
    assert result.code == 1
    assert one_line_error(result) == (f"error: no decode pods (Deployment decode-{NAME} in {NAMESPACE}); "
                                      "run 'hyperpod-dpd status'")


@pytest.mark.parametrize(("args", "message"), [
    (("gateway",), "error: ROLE must be one of prefill, decode, router, operator, got 'gateway'"),
    (("decode", "--tail", "-1"), "error: --tail must be between 0 and 100000, got -1"),
    (("decode", "--since", "5 minutes"),
     "error: --since must be a duration such as 30s, 5m or 1h30m (at least 1s), got '5 minutes'"),
    (("decode", "--since", "1d"), "error: --since must be a duration such as 30s, 5m or 1h30m (at least 1s), got '1d'"),
    (("decode", "--since", "0s"), "error: --since must be a duration such as 30s, 5m or 1h30m (at least 1s), got '0s'"),
])
def test_bad_input_is_exit_2(cli, config_file, kubeconfig, args, message) -> None:
    result = _logs(cli, config_file, kubeconfig, *args)
    assert result.code == 2
    assert one_line_error(result) == message


def test_unreachable_api_server_is_one_line(cli, config_file, tmp_path) -> None:
    dead = dead_kubeconfig(tmp_path / "kubeconfig")
    deployed_at(config_file, server_of(dead))
    result = _logs(cli, config_file, dead, "decode")
    assert result.code == 1
    assert one_line_error(result).startswith("error: listing the decode pods: Kubernetes API unreachable")


def test_help_lists_the_day2_commands(cli) -> None:
    result = cli("--help")
    assert result.code == 0
    for command in ("status", "smoke", "logs", "sweep"):
        assert command in result.out


# --- two endpoints whose names share a prefix (issue 33 item 3, k8s-review defect 6) -----------------------------


@pytest.mark.parametrize("role", ["prefill", "decode", "router"])
def test_logs_of_llama_never_read_the_pods_of_llama_3_3_70b(cli, llama_config, kubeconfig, deployed, role) -> None:
    """``deployed`` runs endpoint llama-3-3-70b (its decode log and router log hold lines); llama runs beside it."""
    deployed.dpd_endpoint(name="llama")
    pod_name = {"prefill": "prefill-llama-7d9f8-abcde", "decode": "decode-llama-5c6b7-fghij",
                "router": "llama-default-router-6f7d8-klmno"}[role]
    namespace = "hyperpod-inference-system" if role == "router" else NAMESPACE
    deployed.log(namespace, pod_name, "router-container" if role == "router" else f"{role}-llama", "LLAMA'S OWN LINE")
    deployed.log(NAMESPACE, f"prefill-{NAME}-7d9f8-abcde", f"prefill-{NAME}", "NOT THIS ENDPOINT")
    deployed.requests.clear()
    result = _logs(cli, llama_config, kubeconfig, role)
    assert result.code == 0, result.err
    assert result.out.splitlines() == ["LLAMA'S OWN LINE"]
    assert [r for r in deployed.requests if NAME in r] == []  # not one read of llama-3-3-70b's objects


# --- a fleet: several endpoints on one cluster (issue 34 item 4) ---------------------------------------------------

SMALL = "llama-3-1-8b"  # the second endpoint of config/examples/two-models.yaml


@pytest.mark.parametrize("role", ["prefill", "decode", "router"])
def test_endpoint_option_reads_that_endpoints_pods_only(cli, fleet_config, kubeconfig, deployed, role) -> None:
    """``deployed`` runs the 70B (its decode and router logs hold lines); the 8B runs beside it. ``--endpoint
    llama-3-1-8b`` reads the 8B's pods, picked by its Deployments' selectors, and not one object of the 70B. Fails
    before: Config.endpoint raised TypeError on a config of several endpoints."""
    deployed.dpd_endpoint(name=SMALL)
    pod_name = {"prefill": f"prefill-{SMALL}-7d9f8-abcde", "decode": f"decode-{SMALL}-5c6b7-fghij",
                "router": f"{SMALL}-{NAMESPACE}-router-6f7d8-klmno"}[role]
    namespace = "hyperpod-inference-system" if role == "router" else NAMESPACE
    deployed.log(namespace, pod_name, "router-container" if role == "router" else f"{role}-{SMALL}", "THE 8B'S LINE")
    deployed.log(NAMESPACE, f"prefill-{NAME}-7d9f8-abcde", f"prefill-{NAME}", "NOT THIS ENDPOINT")
    deployed.requests.clear()
    result = _logs(cli, fleet_config, kubeconfig, role, "--endpoint", SMALL)
    assert result.code == 0, result.err
    assert result.out.splitlines() == ["THE 8B'S LINE"]
    assert [r for r in deployed.requests if NAME in r] == []


def test_a_fleet_needs_the_endpoint_named_but_not_for_the_operator(cli, fleet_config, kubeconfig, deployed) -> None:
    """The operator serves every endpoint: its log needs no --endpoint; a role's does (one line, exit 2, naming the
    endpoints, before any Kubernetes call)."""
    assert "reconciled InferenceEndpointConfig" in _logs(cli, fleet_config, kubeconfig, "operator").out
    deployed.requests.clear()
    result = _logs(cli, fleet_config, kubeconfig, "decode")
    assert (result.code, result.out) == (2, "")
    assert one_line_error(result) == (f"error: --endpoint must name the endpoint hyperpod-dpd logs acts on: "
                                      f"{fleet_config} serves 2 endpoints ({NAME}, {SMALL})")
    assert deployed.requests == []


# --- after a rollout (issue 36) ------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["decode", "router"])
def test_after_a_blue_green_logs_read_the_revision_that_serves(cli, config_file, kubeconfig, deployed, role) -> None:
    """The revision store names ``<endpoint>-r1`` as the revision that serves (``hyperpod-dpd rollout``); the old
    revision's pods still run while it is deleted and are not read. Fails before: the old revision's lines."""
    served = rolled_out(config_file.with_suffix(".out"))
    deployed.dpd_endpoint(name=served)
    pod_name = {"decode": f"decode-{served}-5c6b7-fghij", "router": f"{served}-{NAMESPACE}-router-6f7d8-klmno"}[role]
    namespace = "hyperpod-inference-system" if role == "router" else NAMESPACE
    deployed.log(namespace, pod_name, "router-container" if role == "router" else f"{role}-{served}", "R1'S LINE")
    result = _logs(cli, config_file, kubeconfig, role)
    assert result.code == 0, result.err
    assert result.out.splitlines() == ["R1'S LINE"]
