"""What HyperPod needs in the EKS cluster *before* the HyperPod cluster is created.

The HyperPod dependencies chart (``helm_chart/HyperPodHelmChart`` in aws/sagemaker-hyperpod-cli) bundles the
NVIDIA and EFA device plugins (published charts) and the HyperPod resiliency components (health-monitoring
agent, deep health check, job auto-restart, patching; unpublished local sub-charts). This construct installs:

- the two device plugins, from their chart source directories at the commits their published packages
  were made from, through aws_eks_v2 ``HelmChart`` with ``chart_asset``;
- the resiliency sub-charts through :meth:`HyperPodDependencies.add_resiliency_charts`
  (:class:`HyperPodResiliencyCharts`).

Every chart is fetched at set-up at a pinned commit, verified file by file (``hyperpod_core.artifacts``),
and shipped as a CDK asset: the deploy downloads nothing from GitHub (docs/deploy.md).

Nothing of the third-party charts is copied into this repository.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from hyperpod_constructs.chart_assets import acknowledge_asset_read, chart_asset, refuse_deploy_without
from hyperpod_constructs.hyperpod_resiliency_charts import (
    HyperPodResiliencyCharts,
    HyperPodResiliencyChartsProps,
)

#: Taint HyperPod puts on nodes under deep health checks; node agents must still run there.
HEALTH_TAINT_TOLERATION = {
    "key": "sagemaker.amazonaws.com/node-health-status", "operator": "Equal", "value": "Unschedulable",
    "effect": "NoSchedule",
}
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


@dataclass(frozen=True, kw_only=True)
class ChartSource:
    """A chart at an exact version, as a verified local directory."""

    chart: str
    """Chart name, also the Helm release name."""
    version: str
    directory: Path | None
    """The verified chart directory; ``None`` when set-up could not fetch it (the stack then refuses to
    deploy: :func:`hyperpod_constructs.chart_assets.refuse_deploy_without`)."""
    source: str
    """Where the directory comes from (``owner/name@commit``), for messages."""


@dataclass(frozen=True, kw_only=True)
class HyperPodDependenciesProps:
    """Props of :class:`HyperPodDependencies`."""

    cluster: eks.ICluster
    gpu_instance_types: tuple[str, ...]
    """HyperPod instance types (``ml.p5.48xlarge``) the device plugins are scheduled on."""
    nvidia_device_plugin: ChartSource
    efa_device_plugin: ChartSource
    namespace: str = "kube-system"
    """Namespace of the device plugins, as in the HyperPod chart. Default: kube-system."""
    timeout_minutes: int = 5
    """Helm timeout; well under the handler Lambda's 15 minutes (aws-cdk#22257). Default: 5 minutes."""


class HyperPodDependencies(Construct):
    """Everything HyperPod nodes need in the cluster; depend on this construct to be created after all of it."""

    charts: list[eks.HelmChart]

    def __init__(self, scope: Construct, construct_id: str, *, props: HyperPodDependenciesProps) -> None:
        super().__init__(scope, construct_id)
        if not props.gpu_instance_types:
            raise ValueError("gpu_instance_types must name at least one instance type, got ()")
        self.props = props
        types = sorted(set(props.gpu_instance_types))
        on_gpu_nodes = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": types}]}]}}}

        self.nvidia_device_plugin = self._chart("NvidiaDevicePlugin", props.nvidia_device_plugin, {
            # The chart's default affinity needs NFD/GFD labels HyperPod nodes do not carry.
            "affinity": on_gpu_nodes,
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "CriticalAddonsOnly", "operator": "Exists"},
                HEALTH_TAINT_TOLERATION,
            ],
        })
        self.efa_device_plugin = self._chart("EfaDevicePlugin", props.efa_device_plugin, {
            # The chart lists EC2 type names (p5.48xlarge); HyperPod nodes are labelled ml.p5.48xlarge.
            "supportedInstanceLabels": {"keys": [INSTANCE_TYPE_LABEL], "values": types},
            "tolerations": [
                {"key": "aws.amazon.com/efa", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "CriticalAddonsOnly", "operator": "Exists"},
                HEALTH_TAINT_TOLERATION,
            ],
        })
        self.charts = [self.nvidia_device_plugin, self.efa_device_plugin]
        for source in (props.nvidia_device_plugin, props.efa_device_plugin):
            if source.directory is None:
                refuse_deploy_without(self, [source.chart], source.source)
        acknowledge_asset_read(props.cluster)

    def _chart(self, construct_id: str, source: ChartSource, values: dict[str, Any]) -> eks.HelmChart:
        return eks.HelmChart(
            self, construct_id, cluster=self.props.cluster,
            chart_asset=chart_asset(self, f"{construct_id}Chart", source.directory),
            release=source.chart, namespace=self.props.namespace,
            values=values, wait=False, atomic=False, timeout=Duration.minutes(self.props.timeout_minutes))

    def add_resiliency_charts(self, props: HyperPodResiliencyChartsProps) -> HyperPodResiliencyCharts:
        """Install the HyperPod resiliency sub-charts as part of this construct (so dependents wait for them)."""
        self.resiliency_charts = HyperPodResiliencyCharts(self, "ResiliencyCharts", props=props)
        return self.resiliency_charts
