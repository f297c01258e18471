"""The EKS control plane HyperPod attaches to, with a small system node group and pinned core add-ons."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from aws_cdk import CfnCondition, CustomResource, Duration, Fn, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk.lambda_layer_kubectl_v33 import KubectlV33Layer
from constructs import Construct

from hyperpod_constructs.adopted_log_groups import (
    AdoptedLogGroupOptions,
    AdoptedLogGroups,
    AdoptedLogGroupsProps,
    LegacyLogGroup,
)

#: Every control-plane log type (EKS user guide, "Send control plane logs to CloudWatch Logs").
ALL_CONTROL_PLANE_LOGS = (
    eks.ClusterLoggingTypes.API, eks.ClusterLoggingTypes.AUDIT, eks.ClusterLoggingTypes.AUTHENTICATOR,
    eks.ClusterLoggingTypes.CONTROLLER_MANAGER, eks.ClusterLoggingTypes.SCHEDULER,
)
#: Logical ID of the control-plane log group's resource, pinned to the one it synthesized to before it was pinned
#: (``Cluster`` template of config/default.yaml at commit 828b511): a changed logical ID is a Delete of the old
#: resource during the update (``hyperpod_constructs.adopted_log_groups``). One EKS cluster per stack.
CONTROL_PLANE_LOG_GROUP_LOGICAL_ID = "EksLogGroupsControlPlaneLogGroup0ED04B0A"
#: Node label on the system node group; system pods that must not wait for GPU nodes can select it.
SYSTEM_NODE_LABEL = {"hyperpod-dpd/node-role": "system"}


@dataclass(frozen=True, kw_only=True)
class AddonVersion:
    """An EKS add-on at an exact version (the pins module holds the values)."""

    name: str
    version: str


@dataclass(frozen=True, kw_only=True)
class EksClusterProps:
    """Props of :class:`EksCluster`."""

    cluster_name: str
    kubernetes_version: str
    """Must be a version HyperPod supports and for which the kubectl layer (v33) matches."""
    vpc: ec2.IVpc
    control_plane_subnets: ec2.SubnetSelection
    """Private subnets in two AZs for the control-plane ENIs, the system nodes and the kubectl handler."""
    vpc_cni: AddonVersion
    kube_proxy: AddonVersion
    coredns: AddonVersion
    pod_identity_agent: AddonVersion
    log_group_handler_modules: Mapping[str, Path]
    """What the control-plane log group's handler bundles (:attr:`AdoptedLogGroupsProps.bundled_modules`:
    ``hyperpod_infra.bundle.imported_by(adopted_log_groups.HANDLER_DIR / "index.py")``)."""
    system_instance_type: str = "m7i.xlarge"
    system_desired_size: int = 2
    """Default: 2 nodes (one per control-plane AZ), so system pods are never Pending without GPU nodes."""
    endpoint_public_access_cidrs: tuple[str, ...] = ("0.0.0.0/0",)
    """CIDRs allowed on the public endpoint. The private endpoint is always on. Default: anywhere."""
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    admin_principal_arn: str | None = None
    """IAM role/user granted ``AmazonEKSClusterAdminPolicy`` through an access entry; may be a token (a stack
    parameter). Default: none, and then no human can use kubectl: with API authentication the bootstrap admin is
    the CloudFormation execution role. The cluster stack always passes one."""
    legacy_log_group_condition: CfnCondition | None = None
    """While true, the template keeps the plain ``AWS::Logs::LogGroup`` earlier releases created the
    control-plane group as (same logical ID, ``DeletionPolicy`` and ``UpdateReplacePolicy`` ``Retain``), so an
    upgrade never deletes the live group (docs/deploy.md, "Upgrade"). Default: no such resource."""


class EksCluster(Construct):
    """``aws_eks_v2.Cluster`` set up the way HyperPod needs it.

    - Kubernetes version pinned; authentication mode ``API`` (aws_eks_v2 uses access entries only, which
      HyperPod accepts: sagemaker-hyperpod-eks-prerequisites).
    - Public *and* private endpoint, the public one limited to ``endpoint_public_access_cidrs``.
    - All five control-plane log types into ``/aws/eks/<name>/cluster``, adopted (created if missing, retention
      set) before the cluster and deleted after it (:class:`AdoptedLogGroups`): EKS's service-linked role
      re-creates the group after the cluster is gone, so a plain log group would fail the next create.
    - Secrets envelope-encrypted with a customer-managed KMS key (rotation on).
    - An IAM OIDC provider (IRSA) next to the pod identity agent (pod identity).
    - Auto Mode off; a small managed node group for system pods (CoreDNS, controllers, webhooks).
    - vpc-cni, kube-proxy, coredns and eks-pod-identity-agent as pinned managed add-ons. Ordering: the CNI,
      kube-proxy and the pod identity agent before the node group (nodes need a CNI to become Ready), CoreDNS
      after it (CoreDNS stays DEGRADED with no node to run on).
    """

    cluster: eks.Cluster
    log_group: logs.ILogGroup
    log_group_resource: CustomResource
    """Adopts the control-plane group; the cluster depends on it."""
    secrets_key: kms.Key
    system_nodegroup: eks.Nodegroup
    addons: dict[str, eks.Addon]

    def __init__(self, scope: Construct, construct_id: str, *, props: EksClusterProps) -> None:
        super().__init__(scope, construct_id)
        self.props = props

        self._control_plane_log_group()
        self.secrets_key = kms.Key(
            self, "SecretsKey", enable_key_rotation=True, removal_policy=RemovalPolicy.DESTROY,
            pending_window=Duration.days(7), description=f"EKS secrets encryption for {props.cluster_name}")
        self._cluster()
        self.oidc_provider = eks.OidcProviderNative(
            self, "OidcProvider", url=self.cluster.cluster_open_id_connect_issuer_url)
        self._addons_and_system_nodes()
        if props.admin_principal_arn is not None:
            self.cluster.grant_access("Admin", props.admin_principal_arn, [
                eks.AccessPolicy.from_access_policy_name(
                    "AmazonEKSClusterAdminPolicy", access_scope_type=eks.AccessScopeType.CLUSTER)])

    def _cluster(self) -> None:
        """The control plane, after its log group is adopted; its kubectl handler in the private subnets."""
        props = self.props
        self.kubectl_layer = KubectlV33Layer(self, "KubectlLayer")
        private_subnets = props.vpc.select_subnets(
            subnet_type=props.control_plane_subnets.subnet_type,
            subnets=props.control_plane_subnets.subnets).subnets
        self.private_subnets = private_subnets
        self.cluster = eks.Cluster(
            self, "Cluster",
            cluster_name=props.cluster_name,
            version=eks.KubernetesVersion.of(props.kubernetes_version),
            vpc=props.vpc,
            vpc_subnets=[props.control_plane_subnets],
            endpoint_access=eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*props.endpoint_public_access_cidrs),
            cluster_logging=list(ALL_CONTROL_PLANE_LOGS),
            secrets_encryption_key=self.secrets_key,
            # Auto Mode off: HyperPod brings the GPU nodes, our node group the system nodes.
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            # The managed add-ons below own vpc-cni, kube-proxy and coredns; no unmanaged copies to adopt.
            bootstrap_self_managed_addons=False,
            kubectl_provider_options=eks.KubectlProviderOptions(
                kubectl_layer=self.kubectl_layer,
                # In the VPC: the handler uses the private endpoint, whatever the public allow-list says.
                private_subnets=private_subnets,
            ),
        )
        cfn_cluster = self.cluster.node.default_child
        assert isinstance(cfn_cluster, eks.CfnCluster)
        self.cfn_cluster = cfn_cluster
        # Adopted, with retention, before EKS writes to it; deleted only once the cluster is gone.
        cfn_cluster.node.add_dependency(self.log_group_resource)

    def _addons_and_system_nodes(self) -> None:
        """The CNI, kube-proxy and the pod identity agent, then the system node group, then CoreDNS (class
        docstring)."""
        props = self.props
        self.addons = {}
        for pin in (props.vpc_cni, props.kube_proxy, props.pod_identity_agent):
            self.addons[pin.name] = self._addon(pin)
        self.system_nodegroup = self.cluster.add_nodegroup_capacity(
            "SystemNodes",
            instance_types=[ec2.InstanceType(props.system_instance_type)],
            ami_type=eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
            min_size=props.system_desired_size, desired_size=props.system_desired_size,
            max_size=props.system_desired_size + 1,
            subnets=props.control_plane_subnets,
            labels=SYSTEM_NODE_LABEL,
            enable_node_auto_repair=True,
        )
        for addon in self.addons.values():
            self.system_nodegroup.node.add_dependency(addon)
        self.addons[props.coredns.name] = self._addon(props.coredns)
        self.addons[props.coredns.name].node.add_dependency(self.system_nodegroup)

    def _control_plane_log_group(self) -> None:
        props = self.props
        name = f"/aws/eks/{props.cluster_name}/cluster"
        self.log_groups = AdoptedLogGroups(self, "LogGroups", props=AdoptedLogGroupsProps(
            log_retention=props.log_retention, bundled_modules=props.log_group_handler_modules))
        legacy, legacy_group = None, None
        if props.legacy_log_group_condition is not None:
            # The construct ID of earlier releases: the same logical ID, so CloudFormation sees the same resource.
            legacy_group = logs.LogGroup(self, "ControlPlaneLogs", log_group_name=name,
                                         retention=props.log_retention, removal_policy=RemovalPolicy.RETAIN)
            cfn = legacy_group.node.default_child
            assert isinstance(cfn, logs.CfnLogGroup)
            cfn.cfn_options.condition = props.legacy_log_group_condition
            condition_id = props.legacy_log_group_condition.logical_id
            legacy = LegacyLogGroup(logical_id=Stack.of(self).get_logical_id(cfn),
                                    retained=Fn.condition_if(condition_id, "true", "false").to_string())
        self.log_group_resource = self.log_groups.adopt("ControlPlaneLogGroup", AdoptedLogGroupOptions(
            log_group_name=name, logical_id=CONTROL_PLANE_LOG_GROUP_LOGICAL_ID, retention=props.log_retention,
            legacy=legacy))
        if legacy_group is not None:
            # After the guard: a retained resource is never created where it would collide.
            legacy_group.node.add_dependency(self.log_group_resource)
        self.log_group = logs.LogGroup.from_log_group_name(self, "ControlPlaneLogGroupName", name)

    def _addon(self, pin: AddonVersion) -> eks.Addon:
        addon = eks.Addon(
            self, "Addon" + "".join(p.capitalize() for p in pin.name.split("-")),
            cluster=cast(eks.ICluster, self.cluster),  # jsii class vs protocol: see ClusterStack
            addon_name=pin.name, addon_version=pin.version, preserve_on_delete=False)
        cfn = addon.node.default_child
        assert isinstance(cfn, eks.CfnAddon)
        cfn.resolve_conflicts = "OVERWRITE"
        return addon

    @property
    def update_kubeconfig_command(self) -> str:
        return (f"aws eks update-kubeconfig --name {self.props.cluster_name} "
                f"--region {self.cluster.stack.region}")
