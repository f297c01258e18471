"""A minimal Kubernetes API client for the operator's custom resources: list across namespaces, delete.

The client talks to an injectable :class:`Transport`, so tests drive it with a fake API server and the
Lambda with :class:`HttpsTransport` (urllib, the cluster CA, an EKS bearer token).
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

GROUP = "inference.sagemaker.aws.amazon.com"
VERSION = "v1"
#: (kind, plural) of every operator object whose deletion makes the operator tear down AWS resources.
KINDS: tuple[tuple[str, str], ...] = (
    ("InferenceEndpointConfig", "inferenceendpointconfigs"),
    ("JumpStartModel", "jumpstartmodels"),
)
#: Transient statuses: throttled (429) or the API server briefly unavailable.
RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
_PAGE_SIZE = 250


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
    """urllib transport that trusts only the cluster CA and sends an EKS bearer token."""

    def __init__(self, endpoint: str, ca_pem: str, token_provider: Callable[[], str], *,
                 timeout_seconds: float = 20.0) -> None:
        self._endpoint = endpoint.rstrip("/")
        self._ssl = ssl.create_default_context(cadata=ca_pem)
        self._token_provider = token_provider
        self._token: str | None = None
        self._timeout = timeout_seconds

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
        request = urllib.request.Request(self._endpoint + path, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, context=self._ssl, timeout=self._timeout) as resp:
                return Response(resp.status, resp.read(), dict(resp.headers))
        except urllib.error.HTTPError as err:
            return Response(err.code, err.read(), dict(err.headers or {}))
        except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
            raise KubeUnavailable(f"cannot reach the EKS API server {self._endpoint}: {err}") from err


class KubeClient:
    """List and delete the operator's objects, retrying throttling with bounded exponential backoff."""

    def __init__(self, transport: Transport, *, sleep: Callable[[float], None] = time.sleep,
                 max_attempts: int = 6, base_delay_seconds: float = 1.0,
                 max_delay_seconds: float = 20.0) -> None:
        self._transport = transport
        self._sleep = sleep
        self._max_attempts = max_attempts
        self._base_delay = base_delay_seconds
        self._max_delay = max_delay_seconds

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
        response = Response(0)
        for attempt in range(self._max_attempts):
            response = self._transport.request(method, path, body)
            if response.status not in RETRYABLE_STATUSES:
                return response
            if attempt + 1 < self._max_attempts:
                self._sleep(self._delay(attempt, response))
        raise KubeUnavailable(
            f"{method} {path.split('?')[0]} still failed with HTTP {response.status} after "
            f"{self._max_attempts} attempts")

    def _delay(self, attempt: int, response: Response) -> float:
        retry_after = {k.lower(): v for k, v in response.headers.items()}.get("retry-after", "")
        if retry_after.isdigit():
            return min(float(retry_after), self._max_delay)
        return min(self._base_delay * 2**attempt, self._max_delay)

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
