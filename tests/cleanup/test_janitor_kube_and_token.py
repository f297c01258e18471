"""The Kubernetes client (over a fake transport, and over HTTPS with urllib3) and the EKS bearer token."""

from __future__ import annotations

import base64
import json
import re
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from janitor_fakes import CLUSTER, REGION, FakeClock, FakeKubeApi, self_signed_certificate, served_over_https

from fake_http import free_port
from hyperpod_runtime.eks.kube import (
    HttpsTransport,
    KubeAccessDenied,
    KubeClient,
    KubeError,
    KubeUnavailable,
    Response,
)
from hyperpod_runtime.eks.token import get_token


def test_list_follows_continue_tokens_across_all_namespaces(kube_api: FakeKubeApi) -> None:
    for i in range(5):
        kube_api.add("inferenceendpointconfigs", f"ns-{i}", f"m{i}")

    items = KubeClient(kube_api).list("inferenceendpointconfigs")

    assert [o["metadata"]["name"] for o in items] == ["m0", "m1", "m2", "m3", "m4"]
    paths = [p for _, p in kube_api.calls]
    assert paths[0] == "/apis/inference.sagemaker.aws.amazon.com/v1/inferenceendpointconfigs?limit=250"
    assert len(paths) == 3 and "continue=2" in paths[1]


def test_retries_are_bounded_and_capped(kube_api: FakeKubeApi, https_kube: KubeClient, clock: FakeClock) -> None:
    kube_api.script += [Response(503)] * 10

    with pytest.raises(KubeUnavailable, match="HTTP 503 after 6 attempts"):
        https_kube.list("jumpstartmodels")
    # urllib3's Retry: backoff_factor * 2 ** (retries - 1), no wait before the first retry (urllib3 docs, Retry).
    assert clock.sleeps == [2.0, 4.0, 8.0, 16.0]
    assert len(kube_api.calls) == 6


def test_retry_after_is_capped(kube_api: FakeKubeApi, https_kube: KubeClient, clock: FakeClock) -> None:
    kube_api.script += [Response(429, headers={"Retry-After": "3600"})]
    https_kube.list("jumpstartmodels")
    assert clock.sleeps == [20.0]


@pytest.mark.parametrize("status", [401, 403])
def test_access_denied_names_the_access_entry(kube_api: FakeKubeApi, status: int) -> None:
    kube_api.script.append(Response(status, b'{"message":"forbidden: User cannot list resource"}'))
    with pytest.raises(KubeAccessDenied, match=r"forbidden: User cannot list.*EKS access entry"):
        KubeClient(kube_api).list("inferenceendpointconfigs")


def test_other_errors_are_not_retried(kube_api: FakeKubeApi) -> None:
    kube_api.script.append(Response(422, b"not json"))
    with pytest.raises(KubeError, match="HTTP 422 not json"):
        KubeClient(kube_api).delete("jumpstartmodels", "default", "x")
    assert len(kube_api.calls) == 1


def test_token_is_a_presigned_get_caller_identity_bound_to_the_cluster(_moto: dict[str, Any]) -> None:
    token = get_token(CLUSTER, region=REGION)

    assert token.startswith("k8s-aws-v1.")
    encoded = token.removeprefix("k8s-aws-v1.")
    assert "=" not in encoded and "+" not in encoded and "/" not in encoded  # unpadded base64url
    url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qs(parts.query)
    assert (parts.scheme, parts.netloc) == ("https", f"sts.{REGION}.amazonaws.com")
    assert query["Action"] == ["GetCallerIdentity"] and query["Version"] == ["2011-06-15"]
    assert query["X-Amz-Expires"] == ["60"]
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"][0].split(";")
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"] and "X-Amz-Signature" in query


# -- HttpsTransport (urllib3) against the fake API server over HTTPS ------------------------------------------------

def test_https_transport_sends_the_token_and_refreshes_it_once_on_401(
        kube_api: FakeKubeApi, cluster_ca: tuple[str, str], tmp_path: Path) -> None:
    tokens = iter(["k8s-aws-v1.first", "k8s-aws-v1.second"])
    kube_api.script.append(Response(401, b'{"message":"Unauthorized"}'))
    with served_over_https(kube_api, *cluster_ca, tmp_path) as url:
        transport = HttpsTransport(url + "/", cluster_ca[0], lambda: next(tokens))
        response = transport.request("GET", "/apis/inference.sagemaker.aws.amazon.com/v1/jumpstartmodels?limit=1")

    assert response.status == 200 and response.json()["items"] == []
    assert kube_api.tokens == ["Bearer k8s-aws-v1.first", "Bearer k8s-aws-v1.second"]
    assert kube_api.calls[0][1] == "/apis/inference.sagemaker.aws.amazon.com/v1/jumpstartmodels?limit=1"


def test_https_transport_trusts_only_the_cluster_ca_and_leaves_tls_errors_to_the_next_poll(
        kube_api: FakeKubeApi, cluster_ca: tuple[str, str], tmp_path: Path, clock: FakeClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    import urllib3.util.retry

    monkeypatch.setattr(urllib3.util.retry.time, "sleep", clock.sleep)
    other_ca, _ = self_signed_certificate()
    with served_over_https(kube_api, *cluster_ca, tmp_path) as url:
        transport = HttpsTransport(url, other_ca, lambda: "k8s-aws-v1.t")
        with pytest.raises(KubeUnavailable, match=r"cannot reach the EKS API server .*CERTIFICATE_VERIFY_FAILED"):
            transport.request("GET", "/apis/x")
    assert kube_api.calls == [] and clock.sleeps == []  # refused in the handshake, and not retried


def test_https_transport_maps_errors(kube_api: FakeKubeApi, cluster_ca: tuple[str, str], tmp_path: Path) -> None:
    with served_over_https(kube_api, *cluster_ca, tmp_path) as url:
        transport = HttpsTransport(url, cluster_ca[0], lambda: "k8s-aws-v1.t")
        assert transport.request("DELETE", "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/d/jumpstartmodels/x",
                                 json.dumps({"propagationPolicy": "Background"}).encode()).status == 404

    gone = f"https://127.0.0.1:{free_port()}"
    with pytest.raises(KubeUnavailable, match=rf"cannot reach the EKS API server {re.escape(gone)}"):
        HttpsTransport(gone, cluster_ca[0], lambda: "k8s-aws-v1.t").request("GET", "/apis/x")


def test_a_transport_without_retries_sends_each_request_once(
        kube_api: FakeKubeApi, cluster_ca: tuple[str, str], tmp_path: Path) -> None:
    """``retries=False`` (the node-readiness handler's: its next poll is the retry) answers the first 503."""
    kube_api.script += [Response(503)] * 3
    with served_over_https(kube_api, *cluster_ca, tmp_path) as url:
        response = HttpsTransport(url, cluster_ca[0], lambda: "k8s-aws-v1.t", retries=False).request("GET", "/x")
    assert response.status == 503 and len(kube_api.calls) == 1

