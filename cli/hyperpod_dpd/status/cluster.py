"""The cluster's rows: the HyperPod cluster and its instance groups (SageMaker ``DescribeCluster``,
``ListClusterNodes``, ``DescribeClusterNode``), the EKS add-ons against their pins (``ListAddons``,
``DescribeAddon``) and the GPU nodes of each pool as scheduling sees them (Kubernetes nodes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hyperpod_core import pins
from hyperpod_core.names import NODE_HEALTH_TAINT_KEY, NODE_HEALTH_UNSCHEDULABLE, POOL_NODE_LABEL
from hyperpod_dpd.deployment import Deployment
from hyperpod_dpd.status.check import Check

if TYPE_CHECKING:  # the Kubernetes client loads in the checks that call it, not for --help
    from hyperpod_dpd.kube import NodeState

ADDON_PINS: tuple[pins.AddonPin, ...] = (
    pins.VPC_CNI, pins.KUBE_PROXY, pins.COREDNS, pins.POD_IDENTITY_AGENT, pins.S3_CSI, pins.FSX_CSI,
    pins.METRICS_SERVER, pins.CERT_MANAGER, pins.INFERENCE_OPERATOR, pins.OBSERVABILITY)
#: Add-ons without which the endpoint cannot serve (the operator and what its init container requires:
#: operator.md, "Operator init-container checks").
SERVING_ADDONS = frozenset({pins.INFERENCE_OPERATOR.name, pins.S3_CSI.name, pins.FSX_CSI.name,
                            pins.CERT_MANAGER.name})
MAX_DESCRIBED_NODES = 50


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
