"""Names of the Kubernetes objects the HyperPod Inference Operator creates for one endpoint.

Every name is derived from ``endpoint.name`` / ``endpoint.namespace`` of the config, as documented by AWS
(sources are the tags of ``shared/reference/operator.md``, section "(e) Pod labels, names, ports"):

* S2 (DPD guide), S13 (AWS ML blog): prefill/decode pods ``prefill-<iec>-XXXX`` / ``decode-<iec>-XXXX`` in the
  endpoint namespace, labelled ``inference.sagemaker.aws.amazon.com/dpd-role=prefill|decode``; the vLLM
  container of each is ``<role>-<iec>`` (S3, DPD troubleshooting: ``kubectl logs <pod> -c <prefill|decode>-
  <endpoint-name>``). ``pdSpec`` "creates separate prefill and decode Deployments" (S2). Their names,
  ``prefill-<iec>`` / ``decode-<iec>``, are [I]: the pod names without what Kubernetes appends (Kubernetes docs,
  "Deployments": a ReplicaSet is named ``[DEPLOYMENT-NAME]-[HASH]`` and its pods after it).
* S13/S2: the router runs in ``hyperpod-inference-system`` as pods ``<iec>-<ns>-router-XXXX`` with the container
  ``router-container``, behind the Service ``<iec>-<ns>-routing-service`` on port 443; its Deployment
  ``<iec>-<ns>-router`` is [I] in the same way.
* S1 (``config/manager/manager.yaml`` of the operator chart): the operator Deployment is
  ``<namePrefix>controller-manager`` in ``<namePrefix>system``, container ``manager``; the add-on installs it as
  ``hyperpod-inference-controller-manager`` (S4), Helm as ``hyperpod-inference-operator-controller-manager``.
* The load balancer: the operator's Ingress ``alb-<iec>-<ns>`` in ``hyperpod-inference-system`` (no AWS page
  names it; three public sources agree: aws/sagemaker-hyperpod-cli ``helm_chart/HyperPodHelmChart/charts/
  inference-operator/migration/helm_to_addon.sh`` finds "ingress resources created by inference models" by the
  ``alb-`` prefix; aws-samples/llm_model_hub ``backend/inference/hyperpod_inference.py`` reads
  ``alb-{resource_name}-{namespace}`` in ``hyperpod-inference-system``; and the ALB names of that sample's
  endpoints, ``k8s-hyperpod-albdemod-...``, follow the AWS Load Balancer Controller's ``k8s-<namespace[:8]>-
  <ingress[:8]>-<hash>`` rule only for that namespace and name).
* CRD (``shared/crds/v3.3/inferenceendpointconfigs.yaml``, operator v3.3): group
  ``inference.sagemaker.aws.amazon.com``, version ``v1``, plural ``inferenceendpointconfigs``.

Pods are read through their Deployment's own label selector, never by a name prefix: endpoint ``llama``'s prefix
``prefill-llama-`` also starts the pods of endpoint ``llama-3-3-70b``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal, Protocol

#: An IAM role or user ARN (IAM User Guide, "IAM identifiers": path and name of at most 512 characters of
#: ``[A-Za-z0-9+=,.@_/-]``), written so that CloudFormation's AllowedPattern (the cluster stack's
#: ``AdminPrincipalArn`` parameter) and Python read it alike.
IAM_PRINCIPAL_ARN_PATTERN: Final = r"^arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/[A-Za-z0-9+=,.@_/-]{1,512}$"
#: An IAM role ARN (the same rule, roles only).
IAM_ROLE_ARN_PATTERN: Final = IAM_PRINCIPAL_ARN_PATTERN.replace("(role|user)", "role")

GROUP: Final = "inference.sagemaker.aws.amazon.com"
VERSION: Final = "v1"
PLURAL: Final = "inferenceendpointconfigs"
ROLE_LABEL: Final = "inference.sagemaker.aws.amazon.com/dpd-role"
OPERATOR_NAMESPACE: Final = "hyperpod-inference-system"
#: Add-on name first (what this project installs), then the Helm chart's.
OPERATOR_DEPLOYMENTS: Final = ("hyperpod-inference-controller-manager",
                               "hyperpod-inference-operator-controller-manager")
OPERATOR_CONTAINER: Final = "manager"
ROUTER_CONTAINER: Final = "router-container"

#: Tags that tie a resource to one deployment. The CDK stacks tag everything ``deployment=<name>``; the
#: InferenceEndpointConfig's ``spec.tags`` carry both (CRD v3.3: "the tags to be added to the Sagemaker Endpoint"),
#: so that the endpoint janitor and ``hyperpod-dpd sweep`` delete what carries this deployment's tag and nothing
#: of another's. The janitor's first path is what the cluster's objects' status names; the tags are the second.
DEPLOYMENT_TAG: Final = "deployment"
EKS_CLUSTER_ARN_TAG: Final = "eks-cluster-arn"

Role = Literal["prefill", "decode"]
ROLES: Final[tuple[Role, ...]] = ("prefill", "decode")

#: Node label the HyperPod instance groups carry with their ``pool`` (``KubernetesConfig.Labels``; the cdk8s roles'
#: nodeSelector and the node wait select by it).
POOL_NODE_LABEL: Final = "hyperpod-dpd/pool"
#: Node label the platform stack puts on an instance group that an endpoint's role names (``instance_group``), with
#: the group's name, through the same ``KubernetesConfig.Labels`` (SageMaker HyperPod, "Custom Kubernetes labels and
#: taints": HyperPod applies them to every node of the group and keeps them through replacement and scaling); the
#: role's nodeSelector selects it.
INSTANCE_GROUP_NODE_LABEL: Final = "hyperpod-dpd/instance-group"
#: The well-known Kubernetes node label of the instance type (Kubernetes docs, "Well-Known Labels, Annotations and
#: Taints"); a HyperPod node carries its ``ml.`` type there (the HyperPod Helm chart's device plugins select nodes by
#: it: aws/sagemaker-hyperpod-cli ``helm_chart/HyperPodHelmChart/values.yaml``). The colocated baseline selects its
#: instance type by it in its ``nodeAffinity`` (which the CRD makes "mutually exclusive with instanceType and
#: instanceTypes"), and a role without a nodeSelector may land on any node of the endpoint's instance type.
INSTANCE_TYPE_NODE_LABEL: Final = "node.kubernetes.io/instance-type"
#: The taint HyperPod keeps on a node while its deep health checks run (HyperPod EKS prerequisites:
#: ``sagemaker.amazonaws.com/node-health-status=Unschedulable:NoSchedule``): the node may be Ready, yet nothing
#: without a toleration schedules on it.
NODE_HEALTH_TAINT_KEY: Final = "sagemaker.amazonaws.com/node-health-status"
NODE_HEALTH_UNSCHEDULABLE: Final = "Unschedulable"

#: The label that makes an endpoint's stable Service ours (Kubernetes "Recommended Labels":
#: ``app.kubernetes.io/managed-by``, "the tool being used to manage the operation of an application"): the cdk8s app
#: writes the Service with it, ``hyperpod-dpd rollout`` repoints it and changes no Service without it.
MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
#: The label of every manifest of ours that names its deployment (the config's ``name``; Kubernetes docs,
#: "Recommended Labels": "the name of a higher level application this one is part of").
PART_OF_LABEL: Final = "app.kubernetes.io/part-of"
#: The ``pdSpec`` key of each role's spec (CRD v3.3: ``prefillSpec``, ``decodingSpec``).
PD_SPEC_KEYS: Final = {"prefill": "prefillSpec", "decode": "decodingSpec"}
STABLE_SERVICE_MANAGER: Final = "hyperpod-dpd"
#: The stable Service's annotations: the InferenceEndpointConfig it points at and that one's revision number
#: (``0``: the endpoint under its own name, as ``kubectl apply -f dist/<endpoint>/endpoint/`` creates it).
TARGET_ANNOTATION: Final = "hyperpod-dpd/endpoint-config"
REVISION_ANNOTATION: Final = "hyperpod-dpd/revision"
#: The label every revision's InferenceEndpointConfig carries with its number (the same key as the annotation).
REVISION_LABEL: Final = REVISION_ANNOTATION


def revision_name(endpoint: str, number: int) -> str:
    """``<endpoint>-r<N>``: the InferenceEndpointConfig of revision N of a blue/green rollout."""
    return f"{endpoint}-r{number}"


def revision_of(name: str, endpoint: str) -> int | None:
    """Which revision of ``endpoint`` the InferenceEndpointConfig ``name`` is: 0 for the endpoint's own name, N for
    ``<endpoint>-r<N>`` (:func:`revision_name`), ``None`` for any other name."""
    if name == endpoint:
        return 0
    found = re.fullmatch(re.escape(endpoint) + r"-r([0-9]+)", name)
    return int(found.group(1)) if found else None


class NamedEndpoint(Protocol):
    """What the names derive from: an endpoint's ``name`` and ``namespace`` (the config's ``endpoint`` section)."""

    @property
    def name(self) -> str: ...

    @property
    def namespace(self) -> str: ...


@dataclass(frozen=True, kw_only=True)
class EndpointNames:
    """The operator's object names for the endpoint ``name`` in ``namespace``."""

    name: str
    namespace: str

    @classmethod
    def of(cls, endpoint: NamedEndpoint) -> EndpointNames:
        return cls(name=endpoint.name, namespace=endpoint.namespace)

    def role_deployment(self, role: Role) -> str:
        """The operator's Deployment of one DPD role, in :attr:`namespace`: ``prefill-<iec>`` / ``decode-<iec>``
        [I] (module docstring). Its ``spec.selector`` picks the role's pods."""
        return f"{role}-{self.name}"

    def container(self, role: Role) -> str:
        """The vLLM container of a role's pod: ``prefill-<iec>`` / ``decode-<iec>``."""
        return f"{role}-{self.name}"

    @property
    def router_deployment(self) -> str:
        """The router's Deployment ``<iec>-<ns>-router`` in :data:`OPERATOR_NAMESPACE` [I] (module docstring)."""
        return f"{self.name}-{self.namespace}-router"

    @property
    def router_service(self) -> str:
        """The router's Service, in :data:`OPERATOR_NAMESPACE`."""
        return f"{self.name}-{self.namespace}-routing-service"

    @property
    def router_service_host(self) -> str:
        """In-cluster DNS name of :attr:`router_service`."""
        return f"{self.router_service}.{OPERATOR_NAMESPACE}.svc.cluster.local"

    @property
    def ingress(self) -> str:
        """The operator's Ingress for the endpoint's ALB, in :data:`OPERATOR_NAMESPACE` (module docstring)."""
        return f"alb-{self.name}-{self.namespace}"

    @property
    def stable_service(self) -> str:
        """``<endpoint>``: our ExternalName Service in the endpoint's namespace, the endpoint's one stable in-cluster
        address; it points at the live revision's :attr:`router_service_host` (the cdk8s app writes it beside the
        InferenceEndpointConfig, ``hyperpod-dpd rollout`` repoints it). Of the endpoint's own names: a blue/green
        revision ``<endpoint>-r<N>`` has none of its own."""
        return self.name

    def derived(self) -> tuple[tuple[str, str, str], ...]:
        """Every object name derived from this endpoint, as ``(kind, namespace, name)``: the operator's router
        Deployment, Service and Ingress in :data:`OPERATOR_NAMESPACE`, its role Deployments, our stable Service and
        our benchmark ConfigMap/ServiceAccount in the endpoint's namespace. Two endpoints of one cluster must share
        none."""
        return (("Deployment", OPERATOR_NAMESPACE, self.router_deployment),
                ("Service", OPERATOR_NAMESPACE, self.router_service),
                ("Ingress", OPERATOR_NAMESPACE, self.ingress),
                *(("Deployment", self.namespace, self.role_deployment(role)) for role in ROLES),
                ("Service", self.namespace, self.stable_service),
                ("ServiceAccount", self.namespace, self.benchmark_resource))

    @property
    def benchmark_resource(self) -> str:
        """``<endpoint>-benchmark``: our name (not the operator's) of the benchmark ConfigMap and of the
        ServiceAccount the benchmark Jobs run as, in the endpoint namespace (the cdk8s chart writes both; the
        platform stack gives the ServiceAccount its Pod Identity association)."""
        return f"{self.name}-benchmark"


def certificate_pem_location(status: dict[str, object]) -> tuple[str, str] | None:
    """``(bucket, key)`` of the endpoint's CA PEM from the IEC ``status.tlsCertificate``, or ``None`` while
    the operator has not written it. ``tlsCertificateOutputS3Bucket`` may carry a prefix (``bucket/prefix``,
    with or without ``s3://``) that the keys in ``tlsCertificateS3Keys`` may or may not already start with."""
    tls = status.get("tlsCertificate")
    if not isinstance(tls, dict):
        return None
    bucket_field = str(tls.get("tlsCertificateOutputS3Bucket") or "")
    keys = tls.get("tlsCertificateS3Keys") or []
    if not bucket_field or not keys:
        return None
    bucket, _, prefix = bucket_field.removeprefix("s3://").rstrip("/").partition("/")
    key = str(keys[0])
    return bucket, key if not prefix or key.startswith(prefix) else f"{prefix.rstrip('/')}/{key}"
