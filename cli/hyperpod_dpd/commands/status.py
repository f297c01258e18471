"""``hyperpod-dpd status``: one screen saying whether the endpoint can serve, and what to do when it cannot.

The cluster's rows once, then one section per endpoint: the one ``--endpoint`` names, else every endpoint of the
config (each row of a section carries its endpoint's name, ``endpoint`` in ``--json``).

Sources of each row (the rows are built per area in :mod:`hyperpod_dpd.status`):

* HyperPod: SageMaker ``DescribeCluster`` (``ClusterStatus``, ``InstanceGroups[].CurrentCount/TargetCount``),
  ``ListClusterNodes`` and ``DescribeClusterNode`` (``InstanceStatus.Status``, ``Placement``).
* GPU nodes: the Kubernetes nodes of each pool (label ``hyperpod-dpd/pool``), and whether pods can be scheduled
  on them: ``Ready``, not cordoned, and without the taint HyperPod keeps on a node while its deep health checks
  run (``sagemaker.amazonaws.com/node-health-status=Unschedulable:NoSchedule``, HyperPod EKS prerequisites). The
  deploy does not wait for the deep health checks (they can outlast CloudFormation's hour; docs/deploy.md): this
  row names the nodes still in them.
* EKS add-ons: ``ListAddons``/``DescribeAddon`` (``addonVersion``, ``status``, ``health.issues``), compared with
  the versions pinned in :mod:`hyperpod_core.pins`.
* Endpoint: the ``InferenceEndpointConfig`` status of the operator CRD (``state``, ``conditions[]``,
  ``tlsCertificate``; ``shared/crds/v3.3/inferenceendpointconfigs.yaml``), the role pods, the router pods and the
  load balancer on the endpoint's Ingress. Requests get 503 until ``state`` is ``DeploymentComplete``
  (``shared/reference/operations.md``). Pods are those their Deployment's own selector picks
  (:mod:`hyperpod_dpd.kube`), never those whose name starts like the endpoint's.
* Skew: per role the image, ``--model`` and pod template (``pod-template-hash``, ``deployment.kubernetes.io/revision``)
  of its pods, and whether prefill and decode differ (:mod:`hyperpod_dpd.skew`); what cannot be compared is a
  warning, never a match. Revision: the applied ``--model`` against the manifest the environment's synth wrote.
* Cold start (operator v3.3): ``status.imageCacheStatus`` (``state``, ``readyNodes``/``targetNodes``, ``message``)
  and the ``status`` of the operator's ModelWeightsCacheConfig (``shared/crds/v3.3``).
* KV path: each worker's start-up and recent log lines (:func:`hyperpod_dpd.dpd_logs.efa_findings`): ``pd_role``,
  the NIXL transport, per-rank transfer rates against the 1 GB/s EFA line, ``Retrieved 0 out of N``.

Exit code 0 only when every endpoint shown can serve: HyperPod cluster ``InService`` with every instance group at its
target, state ``DeploymentComplete``, every role Ready at its replica count, a Ready router, and prefill and decode
serving one image and one model path.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, replace
from functools import partial
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.errors import CommandFailed, UsageError
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
from hyperpod_dpd.deployment import ContextOption, Deployment, KubeconfigOption, endpoints_of, load
from hyperpod_dpd.render import console, emit, output_format
from hyperpod_dpd.status.check import Check
from hyperpod_dpd.status.cluster import addon_checks, hyperpod_checks, node_checks
from hyperpod_dpd.status.endpoint import endpoint_checks


def register(app: typer.Typer) -> None:
    app.command("status")(status)


def status(
    config: ConfigOption = None, env: EnvOption = None, endpoint: EndpointOption = None, as_json: JsonOption = False,
    kubeconfig: KubeconfigOption = None, context: ContextOption = None,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Refresh until interrupted.")] = False,
    interval: Annotated[float, typer.Option(metavar="SECONDS",
                                             help="Seconds between refreshes with --watch (2-3600).")] = 10.0,
    refreshes: Annotated[int, typer.Option(metavar="N", hidden=True, help="Stop --watch after this many screens.")] = 0,
    output: OutputOption = None, region: RegionOption = None, profile: ProfileOption = None,
    outputs_file: OutputsFileOption = None,
) -> None:
    """HyperPod nodes, EKS add-ons and the endpoint, each with the next step when it is not healthy."""
    if not 2 <= interval <= 3600:
        raise UsageError(f"--interval must be between 2 and 3600 seconds, got {interval:g}")
    fmt = output_format(output, as_json)
    if watch and fmt.data:
        raise UsageError("--watch prints a screen; use --json without --watch")
    dep = load(config, env, region=region, outputs_file=outputs_file)
    specs = endpoints_of(dep.env, endpoint, "status")
    dep.check_context(kubeconfig, context)  # another cluster's context: refused before anything is read
    out = console(highlight=False)
    shown = 0
    while True:
        checks = collect(dep, specs, kubeconfig, context)
        serving = {s.name: can_serve(checks, s.name) for s in specs}
        if fmt.data:
            emit({"serving": all(serving.values()),
                  "endpoints": [{"name": s.name, "namespace": s.namespace, "serving": serving[s.name]} for s in specs],
                  "checks": [asdict(c) for c in checks]}, fmt)
        else:
            if watch:
                out.clear()
            render(out, dep, checks, serving, verdict=watch or all(serving.values()))
        shown += 1
        if not watch or (refreshes and shown >= refreshes):
            break
        time.sleep(interval)
    cannot = [name for name, ok in serving.items() if not ok]
    if cannot:
        first = next(c for c in checks if c.state == "fail" and c.blocks_serving and c.endpoint in (None, *cannot))
        who = "the endpoint" if len(serving) == 1 else f"endpoint {', '.join(cannot)}"
        raise CommandFailed(f"{who} cannot serve: {first.name}"
                            + (f" ({first.endpoint})" if first.endpoint and len(serving) > 1 else "")
                            + f": {first.detail}" + (f"; next: {first.next_step}" if first.next_step else ""))


def can_serve(checks: list[Check], endpoint: str) -> bool:
    """No failed row that blocks serving among the cluster's rows and ``endpoint``'s."""
    return not any(c.state == "fail" and c.blocks_serving and c.endpoint in (None, endpoint) for c in checks)


def collect(dep: Deployment, specs: tuple[EndpointSpec, ...], kubeconfig: str | None,
            context: str | None) -> list[Check]:
    """The cluster's rows, then each endpoint's (its name on every row), then the alerts' row."""
    checks: list[Check] = []
    checks += _guard("hyperpod", f"cluster {dep.hyperpod_cluster}", lambda: hyperpod_checks(dep))
    checks += _guard("eks", f"add-ons of {dep.eks_cluster}", lambda: addon_checks(dep), blocks_serving=False)
    checks += _guard("nodes", f"GPU nodes of {dep.eks_cluster}", lambda: node_checks(dep, kubeconfig, context))
    for spec in specs:
        rows = _guard("endpoint", f"{spec.namespace}/{spec.name}",
                      partial(endpoint_checks, dep, spec, kubeconfig, context))
        checks += [replace(c, endpoint=spec.name) for c in rows]
    checks.append(alerts_check(dep))
    return checks


def alerts_check(dep: Deployment) -> Check:
    """Who the alerts reach, from the config (``hyperpod_core.telemetry.notices``): one line, never blocking."""
    from hyperpod_core.telemetry.notices import alerts_notice, receivers

    config = dep.env.config
    notice = alerts_notice(config.observability)
    if notice:
        return Check(section="observability", name="alerts", state="warn", detail=notice, blocks_serving=False,
                     next_step="set observability.alerts.email_addresses or topic_arn, then cdk deploy")
    return Check(section="observability", name="alerts", state="ok", blocks_serving=False,
                 detail=f"alert manager -> SNS -> {', '.join(receivers(config.observability))}")


def _guard(section: str, name: str, read: Callable[[], list[Check]], *, blocks_serving: bool = True) -> list[Check]:
    """The section's checks, or one failed row when its service cannot be read, with the fix the error's code calls
    for (:func:`hyperpod_dpd.aws.explain`, :func:`hyperpod_dpd.kube.kube_errors`)."""
    try:
        return read()
    except CommandFailed as exc:
        return [Check(section=section, name=name, state="fail", detail=getattr(exc, "summary", str(exc)),
                      blocks_serving=blocks_serving,
                      next_step=getattr(exc, "fix", "") or "read the error above, fix it and run status again")]


def render(out: Console, dep: Deployment, checks: list[Check], serving: dict[str, bool], *,
           verdict: bool = True) -> None:
    """One table: the cluster's rows, then a section per endpoint (``endpoint <name>`` when there are several); a
    verdict line per endpoint (``verdict``). A single screen on which some endpoint cannot serve leaves the verdict to
    the error line the command ends with (what blocks serving, and the next step)."""
    out.print(f"[bold]{dep.env.config.name}[/bold] ({dep.region}; names from {escape(dep.outputs_source)})")
    colour = {"ok": "green", "warn": "yellow", "fail": "red"}
    table = Table("section", "component", "state", "detail", "next step", show_lines=False)
    several = len(serving) > 1
    for c in checks:
        section = f"{c.section} {c.endpoint}" if several and c.endpoint else c.section
        table.add_row(escape(section), escape(c.name), f"[{colour[c.state]}]{c.state}[/{colour[c.state]}]",
                      escape(c.detail), escape(c.next_step))
    out.print(table)
    if verdict:
        for name, ok in serving.items():
            who = f"endpoint {escape(name)}" if several else "the endpoint"
            out.print(f"[green]{who} can serve[/green]" if ok else f"[red]{who} cannot serve[/red]")
