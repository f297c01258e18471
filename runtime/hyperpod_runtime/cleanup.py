"""Delete the operator's objects, then report what the operator has not yet removed from AWS.

Several deployments (``name``s) can share one account and region, and the operator tags everything it creates
``CreatedBy=HyperPodInference`` whichever cluster it runs in. So that tag only makes a resource a *candidate*;
what ties a candidate to this deployment (:meth:`Janitor.owner`, first match wins):

1. a ``deployment`` tag (``hyperpod_core.names.DEPLOYMENT_TAG``, from the InferenceEndpointConfig's
   ``spec.tags``): ours when it carries this deployment's name; another deployment's when it carries another;
2. a name this cluster's own objects give it: the ARNs in the ``status`` of every ``InferenceEndpointConfig``
   and ``JumpStartModel`` (``endpoints.sagemaker.{endpointArn,configArn,modelArn}``, ``tlsCertificate.
   {certificateARN,importedCertificates}``) and ``SageMakerEndpointRegistration`` (``endpoint.{arn,configArn,
   modelArn}``; CRDs in ``shared/crds``); for a certificate also being in use (ACM ``InUseBy``) by a load
   balancer of this cluster;
3. a tag whose key contains ``cluster`` (``eks-cluster-arn`` among them): ours when its value is this EKS
   cluster's name or ARN, another cluster's otherwise;
4. nothing else: the owner is unknown.

An endpoint whose name this cluster's objects only *declare* (``spec.endpointName``, a JumpStartModel's
``sageMakerEndpoint.name``) and that nothing else ties to this deployment is reported, never deleted and never
waited for: another deployment, or a person, may hold that name (and this deployment's operator then failed to
create its own). The objects that declare it are waited for (their finalizers are the operator's cleanup); once
they are gone nobody will delete that endpoint, so waiting for it would only fail the destroy at its deadline.

Only ours is deleted (or waited for); every other candidate is *reported* with the reason, never deleted. A
tag value starting ``UNRESOLVED-`` (a manifest synthesized before the deploy, ``hyperpod_core.inputs``) names
nothing. The other kinds are unambiguous: load balancers, target groups and the controller's security groups
carry ``elbv2.k8s.aws/cluster=<EKS cluster name>`` (EKS cluster names are unique in a region), set by the AWS
Load Balancer Controller the operator runs.

The operator's finalizers remove these first; the janitor waits for them. What the operator leaves (it is
gone, or its finalizer finished without removing everything) the janitor deletes itself once no operator
object is left, or once half of its wait budget is spent, in dependency order: SageMaker endpoints, then (once
no endpoint of ours is left: a reported endpoint never holds them up) endpoint configs and models; load
balancers, target groups, certificates; security groups. Its IAM policy allows these deletes only on resources
carrying the operator's (or the controller's) tag and no other deployment's tag. Resources still in use (a
certificate on a listener, a group on an ENI) are retried on the next poll; what is left at the deadline is named
in one failure message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from hyperpod_runtime.eks.kube import KINDS, KubeAccessDenied, KubeClient

LOG = logging.getLogger(__name__)

OPERATOR_TAG = ("CreatedBy", "HyperPodInference")
ALB_CLUSTER_TAG = "elbv2.k8s.aws/cluster"
#: The operator's record of each SageMaker endpoint it registered (read only: its status names the endpoint,
#: endpoint config and model; ``shared/crds/sagemakerendpointregistrations.yaml``).
REGISTRATIONS = ("SageMakerEndpointRegistration", "sagemakerendpointregistrations")
#: A tag value that was still a placeholder at synth (``hyperpod_core.inputs.PLACEHOLDER_PREFIX``): names nothing.
PLACEHOLDER_PREFIX = "UNRESOLVED-"
#: ``DeleteEndpoint`` etc. answered with these: the resource is still in use or busy; retry on the next poll.
BUSY_CODES = frozenset({"ResourceInUse", "ResourceInUseException", "DependencyViolation", "InvalidState"})
#: Throttling answers; botocore's retry modes retry each of them (``ThrottledRetryableChecker`` in botocore
#: ``retries/standard.py``) before the error reaches us (tests/cleanup/test_janitor_handler.py checks it).
THROTTLING_CODES = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottled",
    "RequestThrottledException", "TooManyRequestsException", "RequestLimitExceeded", "SlowDown",
})
NOT_FOUND_CODES = frozenset({
    "ResourceNotFoundException", "ResourceNotFound", "LoadBalancerNotFound", "TargetGroupNotFound",
    "ValidationException",  # SageMaker ListTags on an endpoint deleted between list and lookup
})
_MAX_LISTED = 15  # leftovers named in the failure message; CloudFormation truncates long reasons


@dataclass(frozen=True)
class SageMakerKind:
    """One kind of SageMaker resource the operator creates: how to list, name and delete it."""

    kind: str
    arn_type: str
    """The resource type in its ARN (``endpoint`` in ``arn:aws:sagemaker:...:endpoint/<name>``)."""
    list_method: str
    list_key: str
    name_key: str
    arn_key: str
    delete_method: str
    delete_key: str


#: In deletion order: an endpoint config is not deleted while an endpoint uses it ("You must not delete an
#: EndpointConfig in use by an endpoint that is live", SageMaker API reference, DeleteEndpointConfig).
SAGEMAKER_KINDS = (
    SageMakerKind("SageMaker endpoint", "endpoint", "list_endpoints", "Endpoints", "EndpointName", "EndpointArn",
                  "delete_endpoint", "EndpointName"),
    SageMakerKind("SageMaker endpoint config", "endpoint-config", "list_endpoint_configs", "EndpointConfigs",
                  "EndpointConfigName", "EndpointConfigArn", "delete_endpoint_config", "EndpointConfigName"),
    SageMakerKind("SageMaker model", "model", "list_models", "Models", "ModelName", "ModelArn", "delete_model",
                  "ModelName"),
)
_SAGEMAKER = {k.kind: k for k in SAGEMAKER_KINDS}


class AwsUnavailable(Exception):
    """An AWS API kept throttling after botocore's retries (the clients' retry configuration); worth trying again on
    the next poll."""


@dataclass(frozen=True)
class Leftover:
    """One resource the operator (or the load balancer controller) created that still exists."""

    kind: str
    name: str
    arn: str = ""
    detail: str = ""
    deletable: bool = False
    """Ours and carrying the tag that lets the janitor delete it itself (operator tag, or the controller's
    cluster tag). Everything :meth:`Janitor.survey` counts as ours is; the resources it reports are not."""
    why: str = ""
    """What ties it to this deployment, or (in :attr:`Survey.others`) why it is not this deployment's."""

    def describe(self) -> str:
        extra = ", ".join(x for x in (self.arn, self.detail) if x)
        return f"{self.kind} {self.name}" + (f" ({extra})" if extra else "")

    def report(self) -> str:
        """One line for a resource left alone: what it is and why it is not ours."""
        return f"{self.describe()}: {self.why}"


@dataclass(frozen=True)
class Ownership:
    """Whether a resource carrying the operator's tag is this deployment's, and why (:meth:`Janitor.owner`)."""

    ours: bool
    why: str
    other_owner: bool = False
    """A tag names another deployment or another cluster (rather than nothing tying it to anyone)."""


@dataclass(frozen=True)
class Survey:
    """The AWS resources found: ours in deletion order, and the operator's that are not ours."""

    ours: list[Leftover]
    others: list[Leftover]
    """Not this deployment's, or not provably so: carrying the operator's tag but another deployment's, another
    cluster's or of unknown owner, and endpoints whose name this cluster's objects only declare. Reported,
    never deleted or waited for."""


@dataclass(frozen=True)
class DeletionResult:
    requested: tuple[str, ...]
    """``Kind namespace/name`` of every object a deletion was requested for in this call."""
    endpoint_names: tuple[str, ...]
    """SageMaker endpoint names the listed objects declared (they are ours even without tags)."""
    named: tuple[str, ...] = ()
    """Resource ids (``endpoint/<name>``, ``endpoint-config/<name>``, ``model/<name>``, ``certificate/<id>``,
    lower case: SageMaker ARNs carry names in lower case) of the ARNs in the status of the listed objects and
    of the operator's SageMakerEndpointRegistrations."""


@contextmanager
def throttling_is_transient() -> Iterator[None]:
    """Turns a throttling error into :class:`AwsUnavailable`. The clients retry throttling themselves (botocore's
    retry modes, configured where they are built: ``Config(retries=...)``); one that still fails after those
    retries is left for the next poll."""
    try:
        yield
    except ClientError as err:
        if _code(err) not in THROTTLING_CODES:
            raise
        attempts = int(err.response.get("ResponseMetadata", {}).get("RetryAttempts", 0)) + 1
        raise AwsUnavailable(f"{err.operation_name} still throttled after {attempts} attempts") from err


class Janitor:
    """Deletes the operator's objects and lists what is left, in Kubernetes and in AWS.

    ``deployment_tag``: ``(key, value)`` of the tag naming this deployment (module docstring, rule 1).
    Default ``None``: only the names this cluster's objects give and the cluster tags tie resources to it.
    """

    def __init__(self, *, cluster_name: str, cluster_arn: str = "", kube: KubeClient | None,
                 sagemaker: Any, elbv2: Any, acm: Any, ec2: Any = None,
                 deployment_tag: tuple[str, str] | None = None) -> None:
        self.cluster_name = cluster_name
        self._cluster_ids = {cluster_name, cluster_arn} - {""}
        self._kube = kube  # None: the EKS cluster is already gone (or not ours to read), so are its objects
        self._sagemaker = sagemaker
        self._elbv2 = elbv2
        self._acm = acm
        self._ec2 = ec2  # None: security groups are not checked (older custom resource properties)
        self._deployment_tag = deployment_tag

    # -- Kubernetes -------------------------------------------------------------------------------

    def request_deletion(self) -> DeletionResult:
        """Delete every operator object not already being deleted. Idempotent; 404 counts as done. Also
        collects what the objects (and the operator's SageMakerEndpointRegistrations) name."""
        requested: list[str] = []
        endpoint_names: list[str] = []
        named: set[str] = set()
        if self._kube is None:
            return DeletionResult((), ())
        for kind, plural in KINDS:
            for obj in self._kube.list(plural):
                meta = obj.get("metadata") or {}
                declared = _declared_endpoint_names(obj)
                endpoint_names.extend(declared)
                named |= _status_ids(obj)
                if meta.get("deletionTimestamp"):
                    continue  # already deleting; the finalizer is the operator's job now
                namespace, name = meta.get("namespace", "default"), meta.get("name", "")
                if self._kube.delete(plural, namespace, name):
                    requested.append(f"{kind} {namespace}/{name}")
                    LOG.info("requested deletion of %s %s/%s", kind, namespace, name)
        try:
            for registration in self._kube.list(REGISTRATIONS[1]):
                named |= _status_ids(registration)
        except KubeAccessDenied as err:  # an RBAC binding from before registrations were read: names only
            LOG.warning("cannot read %ss (%s); their names are not used", REGISTRATIONS[0], err)
        return DeletionResult(tuple(requested), tuple(sorted(set(endpoint_names))), tuple(sorted(named)))

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

    # -- ownership --------------------------------------------------------------------------------

    def owner(self, tags: list[dict[str, str]], named: str | Callable[[], str] = "") -> Ownership:
        """Whose a resource carrying the operator's tag is (module docstring, rules 1-4). ``named``: how this
        cluster's objects name it, or ``""``; a callable is only called when the deployment tag does not
        decide (it may cost an API call)."""
        values = {t["Key"]: t.get("Value", "") for t in tags
                  if t.get("Value") and not t.get("Value", "").startswith(PLACEHOLDER_PREFIX)}
        if self._deployment_tag is not None:
            key, ours = self._deployment_tag
            if key in values:
                if values[key] == ours:
                    return Ownership(True, f"tag {key}={ours}")
                return Ownership(False, f"tag {key}={values[key]}: another deployment's", other_owner=True)
        tie = named() if callable(named) else named
        if tie:
            return Ownership(True, tie)
        clusters = {k: v for k, v in values.items() if "cluster" in k.lower()}
        for key, value in sorted(clusters.items()):
            if value in self._cluster_ids:
                return Ownership(True, f"tag {key}={value}")
        if clusters:
            key, value = sorted(clusters.items())[0]
            return Ownership(False, f"tag {key}={value}: another cluster's", other_owner=True)
        return Ownership(False, "owner unknown: it carries only the operator's tag CreatedBy=HyperPodInference, "
                                "no tag naming a deployment or cluster, and no object of this cluster names it")

    # -- AWS --------------------------------------------------------------------------------------

    def sagemaker_survey(self, known_endpoint_names: Iterable[str] = (), named: Iterable[str] = ()) -> Survey:
        """Endpoints, endpoint configs and models: ours (deletion order) and the operator's that are not.

        ``named``: resource ids the status of this cluster's objects names (:attr:`DeletionResult.named`): ours.
        ``known_endpoint_names``: endpoint names our objects' ``spec`` declares. A declared name alone is weaker
        (another deployment, or a person, may hold that name, and the operator's create then failed): such an
        endpoint is reported (in ``others``), neither deleted nor waited for, unless a tag or a status ties it to
        us as well."""
        ids = {n.lower() for n in named}
        declared = set(known_endpoint_names)
        ours: list[Leftover] = []
        others: list[Leftover] = []
        for k in SAGEMAKER_KINDS:
            for entry in self._pages(self._sagemaker, k.list_method, k.list_key, MaxResults=100):
                name, arn = entry[k.name_key], entry[k.arn_key]
                tags = self._tags_or_none(self._sagemaker, "list_tags", "Tags", ResourceArn=arn)
                if tags is None:
                    continue  # deleted since the listing
                in_status = f"{k.arn_type}/{name}".lower() in ids
                is_declared = k is SAGEMAKER_KINDS[0] and name in declared
                detail = f"status {entry['EndpointStatus']}" if "EndpointStatus" in entry else ""
                o = (self.owner(tags, "named by this cluster's objects" if in_status else "")
                     if _has_operator_tag(tags) else None)
                if o is not None and o.ours:
                    ours.append(Leftover(k.kind, name, arn, detail, deletable=True, why=o.why))
                elif is_declared and not (o is not None and o.other_owner):
                    # No tag or status of ours allows deleting it, and once the objects declaring it are gone
                    # (they are waited for) nobody will: reported, so it never holds up the destroy.
                    others.append(Leftover(
                        k.kind, name, arn, detail,
                        why="its name is declared by this cluster's objects, but no tag or status ties it to this "
                            "deployment (another deployment or a person may hold the name): not deleted"))
                elif o is not None:
                    others.append(Leftover(k.kind, name, arn, detail, why=o.why))
        return Survey(ours, others)

    def sagemaker_leftovers(self, known_endpoint_names: Iterable[str] = (), named: Iterable[str] = ()
                            ) -> list[Leftover]:
        return self.sagemaker_survey(known_endpoint_names, named).ours

    def load_balancer_leftovers(self) -> list[Leftover]:
        lbs = {lb["LoadBalancerArn"]: lb for lb in
               self._pages(self._elbv2, "describe_load_balancers", "LoadBalancers")}
        tgs = {tg["TargetGroupArn"]: tg for tg in
               self._pages(self._elbv2, "describe_target_groups", "TargetGroups")}
        ours = self._elb_arns_tagged(list(lbs) + list(tgs))
        why = f"tag {ALB_CLUSTER_TAG}={self.cluster_name}"
        leftovers = [Leftover("Load balancer", lbs[a]["LoadBalancerName"], a, deletable=True, why=why)
                     for a in lbs if a in ours]
        leftovers += [Leftover("Target group", tgs[a]["TargetGroupName"], a, deletable=True, why=why)
                      for a in tgs if a in ours]
        return leftovers

    def certificate_survey(self, named: Iterable[str] = (), our_load_balancers: Iterable[str] = ()) -> Survey:
        """Certificates carrying the operator's tag: ours, and the others. ``our_load_balancers``: ARNs of this
        cluster's load balancers; a certificate in use by one of them (ACM ``InUseBy``) is ours."""
        ids = {n.lower() for n in named}
        lb_arns = set(our_load_balancers)
        ours: list[Leftover] = []
        others: list[Leftover] = []
        # Without Includes, ListCertificates returns RSA_2048 certificates only.
        includes = {"keyTypes": ["RSA_1024", "RSA_2048", "RSA_3072", "RSA_4096", "EC_prime256v1",
                                 "EC_secp384r1", "EC_secp521r1"]}
        for cert in self._pages(self._acm, "list_certificates", "CertificateSummaryList", Includes=includes):
            arn = cert["CertificateArn"]
            tags = self._tags_or_none(self._acm, "list_tags_for_certificate", "Tags", CertificateArn=arn)
            if tags is None or not _has_operator_tag(tags):
                continue

            def tie(arn: str = arn) -> str:
                if f"certificate/{arn.rsplit('/', 1)[-1]}".lower() in ids:
                    return "named by this cluster's objects"
                users = set(self._in_use_by(arn)) & lb_arns if lb_arns else set()
                return f"in use by load balancer {sorted(users)[0]} of this cluster" if users else ""

            o = self.owner(tags, tie)
            (ours if o.ours else others).append(
                Leftover("ACM certificate", cert.get("DomainName", ""), arn, deletable=o.ours, why=o.why))
        return Survey(ours, others)

    def certificate_leftovers(self) -> list[Leftover]:
        return self.certificate_survey().ours

    def security_group_leftovers(self) -> list[Leftover]:
        """Groups the load balancer controller made for this cluster (backend and ALB frontend groups)."""
        if self._ec2 is None:
            return []
        groups = self._pages(self._ec2, "describe_security_groups", "SecurityGroups",
                             Filters=[{"Name": f"tag:{ALB_CLUSTER_TAG}", "Values": [self.cluster_name]}])
        return [Leftover("Security group", g.get("GroupName", ""), g["GroupId"], f"vpc {g.get('VpcId', '?')}",
                         deletable=True, why=f"tag {ALB_CLUSTER_TAG}={self.cluster_name}") for g in groups]

    def survey(self, known_endpoint_names: Iterable[str] = (), named: Iterable[str] = ()) -> Survey:
        """Every AWS resource: ours in the order they can be deleted (users before what they use), and the
        operator's that are not ours. ``known_endpoint_names``/``named``: what this cluster's objects declare
        and what their status names (:class:`DeletionResult`)."""
        named = tuple(named)
        sagemaker = self.sagemaker_survey(known_endpoint_names, named)
        load_balancers = self.load_balancer_leftovers()
        certificates = self.certificate_survey(
            named, [x.arn for x in load_balancers if x.kind == "Load balancer"])
        return Survey(sagemaker.ours + load_balancers + certificates.ours + self.security_group_leftovers(),
                      sagemaker.others + certificates.others)

    def aws_leftovers(self, known_endpoint_names: Iterable[str] = (), named: Iterable[str] = ()) -> list[Leftover]:
        """Our AWS resources still present, in the order they can be deleted (:meth:`survey`)."""
        return self.survey(known_endpoint_names, named).ours

    def leftovers(self, known_endpoint_names: Iterable[str] = (), named: Iterable[str] = ()) -> list[Leftover]:
        """Everything of ours still present, Kubernetes objects first (their finalizers remove the rest)."""
        return self.kubernetes_leftovers() + self.aws_leftovers(known_endpoint_names, named)

    def delete(self, leftovers: Iterable[Leftover]) -> tuple[list[Leftover], list[str]]:
        """Delete every deletable leftover, in the given order. Endpoint configs and models wait for the next
        poll while a deletable endpoint was listed (one being deleted now); an endpoint the janitor may not
        delete never holds them up. Returns ``(deleted, errors)``; a resource still in use (or already going) is
        not an error, it is tried again on the next poll."""
        deleted: list[Leftover] = []
        errors: list[str] = []
        leftovers = list(leftovers)
        endpoints_left = any(x.kind == SAGEMAKER_KINDS[0].kind and x.deletable for x in leftovers)
        for leftover in leftovers:
            if not leftover.deletable:
                continue
            if endpoints_left and leftover.kind in _SAGEMAKER and leftover.kind != SAGEMAKER_KINDS[0].kind:
                LOG.info("not deleted yet: %s (an endpoint is still deleting)", leftover.describe())
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
        if leftover.kind in _SAGEMAKER:
            k = _SAGEMAKER[leftover.kind]
            self._call(getattr(self._sagemaker, k.delete_method), **{k.delete_key: leftover.name})
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
        referencing = self._pages(self._ec2, "describe_security_groups", "SecurityGroups",
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

    def _in_use_by(self, certificate_arn: str) -> list[str]:
        try:
            found = self._call(self._acm.describe_certificate, CertificateArn=certificate_arn)
        except ClientError as err:
            if _code(err) in NOT_FOUND_CODES:
                return []
            raise
        return list((found.get("Certificate") or {}).get("InUseBy") or [])

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
                    found = self._tags_or_none(self._elbv2, "describe_tags", "TagDescriptions", ResourceArns=[arn])
                    descriptions.extend(found or [])
            for description in descriptions:
                tags = {t["Key"]: t.get("Value", "") for t in description.get("Tags", [])}
                if tags.get(ALB_CLUSTER_TAG) == self.cluster_name:
                    ours.add(description["ResourceArn"])
        return ours

    def _tags_or_none(self, client: Any, operation: str, key: str, **kwargs: Any) -> list[Any] | None:
        """The tags (every page where the operation pages them: SageMaker ``ListTags`` does, ACM and ELBv2 answer
        in one), or ``None`` when the resource disappeared between listing and lookup."""
        try:
            if client.can_paginate(operation):
                return list(self._pages(client, operation, key, **kwargs))
            return list(self._call(getattr(client, operation), **kwargs).get(key, []))
        except ClientError as err:
            if _code(err) in NOT_FOUND_CODES:
                return None
            raise

    @staticmethod
    def _call(method: Callable[..., dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        with throttling_is_transient():
            return method(**kwargs)

    @staticmethod
    def _pages(client: Any, operation: str, key: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
        """The ``key`` items of every page of ``operation`` (boto3's paginator)."""
        with throttling_is_transient():
            for page in client.get_paginator(operation).paginate(**kwargs):
                yield from page.get(key, [])


def _has_operator_tag(tags: list[dict[str, str]]) -> bool:
    return any(t.get("Key") == OPERATOR_TAG[0] and t.get("Value") == OPERATOR_TAG[1] for t in tags)


def _declared_endpoint_names(obj: dict[str, Any]) -> list[str]:
    spec = obj.get("spec") or {}
    names = [spec.get("endpointName"), (spec.get("sageMakerEndpoint") or {}).get("name")]
    return [n for n in names if isinstance(n, str) and n]


def _status_ids(obj: dict[str, Any]) -> set[str]:
    """Resource ids (``<type>/<name>``, lower case) of the ARNs an operator object's status names: an
    InferenceEndpointConfig's or JumpStartModel's ``endpoints.sagemaker`` and ``tlsCertificate``, a
    SageMakerEndpointRegistration's ``endpoint`` (their CRDs)."""
    status = obj.get("status") or {}
    sagemaker = (status.get("endpoints") or {}).get("sagemaker") or {}
    registered = status.get("endpoint") or {}
    tls = status.get("tlsCertificate") or {}
    arns = [sagemaker.get("endpointArn"), sagemaker.get("configArn"), sagemaker.get("modelArn"),
            registered.get("arn"), registered.get("configArn"), registered.get("modelArn"),
            tls.get("certificateARN"), *(tls.get("importedCertificates") or [])]
    return {_resource_id(a) for a in arns if isinstance(a, str) and a.startswith("arn:") and _resource_id(a)}


def _resource_id(arn: str) -> str:
    """``arn:aws:sagemaker:r:a:endpoint/x`` -> ``endpoint/x``; ``""`` for anything not SageMaker or ACM."""
    parts = arn.split(":", 5)
    if len(parts) != 6 or parts[2] not in ("sagemaker", "acm") or "/" not in parts[5]:
        return ""
    return parts[5].lower()


def _code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def format_failure(leftovers: list[Leftover], *, cluster_name: str, waited_seconds: float,
                   last_error: str = "", stack: str = "<stack>", logical_id: str = "<janitor>",
                   left_alone: int = 0) -> str:
    """The one message CloudFormation shows when the wait times out: what is left and what helps.

    The Kubernetes objects listed are already being deleted (the janitor asked), so ``kubectl delete``
    changes nothing: only the operator's finalizer, or removing it by hand, lets them go. For the AWS
    resources the janitor could not delete, the way out is deleting them by hand, or finishing the destroy
    while keeping them (``--retain-resources`` on the stack in DELETE_FAILED). ``left_alone``: how many
    resources carrying the operator's tag are not this deployment's (named in the log, not deleted)."""
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
        lines.append("The janitor deletes the AWS resources above that are this deployment's by tag or by the "
                     "status of this cluster's objects; delete the others (or the ones it could not) by hand.")
    if left_alone:
        lines.append(f"Left alone: {left_alone} resource(s) with the operator's tag that are not this "
                     f"deployment's (another deployment's, or of unknown owner; named in the janitor's log).")
    lines.append(
        f"Then run cdk destroy again; or, to finish the destroy and keep what is left: aws cloudformation "
        f"delete-stack --stack-name {stack} --retain-resources {logical_id}")
    return "\n".join(lines)
