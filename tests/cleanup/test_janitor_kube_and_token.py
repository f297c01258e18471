"""The Kubernetes client (over a fake transport) and the EKS bearer token."""

from __future__ import annotations

import base64
import urllib.parse
from typing import Any

import pytest
from janitor_fakes import CLUSTER, REGION, FakeClock, FakeKubeApi

from hyperpod_runtime.eks.kube import (
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


# -- HttpsTransport (urllib), with urlopen replaced --------------------------------------------------------

def _self_signed_pem() -> str:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


class _FakeUrlopen:
    def __init__(self, statuses: list[int | Exception]) -> None:
        self.statuses = statuses
        self.requests: list[Any] = []

    def __call__(self, request: Any, *, context: Any, timeout: float) -> Any:
        import io
        import urllib.error

        self.requests.append(request)
        status = self.statuses.pop(0)
        if isinstance(status, Exception):
            raise status
        if status >= 400:
            raise urllib.error.HTTPError(request.full_url, status, "err", {}, io.BytesIO(b'{"message":"x"}'))

        class _Resp(io.BytesIO):
            headers = {"Content-Type": "application/json"}

            def __init__(self) -> None:
                super().__init__(b'{"items":[]}')
                self.status = status

        return _Resp()


def test_https_transport_sends_the_token_and_refreshes_it_once_on_401(monkeypatch: pytest.MonkeyPatch) -> None:
    import urllib.request

    from hyperpod_runtime.eks.kube import HttpsTransport

    tokens = iter(["k8s-aws-v1.first", "k8s-aws-v1.second"])
    fake = _FakeUrlopen([401, 200])
    monkeypatch.setattr(urllib.request, "urlopen", fake)
    transport = HttpsTransport("https://ABC.gr7.us-west-2.eks.amazonaws.com/", _self_signed_pem(),
                               lambda: next(tokens))

    response = transport.request("GET", "/apis/x/v1/y?limit=1")

    assert response.status == 200 and response.json() == {"items": []}
    assert [r.get_header("Authorization") for r in fake.requests] == [
        "Bearer k8s-aws-v1.first", "Bearer k8s-aws-v1.second"]
    assert fake.requests[0].full_url == "https://ABC.gr7.us-west-2.eks.amazonaws.com/apis/x/v1/y?limit=1"


def test_https_transport_maps_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    import urllib.error
    import urllib.request

    from hyperpod_runtime.eks.kube import HttpsTransport

    monkeypatch.setattr(urllib.request, "urlopen", _FakeUrlopen([404, urllib.error.URLError("timed out")]))
    transport = HttpsTransport("https://eks.example", _self_signed_pem(), lambda: "k8s-aws-v1.t")

    assert transport.request("DELETE", "/apis/x", b"{}").status == 404
    with pytest.raises(KubeUnavailable, match=r"cannot reach the EKS API server https://eks\.example"):
        transport.request("GET", "/apis/x")
