"""Fake DPD endpoint that follows the router's published flow, with the metrics each pod would expose on HyperPod.

* **Router** (production-stack ``request_service/request.py``, ``route_disaggregated_prefill_request``, which the
  HyperPod DPD router is built on): a prompt of at least ``threshold`` words is disaggregated: the router sends
  it to a prefill engine with ``max_tokens=1`` and waits for that leg to finish, and only then opens the
  streaming request on the decode engine; a shorter prompt goes straight to decode. A failed prefill leg ends the
  request (the decode leg is never opened). The router's own overhead is not measured by any engine.
* **Engines** (vLLM 0.19 semantics, ``shared/metrics/vllm-0.19.0.json``): ``max_num_seqs`` requests run at once,
  the rest wait (queue). ``vllm:time_to_first_token_seconds`` is arrival to first token *on that engine*,
  ``vllm:e2e_request_latency_seconds`` arrival to finish, ``vllm:request_success_total{finished_reason}`` per
  finished request. A decode engine serving a disaggregated request waits for the KV transfer (LMCache retrieve)
  instead of computing the prefill, and its LMCache counters count the prompt's tokens once per TP rank
  (``worker_id``; every rank counts the same tokens: ``lmcache/observability.py``, 0.4.3).
* **Reverse-proxy sidecar** of each pod: ``model_invocations_total`` per request that reaches the pod and
  ``model_errors_total`` per failed one (AWS inference observability page; a disaggregated request is two
  invocations), by ``method``, ``uri`` and ``status`` as AWS's HyperPod inference dashboard reads them
  (inference.json: ``method="POST", uri="/invocations"``, errors by ``status``); the router posts to
  ``/v1/chat/completions``.

Series carry the labels the HyperPod metrics path adds (``namespace``, ``pod_name``, ``metric_source``) and the
exporters' own; pod names follow the operator's convention. Nothing here is tuned to our queries: it serves
what the pods would, and the tests compare the queries with what the client measured.
"""

from __future__ import annotations

import bisect
import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any

from fake_http import QuietHandler, local_url, serving

BUCKETS = (0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0)
#: What clients send and vLLM labels its series with: --served-model-name (model.name); LMCache labels its own with
#: vLLM's --model, the weights' mount path /opt/ml/model/<model.name>/<revision> (lmcache/observability.py:1814-1822).
MODEL = "llama-3-3-70b-instruct"
MODEL_PATH = f"/opt/ml/model/{MODEL}/sha256-1f6441a8da688874"
REASONS = ("stop", "length", "abort", "error", "repetition")


class Histogram:
    def __init__(self) -> None:
        self.counts = [0] * len(BUCKETS)
        self.total, self.count = 0.0, 0

    def observe(self, value: float) -> None:
        i = bisect.bisect_left(BUCKETS, value)
        for j in range(i, len(BUCKETS)):
            self.counts[j] += 1
        self.total += value
        self.count += 1

    def lines(self, name: str, labels: str) -> list[str]:
        out = [f'{name}_bucket{{{labels},le="{le!r}"}} {n}' for le, n in zip(BUCKETS, self.counts, strict=True)]
        return [*out, f'{name}_bucket{{{labels},le="+Inf"}} {self.count}', f"{name}_sum{{{labels}}} {self.total!r}",
                f"{name}_count{{{labels}}} {self.count}"]


@dataclass(frozen=True)
class EngineShape:
    max_num_seqs: int
    prefill_s_per_word: float
    kv_transfer_s: float = 0.0
    itl_s: float = 0.005


class Engine:
    """One vLLM pod (its engine, its LMCache and its reverse-proxy sidecar) of role ``prefill`` or ``decode``."""

    HISTOGRAMS = ("vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
                  "vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds",
                  "vllm:request_time_per_output_token_seconds")

    def __init__(self, namespace: str, pod: str, shape: EngineShape, tp_ranks: int) -> None:
        self.namespace, self.pod, self.shape, self.tp_ranks = namespace, pod, shape, tp_ranks
        self.slots = threading.Semaphore(shape.max_num_seqs)
        self.lock = threading.Lock()
        self.hist = {n: Histogram() for n in self.HISTOGRAMS}
        self.finished = dict.fromkeys(REASONS, 0)
        self.prompt_tokens = self.generation_tokens = 0
        self.invocations = self.errors = 0
        self.kv_requested = self.kv_hit = 0

    def serve(self, body: dict[str, Any], disaggregated: bool) -> Iterator[str]:
        """Run one request; yields each output token as it is produced. Raises RuntimeError when it fails."""
        arrival = time.perf_counter()
        words = len(prompt_of(body).split())
        with self.lock:
            self.invocations += 1
        if "FAIL-" + ("PREFILL" if self.pod.startswith("prefill-") else "DECODE") in prompt_of(body):
            with self.lock:
                self.errors += 1
            raise RuntimeError("engine error")
        n_out = int(body.get("max_tokens") or 1)
        with self.slots:
            scheduled = time.perf_counter()
            if disaggregated and self.pod.startswith("decode-"):
                time.sleep(self.shape.kv_transfer_s)  # LMCache retrieve: the KV the prefill leg computed
            else:
                time.sleep(self.shape.prefill_s_per_word * words)
            first = time.perf_counter()
            yield "tok"
            for _ in range(n_out - 1):
                time.sleep(self.shape.itl_s)
                yield "tok"
            done = time.perf_counter()
        with self.lock:
            self.hist["vllm:time_to_first_token_seconds"].observe(first - arrival)
            self.hist["vllm:e2e_request_latency_seconds"].observe(done - arrival)
            self.hist["vllm:request_queue_time_seconds"].observe(scheduled - arrival)
            self.hist["vllm:request_prefill_time_seconds"].observe(first - scheduled)
            self.hist["vllm:request_time_per_output_token_seconds"].observe((done - first) / max(1, n_out - 1))
            self.finished["length"] += 1
            self.prompt_tokens += words
            self.generation_tokens += n_out
            if disaggregated and self.pod.startswith("decode-"):
                self.kv_requested += words
                self.kv_hit += words

    def exposition(self) -> list[str]:
        pod = f'namespace="{self.namespace}",pod_name="{self.pod}"'
        engine = f'{pod},metric_source="model-container",model_name="{MODEL}",engine="0"'
        proxy = f'{pod},metric_source="reverse-proxy",model_name="{MODEL}",method="POST",uri="/v1/chat/completions"'
        with self.lock:
            lines = [line for name, h in self.hist.items() for line in h.lines(name, engine)]
            lines += [f'vllm:request_success_total{{{engine},finished_reason="{r}"}} {n}'
                      for r, n in self.finished.items()]
            lines += [f"vllm:prompt_tokens_total{{{engine}}} {self.prompt_tokens}",
                      f"vllm:generation_tokens_total{{{engine}}} {self.generation_tokens}",
                      f'model_invocations_total{{{proxy},status="200"}} {self.invocations - self.errors}',
                      f'model_invocations_total{{{proxy},status="500"}} {self.errors}',
                      f'model_errors_total{{{proxy},status="500"}} {self.errors}']
            for rank in range(self.tp_ranks):
                lmc = (f'{pod},metric_source="model-container",model_name="{MODEL_PATH}",worker_id="{rank}",'
                       'role="worker"')
                lines += [f"lmcache:num_requested_tokens_total{{{lmc}}} {self.kv_requested}",
                          f"lmcache:num_hit_tokens_total{{{lmc}}} {self.kv_hit}"]
        return lines


def prompt_of(body: dict[str, Any]) -> str:
    return " ".join(m["content"] for m in body["messages"] if isinstance(m.get("content"), str))


class _RouterHandler(QuietHandler):
    server: _RouterServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as uvicorn does (TCP_NODELAY): no delayed-ACK stall on the first small event

    def do_POST(self) -> None:
        body = self.read_json()
        flow = self.server.flow
        disaggregated = len(prompt_of(body).split()) >= flow.threshold
        if disaggregated:
            prefill = flow.next_prefill()
            try:  # the prefill leg runs to completion first (max_tokens=1, not streamed)
                for _ in prefill.serve({**body, "max_tokens": 1, "stream": False}, True):
                    pass
            except RuntimeError:
                self.send_body(500, {"error": "prefill failed"})
                return
        tokens = flow.decode.serve(body, disaggregated)
        try:
            first = next(tokens)
        except RuntimeError:
            self.send_body(500, {"error": "decode failed"})
            return
        self.start_chunked("text/event-stream", ("Connection", "close"))
        for tok in itertools.chain((first,), tokens):  # relayed as the decode engine produces them
            self.event({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": tok}}]})
        self.chunk(b"data: [DONE]\n\n")
        self.end_chunks()


class _RouterServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, flow: DpdFlow) -> None:
        super().__init__(("127.0.0.1", 0), _RouterHandler)
        self.flow = flow


class DpdFlow:
    """A DPD endpoint: ``prefill_replicas`` prefill pods, one decode pod, the router in front."""

    def __init__(self, namespace: str, endpoint: str, *, threshold: int, prefill: EngineShape, decode: EngineShape,
                 prefill_replicas: int = 1, tp_ranks: int = 8) -> None:
        self.namespace, self.endpoint, self.threshold = namespace, endpoint, threshold
        self.prefills = [Engine(namespace, f"prefill-{endpoint}-6f5e4d3c2-p{i}a{i}b", prefill, tp_ranks)
                         for i in range(prefill_replicas)]
        self.decode = Engine(namespace, f"decode-{endpoint}-5e4d3c2b1-d0c0e", decode, tp_ranks)
        self._turn = 0
        self._lock = threading.Lock()
        self._server = _RouterServer(self)
        self._stack = ExitStack()

    def next_prefill(self) -> Engine:
        with self._lock:  # roundrobin over the prefillers
            self._turn += 1
            return self.prefills[self._turn % len(self.prefills)]

    @property
    def url(self) -> str:
        return local_url(self._server)

    def exposition(self) -> list[str]:
        return [line for e in (*self.prefills, self.decode) for line in e.exposition()]

    def __enter__(self) -> DpdFlow:
        self._stack.enter_context(serving(self._server))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()


@dataclass(frozen=True)
class ClientResult:
    ttft_s: float | None
    """Send to first streamed token, as a client measures it; None when the request failed."""
    ok: bool


_local = threading.local()


def _session() -> Any:
    """One ``requests`` session per client thread, as a benchmark user keeps one (no per-request set-up)."""
    import requests

    if not hasattr(_local, "session"):
        _local.session = requests.Session()
        _local.session.trust_env = False  # no proxy or netrc lookups on loopback
    return _local.session


def request(url: str, words: int, *, tag: str = "", max_tokens: int = 4) -> ClientResult:
    """One streaming chat completion through the router, timed the way genai-bench 0.0.5 times TTFT
    (``user/openai_user.py``: ``requests`` with ``stream=True``, ``iter_lines(chunk_size=None)``, the first
    ``data:`` chunk with content). ``tag`` goes into the prompt (``FAIL-PREFILL`` / ``FAIL-DECODE`` make that
    leg fail)."""
    prompt = " ".join([tag, *["word"] * words]).strip()
    payload = {"model": MODEL, "stream": True, "max_tokens": max_tokens,
               "messages": [{"role": "user", "content": prompt}]}
    session = _session()
    start = time.monotonic()
    with session.post(f"{url}/v1/chat/completions", json=payload, stream=True, timeout=30) as resp:
        if resp.status_code != 200:
            return ClientResult(ttft_s=None, ok=False)
        ttft = None
        for line in resp.iter_lines(chunk_size=None):
            if ttft is None and line.strip().startswith(b"data: {"):
                ttft = time.monotonic() - start
    return ClientResult(ttft_s=ttft, ok=ttft is not None)


@contextmanager
def exporting(flows: list[DpdFlow]) -> Iterator[str]:
    """One /metrics endpoint for every pod of ``flows`` (as the HyperPod collector would scrape them); yields
    ``host:port``."""

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            text = "\n".join(line for f in flows for line in f.exposition()) + "\n"
            self.send_body(200, text, "text/plain; version=0.0.4")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with serving(server):
        yield f"127.0.0.1:{server.server_address[1]}"
