"""``hyperpod-dpd status``: one screen saying whether the endpoint can serve, and what to do when it cannot.

Sources of each row:

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

Exit code 0 only when the endpoint can serve: HyperPod cluster ``InService`` with every instance group at its
target, state ``DeploymentComplete``, every role Ready at its replica count, a Ready router, and prefill and decode
serving one image and one model path.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hyperpod_core import pins
from hyperpod_core.errors import CommandFailed, UsageError
from hyperpod_core.names import (
    NODE_HEALTH_TAINT_KEY,
    NODE_HEALTH_UNSCHEDULABLE,
    OPERATOR_NAMESPACE,
    POOL_NODE_LABEL,
    ROLES,
    Role,
    certificate_pem_location,
)
from hyperpod_dpd import skew
from hyperpod_dpd.commands.options import (
    ConfigOption,
    EnvOption,
    JsonOption,
    OutputOption,
    OutputsFileOption,
    ProfileOption,
    RegionOption,
)
from hyperpod_dpd.deployment import ContextOption, Deployment, KubeconfigOption, load
from hyperpod_dpd.render import console, emit, output_format

if TYPE_CHECKING:  # boto3 and the Kubernetes client load in the checks that call them, not for --help
    from hyperpod_dpd.kube import Kube, NodeState, PodTarget, RoleWorkers

State = Literal["ok", "warn", "fail"]
ADDON_PINS: tuple[pins.AddonPin, ...] = (
    pins.VPC_CNI, pins.KUBE_PROXY, pins.COREDNS, pins.POD_IDENTITY_AGENT, pins.S3_CSI, pins.FSX_CSI,
    pins.METRICS_SERVER, pins.CERT_MANAGER, pins.INFERENCE_OPERATOR, pins.OBSERVABILITY)
#: Add-ons without which the endpoint cannot serve (the operator and what its init container requires:
#: operator.md, "Operator init-container checks").
SERVING_ADDONS = frozenset({pins.INFERENCE_OPERATOR.name, pins.S3_CSI.name, pins.FSX_CSI.name,
                            pins.CERT_MANAGER.name})
MAX_DESCRIBED_NODES = 50
_PD_SPEC_KEYS = {"prefill": "prefillSpec", "decode": "decodingSpec"}


@dataclass(frozen=True, kw_only=True)
class Check:
    section: str
    name: str
    state: State
    detail: str
    next_step: str = ""
    blocks_serving: bool = True
    """A failed check with this flag means the endpoint cannot serve."""
    facts: dict[str, Any] = field(default_factory=dict)
    """What the row is about, as data for ``--json`` (the skew rows: each role's image, model path and revision)."""


def register(app: typer.Typer) -> None:
    app.command("status")(status)


def status(
    config: ConfigOption = None, env: EnvOption = None, as_json: JsonOption = False,
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
    dep.check_context(kubeconfig, context)  # another cluster's context: refused before anything is read
    out = console(highlight=False)
    shown = 0
    while True:
        checks = collect(dep, kubeconfig, context)
        serving = can_serve(checks)
        if fmt.data:
            emit({"serving": serving, "checks": [asdict(c) for c in checks]}, fmt)
        else:
            if watch:
                out.clear()
            render(out, dep, checks, serving)
        shown += 1
        if not watch or (refreshes and shown >= refreshes):
            break
        time.sleep(interval)
    if not serving:
        first = next(c for c in checks if c.state == "fail" and c.blocks_serving)
        raise CommandFailed(f"the endpoint cannot serve: {first.name}: {first.detail}"
                            + (f"; next: {first.next_step}" if first.next_step else ""))


def can_serve(checks: list[Check]) -> bool:
    return not any(c.state == "fail" and c.blocks_serving for c in checks)


def collect(dep: Deployment, kubeconfig: str | None, context: str | None) -> list[Check]:
    checks: list[Check] = []
    checks += _guard("hyperpod", f"cluster {dep.hyperpod_cluster}", lambda: hyperpod_checks(dep))
    checks += _guard("eks", f"add-ons of {dep.eks_cluster}", lambda: addon_checks(dep), blocks_serving=False)
    checks += _guard("nodes", f"GPU nodes of {dep.eks_cluster}", lambda: node_checks(dep, kubeconfig, context))
    checks += _guard("endpoint", f"{dep.names.namespace}/{dep.names.name}",
                     lambda: endpoint_checks(dep, kubeconfig, context))
    checks.append(alerts_check(dep))
    return checks


def alerts_check(dep: Deployment) -> Check:
    """Who the alerts reach, from the config (``hyperpod_core.telemetry.notices``): one line, never blocking."""
    from hyperpod_core.telemetry.notices import alerts_notice, receivers

    config = dep.env.config
    notice = alerts_notice(config)
    if notice:
        return Check(section="observability", name="alerts", state="warn", detail=notice, blocks_serving=False,
                     next_step="set observability.alerts.email_addresses or topic_arn, then cdk deploy")
    return Check(section="observability", name="alerts", state="ok", blocks_serving=False,
                 detail=f"alert manager -> SNS -> {', '.join(receivers(config))}")


def _guard(section: str, name: str, read: Callable[[], list[Check]], *, blocks_serving: bool = True) -> list[Check]:
    """The section's checks, or one failed row when its service cannot be read, with the fix the error's code calls
    for (:func:`hyperpod_dpd.aws.explain`, :func:`hyperpod_dpd.kube.kube_errors`)."""
    try:
        return read()
    except CommandFailed as exc:
        return [Check(section=section, name=name, state="fail", detail=getattr(exc, "summary", str(exc)),
                      blocks_serving=blocks_serving,
                      next_step=getattr(exc, "fix", "") or "read the error above, fix it and run status again")]


def _not_deployed(dep: Deployment, stack: str) -> str:
    """The fix for a cluster that does not exist: deploy its stack (or the names come from the wrong place)."""
    return (f"it is not deployed: hyperpod-dpd deploy {dep.env.selector} (stack {stack}); names from "
            f"{dep.outputs_source}, region {dep.region}")


def hyperpod_checks(dep: Deployment) -> list[Check]:
    from hyperpod_dpd import aws

    sm = aws.client("sagemaker", dep.region)
    name = dep.hyperpod_cluster
    with aws.aws_errors(f"describing HyperPod cluster {name}",
                        missing=_not_deployed(dep, f"{dep.env.config.name}-hyperpod")):
        cluster = sm.describe_cluster(ClusterName=name)
        nodes: list[dict[str, Any]] = []
        for page in sm.get_paginator("list_cluster_nodes").paginate(ClusterName=name):
            nodes += page.get("ClusterNodeSummaries", [])
        placements = {n["InstanceId"]: sm.describe_cluster_node(ClusterName=name, NodeId=n["InstanceId"])
                      .get("NodeDetails", {}).get("Placement", {}) for n in nodes[:MAX_DESCRIBED_NODES]}
    state = cluster.get("ClusterStatus", "Unknown")
    checks = [Check(section="hyperpod", name=f"cluster {name}", state="ok" if state == "InService" else "fail",
                    detail=state + (f": {cluster['FailureMessage']}" if cluster.get("FailureMessage") else ""),
                    next_step="" if state == "InService" else
                    ("wait for InService" if state in ("Creating", "Updating", "SystemUpdating")
                     else f"read 'aws sagemaker describe-cluster --cluster-name {name}' and the stack events of "
                          f"{dep.env.config.name}-hyperpod"))]
    for group in cluster.get("InstanceGroups", []):
        gname = group["InstanceGroupName"]
        members = [n for n in nodes if n.get("InstanceGroupName") == gname]
        running = sum(1 for n in members if n.get("InstanceStatus", {}).get("Status") == "Running")
        target = group.get("TargetCount", group.get("CurrentCount", 0))
        others = sorted({f"{n['InstanceId']} {n.get('InstanceStatus', {}).get('Status')}" for n in members
                         if n.get("InstanceStatus", {}).get("Status") != "Running"})
        member_ids = {m["InstanceId"] for m in members}
        zones = sorted({str(p.get("AvailabilityZoneId") or p.get("AvailabilityZone"))
                        for i, p in placements.items() if i in member_ids and p})
        detail = (f"{group.get('InstanceType')} {running}/{target} Running"
                  + (f", AZ {', '.join(zones)}" if zones else "") + (f"; {', '.join(others)}" if others else ""))
        ok = running >= target
        group_cfg = next((g for g in dep.env.config.hyperpod.instance_groups if g.name == gname), None)
        want_az = (group_cfg.availability_zone_id if group_cfg and group_cfg.availability_zone_id
                   else dep.env.config.network.gpu_availability_zone_id)
        stray = [z for z in zones if z.count("-az") == 1 and z != want_az]
        if ok and stray:
            # DPD moves the KV cache over EFA between nodes in one AZ (pdSpec.topologySpec.sameAZ, operator.md).
            checks.append(Check(section="hyperpod", name=f"instance group {gname}", state="fail", detail=detail,
                                next_step=f"nodes in {', '.join(stray)}, config says {want_az}: DPD needs every GPU "
                                          "node in one AZ; fix network.gpu_availability_zone_id or the capacity"))
            continue
        checks.append(Check(
            section="hyperpod", name=f"instance group {gname}", state="ok" if ok else "fail", detail=detail,
            next_step="" if ok else "nodes in Pending/DeepHealthCheckInProgress need time (deep health checks take "
                                    "up to hours); Failure: node recovery replaces it, or check capacity/quota"))
    return checks


def addon_checks(dep: Deployment) -> list[Check]:
    from hyperpod_dpd import aws

    eks = aws.client("eks", dep.region)
    with aws.aws_errors(f"listing the add-ons of EKS cluster {dep.eks_cluster}",
                        missing=_not_deployed(dep, f"{dep.env.config.name}-cluster")):
        names: list[str] = []
        for page in eks.get_paginator("list_addons").paginate(clusterName=dep.eks_cluster):
            names += page.get("addons", [])
        addons = {n: eks.describe_addon(clusterName=dep.eks_cluster, addonName=n)["addon"] for n in names}
    checks: list[Check] = []
    wanted = [p for p in ADDON_PINS if p is not pins.OBSERVABILITY or dep.env.config.observability.enabled]
    for pin in wanted:
        blocks = pin.name in SERVING_ADDONS
        addon = addons.get(pin.name)
        if addon is None:
            checks.append(Check(section="eks", name=pin.name, state="fail", detail="not installed",
                                next_step="run 'npx cdk deploy --all' (the cluster/platform stacks install it)",
                                blocks_serving=blocks))
            continue
        version, state = addon.get("addonVersion", "?"), addon.get("status", "?")
        issues = "; ".join(f"{i.get('code')}: {i.get('message')}" for i in addon.get("health", {}).get("issues", []))
        if state != "ACTIVE":
            checks.append(Check(section="eks", name=pin.name, state="fail", detail=f"{version} {state}"
                                + (f" ({issues})" if issues else ""), blocks_serving=blocks,
                                next_step=f"'aws eks describe-addon --cluster-name {dep.eks_cluster} --addon-name "
                                          f"{pin.name}'; fix the named issue, then cdk deploy"))
        elif version != pin.version:
            checks.append(Check(section="eks", name=pin.name, state="warn", detail=f"{version} ACTIVE",
                                next_step=f"pinned {pin.version}: run 'npx cdk deploy --all' to converge",
                                blocks_serving=False))
        else:
            checks.append(Check(section="eks", name=pin.name, state="ok", detail=f"{version} ACTIVE",
                                blocks_serving=blocks))
    return checks


def in_deep_health_checks(node: NodeState) -> bool:
    """HyperPod's deep-health-check taint (``node-health-status=Unschedulable``, effect NoSchedule)."""
    return any(k == NODE_HEALTH_TAINT_KEY and v == NODE_HEALTH_UNSCHEDULABLE for k, v, _ in node.taints)


def schedulable(node: NodeState) -> bool:
    """Pods without tolerations can land on it: Ready, not cordoned, no NoSchedule/NoExecute taint."""
    return node.ready and not node.cordoned and not any(e in ("NoSchedule", "NoExecute") for _, _, e in node.taints)


def node_checks(dep: Deployment, kubeconfig: str | None, context: str | None) -> list[Check]:
    """One row per pool of the config: its registered nodes, which of them take pods, which are still in deep
    health checks."""
    from hyperpod_dpd.kube import kube_errors

    kube = dep.kube(kubeconfig, context)
    with kube_errors(f"listing the nodes labelled {POOL_NODE_LABEL}"):
        nodes = kube.nodes(POOL_NODE_LABEL)
    checks: list[Check] = []
    for pool in dict.fromkeys(g.pool for g in dep.env.config.hyperpod.instance_groups):
        members = [n for n in nodes if n.labels.get(POOL_NODE_LABEL) == pool]
        ok = [n.name for n in members if schedulable(n)]
        checking = [n.name for n in members if in_deep_health_checks(n)]
        other = [n.name + (" NotReady" if not n.ready else " cordoned" if n.cordoned else " tainted")
                 for n in members if not schedulable(n) and not in_deep_health_checks(n)]
        detail = f"{len(ok)}/{len(members)} schedulable" + (
            f"; in deep health checks: {', '.join(checking)}" if checking else "") + (
            f"; {', '.join(other)}" if other else "")
        name = f"pool {pool}"
        if not members:
            checks.append(Check(section="nodes", name=name, state="fail", detail="no node registered",
                                next_step="HyperPod is still creating the nodes: see the hyperpod rows and 'aws "
                                          "sagemaker list-cluster-events --cluster-name " + dep.hyperpod_cluster + "'"))
        elif not ok:
            checks.append(Check(
                section="nodes", name=name, state="fail", detail=detail,
                next_step="deep health checks take up to hours on p5; wait ('hyperpod-dpd status --watch'), the "
                          "pods schedule when they pass" if checking else
                          f"'kubectl describe node {members[0].name}' (conditions, taints)"))
        else:
            checks.append(Check(section="nodes", name=name, state="warn" if checking or other else "ok",
                                detail=detail, blocks_serving=False,
                                next_step="new pods of this pool land only on the schedulable nodes until the "
                                          "others pass their checks" if checking or other else ""))
    return checks


def endpoint_checks(dep: Deployment, kubeconfig: str | None, context: str | None) -> list[Check]:
    from hyperpod_dpd.kube import kube_errors

    names = dep.names
    kube = dep.kube(kubeconfig, context)
    with kube_errors(f"reading InferenceEndpointConfig {names.namespace}/{names.name}"):
        obj = kube.endpoint(names)
        if obj is None:
            return [Check(section="endpoint", name=f"{names.namespace}/{names.name}", state="fail",
                          detail="InferenceEndpointConfig not found",
                          next_step=f"kubectl apply -f {dep.env.dist}/endpoint/")]
        dpd = (obj.get("spec") or {}).get("pdSpec") is not None
        workers = {role: kube.role_workers(names, role) for role in ROLES} if dpd else {}
        routers = kube.router_pods(names)
        app_pods = [] if dpd else kube.app_pods(names)
        hosts = kube.load_balancer_hosts(names)
    status_ = obj.get("status") or {}
    spec = obj.get("spec") or {}
    state = status_.get("state") or "unset"
    conditions = "; ".join(f"{c.get('type')}={c.get('status')} {c.get('reason')}: {c.get('message')}"
                           for c in status_.get("conditions") or [])
    next_state = {
        "DeploymentComplete": "",
        "DeploymentPending": "the operator has not started; 'hyperpod-dpd logs operator'",
        "DeploymentInProgress": "pods load the weights from S3 (5-10 minutes, 2/3 containers Ready); "
                                "'hyperpod-dpd status --watch'",
        "DeploymentFailed": "read the conditions and 'hyperpod-dpd logs operator'; fix, then re-apply",
    }.get(state, "the endpoint is being deleted or in an unknown state; 'hyperpod-dpd logs operator'")
    checks = [Check(section="endpoint", name="state", state="ok" if state == "DeploymentComplete" else "fail",
                    detail=state + (f" ({conditions})" if conditions else ""), next_step=next_state)]
    pd_spec = spec.get("pdSpec")
    pods = {role: w.pods for role, w in workers.items()}
    if pd_spec is None:
        checks += _colocated_checks(dep, spec, app_pods)
    else:
        checks += _dpd_checks(dep, pd_spec, pods, routers)
        checks += skew_checks(dep, workers)
    checks += revision_check(dep, spec)
    checks.append(load_balancer_check(dep, hosts))
    pem = certificate_pem_location(status_)
    health = (status_.get("tlsCertificate") or {}).get("certificateHealth")
    where = f"s3://{pem[0]}/{pem[1]}" if pem else "not written yet"
    tls_state: State = "fail" if health == "Expired" else ("warn" if health == "Expiring" or not pem else "ok")
    checks.append(Check(section="endpoint", name="TLS certificate", state=tls_state,
                        detail=where + (f" ({health})" if health else ""), blocks_serving=False,
                        next_step={"fail": "the certificate expired: re-apply the endpoint to re-issue it",
                                   "warn": "wait for the operator to write the PEM / renew the certificate",
                                   "ok": ""}[tls_state]))
    checks += cache_checks(dep, kube, spec, status_)
    if pd_spec is not None:
        model_skew = any(f.kind == "model" for f in skew.findings(workers))
        checks += efa_checks(dep, kube, pods, model_skew=model_skew)
    return checks


def revision_check(dep: Deployment, spec: dict[str, Any]) -> list[Check]:
    """The applied endpoint's weights (``--model`` of its ``worker.args``, which carries the revision) against the
    manifest of the same mode the environment's last synth wrote (``dist/``); none without that manifest. A new
    revision is not applied until both roles' pods run it, and applying it in place changes both pod templates: with
    no free GPU in a pool the new pods stay Pending (docs/endpoint.md, Model identity)."""
    import yaml

    from hyperpod_core.dist_layout import DistLayout, Mode
    from hyperpod_dpd.vllm_args import model_of_argv

    mode: Mode = "dpd" if spec.get("pdSpec") is not None else "colocated"
    layout = DistLayout.found(dep.env.dist, dep.names.name, dep.env.config.endpoint.apply)
    path = layout.endpoint_file(mode)
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    except (OSError, yaml.YAMLError):
        return []
    synthesized = model_of_argv([str(a) for a in ((docs[0].get("spec") or {}).get("worker") or {}).get("args") or []]
                                ) if docs else ""
    applied = model_of_argv([str(a) for a in (spec.get("worker") or {}).get("args") or []])
    if not synthesized:
        return []
    facts = {"applied": applied, "synthesized": synthesized}
    if applied == synthesized:
        return [Check(section="endpoint", name="revision", state="ok", blocks_serving=False,
                      detail=f"{applied}, as synthesized ({path})", facts=facts)]
    if layout.unresolved:
        fix = f"the synth left placeholders ({path.parent.parent / 'README.txt'}): resolve them, synthesize again"
    else:
        fix = (f"apply the new revision: kubectl delete -f {path} && kubectl apply -f {path} (one cold start; in "
               f"place, kubectl apply -f {path}, only with a spare node per pool: both roles' new pods need GPUs)")
    return [Check(section="endpoint", name="revision", state="warn", blocks_serving=False,
                  detail=f"applied {applied or '(model unknown)'}; synthesized {synthesized} ({path})",
                  next_step=fix, facts=facts)]


# --- cold start (operator v3.3 modelCacheConfig) ------------------------------------------------------------

#: ``status.imageCacheStatus.state`` (v3.3 CRD enum: Pending | Downloading | Ready | Failed | PartiallyReady).
_CACHE_WAIT = {"Pending", "Downloading", "PartiallyReady"}


def cache_checks(dep: Deployment, kube: Kube, spec: dict[str, Any], status_: dict[str, Any]) -> list[Check]:
    """The image cache (``status.imageCacheStatus``) and the weights cache (the operator's ModelWeightsCacheConfig).
    Neither blocks serving: without them a pod pulls its image and loads its weights from S3, only slower."""
    from hyperpod_dpd.kube import kube_errors

    cache = spec.get("modelCacheConfig") or {}
    checks = [_image_cache_check(cache, status_.get("imageCacheStatus"))]
    weights = cache.get("weightsCache") or {}
    if not weights.get("enabled"):
        checks.append(Check(section="endpoint", name="weights cache", state="ok", blocks_serving=False,
                            detail="off: weights load from S3 on every pod start (5-10 min for a 70B model)"))
        return checks
    try:
        with kube_errors("listing the ModelWeightsCacheConfig objects"):
            found = kube.weights_caches(dep.names, spec.get("modelSourceConfig"))
    except CommandFailed as exc:
        return [*checks, Check(section="endpoint", name="weights cache", state="warn", detail=str(exc),
                               blocks_serving=False)]
    checks.append(_weights_cache_check(dep, weights, found))
    return checks


def _image_cache_check(cache: dict[str, Any], image: dict[str, Any] | None) -> Check:
    if not (cache.get("imageCache") or {}).get("enabled"):
        return Check(section="endpoint", name="image cache", state="ok", blocks_serving=False,
                     detail="off: every new pod pulls the worker image itself")
    if not image:
        return Check(section="endpoint", name="image cache", state="warn", blocks_serving=False,
                     detail="on, but the endpoint has no status.imageCacheStatus",
                     next_step="the operator reports it from v3.3 on (add-on v1.4.0): check the add-on version")
    state = str(image.get("state") or "unset")
    nodes = f"{image.get('readyNodes', 0)}/{image.get('targetNodes', '?')} nodes"
    message = f": {image['message']}" if image.get("message") else ""
    ok = state == "Ready"
    return Check(section="endpoint", name="image cache", state="ok" if ok else "warn", blocks_serving=False,
                 detail=f"{state}, {nodes}{message}",
                 next_step="" if ok else ("the operator's DaemonSet is still pulling; pods pull the image themselves "
                                          "meanwhile" if state in _CACHE_WAIT else
                                          "'kubectl describe modelimagecache -A' and the DaemonSet's pod events"))


def _weights_cache_check(dep: Deployment, weights: dict[str, Any], found: list[dict[str, Any]] | None) -> Check:
    host_path = weights.get("hostPath", "/opt/dlami/nvme")
    if found is None:
        return Check(section="endpoint", name="weights cache", state="warn", blocks_serving=False,
                     detail="on, but the cluster has no ModelWeightsCacheConfig CRD",
                     next_step="the weights cache needs operator v3.3 (add-on v1.4.0): check the add-on version")
    if not found:
        return Check(section="endpoint", name="weights cache", state="warn", blocks_serving=False,
                     detail=f"on ({host_path}), but no ModelWeightsCacheConfig for {dep.names.name} yet",
                     next_step="the operator creates it after the endpoint; 'hyperpod-dpd logs operator'")
    rows = []
    for obj in found:
        st = obj.get("status") or {}
        message = f": {st['message']}" if st.get("message") else ""
        rows.append((str(st.get("state") or "Pending"),
                     f"{obj['metadata']['name']} {st.get('state') or 'Pending'}, "
                     f"{st.get('readyNodes', 0)}/{st.get('targetNodes', '?')} nodes{message}"))
    ok = all(state == "Ready" for state, _ in rows)
    failed = any(state == "Failed" for state, _ in rows)
    return Check(section="endpoint", name="weights cache", state="ok" if ok else "warn", blocks_serving=False,
                 detail=f"{host_path}: " + "; ".join(text for _, text in rows),
                 next_step="" if ok else (
                     f"'kubectl describe modelweightscacheconfig -n {dep.names.namespace}'; check that {host_path} is "
                     "a mount point on the nodes (the lifecycle log says so) and has room for the model"
                     if failed else "the cache fills after the first download; pods load from S3 meanwhile"))


# --- the KV path over EFA, from the workers' logs -----------------------------------------------------------

#: The first bytes of a worker's log hold its start-up lines (the LMCache set-up of every rank) [I: a few hundred
#: KiB in a vLLM 0.19 start-up; 4 MiB leaves room]; the last lines its recent transfers.
STARTUP_LOG_BYTES = 4 << 20
RECENT_LOG_LINES = 2000


def efa_checks(dep: Deployment, kube: Kube, pods: dict[Role, list[PodTarget]], *,
               model_skew: bool = False) -> list[Check]:
    """One row per role: each pod's ``pd_role``, NIXL transport and per-rank transfer rates, proven or refuted
    (:func:`hyperpod_dpd.dpd_logs.efa_findings`). A refuted path still serves (the decoder recomputes), so the
    row does not block serving, but the endpoint is then not disaggregated in any useful sense. ``model_skew``: the
    roles run different ``--model`` values (the skew row), which is what a full receive buffer then means."""
    from hyperpod_dpd import dpd_logs
    from hyperpod_dpd.kube import kube_errors

    checks: list[Check] = []
    buffer = dep.env.config.endpoint.pd_buffer_size_bytes
    for role in ROLES:
        if not pods[role]:
            continue
        parts, verdicts, fixes = [], [], []
        try:
            with kube_errors(f"reading the {role} logs"):
                for target in pods[role]:
                    lines = (kube.read_log(target, limit_bytes=STARTUP_LOG_BYTES)
                             + kube.read_log(target, tail_lines=RECENT_LOG_LINES))
                    findings = dpd_logs.efa_findings(role, lines, pd_buffer_size_bytes=buffer, model_skew=model_skew)
                    verdicts.append(dpd_logs.efa_verdict(findings))
                    parts.append(f"{target.pod}: " + ", ".join(
                        f.signature for f in findings if f.severity in ("ok", "error", "warn")))
                    fixes += [f.fix for f in findings if f.severity in ("error", "warn") and f.fix]
        except CommandFailed as exc:
            checks.append(Check(section="endpoint", name=f"KV path ({role})", state="warn", detail=str(exc),
                                blocks_serving=False))
            continue
        state: State = ("fail" if "refuted" in verdicts else "warn" if "unproven" in verdicts else "ok")
        verdict = {"fail": "refuted", "warn": "not proven", "ok": "over EFA"}[state]
        checks.append(Check(section="endpoint", name=f"KV path ({role})", state=state, blocks_serving=False,
                            detail=f"{verdict}: " + "; ".join(parts), next_step=fixes[0] if fixes else ""))
    return checks


def load_balancer_check(dep: Deployment, hosts: list[str]) -> Check:
    """The ALB behind the Ingress hostname and its ELBv2 state (``active``, ``provisioning``, ``failed``)."""
    from hyperpod_dpd import aws

    if not hosts:
        return Check(section="endpoint", name="load balancer", state="warn", blocks_serving=False,
                     detail="no ALB hostname on the Ingress yet",
                     next_step="the AWS Load Balancer Controller provisions it after the pods; meanwhile use "
                               "'kubectl port-forward' to the router")
    try:
        elbv2 = aws.client("elbv2", dep.region)
        with aws.aws_errors("describing the load balancers"):
            states = {lb["DNSName"].lower(): lb.get("State", {}).get("Code", "unknown")
                      for page in elbv2.get_paginator("describe_load_balancers").paginate()
                      for lb in page.get("LoadBalancers", [])}
    except CommandFailed as exc:
        return Check(section="endpoint", name="load balancer", state="warn", blocks_serving=False,
                     detail=f"{', '.join(hosts)} (state unknown: {exc})")
    state = states.get(hosts[0].lower(), "not found in ELBv2")
    ok = state == "active"
    return Check(section="endpoint", name="load balancer", state="ok" if ok else "warn", blocks_serving=False,
                 detail=f"{', '.join(hosts)} ({state})",
                 next_step="" if ok else ("provisioning takes a few minutes" if state == "provisioning" else
                                          f"read the Ingress events: 'kubectl describe ingress {dep.names.ingress} "
                                          f"-n {OPERATOR_NAMESPACE}' and the controller's log"))


def _dpd_checks(dep: Deployment, pd_spec: dict[str, Any], pods: dict[Role, list[PodTarget]],
                routers: list[PodTarget]) -> list[Check]:
    names = dep.names
    checks: list[Check] = []
    for role in ROLES:
        role_cfg = dep.env.config.endpoint.prefill if role == "prefill" else dep.env.config.endpoint.decode
        desired = int((pd_spec.get(_PD_SPEC_KEYS[role]) or {}).get("replicas", role_cfg.replicas))
        ready = sum(1 for p in pods[role] if p.ready)
        ok = ready >= desired
        checks.append(Check(
            section="endpoint", name=f"{role} pods", state="ok" if ok else "fail",
            detail=f"Ready {ready}/{desired}" + (f" ({', '.join(p.pod for p in pods[role])})" if pods[role] else ""),
            next_step="" if ok else (f"no pod yet: check GPU nodes labelled hyperpod-dpd/pool={role} and free GPUs"
                                     if not pods[role] else
                                     f"'kubectl describe pod -n {names.namespace} {pods[role][0].pod}' and "
                                     f"'hyperpod-dpd logs {role}'")))
    ready_routers = sum(1 for p in routers if p.ready)
    checks.append(Check(section="endpoint", name="router", state="ok" if ready_routers else "fail",
                        detail=f"Ready {ready_routers}/{len(routers)} ({names.router_service}:443)",
                        next_step="" if ready_routers else "the operator creates the router with pdSpec; "
                                                           "'hyperpod-dpd logs router' / 'hyperpod-dpd logs operator'"))
    return checks


def skew_checks(dep: Deployment, workers: dict[Role, RoleWorkers]) -> list[Check]:
    """One row per role with what it runs (image, ``--model``, pod templates and revisions), then one row that
    compares them (:func:`hyperpod_dpd.skew.findings`). A different image or model path between the serving pods
    means the endpoint cannot serve correctly (the decoder recomputes what prefill sent, and prefill's transfers
    stall once the decoder's PD buffer is full of KV it never reads); a rollout alone is a warning (``smoke`` refuses
    to certify the endpoint until it is over), and so is what cannot be compared (:func:`hyperpod_dpd.skew.
    uncompared`): a role whose Deployment is not found, without a Ready pod, or whose model cannot be read."""
    names = dep.names
    found = skew.findings(workers)
    checks = []
    for role in ROLES:
        w = workers[role]
        rolling = [f for f in found if f.role == role]
        checks.append(Check(section="endpoint", name=f"{role} revision", state="warn" if rolling or not w.found
                            else "ok", detail=skew.describe(w), blocks_serving=False, facts=skew.summary(w),
                            next_step=f"kubectl rollout status deployment/{w.deployment} -n {names.namespace}"
                            if rolling else "" if w.found else
                            f"kubectl get deployments -n {names.namespace} -l "
                            f"inference.sagemaker.aws.amazon.com/dpd-role={role} (the operator's name for it)"))
    rollout = " and ".join(f"'kubectl rollout status deployment/{workers[r].deployment} -n {names.namespace}'"
                           for r in ROLES)
    differ = [f for f in found if f.kind != "rollout"]
    facts = {"skewed": bool(found), "findings": [{"kind": f.kind, "role": f.role, "message": f.message}
                                                 for f in found]}
    if differ:
        path = dep.env.dist / "endpoint"
        return [*checks, Check(
            section="endpoint", name="prefill/decode skew", state="fail", facts=facts,
            detail="; ".join(f.message for f in found),
            next_step=f"the decoder recomputes what prefill sends and transfers stall once its PD buffer is full: "
                      f"let both roles finish their rollouts ({rollout}), or replace the endpoint so both start on one "
                      f"revision: kubectl delete -f {path}/ && kubectl apply -f {path}/; a new pod Pending for GPUs "
                      "never finishes a rollout (docs/operations.md#skew-guard)")]
    if found:
        return [*checks, Check(
            section="endpoint", name="prefill/decode skew", state="warn", blocks_serving=False, facts=facts,
            detail="; ".join(f.message for f in found),
            next_step=f"wait for the rollout ({rollout}); smoke refuses to certify the endpoint until it is over")]
    unknown = skew.uncompared(workers)
    if unknown:
        return [*checks, Check(section="endpoint", name="prefill/decode skew", state="warn", blocks_serving=False,
                               facts={**facts, "uncompared": unknown}, detail=f"not compared: {'; '.join(unknown)}")]
    return [*checks, Check(section="endpoint", name="prefill/decode skew", state="ok", facts=facts,
                           detail="none: both roles serve one image and one model path, each from one pod template")]


def _colocated_checks(dep: Deployment, spec: dict[str, Any], pods: list[PodTarget]) -> list[Check]:
    """The colocated baseline (same name, no pdSpec; docs/endpoint.md): its pods carry ``app=<iec>`` (the
    HyperPod SDK lists an endpoint's pods by that label, operator.md section (e)); no DPD router."""
    from hyperpod_core.dist_layout import DistLayout

    names = dep.names
    dpd_manifest = DistLayout.found(dep.env.dist, names.name, dep.env.config.endpoint.apply).endpoint_file("dpd")
    desired = int(spec.get("replicas", 1))
    ready = sum(1 for p in pods if p.ready)
    ok = ready >= desired
    return [
        Check(section="endpoint", name="mode", state="warn", blocks_serving=False,
              detail="colocated (no pdSpec): the baseline / rollback manifest is applied",
              next_step=f"to serve disaggregated, kubectl apply -f {dpd_manifest}"),
        Check(section="endpoint", name="pods", state="ok" if ok else "fail",
              detail=f"Ready {ready}/{desired}" + (f" ({', '.join(p.pod for p in pods)})" if pods else ""),
              next_step="" if ok else f"'kubectl describe pods -n {names.namespace} -l app={names.name}'"),
    ]


def render(out: Console, dep: Deployment, checks: list[Check], serving: bool) -> None:
    out.print(f"[bold]{dep.env.config.name}[/bold] ({dep.region}; names from {escape(dep.outputs_source)})")
    colour = {"ok": "green", "warn": "yellow", "fail": "red"}
    table = Table("section", "component", "state", "detail", "next step", show_lines=False)
    for c in checks:
        table.add_row(c.section, escape(c.name), f"[{colour[c.state]}]{c.state}[/{colour[c.state]}]",
                      escape(c.detail), escape(c.next_step))
    out.print(table)
    out.print("[green]the endpoint can serve[/green]" if serving else "[red]the endpoint cannot serve[/red]")
