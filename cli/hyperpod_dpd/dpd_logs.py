"""Log signatures that tell whether a request took the disaggregated path, and the known ways it fails.

Line formats are LMCache 0.4.3's (the version inside the DPD image ``lmcache/vllm-openai:v0.4.3``, read from the
``lmcache==0.4.3`` wheel on PyPI):

* ``lmcache/logging.py``: every LMCache line is ``<color>[<asctime>] LMCache <LEVEL>:<reset> <message>
  <italic>(<file>:<line>:<logger>)<reset>`` (ANSI colours included, also when piped).
* ``lmcache/v1/cache_engine.py`` (``LMCacheEngine.retrieve``): ``[req_id=%s] Retrieved %d out of %d required
  tokens (from %d total tokens). size: %.4f gb, cost %.4f ms, throughput: %.4f GB/s;``
* ``lmcache/v1/storage_backend/pd_backend.py`` (decoder's allocation loop, WARNING): ``Failed to allocate
  memory object, retrying...``.

The meaning of each signature is AWS's (``shared/reference/operations.md``, "Smoke test and status"; DPD
troubleshooting page): ``Retrieved N out of N`` with N > 0 is KV received from the prefiller; ``Retrieved 0 out
of N`` is KV recomputed on the decoder; a transfer below 1 GB/s is not on EFA (TCP fallback); ``Failed to
allocate memory object`` is a too-small ``PD_BUFFER_SIZE``. The router line is from the DPD guide (S2/S13):
``[INFO] Conditional routing: estimated_tokens=..., threshold=..., disaggregate=True|False``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

#: Below this rate a KV transfer is not using EFA RDMA (operations.md: "< 1 GB/s means EFA is not in use").
EFA_MIN_GBPS: Final = 1.0

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RETRIEVED = re.compile(
    r"(?:\[req_id=(?P<req_id>[^\]]*)\] )?Retrieved (?P<retrieved>\d+) out of (?P<required>\d+) required tokens"
    r"(?: \(from (?P<total>\d+) total tokens\))?"
    r"(?:\. size: (?P<size_gb>[\d.]+) gb, cost (?P<cost_ms>[\d.]+) ms, throughput: (?P<gbps>[\d.]+) GB/s)?")
_ALLOC_FAILED = "Failed to allocate memory object"
_ROUTING = re.compile(
    r"Conditional routing: estimated_tokens=(?P<estimated>\d+), threshold=(?P<threshold>\d+), "
    r"disaggregate=(?P<disaggregate>True|False)")
_K8S_TIMESTAMP = re.compile(r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?P<frac>\.\d+)?(?P<tz>Z|[+-]\d\d:\d\d) ")

Severity = Literal["ok", "info", "error"]


@dataclass(frozen=True, kw_only=True)
class Transfer:
    """One ``Retrieved N out of M`` line of the decoder."""

    retrieved_tokens: int
    required_tokens: int
    total_tokens: int
    """Tokens of the whole prompt (``from N total tokens``); ``required_tokens`` when the line lacks it."""
    throughput_gbps: float | None
    size_gb: float | None
    req_id: str | None

    @property
    def complete(self) -> bool:
        return self.retrieved_tokens > 0 and self.retrieved_tokens == self.required_tokens


@dataclass(frozen=True, kw_only=True)
class Finding:
    """A signature found in a log line: what it means and what to do."""

    severity: Severity
    signature: str
    meaning: str
    fix: str = ""


def strip_ansi(line: str) -> str:
    return _ANSI.sub("", line)


def split_timestamp(line: str) -> tuple[datetime | None, str]:
    """``(time, text)`` of a line read with ``timestamps=true`` (RFC 3339, nanoseconds); ``(None, line)`` else."""
    m = _K8S_TIMESTAMP.match(line)
    if m is None:
        return None, line
    frac = (m.group("frac") or ".0")[1:7].ljust(6, "0")
    tz = "+00:00" if m.group("tz") == "Z" else m.group("tz")
    return datetime.fromisoformat(f"{m.group('ts')}.{frac}{tz}"), line[m.end():]


def parse_transfer(line: str) -> Transfer | None:
    m = _RETRIEVED.search(strip_ansi(line))
    if m is None:
        return None
    return Transfer(
        retrieved_tokens=int(m.group("retrieved")), required_tokens=int(m.group("required")),
        total_tokens=int(m.group("total") or m.group("required")),
        throughput_gbps=float(m.group("gbps")) if m.group("gbps") else None,
        size_gb=float(m.group("size_gb")) if m.group("size_gb") else None, req_id=m.group("req_id"))


def routing_decision(line: str) -> tuple[int, int, bool] | None:
    """``(estimated_tokens, threshold, disaggregate)`` of a router line, else ``None``."""
    m = _ROUTING.search(strip_ansi(line))
    if m is None:
        return None
    return int(m.group("estimated")), int(m.group("threshold")), m.group("disaggregate") == "True"


def classify(line: str, *, pd_buffer_size_bytes: int | None = None) -> Finding | None:
    """The signature in ``line``, if any, with its meaning and fix."""
    text = strip_ansi(line)
    if _ALLOC_FAILED in text:
        now = f" (now {pd_buffer_size_bytes / (1 << 30):g} GiB)" if pd_buffer_size_bytes else ""
        return Finding(severity="error", signature=_ALLOC_FAILED,
                       meaning="the decoder's KV receive buffer (PD_BUFFER_SIZE) is too small",
                       fix=f"raise endpoint.pd_buffer_size_bytes{now} to 16 or 32 GiB and lower "
                           "endpoint.gpu_memory_utilization with it (the buffer sits outside vLLM's share: 32 GiB on "
                           "an 80 GB H100 needs <= 0.56; synth names the limit), re-synthesize and re-apply")
    transfer = parse_transfer(text)
    if transfer is not None:
        return transfer_finding(transfer)
    decision = routing_decision(text)
    if decision is not None:
        estimated, threshold, disaggregate = decision
        path = "prefill -> decode" if disaggregate else "decode only"
        return Finding(severity="info", signature="Conditional routing",
                       meaning=f"{estimated} estimated tokens vs threshold {threshold}: {path}")
    return None


def transfer_finding(t: Transfer) -> Finding:
    if t.retrieved_tokens == 0 and t.required_tokens > 0:
        return Finding(severity="error", signature=f"Retrieved 0 out of {t.required_tokens}",
                       meaning="the KV cache was recomputed on the decoder, not transferred from the prefiller",
                       fix="check the prefill pod's log for send errors, that both roles run the same image and "
                           "PYTHONHASHSEED=0, and that the EFA security group allows all traffic to itself")
    if t.retrieved_tokens < t.required_tokens:
        return Finding(severity="error",
                       signature=f"Retrieved {t.retrieved_tokens} out of {t.required_tokens}",
                       meaning="part of the KV cache was recomputed on the decoder",
                       fix="check the prefill pod's log for send errors and the decoder's for allocation retries")
    if t.retrieved_tokens > 0 and t.throughput_gbps is not None and t.throughput_gbps < EFA_MIN_GBPS:
        return Finding(severity="error", signature=f"throughput {t.throughput_gbps:g} GB/s",
                       meaning=f"KV moved below {EFA_MIN_GBPS:g} GB/s: not over EFA RDMA (TCP fallback)",
                       fix="check that both pods got vpc.amazonaws.com/efa devices, the EFA device plugin runs on "
                           "the GPU nodes, and both node groups sit in one AZ behind the EFA security group")
    rate = f" at {t.throughput_gbps:g} GB/s" if t.throughput_gbps is not None else ""
    return Finding(severity="ok", signature=f"Retrieved {t.retrieved_tokens} out of {t.required_tokens}",
                   meaning=f"KV cache received from the prefiller{rate}")


def transfers(lines: Iterable[str]) -> list[Transfer]:
    return [t for t in (parse_transfer(line) for line in lines) if t is not None]


def allocation_failures(lines: Iterable[str]) -> int:
    return sum(1 for line in lines if _ALLOC_FAILED in line)
