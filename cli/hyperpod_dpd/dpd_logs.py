"""Log signatures that tell whether a request took the disaggregated path, whether its KV cache moved over EFA,
and the known ways either fails.

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

Proving the EFA path (the section of that name in ``shared/reference/lifecycle-facts.md``) takes the worker's
start-up lines too, in the formats of the DPD image's wheels (vLLM 0.19.0, LMCache 0.4.3, NIXL 1.0.0):

* LMCache ``lmcache/v1/config.py:611`` (``_log_config``, called on every config load,
  ``lmcache/v1/config_base.py:585``): ``LMCache Configuration: {config_dict}``, the config as a Python dict, so
  ``'pd_role': 'sender'`` (prefill) or ``'receiver'`` (decode), ``'enable_pd': True``, ``'nixl_backends':
  ['LIBFABRIC']`` and ``'pd_buffer_device': 'cuda'`` appear as repr. ``nixl_backends: None`` means UCX: the PD
  channel falls back to ``["UCX"]`` (``lmcache/v1/transfer_channel/nixl_channel.py:80-83`` and ``:610-612``).
* vLLM ``vllm/utils/system_utils.py:204`` (``_add_prefix``): every line a worker process prints starts with
  ``(<process name> pid=<pid>) `` (``:206``: the same in cyan on a terminal); the name is ``Worker_TP<rank>``
  with tensor parallelism (``vllm/v1/executor/multiproc_executor.py:986``), so each rank's LMCache lines carry
  their rank.
* vLLM ``vllm/distributed/kv_transfer/kv_connector/factory.py:65``: ``Creating v1 connector with name: %s and
  engine_id: %s`` names the KV connector (``LMCacheConnectorV1`` for the operator's DPD).
* NIXL ``nixl_cu12/_api.py:222`` (WARNING, format ``nixl_cu12/logging.py:44``
  ``%(asctime)s NIXL %(levelname)-7s %(filename)s:%(lineno)d %(message)s``): ``Skipping backend registration %s
  due to the missing plugin.``: the image's NIXL cannot load that transport.
* LMCache ``lmcache/v1/cache_engine.py:553`` (sender, the prefill side): ``[req_id=%s] Stored %d out of total %d
  tokens. size: %.4f GB, cost %.4f ms, throughput: %.4f GB/s; ...``; ``:1048`` (layer-wise retrieve): ``[req_id=%s]
  Retrieved %d out of %d out of total %d tokens``.

Known transports: vLLM's and LMCache's NIXL P/D default to UCX (vllm-project/vllm #41814, LMCache #1998), and
UCX fails the cross-node handshake on EFA (or falls back to TCP) where only LIBFABRIC works
(aws-samples/awsome-inference #72). Which backend the operator configures is not published [I]: read here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final, Literal

#: Below this rate a KV transfer is not using EFA RDMA (operations.md: "< 1 GB/s means EFA is not in use").
EFA_MIN_GBPS: Final = 1.0

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RETRIEVED = re.compile(
    r"(?:\[req_id=(?P<req_id>[^\]]*)\] )?Retrieved (?P<retrieved>\d+) out of (?P<required>\d+)"
    r"(?: required tokens| out of total (?P<layerwise_total>\d+) tokens)"
    r"(?: \(from (?P<total>\d+) total tokens\))?"
    r"(?:\. size: (?P<size_gb>[\d.]+) gb, cost (?P<cost_ms>[\d.]+) ms, throughput: (?P<gbps>[\d.]+) GB/s)?")
_ALLOC_FAILED = "Failed to allocate memory object"
_ROUTING = re.compile(
    r"Conditional routing: estimated_tokens=(?P<estimated>\d+), threshold=(?P<threshold>\d+), "
    r"disaggregate=(?P<disaggregate>True|False)")
_K8S_TIMESTAMP = re.compile(r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?P<frac>\.\d+)?(?P<tz>Z|[+-]\d\d:\d\d) ")

Severity = Literal["ok", "info", "warn", "error"]


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
        total_tokens=int(m.group("total") or m.group("layerwise_total") or m.group("required")),
        throughput_gbps=float(m.group("gbps")) if m.group("gbps") else None,
        size_gb=float(m.group("size_gb")) if m.group("size_gb") else None, req_id=m.group("req_id"))


def routing_decision(line: str) -> tuple[int, int, bool] | None:
    """``(estimated_tokens, threshold, disaggregate)`` of a router line, else ``None``."""
    m = _ROUTING.search(strip_ansi(line))
    if m is None:
        return None
    return int(m.group("estimated")), int(m.group("threshold")), m.group("disaggregate") == "True"


#: What a full receive buffer means while prefill and decode run different ``--model`` values: the decoder's keys
#: never match the KV prefill pushed, so it is never retrieved, hence never freed (LMCache 0.4.3 frees a PD entry on
#: retrieve, ``lmcache/v1/cache_engine.py:859-863``), and the PD backend never evicts
#: (``lmcache/v1/storage_backend/pd_backend.py:283``, "no eviction and busy_loop in PD"): it busy-loops on
#: ``Failed to allocate memory object, retrying...`` (``:536-543``) and transfers stall.
SKEW_ALLOC_MEANING: Final = ("the decoder's PD buffer is full of KV it never reads: prefill and decode run different "
                             "--model values (the 'prefill/decode skew' row of 'hyperpod-dpd status'), so the "
                             "decoder's keys never match what prefill sends, LMCache 0.4.3 never evicts it, and "
                             "transfers stall while the decoder recomputes")


def skew_alloc_fix(endpoint_dir: Path | None) -> str:
    """The fix of a full buffer while the roles run different ``--model`` values: replace the endpoint from its
    folder (``endpoint_dir``: :attr:`hyperpod_core.dist_layout.DistLayout.endpoint_dir`; ``None``: unknown here, the
    'prefill/decode skew' row of ``status`` names it)."""
    synthesized = f" ({endpoint_dir}/)" if endpoint_dir is not None else ""
    return ("put both roles on one revision: replace the endpoint (delete its InferenceEndpointConfig, then "
            f"hyperpod-dpd rollout applies the synthesized one{synthesized}: the 'prefill/decode skew' row of "
            "'hyperpod-dpd status' names both commands) or restart both roles on one revision; a larger buffer only "
            "delays this")


def alloc_finding(*, pd_buffer_size_bytes: int | None = None, model_skew: bool = False,
                  endpoint_dir: Path | None = None) -> Finding:
    """``Failed to allocate memory object``: the receive buffer is too small, or, while the roles run different
    ``--model`` values (``model_skew``), full of KV the decoder never reads (the fix replaces the endpoint from
    ``endpoint_dir``, :func:`skew_alloc_fix`)."""
    if model_skew:
        return Finding(severity="error", signature=_ALLOC_FAILED, meaning=SKEW_ALLOC_MEANING,
                       fix=skew_alloc_fix(endpoint_dir))
    now = f" (now {pd_buffer_size_bytes / (1 << 30):g} GiB)" if pd_buffer_size_bytes else ""
    return Finding(severity="error", signature=_ALLOC_FAILED,
                   meaning="the decoder's KV receive buffer (PD_BUFFER_SIZE) is too small",
                   fix=f"raise endpoint.pd_buffer_size_bytes{now} to 16 or 32 GiB and lower "
                       "endpoint.gpu_memory_utilization with it (the buffer sits outside vLLM's share: 32 GiB on "
                       "an 80 GB H100 needs <= 0.56; synth names the limit), re-synthesize and re-apply")


def classify(line: str, *, pd_buffer_size_bytes: int | None = None, model_skew: bool = False) -> Finding | None:
    """The signature in ``line``, if any, with its meaning and fix (``model_skew``: :func:`alloc_finding`)."""
    text = strip_ansi(line)
    if _ALLOC_FAILED in text:
        return alloc_finding(pd_buffer_size_bytes=pd_buffer_size_bytes, model_skew=model_skew)
    transfer = parse_transfer(text)
    if transfer is not None:
        return transfer_finding(transfer)
    decision = routing_decision(text)
    if decision is not None:
        estimated, threshold, disaggregate = decision
        path = "prefill -> decode" if disaggregate else "decode only"
        return Finding(severity="info", signature="Conditional routing",
                       meaning=f"{estimated} estimated tokens vs threshold {threshold}: {path}")
    setup = parse_worker_setup(text)
    if setup is not None:
        return Finding(severity="info", signature="LMCache Configuration",
                       meaning=f"pd_role {setup.pd_role}, KV transport NIXL {'+'.join(setup.transport)}"
                               + ("" if setup.nixl_backends is not None else " (LMCache's default)"))
    missing = _NIXL_MISSING_PLUGIN.search(text)
    if missing is not None:
        return _missing_plugin_finding(missing.group("backend"))
    return None


def transfer_finding(t: Transfer) -> Finding:
    if t.retrieved_tokens == 0 and t.required_tokens > 0:
        return Finding(severity="error", signature=f"Retrieved 0 out of {t.required_tokens}",
                       meaning="the KV cache was recomputed on the decoder, not transferred from the prefiller",
                       fix="check the prefill pod's log for send errors, that both roles run the same image and "
                           "model path ('prefill/decode skew' in 'hyperpod-dpd status') with PYTHONHASHSEED=0, and "
                           "that the EFA security group allows all traffic to itself")
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


# --- proving the EFA path: the workers' start-up lines and per-rank rates ------------------------------------

#: vLLM's worker prefix (system_utils.py:204/206) and the TP rank in its process name (multiproc_executor.py:986).
_WORKER_PREFIX = re.compile(r"\((?P<process>[A-Za-z]+(?:_[A-Z]+\d+)*) pid=(?P<pid>\d+)\)")
_TP_RANK = re.compile(r"_TP(?P<rank>\d+)")
_LMCACHE_CONFIG = "LMCache Configuration: {"
_CONNECTOR = re.compile(r"Creating v1 connector with name: (?P<name>\S+) and engine_id: ")
_NIXL_MISSING_PLUGIN = re.compile(r"Skipping backend registration (?P<backend>\S+) due to the missing plugin")
_STORED = re.compile(
    r"(?:\[req_id=(?P<req_id>[^\]]*)\] )?Stored (?P<stored>\d+) out of total (?P<total>\d+) tokens\. "
    r"size: (?P<size_gb>[\d.]+) GB, cost (?P<cost_ms>[\d.]+) ms, throughput: (?P<gbps>[\d.]+) GB/s")
#: The values of the config dict this reads, as Python repr: a quoted string, a list of quoted strings, None or a bool.
_REPR_VALUE = r"(?P<value>'[^']*'|\[[^\]]*\]|None|True|False)"
#: LMCache's PD channel without ``nixl_backends`` (nixl_channel.py:610-612).
LMCACHE_DEFAULT_BACKENDS: Final = ("UCX",)
EFA_BACKEND: Final = "LIBFABRIC"
#: The role each pool's workers must log (AWS DPD troubleshooting: the most discriminating start-up signal).
EXPECTED_PD_ROLE: Final = {"prefill": "sender", "decode": "receiver"}
#: What replaces UCX, as a setting the operator's workers read: LMCache takes ``LMCACHE_<KEY>`` over its config
#: file (lmcache/integration/vllm/utils.py:109, ``update_config_from_env``; list values comma-separated).
LIBFABRIC_FIX: Final = ("set LMCACHE_NIXL_BACKENDS=LIBFABRIC in the InferenceEndpointConfig's "
                        "worker.environmentVariables (LMCache reads it over its config file) and re-apply; UCX fails "
                        "the cross-node handshake on EFA (aws-samples/awsome-inference#72)")


@dataclass(frozen=True, kw_only=True)
class WorkerSetup:
    """One rank's ``LMCache Configuration`` line: what its KV connector was set up to do."""

    rank: int | None
    """TP rank from vLLM's ``(Worker_TP<n> pid=...)`` prefix; ``None`` when the line has none."""
    pd_role: str | None
    enable_pd: bool | None
    nixl_backends: tuple[str, ...] | None
    """As configured; ``None`` when unset (LMCache then uses UCX)."""
    buffer_device: str | None

    @property
    def transport(self) -> tuple[str, ...]:
        """The NIXL backends the P/D channel really uses."""
        return self.nixl_backends if self.nixl_backends else LMCACHE_DEFAULT_BACKENDS


@dataclass(frozen=True, kw_only=True)
class RankRate:
    """The KV transfers of one rank in a log: how many, the slowest, and how many moved nothing."""

    rank: int | None
    transfers: int
    min_gbps: float | None
    empty: int
    """``Retrieved 0 out of N`` (N > 0) lines: KV recomputed instead of received."""


def rank_of(line: str) -> int | None:
    """The TP rank of a worker line (vLLM's prefix), ``None`` for a line without one or a single-GPU worker."""
    m = _WORKER_PREFIX.search(strip_ansi(line))
    if m is None:
        return None
    tp = _TP_RANK.search(m.group("process"))
    return int(tp.group("rank")) if tp else None


def _repr_value(text: str, key: str) -> str | None:
    m = re.search(rf"'{key}': {_REPR_VALUE}", text)
    return m.group("value") if m else None


def parse_worker_setup(line: str) -> WorkerSetup | None:
    """The KV-connector set-up of an ``LMCache Configuration: {...}`` line (config.py:611), else ``None``."""
    text = strip_ansi(line)
    if _LMCACHE_CONFIG not in text:
        return None
    body = text[text.index(_LMCACHE_CONFIG) + len(_LMCACHE_CONFIG) - 1:]

    def string(key: str) -> str | None:
        value = _repr_value(body, key)
        return value.strip("'") if value and value.startswith("'") else None

    backends_repr = _repr_value(body, "nixl_backends")
    backends = (tuple(re.findall(r"'([^']*)'", backends_repr)) if backends_repr and backends_repr.startswith("[")
                else None)
    enable_pd = _repr_value(body, "enable_pd")
    return WorkerSetup(rank=rank_of(line), pd_role=string("pd_role"),
                       enable_pd=None if enable_pd not in ("True", "False") else enable_pd == "True",
                       nixl_backends=backends, buffer_device=string("pd_buffer_device"))


def worker_setups(lines: Iterable[str]) -> list[WorkerSetup]:
    """Every rank's set-up in a log (the last one of a rank wins: a restarted engine logs it again)."""
    found: dict[int | None, WorkerSetup] = {}
    for line in lines:
        setup = parse_worker_setup(line)
        if setup is not None:
            found[setup.rank] = setup
    return [found[k] for k in sorted(found, key=lambda r: -1 if r is None else r)]


def connectors(lines: Iterable[str]) -> set[str]:
    """The KV connector names vLLM created (factory.py:65)."""
    return {m.group("name") for line in lines if (m := _CONNECTOR.search(strip_ansi(line)))}


def missing_plugins(lines: Iterable[str]) -> set[str]:
    """NIXL backends the image could not load (nixl _api.py:222)."""
    return {m.group("backend") for line in lines if (m := _NIXL_MISSING_PLUGIN.search(strip_ansi(line)))}


def rank_rates(lines: Iterable[str], *, side: Literal["receiver", "sender"]) -> list[RankRate]:
    """Per rank: the decoder's ``Retrieved`` lines (receiver) or the prefiller's ``Stored`` lines (sender)."""
    by_rank: dict[int | None, list[tuple[float | None, bool]]] = {}
    for line in lines:
        text = strip_ansi(line)
        if side == "receiver":
            t = parse_transfer(text)
            if t is None:
                continue
            entry = (t.throughput_gbps if t.retrieved_tokens > 0 else None,
                     t.retrieved_tokens == 0 and t.required_tokens > 0)
        else:
            m = _STORED.search(text)
            if m is None:
                continue
            entry = (float(m.group("gbps")) if int(m.group("stored")) > 0 else None, False)
        by_rank.setdefault(rank_of(line), []).append(entry)
    out = []
    for rank in sorted(by_rank, key=lambda r: -1 if r is None else r):
        rates = [g for g, _ in by_rank[rank] if g is not None]
        out.append(RankRate(rank=rank, transfers=len(by_rank[rank]), min_gbps=min(rates) if rates else None,
                            empty=sum(1 for _, e in by_rank[rank] if e)))
    return out


def _rank_name(rank: int | None) -> str:
    return "rank ?" if rank is None else f"rank {rank}"


def _missing_plugin_finding(backend: str) -> Finding:
    return Finding(severity="error", signature=f"NIXL: Skipping backend registration {backend}",
                   meaning=f"the image's NIXL cannot load its {backend} plugin, so that transport is not set up",
                   fix=f"run an image whose NIXL ships libplugin_{backend} (nixl-cu12 1.0.0 does; the DPD images of "
                       "pins.DPD_SUPPORTED_IMAGES) and check the EFA libfabric provider is in the image")


def efa_findings(role: Literal["prefill", "decode"], lines: list[str], *,
                 pd_buffer_size_bytes: int | None = None, model_skew: bool = False,
                 endpoint_dir: Path | None = None) -> list[Finding]:
    """What one worker pod's log says about the KV path: its ranks' ``pd_role``, the NIXL transport, the per-rank
    transfer rates against the 1 GB/s "not on EFA" line, and ``Retrieved 0 out of N`` with its likely cause.

    ``lines`` are the pod's start-up lines (for the set-up) and its recent lines (for the transfers) together.
    ``model_skew``: the roles run different ``--model`` values (``status`` found it), which is then the cause a full
    receive buffer and recomputed prompts point at (:func:`alloc_finding`; ``endpoint_dir``: the endpoint's folder
    its fix names).
    """
    setups = worker_setups(lines)
    findings = _setup_findings(role, setups)
    findings += [_missing_plugin_finding(backend) for backend in sorted(missing_plugins(lines))]
    rates = rank_rates(lines, side="receiver" if role == "decode" else "sender")
    on_ucx = bool(setups) and EFA_BACKEND not in {b for s in setups for b in s.transport}
    findings += _transport_findings(setups, rates, on_ucx=on_ucx)
    if role == "decode":
        findings += _receiver_findings(rates, lines, on_ucx=on_ucx, pd_buffer_size_bytes=pd_buffer_size_bytes,
                                       model_skew=model_skew, endpoint_dir=endpoint_dir)
    return findings


def _setup_findings(role: Literal["prefill", "decode"], setups: list[WorkerSetup]) -> list[Finding]:
    """The ranks' LMCache set-up: P/D on, and each rank in the role its pool needs (:data:`EXPECTED_PD_ROLE`)."""
    expected = EXPECTED_PD_ROLE[role]
    if not setups:
        return [Finding(
            severity="warn", signature="no 'LMCache Configuration' line",
            meaning=f"the {role} log read holds no LMCache start-up line: its pd_role and NIXL transport are unknown",
            fix=f"read the pod's whole log ('hyperpod-dpd logs {role} --tail 100000 --signatures') or restart it "
                "so the engine logs its set-up again")]
    disabled = [s for s in setups if s.enable_pd is False]
    wrong = [s for s in setups if s.pd_role != expected]
    ranks = ", ".join(_rank_name(s.rank) for s in (disabled or wrong))
    if disabled:
        return [Finding(
            severity="error", signature="'enable_pd': False",
            meaning=f"LMCache P/D is off on the {role} pod ({ranks}): the KV cache never moves between pools",
            fix="the operator turns it on with pdSpec: check that the applied InferenceEndpointConfig has "
                "spec.pdSpec (kubectl get inferenceendpointconfig -o yaml) and re-apply the -dpd manifest")]
    if wrong:
        roles = sorted({str(s.pd_role) for s in wrong})
        return [Finding(
            severity="error", signature=f"'pd_role': {', '.join(map(repr, roles))}",
            meaning=f"the {role} pod's engines are set up as {', '.join(roles)}, not '{expected}' ({ranks})",
            fix="a prefill worker must be the sender, a decode worker the receiver (AWS DPD troubleshooting); "
                "check pdSpec and the pod's dpd-role label, then re-apply the -dpd manifest")]
    return [Finding(severity="ok", signature=f"'pd_role': '{expected}'",
                    meaning=f"{len(setups)} rank(s) set up as the {expected}")]


def _transport_findings(setups: list[WorkerSetup], rates: list[RankRate], *, on_ucx: bool) -> list[Finding]:
    """The NIXL transport the ranks set up: libfabric (EFA), or UCX, which the rates then judge."""
    if setups and not on_ucx:
        return [Finding(severity="ok", signature=f"NIXL {EFA_BACKEND}",
                        meaning="the KV transport is libfabric, the EFA provider")]
    if not on_ucx:
        return []
    transports = {b for s in setups for b in s.transport}
    slow = [r for r in rates if r.min_gbps is not None and r.min_gbps < EFA_MIN_GBPS]
    moved = [r for r in rates if r.min_gbps is not None]
    where = "" if any(s.nixl_backends for s in setups) else " (LMCache's default: nixl_backends unset)"
    severity: Severity
    if slow or sum(r.empty for r in rates):
        severity, why = "error", "the transfers show it (below the EFA line, or recomputed)"
    elif not moved:
        severity, why = "error", "and no transfer in this log shows that it works"
    else:
        floor = min(r.min_gbps or 0.0 for r in moved)
        severity, why = "warn", f"it moves KV at >= {floor:g} GB/s here, but fails the EFA handshake elsewhere"
    return [Finding(severity=severity, signature=f"NIXL {'+'.join(sorted(transports))}{where}",
                    meaning=f"the KV transport is UCX, not libfabric: {why}", fix=LIBFABRIC_FIX)]


def _receiver_findings(rates: list[RankRate], lines: list[str], *, on_ucx: bool, pd_buffer_size_bytes: int | None,
                       model_skew: bool, endpoint_dir: Path | None) -> list[Finding]:
    """The decoder's ranks: each one below the EFA line, else the floor they all clear; ``Retrieved 0 out of N``
    with its likely cause, or a full receive buffer when the roles run different models."""
    findings: list[Finding] = []
    slow = [r for r in rates if r.min_gbps is not None and r.min_gbps < EFA_MIN_GBPS]
    moved = [r for r in rates if r.min_gbps is not None]
    empty = sum(r.empty for r in rates)
    for r in slow:
        findings.append(Finding(
            severity="error", signature=f"{_rank_name(r.rank)}: {r.min_gbps:g} GB/s",
            meaning=f"{_rank_name(r.rank)} received KV below {EFA_MIN_GBPS:g} GB/s: not over EFA RDMA",
            fix=(LIBFABRIC_FIX if on_ucx else
                 "check that the pod got vpc.amazonaws.com/efa devices, the EFA device plugin runs on the node, "
                 "and both pools sit in one AZ behind the EFA security group")))
    if moved and not slow:
        floor = min(r.min_gbps or 0.0 for r in moved)
        findings.append(Finding(severity="ok", signature=f"{len(moved)} rank(s) >= {floor:g} GB/s",
                                meaning=f"every rank received KV above the {EFA_MIN_GBPS:g} GB/s EFA line"))
    if empty:
        findings.append(_empty_retrieval_finding(empty, lines, on_ucx=on_ucx,
                                                 pd_buffer_size_bytes=pd_buffer_size_bytes, model_skew=model_skew,
                                                 endpoint_dir=endpoint_dir))
    elif model_skew and allocation_failures(lines):
        findings.append(alloc_finding(model_skew=True, endpoint_dir=endpoint_dir))
    return findings


def _empty_retrieval_finding(count: int, lines: list[str], *, on_ucx: bool,
                             pd_buffer_size_bytes: int | None, model_skew: bool = False,
                             endpoint_dir: Path | None = None) -> Finding:
    """``Retrieved 0 out of N``, with the cause the rest of the log points at first."""
    if on_ucx:
        cause, fix = "the transport is UCX, which fails the cross-node handshake on EFA", LIBFABRIC_FIX
    elif model_skew:
        cause, fix = SKEW_ALLOC_MEANING.replace("the decoder's PD buffer is full of KV it never reads: ", ""), \
            skew_alloc_fix(endpoint_dir)
    elif allocation_failures(lines):
        buffer = alloc_finding(pd_buffer_size_bytes=pd_buffer_size_bytes)
        cause, fix = "the receive buffer was full ('Failed to allocate memory object')", buffer.fix
    else:
        cause = ("the prefiller did not send (its log shows why), or the two roles hash prompts differently "
                 "(PYTHONHASHSEED, image or model path differ)")
        fix = ("read 'hyperpod-dpd logs prefill --signatures'; check both roles run one image and model path "
               "('prefill/decode skew' in 'hyperpod-dpd status') with PYTHONHASHSEED=0, and that the EFA security "
               "group admits all traffic from itself")
    return Finding(severity="error", signature=f"Retrieved 0 out of N ({count} time{'s' if count > 1 else ''})",
                   meaning=f"the decoder recomputed the prompt instead of receiving its KV: {cause}", fix=fix)


def efa_verdict(findings: Iterable[Finding]) -> Literal["proven", "refuted", "unproven"]:
    """``proven``: the set-up is LIBFABRIC with the right roles and KV moved above the EFA line, nothing wrong."""
    found = list(findings)
    if any(f.severity == "error" for f in found):
        return "refuted"
    oks = {f.signature for f in found if f.severity == "ok"}
    if any(f.severity == "warn" for f in found) or f"NIXL {EFA_BACKEND}" not in oks:
        return "unproven"
    return "proven"
