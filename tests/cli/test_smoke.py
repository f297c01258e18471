"""``hyperpod-dpd smoke`` against a local OpenAI-compatible streaming server and a local Kubernetes API server.

The decoder's log lines are LMCache 0.4.3's (see ``day2_fakes``); what each one means is AWS's
(``shared/reference/operations.md``, "Smoke test and status"): ``Retrieved N out of N`` (N > 0) proves the DPD
path, ``Retrieved 0 out of N`` is recomputation, < 1 GB/s is not EFA, ``Failed to allocate memory object`` asks
for a larger ``PD_BUFFER_SIZE``.
"""

from __future__ import annotations

import datetime as dt
import json
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path

import boto3
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from day2_fakes import (
    MODEL_PATH,
    NAME,
    NAMESPACE,
    SERVED_NAME,
    DecoderBehaviour,
    FakeCluster,
    _OpenAiHandler,
    dead_kubeconfig,
    deployed_at,
    free_port,
    one_line_error,
    openai_server,
    retrieved_line,
    rolled_out,
    server_of,
    worker_line,
    worker_startup,
)

from hyperpod_dpd.commands.smoke import build_prompts

pytest_plugins = ("day2_fixtures",)


def _smoke(cli, config_file: Path, kubeconfig: Path, url: str, *extra: str):  # type: ignore[no-untyped-def]
    return cli("smoke", "--config", str(config_file), "--kubeconfig", str(kubeconfig), "--url", url,
               "--log-wait", "0.2", *extra)


def _served(cluster: FakeCluster, behaviour: DecoderBehaviour | None = None):  # type: ignore[no-untyped-def]
    cluster.dpd_endpoint()
    return openai_server(cluster, behaviour or DecoderBehaviour())


def test_long_prompt_proves_the_dpd_path_and_short_one_stays_on_the_decoder(cli, config_file, kubeconfig,
                                                                              cluster) -> None:
    with _served(cluster) as url:
        result = _smoke(cli, config_file, kubeconfig, url, "--json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    short, long = report["requests"]
    assert short["transfers"] == [] and short["ok"]
    assert long["ok"] and long["transfers"][0]["retrieved_tokens"] == long["transfers"][0]["required_tokens"] > 4096
    assert long["kv_transfer_gbps"] == 24.0
    assert [d["disaggregate"] for d in report["router_decisions"]] == [False, True]
    for r in (short, long):
        assert r["answer"] == "Disaggregated prefill splits prompt processing from token generation."
        assert r["output_tokens"] == 9 and r["ttft_seconds"] > 0 and r["tpot_seconds"] > 0
    # What each role ran when it was certified (the skew guard, issue 33 item 2).
    assert report["roles"]["decode"] == {
        "deployment": f"decode-{NAME}", "found": True, "revision": "1", "images": ["lmcache/vllm-openai:v0.4.3"],
        "models": [MODEL_PATH], "served_names": [SERVED_NAME],
        "templates": [{"pod_template_hash": "5c6b7", "revision": "1", "pods": 1, "ready": 1}]}


@pytest.mark.parametrize("behaviour", [
    DecoderBehaviour(req_id_suffix="-0a1b2c3d"),
    DecoderBehaviour(clock_skew_seconds=-8.0),
    DecoderBehaviour(clock_skew_seconds=+8.0, req_id_suffix="-0a1b2c3d"),
], ids=["engine-request-id", "node-clock-behind", "node-clock-ahead"])
def test_decoder_lines_are_attributed_without_trusting_clocks_or_ids(cli, config_file, kubeconfig, cluster,
                                                                      behaviour) -> None:
    with _served(cluster, behaviour) as url:
        result = _smoke(cli, config_file, kubeconfig, url, "--json")
    assert result.code == 0, result.err
    short, long = json.loads(result.out)["requests"]
    assert short["transfers"] == [] and len(long["transfers"]) == 1


# --- the KV path over EFA, from the workers' start-up lines (formats: hyperpod_dpd.dpd_logs docstring) ---------

PREFILL_POD, DECODE_POD = f"prefill-{NAME}-7d9f8-abcde", f"decode-{NAME}-5c6b7-fghij"


def _started(cluster: FakeCluster, **kwargs) -> None:  # type: ignore[no-untyped-def]
    """Both workers' start-up lines, logged an hour before the test (read from the log's head)."""
    for pod_name, role in ((PREFILL_POD, "prefill"), (DECODE_POD, "decode")):
        for line in worker_startup(role, **kwargs):
            cluster.log(NAMESPACE, pod_name, f"{role}-{NAME}", line, when=time.time() - 3600)


def test_libfabric_workers_with_their_roles_prove_the_efa_path(cli, config_file, kubeconfig, cluster) -> None:
    with _served(cluster) as url:
        _started(cluster)
        result = _smoke(cli, config_file, kubeconfig, url, "--json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["efa"]["verdict"] == "proven" and report["ok"]
    prefill, decode = report["efa"]["pods"]
    assert (prefill["pod"], prefill["role"], decode["pod"], decode["role"]) == (
        PREFILL_POD, "prefill", DECODE_POD, "decode")
    assert {s["pd_role"] for s in prefill["setups"]} == {"sender"} and len(prefill["setups"]) == 8
    assert {s["pd_role"] for s in decode["setups"]} == {"receiver"}
    assert {tuple(s["nixl_backends"]) for s in decode["setups"]} == {("LIBFABRIC",)}
    assert decode["connectors"] == ["LMCacheConnectorV1"]
    assert "1 rank(s) >= 24 GB/s" in [f["signature"] for f in decode["findings"]]


def test_ucx_by_default_refutes_the_efa_path_with_its_fix(cli, config_file, kubeconfig, cluster) -> None:
    with _served(cluster) as url:
        _started(cluster, nixl_backends=None)
        result = _smoke(cli, config_file, kubeconfig, url)
    assert result.code == 1
    line = one_line_error(result)
    assert line.startswith(f"error: smoke test failed: prefill pod {PREFILL_POD}: NIXL UCX (LMCache's default: "
                           "nixl_backends unset): the KV transport is UCX, not libfabric")
    assert "fix: set LMCACHE_NIXL_BACKENDS=LIBFABRIC" in line
    assert "KV path over EFA: refuted" in result.out


def test_one_slow_rank_refutes_the_path_and_is_named(cli, config_file, kubeconfig, cluster) -> None:
    """Each TP rank runs its own LMCache engine (lifecycle-facts.md): one rank under 1 GB/s is not on EFA."""
    with _served(cluster) as url:
        _started(cluster)
        for rank in range(8):
            cluster.log(NAMESPACE, DECODE_POD, f"decode-{NAME}", worker_line(
                rank, retrieved_line(f"warm-{rank}", 8192, 8192, 8200, 0.5 if rank == 7 else 25.0)))
        result = _smoke(cli, config_file, kubeconfig, url, "--json")
    assert result.code == 1
    report = json.loads(result.out)
    assert report["efa"]["verdict"] == "refuted" and not report["ok"]
    assert "rank 7: 0.5 GB/s" in one_line_error(result)


def test_a_request_near_the_idle_timeout_is_a_warning(cli, config_file, kubeconfig, cluster) -> None:
    """80 % of endpoint.load_balancer_idle_timeout_seconds (issue 21): streamed it lived, unstreamed it would not."""
    data = yaml.safe_load(config_file.read_text())
    data["observability"]["slo"]["ttft_p95_seconds"] = 0.5  # a TTFT bucket boundary, within the 1 s timeout
    data["endpoint"]["load_balancer_idle_timeout_seconds"] = 1
    config_file.write_text(yaml.safe_dump(data))
    with _served(cluster, DecoderBehaviour(word_delay_seconds=0.1)) as url:  # 9 words: about 0.9 s per request
        _started(cluster)
        result = _smoke(cli, config_file, kubeconfig, url, "--json")
    assert result.code == 0, result.err  # a warning, not a failure
    report = json.loads(result.out)
    assert report["idle_timeout_seconds"] == 1
    for r in report["requests"]:
        (warning,) = [f for f in r["findings"] if f["severity"] == "warn"]
        assert warning["signature"].endswith("s of a 1 s idle timeout") and r["e2e_seconds"] >= 0.8
        assert warning["fix"] == ("raise endpoint.load_balancer_idle_timeout_seconds (at most 4000) or have "
                                  "clients stream")


def test_table_output_names_ttft_tpot_and_transfer(cli, config_file, kubeconfig, cluster) -> None:
    with _served(cluster) as url:
        result = _smoke(cli, config_file, kubeconfig, url)
    assert result.code == 0, result.err
    assert "TTFT" in result.out and "TPOT" in result.out and "24 GB/s" in result.out


@pytest.mark.parametrize(("behaviour", "expected"), [
    (DecoderBehaviour(retrieved_fraction=0.0), "Retrieved 0 out of"),
    (DecoderBehaviour(gbps=0.4), "not over EFA RDMA"),
    (DecoderBehaviour(alloc_failures=2), "raise endpoint.pd_buffer_size_bytes (now 8 GiB) to 16 or 32 GiB"),
    (DecoderBehaviour(log_transfer=False, router_logs=False), "no KV cache arrived at the decoder for the long prompt"),
    (DecoderBehaviour(transfer_short=True), "a prompt below the routing threshold went through the prefill pool"),
    (DecoderBehaviour(threshold_chars=10**9), "(disaggregate=False): check pdSpec.routingThreshold"),
], ids=["recomputed", "tcp-fallback", "pd-buffer-too-small", "no-transfer", "short-disaggregated",
        "router-kept-it-local"])
def test_each_failure_signature_fails_with_its_fix(cli, config_file, kubeconfig, cluster, behaviour,
                                                   expected) -> None:
    with _served(cluster, behaviour) as url:
        result = _smoke(cli, config_file, kubeconfig, url)
    assert result.code == 1
    line = one_line_error(result)
    assert expected in line and "fix:" in line


def test_missing_transfer_says_what_the_router_decided(cli, config_file, kubeconfig, cluster) -> None:
    """A long prompt the router disaggregated but whose KV never arrived points at the prefill side."""
    with _served(cluster, DecoderBehaviour(log_transfer=False)) as url:
        result = _smoke(cli, config_file, kubeconfig, url)
    assert result.code == 1
    assert "the router disaggregated (Conditional routing ... disaggregate=True) but no KV cache arrived" \
        in one_line_error(result)


def test_endpoint_still_loading_is_a_503_with_the_next_step(cli, config_file, kubeconfig, cluster) -> None:
    with _served(cluster, DecoderBehaviour(status=503)) as url:
        result = _smoke(cli, config_file, kubeconfig, url)
    assert result.code == 1
    assert "HTTP 503 (503: the endpoint is still loading; wait for DeploymentComplete)" in one_line_error(result)


def test_unreachable_endpoint_is_one_line(cli, config_file, kubeconfig) -> None:
    result = _smoke(cli, config_file, kubeconfig, f"http://127.0.0.1:{free_port()}/v1/chat/completions")
    assert result.code == 1
    assert "unreachable" in one_line_error(result)


def test_unreachable_kubernetes_api_is_one_line(cli, config_file, tmp_path, cluster) -> None:
    dead = dead_kubeconfig(tmp_path / "dead-kubeconfig")
    deployed_at(config_file, server_of(dead))
    with _served(cluster) as url:
        result = _smoke(cli, config_file, dead, url)
    assert result.code == 1
    assert "Kubernetes API unreachable" in one_line_error(result)


def test_missing_kubeconfig_names_the_update_kubeconfig_command(cli, config_file, tmp_path) -> None:
    result = _smoke(cli, config_file, tmp_path / "none", "http://127.0.0.1:1/v1/chat/completions")
    assert result.code == 1
    assert "aws eks update-kubeconfig --name hyperpod-dpd-eks --region us-west-2" in one_line_error(result)


@pytest.mark.parametrize(("args", "message"), [
    (("--max-tokens", "1"), "error: --max-tokens must be between 2 and 1024, got 1"),
    (("--url", "ftp://x/v1"), "error: --url must start with http:// or https://, got 'ftp://x/v1'"),
    (("--ca-file", "/nonexistent.pem"), "error: --ca-file '/nonexistent.pem' does not exist"),
])
def test_bad_input_is_exit_2(cli, config_file, kubeconfig, args, message) -> None:
    result = cli("smoke", "--config", str(config_file), "--kubeconfig", str(kubeconfig), *args)
    assert result.code == 2
    assert one_line_error(result) == message


def test_without_url_waits_for_deployment_complete(cli, config_file, kubeconfig, cluster) -> None:
    cluster.dpd_endpoint(state="DeploymentInProgress", ready=False)
    result = cli("smoke", "--config", str(config_file), "--kubeconfig", str(kubeconfig))
    assert result.code == 1
    assert "endpoint state is DeploymentInProgress, not DeploymentComplete" in one_line_error(result)


# --- through the load balancer: TLS with the PEM the operator wrote to the TLS bucket ----------------------


@contextmanager
def _tls_openai_server(cluster: FakeCluster, cert_pem: bytes, key_pem: bytes, tmp: Path) -> Iterator[int]:
    decode = (NAMESPACE, f"decode-{NAME}-5c6b7-fghij", f"decode-{NAME}")
    handler = type("Handler", (_OpenAiHandler,), {"cluster": cluster, "behaviour": DecoderBehaviour(),
                                                  "decode": decode})
    (tmp / "cert.pem").write_bytes(cert_pem)
    (tmp / "key.pem").write_bytes(key_pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp / "cert.pem", tmp / "key.pem")
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def _self_signed(host: str) -> tuple[bytes, bytes]:
    """A self-signed certificate like cert-manager's for the endpoint (operations.md: PEM in the TLS bucket)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def test_a_missing_endpoint_never_names_the_placeholders_to_apply(cli, config_file, kubeconfig, cluster) -> None:
    """REV34 defect 11: no InferenceEndpointConfig, and the environment's synth left placeholders
    (``<endpoint>/placeholders/``, hyperpod_core.dist_layout): the error says to resolve them first and names the
    folder the apply will read. Fails before: "apply .../placeholders/endpoint/ first"."""
    from hyperpod_core.dist_layout import DistLayout

    dist = config_file.with_suffix(".out") / "dist"
    unresolved = DistLayout.of(dist, NAME, "dpd", unresolved=True)
    unresolved.endpoint_dir.mkdir(parents=True)
    result = cli("smoke", "--config", str(config_file), "--kubeconfig", str(kubeconfig), "--log-wait", "0.2")
    assert result.code == 1
    assert result.err.splitlines()[-1] == (
        f"error: InferenceEndpointConfig {NAMESPACE}/{NAME} not found; the synth left placeholders in "
        f"{unresolved.base}/ (its README.txt says what resolves each): resolve them and synthesize again, then apply "
        f"{DistLayout.of(dist, NAME, 'dpd').endpoint_dir}/ first")


def test_through_the_load_balancer_with_the_operator_pem(cli, config_file, kubeconfig, cluster, tmp_path,
                                                         moto_isolated) -> None:
    cert, key = _self_signed("localhost")
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket="hyperpod-tls-test", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    s3.put_object(Bucket="hyperpod-tls-test", Key=f"{NAMESPACE}/{NAME}.pem", Body=cert)
    cluster.dpd_endpoint()
    with _tls_openai_server(cluster, cert, key, tmp_path) as port:
        cluster.alb(f"localhost:{port}")
        result = cli("smoke", "--config", str(config_file), "--kubeconfig", str(kubeconfig), "--log-wait", "0.2",
                     "--json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["url"] == f"https://localhost:{port}/v1/chat/completions"
    assert report["ok"]


def test_a_certificate_the_pem_does_not_sign_fails_tls(cli, config_file, kubeconfig, cluster, tmp_path,
                                                       moto_isolated) -> None:
    cert, key = _self_signed("localhost")
    other, _ = _self_signed("localhost")
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket="hyperpod-tls-test", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    s3.put_object(Bucket="hyperpod-tls-test", Key=f"{NAMESPACE}/{NAME}.pem", Body=other)
    cluster.dpd_endpoint()
    with _tls_openai_server(cluster, cert, key, tmp_path) as port:
        cluster.alb(f"localhost:{port}")
        result = cli("smoke", "--config", str(config_file), "--kubeconfig", str(kubeconfig))
    assert result.code == 1
    assert "TLS verification failed" in one_line_error(result)


# --- prompt sizing -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("threshold", "max_model_len"), [(4096, 16384), (1024, 4096), (8000, 9000)])
def test_long_prompt_is_well_above_the_threshold_and_fits_the_context(threshold: int, max_model_len: int) -> None:
    """operations.md: smoke tests of the DPD path must use prompts well above the threshold."""
    p = build_prompts(threshold=threshold, max_model_len=max_model_len, max_tokens=64, nonce="n")
    assert p.short_tokens < 64 <= threshold
    assert p.long_tokens > threshold
    assert p.long_tokens <= max_model_len - 64
    if 2 * threshold <= max_model_len - 64 - 256:
        assert p.long_tokens >= 2 * threshold


def test_prompts_start_with_a_fresh_nonce_so_no_cache_answers_them() -> None:
    a = build_prompts(threshold=4096, max_model_len=16384, max_tokens=64, nonce="aaa")
    b = build_prompts(threshold=4096, max_model_len=16384, max_tokens=64, nonce="bbb")
    assert a.long[:40] != b.long[:40] and a.short != b.short


@pytest.mark.parametrize(("bucket", "key", "expected"), [
    ("hyperpod-tls-test", "default/ep.pem", ("hyperpod-tls-test", "default/ep.pem")),
    ("s3://hyperpod-tls-test/certs", "certs/default/ep.pem", ("hyperpod-tls-test", "certs/default/ep.pem")),
    ("s3://hyperpod-tls-test/certs/", "default/ep.pem", ("hyperpod-tls-test", "certs/default/ep.pem")),
])
def test_status_and_smoke_read_the_pem_from_one_place(bucket: str, key: str, expected: tuple[str, str]) -> None:
    """CRD status.tlsCertificate: tlsCertificateOutputS3Bucket ("S3 bucket that stores the certificate") and
    tlsCertificateS3Keys ("S3 key that points to the .pem file"); a prefix is never written twice."""
    from hyperpod_core.names import certificate_pem_location

    status = {"tlsCertificate": {"tlsCertificateOutputS3Bucket": bucket, "tlsCertificateS3Keys": [key]}}
    assert certificate_pem_location(status) == expected
    assert certificate_pem_location({"tlsCertificate": {"tlsCertificateOutputS3Bucket": bucket}}) is None


def test_unreadable_decode_logs_keep_the_measurements_and_mark_the_check(cli, config_file, kubeconfig,
                                                                         cluster) -> None:
    """The decode pods' log is forbidden (RBAC): TTFT/TPOT of both requests are kept, the transfer check is
    marked as not made, and the test is incomplete (exit 1), not passed."""
    with _served(cluster) as url:
        cluster.forbidden_logs.add(f"decode-{NAME}-5c6b7-fghij")
        result = _smoke(cli, config_file, kubeconfig, url, "--json")
    assert result.code == 1
    report = json.loads(result.out)
    for request in report["requests"]:
        assert request["ttft_seconds"] is not None and request["tpot_seconds"] is not None
        assert request["output_tokens"] > 0 and request["transfer_checked"] is False
    checks = [u["check"] for u in report["unchecked"]]
    assert "the KV transfer of each request (the decode pods' log)" in checks
    assert "403 Forbidden" in report["unchecked"][0]["reason"]
    assert report["ok"] is False
    assert one_line_error(result).startswith("error: smoke test incomplete: could not check the KV transfer of each "
                                             "request (the decode pods' log)")


def test_a_failed_long_request_keeps_the_short_ones_measurement(cli, config_file, kubeconfig, cluster,
                                                                monkeypatch) -> None:
    from hyperpod_core.errors import CommandFailed
    from hyperpod_dpd.commands import smoke as smoke_module

    real = smoke_module.stream
    calls = []

    def second_fails(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 2:
            raise CommandFailed("http://x/v1/chat/completions: stream broken (ConnectionResetError)")
        return real(*args, **kwargs)

    monkeypatch.setattr(smoke_module, "stream", second_fails)
    with _served(cluster) as url:
        result = _smoke(cli, config_file, kubeconfig, url, "--json")
    assert result.code == 1
    short, long = json.loads(result.out)["requests"]
    assert short["ttft_seconds"] is not None and short["ok"] is True
    assert long["error"] == "http://x/v1/chat/completions: stream broken (ConnectionResetError)"
    assert long["ttft_seconds"] is None
    assert one_line_error(result).startswith("error: smoke test failed: long prompt: request failed")


# --- the skew guard (issue 33 item 2): no certificate for prefill and decode that differ --------------------------
# Pods, ReplicaSets and Deployments in the format of day2_fakes.role_pod / replica_set / role_deployment.


@pytest.mark.parametrize(("roll", "differs"), [
    ({"role": "decode", "image": "lmcache/vllm-openai:v0.4.4"},
     "image differs: prefill runs lmcache/vllm-openai:v0.4.3; decode runs lmcache/vllm-openai:v0.4.4"),
    ({"role": "decode", "model": f"/opt/ml/model/{SERVED_NAME}/sha256-0a1b2c3d4e5f6a7b"},
     f"model path (--model) differs: prefill runs {MODEL_PATH}; decode runs /opt/ml/model/{SERVED_NAME}/"
     "sha256-0a1b2c3d4e5f6a7b"),
    ({"role": "prefill", "finished": False},
     "prefill rollout in progress: its pods run 2 pod templates (revision 1 (7d9f8): 1/1 Ready; revision 2 (9a8b7): "
     "1/1 Ready)"),
], ids=["image", "model-path", "rollout"])
def test_a_skewed_endpoint_is_refused_before_any_request(cli, config_file, kubeconfig, cluster, roll,
                                                         differs) -> None:
    with _served(cluster) as url:
        cluster.roll(roll.pop("role"), "9a8b7" if "finished" in roll else "8e0a1", 2, **roll)
        result = _smoke(cli, config_file, kubeconfig, url, "--json")
    assert result.code == 1
    assert one_line_error(result) == (f"error: refusing to certify a skewed endpoint: {differs}; 'hyperpod-dpd "
                                      "status' shows each role's revision")
    assert result.out == "" and not cluster.logs  # not one request reached the router or the decoder


# --- two endpoints whose names share a prefix (issue 33 item 3, k8s-review defect 6) -----------------------------


def test_smoke_of_llama_never_reads_the_pods_of_llama_3_3_70b(cli, llama_config, kubeconfig, cluster) -> None:
    """llama-3-3-70b runs beside llama; its workers' logs would refute the EFA path (UCX) if they were read."""
    cluster.dpd_endpoint()
    for pod_name, role in ((PREFILL_POD, "prefill"), (DECODE_POD, "decode")):
        for line in worker_startup(role, nixl_backends=None):
            cluster.log(NAMESPACE, pod_name, f"{role}-{NAME}", line, when=time.time() - 3600)
    cluster.dpd_endpoint(name="llama")
    for role, pod_name in (("prefill", "prefill-llama-7d9f8-abcde"), ("decode", "decode-llama-5c6b7-fghij")):
        for line in worker_startup(role):
            cluster.log(NAMESPACE, pod_name, f"{role}-llama", line, when=time.time() - 3600)
    cluster.requests.clear()
    with openai_server(cluster, DecoderBehaviour(), name="llama") as url:
        result = _smoke(cli, llama_config, kubeconfig, url, "--json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["efa"]["verdict"] == "proven"
    assert [p["pod"] for p in report["efa"]["pods"]] == ["prefill-llama-7d9f8-abcde", "decode-llama-5c6b7-fghij"]
    assert [r for r in cluster.requests if NAME in r] == []  # not one read of llama-3-3-70b's objects


def _asking(monkeypatch) -> list[str]:  # type: ignore[no-untyped-def]
    """The model name of every request the fake router receives."""
    asked: list[str] = []
    read_json = _OpenAiHandler.read_json

    def recording(self):  # type: ignore[no-untyped-def]
        body = read_json(self)
        asked.append(body["model"])
        return body

    monkeypatch.setattr(_OpenAiHandler, "read_json", recording)
    return asked


def _serve_as(cluster: FakeCluster, name: str | None) -> None:
    """Every role pod's vLLM container serves ``name`` (``--served-model-name``); ``None``: the flag is absent."""
    for p in cluster.pods:
        for c in p.get("spec", {}).get("containers", []):
            if "--served-model-name" in c.get("args", []):
                i = c["args"].index("--served-model-name")
                c["args"][i:i + 2] = [] if name is None else ["--served-model-name", name]


@pytest.mark.parametrize(("served", "expected"), [("llama-3-3-70b-instruct-legacy", "llama-3-3-70b-instruct-legacy"),
                                                  (None, "llama-3-3-70b-instruct")], ids=["live-name", "config-name"])
def test_smoke_asks_for_the_name_the_live_pods_serve(cli, config_file, kubeconfig, cluster, monkeypatch, served,
                                                     expected) -> None:
    """An endpoint applied from other manifests than this config's (an older synth, or before the served name
    existed, when clients sent "/opt/ml/model") answers only to the name its pods serve: smoke reads it from their
    ``--served-model-name``, else falls back to ``model.name``."""
    asked = _asking(monkeypatch)
    with _served(cluster) as url:
        _serve_as(cluster, served)
        result = _smoke(cli, config_file, kubeconfig, url, "--json")
    assert result.code == 0, result.err
    assert asked == [expected] * 2 and json.loads(result.out)["model"] == expected


# --- what cannot be compared or proven is no pass (issue 33 review item 7) -----------------------------------------


def test_a_role_without_its_deployment_leaves_the_test_incomplete(cli, config_file, kubeconfig, cluster) -> None:
    """The prefill Deployment is not where the names say ([I]): the roles cannot be compared and no prefill log can
    show the EFA path, however clean the decoder's: "incomplete", not certified."""
    with _served(cluster) as url:
        _started(cluster)
        del cluster.deployments[(NAMESPACE, f"prefill-{NAME}")]
        result = _smoke(cli, config_file, kubeconfig, url, "--json")
    assert result.code == 1
    report = json.loads(result.out)
    assert report["efa"]["verdict"] == "unproven" and report["efa"]["roles_without_pods"] == ["prefill"]
    assert report["unchecked"][0] == {"check": "that prefill and decode run one image, model and pod template",
                                      "reason": f"Deployment prefill-{NAME} not found [I: the operator's name for it]"}
    assert one_line_error(result).startswith("error: smoke test incomplete: could not check that prefill and decode "
                                             "run one image, model and pod template")


def test_a_role_without_a_ready_pod_leaves_the_test_incomplete(cli, config_file, kubeconfig, cluster) -> None:
    with _served(cluster) as url:
        _started(cluster)
        for p in cluster.pods:
            if p["metadata"]["name"] == PREFILL_POD:
                p["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
        result = _smoke(cli, config_file, kubeconfig, url, "--json")
    assert result.code == 1
    assert json.loads(result.out)["unchecked"][0]["reason"] == "no Ready prefill pod"


def test_smoke_asks_for_the_name_the_endpoint_serves(cli, config_file, kubeconfig, cluster, monkeypatch) -> None:
    """vLLM answers only for a name it serves (``--served-model-name``; the weights' path carries the revision and
    changes with it), so smoke sends the manifests' served name, ``model.name``, unless ``--model`` says otherwise."""
    from tests.k8s.endpoint_props import props_of

    from hyperpod_core.config import load_config

    asked: list[str] = []
    read_json = _OpenAiHandler.read_json

    def recording(self):  # type: ignore[no-untyped-def]
        body = read_json(self)
        asked.append(body["model"])
        return body

    monkeypatch.setattr(_OpenAiHandler, "read_json", recording)
    config = load_config(config_file)
    with _served(cluster) as url:
        assert _smoke(cli, config_file, kubeconfig, url, "--json").code == 0
    assert asked == [config.spec().model.name] * 2
    args = props_of(config).worker_args
    assert args[args.index("--served-model-name") + 1] == config.spec().model.name


# --- a fleet: several endpoints on one cluster (issue 34 item 4) ---------------------------------------------------

SMALL = "llama-3-1-8b"  # the second endpoint of config/examples/two-models.yaml


def test_endpoint_option_tests_that_endpoint_from_its_own_pods(cli, fleet_config, kubeconfig, cluster) -> None:
    """Both endpoints run; the 8B's server logs its transfers to the 8B's decode pod. ``smoke --endpoint
    llama-3-1-8b`` compares the 8B's roles and judges the 8B's decoder lines, and reads no object of the 70B. Fails
    before: Config.endpoint raised TypeError on a config of several endpoints."""
    cluster.dpd_endpoint()
    cluster.dpd_endpoint(name=SMALL)
    with openai_server(cluster, DecoderBehaviour(), name=SMALL) as url:
        cluster.requests.clear()
        result = _smoke(cli, fleet_config, kubeconfig, url, "--json", "--endpoint", SMALL)
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["endpoint"] == SMALL
    assert report["roles"]["decode"]["deployment"] == f"decode-{SMALL}"
    short, long = report["requests"]
    assert short["ok"] and long["ok"] and long["transfers"][0]["retrieved_tokens"] > 4096
    assert [r for r in cluster.requests if f"/{NAME}" in r or f"-{NAME}" in r] == []


def test_a_fleet_without_endpoint_is_refused_before_any_request(cli, fleet_config, kubeconfig, cluster) -> None:
    with _served(cluster) as url:
        result = _smoke(cli, fleet_config, kubeconfig, url)
    assert (result.code, result.out) == (2, "")
    assert one_line_error(result) == (f"error: --endpoint must name the endpoint hyperpod-dpd smoke acts on: "
                                      f"{fleet_config} serves 2 endpoints ({NAME}, {SMALL})")
    assert cluster.requests == []


def test_url_without_a_kubeconfig_says_the_url_was_not_called(cli, config_file, tmp_path, monkeypatch) -> None:
    """``--url`` (a port-forward) replaces only the load balancer: smoke still reads the cluster, the roles before the
    requests and the decoder's log after them. Without a usable kubeconfig it stops before any request, in one line
    that says so and names the URL it did not call. Fails on main: ``error: no usable kubeconfig (...); fix: ...``,
    silent about the URL (newcomer friction 25)."""
    from hyperpod_dpd.commands import smoke

    monkeypatch.setattr(smoke, "stream", lambda *args, **kwargs: pytest.fail("a request was sent"))
    url = "http://127.0.0.1:9/v1/chat/completions"
    result = cli("smoke", "--config", str(config_file), "--kubeconfig", str(tmp_path / "no-kubeconfig"), "--url", url)
    assert result.code == 1
    line = one_line_error(result)
    assert line.startswith("error: no usable kubeconfig (")
    assert (f": smoke reads the cluster with --url too (the roles before the requests, the decoder's log after "
            f"them), so {url} was not called; fix: run 'aws eks update-kubeconfig --name hyperpod-dpd-eks --region "
            "us-west-2' or pass --kubeconfig") in line


# --- after a rollout (issue 36) ------------------------------------------------------------------------------


def test_after_a_blue_green_smoke_tests_the_revision_that_serves(cli, config_file, kubeconfig, cluster) -> None:
    """``hyperpod-dpd rollout`` replaced the endpoint by revision ``<endpoint>-r1`` (its revision store says so): the
    skew guard, the decoder's log and the router's decisions are that revision's. Fails before: smoke read the
    Deployments of ``<endpoint>``, found none, and ended "incomplete"."""
    served = rolled_out(config_file.with_suffix(".out"))
    cluster.dpd_endpoint(name=served)
    with openai_server(cluster, DecoderBehaviour(), name=served) as url:
        result = _smoke(cli, config_file, kubeconfig, url, "--json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["roles"]["decode"]["deployment"] == f"decode-{served}"
    assert report["requests"][1]["transfers"] and [d["disaggregate"] for d in report["router_decisions"]] == [
        False, True]
