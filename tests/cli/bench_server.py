"""Test helpers for the benchmark: a local OpenAI-compatible streaming server and a tiny offline tokenizer.

The server answers ``POST /v1/chat/completions`` with ``stream: true`` the way vLLM's OpenAI server does
(server-sent events: ``data: {chat.completion.chunk}`` per token, a ``finish_reason`` chunk, a ``usage`` chunk
with ``choices: []`` when ``stream_options.include_usage`` is set, then ``data: [DONE]``), and shapes its
latencies per role:

* ``colocated``: prefill and decode share the engine, so every request in flight slows the others' decode
  steps (inter-token latency grows with concurrency) and TTFT is the prefill alone;
* ``dpd``: prompts at or above the routing threshold are prefilled elsewhere, pay a KV transfer on the first
  token, then decode at a steady inter-token latency; shorter prompts behave like colocated.

Prompt tokens are counted as whitespace-separated words: the tokenizer below is word-level, so both count
the same way. Nothing here is a numeric claim about real hardware; it only makes the two modes differ in the
direction DPD is documented to move them (AWS ML blog 2026-07-10: TPOT down, TTFT up by the KV transfer).
"""

from __future__ import annotations

import subprocess
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path

from fake_http import QuietHandler, local_url, serving


@dataclass(frozen=True)
class Shape:
    mode: str
    threshold: int = 4096
    prefill_s_per_1k: float = 0.010
    kv_transfer_s: float = 0.010
    itl_s: float = 0.005
    interference_per_request: float = 0.3


class _Handler(QuietHandler):
    server: _Server
    protocol_version = "HTTP/1.1"  # chunked transfer, as uvicorn streams vLLM's events

    def do_POST(self) -> None:
        if self.path != "/v1/chat/completions":
            self.send_error(404)
            return
        body = self.read_json()
        prompt = " ".join(m["content"] for m in body["messages"] if isinstance(m["content"], str))
        n_in, n_out = len(prompt.split()), int(body.get("max_tokens") or 16)
        shape = self.server.shape
        disaggregated = shape.mode == "dpd" and n_in >= shape.threshold
        with self.server.lock:
            self.server.active += 1
            self.server.requests += 1
            self.server.disaggregated += disaggregated
        try:
            ttft = shape.prefill_s_per_1k * n_in / 1000 + (shape.kv_transfer_s if disaggregated else 0.0)
            self.start_chunked("text/event-stream", ("Connection", "close"))
            time.sleep(ttft)
            for i in range(n_out):
                if i:
                    slow = 1.0 if disaggregated else 1 + shape.interference_per_request * (self.server.active - 1)
                    time.sleep(shape.itl_s * slow)
                self.event({"id": "c", "object": "chat.completion.chunk", "model": body["model"],
                             "choices": [{"index": 0, "delta": {"content": " tok"}, "finish_reason": None}]})
            self.event({"id": "c", "object": "chat.completion.chunk", "model": body["model"],
                         "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
            if (body.get("stream_options") or {}).get("include_usage"):
                self.event({"id": "c", "object": "chat.completion.chunk", "model": body["model"], "choices": [],
                             "usage": {"prompt_tokens": n_in, "completion_tokens": n_out,
                                       "total_tokens": n_in + n_out}})
            self.chunk(b"data: [DONE]\n\n")
            self.end_chunks()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped a run with requests in flight
        finally:
            with self.server.lock:
                self.server.active -= 1


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, shape: Shape) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.shape = shape
        self.lock = threading.Lock()
        self.active = 0
        self.requests = 0
        self.disaggregated = 0
        """Requests that went prefill -> decode: what the prefill pods' request counters would show."""


class StreamingServer:
    """``with StreamingServer(Shape("dpd")) as s: s.url``"""

    def __init__(self, shape: Shape) -> None:
        self._server = _Server(shape)
        self._stack = ExitStack()

    @property
    def url(self) -> str:
        return local_url(self._server)

    @property
    def requests(self) -> int:
        return self._server.requests

    @property
    def disaggregated(self) -> int:
        return self._server.disaggregated

    def set_mode(self, mode: str) -> None:
        """Switch the role shaping (the endpoint was re-applied in the other mode)."""
        self._server.shape = Shape(mode=mode, threshold=self._server.shape.threshold)

    def __enter__(self) -> StreamingServer:
        self._stack.enter_context(serving(self._server))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()


_TOKENIZER_SCRIPT = r"""
import sys
from importlib.resources import files
from tokenizers import Tokenizer, models, pre_tokenizers, decoders
from transformers import PreTrainedTokenizerFast

text = files("genai_bench.data").joinpath("sonnet.txt").read_text()
words = sorted({w for w in text.split()} | {"tok"})
vocab = {"[UNK]": 0, "[BOS]": 1, "[EOS]": 2, **{w: i + 3 for i, w in enumerate(words)}}
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", bos_token="[BOS]", eos_token="[EOS]")
fast.save_pretrained(sys.argv[1])
"""


def build_tokenizer(bench_python: Path, dest: Path) -> Path:
    """A word-level Hugging Face tokenizer over genai-bench's own sample text, built offline in the bench venv."""
    subprocess.run([str(bench_python), "-c", _TOKENIZER_SCRIPT, str(dest)], check=True, timeout=120,
                   capture_output=True, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    return dest
