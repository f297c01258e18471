"""Plumbing shared by the tests' local fake servers (Kubernetes API, OpenAI-compatible streaming).

Each fake models its own behaviour; what they share is here: quiet handlers, JSON and Kubernetes ``Status``
bodies, chunked transfer (how the API server streams logs and vLLM's uvicorn streams server-sent events), a
server thread that stops with the ``with`` block, and a kubeconfig pointing the official client at a URL.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that keeps the test output clean and writes the bodies the fakes answer with."""

    def log_message(self, *args: object) -> None:
        pass

    def send_body(self, code: int, body: Any, content_type: str = "application/json") -> None:
        """``body`` as JSON (or as is, for a ``str``), with its Content-Length."""
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_kube_status(self, code: int, reason: str, message: str = "") -> None:
        """The ``Status`` object the Kubernetes API server answers a failed request with."""
        self.send_body(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
                              "code": code, "message": message or reason})

    def read_json(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n)) if n else None

    def start_chunked(self, content_type: str, *headers: tuple[str, str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()

    def chunk(self, data: bytes | str) -> None:
        """One chunk, flushed: the client sees it as it would a line of a followed log or a streamed token."""
        payload = data.encode() if isinstance(data, str) else data
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()

    def event(self, data: dict[str, Any]) -> None:
        """One server-sent event (``data: {json}``), as vLLM's OpenAI server streams them."""
        self.chunk(b"data: " + json.dumps(data).encode() + b"\n\n")

    def end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def free_port() -> int:
    """A local port nothing listens on (bound, read, released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def local_url(server: ThreadingHTTPServer) -> str:
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}"


@contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator[ThreadingHTTPServer]:
    """Serve on a daemon thread for the ``with`` block; then stop and close the socket."""
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def write_kubeconfig(path: Path, server_url: str, *, name: str = "fake", token: str = "fake-token") -> Path:
    """A kubeconfig (JSON is valid YAML) whose current context talks to ``server_url`` with a bearer token."""
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": {"server": server_url}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "users": [{"name": name, "user": {"token": token}}]}))
    return path
