"""The HyperPod cluster: lifecycle scripts, the instances' execution role, and the cluster itself."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aws_cdk import CfnOutput, Fn, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_logs as logs
from constructs import Construct, IDependable

from hyperpod_constructs import adopted_log_groups
from hyperpod_constructs.adopted_log_groups import AdoptedLogGroupOptions, AdoptedLogGroups, AdoptedLogGroupsProps
from hyperpod_constructs.hyperpod_cluster import POOL_LABEL, HyperPodCluster, HyperPodClusterProps, InstanceGroupOptions
from hyperpod_constructs.hyperpod_execution_role import HyperPodExecutionRole, HyperPodExecutionRoleProps
from hyperpod_constructs.lifecycle_scripts import LifecycleScripts, LifecycleScriptsProps
from hyperpod_constructs.nag import acknowledge
from hyperpod_core import instances, outputs
from hyperpod_infra import bundle

#: Logical IDs of the log-group resources, pinned to the ones they synthesized to before they were pinned
#: (``HyperPod`` template of config/default.yaml at commit 828b511): a changed logical ID is a Delete of the
#: old resource during the update (``hyperpod_constructs.adopted_log_groups``).
CLUSTER_LOGS_CLEANUP_LOGICAL_ID = "LogGroupsClusterLogsCleanup98B580DC"
CLUSTER_LOGS_LOGICAL_ID = "LogGroupsClusterLogs07A2C078"


@dataclass(frozen=True, kw_only=True)
class InstanceGroupSpec:
    """One instance group as the config describes it (no CDK objects: those come from the other stacks)."""

    name: str
    instance_type: str
    instance_count: int
    pool: str
    threads_per_core: int
    ebs_volume_size_gb: int
    deep_health_checks: tuple[str, ...]
    training_plan_arn: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    """Kubernetes labels on the group's nodes besides ``hyperpod-dpd/pool: <pool>`` (an endpoint's role pinned to the
    group selects its ``hyperpod-dpd/instance-group: <name>``). Default: none."""


@dataclass(frozen=True, kw_only=True)
class HyperPodStackProps:
    cluster_name: str
    node_recovery: str
    node_provisioning_mode: str
    lifecycle_bucket_name: str
    instance_groups: tuple[InstanceGroupSpec, ...]
    eks_cluster: eks.ICluster
    vpc: ec2.IVpc
    gpu_subnet: ec2.ISubnet
    efa_security_group: ec2.ISecurityGroup
    dependencies: IDependable
    """Created before the HyperPod cluster (the device plugins and HyperPod components in the cluster stack)."""
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    """Of HyperPod's own log group and of our handlers' groups. Default: one month."""
    tiered_storage_memory_percent: int | None = None
    """HyperPod tiered storage's share of node memory (the ``tieredstorage`` L2 KV cache). Default: off."""
    weights_cache: bool = False
    """The operator's NVMe weights cache is on: every node's ``on_create.sh`` waits for the instance store and
    fails when it never mounts. Default: off."""


class HyperPodStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, props: HyperPodStackProps, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.lifecycle = LifecycleScripts(self, "Lifecycle", props=LifecycleScriptsProps(
            bucket_name=props.lifecycle_bucket_name, weights_cache=props.weights_cache))
        self.hyperpod = HyperPodCluster(self, "HyperPod", props=HyperPodClusterProps(
            cluster_name=props.cluster_name, eks_cluster_arn=props.eks_cluster.cluster_arn,
            subnet=props.gpu_subnet, security_group=props.efa_security_group,
            eks_cluster_security_group_id=props.eks_cluster.cluster_security_group_id,
            node_recovery=props.node_recovery, node_provisioning_mode=props.node_provisioning_mode,
            tiered_storage_memory_percent=props.tiered_storage_memory_percent))
        if {g.instance_type for g in props.instance_groups} & instances.RESERVED_ONLY_INSTANCE_TYPES:
            # cfn-lint's E3644 reads AWS's price list, which has no on-demand HyperPod offer for these types; the
            # SageMaker API accepts them, and the config gives each such group a training plan (reserved-only).
            self.hyperpod.cfn.add_metadata("cfn-lint", {"config": {"ignore_checks": ["E3644"]}})
        self.execution_role = HyperPodExecutionRole(self, "ExecutionRole", props=HyperPodExecutionRoleProps(
            eks_cluster_arn=props.eks_cluster.cluster_arn, vpc=props.vpc, gpu_subnet=props.gpu_subnet,
            security_group_ids=tuple(self.hyperpod.security_group_ids(props.efa_security_group)),
            lifecycle_bucket=self.lifecycle.bucket, lifecycle_key_prefix=self.lifecycle.key_prefix))
        for g in props.instance_groups:
            self.hyperpod.add_instance_group(InstanceGroupOptions(
                name=g.name, instance_type=g.instance_type, instance_count=g.instance_count,
                execution_role=self.execution_role.role,
                lifecycle_source_s3_uri=self.lifecycle.source_s3_uri, on_create=self.lifecycle.on_create,
                subnet=props.gpu_subnet, security_group=props.efa_security_group,
                threads_per_core=g.threads_per_core, ebs_volume_size_gb=g.ebs_volume_size_gb,
                deep_health_checks=g.deep_health_checks, training_plan_arn=g.training_plan_arn,
                labels={POOL_LABEL: g.pool, **g.labels}))

        # HyperPod validates the role, reads the scripts and expects the device plugins and health agents at
        # create time. CDK would not order these on its own: the policy is a separate resource and the
        # scripts are uploaded by a custom resource; the charts live in the cluster stack.
        for dependency in (self.execution_role.role, self.execution_role.policy, self.lifecycle.deployment,
                           props.dependencies):
            self.hyperpod.node.add_dependency(dependency)

        self._cluster_log_groups(props)
        self._acknowledge()
        CfnOutput(self, outputs.HYPERPOD_CLUSTER_NAME, value=self.hyperpod.cluster_name)
        CfnOutput(self, outputs.HYPERPOD_CLUSTER_ARN, value=self.hyperpod.cluster_arn)
        CfnOutput(self, "LifecycleBucketName", value=self.lifecycle.bucket.bucket_name)
        CfnOutput(self, "ExecutionRoleArn", value=self.execution_role.role.role_arn)

    def _cluster_log_groups(self, props: HyperPodStackProps) -> None:
        """HyperPod writes ``/aws/sagemaker/Clusters/<name>/<cluster id>`` itself, outside CloudFormation, with
        no expiry (shared/reference/lifecycle-facts.md). Adopted with a retention once the cluster exists (its ID
        is the last part of its ARN); every group under ``/aws/sagemaker/Clusters/<name>/`` is deleted after
        the cluster is gone (a destroyed cluster of the same name left one too; another name's stay): on the stack's
        deletion only, never on a Delete CloudFormation sends during an update (e.g. after a rename of the
        cluster, whose old, retained cluster still writes under the old prefix)."""
        prefix = f"/aws/sagemaker/Clusters/{props.cluster_name}/"
        self.log_groups = AdoptedLogGroups(self, "LogGroups", props=AdoptedLogGroupsProps(
            log_retention=props.log_retention,
            bundled_modules=bundle.imported_by(adopted_log_groups.HANDLER_DIR / "index.py")))
        self.cluster_logs_cleanup = self.log_groups.delete_on_destroy(
            "ClusterLogsCleanup", prefix=prefix, logical_id=CLUSTER_LOGS_CLEANUP_LOGICAL_ID)
        self.hyperpod.node.add_dependency(self.cluster_logs_cleanup)
        cluster_id = Fn.select(1, Fn.split("/", self.hyperpod.cluster_arn))
        self.cluster_logs = self.log_groups.adopt("ClusterLogs", AdoptedLogGroupOptions(
            log_group_name=prefix + cluster_id, logical_id=CLUSTER_LOGS_LOGICAL_ID, iam_name_pattern=prefix + "*",
            retention=props.log_retention, delete_on_destroy=False))

    def _acknowledge(self) -> None:
        role = self.execution_role
        acknowledge(role.role, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
                               "AmazonSageMakerClusterInstanceRolePolicy]",
                    "AmazonSageMakerClusterInstanceRolePolicy is required by HyperPod for its instances")
        region, bucket_id = self.region, self.get_logical_id(
            self.lifecycle.bucket.node.default_child)
        for resource, reason in (
            (f"arn:<AWS::Partition>:ec2:{region}:<AWS::AccountId>:network-interface/*",
             "ENI IDs are created by HyperPod and the VPC CNI at run time; scoped to this account and region"),
            (f"arn:<AWS::Partition>:ec2:{region}:<AWS::AccountId>:instance/*",
             "ENIs attach to HyperPod instances whose IDs exist only at run time; this account and region"),
            ("*", "Only ec2:Describe* and ecr:GetAuthorizationToken, which support no resource-level scope"),
            (f"arn:<AWS::Partition>:ecr:{region}:*:repository/*",
             "Images come from AWS-owned and public-mirror ECR repositories in this region; each repository's "
             "own policy decides cross-account pulls"),
            (f"arn:<AWS::Partition>:cloudwatch:{region}:<AWS::AccountId>:alarm:*",
             "Rolling-update auto-rollback reads alarms named in the update request; this account and region"),
            (f"<{bucket_id}.Arn>/lifecycle/*", "Read-only on the lifecycle/ prefix of our own scripts bucket"),
        ):
            acknowledge(role.policy, f"AwsSolutions-IAM5[Resource::{resource}]", reason)
        acknowledge(self.lifecycle.bucket, "AwsSolutions-S1",
                    "Holds only on_create.sh, deployed from this repository by CloudFormation and read by the "
                    "HyperPod nodes; its content is public in this repository, so its reads reveal nothing")

        deployment_handler = next(c for c in self.node.children
                                  if c.node.id.startswith("Custom::CDKBucketDeployment"))
        reason = ("CDK's BucketDeployment handler (aws-cdk-lib 2.275 pinned) copies the asset into our bucket; "
                  "its role and policy are generated and not configurable")
        acknowledge(deployment_handler, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
                                        "service-role/AWSLambdaBasicExecutionRole]", reason)
        acknowledge(deployment_handler, "AwsSolutions-L1",
                    "Runtime of CDK's BucketDeployment handler is chosen by aws-cdk-lib 2.275 (pinned)")
        for finding in ("Action::s3:GetObject*", "Action::s3:GetBucket*", "Action::s3:List*",
                        "Action::s3:DeleteObject*", "Action::s3:Abort*", f"Resource::<{bucket_id}.Arn>/*",
                        f"Resource::arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-{region}/*"):
            acknowledge(deployment_handler, f"AwsSolutions-IAM5[{finding}]", reason)
