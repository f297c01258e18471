"""``hyperpod-dpd logs ROLE``: the log of the right pods and container for this endpoint, signatures marked.

The endpoint is the one ``--endpoint`` names, else the config's only one (the operator's log is the cluster's, the
same for every endpoint).

Roles and where they live (names: :mod:`hyperpod_core.names`): the pods of the Deployment ``prefill-<endpoint>`` /
``decode-<endpoint>`` in the endpoint namespace (vLLM container ``<role>-<endpoint>``), of the router's
``<endpoint>-<namespace>-router`` in ``hyperpod-inference-system`` (container ``router-container``), of the operator
Deployment (container ``manager``); each picked by its Deployment's own selector, never by a name prefix. After a
blue/green rollout ``<endpoint>`` there stands for the revision that serves, ``<endpoint>-r<N>``
(:func:`hyperpod_dpd.rollout.store.live_name`). Lines
carrying a known signature (:mod:`hyperpod_dpd.dpd_logs`) are coloured and followed by their meaning and fix.
"""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from hyperpod_core.errors import CommandFailed, UsageError
from hyperpod_core.names import OPERATOR_NAMESPACE, EndpointNames
from hyperpod_dpd import dpd_logs
from hyperpod_dpd.commands.options import (
    ConfigOption,
    EndpointOption,
    EnvOption,
    OutputsFileOption,
    ProfileOption,
    RegionOption,
)
from hyperpod_dpd.deployment import ContextOption, KubeconfigOption, load

if TYPE_CHECKING:  # the Kubernetes client loads when the command runs, not for --help
    from hyperpod_dpd.kube import Kube, PodTarget

ROLES = ("prefill", "decode", "router", "operator")
#: ``--since``: a duration as kubectl takes it (Go's time.ParseDuration, whole seconds and up): 30s, 5m, 1h30m.
_DURATION = re.compile(r"(\d+)(h|m|s)")
_SECONDS = {"h": 3600, "m": 60, "s": 1}
_STYLE = {"error": "bold red", "ok": "green", "info": "cyan"}


def register(app: typer.Typer) -> None:
    app.command("logs")(logs)


def logs(
    role: Annotated[str, typer.Argument(metavar="ROLE", help="prefill | decode | router | operator",
                                        show_default=False)],
    config: ConfigOption = None, env: EnvOption = None, endpoint: EndpointOption = None,
    kubeconfig: KubeconfigOption = None, context: ContextOption = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep streaming new lines.")] = False,
    tail: Annotated[int, typer.Option(
        metavar="LINES", help="Lines to show from the end of each log (0-100000).")] = 200,
    signatures_only: Annotated[bool, typer.Option(
        "--signatures-only", help="Show only lines with a known DPD signature.")] = False,
    previous: Annotated[bool, typer.Option(
        "--previous", "-p", help="The log of each container's previous instance (before its last restart).")] = False,
    since: Annotated[str | None, typer.Option(
        "--since", metavar="DURATION", help="Only lines newer than this, e.g. 30s, 5m, 1h30m (with --tail: both).",
        show_default=False)] = None,
    region: RegionOption = None, profile: ProfileOption = None, outputs_file: OutputsFileOption = None,
) -> None:
    """Show the logs of one role of this endpoint, with DPD failure signatures highlighted."""
    from hyperpod_dpd.kube import kube_errors
    from hyperpod_dpd.rollout.store import live_name

    if role not in ROLES:
        raise UsageError(f"ROLE must be one of {', '.join(ROLES)}, got {role!r}")
    if not 0 <= tail <= 100_000:
        raise UsageError(f"--tail must be between 0 and 100000, got {tail}")
    since_seconds = None if since is None else duration_seconds(since)
    dep = load(config, env, region=region, outputs_file=outputs_file)
    # The operator serves every endpoint: its log needs none named.
    spec = None if role == "operator" and endpoint is None else dep.endpoint(endpoint, "logs")
    # The revision that serves: <endpoint>-r<N> after a blue/green rollout (the revision store's).
    names = EndpointNames(name=live_name(dep.env, spec), namespace=spec.namespace) if spec is not None else None
    kube = dep.kube(kubeconfig, context)
    with kube_errors(f"listing the {role} pods"):
        targets = kube.operator_pods() if names is None else _targets(kube, names, role)
    if not targets:
        if names is None or role == "operator":
            where = f"operator Deployment in {OPERATOR_NAMESPACE}"
        elif role == "router":
            where = f"Deployment {names.router_deployment} in {OPERATOR_NAMESPACE}"
        else:
            deployment = names.role_deployment("prefill" if role == "prefill" else "decode")
            where = f"Deployment {deployment} in {names.namespace}"
        raise CommandFailed(f"no {role} pods ({where}); run 'hyperpod-dpd status'")
    out = Console(highlight=False, soft_wrap=True)
    prefix = len(targets) > 1
    pd_buffer = spec.endpoint.pd_buffer_size_bytes if spec is not None else None
    with kube_errors(f"reading the {role} logs"):
        for target, line in _lines(kube, targets, follow=follow, tail=tail, since_seconds=since_seconds,
                                   previous=previous):
            finding = dpd_logs.classify(line, pd_buffer_size_bytes=pd_buffer)
            if finding is None and signatures_only:
                continue
            head = f"[dim]{escape(target.pod)}[/dim] " if prefix else ""
            text = escape(dpd_logs.strip_ansi(line))
            if finding is None:
                out.print(head + text)
                continue
            style = _STYLE[finding.severity]
            note = f"  <- {finding.meaning}" + (f"; fix: {finding.fix}" if finding.fix else "")
            out.print(f"{head}[{style}]{text}[/{style}][{style}]{escape(note)}[/{style}]")


def _targets(kube: Kube, names: EndpointNames, role: str) -> list[PodTarget]:
    if role == "router":
        return kube.router_pods(names)
    if role == "operator":
        return kube.operator_pods()
    return kube.role_pods(names, "prefill" if role == "prefill" else "decode")


def duration_seconds(text: str) -> int:
    """Seconds of a ``--since`` duration (``30s``, ``5m``, ``1h30m``); bad input is a usage error."""
    parts = _DURATION.findall(text)
    seconds = sum(int(n) * _SECONDS[unit] for n, unit in parts)
    if "".join(n + unit for n, unit in parts) != text or seconds < 1:
        raise UsageError(f"--since must be a duration such as 30s, 5m or 1h30m (at least 1s), got {text!r}")
    return seconds


def _lines(kube: Kube, targets: list[PodTarget], *, follow: bool, tail: int, since_seconds: int | None = None,
           previous: bool = False) -> Iterator[tuple[PodTarget, str]]:
    which: dict[str, Any] = {"tail_lines": tail, "since_seconds": since_seconds, "previous": previous}
    if not follow:
        for target in targets:
            for line in kube.read_log(target, **which):
                yield target, line
        return
    if len(targets) == 1:
        for line in kube.follow_log(targets[0], **which):
            yield targets[0], line
        return
    # Several pods: one reader thread each, lines merged in arrival order.
    lines: queue.Queue[tuple[PodTarget, str] | tuple[PodTarget, BaseException] | None] = queue.Queue()

    def read(target: PodTarget) -> None:
        try:
            for line in kube.follow_log(target, **which):
                lines.put((target, line))
        except BaseException as exc:  # surfaced in the main thread
            lines.put((target, exc))
        finally:
            lines.put(None)

    for target in targets:
        threading.Thread(target=read, args=(target,), daemon=True).start()
    running = len(targets)
    while running:
        item = lines.get()
        if item is None:
            running -= 1
            continue
        target, value = item
        if isinstance(value, BaseException):
            raise value
        yield target, value
