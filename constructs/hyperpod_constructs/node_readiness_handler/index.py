"""Provider-framework entry points of ``NodeReadiness``: ``index.on_event`` and ``index.is_complete``.

Create and Update start a bounded wait; ``is_complete`` lists the cluster's nodes through the Kubernetes
API (``GET /api/v1/nodes?labelSelector=...``) and completes once every requirement has enough *registered*
nodes (a Node object with the pool's label), whatever their state: HyperPod's deep health checks keep a new node
tainted ``sagemaker.amazonaws.com/node-health-status=Unschedulable:NoSchedule`` for what can be hours, longer than
CloudFormation's hour, so the deploy does not wait for them (``hyperpod-dpd status`` reports them). At the
deadline it fails with one message naming each pool that is short and the state of the nodes it has. Delete does
nothing. Standard library and boto3 only.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from hyperpod_runtime.eks.kube import HttpsTransport, KubeUnavailable, Response, Transport
from hyperpod_runtime.eks.token import get_token

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)
TransportFactory = Callable[[dict[str, Any]], Transport]


def make_transport(props: dict[str, Any]) -> Transport:
    import boto3
    from botocore.config import Config

    region = os.environ["AWS_REGION"]
    name = props["ClusterName"]
    session = boto3.session.Session(region_name=region)
    config = Config(retries={"mode": "standard", "max_attempts": 6}, connect_timeout=10, read_timeout=30)
    cluster = session.client("eks", config=config).describe_cluster(name=name)["cluster"]
    ca_pem = base64.b64decode(cluster["certificateAuthority"]["data"]).decode("ascii")
    # One request per requirement and poll: the next poll (every minute) is the retry, and urllib3's waits (up to
    # 20 s each, Retry-After included) could outlast this 2-minute function.
    return HttpsTransport(cluster["endpoint"], ca_pem, lambda: get_token(name, region=region, session=session),
                          retries=False)


def on_event(event: dict[str, Any], context: Any = None, *,
             clock: Callable[[], float] = time.time) -> dict[str, Any]:
    props = event.get("ResourceProperties") or {}
    physical_id = event.get("PhysicalResourceId") or f"node-readiness-{props['ClusterName']}"
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": physical_id}
    return {"PhysicalResourceId": physical_id,
            "Data": {"Deadline": str(clock() + float(props.get("WaitSeconds", 2700)))}}


def _is_ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _state(node: dict[str, Any]) -> str:
    taints = [t.get("key", "") for t in (node.get("spec") or {}).get("taints") or []]
    return ("Ready" if _is_ready(node) else "NotReady") + (f" (taints {','.join(taints)})" if taints else "")


def shortfalls(transport: Transport, requirements: list[dict[str, Any]]) -> list[str]:
    """One line per requirement that is not met yet; ``[]`` when every one is."""
    missing = []
    for requirement in requirements:
        selector = f"{requirement['LabelKey']}={requirement['LabelValue']}"
        path = "/api/v1/nodes?" + urllib.parse.urlencode({"labelSelector": selector})
        response: Response = transport.request("GET", path)
        if response.status >= 400:
            raise KubeUnavailable(f"GET {path}: HTTP {response.status} {response.body[:200]!r}")
        nodes = json.loads(response.body or b"{}").get("items") or []
        wanted = int(requirement["MinRegistered"])
        if len(nodes) < wanted:
            states = ", ".join(f"{(n.get('metadata') or {}).get('name', '?')} {_state(n)}" for n in nodes[:5])
            missing.append(f"{requirement.get('Description', selector)}: {len(nodes)} of {wanted} registered "
                           f"node(s) with label {selector}" + (f" (nodes: {states})" if nodes else ""))
    return missing


def is_complete(event: dict[str, Any], context: Any = None, *, factory: TransportFactory = make_transport,
                clock: Callable[[], float] = time.time) -> dict[str, Any]:
    if event["RequestType"] == "Delete":
        return {"IsComplete": True}
    props = event.get("ResourceProperties") or {}
    requirements = json.loads(props["Requirements"])
    now = clock()
    deadline = float((event.get("Data") or {}).get("Deadline", now))
    try:
        missing = shortfalls(factory(props), requirements)
    except Exception as err:
        if now < deadline:
            LOG.warning("node check failed, retrying on the next poll: %r", err)
            return {"IsComplete": False}
        missing = [f"could not list the nodes: {err!r}"]
    if not missing:
        LOG.info("every node requirement is met: %s", requirements)
        return {"IsComplete": True}
    LOG.info("waiting: %s", missing)
    if now >= deadline:
        raise RuntimeError(
            f"NodeReadiness: {props.get('WaitingFor', 'a dependent resource')} needs registered nodes, and after "
            f"{int(float(props.get('WaitSeconds', 0)) // 60)} min these are missing: " + "; ".join(missing)
            + ". A node registers once its instance is up and its lifecycle script ran: check capacity, quota and "
            "lifecycle-script failures (aws sagemaker list-cluster-events --cluster-name "
            f"{props.get('HyperPodClusterName', '<hyperpod cluster>')}) and kubectl get nodes -L "
            + requirements[0]["LabelKey"] + "; then run cdk deploy again.")
    return {"IsComplete": False}
