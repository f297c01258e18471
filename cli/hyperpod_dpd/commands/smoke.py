"""``hyperpod-dpd smoke``: a short and a long prompt, streamed, then proof from the decoder's log.

The endpoint's InferenceEndpointConfig is the one that serves it: ``<endpoint>-r<N>`` after a blue/green rollout (the
revision store's current revision, :func:`hyperpod_dpd.rollout.store.live_name`), else its own name.

First the skew guard (:mod:`hyperpod_dpd.skew`): a test of an endpoint whose prefill and decode serve another image
or model path, or whose roles are mid-rollout, would certify a state that is about to change or serves wrong
tokens; the command refuses it (one line, exit 1) before sending a request. When the roles cannot be compared (a
role's Deployment not found, no Ready pod, a model that cannot be read), the test goes on and ends "incomplete":
a comparison not made is no pass. The requests name the model the live pods serve (their ``--served-model-name``),
else ``model.name``.

The router disaggregates requests whose estimated input tokens are >= ``pdSpec.routingThreshold``
(``shared/reference/operations.md``, "Smoke test and status"), so the short prompt must stay below
``endpoint.routing_threshold_tokens`` (decoded without a transfer) and the long one well above it (prefilled on
the prefill pool; the decoder logs ``Retrieved N out of N required tokens``). The decoder's lines logged since the
short request started (with 30 s of slack for clock skew) are attributed to each request by LMCache's request id
when it contains the response id, else by prompt size (:func:`attribute`).

Then the KV path itself (:func:`efa_proof`): each prefill and decode pod's start-up lines (the first
:data:`STARTUP_LOG_BYTES` of its log) and its lines of this test give every rank's ``pd_role`` (sender on prefill,
receiver on decode), the NIXL transport (LIBFABRIC on EFA; UCX is flagged with its fix) and the per-rank transfer
rate against AWS's 1 GB/s "not on EFA" line; the verdict is ``proven``, ``refuted`` (the command fails) or
``unproven`` (a start-up line is missing, or a role has no pod to read). A request that took 80 % of the ALB
idle timeout
(``endpoint.load_balancer_idle_timeout_seconds``) is a warning: without streaming it would have been cut.

Every measurement made is kept: when a log cannot be read (or the long request fails after the short one
answered), the output (``--json`` too) still carries TTFT/TPOT of each request that answered, ``unchecked`` names
each check that could not be made and why, and the command exits 1 ("incomplete"): a check not made is no pass.
"""

from __future__ import annotations

import math
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.console import Console
from rich.table import Table

from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.errors import CommandFailed, UsageError
from hyperpod_core.names import ROLES, EndpointNames, certificate_pem_location
from hyperpod_dpd import dpd_logs, skew
from hyperpod_dpd.commands.options import (
    ConfigOption,
    EndpointOption,
    EnvOption,
    JsonOption,
    OutputOption,
    OutputsFileOption,
    ProfileOption,
    RegionOption,
)
from hyperpod_dpd.deployment import ContextOption, Deployment, KubeconfigOption, before_apply, deployable, load
from hyperpod_dpd.openai_stream import StreamResult, chat_payload, stream
from hyperpod_dpd.render import console, emit, output_format

if TYPE_CHECKING:  # boto3 and the Kubernetes client load when the command runs, not for --help
    from hyperpod_dpd.kube import Kube, PodTarget

#: Characters per token used to size prompts: English text tokenizes at about 4 characters per token with the
#: Llama 3 tokenizer, so ``len(text) / 4`` slightly over-estimates the real count (safe against max_model_len).
CHARS_PER_TOKEN = 4
#: Below this threshold the short prompt itself cannot stay under it; the "no transfer" check is skipped.
MIN_THRESHOLD_FOR_SHORT_CHECK = 64
#: Lines stamped up to this long before the first request still count (node clock behind this machine's).
CLOCK_SKEW = timedelta(seconds=30)
SHORT_PROMPT = "In one sentence, what is disaggregated prefill and decode? (smoke test {nonce})"


@dataclass(frozen=True, kw_only=True)
class Prompts:
    short: str
    long: str

    @property
    def short_tokens(self) -> int:
        return math.ceil(len(self.short) / CHARS_PER_TOKEN)

    @property
    def long_tokens(self) -> int:
        return math.ceil(len(self.long) / CHARS_PER_TOKEN)


def build_prompts(*, threshold: int, max_model_len: int, max_tokens: int, nonce: str) -> Prompts:
    """A short prompt and one of about ``2 x threshold`` tokens that still fits ``max_model_len``.

    Both start with ``nonce`` so no earlier run's KV cache (prefix cache, LMCache L1) can answer them.
    """
    cap = max_model_len - max_tokens - 256
    target = max(min(2 * threshold, cap), 256)
    head = f"Smoke test {nonce}. Read the numbered paragraphs, then summarise them in one line.\n"
    parts = [head]
    size = len(head)
    i = 0
    while size < target * CHARS_PER_TOKEN:
        line = f"Paragraph {i}: the quick brown fox jumps over the lazy dog near the river bank.\n"
        parts.append(line)
        size += len(line)
        i += 1
    parts.append("Summarise the text above in one line.")
    return Prompts(short=SHORT_PROMPT.format(nonce=nonce), long="".join(parts))


@dataclass(kw_only=True)
class RequestReport:
    name: str
    estimated_input_tokens: int
    expect_transfer: bool | None
    """True: must show ``Retrieved N out of N``; False: must show no transfer; None: not checked."""
    ok: bool = False
    answer: str = ""
    output_tokens: int = 0
    ttft_seconds: float | None = None
    tpot_seconds: float | None = None
    e2e_seconds: float | None = None
    transfers: list[dict[str, Any]] = field(default_factory=list)
    kv_transfer_gbps: float | None = None
    findings: list[dict[str, str]] = field(default_factory=list)
    log_lines: int = 0
    """Decoder log lines attributed to this request."""
    transfer_checked: bool = False
    """Its decoder log lines were read and judged (False: the log could not be read; see ``unchecked``)."""
    error: str | None = None
    """Why the request itself failed (no measurement then)."""


UrlOption = Annotated[str | None, typer.Option(
    "--url", metavar="URL", show_default=False,
    help="Call this URL (e.g. http://localhost:8443/v1/chat/completions after 'kubectl port-forward -n "
         "hyperpod-inference-system svc/<name>-<ns>-routing-service 8443:443') instead of the load "
         "balancer. The cluster is still read through the kubeconfig: the roles before the requests, the "
         "decoder's log after them.")]
CaFileOption = Annotated[str | None, typer.Option(
    "--ca-file", metavar="PATH", help="PEM to trust for an https --url (default: system CAs).", show_default=False)]
ModelOption = Annotated[str | None, typer.Option(
    metavar="NAME", show_default=False,
    help="Model name sent in the request. Default: the name the live pods serve (vLLM --served-model-name), else "
         "model.name (docs/endpoint.md, section 3).")]
MaxTokensOption = Annotated[int, typer.Option(metavar="N", help="Output tokens per request (2-1024).")]
TimeoutOption = Annotated[float, typer.Option(metavar="SECONDS", help="Seconds to wait for each streamed answer.")]
LogWaitOption = Annotated[float, typer.Option(metavar="SECONDS", help="Seconds to let the decoder flush its log.")]


def register(app: typer.Typer) -> None:
    app.command("smoke")(smoke)


def smoke(
    config: ConfigOption = None, env: EnvOption = None, endpoint: EndpointOption = None, as_json: JsonOption = False,
    url: UrlOption = None,
    ca_file: CaFileOption = None, kubeconfig: KubeconfigOption = None, context: ContextOption = None,
    model: ModelOption = None, max_tokens: MaxTokensOption = 64, timeout: TimeoutOption = 300.0,
    log_wait: LogWaitOption = 3.0, output: OutputOption = None, region: RegionOption = None,
    profile: ProfileOption = None, outputs_file: OutputsFileOption = None,
) -> None:
    """Send a short and a long prompt (streamed), measure TTFT/TPOT, prove the DPD path from the decode log."""
    from hyperpod_dpd.kube import kube_errors
    from hyperpod_dpd.rollout.store import live_name

    _check_arguments(max_tokens=max_tokens, url=url, ca_file=ca_file, timeout=timeout, log_wait=log_wait)
    fmt = output_format(output, as_json)
    dep = load(config, env, region=region, outputs_file=outputs_file)
    spec = dep.endpoint(endpoint, "smoke")
    names = EndpointNames(name=live_name(dep.env, spec), namespace=spec.namespace)  # <endpoint>-r<N> after a rollout
    kube = _cluster(dep, kubeconfig, context, url)
    p = probe(dep, spec, names, kube, url=url, ca_file=ca_file, model=model, max_tokens=max_tokens, timeout=timeout,
              log_wait=log_wait)
    roles, model, url, sent, since, unchecked = p.roles, p.model, p.url, p.sent, p.since, p.unchecked
    decoders, windows = p.decoders, p.windows
    decisions, router_error = _router_decisions(kube, names, since)
    if router_error:
        unchecked.append({"check": "the router's decisions (its log)", "reason": router_error})
    _explain_missing_transfer(sent.long, decisions)
    timeout_s = spec.load_balancer_idle_timeout().seconds
    for r in sent.reports:
        _check_idle_timeout(r, timeout_s)
    try:
        with kube_errors("reading the workers' start-up logs"):
            efa = efa_proof(kube, spec, names, decoders, windows, since, sent.start)
    except CommandFailed as exc:
        efa = {"verdict": "unknown", "pods": [], "error": str(exc)}
        unchecked.append({"check": "the KV path over EFA (the workers' start-up logs)", "reason": str(exc)})
    ok = all(r.ok for r in sent.reports) and efa["verdict"] != "refuted" and not unchecked
    threshold = spec.endpoint.routing_threshold_tokens
    if fmt.data:  # a JSON or YAML document instead of the table
        emit({"endpoint": spec.name, "url": url, "model": model, "threshold_tokens": threshold, "roles": roles,
              "requests": [asdict(r) for r in sent.reports],
              "router_decisions": decisions, "idle_timeout_seconds": timeout_s, "efa": efa,
              "unchecked": unchecked, "ok": ok}, fmt)
    else:
        _print(url, threshold, sent.reports)
        _print_evidence(decisions, efa, unchecked)
    _verdict(sent.reports, efa, unchecked)


@dataclass(frozen=True, kw_only=True)
class Probe:
    """What :func:`probe` found: the requests with their measurements and the KV transfer judged from the decoders'
    log."""

    roles: dict[str, Any]
    """What each role runs (:func:`_refuse_skew`)."""
    model: str
    """The model name the requests sent."""
    url: str
    sent: Sent
    since: int
    """Seconds back from now that the decoders' lines of the test were read from."""
    decoders: list[PodTarget]
    windows: dict[str, list[str]]
    """Decode pod -> its lines of the test."""
    unchecked: list[dict[str, str]]
    """Each check that could not be made, with why (a caller appends its own)."""


def probe(dep: Deployment, spec: EndpointSpec, names: EndpointNames, kube: Kube, *, url: str | None = None,
          ca_file: str | None = None, model: str | None = None, max_tokens: int, timeout: float,
          log_wait: float) -> Probe:
    """The checks ``smoke`` and a rollout's smoke of a new revision share, on the endpoint ``names``: the skew guard
    (refused in one line), the short and the long prompt (to ``url``, else through the endpoint's load balancer),
    then, ``log_wait`` seconds later, the KV transfer of each from the decoders' log."""
    unchecked: list[dict[str, str]] = []
    roles, served = _refuse_skew(kube, names, unchecked)
    model = model or served or spec.model.name  # the served name: the same for every revision of the weights
    with tempfile.TemporaryDirectory(prefix="hyperpod-dpd-smoke-") as tmp:
        if url is None:
            url, ca_file = _load_balancer_url(dep, spec, names, kube, Path(tmp))
        sent = _send(spec, url, ca_file, model, max_tokens=max_tokens, timeout=timeout)

    time.sleep(log_wait)
    since = math.ceil((datetime.now(UTC) - sent.start).total_seconds()) + 30
    decoders, windows = _judge_transfers(kube, spec, names, sent, since, unchecked)
    return Probe(roles=roles, model=model, url=url, sent=sent, since=since, decoders=decoders, windows=windows,
                 unchecked=unchecked)


def _cluster(dep: Deployment, kubeconfig: str | None, context: str | None, url: str | None) -> Kube:
    """The deployment's cluster. ``--url`` replaces only the load balancer: the roles are still read before the
    requests and the decoder's log after them, so without a usable kubeconfig the test stops before any request,
    naming the URL it did not call."""
    from hyperpod_dpd.kube import KubeFailure

    try:
        return dep.kube(kubeconfig, context)
    except KubeFailure as exc:
        if url is None:
            raise
        raise KubeFailure(f"{exc.summary}: smoke reads the cluster with --url too (the roles before the requests, "
                          f"the decoder's log after them), so {url} was not called", fix=exc.fix,
                          status=exc.status) from None


def _check_arguments(*, max_tokens: int, url: str | None, ca_file: str | None, timeout: float,
                     log_wait: float) -> None:
    if not 2 <= max_tokens <= 1024:
        raise UsageError(f"--max-tokens must be between 2 and 1024, got {max_tokens}")
    if url is not None and not url.startswith(("http://", "https://")):
        raise UsageError(f"--url must start with http:// or https://, got {url!r}")
    if ca_file is not None and not Path(ca_file).is_file():
        raise UsageError(f"--ca-file {ca_file!r} does not exist")
    if timeout <= 0 or log_wait < 0:
        raise UsageError(f"--timeout must be > 0 and --log-wait >= 0, got {timeout} and {log_wait}")


@dataclass(frozen=True, kw_only=True)
class Sent:
    """The two requests of the test, each with its answer recorded, and the streams of those that answered."""

    short: RequestReport
    long: RequestReport
    results: dict[str, StreamResult]
    """Request name -> its stream; a request that failed has none (its report says why)."""
    start: datetime
    """When the short request started: the decoder's lines of the test are those logged since."""

    @property
    def reports(self) -> list[RequestReport]:
        return [self.short, self.long]


def _send(spec: EndpointSpec, url: str, ca_file: str | None, model: str, *, max_tokens: int,
          timeout: float) -> Sent:
    """The short prompt, then the long one (module docstring), streamed to ``url``."""
    e = spec.endpoint
    threshold = e.routing_threshold_tokens
    prompts = build_prompts(threshold=threshold, max_model_len=e.max_model_len,
                            max_tokens=max_tokens, nonce=uuid.uuid4().hex[:12])
    chat = "chat" in e.invocation_path
    short = RequestReport(name="short", estimated_input_tokens=prompts.short_tokens,
                          expect_transfer=False if threshold >= MIN_THRESHOLD_FOR_SHORT_CHECK else None)
    long = RequestReport(name="long", estimated_input_tokens=prompts.long_tokens, expect_transfer=True)

    start = datetime.now(UTC)
    # The short request first: when it fails nothing was measured and the endpoint does not answer (one line).
    results = {short.name: stream(url, chat_payload(model, prompts.short, max_tokens, chat=chat),
                                  ca_file=ca_file, timeout_seconds=timeout)}
    try:
        results[long.name] = stream(url, chat_payload(model, prompts.long, max_tokens, chat=chat),
                                    ca_file=ca_file, timeout_seconds=timeout)
    except CommandFailed as exc:  # keep the short request's measurement
        long.error = str(exc)
        long.findings.append({"severity": "error", "signature": "request failed", "meaning": str(exc),
                              "fix": "read 'hyperpod-dpd logs decode' and 'hyperpod-dpd logs router'"})
    sent = Sent(short=short, long=long, results=results, start=start)
    for r in sent.reports:
        if r.name in results:
            _record_answer(r, results[r.name])
    return sent


def _judge_transfers(kube: Kube, spec: EndpointSpec, names: EndpointNames, sent: Sent, since: int,
                     unchecked: list[dict[str, str]]) -> tuple[list[PodTarget], dict[str, list[str]]]:
    """Judge each answered request by the decoder lines of the test that are its own (:func:`attribute`); the decode
    pods and their lines of the test, as far as they were read (a log that cannot be read goes to ``unchecked``)."""
    from hyperpod_dpd.kube import kube_errors

    decoders: list[PodTarget] = []
    windows: dict[str, list[str]] = {}
    try:
        with kube_errors("reading the decode pods' logs"):
            decoders = kube.role_pods(names, "decode")
            if not decoders:
                raise CommandFailed(f"no decode pod (Deployment {names.role_deployment('decode')} in "
                                    f"{names.namespace}); run 'hyperpod-dpd status'")
            windows = {target.pod: _window(kube, target, since, sent.start) for target in decoders}
    except CommandFailed as exc:
        unchecked.append({"check": "the KV transfer of each request (the decode pods' log)", "reason": str(exc)})
        return decoders, windows
    window = [line for lines in windows.values() for line in lines]
    endpoint = spec.endpoint
    for r in sent.reports:
        if r.name in sent.results:
            _judge(r, attribute(window, sent.results[r.name].response_id, long_prompt=r is sent.long,
                                threshold=endpoint.routing_threshold_tokens), endpoint.pd_buffer_size_bytes)
    return decoders, windows


def _print_evidence(decisions: list[dict[str, Any]], efa: dict[str, Any], unchecked: list[dict[str, str]]) -> None:
    """Below the table: the router's decisions, the KV path over EFA and each check that could not be made."""
    out = console(highlight=False)
    for d in decisions:
        path = "prefill -> decode" if d["disaggregate"] else "decode only"
        out.print(f"router: {d['estimated_tokens']} estimated tokens vs threshold {d['threshold']}: {path}")
    if efa["verdict"] != "unknown":
        _print_efa(out, efa)
    for u in unchecked:
        out.print(f"[yellow]not checked: {u['check']}[/yellow]: {u['reason']}")


def _verdict(reports: list[RequestReport], efa: dict[str, Any], unchecked: list[dict[str, str]]) -> None:
    """Fail (one line) on the first error of a request or a worker pod, else when a check could not be made."""
    failed = [(f"{r.name} prompt", f) for r in reports for f in r.findings if f["severity"] == "error"]
    failed += [(f"{p['role']} pod {p['pod']}", f) for p in efa["pods"] for f in p["findings"]
               if f["severity"] == "error"]
    if failed:
        where, f = failed[0]
        more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
        raise CommandFailed(f"smoke test failed: {where}: {f['signature']}: {f['meaning']}; "
                            f"fix: {f['fix']}{more}")
    if unchecked:
        names = "; ".join(u["check"] for u in unchecked)
        raise CommandFailed(f"smoke test incomplete: could not check {names} ({unchecked[0]['reason']}); the "
                            "requests' measurements are in the output")


def _refuse_skew(kube: Kube, names: EndpointNames, unchecked: list[dict[str, str]]) -> tuple[dict[str, Any], str]:
    """What each role runs (:func:`hyperpod_dpd.skew.summary`) and the name its Ready pods serve (their
    ``--served-model-name``, decode's first; "" when none is read); refused (one line) when prefill and decode differ
    or a role is mid-rollout (:func:`hyperpod_dpd.skew.findings`). When the Deployments cannot be read, or the roles
    cannot be compared (:func:`hyperpod_dpd.skew.uncompared`: a role not found, no Ready pod, a model not read), the
    check goes to ``unchecked`` and the test goes on: its measurements still count, the verdict is "incomplete"."""
    from hyperpod_dpd.kube import kube_errors

    check = "that prefill and decode run one image, model and pod template"
    try:
        with kube_errors("reading the prefill and decode Deployments"):
            workers = {role: kube.role_workers(names, role) for role in ROLES}
    except CommandFailed as exc:
        unchecked.append({"check": check, "reason": str(exc)})
        return {}, ""
    found = skew.findings(workers)
    if found:
        raise CommandFailed("refusing to certify a skewed endpoint: " + "; ".join(f.message for f in found)
                            + "; 'hyperpod-dpd status' shows each role's revision")
    unknown = skew.uncompared(workers)
    if unknown:
        unchecked.append({"check": check, "reason": "; ".join(unknown)})
    served = next((p.served_name for role in ("decode", "prefill") for p in workers[role].pods
                   if p.ready and not p.terminating and p.served_name), "")
    return {role: skew.summary(w) for role, w in workers.items()}, served


def _window(kube: Kube, target: PodTarget, since_seconds: int, start: datetime) -> list[str]:
    """The lines ``target`` logged since the test began (with :data:`CLOCK_SKEW` of slack), without timestamps."""
    lines = []
    for raw in kube.read_log(target, since_seconds=since_seconds, timestamps=True):
        stamp, text = dpd_logs.split_timestamp(raw)
        if stamp is not None and stamp >= start - CLOCK_SKEW:
            lines.append(text)
    return lines


#: The first bytes of a worker's log hold every rank's LMCache set-up (hyperpod_dpd.status.kv_path: the same budget).
STARTUP_LOG_BYTES = 4 << 20
#: A measured request this close to the ALB idle timeout would be cut if its bytes stopped flowing (no streaming).
IDLE_TIMEOUT_WARN_RATIO = 0.8


def efa_proof(kube: Kube, spec: EndpointSpec, names: EndpointNames, decoders: list[PodTarget],
              windows: dict[str, list[str]], since_seconds: int, start: datetime) -> dict[str, Any]:
    """Per worker pod, what its start-up lines and the lines of this test say about the KV path over EFA
    (:func:`hyperpod_dpd.dpd_logs.efa_findings`), and the verdict over all of them."""
    pods: list[dict[str, Any]] = []
    buffer = spec.endpoint.pd_buffer_size_bytes
    roles: tuple[tuple[Literal["prefill", "decode"], list[PodTarget]], ...] = (
        ("prefill", kube.role_pods(names, "prefill")), ("decode", decoders))
    for role, targets in roles:
        for target in targets:
            recent = windows[target.pod] if target.pod in windows else _window(kube, target, since_seconds, start)
            head = kube.read_log(target, limit_bytes=STARTUP_LOG_BYTES)
            lines = head + recent
            findings = dpd_logs.efa_findings(role, lines, pd_buffer_size_bytes=buffer)
            pods.append({"pod": target.pod, "role": role, "verdict": dpd_logs.efa_verdict(findings),
                         "setups": [asdict(s) for s in dpd_logs.worker_setups(head)],
                         "connectors": sorted(dpd_logs.connectors(head)),
                         "findings": [asdict(f) for f in findings]})
    verdicts = {p["verdict"] for p in pods}
    # Over EFA means between the pools: a role without a pod to read proves nothing, however clean the other's log.
    missing = [role for role, targets in roles if not targets]
    verdict = ("refuted" if "refuted" in verdicts else "unproven" if "unproven" in verdicts or missing else "proven")
    return {"verdict": verdict, "pods": pods, "roles_without_pods": missing}


def _check_idle_timeout(report: RequestReport, timeout_seconds: int) -> None:
    """Warn when a request took at least 80 % of the ALB idle timeout: streamed, its bytes kept the connection open;
    the same request from a client that does not stream sends no byte until the end and would be cut."""
    took = report.e2e_seconds
    if took is None or took < IDLE_TIMEOUT_WARN_RATIO * timeout_seconds:
        return
    report.findings.append({
        "severity": "warn", "signature": f"{took:.1f} s of a {timeout_seconds} s idle timeout",
        "meaning": f"the request took {took / timeout_seconds:.0%} of the ALB idle timeout "
                   "(endpoint.load_balancer_idle_timeout_seconds); a client that does not stream would be cut off",
        "fix": "raise endpoint.load_balancer_idle_timeout_seconds (at most 4000) or have clients stream"})


def _print_efa(out: Console, efa: dict[str, Any]) -> None:
    label = {"proven": "[green]proven[/green]", "refuted": "[red]refuted[/red]",
             "unproven": "[yellow]not proven[/yellow]"}[efa["verdict"]]
    out.print(f"KV path over EFA: {label}" + (f" (no {' or '.join(efa['roles_without_pods'])} pod to read)"
                                              if efa.get("roles_without_pods") else ""))
    colour = {"ok": "green", "info": "cyan", "warn": "yellow", "error": "red"}
    for p in efa["pods"]:
        for f in p["findings"]:
            c = colour[f["severity"]]
            out.print(f"  {p['role']} {p['pod']}: [{c}]{f['signature']}[/{c}]: {f['meaning']}"
                      + (f"\n    fix: {f['fix']}" if f["fix"] and f["severity"] in ("warn", "error") else ""))


def _router_decisions(kube: Kube, names: EndpointNames, since_seconds: int) -> tuple[list[dict[str, Any]], str]:
    """The router's ``Conditional routing`` lines of the test's time span (supporting evidence: a router whose log
    cannot be read leaves the verdict to the decoder's log), and why they could not be read ("" when they were)."""
    from hyperpod_dpd.kube import kube_errors

    decisions: list[dict[str, Any]] = []
    try:
        with kube_errors("reading the router's log"):
            for target in kube.router_pods(names):
                for line in kube.read_log(target, since_seconds=since_seconds):
                    d = dpd_logs.routing_decision(line)
                    if d is not None:
                        decisions.append({"estimated_tokens": d[0], "threshold": d[1], "disaggregate": d[2]})
    except CommandFailed as exc:
        return [], str(exc)
    return decisions, ""


def _explain_missing_transfer(report: RequestReport, decisions: list[dict[str, Any]]) -> None:
    """Sharpen the fix of a long prompt without a transfer with what the router decided."""
    for f in report.findings:
        if not f["signature"].startswith("no 'Retrieved"):
            continue
        if any(d["disaggregate"] for d in decisions):
            f["fix"] = ("the router disaggregated (Conditional routing ... disaggregate=True) but no KV cache "
                        "arrived: read 'hyperpod-dpd logs prefill' for send errors and check the EFA security group")
        elif decisions:
            top = max(decisions, key=lambda d: d["estimated_tokens"])
            f["fix"] = (f"the router estimated at most {top['estimated_tokens']} tokens against threshold "
                        f"{top['threshold']} (disaggregate=False): check pdSpec.routingThreshold on the applied "
                        "InferenceEndpointConfig")


def _load_balancer_url(dep: Deployment, spec: EndpointSpec, names: EndpointNames, kube: Kube, tmp: Path
                       ) -> tuple[str, str]:
    """``https://<ALB>/<invocation path>`` of the InferenceEndpointConfig ``names`` (the live revision of ``spec``'s
    endpoint) and the PEM the operator wrote to the TLS bucket (CRD status)."""
    from hyperpod_dpd import aws
    from hyperpod_dpd.kube import kube_errors

    with kube_errors(f"reading InferenceEndpointConfig {names.namespace}/{names.name}"):
        obj = kube.endpoint(names)
        hosts = kube.load_balancer_hosts(names) if obj is not None else []
    if obj is None:
        layout = dep.layout(spec)
        raise CommandFailed(f"InferenceEndpointConfig {names.namespace}/{names.name} not found; "
                            f"{before_apply(layout)}apply {deployable(layout).endpoint_dir}/ first")
    status = obj.get("status") or {}
    if status.get("state") != "DeploymentComplete":
        raise CommandFailed(f"endpoint state is {status.get('state') or 'unset'}, not DeploymentComplete; wait "
                            "('hyperpod-dpd status --watch') before the smoke test")
    if not hosts:
        raise CommandFailed("no load balancer hostname on the endpoint's Ingress yet; or call the router through "
                            f"'kubectl port-forward -n hyperpod-inference-system svc/{names.router_service} "
                            "8443:443' and --url http://localhost:8443/...")
    location = certificate_pem_location(status)
    if location is None:
        raise CommandFailed("status.tlsCertificate names no PEM (tlsCertificateOutputS3Bucket / "
                            "tlsCertificateS3Keys); pass --url and --ca-file")
    bucket, key = location
    pem = tmp / "endpoint-ca.pem"
    with aws.aws_errors(f"downloading the endpoint certificate s3://{bucket}/{key}"):
        aws.client("s3", dep.region).download_file(bucket, key, str(pem))
    return f"https://{hosts[0]}/{spec.endpoint.invocation_path}", str(pem)


def _record_answer(report: RequestReport, result: StreamResult) -> None:
    report.answer = result.text.strip()
    report.output_tokens = result.output_tokens
    report.ttft_seconds = round(result.ttft_seconds, 4)
    report.tpot_seconds = round(result.tpot_seconds, 5) if result.tpot_seconds is not None else None
    report.e2e_seconds = round(result.e2e_seconds, 4)
    if not report.answer:
        report.findings.append({"severity": "error", "signature": "empty answer",
                                "meaning": "the model returned no text", "fix": "read 'hyperpod-dpd logs decode'"})
    elif result.finish_reason not in ("stop", "length"):
        report.findings.append({"severity": "error", "signature": f"finish_reason {result.finish_reason}",
                                "meaning": "the answer did not finish normally",
                                "fix": "read 'hyperpod-dpd logs decode'"})


def attribute(lines: list[str], response_id: str | None, *, long_prompt: bool, threshold: int) -> list[str]:
    """The decoder lines of one request, out of the lines logged while the smoke test ran.

    By request id first: LMCache logs ``[req_id=...]``, vLLM's id of the request, which contains the id of the
    streamed response when the server passes it through. Else by size: the ``from N total tokens`` of the long
    prompt is at or above the routing threshold, the short one's below it. Allocation failures (no id) belong to
    the long request, the one that needs the decoder's receive buffer. Time alone is not used: the nodes' clock
    and this machine's may differ by seconds.
    """
    parsed = [(line, dpd_logs.parse_transfer(line)) for line in lines]
    if response_id:
        by_id = [line for line, t in parsed if t is not None and t.req_id
                 and (response_id in t.req_id or t.req_id in response_id)]
        if by_id:
            return by_id + ([line for line in lines if dpd_logs.allocation_failures([line])] if long_prompt else [])
    chosen = []
    for line, t in parsed:
        if t is None:
            if long_prompt and dpd_logs.allocation_failures([line]):
                chosen.append(line)
            continue
        if (t.total_tokens >= threshold) == long_prompt:
            chosen.append(line)
    return chosen


def _judge(report: RequestReport, lines: list[str], pd_buffer_size_bytes: int) -> None:
    found = dpd_logs.transfers(lines)
    report.transfers = [asdict(t) for t in found]
    rates = [t.throughput_gbps for t in found if t.throughput_gbps is not None and t.retrieved_tokens > 0]
    report.kv_transfer_gbps = round(min(rates), 4) if rates else None
    if report.expect_transfer is not False:
        for t in found:
            f = dpd_logs.transfer_finding(t)
            if f.severity == "error":
                report.findings.append(asdict(f))
    if dpd_logs.allocation_failures(lines):
        report.findings.append(asdict(dpd_logs.alloc_finding(pd_buffer_size_bytes=pd_buffer_size_bytes)))
    moved = [t for t in found if t.retrieved_tokens > 0]
    report.log_lines = len(lines)
    report.transfer_checked = True
    if report.expect_transfer is True and not found:
        report.findings.append({
            "severity": "error", "signature": "no 'Retrieved N out of N required tokens'",
            "meaning": "no KV cache arrived at the decoder for the long prompt (not disaggregated, or lost)",
            "fix": "check the router's 'Conditional routing' line ('hyperpod-dpd logs router') and that "
                   "endpoint.routing_threshold_tokens is below the prompt size"})
    if report.expect_transfer is False and moved:
        report.findings.append({
            "severity": "error", "signature": f"Retrieved {moved[0].retrieved_tokens} tokens for the short prompt",
            "meaning": "a prompt below the routing threshold went through the prefill pool",
            "fix": "check pdSpec.routingThreshold on the applied InferenceEndpointConfig"})
    report.ok = bool(report.answer) and not any(f["severity"] == "error" for f in report.findings)


def _print(url: str, threshold: int, reports: list[RequestReport]) -> None:
    out = console()
    out.print(f"smoke test against {url} (routing threshold {threshold} tokens)")
    table = Table("request", "input tokens (est.)", "path expected", "TTFT s", "TPOT s", "output tokens",
                  "KV transfer", "result")
    for r in reports:
        expected = {True: "prefill -> decode", False: "decode only", None: "not checked"}[r.expect_transfer]
        kv = (f"{r.transfers[0]['retrieved_tokens']}/{r.transfers[0]['required_tokens']} tokens"
              + (f", {r.kv_transfer_gbps:g} GB/s" if r.kv_transfer_gbps is not None else "")) if r.transfers \
            else "none" if r.transfer_checked else "not checked"
        table.add_row(r.name, str(r.estimated_input_tokens), expected,
                      f"{r.ttft_seconds:.3f}" if r.ttft_seconds is not None else "-",
                      f"{r.tpot_seconds:.4f}" if r.tpot_seconds is not None else "-", str(r.output_tokens), kv,
                      "[green]ok[/green]" if r.ok else "[red]FAILED[/red]")
    out.print(table)
    for r in reports:
        for f in r.findings:
            c = "yellow" if f["severity"] == "warn" else "red"
            out.print(f"[{c}]{r.name}: {f['signature']}[/{c}]: {f['meaning']}\n  fix: {f['fix']}")
