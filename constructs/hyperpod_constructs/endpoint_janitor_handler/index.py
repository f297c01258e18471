"""Provider-framework entry points: ``index.on_event`` and ``index.is_complete``.

Create and Update do nothing (they keep the physical id, so an update never triggers a cleanup).
A Delete cleans up only while the stack is being deleted (or a failed first create rolls back): both entry points
read the stack's status first (``hyperpod_runtime.stack_status``). CloudFormation also sends Delete during an update
(the janitor removed or replaced, its logical ID changed, a failed update that added it rolled back); then nothing
is deleted, the skip is logged and the Delete succeeds (``is_complete``: ``IsComplete`` True). A status that
cannot be read deletes nothing: throttling or a network error is retried on the next poll until the deadline;
access denied until half the deadline (a policy created seconds before, when a failed first create rolls back, may
not be visible yet: IAM is eventually consistent), then it fails the Delete with a message saying what helps, as
any other refusal (no such stack) does at once.

In the stack's deletion, Delete asks Kubernetes to delete every InferenceEndpointConfig and JumpStartModel,
then ``is_complete`` polls until the objects and the AWS resources the operator made for them are gone. Once no
object is left, or half the wait budget is spent, it deletes what the operator left of *this deployment* itself
(its ``deployment`` tag, ``DeploymentTagKey``/``DeploymentTagValue``, or named by the status of this cluster's
objects: ``hyperpod_runtime.cleanup``); the operator's resources of other deployments or of unknown owner are
named in the log each poll and never deleted or waited for, and so is an endpoint whose name this cluster's
objects only declare (no tag or status ties it to this deployment): it never holds up the deletion of this
deployment's endpoint configs and models, and the Delete completes once only such resources are left. It fails
with one message naming the leftovers once the wait budget (``WaitSeconds``) is spent.

Start-up (DescribeCluster, a token) is retried like every other call: a throttle or a network blip at the
first poll is retried on the next one until the deadline, never a failed deletion at once.

Every AWS client retries throttling, transient errors and 5xx itself: botocore's standard retry mode
(:data:`BOTO_CONFIG`). A throttle that outlasts those retries is left for the next poll
(``hyperpod_runtime.cleanup.throttling_is_transient``).
"""

from __future__ import annotations

import base64
import logging
import os
import time
from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_runtime.cleanup import AwsUnavailable, Janitor, format_failure, throttling_is_transient
from hyperpod_runtime.eks.kube import HttpsTransport, KubeClient, KubeUnavailable
from hyperpod_runtime.eks.token import get_token
from hyperpod_runtime.stack_status import StackStatusDenied, StackStatusUnavailable, may_clean_up

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

#: Errors that may clear up by the next poll; anything else fails the deletion at once.
TRANSIENT_ERRORS = (KubeUnavailable, AwsUnavailable, StackStatusUnavailable)
#: What a Delete during an update leaves alone (logged).
SKIPPED = "every InferenceEndpointConfig and JumpStartModel of the cluster (and what the operator made for them)"
JanitorFactory = Callable[[dict[str, Any]], Janitor]

#: Every client's retries: botocore's standard mode retries throttling, transient errors and 5xx with exponential
#: backoff (a random wait up to 2 ** (attempt - 1) s, at most 20 s) up to ``total_max_attempts`` requests in all,
#: the first included (Boto3 guide, "Retries": "Standard retry mode"; botocore ``Config``). Standard, not adaptive:
#: adaptive adds a client-side rate limiter whose waits ``total_max_attempts`` does not bound, and the guide calls
#: it experimental. Eight attempts wait at most 1+2+4+8+16+20+20 = 71 s for one call, well inside the 5-minute
#: Lambda timeout (``endpoint_janitor.LAMBDA_TIMEOUT``).
BOTO_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 8}, connect_timeout=10, read_timeout=30)


def make_janitor(props: dict[str, Any]) -> Janitor:
    """Build a :class:`Janitor` with real clients from the custom resource's properties."""
    region = os.environ["AWS_REGION"]
    cluster_name = props["ClusterName"]
    session = boto3.session.Session(region_name=region)
    kube: KubeClient | None = None
    try:
        eks = session.client("eks", config=BOTO_CONFIG)
        with throttling_is_transient():
            cluster = eks.describe_cluster(name=cluster_name)["cluster"]
    except BotoCoreError as err:  # no connection, a timeout: worth the next poll
        raise AwsUnavailable(f"DescribeCluster {cluster_name}: {err}") from err
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
            raise
        LOG.info("EKS cluster %s no longer exists; nothing to delete in Kubernetes", cluster_name)
    else:
        ca_pem = base64.b64decode(cluster["certificateAuthority"]["data"]).decode("ascii")
        transport = HttpsTransport(
            cluster["endpoint"], ca_pem, lambda: get_token(cluster_name, region=region, session=session))
        kube = KubeClient(transport)
    return Janitor(
        cluster_name=cluster_name, cluster_arn=props.get("ClusterArn", ""), kube=kube,
        deployment_tag=deployment_tag(props),
        sagemaker=session.client("sagemaker", config=BOTO_CONFIG),
        elbv2=session.client("elbv2", config=BOTO_CONFIG),
        acm=session.client("acm", config=BOTO_CONFIG),
        ec2=session.client("ec2", config=BOTO_CONFIG))


def cloudformation_client() -> Any:
    """CloudFormation in the function's region: the stack holding the janitor is there."""
    return boto3.client("cloudformation", region_name=os.environ["AWS_REGION"], config=BOTO_CONFIG)


def deployment_tag(props: dict[str, Any]) -> tuple[str, str] | None:
    """``(key, value)`` of this deployment's tag from the properties; ``None`` for a janitor without one."""
    key, value = str(props.get("DeploymentTagKey", "")), str(props.get("DeploymentTagValue", ""))
    return (key, value) if key and value else None


def on_event(event: dict[str, Any], context: Any = None, *, factory: JanitorFactory = make_janitor,
             clock: Callable[[], float] = time.time, cloudformation: Any = None) -> dict[str, Any]:
    """``cloudformation``: the client that reads the stack's status. Default: :func:`cloudformation_client`."""
    props = event.get("ResourceProperties") or {}
    request = event["RequestType"]
    physical_id = event.get("PhysicalResourceId") or f"endpoint-janitor-{props['ClusterName']}"
    if request != "Delete":
        return {"PhysicalResourceId": physical_id}

    started = clock()
    endpoint_names: tuple[str, ...] = ()
    named: tuple[str, ...] = ()
    try:
        if not may_clean_up(cloudformation or cloudformation_client(), event, skipped=SKIPPED):
            return {"PhysicalResourceId": physical_id, "Data": _data(started, props, (), ())}
        janitor = factory(props)
        result = janitor.request_deletion()
        endpoint_names, named = result.endpoint_names, result.named
        LOG.info("deletion requested for %d object(s): %s", len(result.requested), list(result.requested))
    except (*TRANSIENT_ERRORS, StackStatusDenied) as err:  # denied: is_complete decides, by the half deadline
        LOG.warning("could not start the cleanup, is_complete retries it: %s", err)
    return {"PhysicalResourceId": physical_id, "Data": _data(started, props, endpoint_names, named)}


def _data(started: float, props: dict[str, Any], endpoint_names: tuple[str, ...],
          named: tuple[str, ...]) -> dict[str, str]:
    """What ``is_complete`` gets from ``on_event``: the start, the deadline and what the objects name."""
    return {
        "StartedAt": str(started),
        "Deadline": str(started + float(props.get("WaitSeconds", 1500))),
        # Capped, whole names only: the whole CloudFormation response must stay under 4 KiB (this Data
        # included). What does not fit is read again from the objects still listed on each poll, or
        # reported instead of deleted.
        "EndpointNames": _joined(endpoint_names, 800),
        "Named": _joined(named, 1600),
    }


def is_complete(event: dict[str, Any], context: Any = None, *, factory: JanitorFactory = make_janitor,
                clock: Callable[[], float] = time.time, cloudformation: Any = None) -> dict[str, Any]:
    """``cloudformation``: as :func:`on_event`'s."""
    if event["RequestType"] != "Delete":
        return {"IsComplete": True}
    props = event.get("ResourceProperties") or {}
    data = event.get("Data") or {}
    now = clock()
    started = float(data.get("StartedAt", now))
    deadline = float(data.get("Deadline", now + float(props.get("WaitSeconds", 1500))))
    known = {n for n in str(data.get("EndpointNames", "")).split(",") if n}
    named = {n for n in str(data.get("Named", "")).split(",") if n}
    # The operator gets the first half of the budget to clean up after its own objects.
    delete_after = started + (deadline - started) / 2
    where = {"stack": event.get("StackId", "<stack>"), "logical_id": event.get("LogicalResourceId", "<janitor>")}
    cluster_name = str(props.get("ClusterName", "?"))

    try:
        # Read again on every poll: the Delete on_event skipped (or could not decide) must not clean up here.
        if not may_clean_up(cloudformation or cloudformation_client(), event, skipped=SKIPPED):
            return {"IsComplete": True}
        janitor = factory(props)
        result = janitor.request_deletion()  # catches objects whose earlier delete was throttled
        objects = janitor.kubernetes_leftovers()
        survey = janitor.survey(known | set(result.endpoint_names), named | set(result.named))
        aws = survey.ours
        for other in survey.others:
            LOG.info("left alone (not this deployment's): %s", other.report())
        errors: list[str] = []
        if aws and now < deadline and (not objects or now >= delete_after):
            LOG.info("deleting %d AWS resource(s) the operator left", sum(x.deletable for x in aws))
            _, errors = janitor.delete(aws)
    except StackStatusDenied as err:
        if now < delete_after:  # perhaps a policy not visible yet; past half the budget it counts as lasting
            LOG.warning("DescribeStacks denied, retrying on the next poll until half the deadline: %s", err)
            return {"IsComplete": False}
        raise
    except TRANSIENT_ERRORS as err:
        if now < deadline:
            LOG.warning("check failed, retrying on the next poll: %s", err)
            return {"IsComplete": False}
        raise RuntimeError(format_failure([], cluster_name=cluster_name, waited_seconds=now - started,
                                          last_error=str(err), **where)) from err
    leftovers = objects + aws
    if not leftovers:
        LOG.info("nothing left for cluster %s", cluster_name)
        return {"IsComplete": True}
    LOG.info("waiting for %d leftover(s): %s", len(leftovers), [x.describe() for x in leftovers])
    if now >= deadline:
        raise RuntimeError(format_failure(leftovers, cluster_name=cluster_name, waited_seconds=now - started,
                                          last_error="; ".join(errors)[:500], left_alone=len(survey.others),
                                          **where))
    return {"IsComplete": False}


def _joined(items: tuple[str, ...], limit: int) -> str:
    """``items`` joined by commas, as many whole items as fit in ``limit`` characters (a cut name could
    match another resource)."""
    kept: list[str] = []
    for item in items:
        if len(",".join([*kept, item])) > limit:
            break
        kept.append(item)
    return ",".join(kept)
