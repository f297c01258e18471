"""The long-lived sections of the config: the VPC (`network`), the EKS cluster (`eks`) and the HyperPod cluster
with its GPU instance groups (`hyperpod`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from hyperpod_core import pins
from hyperpod_core.config.section import Section
from hyperpod_core.config.types import (
    AzId,
    AzIdOrEmpty,
    Cidr,
    ControlPlaneAzId,
    DpdInstanceType,
    Ec2InstanceType,
    EksClusterName,
    IamPrincipalArn,
    KubernetesVersion,
    PrimaryVpcCidr,
    SageMakerName,
    TrainingPlanArn,
    VpcCidrBlock,
    unique,
)
from hyperpod_core.instances import DPD_INSTANCE_GPUS

InterfaceEndpoint = Literal[
    "ecr.api", "ecr.dkr", "sts", "eks", "eks-auth", "sagemaker.api", "logs", "monitoring",
    "ssm", "ssmmessages", "ec2messages", "ec2", "elasticloadbalancing", "aps-workspaces",
]
#: CloudWatch Logs retention periods (days) this project offers.
RetentionDays = Literal[1, 3, 5, 7, 14, 30, 60, 90, 180, 365]


class NetworkConfig(Section):
    """The VPC. EKS needs subnets in two AZs; the GPU nodes get one subnet in `gpu_availability_zone_id`."""

    vpc_cidr: PrimaryVpcCidr = "10.0.0.0/16"
    """Primary VPC CIDR: the public and the control-plane/system subnets in two AZs. A private range, /16 to /20.
    Default: `10.0.0.0/16`."""
    gpu_cidr: VpcCidrBlock = "10.1.0.0/16"
    """Secondary VPC CIDR, used whole as the single GPU subnet: it must hold 81 IPs x 2 per GPU node (HyperPod
    capacity planning, doubled for rolling replacement) and must not overlap `vpc_cidr`. Default: `10.1.0.0/16`."""
    gpu_availability_zone_id: AzId = "usw2-az2"
    """AZ *ID* (not name) of the GPU capacity or training plan: AZ names map to different AZs in every account.
    Every instance group must resolve to it. Default: `usw2-az2`."""
    control_plane_availability_zone_ids: tuple[ControlPlaneAzId, ControlPlaneAzId]
    """The two AZ IDs of the public and control-plane/system subnets, in `region`, never one where EKS creates
    no control planes. Default (`null`): the first two AZ IDs of `region` that EKS supports (`usw2-az1`,
    `usw2-az2` in us-west-2)."""
    nat_gateways: Annotated[int, Field(ge=1, le=2)] = 1
    """NAT gateways of the private subnets: 1, or 2 for one per AZ. Default: 1."""
    interface_endpoints: tuple[InterfaceEndpoint, ...] = ()
    """Interface VPC endpoints to create (needed only for private clusters), e.g. `[ecr.api, ecr.dkr, sts,
    eks-auth, sagemaker.api, logs, aps-workspaces]` (the collector remote-writes to Amazon Managed Prometheus).
    Each admits HTTPS from `vpc_cidr` and `gpu_cidr`. Default: none."""
    flow_logs_retention_days: RetentionDays = 30
    """Retention of the VPC flow logs in CloudWatch, in days. Default: 30."""
    fsx_lustre: bool = False
    """Open the FSx for Lustre ports (988, 1018-1023) on the GPU security group. Default: off."""


class SystemNodeGroupConfig(Section):
    """The managed node group for system pods (CoreDNS, controllers, add-ons)."""

    instance_type: Ec2InstanceType = "m7i.xlarge"
    """EC2 instance type of the group. Default: `m7i.xlarge`."""
    desired_size: Annotated[int, Field(ge=1, le=10)] = 2
    """Nodes in the group. Default: 2."""


class EksConfig(Section):
    """The EKS cluster the HyperPod cluster joins."""

    cluster_name: EksClusterName
    """EKS cluster name. Default (`null`): `<name>-eks`, so two deployments never collide."""
    kubernetes_version: KubernetesVersion = pins.KUBERNETES_VERSION
    """Kubernetes version of the cluster: a HyperPod-supported one that every pinned add-on is offered for.
    Default: the pinned version (`pins.KUBERNETES_VERSION`)."""
    admin_principal_arn: IamPrincipalArn | None = None
    """IAM role or user granted cluster admin (kubectl) through an access entry. Default: none: the cluster stack
    then takes the required CloudFormation parameter `AdminPrincipalArn`, which the README deploy command fills
    with the caller (`aws sts get-caller-identity | scripts/admin-principal-arn`)."""
    endpoint_public_access_cidrs: tuple[Cidr, ...] = ("0.0.0.0/0",)
    """CIDRs allowed to reach the public API endpoint; the private endpoint is always on. Default: `[0.0.0.0/0]`."""
    log_retention_days: RetentionDays = 30
    """Retention of the control-plane logs in CloudWatch, in days. Default: 30."""
    system_node_group: SystemNodeGroupConfig = SystemNodeGroupConfig()
    """The managed node group for system pods. Default: 2 x `m7i.xlarge`."""


DeepHealthCheck = Literal["InstanceStress", "InstanceConnectivity"]
Pool = Literal["prefill", "decode", "shared"]


class InstanceGroupConfig(Section):
    """One HyperPod instance group of GPU nodes."""

    name: SageMakerName
    """Instance group name, unique in the cluster. Required."""
    instance_type: DpdInstanceType = "ml.p5.48xlarge"
    """Instance type of the nodes: one with EFA RDMA that the operator supports for DPD. Default: `ml.p5.48xlarge`."""
    instance_count: Annotated[int, Field(ge=0, le=6758)] = 1
    """Nodes in the group. Default: 1."""
    pool: Pool = "shared"
    """Which DPD role the nodes serve; becomes a Kubernetes node label and the role's nodeSelector. Default:
    `shared` (either role)."""
    availability_zone_id: AzIdOrEmpty | None = None
    """AZ ID of the group's nodes; all GPU groups must resolve to one AZ ID. Default (`null` or empty):
    `network.gpu_availability_zone_id`."""
    ebs_volume_size_gb: Annotated[int, Field(ge=1, le=16384)] = 500
    """Size of the EBS volume HyperPod attaches to each node, in GB. Default: 500."""
    threads_per_core: Literal[1, 2] = 1
    """HyperPod `ThreadsPerCore`: 1 turns hyper-threading off and halves the CPUs a node reports. Default: 1."""
    deep_health_checks: Annotated[tuple[DeepHealthCheck, ...], unique("a check")] = (
        "InstanceStress", "InstanceConnectivity")
    """Deep health checks HyperPod runs on new nodes (`OnStartDeepHealthChecks`), each at most once; empty: none.
    Default: both."""
    training_plan_arn: TrainingPlanArn | None = None
    """SageMaker training plan, in `region`, whose reserved capacity the group runs on. Default: none
    (on-demand capacity)."""


class HyperPodConfig(Section):
    """The SageMaker HyperPod cluster (EKS-orchestrated) and its GPU instance groups."""

    cluster_name: SageMakerName
    """HyperPod cluster name. **Create-only**: changing it replaces the GPU cluster. Default (`null`): `<name>`,
    so two deployments never collide."""
    node_recovery: Literal["Automatic", "None"] = "Automatic"
    """HyperPod `NodeRecovery`: `Automatic` replaces or reboots faulty nodes. Default: `Automatic`."""
    node_provisioning_mode: Literal["Continuous", "Legacy"] = "Continuous"
    """HyperPod `NodeProvisioningMode`. Default: `Continuous`."""
    instance_groups: Annotated[tuple[InstanceGroupConfig, ...], Field(min_length=1, max_length=100)]
    """The GPU instance groups (1 to 100). Required."""
    tiered_storage_memory_percent: Annotated[int, Field(ge=1, le=50)] | None = None
    """Share of each node's memory HyperPod's tiered storage takes (`TieredStorageConfig`
    `InstanceMemoryAllocationPercentage`; its memory daemon serves the `tieredstorage` L2 KV cache), set aside
    in the workers' node budget. Setting it turns tiered storage on. Default (`null`): 20 when
    `endpoint.kv_cache.l2_cache_backend` is `tieredstorage` (the value of AWS's managed-KV-cache example),
    else tiered storage stays off."""

    def pool_gpus(self, pool: Literal["prefill", "decode", "shared"]) -> int:
        """GPUs available to a DPD role: nodes in groups labelled for it, plus shared groups."""
        return sum(g.instance_count * DPD_INSTANCE_GPUS[g.instance_type]
                   for g in self.instance_groups if g.pool in (pool, "shared"))
