"""The Kubernetes client (over a fake transport) and the EKS bearer token."""

from __future__ import annotations

import base64
import urllib.parse
from typing import Any

import pytest
from janitor_fakes import CLUSTER, REGION, FakeClock, FakeKubeApi

from hyperpod_constructs.endpoint_janitor_handler.eks_token import get_token
from hyperpod_constructs.endpoint_janitor_handler.kube import (
    KubeAccessDenied,
    KubeClient,
    KubeError,
    KubeUnavailable,
    Response,
)


def test_list_follows_continue_tokens_across_all_namespaces(kube_api: FakeKubeApi) -> None:
    for i in range(5):
        kube_api.add("inferenceendpointconfigs", f"ns-{i}", f"m{i}")

    items = KubeClient(kube_api).list("inferenceendpointconfigs")

    assert [o["metadata"]["name"] for o in items] == ["m0", "m1", "m2", "m3", "m4"]
    paths = [p for _, p in kube_api.calls]
    assert paths[0] == "/apis/inference.sagemaker.aws.amazon.com/v1/inferenceendpointconfigs?limit=250"
    assert len(paths) == 3 and "continue=2" in paths[1]


def test_retries_are_bounded_and_capped(kube_api: FakeKubeApi, clock: FakeClock) -> None:
    kube_api.script += [Response(503)] * 10

    with pytest.raises(KubeUnavailable, match="HTTP 503 after 6 attempts"):
        KubeClient(kube_api, sleep=clock.sleep).list("jumpstartmodels")
    assert clock.sleeps == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert len(kube_api.calls) == 6


def test_retry_after_is_capped(kube_api: FakeKubeApi, clock: FakeClock) -> None:
    kube_api.script += [Response(429, headers={"retry-after": "3600"})]
    KubeClient(kube_api, sleep=clock.sleep).list("jumpstartmodels")
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
