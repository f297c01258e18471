"""One streamed OpenAI-compatible request (server-sent events) and its latencies.

vLLM's OpenAI server streams ``data: {json}`` events ending with ``data: [DONE]``; with
``stream_options.include_usage`` the last event carries ``usage.completion_tokens``. TTFT is the time to the
first event with text; TPOT = (E2E - TTFT) / (output tokens - 1), the genai-bench definition
(``shared/reference/operations.md``, "Benchmark clients").
"""

from __future__ import annotations

import json
import ssl
import time
from dataclasses import dataclass
from typing import Any

import urllib3

from hyperpod_core.errors import CommandFailed


@dataclass(frozen=True, kw_only=True)
class StreamResult:
    text: str
    response_id: str | None
    finish_reason: str | None
    output_tokens: int
    events: int
    ttft_seconds: float
    e2e_seconds: float

    @property
    def tpot_seconds(self) -> float | None:
        if self.output_tokens < 2:
            return None
        return (self.e2e_seconds - self.ttft_seconds) / (self.output_tokens - 1)


def chat_payload(model: str, prompt: str, max_tokens: int, *, chat: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                            "stream_options": {"include_usage": True}}
    if chat:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


def stream(url: str, payload: dict[str, Any], *, ca_file: str | None, timeout_seconds: float) -> StreamResult:
    """POST ``payload`` to ``url`` and read the event stream to the end."""
    kwargs: dict[str, Any] = {"retries": False, "timeout": urllib3.Timeout(connect=10, read=timeout_seconds)}
    if url.startswith("https://"):
        kwargs["cert_reqs"] = ssl.CERT_REQUIRED
        if ca_file:
            kwargs["ca_certs"] = ca_file
    pool = urllib3.PoolManager(**kwargs)
    started = time.perf_counter()
    try:
        response = pool.request("POST", url, body=json.dumps(payload).encode(), preload_content=False,
                                headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
    except urllib3.exceptions.SSLError as exc:
        raise CommandFailed(f"{url}: TLS verification failed ({_reason(exc)}); the PEM from the TLS bucket must "
                            "sign the load balancer's certificate, or pass --url") from None
    except urllib3.exceptions.HTTPError as exc:
        raise CommandFailed(f"{url}: unreachable ({_reason(exc)})") from None
    try:
        if response.status != 200:
            body = response.read(2000).decode("utf-8", errors="replace").strip().replace("\n", " ")
            hint = " (503: the endpoint is still loading; wait for DeploymentComplete)" if response.status == 503 \
                else ""
            raise CommandFailed(f"{url}: HTTP {response.status}{hint}: {body[:200]}")
        return _read_events(response, started)
    except urllib3.exceptions.HTTPError as exc:
        raise CommandFailed(f"{url}: stream broken ({_reason(exc)})") from None
    finally:
        response.release_conn()


def _read_events(response: Any, started: float) -> StreamResult:
    parts: list[str] = []
    first: float | None = None
    events = 0
    content_events = 0
    usage_tokens: int | None = None
    response_id: str | None = None
    finish: str | None = None
    done = False
    buffer = b""
    for chunk in response.stream(1024, decode_content=True):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for raw in lines:
            line = raw.decode("utf-8", errors="replace").rstrip("\r")
            if not line.startswith("data:"):
                continue
            data = line[len("data:"):].strip()
            if data == "[DONE]":
                done = True
                continue
            try:
                event = json.loads(data)
            except json.JSONDecodeError:
                raise CommandFailed(f"stream event is not JSON: {data[:120]!r}") from None
            events += 1
            response_id = response_id or event.get("id")
            if event.get("usage"):
                usage_tokens = event["usage"].get("completion_tokens")
            for choice in event.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content") or choice.get("text") or ""
                if piece:
                    if first is None:
                        first = time.perf_counter()
                    parts.append(piece)
                    content_events += 1
                finish = choice.get("finish_reason") or finish
    ended = time.perf_counter()
    if not done:
        raise CommandFailed("the stream ended without 'data: [DONE]'")
    if first is None:
        raise CommandFailed("the stream carried no text")
    return StreamResult(text="".join(parts), response_id=response_id, finish_reason=finish,
                        output_tokens=usage_tokens if usage_tokens is not None else content_events,
                        events=events, ttft_seconds=first - started, e2e_seconds=ended - started)


def _reason(exc: Exception) -> str:
    inner = getattr(exc, "reason", None) or exc
    text = str(inner).strip().splitlines()
    return text[0][:160] if text else type(inner).__name__
