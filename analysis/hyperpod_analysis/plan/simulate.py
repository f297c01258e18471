"""A step-level discrete-event simulation of vLLM engines, colocated or split prefill -> EFA -> decode.

Each engine schedules like vLLM's V1 scheduler: running requests first (one decode token each, or the next
chunk of an unfinished prefill), then waiting requests while ``max_num_seqs``, the token budget
(``max_num_batched_tokens``) and the KV-cache capacity allow (chunked prefill). A step lasts what the
:class:`~hyperpod_analysis.plan.engine.StepModel` says. In the split layout the router sends prompts at or above
the threshold to a prefill engine (eager), whose finished KV crosses EFA (one FIFO link per prefill replica,
at the measured rate, into the decoder's PD buffer), and the decoder computes the last prompt token and
decodes; shorter prompts are prefilled on the decoder itself.

Load is closed-loop like one genai-bench run (``concurrency`` clients start together on idle engines, each sends its
next request when the last one ends, and the run stops when ``requests`` have completed; its output throughput
is their output tokens over the run's duration, ramp-up included, and the latency statistics leave out the first
``warmup_ratio`` of completions, as genai-bench's ``aggregate_metrics_data`` does) or open-loop Poisson at
``request_rate``. TPOT is genai-bench's: (E2E - TTFT) / (output - 1).
"""

from __future__ import annotations

import heapq
import math
import random
import statistics
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hyperpod_analysis.plan.engine import StepModel
from hyperpod_analysis.plan.terms import routed_to_prefill
from hyperpod_analysis.plan.traffic import Traffic


@dataclass(frozen=True, kw_only=True)
class EngineSpec:
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_capacity_tokens: int
    eager: bool = False
    connector_seconds_per_step: float = 0.0
    """LMCache connector hooks run per layer in every step of a DPD role (terms.kv_connector_step_seconds)."""


@dataclass(frozen=True, kw_only=True)
class DpdParams:
    """What the split adds on top of two engines."""

    transfer_seconds_per_token: float
    """KV bytes per token / effective EFA rate (terms.kv_transfer_seconds)."""
    handoff_seconds: float
    """Router second hop and LMCache/NIXL handshake per disaggregated request."""
    routing_threshold_tokens: int
    pd_buffer_tokens: int
    """Prompt tokens the decoder's PD buffer holds (PD_BUFFER_SIZE per rank x TP / KV bytes per token)."""


@dataclass
class _Req:
    rid: int
    isl: int
    osl: int
    arrive: float
    prefill_left: int = 0
    ctx: int = 0
    out: int = 0
    first: float = -1.0
    done: float = -1.0


@dataclass
class _Engine:
    spec: EngineSpec
    model: StepModel
    prefill_only: bool = False
    waiting: deque[_Req] = field(default_factory=deque)
    running: list[_Req] = field(default_factory=list)
    busy: bool = False
    reserved: int = 0

    def load(self) -> int:
        return len(self.waiting) + len(self.running)


@dataclass(frozen=True, kw_only=True)
class Metrics:
    ttft_ms: float
    tpot_ms: float
    e2e_p50_ms: float
    output_tokens_per_s: float
    ttft_p95_ms: float
    tpot_p95_ms: float
    peak_buffer_tokens: int = 0
    saturated: bool = False
    """Open loop only: the layout serves fewer requests than arrive (latencies grow with the run's length)."""


def simulate(*, model: StepModel, traffic: Traffic, concurrency: int | None, request_rate: float | None,
             prefix_reuse: float, colocated: EngineSpec | None = None, colocated_replicas: int = 1,
             prefill: EngineSpec | None = None, prefill_replicas: int = 0, decode: EngineSpec | None = None,
             decode_replicas: int = 0, dpd: DpdParams | None = None, seed: int = 7,
             requests: int = 320, warmup_ratio: float = 0.1) -> Metrics:
    """Run one layout under one load and return the median and p95 latencies and the output throughput."""
    rng = random.Random(seed)
    clients = concurrency or 0
    warm, measure = _run_length(clients, request_rate, requests, warmup_ratio)
    if dpd is not None:
        assert prefill is not None and decode is not None
        prefills = [_Engine(prefill, model, prefill_only=True) for _ in range(prefill_replicas)]
        decoders = [_Engine(decode, model) for _ in range(decode_replicas)]
    else:
        assert colocated is not None
        prefills, decoders = [], [_Engine(colocated, model) for _ in range(colocated_replicas)]
    # The requests sent: closed loop, also those of every client still in flight when the run stops.
    run = _Run(traffic=traffic, rng=rng, prefix_reuse=prefix_reuse, dpd=dpd, prefills=prefills, decoders=decoders,
               clients=clients, total=warm + measure + clients)
    if clients:
        for _ in range(clients):
            run.on_arrival(0.0)
    else:
        assert request_rate
        t = 0.0
        for _ in range(run.total):
            t += rng.expovariate(request_rate)
            run.push(t, run.on_arrival, None)
    run.until(completed=warm + measure)
    return _metrics(run.done, warm=warm, measure=measure, clients=clients, request_rate=request_rate,
                    peak_buffer=run.peak_buffer)


def _run_length(clients: int, request_rate: float | None, requests: int, warmup_ratio: float) -> tuple[int, int]:
    """(warm-up, measured) completions of one run."""
    if clients:
        # genai-bench: at least ``requests`` completions (two cohorts of every client at the least).
        measure = max(requests, 2 * clients)
        warm = int(measure * warmup_ratio)
        return warm, measure - warm
    # Open loop: at least a minute of arrivals, so that an offered rate above capacity shows as a growing queue
    # rather than a short transient.
    return 16, max(128, min(3000, int(60 * (request_rate or 0))))


_Work = list[tuple[_Req, int]]
"""One step's batch: each request with the tokens it computes in the step (a prefill chunk, or 1 to decode)."""
_Handler = Callable[[float, Any], None]


class _Run:
    """One run's state, and a handler per event: a request arrives (:meth:`on_arrival`), an engine's step ends
    (:meth:`on_step_end`), a prefilled request's KV reaches a decoder (:meth:`on_kv_arrival`)."""

    def __init__(self, *, traffic: Traffic, rng: random.Random, prefix_reuse: float, dpd: DpdParams | None,
                 prefills: list[_Engine], decoders: list[_Engine], clients: int, total: int) -> None:
        self.traffic, self.rng, self.prefix_reuse, self.dpd = traffic, rng, prefix_reuse, dpd
        self.prefills, self.decoders = prefills, decoders
        # clients: closed loop (each sends its next request when its last one ends), 0: open loop; total: the
        # requests it sends at most.
        self.clients, self.total = clients, total
        self.events: list[tuple[float, int, _Handler, Any]] = []
        self.seq = 0
        self.now = 0.0
        self.issued = 0
        self.done: list[_Req] = []
        self.link_free = [0.0] * len(prefills)  # when each prefill replica's EFA link is next free
        # Prefilled requests (with their prefill's link) waiting for room in the decoder's PD buffer.
        self.blocked: deque[tuple[int, _Req]] = deque()
        self.buffer_used = 0
        self.peak_buffer = 0

    def push(self, t: float, handler: _Handler, obj: Any) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, handler, obj))

    def until(self, *, completed: int) -> None:
        """Handle the events in time order until ``completed`` requests have finished (or nothing is left)."""
        while self.events and len(self.done) < completed:
            t, _, handler, obj = heapq.heappop(self.events)
            self.now = t
            handler(t, obj)

    # --- events ---

    def on_arrival(self, t: float, _: object = None) -> None:
        """A client sends a request: to the least loaded prefill engine when the router sends it there, else to
        the least loaded decoder (colocated: the least loaded engine)."""
        if self.issued >= self.total:
            return
        isl, osl = self.traffic.sample(self.rng)
        r = _Req(rid=self.issued, isl=isl, osl=osl, arrive=t)
        self.issued += 1
        shared = self.traffic.shared_prefix if self.issued > 1 else 0  # the first of a P() scenario fills the cache
        cached = min(max(int(self.prefix_reuse * isl), shared), isl - 1)
        r.prefill_left, r.ctx = isl - cached, cached
        if (self.dpd is not None and routed_to_prefill(isl, self.dpd.routing_threshold_tokens)
                and self.prefills):
            target = min(self.prefills, key=_Engine.load)
        else:
            target = min(self.decoders, key=_Engine.load)
        target.waiting.append(r)
        self.kick(target, t)

    def on_step_end(self, t: float, step: tuple[_Engine, _Work, int]) -> None:
        engine, work, steps = step
        self.finish_step(engine, work, steps, t)
        # Only this engine can have new work now: every other change of an engine's queue (a new request, a
        # transferred KV arriving) kicks that engine where it happens, and a kick that schedules nothing changes
        # nothing.
        self.kick(engine, t)

    def on_kv_arrival(self, t: float, r: _Req) -> None:
        """The KV is in the decoder's PD buffer: the decoder computes the last prompt token, then decodes."""
        r.prefill_left = 1
        r.ctx = r.isl - 1
        target = min(self.decoders, key=_Engine.load)
        target.waiting.append(r)
        self.kick(target, t)

    # --- engines ---

    def kick(self, e: _Engine, t: float) -> None:
        """Start the engine's next step unless it is busy or has nothing to do."""
        if e.busy or not (e.waiting or e.running):
            return
        plan = self.schedule(e)
        if plan is None:
            return
        (dec, dctx, ptok, patt), work = plan
        dur = _step_seconds(e, dec, dctx, ptok, patt)
        steps = 1
        if ptok == 0 and not e.waiting:
            # Decode only, nothing waiting: the batch stays the same until a request finishes or another event
            # could add work, so take those steps at once (the same times as one by one, far fewer events).
            left = min(r.osl - r.out for r, _ in work)
            room = (self.events[0][0] if self.events else math.inf) - t
            if left > 1 and dur < room:
                # Every step adds ``dec`` tokens of context, so step k lasts s0 + k*d (a decode step is linear in
                # the context it reads): take the steps up to the first that ends at or after the next event.
                d = _step_seconds(e, dec, dctx + dec, 0, 0.0) - dur
                steps = left if math.isinf(room) else min(left, _steps_to_reach(room, dur, d))
                dur = steps * dur + d * steps * (steps - 1) / 2
        e.busy = True
        self.push(t + dur, self.on_step_end, (e, work, steps))

    def schedule(self, e: _Engine) -> tuple[tuple[int, int, int, float], _Work] | None:
        """vLLM V1's next batch: the running requests first, then waiting ones while the token budget,
        ``max_num_seqs`` and the KV cache allow. ``((decode tokens, their context, prefill tokens, prefill
        attention), work)``, or None when nothing fits."""
        budget = e.spec.max_num_batched_tokens
        work: _Work = []
        dec = dctx = ptok = 0
        patt = 0.0
        for r in e.running:
            if budget <= 0:
                break
            if r.prefill_left > 0:
                n = min(r.prefill_left, budget)
                ptok += n
                patt += n * (r.ctx + n / 2)
            else:
                n = 1
                dec += 1
                dctx += r.ctx
            budget -= n
            work.append((r, n))
        while e.waiting and budget > 0 and len(e.running) < e.spec.max_num_seqs:
            r = e.waiting[0]
            need = r.isl + (0 if e.prefill_only else r.osl)
            if e.reserved + need > e.spec.kv_capacity_tokens and e.running:
                break
            e.waiting.popleft()
            e.running.append(r)
            e.reserved += need
            self.release_buffer(e, r)
            n = min(r.prefill_left, budget)
            ptok += n
            patt += n * (r.ctx + n / 2)
            budget -= n
            work.append((r, n))
        if not work:
            return None
        return (dec, dctx, ptok, patt), work

    def finish_step(self, e: _Engine, work: _Work, steps: int, t: float) -> None:
        """Account the step's tokens: a finished prefill on a prefill engine goes to EFA, a first token is the
        TTFT, a request with all its output tokens completes."""
        for r, n in work:
            if r.prefill_left > 0:
                r.prefill_left -= n
                r.ctx += n
                if r.prefill_left > 0:
                    continue
                if e.prefill_only:
                    e.running.remove(r)
                    e.reserved -= r.isl
                    self.start_transfer(self.prefills.index(e), r, t)
                    continue
                r.out += 1
                r.ctx += 1
                if r.first < 0:
                    r.first = t
            else:
                r.out += steps
                r.ctx += steps
            if r.out >= r.osl:
                r.done = t
                e.running.remove(r)
                e.reserved -= r.isl + r.osl
                self.complete(r, t)
        e.busy = False

    def complete(self, r: _Req, t: float) -> None:
        self.done.append(r)
        if self.clients:
            self.on_arrival(t)

    # --- KV transfer ---

    def start_transfer(self, link: int, r: _Req, t: float) -> None:
        self.blocked.append((link, r))
        self.retry_blocked(t)

    def release_buffer(self, e: _Engine, r: _Req) -> None:
        """A transferred request admitted by the decoder frees its KV from the PD buffer."""
        if (self.dpd is not None and not e.prefill_only and r.first < 0
                and routed_to_prefill(r.isl, self.dpd.routing_threshold_tokens)):
            self.buffer_used -= r.isl
            self.retry_blocked(self.now)

    def retry_blocked(self, t: float) -> None:
        """Start queued KV sends while the decoder's PD buffer has room (one at a time per prefill's link)."""
        dpd = self.dpd
        if dpd is None:
            return
        while self.blocked:
            link, r = self.blocked[0]
            if self.buffer_used + r.isl > dpd.pd_buffer_tokens and self.buffer_used > 0:
                return
            self.blocked.popleft()
            self.buffer_used += r.isl
            self.peak_buffer = max(self.peak_buffer, self.buffer_used)
            sent = max(t, self.link_free[link]) + r.isl * dpd.transfer_seconds_per_token
            self.link_free[link] = sent
            self.push(sent + dpd.handoff_seconds, self.on_kv_arrival, r)


def _step_seconds(e: _Engine, dec: int, dctx: int, ptok: int, patt: float) -> float:
    return e.model.step_seconds(decode_tokens=dec, decode_context=dctx, prefill_tokens=ptok,
                                prefill_attention=patt, eager=e.spec.eager) + e.spec.connector_seconds_per_step


def _metrics(done: list[_Req], *, warm: int, measure: int, clients: int, request_rate: float | None,
             peak_buffer: int) -> Metrics:
    """Latencies over the completions after the warm-up, and the output throughput as genai-bench counts it."""
    finished = sorted(done, key=lambda r: r.done)[:warm + measure]
    window = finished[warm:] if len(finished) - warm >= 2 else finished
    ttft = [r.first - r.arrive for r in window]
    tpot = [(r.done - r.first) / (r.osl - 1) for r in window if r.osl > 1]
    e2e = [r.done - r.arrive for r in window]
    if clients:
        # genai-bench: output tokens of the completed requests over the run, from the first send to the last
        # completion counted (aggregated_metrics_collector.py: num_output_tokens.sum / run_duration).
        throughput = sum(r.osl for r in finished) / finished[-1].done
        saturated = False
    else:
        span = window[-1].done - window[0].done
        throughput = sum(r.osl for r in window[1:]) / span if span > 0 else 0.0
        # Served fewer requests than offered, beyond 3 sigma of Poisson noise: the queue grows without bound.
        served = (len(window) - 1) / span if span > 0 else 0.0
        saturated = served < (1 - 3 / len(window) ** 0.5) * (request_rate or 0)
    return Metrics(
        ttft_ms=1e3 * statistics.median(ttft), tpot_ms=1e3 * statistics.median(tpot) if tpot else 0.0,
        e2e_p50_ms=1e3 * statistics.median(e2e), output_tokens_per_s=throughput,
        ttft_p95_ms=1e3 * _p95(ttft), tpot_p95_ms=1e3 * _p95(tpot) if tpot else 0.0,
        peak_buffer_tokens=peak_buffer, saturated=saturated)


def _steps_to_reach(room: float, first: float, growth: float) -> int:
    """The fewest steps (first, first + growth, ...) whose total reaches ``room``."""
    if growth <= 1e-15:
        return max(1, math.ceil(room / first))
    a, b = growth / 2, first - growth / 2
    return max(1, math.ceil((-b + math.sqrt(b * b + 4 * a * room)) / (2 * a)))


def _p95(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(0.95 * len(s)))]
