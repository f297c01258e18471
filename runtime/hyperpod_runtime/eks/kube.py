"""A minimal Kubernetes API client for the operator's custom resources: list across namespaces, delete.

The client talks to an injectable :class:`Transport`, so tests drive it with a fake API server and the
Lambda with :class:`HttpsTransport` (urllib3, the cluster CA, an EKS bearer token, urllib3's ``Retry``).

Why not the official ``kubernetes`` client, which the command line uses: it is not in the Lambda Python runtime
(the runtime has boto3, botocore and what they require: AWS Lambda Developer Guide, "Building Lambda functions
with Python"), so the function would carry it. Measured here (kubernetes 36.0.3, CPython 3.11, x86_64): it and the
18 distributions it requires that the runtime lacks take 57 MB installed (kubernetes alone 40 MB; the limit is
250 MB unzipped for a function with its layers, Lambda Developer Guide, "Lambda quotas"), 7 of them with compiled
extensions (aiohttp, PyYAML, multidict, yarl, frozenlist, propcache, charset-normalizer) that would have to be
built for the function's architecture, and ``import kubernetes.client`` adds about 0.46 s to a cold start after
boto3 is loaded, this module about 0.01 s. The janitor makes two calls (list, delete) of one API group. urllib3
is botocore's HTTP library (botocore requires ``urllib3>=1.25.4,<3``), so it is there wherever boto3 is.
"""

from __future__ import annotations

import json
import ssl
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import urllib3
from urllib3.util import Retry

GROUP = "inference.sagemaker.aws.amazon.com"
VERSION = "v1"
#: (kind, plural) of every operator object whose deletion makes the operator tear down AWS resources.
KINDS: tuple[tuple[str, str], ...] = (
    ("InferenceEndpointConfig", "inferenceendpointconfigs"),
    ("JumpStartModel", "jumpstartmodels"),
)
#: Transient statuses: throttled (429) or the API server briefly unavailable.
RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
#: Requests per call when the API server keeps answering :data:`RETRYABLE_STATUSES`.
MAX_ATTEMPTS = 6
#: The longest wait between two of them, ``Retry-After`` included: a poll must end inside its Lambda timeout.
MAX_DELAY_SECONDS = 20.0
_PAGE_SIZE = 250


class _Retry(Retry):
    """urllib3's ``Retry``, with the server's ``Retry-After`` capped at :data:`MAX_DELAY_SECONDS` (recent urllib3
    has ``retry_after_max`` for it; the runtime's urllib3 is whichever its botocore brought, ``>=1.25.4,<3``)."""

    def get_retry_after(self, response: Any) -> float | None:
        seconds = super().get_retry_after(response)
        return None if seconds is None else min(seconds, MAX_DELAY_SECONDS)


#: Retry :data:`RETRYABLE_STATUSES` (GET and DELETE are among urllib3's idempotent methods), waiting what the
#: server's ``Retry-After`` says, else 0, 2, 4, 8, 16 s (urllib3: ``backoff_factor * 2 ** (retries - 1)``, no wait
#: before the first retry); the last answer is returned, not raised. A connection, TLS or read error is not
#: retried here: the janitor's next poll is.
RETRY = _Retry(total=MAX_ATTEMPTS - 1, connect=0, read=0, other=0, status_forcelist=RETRYABLE_STATUSES,
               backoff_factor=1.0, respect_retry_after_header=True, raise_on_status=False)


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        return json.loads(self.body or b"{}")


class Transport(Protocol):
    """Sends one request to the API server. ``path`` starts with ``/`` and includes the query string."""

    def request(self, method: str, path: str, body: bytes | None = None) -> Response: ...


class KubeError(Exception):
    """The API server answered with an error that retrying will not fix."""


class KubeAccessDenied(KubeError):
    """401/403: the Lambda role has no (or a too narrow) EKS access entry."""


class KubeUnavailable(KubeError):
    """Throttled or unreachable after every retry; worth trying again on the next poll."""


class HttpsTransport:
    """urllib3 transport that trusts only the cluster CA, sends an EKS bearer token and retries throttling.

    ``retries``: urllib3's retries of each request. Default: :data:`RETRY`; ``False`` sends each request once
    (a caller whose next poll is its retry)."""

    def __init__(self, endpoint: str, ca_pem: str, token_provider: Callable[[], str], *,
                 timeout_seconds: float = 20.0, retries: Retry | bool = RETRY) -> None:
        self._endpoint = endpoint.rstrip("/")
        self._pool = urllib3.PoolManager(ssl_context=ssl.create_default_context(cadata=ca_pem), retries=retries,
                                         timeout=timeout_seconds)
        self._token_provider = token_provider
        self._token: str | None = None

    def request(self, method: str, path: str, body: bytes | None = None) -> Response:
        response = self._send(method, path, body)
        if response.status == 401:  # expired or not-yet-valid token: mint a fresh one, once
            self._token = None
            response = self._send(method, path, body)
        return response

    def _send(self, method: str, path: str, body: bytes | None) -> Response:
        if self._token is None:
            self._token = self._token_provider()
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            resp = self._pool.request(method, self._endpoint + path, body=body, headers=headers)
        except urllib3.exceptions.HTTPError as err:
            raise KubeUnavailable(f"cannot reach the EKS API server {self._endpoint}: {err}") from err
        return Response(resp.status, resp.data, dict(resp.headers))


class KubeClient:
    """List and delete the operator's objects. The transport retries throttling (:class:`HttpsTransport`)."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport

    def list(self, plural: str) -> list[dict[str, Any]]:
        """Every object of ``plural`` in all namespaces; ``[]`` when the CRD is not (or no longer) served."""
        items: list[dict[str, Any]] = []
        continue_token = ""
        while True:
            query = {"limit": str(_PAGE_SIZE)}
            if continue_token:
                query["continue"] = continue_token
            path = f"/apis/{GROUP}/{VERSION}/{plural}?{urllib.parse.urlencode(query)}"
            response = self._call("GET", path)
            if response.status == 404:
                return []
            self._raise_for_status(response, f"list {plural}")
            page = response.json()
            items.extend(page.get("items") or [])
            continue_token = (page.get("metadata") or {}).get("continue") or ""
            if not continue_token:
                return items

    def delete(self, plural: str, namespace: str, name: str) -> bool:
        """Request deletion (background propagation). ``False`` if the object was already gone."""
        path = (f"/apis/{GROUP}/{VERSION}/namespaces/{urllib.parse.quote(namespace)}/"
                f"{plural}/{urllib.parse.quote(name)}")
        body = json.dumps({"apiVersion": "v1", "kind": "DeleteOptions",
                           "propagationPolicy": "Background"}).encode()
        response = self._call("DELETE", path, body)
        if response.status == 404:
            return False
        self._raise_for_status(response, f"delete {plural} {namespace}/{name}")
        return True

    def _call(self, method: str, path: str, body: bytes | None = None) -> Response:
        response = self._transport.request(method, path, body)
        if response.status in RETRYABLE_STATUSES:  # still, after the transport's retries
            raise KubeUnavailable(
                f"{method} {path.split('?')[0]} still failed with HTTP {response.status} after "
                f"{MAX_ATTEMPTS} attempts")
        return response

    @staticmethod
    def _raise_for_status(response: Response, action: str) -> None:
        if response.status < 400:
            return
        detail = _status_message(response)
        if response.status in (401, 403):
            raise KubeAccessDenied(
                f"cannot {action}: HTTP {response.status} {detail}. The janitor's Lambda role needs its EKS "
                "access entry (created by EndpointJanitor) to exist until the janitor has finished")
        raise KubeError(f"cannot {action}: HTTP {response.status} {detail}")


def _status_message(response: Response) -> str:
    try:
        return str(response.json().get("message", "")).strip()
    except (ValueError, AttributeError):
        return response.body[:200].decode("utf-8", "replace")
