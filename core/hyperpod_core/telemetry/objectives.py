"""Latency objectives (``observability.slo``) and the histograms the alerts read them from.

A latency SLO "p95 <= X" holds when at least 95 % of the requests take X or less. A histogram counts the
requests at or below each of its bucket boundaries (``le``) exactly, so when X is a boundary the alert compares
that share with 0.95 and nothing is interpolated. ``histogram_quantile`` instead interpolates inside the bucket
that holds the quantile, and the exporters' buckets are wide (vLLM 0.19's TTFT goes 1.0 -> 2.5 s): a p95 read that
way pages when every request takes 1.2 s and stays quiet when a tenth of them take 2.4 s (fourth review, finding 2).
So each latency objective must be a boundary of every histogram its alerts read, and the config refuses any other
value (``hyperpod_core.config``), naming the two nearest boundaries. The boundaries are the catalogue's
(``catalogue.py``, one place, compared with the exporters' contract by the tests).

Pure data and arithmetic over the catalogue; imports nothing else of ours, so the config model can use it.
"""

from __future__ import annotations

from typing import Final

from hyperpod_core.telemetry import catalogue as m

#: The share of requests a "p95" objective asks to be within it.
QUANTILE: Final = 0.95

#: Each latency field of ``observability.slo`` -> the histograms whose alerts count requests under it: TTFT on the
#: engine that streams the answer and, on DPD, the prefill leg the router waits for (E2E on the prefill pods);
#: TPOT per request.
LATENCY_OBJECTIVES: Final[dict[str, tuple[m.Metric, ...]]] = {
    "ttft_p95_seconds": (m.TIME_TO_FIRST_TOKEN, m.E2E_LATENCY),
    "tpot_p95_seconds": (m.REQUEST_TPOT,),
}


def boundaries(field: str) -> tuple[float, ...]:
    """The values ``observability.slo.<field>`` may take: the boundaries every one of its histograms has."""
    metrics = LATENCY_OBJECTIVES[field]
    common = set(metrics[0].buckets).intersection(*(x.buckets for x in metrics[1:]))
    return tuple(sorted(common))


def histogram_names(field: str) -> str:
    """``vllm:a and vllm:b``: the histograms of ``field``, for messages."""
    return " and ".join(x.name for x in LATENCY_OBJECTIVES[field])


def nearest(field: str, value: float) -> tuple[float | None, float | None]:
    """The largest boundary of ``field`` below ``value`` and the smallest above it (``None`` past either end)."""
    bounds = boundaries(field)
    below = max((b for b in bounds if b < value), default=None)
    above = min((b for b in bounds if b > value), default=None)
    return below, above
