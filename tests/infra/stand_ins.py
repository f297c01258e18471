"""What another stack hands a construct, as stand-ins for testing one construct (or one thin stack) alone.

STYLE rule 12: a construct is tested alone, in a bare ``App`` + ``Stack`` with explicit props (aws-eks-v2's
``test/addon.test.ts``). What it takes from elsewhere (the VPC and its subnets, a security group, the EKS cluster
with its kubectl provider, the OIDC provider, a role) is imported here by attributes, so every value it puts in
its template is a literal the test names: no config, no ``app_builder`` and no other stack of ours. Where the unit
under test is a stack (a thin composition: STYLE principle 1), the stand-ins live in a stack of their own,
:class:`Given`, and the builders below give each stack of ours its explicit props. The one stand-in that is a
resource (the Prometheus workspace) is read through its export by value (:func:`exported_value`), never by the
export's name, which hashes construct paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from hyperpod_constructs import adopted_log_groups
from hyperpod_constructs.eks_cluster import AddonVersion, EksClusterProps
from hyperpod_constructs.gpu_network import GpuNetworkProps
from hyperpod_constructs.hyperpod_cluster import POOL_LABEL
from hyperpod_constructs.hyperpod_dependencies import ChartSource
from hyperpod_constructs.hyperpod_resiliency_charts import ResiliencyChart
from hyperpod_constructs.managed_prometheus import ManagedPrometheus, ManagedPrometheusProps
from hyperpod_constructs.model_bucket import ModelBucketProps, ModelReadLocation
from hyperpod_constructs.node_readiness import NodeRequirement
from hyperpod_core import pins
from hyperpod_core.names import INSTANCE_GROUP_NODE_LABEL
from hyperpod_core.telemetry.collection import metrics_provider
from hyperpod_infra import bundle
from hyperpod_infra.stacks.cluster_stack import ClusterStack, ClusterStackProps
from hyperpod_infra.stacks.hyperpod_stack import HyperPodStack, HyperPodStackProps, InstanceGroupSpec
from hyperpod_infra.stacks.network_stack import NetworkStack, NetworkStackProps
from hyperpod_infra.stacks.observability_addon_stack import ObservabilityAddonStack, ObservabilityAddonStackProps
from hyperpod_infra.stacks.platform_stack import BenchmarkClientSpec, PlatformStack, PlatformStackProps

REGION = "us-west-2"
ACCOUNT = "111122223333"
VPC_ID = "vpc-0example"
VPC_CIDR = "10.0.0.0/16"
GPU_CIDR = "10.1.0.0/16"
AZS = ("us-west-2a", "us-west-2b")
PRIVATE_SUBNETS = ("subnet-0private1", "subnet-0private2")
GPU_SUBNET = "subnet-0gpu"
GPU_AZ = "us-west-2b"
EFA_GROUP = "sg-0efa"
CLUSTER_NAME = "dpd-eks"
CLUSTER_SECURITY_GROUP = "sg-0cluster"
KUBECTL_SERVICE_TOKEN = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:kubectl-provider"
KUBECTL_ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/kubectl-handler"
OIDC_PROVIDER_ARN = f"arn:aws:iam::{ACCOUNT}:oidc-provider/oidc.eks.{REGION}.amazonaws.com/id/EXAMPLE"
HYPERPOD_ROLE_NAME = "hyperpod-execution"
HYPERPOD_CLUSTER_ARN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/abc123"
WORKSPACE_ALIAS = "test-dpd"


@dataclass(frozen=True)
class Alone:
    """A stack of ours built alone: the stack, its template, and the stand-ins it was given."""

    stack: Any
    template: Any
    given: Any


def app() -> cdk.App:
    """An app that stages no asset (the Lambda code and charts keep their hashes; nothing is copied)."""
    return cdk.App(context={"aws:cdk:disable-asset-staging": True})


def env() -> cdk.Environment:
    """:data:`REGION`, environment-agnostic in the account, as every stack of ours."""
    return cdk.Environment(region=REGION)


def stack(scope: cdk.App | None = None, name: str = "Stack") -> cdk.Stack:
    """A bare stack in :func:`env`."""
    return cdk.Stack(scope or app(), name, env=env())


def vpc(scope: Construct) -> ec2.IVpc:
    """The VPC with two private subnets (``PRIVATE_WITH_EGRESS``) in two AZs."""
    return ec2.Vpc.from_vpc_attributes(scope, "Vpc", vpc_id=VPC_ID, vpc_cidr_block=VPC_CIDR,
                                       availability_zones=list(AZS), private_subnet_ids=list(PRIVATE_SUBNETS))


def cluster(scope: Construct, *, in_vpc: ec2.IVpc | None = None) -> eks.ICluster:
    """The EKS cluster :data:`CLUSTER_NAME` with its cluster security group and CDK's kubectl provider (what
    manifests and Helm charts are applied through)."""
    provider = eks.KubectlProvider.from_kubectl_provider_attributes(
        scope, "KubectlProvider", service_token=KUBECTL_SERVICE_TOKEN,
        role=iam.Role.from_role_arn(scope, "KubectlRole", KUBECTL_ROLE_ARN))
    return eks.Cluster.from_cluster_attributes(
        scope, "Eks", cluster_name=CLUSTER_NAME, cluster_security_group_id=CLUSTER_SECURITY_GROUP,
        kubectl_provider=provider, vpc=in_vpc)


def arn(scope: Construct, service: str, resource: str, name: str) -> dict:
    """``arn:<partition>:<service>:<region>:<account>:<resource>/<name>`` as ``scope``'s template holds it (an
    imported cluster's ARN, for one)."""
    this = cdk.Stack.of(scope)
    return this.resolve(this.format_arn(service=service, resource=resource, resource_name=name))


def exported_value(templates: dict[str, Any], value: Any) -> tuple[str, Any]:
    """What an ``{"Fn::ImportValue": name}`` reads: ``(id of the exporting stack, the value of the output exporting
    name)``, found by the export's name in ``templates`` (stack id -> ``Template``), so a test of a cross-stack
    reference names what it refers to, not the hash CDK puts in the export's name."""
    name = value["Fn::ImportValue"]
    found = [(stack_id, output["Value"]) for stack_id, template in templates.items()
             for output in template.find_outputs("*").values() if output.get("Export", {}).get("Name") == name]
    assert len(found) == 1, f"expected one export named {name}, found {found}"
    return found[0]


def given_workspace_attribute(given_template: Any, value: Any) -> str:
    """The attribute (``Arn``, ``WorkspaceId``) of the :class:`Given` workspace that ``{"Fn::ImportValue": ...}``
    reads; fails unless it reads that workspace."""
    (workspace_id,) = given_template.find_resources("AWS::APS::Workspace")
    _, exported = exported_value({"Given": given_template}, value)
    assert exported["Fn::GetAtt"][0] == workspace_id, exported
    return str(exported["Fn::GetAtt"][1])


@dataclass(frozen=True)
class Given:
    """What the other stacks of the app would hand the stack under test; imported, except ``prometheus`` (the
    workspace, a resource of its own) and ``pod_identity_agent`` (an add-on a stack may wait for)."""

    stack: cdk.Stack
    vpc: ec2.IVpc
    gpu_subnet: ec2.ISubnet
    efa_group: ec2.ISecurityGroup
    cluster: eks.ICluster
    oidc_provider: iam.IOidcProvider
    hyperpod_role: iam.IRole
    hyperpod_dependencies: Construct
    """Stands for what the HyperPod cluster waits for (the charts in the cluster stack)."""
    hyperpod_cluster: Construct
    """Stands for the HyperPod cluster a wait starts after."""
    prometheus: ManagedPrometheus
    pod_identity_agent: eks.CfnAddon


def given(scope: cdk.App) -> Given:
    """The stand-ins, in a stack ``Given`` of ``scope``."""
    here = stack(scope, "Given")
    in_vpc = vpc(here)
    eks_cluster = cluster(here, in_vpc=in_vpc)
    return Given(
        stack=here, vpc=in_vpc,
        gpu_subnet=ec2.Subnet.from_subnet_attributes(here, "GpuSubnet", subnet_id=GPU_SUBNET,
                                                     availability_zone=GPU_AZ),
        efa_group=ec2.SecurityGroup.from_security_group_id(here, "EfaGroup", EFA_GROUP),
        cluster=eks_cluster,
        oidc_provider=iam.OidcProviderNative.from_oidc_provider_arn(here, "Oidc", OIDC_PROVIDER_ARN),
        hyperpod_role=iam.Role.from_role_name(here, "HyperPodRole", HYPERPOD_ROLE_NAME),
        hyperpod_dependencies=Construct(here, "HyperPodDependencies"),
        hyperpod_cluster=Construct(here, "HyperPodCluster"),
        prometheus=ManagedPrometheus(here, "Prometheus", props=ManagedPrometheusProps(alias=WORKSPACE_ALIAS)),
        pod_identity_agent=eks.CfnAddon(here, "PodIdentityAgent", addon_name=pins.POD_IDENTITY_AGENT.name,
                                        cluster_name=eks_cluster.cluster_name))


# --- ClusterStack -------------------------------------------------------------------------------------------

KUBERNETES_VERSION = pins.KUBERNETES_VERSION
PUBLIC_ACCESS_CIDRS = ("203.0.113.0/24", "198.51.100.0/24")
SYSTEM_INSTANCE_TYPE = "m7i.2xlarge"
SYSTEM_DESIRED_SIZE = 3
LOG_RETENTION = logs.RetentionDays.TWO_WEEKS
LOG_RETENTION_DAYS = 14
GPU_INSTANCE_TYPES = ("ml.p5en.48xlarge", "ml.p5.48xlarge")
RESILIENCY_SOURCE = f"aws/sagemaker-hyperpod-cli@{pins.HYPERPOD_CHART_COMMIT}"


def _addon(pin: pins.AddonPin) -> AddonVersion:
    return AddonVersion(name=pin.name, version=pin.version)


def _not_fetched(pin: pins.HelmChartPin, artifact: pins.ChartArtifactPin) -> ChartSource:
    """A device-plugin chart as set-up leaves it offline: no verified copy (``directory=None``)."""
    return ChartSource(chart=pin.chart, version=pin.version, directory=None,
                       source=f"{artifact.repository}@{artifact.commit}")


def cluster_stack(scope: cdk.App, name: str, *, given: Given, admin_principal_arn: str | None = None) -> ClusterStack:
    """``ClusterStack`` at the pinned versions, its charts not fetched (as offline), naming no human admin unless
    ``admin_principal_arn``."""
    return ClusterStack(scope, name, env=env(), props=ClusterStackProps(
        eks=EksClusterProps(
            cluster_name=CLUSTER_NAME, kubernetes_version=KUBERNETES_VERSION, vpc=given.vpc,
            control_plane_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            vpc_cni=_addon(pins.VPC_CNI), kube_proxy=_addon(pins.KUBE_PROXY), coredns=_addon(pins.COREDNS),
            pod_identity_agent=_addon(pins.POD_IDENTITY_AGENT),
            log_group_handler_modules=bundle.imported_by(adopted_log_groups.HANDLER_DIR / "index.py"),
            system_instance_type=SYSTEM_INSTANCE_TYPE, system_desired_size=SYSTEM_DESIRED_SIZE,
            endpoint_public_access_cidrs=PUBLIC_ACCESS_CIDRS, log_retention=LOG_RETENTION,
            admin_principal_arn=admin_principal_arn),
        gpu_instance_types=GPU_INSTANCE_TYPES,
        nvidia_device_plugin=_not_fetched(pins.NVIDIA_DEVICE_PLUGIN, pins.NVIDIA_DEVICE_PLUGIN_CHART),
        efa_device_plugin=_not_fetched(pins.EFA_DEVICE_PLUGIN, pins.EFA_DEVICE_PLUGIN_CHART),
        resiliency_charts=tuple(ResiliencyChart(name=c.name, directory=None)
                                for c in pins.HYPERPOD_RESILIENCY_CHART_ARTIFACTS),
        resiliency_source=RESILIENCY_SOURCE))


# --- HyperPodStack ------------------------------------------------------------------------------------------

HYPERPOD_CLUSTER_NAME = "dpd"
LIFECYCLE_BUCKET_NAME = f"sagemaker-dpd-lc-{ACCOUNT}-51af3dc0"
INSTANCE_GROUPS = (
    InstanceGroupSpec(name="prefill", instance_type="ml.p5.48xlarge", instance_count=2, pool="prefill",
                      threads_per_core=1, ebs_volume_size_gb=500,
                      deep_health_checks=("InstanceStress", "InstanceConnectivity")),
    InstanceGroupSpec(name="decode", instance_type="ml.p5en.48xlarge", instance_count=1, pool="decode",
                      threads_per_core=2, ebs_volume_size_gb=1000, deep_health_checks=("InstanceConnectivity",),
                      labels={INSTANCE_GROUP_NODE_LABEL: "decode"}),
)


def hyperpod_stack(scope: cdk.App, name: str, *, given: Given) -> HyperPodStack:
    """``HyperPodStack`` with two groups that differ in every setting (the second one pinned by an endpoint's role:
    it carries its name as a label too), the weights cache on."""
    return HyperPodStack(scope, name, env=env(), props=HyperPodStackProps(
        cluster_name=HYPERPOD_CLUSTER_NAME, node_recovery="Automatic", node_provisioning_mode="Continuous",
        lifecycle_bucket_name=LIFECYCLE_BUCKET_NAME, instance_groups=INSTANCE_GROUPS, eks_cluster=given.cluster,
        vpc=given.vpc, gpu_subnet=given.gpu_subnet, efa_security_group=given.efa_group,
        dependencies=given.hyperpod_dependencies, log_retention=LOG_RETENTION, weights_cache=True))


# --- NetworkStack -------------------------------------------------------------------------------------------

GPU_AZ_ID = "usw2-az2"
CONTROL_PLANE_AZ_IDS = ("usw2-az1", "usw2-az2")


def network_stack(scope: cdk.App, name: str, *, fsx_lustre: bool = False, **network: object) -> NetworkStack:
    """``NetworkStack`` with one NAT, no interface endpoint and the GPU AZ one of the control-plane AZs, unless
    ``network`` (fields of :class:`GpuNetworkProps`) says otherwise."""
    fields: dict = {"vpc_cidr": VPC_CIDR, "gpu_cidr": GPU_CIDR, "gpu_availability_zone_id": GPU_AZ_ID,
                    "control_plane_availability_zone_ids": CONTROL_PLANE_AZ_IDS, "nat_gateways": 1,
                    "interface_endpoints": (), "flow_logs_retention": LOG_RETENTION, **network}
    return NetworkStack(scope, name, env=env(), props=NetworkStackProps(
        network=GpuNetworkProps(**fields), fsx_lustre=fsx_lustre))


# --- ObservabilityAddonStack -------------------------------------------------------------------------------

#: The pools whose nodes the observability add-on waits for.
POOLS = ("prefill", "decode")
SCRAPE_INTERVAL_SECONDS = 30


def observability_addon_stack(scope: cdk.App, name: str, *, given: Given) -> ObservabilityAddonStack:
    """``ObservabilityAddonStack`` writing to the given workspace, after the given pod identity agent and a
    registered node of each of :data:`POOLS`, that wait starting after the given HyperPod cluster."""
    return ObservabilityAddonStack(scope, name, env=env(), props=ObservabilityAddonStackProps(
        cluster=given.cluster, prometheus=given.prometheus,
        metrics_provider=metrics_provider(SCRAPE_INTERVAL_SECONDS), addon_depends_on=(given.pod_identity_agent,),
        wait_for_nodes=tuple(NodeRequirement(label_key=POOL_LABEL, label_value=pool, description=f"pool {pool}")
                             for pool in POOLS),
        wait_after=(given.hyperpod_cluster,), hyperpod_cluster_name=HYPERPOD_CLUSTER_NAME))


# --- PlatformStack ------------------------------------------------------------------------------------------

MODEL_KEY_PREFIX = "models/m/"
DEPLOYMENT_NAME = "team-a"


def platform_stack(scope: cdk.App, name: str, *, given: Given, observability: bool = True,
                   model_bucket: ModelBucketProps | None = None,
                   model_reads: tuple[ModelReadLocation, ...] = (ModelReadLocation(key_prefix=MODEL_KEY_PREFIX),),
                   benchmark_clients: tuple[BenchmarkClientSpec, ...] = ()) -> PlatformStack:
    """``PlatformStack`` for the HyperPod cluster :data:`HYPERPOD_CLUSTER_ARN`, the janitor outside the VPC; one model
    under :data:`MODEL_KEY_PREFIX` and no benchmark client unless ``model_reads``/``benchmark_clients``; a created
    model bucket unless ``model_bucket``; KEDA scoped to the given workspace unless ``observability`` is off."""
    return PlatformStack(scope, name, env=env(), props=PlatformStackProps(
        cluster=given.cluster, oidc_provider=given.oidc_provider, hyperpod_cluster_arn=HYPERPOD_CLUSTER_ARN,
        model_bucket=model_bucket or ModelBucketProps(), model_reads=model_reads,
        hyperpod_execution_role=given.hyperpod_role, prometheus=given.prometheus if observability else None,
        benchmark_clients=benchmark_clients, deployment_name=DEPLOYMENT_NAME))
