"""Test doubles for the endpoint janitor: a fake Kubernetes API server (also served over HTTPS) and a fake clock."""

from __future__ import annotations

import json
import ssl
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from hyperpod_runtime.eks.kube import GROUP, VERSION, Response

REGION = "us-west-2"
ACCOUNT = "123456789012"  # moto's default account
CLUSTER = "dpd-eks"
DEPLOYMENT = "hyperpod-dpd"
#: What the operator tags everything with, in every cluster (AmazonSageMakerHyperPodInferenceAccess conditions).
OPERATOR_TAGS = [{"Key": "CreatedBy", "Value": "HyperPodInference"}]
#: OPERATOR_TAGS plus the InferenceEndpointConfig's spec.tags of deployment DEPLOYMENT, as propagated (CRD).
OURS = [*OPERATOR_TAGS, {"Key": "deployment", "Value": DEPLOYMENT},
        {"Key": "eks-cluster-arn", "Value": f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{CLUSTER}"}]
REGISTRATIONS = "sagemakerendpointregistrations"


class FakeKubeApi:
    """In-memory API server for the operator's CRDs, implementing :class:`kube.Transport`.

    Objects with finalizers get a ``deletionTimestamp`` on DELETE and stay until :meth:`finalize`
    (the operator finishing its cleanup). ``script`` queues canned responses served before the real ones.
    """

    def __init__(self, page_size: int = 2) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.script: list[Response] = []
        self.calls: list[tuple[str, str]] = []
        self.tokens: list[str] = []
        self.served_crds = {"inferenceendpointconfigs", "jumpstartmodels", REGISTRATIONS}
        self._page_size = page_size

    def add(self, plural: str, namespace: str, name: str, *, spec: dict[str, Any] | None = None,
            finalizers: tuple[str, ...] = ("inference.sagemaker.aws.amazon.com/finalizer",),
            status: dict[str, Any] | None = None) -> None:
        self.objects[(plural, namespace, name)] = {
            "metadata": {"namespace": namespace, "name": name, "finalizers": list(finalizers)},
            "spec": spec or {}, "status": {"state": "DeploymentComplete", **(status or {})},
        }

    def finalize(self) -> None:
        for key in [k for k, o in self.objects.items() if o["metadata"].get("deletionTimestamp")]:
            del self.objects[key]

    def request(self, method: str, path: str, body: bytes | None = None) -> Response:
        self.calls.append((method, path))
        if self.script:
            return self.script.pop(0)
        url = urllib.parse.urlsplit(path)
        parts = url.path.strip("/").split("/")
        assert parts[:3] == ["apis", GROUP, VERSION], path
        if method == "GET":
            return self._list(parts[3], urllib.parse.parse_qs(url.query))
        if method == "DELETE":
            assert json.loads(body or b"{}")["propagationPolicy"] == "Background"
            return self._delete(parts[5], parts[4], parts[6])
        return Response(405)

    def _list(self, plural: str, query: dict[str, list[str]]) -> Response:
        if plural not in self.served_crds:
            return Response(404, b'{"kind":"Status","message":"the server could not find the requested resource"}')
        items = [o for (p, _, _), o in sorted(self.objects.items()) if p == plural]
        start = int(query.get("continue", ["0"])[0])
        page = items[start:start + self._page_size]
        more = start + self._page_size < len(items)
        return Response(200, json.dumps({
            "items": page, "metadata": {"continue": str(start + self._page_size) if more else ""}}).encode())

    def _delete(self, plural: str, namespace: str, name: str) -> Response:
        obj = self.objects.get((plural, namespace, name))
        if obj is None:
            return Response(404, b'{"kind":"Status","message":"not found"}')
        if obj["metadata"]["finalizers"]:
            obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        else:
            del self.objects[(plural, namespace, name)]
        return Response(200, b"{}")


class FakeClock:
    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def self_signed_certificate(host: str = "127.0.0.1") -> tuple[str, str]:
    """``(certificate PEM, key PEM)`` of a self-signed CA certificate for ``host`` (an IP address), as an EKS
    cluster's certificate authority signs its API server."""
    import datetime
    import ipaddress

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
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem.decode()


@contextmanager
def served_over_https(api: FakeKubeApi, cert_pem: str, key_pem: str, folder: Path) -> Iterator[str]:
    """``api`` behind a local HTTPS server presenting ``cert_pem``; yields its URL. Each request's
    ``Authorization`` header is appended to ``api.tokens``."""
    from fake_http import QuietHandler

    class Handler(QuietHandler):
        def _answer(self) -> None:
            api.tokens.append(self.headers.get("Authorization", ""))
            n = int(self.headers.get("Content-Length") or 0)
            response = api.request(self.command, self.path, self.rfile.read(n) if n else None)
            self.send_response(response.status)
            for header, value in response.headers.items():
                self.send_header(header, value)
            self.send_header("Content-Length", str(len(response.body)))
            self.end_headers()
            self.wfile.write(response.body)

        do_GET = do_DELETE = _answer

    (folder / "server.crt").write_text(cert_pem)
    (folder / "server.key").write_text(key_pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "server.crt", folder / "server.key")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
