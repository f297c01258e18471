"""Config -> props -> stacks. The only place that reads :class:`Config` on the CDK side.

:func:`synthesize` is the one synth path: ``app.py`` (under the CDK CLI) and the main job (in-process, with the
context :func:`hyperpod_infra.cdk_cli.cli_context` assembles) both call it.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs

from hyperpod_constructs import adopted_log_groups
from hyperpod_constructs.eks_cluster import AddonVersion, EksClusterProps
from hyperpod_constructs.function_log_groups import FunctionLogGroups
from hyperpod_constructs.gpu_network import GpuNetworkProps
from hyperpod_constructs.hyperpod_cluster import POOL_LABEL
from hyperpod_constructs.hyperpod_dependencies import ChartSource
from hyperpod_constructs.hyperpod_resiliency_charts import ResiliencyChart
from hyperpod_constructs.model_bucket import ModelBucketProps, ModelReadLocation
from hyperpod_constructs.node_readiness import NodeRequirement
from hyperpod_constructs.service_timeouts import ServiceTimeouts
from hyperpod_core import artifacts, pins
from hyperpod_core.config import Config
from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.errors import CommandFailed
from hyperpod_core.names import DEPLOYMENT_TAG, INSTANCE_GROUP_NODE_LABEL
from hyperpod_core.telemetry.alertmanager import alert_manager_definition
from hyperpod_core.telemetry.alerts import alert_rule_groups
from hyperpod_core.telemetry.collection import metrics_provider
from hyperpod_core.telemetry.dashboards import dashboards, grafana_uid
from hyperpod_core.telemetry.notices import notices
from hyperpod_core.telemetry.render import render, to_json_text
from hyperpod_infra import bundle
from hyperpod_infra.cdk_cli import METADATA_DEFAULTS
from hyperpod_infra.nag import add_nag, write_findings_report
from hyperpod_infra.stacks.cluster_stack import ClusterStack, ClusterStackProps
from hyperpod_infra.stacks.hyperpod_stack import HyperPodStack, HyperPodStackProps, InstanceGroupSpec
from hyperpod_infra.stacks.network_stack import NetworkStack, NetworkStackProps
from hyperpod_infra.stacks.observability_addon_stack import ObservabilityAddonStack, ObservabilityAddonStackProps
from hyperpod_infra.stacks.observability_stack import GrafanaDelivery, ObservabilityStack, ObservabilityStackProps
from hyperpod_infra.stacks.platform_stack import BenchmarkClientSpec, PlatformStack, PlatformStackProps


def retention(days: int) -> logs.RetentionDays:
    """CloudWatch retention enum for a day count the config already restricted to valid values."""
    return next(r for r in logs.RetentionDays if _days(r) == days)


def _days(r: logs.RetentionDays) -> int:
    return {"ONE_DAY": 1, "THREE_DAYS": 3, "FIVE_DAYS": 5, "ONE_WEEK": 7, "TWO_WEEKS": 14,
            "ONE_MONTH": 30, "TWO_MONTHS": 60, "THREE_MONTHS": 90, "SIX_MONTHS": 180,
            "ONE_YEAR": 365}.get(r.name, -1)


def _addon(pin: pins.AddonPin) -> AddonVersion:
    return AddonVersion(name=pin.name, version=pin.version)


def _chart(pin: pins.HelmChartPin, artifact: pins.ChartArtifactPin, cache: Path | None) -> ChartSource:
    return ChartSource(chart=pin.chart, version=pin.version, directory=artifacts.verified_chart_dir(artifact, cache),
                       source=f"{artifact.repository}@{artifact.commit}")


#: The last part of the Grafana uids of the deployment's AMP data source and of its dashboards' folder
#: (:func:`grafana_delivery`); dashboards' uids have three parts, so neither is ever one of theirs.
GRAFANA_DATASOURCE = "amp"
GRAFANA_FOLDER = "folder"
#: S3 bucket names: 3-63 characters (S3 user guide, "General purpose bucket naming rules").
BUCKET_NAME_MAX = 63
#: The first block of a CloudFormation stack's UUID: 8 hex digits.
STACK_UUID_HEAD_LENGTH = 8


def lifecycle_bucket_name(config: Config) -> str:
    """``sagemaker-<name>-lc-<account>-<stack UUID head>``.

    ``sagemaker-``: ``AmazonSageMakerClusterInstanceRolePolicy`` reads only ``arn:aws:s3:::sagemaker-*`` buckets
    (its ``DataRetrievalFromS3BucketPermissions``; our execution role's policy grants the read of the scripts
    too). The account keeps two accounts' names apart. The first block of the HyperPod stack's UUID, from its
    stack ID, as the operator's role ``SageMakerHyperPodInference-<stack UUID head>`` has it: the same on every
    synth and for the stack's whole life, new with every new stack, and unknown before the stack exists, so
    nobody can create the bucket ahead of a deploy or take the name over after a destroy. When ``name`` does not
    fit the 63 characters it is shortened and followed by a hash of the whole name, so two deployments whose
    names share a prefix still differ."""
    name = config.name.lower()
    room = (BUCKET_NAME_MAX - len("sagemaker-") - len("-lc-") - 12 - 1  # 12: the account ID
            - STACK_UUID_HEAD_LENGTH)
    if len(name) > room:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        name = f"{name[:room - 9].rstrip('-')}-{digest}"
    stack_uuid_head = cdk.Fn.select(0, cdk.Fn.split("-", cdk.Fn.select(2, cdk.Fn.split("/", cdk.Aws.STACK_ID))))
    return f"sagemaker-{name}-lc-{cdk.Aws.ACCOUNT_ID}-{stack_uuid_head}"


def _alerts(config: Config) -> dict[str, Any]:
    """ObservabilityStackProps fields that deliver the alerts: the alert manager definition (to the stack's
    topic and ``observability.alerts.topic_arn``) and the e-mail subscriptions."""
    a = config.observability.alerts
    return {"alert_manager_definition": lambda arns: alert_manager_definition(config.region, arns),
            "alert_emails": a.email_addresses, "alert_topic_arns": (a.topic_arn,) if a.topic_arn else ()}


def grafana_delivery(config: Config) -> GrafanaDelivery | None:
    """Where ``observability.grafana_workspace`` takes the dashboards; none when it is not set.

    The data source (``<name>_amp``) and the folder (``<name>_folder``, titled ``<folder> (<name>)``) are the
    deployment's own, so that deployments share a workspace. Their uids come from
    :func:`hyperpod_core.telemetry.dashboards.grafana_uid`, which joins with ``_``, so they are never the hyphenated
    uids of before (``hyperpod-dpd-amp`` and folder ``hyperpod-dpd``, later ``<name>-amp`` and ``<name>``) that a
    deployment not yet upgraded still writes into the same workspace. (A shortened one, of a name of 34 characters or
    more, has no ``_`` left; it could meet an old shortened uid only if 8 hex digits of two SHA-256 digests agree.)"""
    g = config.observability.grafana_workspace
    if g is None:
        return None
    # Each dashboard under the uid its definition gives it (hyperpod_core.telemetry.dashboards), never one made here.
    return GrafanaDelivery(
        workspace_id=g.workspace_id, datasource_uid=grafana_uid(config.name, GRAFANA_DATASOURCE),
        folder_uid=grafana_uid(config.name, GRAFANA_FOLDER), folder_title=f"{g.folder} ({config.name})",
        dashboards={d.uid: to_json_text(render(d)) for s in config.specs() for d in dashboards(s)})


@dataclass(frozen=True)
class Stacks:
    network: NetworkStack
    cluster: ClusterStack
    hyperpod: HyperPodStack
    platform: PlatformStack
    observability: ObservabilityStack | None = None
    """``None`` when ``observability.enabled`` is false."""
    observability_addon: ObservabilityAddonStack | None = None
    """``None`` when ``observability.enabled`` is false."""

    def all(self) -> list[cdk.Stack]:
        """Every stack, in an order that respects the dependencies (``deploy --concurrency`` runs the
        independent ones side by side: the observability stack with the network, the platform with the
        observability add-on; docs/deploy.md, "Critical path")."""
        optional = [self.observability] if self.observability is not None else []
        last = [self.observability_addon] if self.observability_addon is not None else []
        return [self.network, *optional, self.cluster, self.hyperpod, self.platform, *last]


def _model_read(spec: EndpointSpec) -> ModelReadLocation:
    """Where the endpoint's weights are: its ``model.s3_prefix`` in the deployment's bucket, or in its own
    ``model.bucket`` (with ``model.kms_key_arn``)."""
    m = spec.model
    return ModelReadLocation(key_prefix=m.s3_prefix, bucket_name=m.bucket, kms_key_arn=m.kms_key_arn)


def _benchmark_client(spec: EndpointSpec) -> BenchmarkClientSpec:
    """The endpoint's benchmark Jobs' ServiceAccount, its model and, with ``benchmark.results_s3_uri``, where they
    write."""
    uri = spec.benchmark_results_uri()
    bucket, _, prefix = uri.removeprefix("s3://").partition("/") if uri else (None, "", "")
    # The runner writes <prefix>/<mode>/<run>/<file> with the prefix's slashes stripped
    # (hyperpod_runtime.bench_runner.publish); the prefix ends in the endpoint's name, so one endpoint's Jobs never
    # write another's results.
    return BenchmarkClientSpec(endpoint_name=spec.name, namespace=spec.namespace,
                               service_account=spec.names.benchmark_resource, model_reads=(_model_read(spec),),
                               results_bucket=bucket, results_prefix=prefix.strip("/"))


def build(app: cdk.App, config: Config, *, chart_cache: Path | None = None) -> Stacks:
    """Instantiate every stack for ``config``. Stacks are environment-agnostic in the account, so synth never
    looks anything up; the region is fixed so ARNs and service principals resolve. ``chart_cache``: where
    set-up put the pinned HyperPod charts (default: ``$HYPERPOD_CHART_CACHE`` or ``.cache/charts``)."""
    network = _network_stack(app, config)
    # The workspace, its alert rules and dashboards need nothing of the other stacks: it deploys alongside the
    # network, and what the platform takes from it (the workspace) is ready long before it is needed.
    observability = _observability_stack(app, config) if config.observability.enabled else None
    cluster = _cluster_stack(app, config, network, chart_cache)
    hyperpod = _hyperpod_stack(app, config, network, cluster)
    observability_addon = None
    if observability is not None:
        observability_addon = _observability_addon_stack(app, config, network, cluster, hyperpod, observability)
    platform = _platform_stack(app, config, network, cluster, hyperpod, observability)
    stacks = Stacks(network=network, cluster=cluster, hyperpod=hyperpod, platform=platform,
                    observability=observability, observability_addon=observability_addon)
    for stack in stacks.all():  # every custom resource, ours and aws-cdk-lib's: ServiceTimeout < 1 hour
        cdk.Aspects.of(stack).add(ServiceTimeouts())
        # every function, aws-cdk-lib's included, logs into a group of its stack with a retention
        cdk.Aspects.of(stack).add(FunctionLogGroups(retention(config.eks.log_retention_days)))
    return stacks


_S = TypeVar("_S", bound=cdk.Stack)


def _stack(stack: Callable[..., _S], app: cdk.App, config: Config, construct_id: str, name_suffix: str, *,
           description: str, props: object) -> _S:
    """One stack of the deployment: named ``<name>-<name_suffix>``, in the config's region (and any account),
    tagged with the project and the deployment."""
    return stack(app, construct_id, stack_name=f"{config.name}-{name_suffix}",
                 description=f"HyperPod DPD: {description}", props=props, env=cdk.Environment(region=config.region),
                 tags={"project": "hyperpod-dpd", DEPLOYMENT_TAG: config.name})


def _kube_api_vpc(config: Config, network: NetworkStack) -> ec2.IVpc | None:
    """Where our Lambdas call the Kubernetes API from: inside the VPC unless the public endpoint is open to all."""
    return None if "0.0.0.0/0" in config.eks.endpoint_public_access_cidrs else network.vpc


def _network_stack(app: cdk.App, config: Config) -> NetworkStack:
    n = config.network
    props = NetworkStackProps(
        network=GpuNetworkProps(
            vpc_cidr=n.vpc_cidr, gpu_cidr=n.gpu_cidr, gpu_availability_zone_id=n.gpu_availability_zone_id,
            control_plane_availability_zone_ids=n.control_plane_availability_zone_ids,
            nat_gateways=n.nat_gateways, interface_endpoints=n.interface_endpoints,
            flow_logs_retention=retention(n.flow_logs_retention_days)),
        fsx_lustre=n.fsx_lustre)
    return _stack(NetworkStack, app, config, "Network", "network", props=props,
                  description="VPC, single-AZ GPU subnet, EFA security group")


def _observability_stack(app: cdk.App, config: Config) -> ObservabilityStack:
    props = ObservabilityStackProps(
        workspace_alias=config.name,
        # The same alert definitions as the PrometheusRule manifest (hyperpod_core.telemetry), and the alert
        # manager that sends them to a person (SNS).
        alert_rule_groups=alert_rule_groups(config.specs()), **_alerts(config),
        # The same dashboards as the sidecar ConfigMaps, into Amazon Managed Grafana when configured.
        grafana=grafana_delivery(config))
    return _stack(ObservabilityStack, app, config, "Observability", "observability", props=props,
                  description="Amazon Managed Prometheus workspace, alert rules and alert manager, dashboards")


def _cluster_stack(app: cdk.App, config: Config, network: NetworkStack, chart_cache: Path | None) -> ClusterStack:
    e = config.eks
    props = ClusterStackProps(
        eks=EksClusterProps(
            cluster_name=e.cluster_name, kubernetes_version=e.kubernetes_version, vpc=network.vpc,
            control_plane_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            vpc_cni=_addon(pins.VPC_CNI), kube_proxy=_addon(pins.KUBE_PROXY), coredns=_addon(pins.COREDNS),
            pod_identity_agent=_addon(pins.POD_IDENTITY_AGENT),
            log_group_handler_modules=bundle.imported_by(adopted_log_groups.HANDLER_DIR / "index.py"),
            system_instance_type=e.system_node_group.instance_type,
            system_desired_size=e.system_node_group.desired_size,
            endpoint_public_access_cidrs=e.endpoint_public_access_cidrs,
            log_retention=retention(e.log_retention_days), admin_principal_arn=e.admin_principal_arn),
        gpu_instance_types=tuple(sorted({g.instance_type for g in config.hyperpod.instance_groups})),
        nvidia_device_plugin=_chart(pins.NVIDIA_DEVICE_PLUGIN, pins.NVIDIA_DEVICE_PLUGIN_CHART, chart_cache),
        efa_device_plugin=_chart(pins.EFA_DEVICE_PLUGIN, pins.EFA_DEVICE_PLUGIN_CHART, chart_cache),
        # Verified local copies fetched at set-up; None where absent (synth then marks the templates
        # as not deployable: hyperpod_constructs.hyperpod_resiliency_charts).
        resiliency_charts=tuple(
            ResiliencyChart(name=c.name, directory=artifacts.verified_chart_dir(c, chart_cache))
            for c in pins.HYPERPOD_RESILIENCY_CHART_ARTIFACTS),
        resiliency_source=(f"{pins.HYPERPOD_CHART_REPOSITORY.removeprefix('https://github.com/')}"
                           f"@{pins.HYPERPOD_CHART_COMMIT}"))
    return _stack(ClusterStack, app, config, "Cluster", "cluster", props=props,
                  description="EKS control plane, core add-ons, system nodes, HyperPod dependencies")


def instance_groups(config: Config) -> tuple[InstanceGroupSpec, ...]:
    """``hyperpod.instance_groups`` as the HyperPod stack takes them. A group that some endpoint's role names
    (``instance_group``) also carries ``hyperpod-dpd/instance-group: <group>``, the label that role's nodeSelector
    selects (``EndpointSpec.node_selector``); HyperPod puts it on every node of the group through
    ``ClusterKubernetesConfig.Labels`` (SageMaker API Reference, "ClusterKubernetesConfig"; HyperPod developer guide,
    "Custom Kubernetes labels and taints"). Groups nobody names keep the pool label alone, as before."""
    named = {role.instance_group for spec in config.specs() for role in (spec.endpoint.prefill, spec.endpoint.decode)
             if role.instance_group is not None}
    return tuple(
        InstanceGroupSpec(
            name=g.name, instance_type=g.instance_type, instance_count=g.instance_count, pool=g.pool,
            threads_per_core=g.threads_per_core, ebs_volume_size_gb=g.ebs_volume_size_gb,
            deep_health_checks=g.deep_health_checks, training_plan_arn=g.training_plan_arn,
            labels={INSTANCE_GROUP_NODE_LABEL: g.name} if g.name in named else {})
        for g in config.hyperpod.instance_groups)


def _hyperpod_stack(app: cdk.App, config: Config, network: NetworkStack, cluster: ClusterStack) -> HyperPodStack:
    h = config.hyperpod
    props = HyperPodStackProps(
        cluster_name=h.cluster_name, node_recovery=h.node_recovery, node_provisioning_mode=h.node_provisioning_mode,
        lifecycle_bucket_name=lifecycle_bucket_name(config), instance_groups=instance_groups(config),
        eks_cluster=cluster.cluster, vpc=network.vpc, gpu_subnet=network.gpu_subnet,
        efa_security_group=network.efa_security_group, dependencies=cluster.hyperpod_dependencies,
        log_retention=retention(config.eks.log_retention_days),
        tiered_storage_memory_percent=config.tiered_storage_percent(),
        # Every group's nodes wait for the instance store when any endpoint caches its weights there: every DPD
        # instance type has one (instances.INSTANCE_STORES), and the config accepts no other type for a group.
        weights_cache=any(spec.resolved_model_cache().weights_cache for spec in config.specs()))
    return _stack(HyperPodStack, app, config, "HyperPod", "hyperpod", props=props,
                  description="lifecycle scripts, execution role, HyperPod cluster with P5 instance groups")


def _observability_addon_stack(app: cdk.App, config: Config, network: NetworkStack, cluster: ClusterStack,
                               hyperpod: HyperPodStack, observability: ObservabilityStack) -> ObservabilityAddonStack:
    h = config.hyperpod
    props = ObservabilityAddonStackProps(
        cluster=cluster.cluster, prometheus=observability.prometheus,
        # Every category the add-on offers, on where our queries read it (hyperpod_core.telemetry).
        metrics_provider=metrics_provider(config.observability.scrape_interval_seconds),
        # Pod Identity must run, and the add-on needs a node of 4xlarge or more: the HyperPod nodes, which exist
        # only some time after the HyperPod cluster is "complete" (continuous provisioning): wait until every
        # pool has a registered node (docs/deploy.md). Nothing else waits for this stack.
        addon_depends_on=(cluster.eks.addons[pins.POD_IDENTITY_AGENT.name], hyperpod.hyperpod),
        wait_for_nodes=tuple(
            NodeRequirement(label_key=POOL_LABEL, label_value=pool, description=f"pool {pool}")
            for pool in dict.fromkeys(g.pool for g in h.instance_groups)),
        wait_after=(hyperpod.hyperpod,), hyperpod_cluster_name=h.cluster_name,
        kube_api_vpc=_kube_api_vpc(config, network))
    return _stack(ObservabilityAddonStack, app, config, "ObservabilityAddon", "observability-addon", props=props,
                  description="HyperPod observability add-on, once the GPU nodes have registered")


def _platform_stack(app: cdk.App, config: Config, network: NetworkStack, cluster: ClusterStack,
                    hyperpod: HyperPodStack, observability: ObservabilityStack | None) -> PlatformStack:
    b, specs = config.model_bucket, config.specs()
    props = PlatformStackProps(
        cluster=cluster.cluster, oidc_provider=cluster.eks.oidc_provider,
        hyperpod_cluster_arn=hyperpod.hyperpod.cluster_arn,
        # Bucket name: generated by CloudFormation; the cdk8s app reads it from the outputs file.
        model_bucket=ModelBucketProps(existing_bucket_name=b.existing_name, existing_kms_key_arn=b.existing_kms_key_arn,
                                      delete_on_destroy=b.delete_on_destroy),
        # Every endpoint's model, once: the S3 CSI driver and the nodes read each prefix, never a whole bucket.
        model_reads=tuple(dict.fromkeys(_model_read(spec) for spec in specs)),
        hyperpod_execution_role=hyperpod.execution_role.role,
        prometheus=observability.prometheus if observability is not None else None,
        benchmark_clients=tuple(_benchmark_client(spec) for spec in specs),
        # The janitor calls the Kubernetes API: from inside the VPC unless the public endpoint is open.
        janitor_vpc=_kube_api_vpc(config, network), deployment_name=config.name)
    return _stack(PlatformStack, app, config, "Platform", "platform", props=props,
                  description="model bucket, HyperPod Inference Operator add-on, its dependencies and IAM")


def synthesize(config: Config, *, outdir: Path | None = None, context: dict[str, Any] | None = None,
               announce: bool = True) -> Path:
    """The CDK app of ``config`` (every stack, cdk-nag) synthesized; returns the cloud assembly folder.

    ``outdir``/``context``: ``None`` under the CDK CLI, which hands both over in the environment. Every cdk-nag
    finding with the acknowledgement (and reason) covering it goes to ``<outdir>/nag-findings.json``, from the
    CDK's own validation report of this synth; unacknowledged findings are listed on stderr and fail the synth
    with one line. ``announce``: print where alerts and dashboards go (one ``note:`` line each, stderr) when they
    reach no one (:mod:`hyperpod_core.telemetry.notices`); the main job prints them in its summary instead.
    """
    if announce:
        for line in notices(config.observability):
            print(f"note: {line}", file=sys.stderr)
    app = cdk.App(outdir=None if outdir is None else str(outdir), context={**METADATA_DEFAULTS, **(context or {})})
    build(app, config)
    add_nag(app)
    assembly = Path(app.outdir)
    try:
        app.synth()
    except RuntimeError as exc:
        if "ValidationFailed" not in str(exc):
            raise
        report = write_findings_report(assembly) or {"findings": []}
        open_findings = [f"{f['rule']} at {f['path']}" for f in report["findings"] if f["acknowledged_by"] is None]
        for line in open_findings:
            print(f"  {line}", file=sys.stderr)
        raise CommandFailed(f"cdk-nag: {len(open_findings)} unacknowledged findings (listed above)") from None
    write_findings_report(assembly)
    return assembly
