"""Delete the operator's objects, then report what the operator has not yet removed from AWS.

Ownership rules (what counts as "created for this cluster"):

* Kubernetes: every ``InferenceEndpointConfig`` / ``JumpStartModel`` in every namespace of the cluster.
* SageMaker endpoints: the names those objects declared, plus endpoints tagged
  ``CreatedBy=HyperPodInference`` unless a cluster-identifying tag (a key containing ``cluster``) names a
  different cluster. Without such a tag we cannot tell clusters apart and count the endpoint as ours.
* Load balancers and target groups: tag ``elbv2.k8s.aws/cluster=<EKS cluster name>`` (set by the AWS
  Load Balancer Controller the operator runs).
* ACM certificates: tag ``CreatedBy=HyperPodInference``, with the same cluster rule as endpoints.
* Security groups: tag ``elbv2.k8s.aws/cluster=<EKS cluster name>``: the AWS Load Balancer Controller's
  shared backend group (``elbv2.k8s.aws/resource=backend-sg``) and the frontend group of each ALB. Both
  outlive the ALBs when the controller is removed first, and a group left in the VPC blocks its deletion.

The operator's finalizers remove these first; the janitor waits for them. What the operator leaves (it is
gone, or its finalizer finished without removing everything) the janitor deletes itself once no operator
object is left, or once half of its wait budget is spent: SageMaker endpoints and certificates carrying the
operator's tag, load balancers, target groups and security groups carrying the controller's cluster tag
(the IAM policy allows exactly these, by tag). Resources still in use (a certificate on a listener, a group
on an ENI) are retried on the next poll; what is left at the deadline is named in one failure message.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from hyperpod_core.eks.kube import KINDS, KubeClient

LOG = logging.getLogger(__name__)

OPERATOR_TAG = ("CreatedBy", "HyperPodInference")
ALB_CLUSTER_TAG = "elbv2.k8s.aws/cluster"
#: ``DeleteEndpoint`` etc. answered with these: the resource is still in use or busy; retry on the next poll.
BUSY_CODES = frozenset({"ResourceInUse", "ResourceInUseException", "DependencyViolation", "InvalidState"})
THROTTLING_CODES = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottled",
    "RequestThrottledException", "TooManyRequestsException", "RequestLimitExceeded", "SlowDown",
})
NOT_FOUND_CODES = frozenset({
    "ResourceNotFoundException", "ResourceNotFound", "LoadBalancerNotFound", "TargetGroupNotFound",
    "ValidationException",  # SageMaker ListTags on an endpoint deleted between list and lookup
})
_MAX_LISTED = 15  # leftovers named in the failure message; CloudFormation truncates long reasons


class AwsUnavailable(Exception):
    """An AWS API kept throttling after every retry; worth trying again on the next poll."""


@dataclass(frozen=True)
class Leftover:
    """One resource the operator created that still exists."""

    kind: str
    name: str
    arn: str = ""
    detail: str = ""
    deletable: bool = False
    """Carries the tag that lets the janitor delete it itself (operator tag, or the controller's cluster
    tag); an endpoint counted as ours only by its declared name is left to the operator."""

    def describe(self) -> str:
        extra = ", ".join(x for x in (self.arn, self.detail) if x)
        return f"{self.kind} {self.name}" + (f" ({extra})" if extra else "")


@dataclass(frozen=True)
class DeletionResult:
    requested: tuple[str, ...]
    """``Kind namespace/name`` of every object a deletion was requested for in this call."""
    endpoint_names: tuple[str, ...]
    """SageMaker endpoint names the listed objects declared (they are ours even without tags)."""


class AwsCaller:
    """Calls a boto3 method, retrying throttling errors with bounded exponential backoff."""

    def __init__(self, *, sleep: Callable[[float], None] = time.sleep, max_attempts: int = 5,
                 base_delay_seconds: float = 1.0, max_delay_seconds: float = 20.0) -> None:
        self._sleep = sleep
        self._max_attempts = max_attempts
        self._base_delay = base_delay_seconds
        self._max_delay = max_delay_seconds

    def __call__(self, method: Callable[..., dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        for attempt in range(self._max_attempts):
            try:
                return method(**kwargs)
            except ClientError as err:
                if _code(err) not in THROTTLING_CODES:
                    raise
                if attempt + 1 == self._max_attempts:
                    raise AwsUnavailable(
                        f"{err.operation_name} still throttled after {self._max_attempts} attempts") from err
                self._sleep(min(self._base_delay * 2**attempt, self._max_delay))
        raise AssertionError("unreachable")  # pragma: no cover


class Janitor:
    """Deletes the operator's objects and lists what is left, in Kubernetes and in AWS."""

    def __init__(self, *, cluster_name: str, cluster_arn: str = "", kube: KubeClient | None,
                 sagemaker: Any, elbv2: Any, acm: Any, ec2: Any = None, call: AwsCaller | None = None) -> None:
        self.cluster_name = cluster_name
        self._cluster_ids = {cluster_name, cluster_arn} - {""}
        self._kube = kube  # None: the EKS cluster is already gone, so are its objects
        self._sagemaker = sagemaker
        self._elbv2 = elbv2
        self._acm = acm
        self._ec2 = ec2  # None: security groups are not checked (older custom resource properties)
        self._call = call or AwsCaller()

    # -- Kubernetes -------------------------------------------------------------------------------

    def request_deletion(self) -> DeletionResult:
        """Delete every operator object not already being deleted. Idempotent; 404 counts as done."""
        requested: list[str] = []
        endpoint_names: list[str] = []
        if self._kube is None:
            return DeletionResult((), ())
        for kind, plural in KINDS:
            for obj in self._kube.list(plural):
                meta = obj.get("metadata") or {}
                endpoint_names.extend(_declared_endpoint_names(obj))
                if meta.get("deletionTimestamp"):
                    continue  # already deleting; the finalizer is the operator's job now
                namespace, name = meta.get("namespace", "default"), meta.get("name", "")
                if self._kube.delete(plural, namespace, name):
                    requested.append(f"{kind} {namespace}/{name}")
                    LOG.info("requested deletion of %s %s/%s", kind, namespace, name)
        return DeletionResult(tuple(requested), tuple(sorted(set(endpoint_names))))

    def kubernetes_leftovers(self) -> list[Leftover]:
        if self._kube is None:
            return []
        leftovers = []
        for kind, plural in KINDS:
            for obj in self._kube.list(plural):
                meta = obj.get("metadata") or {}
                state = (obj.get("status") or {}).get("state", "")
                finalizers = meta.get("finalizers") or []
                detail = "; ".join(x for x in (
                    f"state {state}" if state else "",
                    f"finalizers {','.join(finalizers)}" if finalizers else "",
                ) if x)
                leftovers.append(Leftover(kind, f"{meta.get('namespace', 'default')}/{meta.get('name', '')}",
                                          detail=detail))
        return leftovers

    # -- AWS --------------------------------------------------------------------------------------

    def sagemaker_leftovers(self, known_endpoint_names: Iterable[str] = ()) -> list[Leftover]:
        known = set(known_endpoint_names)
        leftovers = []
        for endpoint in self._pages(self._sagemaker.list_endpoints, "Endpoints", "NextToken", MaxResults=100):
            name, arn = endpoint["EndpointName"], endpoint["EndpointArn"]
            tags = self._tags_or_none(self._sagemaker.list_tags, "Tags", ResourceArn=arn)
            tagged = tags is not None and self._operator_owned(tags)
            if name not in known and not tagged:
                continue
            leftovers.append(Leftover("SageMaker endpoint", name, arn,
                                      f"status {endpoint.get('EndpointStatus', 'unknown')}", deletable=tagged))
        return leftovers

    def load_balancer_leftovers(self) -> list[Leftover]:
        lbs = {lb["LoadBalancerArn"]: lb for lb in
               self._pages(self._elbv2.describe_load_balancers, "LoadBalancers", "NextMarker", "Marker")}
        tgs = {tg["TargetGroupArn"]: tg for tg in
               self._pages(self._elbv2.describe_target_groups, "TargetGroups", "NextMarker", "Marker")}
        ours = self._elb_arns_tagged(list(lbs) + list(tgs))
        leftovers = [Leftover("Load balancer", lbs[a]["LoadBalancerName"], a, deletable=True)
                     for a in lbs if a in ours]
        leftovers += [Leftover("Target group", tgs[a]["TargetGroupName"], a, deletable=True)
                      for a in tgs if a in ours]
        return leftovers

    def certificate_leftovers(self) -> list[Leftover]:
        leftovers = []
        # Without Includes, ListCertificates returns RSA_2048 certificates only.
        includes = {"keyTypes": ["RSA_1024", "RSA_2048", "RSA_3072", "RSA_4096", "EC_prime256v1",
                                 "EC_secp384r1", "EC_secp521r1"]}
        for cert in self._pages(self._acm.list_certificates, "CertificateSummaryList", "NextToken",
                                Includes=includes):
            arn = cert["CertificateArn"]
            tags = self._tags_or_none(self._acm.list_tags_for_certificate, "Tags", CertificateArn=arn)
            if tags is not None and self._operator_owned(tags):
                leftovers.append(Leftover("ACM certificate", cert.get("DomainName", ""), arn, deletable=True))
        return leftovers

    def security_group_leftovers(self) -> list[Leftover]:
        """Groups the load balancer controller made for this cluster (backend and ALB frontend groups)."""
        if self._ec2 is None:
            return []
        groups = self._pages(self._ec2.describe_security_groups, "SecurityGroups", "NextToken",
                             Filters=[{"Name": f"tag:{ALB_CLUSTER_TAG}", "Values": [self.cluster_name]}])
        return [Leftover("Security group", g.get("GroupName", ""), g["GroupId"],
                         f"vpc {g.get('VpcId', '?')}", deletable=True) for g in groups]

    def aws_leftovers(self, known_endpoint_names: Iterable[str] = ()) -> list[Leftover]:
        """AWS resources still present, in the order they can be deleted (users before what they use)."""
        return (self.sagemaker_leftovers(known_endpoint_names) + self.load_balancer_leftovers()
                + self.certificate_leftovers() + self.security_group_leftovers())

    def leftovers(self, known_endpoint_names: Iterable[str] = ()) -> list[Leftover]:
        """Everything still present, Kubernetes objects first (their finalizers remove the rest)."""
        return self.kubernetes_leftovers() + self.aws_leftovers(known_endpoint_names)

    def delete(self, leftovers: Iterable[Leftover]) -> tuple[list[Leftover], list[str]]:
        """Delete every deletable leftover, in the given order. Returns ``(deleted, errors)``; a resource
        still in use (or already going) is not an error, it is tried again on the next poll."""
        deleted: list[Leftover] = []
        errors: list[str] = []
        for leftover in leftovers:
            if not leftover.deletable:
                continue
            try:
                self._delete_one(leftover)
            except ClientError as err:
                if _code(err) in NOT_FOUND_CODES | {"InvalidGroup.NotFound"}:
                    deleted.append(leftover)
                    continue
                detail = err.response.get("Error", {}).get("Message", "")
                message = f"{leftover.kind} {leftover.name}: {_code(err)} {detail}"
                (LOG.info if _code(err) in BUSY_CODES else LOG.warning)("not deleted yet: %s", message)
                errors.append(message.strip())
                continue
            LOG.info("deleted %s", leftover.describe())
            deleted.append(leftover)
        return deleted, errors

    def _delete_one(self, leftover: Leftover) -> None:
        if leftover.kind == "SageMaker endpoint":
            self._call(self._sagemaker.delete_endpoint, EndpointName=leftover.name)
        elif leftover.kind == "Load balancer":
            self._call(self._elbv2.delete_load_balancer, LoadBalancerArn=leftover.arn)
        elif leftover.kind == "Target group":
            self._call(self._elbv2.delete_target_group, TargetGroupArn=leftover.arn)
        elif leftover.kind == "ACM certificate":
            self._call(self._acm.delete_certificate, CertificateArn=leftover.arn)
        elif leftover.kind == "Security group":
            self._revoke_references(leftover.arn)
            self._call(self._ec2.delete_security_group, GroupId=leftover.arn)
        else:  # pragma: no cover - every kind above is listed by this class
            raise ValueError(f"cannot delete {leftover.kind}")

    def _revoke_references(self, group_id: str) -> None:
        """Remove the rules other groups (the nodes' groups) hold that name ``group_id`` as their source:
        the controller adds them for its target groups, and EC2 refuses to delete a referenced group."""
        referencing = self._pages(self._ec2.describe_security_groups, "SecurityGroups", "NextToken",
                                  Filters=[{"Name": "ip-permission.group-id", "Values": [group_id]}])
        for group in referencing:
            if group["GroupId"] == group_id:
                continue
            permissions = []
            for permission in group.get("IpPermissions", []):
                pairs = [p for p in permission.get("UserIdGroupPairs", []) if p.get("GroupId") == group_id]
                if pairs:
                    rule = {k: permission[k] for k in ("IpProtocol", "FromPort", "ToPort") if k in permission}
                    permissions.append({**rule, "UserIdGroupPairs": [{"GroupId": group_id}]})
            if permissions:
                self._call(self._ec2.revoke_security_group_ingress, GroupId=group["GroupId"],
                           IpPermissions=permissions)
                LOG.info("revoked %d rule(s) of %s that referenced %s", len(permissions), group["GroupId"],
                         group_id)

    # -- helpers ----------------------------------------------------------------------------------

    def _operator_owned(self, tags: list[dict[str, str]]) -> bool:
        values = {t["Key"]: t.get("Value", "") for t in tags}
        if values.get(OPERATOR_TAG[0]) != OPERATOR_TAG[1]:
            return False
        cluster_values = [v for k, v in values.items() if "cluster" in k.lower()]
        if not cluster_values:
            return True  # no way to tell clusters apart: err on the side of not orphaning it
        return any(v in self._cluster_ids or v.endswith(f"/{self.cluster_name}") for v in cluster_values)

    def _elb_arns_tagged(self, arns: list[str]) -> set[str]:
        ours: set[str] = set()
        for i in range(0, len(arns), 20):  # DescribeTags takes at most 20 ARNs
            batch = arns[i:i + 20]
            try:
                descriptions = self._call(self._elbv2.describe_tags, ResourceArns=batch)["TagDescriptions"]
            except ClientError as err:
                if _code(err) not in NOT_FOUND_CODES:
                    raise
                # One ARN vanished since the listing: look the others up one by one.
                descriptions = []
                for arn in batch:
                    found = self._tags_or_none(
                        self._elbv2.describe_tags, "TagDescriptions", ResourceArns=[arn])
                    descriptions.extend(found or [])
            for description in descriptions:
                tags = {t["Key"]: t.get("Value", "") for t in description.get("Tags", [])}
                if tags.get(ALB_CLUSTER_TAG) == self.cluster_name:
                    ours.add(description["ResourceArn"])
        return ours

    def _tags_or_none(self, method: Callable[..., dict[str, Any]], key: str,
                      **kwargs: Any) -> list[Any] | None:
        """The tags, or ``None`` when the resource disappeared between listing and lookup."""
        try:
            return list(self._call(method, **kwargs).get(key, []))
        except ClientError as err:
            if _code(err) in NOT_FOUND_CODES:
                return None
            raise

    def _pages(self, method: Callable[..., dict[str, Any]], key: str, next_key: str,
               request_key: str | None = None, **kwargs: Any) -> Iterator[dict[str, Any]]:
        token = None
        while True:
            args = dict(kwargs)
            if token:
                args[request_key or next_key] = token
            page = self._call(method, **args)
            yield from page.get(key, [])
            token = page.get(next_key)
            if not token:
                return


def _declared_endpoint_names(obj: dict[str, Any]) -> list[str]:
    spec = obj.get("spec") or {}
    names = [spec.get("endpointName"), (spec.get("sageMakerEndpoint") or {}).get("name")]
    return [n for n in names if isinstance(n, str) and n]


def _code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def format_failure(leftovers: list[Leftover], *, cluster_name: str, waited_seconds: float,
                   last_error: str = "", stack: str = "<stack>", logical_id: str = "<janitor>") -> str:
    """The one message CloudFormation shows when the wait times out: what is left and what helps.

    The Kubernetes objects listed are already being deleted (the janitor asked), so ``kubectl delete``
    changes nothing: only the operator's finalizer, or removing it by hand, lets them go. For the AWS
    resources the janitor could not delete, the way out is deleting them by hand, or finishing the destroy
    while keeping them (``--retain-resources`` on the stack in DELETE_FAILED)."""
    minutes = int(waited_seconds // 60)
    if leftovers:
        lines = [f"EndpointJanitor: after {minutes} min, {len(leftovers)} resource(s) created by the "
                 f"HyperPod inference operator for EKS cluster '{cluster_name}' still exist:"]
    else:
        lines = [f"EndpointJanitor: after {minutes} min, could not confirm that the resources the HyperPod "
                 f"inference operator created for EKS cluster '{cluster_name}' are gone."]
    lines += [f"- {x.describe()}" for x in leftovers[:_MAX_LISTED]]
    if len(leftovers) > _MAX_LISTED:
        lines.append(f"- ... and {len(leftovers) - _MAX_LISTED} more (see the janitor's log group)")
    if last_error:
        lines.append(f"Last error: {last_error}")
    lines.append("Stack deletion stopped here so that the operator and the network are not deleted under them.")
    kinds = {kind for kind, _ in KINDS}
    if any(x.kind in kinds for x in leftovers):
        lines.append(
            "The Kubernetes objects are already being deleted; the operator's finalizer holds them until it has "
            "cleaned up (kubectl -n hyperpod-inference-system logs deploy/hyperpod-inference-controller-manager). "
            "If the operator cannot finish, remove the finalizer: kubectl patch <kind> -n <ns> <name> "
            "--type=merge -p '{\"metadata\":{\"finalizers\":null}}' (its AWS resources then stay behind).")
    if any(x.kind not in kinds for x in leftovers):
        lines.append("The janitor deletes the AWS resources above that carry the operator's or the load balancer "
                     "controller's tag; delete the others (or the ones it could not) by hand.")
    lines.append(
        f"Then run cdk destroy again; or, to finish the destroy and keep what is left: aws cloudformation "
        f"delete-stack --stack-name {stack} --retain-resources {logical_id}")
    return "\n".join(lines)
