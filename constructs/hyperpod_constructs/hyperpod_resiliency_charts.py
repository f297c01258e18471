"""The HyperPod resiliency components, installed from pinned, verified chart directories shipped as assets."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from hyperpod_constructs.chart_assets import acknowledge_asset_read, chart_asset, refuse_deploy_without


@dataclass(frozen=True, kw_only=True)
class ResiliencyChart:
    """One sub-chart: its release name and its verified local directory."""

    name: str
    directory: Path | None
    """The chart directory (verified against the pins by the caller). ``None``: not fetched; the template
    then holds a stand-in asset and a rule that fails every deploy."""


@dataclass(frozen=True, kw_only=True)
class HyperPodResiliencyChartsProps:
    """Props of :class:`HyperPodResiliencyCharts`."""

    cluster: eks.ICluster
    """Must have a kubectl provider (it runs helm)."""
    charts: tuple[ResiliencyChart, ...]
    """Installed in this order, each waiting for the previous one."""
    source: str
    """Where the directories come from, for the failure message: ``aws/sagemaker-hyperpod-cli@<commit>``."""
    namespace: str = "kube-system"
    """Namespace of the Helm releases, as AWS's install guide uses. Default: kube-system."""
    values: dict[str, Any] = field(default_factory=dict)
    """Values passed to every chart (``region``). Default: none."""
    timeout: Duration = field(default_factory=lambda: Duration.minutes(5))
    """helm's own ``--timeout``; no ``--wait``. Well under the kubectl handler's 15-minute Lambda.
    Default: 5 minutes."""


class HyperPodResiliencyCharts(Construct):
    """Installs the health-monitoring agent, deep health check, job auto-restart and patching sub-charts.

    AWS publishes these only as local sub-charts of ``helm_chart/HyperPodHelmChart`` in
    aws/sagemaker-hyperpod-cli (no Helm or OCI repository). The set-up step fetches them at a pinned
    commit, file by file, verified by SHA-256 (``hyperpod_core.artifacts``); here each directory becomes a
    CDK asset and an ``aws_eks_v2.HelmChart`` (``chart_asset``) installs it through the cluster's kubectl
    provider. The deploy therefore reaches only AWS APIs (S3 for the asset) and container registries.

    Why not our own Lambda any more (it downloaded the archive from GitHub at deploy time): the kubectl
    provider already has the cluster access helm needs (no second cluster-admin access entry); its
    Provider framework keeps the physical id across updates (a pin bump is ``helm upgrade`` of the same
    releases, never a delete of the "old" resource), ignores a Delete after a failed Create (the framework's
    ``CREATE_FAILED`` marker, so no real uninstall runs), and every custom resource gets a ServiceTimeout
    (:mod:`hyperpod_constructs.service_timeouts`). helm runs without ``--wait`` and with ``timeout``.
    """

    charts: list[eks.HelmChart]

    def __init__(self, scope: Construct, construct_id: str, *, props: HyperPodResiliencyChartsProps) -> None:
        if not props.charts:
            raise ValueError("charts must name at least one sub-chart, got ()")
        seconds = props.timeout.to_seconds()
        if not 60 <= seconds <= 10 * 60:
            raise ValueError(f"timeout must be between 1 and 10 minutes (the kubectl handler has 15), "
                             f"got {seconds:.0f} seconds")
        super().__init__(scope, construct_id)
        missing = [c.name for c in props.charts if c.directory is None]
        self.charts = []
        previous: eks.HelmChart | None = None
        for chart in props.charts:
            asset = chart_asset(self, f"{_camel(chart.name)}Chart", chart.directory)
            release = eks.HelmChart(
                self, _camel(chart.name), cluster=props.cluster, chart_asset=asset, release=chart.name,
                namespace=props.namespace, values=props.values or None, atomic=False, timeout=props.timeout)
            if previous is not None:
                release.node.add_dependency(previous)
            previous = release
            self.charts.append(release)
        if missing:
            refuse_deploy_without(self, missing, props.source)
        acknowledge_asset_read(props.cluster)


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("-"))
