"""Delete the operator's objects, then report what the operator has not yet removed from AWS.

Ownership rules (what counts as "created for this cluster"):

* Kubernetes: every ``InferenceEndpointConfig`` / ``JumpStartModel`` in every namespace of the cluster.
* SageMaker endpoints: the names those objects declared, plus endpoints tagged
  ``CreatedBy=HyperPodInference`` unless a cluster-identifying tag (a key containing ``cluster``) names a
  different cluster. Without such a tag we cannot tell clusters apart and count the endpoint as ours.
* Load balancers and target groups: tag ``elbv2.k8s.aws/cluster=<EKS cluster name>`` (set by the AWS
  Load Balancer Controller the operator runs).
* ACM certificates: tag ``CreatedBy=HyperPodInference``, with the same cluster rule as endpoints.

The janitor never deletes AWS resources itself: the operator owns them and its finalizers remove them.
It only waits, so a stuck finalizer surfaces as one clear failure instead of orphaned, billed resources.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

try:  # package import (tests, tooling) or top-level module (the Lambda asset root)
    from .kube import KINDS, KubeClient
except ImportError:  # pragma: no cover - exercised only inside Lambda
    from kube import KINDS, KubeClient  # type: ignore[no-redef,import-not-found]

LOG = logging.getLogger(__name__)

OPERATOR_TAG = ("CreatedBy", "HyperPodInference")
ALB_CLUSTER_TAG = "elbv2.k8s.aws/cluster"
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
                 sagemaker: Any, elbv2: Any, acm: Any, call: AwsCaller | None = None) -> None:
        self.cluster_name = cluster_name
        self._cluster_ids = {cluster_name, cluster_arn} - {""}
        self._kube = kube  # None: the EKS cluster is already gone, so are its objects
        self._sagemaker = sagemaker
        self._elbv2 = elbv2
        self._acm = acm
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
            if name not in known:
                tags = self._tags_or_none(self._sagemaker.list_tags, "Tags", ResourceArn=arn)
                if tags is None or not self._operator_owned(tags):
                    continue
            leftovers.append(Leftover("SageMaker endpoint", name, arn,
                                      f"status {endpoint.get('EndpointStatus', 'unknown')}"))
        return leftovers

    def load_balancer_leftovers(self) -> list[Leftover]:
        lbs = {lb["LoadBalancerArn"]: lb for lb in
               self._pages(self._elbv2.describe_load_balancers, "LoadBalancers", "NextMarker", "Marker")}
        tgs = {tg["TargetGroupArn"]: tg for tg in
               self._pages(self._elbv2.describe_target_groups, "TargetGroups", "NextMarker", "Marker")}
        ours = self._elb_arns_tagged(list(lbs) + list(tgs))
        leftovers = [Leftover("Load balancer", lbs[a]["LoadBalancerName"], a) for a in lbs if a in ours]
        leftovers += [Leftover("Target group", tgs[a]["TargetGroupName"], a) for a in tgs if a in ours]
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
                leftovers.append(Leftover("ACM certificate", cert.get("DomainName", ""), arn))
        return leftovers

    def leftovers(self, known_endpoint_names: Iterable[str] = ()) -> list[Leftover]:
        """Everything still present, Kubernetes objects first (their finalizers remove the rest)."""
        return (self.kubernetes_leftovers() + self.sagemaker_leftovers(known_endpoint_names)
                + self.load_balancer_leftovers() + self.certificate_leftovers())

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
                   last_error: str = "") -> str:
    """The one message CloudFormation shows when the wait times out: what is left and what to do."""
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
        lines.append(f"Last check error: {last_error}")
    lines.append(
        "Stack deletion stopped here so that the operator and the network are not deleted under them. "
        "Fix: check the operator (kubectl -n hyperpod-inference-system logs "
        "deploy/hyperpod-inference-controller-manager), delete what is left (kubectl delete "
        "inferenceendpointconfig|jumpstartmodel -n <ns> <name>; aws sagemaker delete-endpoint; "
        "aws elbv2 delete-load-balancer / delete-target-group; aws acm delete-certificate), "
        "then run cdk destroy again.")
    return "\n".join(lines)
