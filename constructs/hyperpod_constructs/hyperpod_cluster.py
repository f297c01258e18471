"""An L2-style construct for a SageMaker HyperPod cluster orchestrated by EKS."""

from __future__ import annotations

from dataclasses import dataclass

import jsii
from aws_cdk import CfnDeletionPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct, IValidation

#: Kubernetes node label carrying the DPD pool (prefill/decode/shared) of an instance group's nodes.
POOL_LABEL = "hyperpod-dpd/pool"
#: Logical ID of the ``AWS::SageMaker::Cluster``, fixed so that no construct-tree refactoring can ever make
#: CloudFormation see a *new* resource (which would create a second GPU cluster and delete the first).
LOGICAL_ID = "HyperPodCluster"
#: Properties CloudFormation cannot update in place: a change replaces the whole cluster (registry schema
#: ``createOnlyProperties`` of AWS::SageMaker::Cluster).
CREATE_ONLY_PROPERTIES = ("ClusterName", "VpcConfig", "Orchestrator")
DEEP_HEALTH_CHECKS = ("InstanceStress", "InstanceConnectivity")


@dataclass(frozen=True, kw_only=True)
class InstanceGroupOptions:
    """One instance group, for :meth:`HyperPodCluster.add_instance_group`."""

    name: str
    instance_type: str
    instance_count: int
    execution_role: iam.IRole
    lifecycle_source_s3_uri: str
    """``s3://<sagemaker-...bucket>/<prefix>/`` holding ``on_create``. Not create-only (the registry schema lists
    only :data:`CREATE_ONLY_PROPERTIES`): a new value is an in-place ``UpdateCluster``, which may change "the
    lifecycle configuration entrypoint script, and the path to the script" of a group (AWS HyperPod EKS guide,
    "Updating SageMaker HyperPod cluster configuration"). "The UpdateCluster API only runs the lifecycle scripts for
    new instance groups" (AWS, "Updating a cluster with new or updated lifecycle scripts", Slurm guide): running
    nodes keep their set-up, and nodes HyperPod creates later in an existing group run the new script [I]."""
    on_create: str = "on_create.sh"
    subnet: ec2.ISubnet
    """The subnet in the AZ of the capacity; becomes ``OverrideVpcConfig``."""
    security_group: ec2.ISecurityGroup
    threads_per_core: int = 1
    """Default: 1 (no hyper-threading), written explicitly: every update must repeat it."""
    ebs_volume_size_gb: int = 500
    """Secondary EBS volume mounted at /opt/sagemaker. Default: 500 GB."""
    deep_health_checks: tuple[str, ...] = DEEP_HEALTH_CHECKS
    """On-start deep health checks. Default: both (instance stress and connectivity)."""
    training_plan_arn: str | None = None
    """Run on reserved capacity. Default: on-demand."""
    labels: dict[str, str] | None = None
    """Kubernetes labels on the group's nodes. Default: none."""


@dataclass(frozen=True, kw_only=True)
class HyperPodClusterProps:
    """Props of :class:`HyperPodCluster`."""

    cluster_name: str
    eks_cluster_arn: str
    subnet: ec2.ISubnet
    """Cluster-level ``VpcConfig`` subnet (create-only)."""
    security_group: ec2.ISecurityGroup
    """Cluster-level ``VpcConfig`` security group (create-only): the EFA group (all traffic to/from itself)."""
    eks_cluster_security_group_id: str
    """The EKS-managed *cluster security group* (``AWS::EKS::Cluster`` ``ClusterSecurityGroupId``). Every node
    carries it next to its own group (``VpcConfig`` and every ``OverrideVpcConfig``): the control-plane ENIs and
    the managed system nodes carry it and it admits only its members, so without it the kubelet cannot
    register, ``aws-node`` cannot reach the API and GPU pods cannot reach CoreDNS (deploy-facts.md)."""
    node_recovery: str = "Automatic"
    node_provisioning_mode: str = "Continuous"
    """``Continuous`` or ``Legacy`` (property omitted). Default: Continuous."""
    tiered_storage_memory_percent: int | None = None
    """``TieredStorageConfig`` ``Mode: Enable`` with this ``InstanceMemoryAllocationPercentage`` (HyperPod's memory
    daemon: the managed tiered KV cache). Default: none (property omitted: off)."""


class HyperPodCluster(Construct):
    """``AWS::SageMaker::Cluster`` with the EKS orchestrator, built group by group.

    Networking: every node carries the group of its options (EFA) *and* the EKS cluster security group; see
    :attr:`HyperPodClusterProps.eks_cluster_security_group_id` and :attr:`security_group_ids`.

    Guarding against replacement: ``ClusterName``, ``VpcConfig`` and ``Orchestrator`` are create-only. The
    resource has a fixed logical ID (:data:`LOGICAL_ID`) and ``UpdateReplacePolicy: Retain``: should a
    change ever force a replacement, CloudFormation never deletes the running cluster (a replacement under the
    same name fails fast instead, and the stack rolls back). The test suite pins the create-only values of
    the default config; ``docs/cluster.md`` says how to change them on purpose.
    """

    cfn: sagemaker.CfnCluster

    def __init__(self, scope: Construct, construct_id: str, *, props: HyperPodClusterProps) -> None:
        super().__init__(scope, construct_id)
        if props.node_recovery not in ("Automatic", "None"):
            raise ValueError(f"node_recovery must be 'Automatic' or 'None', got {props.node_recovery!r}")
        if props.tiered_storage_memory_percent is not None and not 0 < props.tiered_storage_memory_percent <= 100:
            raise ValueError("tiered_storage_memory_percent must be 1 to 100 (InstanceMemoryAllocationPercentage), "
                             f"got {props.tiered_storage_memory_percent!r}")
        if props.node_provisioning_mode not in ("Continuous", "Legacy"):
            raise ValueError("node_provisioning_mode must be 'Continuous' or 'Legacy', "
                             f"got {props.node_provisioning_mode!r}")
        self.props = props
        self._groups: list[sagemaker.CfnCluster.ClusterInstanceGroupProperty] = []
        self.cfn = sagemaker.CfnCluster(
            self, "Resource",
            cluster_name=props.cluster_name,
            orchestrator=sagemaker.CfnCluster.OrchestratorProperty(
                eks=sagemaker.CfnCluster.ClusterOrchestratorEksConfigProperty(cluster_arn=props.eks_cluster_arn)),
            vpc_config=sagemaker.CfnCluster.VpcConfigProperty(
                subnets=[props.subnet.subnet_id],
                security_group_ids=[props.security_group.security_group_id, props.eks_cluster_security_group_id]),
            node_recovery=props.node_recovery,
            node_provisioning_mode=(props.node_provisioning_mode
                                    if props.node_provisioning_mode == "Continuous" else None),
            tiered_storage_config=None if props.tiered_storage_memory_percent is None else
            sagemaker.CfnCluster.TieredStorageConfigProperty(
                mode="Enable", instance_memory_allocation_percentage=props.tiered_storage_memory_percent),
        )
        self.cfn.override_logical_id(LOGICAL_ID)
        self.cfn.cfn_options.update_replace_policy = CfnDeletionPolicy.RETAIN
        self.cfn.cfn_options.deletion_policy = CfnDeletionPolicy.DELETE  # billable: `cdk destroy` removes it
        self.node.add_validation(_HasInstanceGroups(self))

    @property
    def cluster_name(self) -> str:
        return self.props.cluster_name

    @property
    def cluster_arn(self) -> str:
        return self.cfn.attr_cluster_arn

    def security_group_ids(self, group_security_group: ec2.ISecurityGroup) -> list[str]:
        """What a node of a group with ``group_security_group`` carries: that group and the EKS cluster group."""
        return [group_security_group.security_group_id, self.props.eks_cluster_security_group_id]

    @property
    def instance_group_names(self) -> list[str]:
        return [g.instance_group_name for g in self._groups]

    def add_instance_group(self, options: InstanceGroupOptions) -> None:
        """Add one instance group, pinned to ``options.subnet`` and ``options.security_group``."""
        if options.name in self.instance_group_names:
            raise ValueError(f"instance group name must be unique, got {options.name!r} twice")
        if options.instance_count < 0:
            raise ValueError(f"instance group {options.name!r} instance_count must be >= 0, "
                             f"got {options.instance_count}")
        if options.threads_per_core not in (1, 2):
            raise ValueError(f"instance group {options.name!r} threads_per_core must be 1 or 2, "
                             f"got {options.threads_per_core}")
        bad = [c for c in options.deep_health_checks if c not in DEEP_HEALTH_CHECKS]
        if bad:
            raise ValueError(f"instance group {options.name!r} deep_health_checks must be among "
                             f"{DEEP_HEALTH_CHECKS}, got {bad}")
        self._groups.append(sagemaker.CfnCluster.ClusterInstanceGroupProperty(
            instance_group_name=options.name,
            instance_type=options.instance_type,
            instance_count=options.instance_count,
            execution_role=options.execution_role.role_arn,
            threads_per_core=options.threads_per_core,
            life_cycle_config=sagemaker.CfnCluster.ClusterLifeCycleConfigProperty(
                source_s3_uri=options.lifecycle_source_s3_uri, on_create=options.on_create),
            instance_storage_configs=[sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty(
                ebs_volume_config=sagemaker.CfnCluster.ClusterEbsVolumeConfigProperty(
                    volume_size_in_gb=options.ebs_volume_size_gb))],
            on_start_deep_health_checks=list(options.deep_health_checks) or None,
            override_vpc_config=sagemaker.CfnCluster.VpcConfigProperty(
                subnets=[options.subnet.subnet_id],
                security_group_ids=self.security_group_ids(options.security_group)),
            training_plan_arn=options.training_plan_arn,
            kubernetes_config=(sagemaker.CfnCluster.ClusterKubernetesConfigProperty(labels=options.labels)
                               if options.labels else None),
        ))
        self.cfn.instance_groups = list(self._groups)


@jsii.implements(IValidation)
class _HasInstanceGroups:
    def __init__(self, cluster: HyperPodCluster) -> None:
        self._cluster = cluster

    def validate(self) -> list[str]:
        if not self._cluster.instance_group_names:
            return ["HyperPodCluster needs at least one instance group (add_instance_group)"]
        return []
