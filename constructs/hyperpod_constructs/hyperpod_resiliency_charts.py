"""The HyperPod resiliency components, installed from pinned, verified chart directories shipped as assets."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aws_cdk import Annotations, CfnParameter, CfnRule, CfnRuleAssertion, Duration, Fn, Stack, Token
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from hyperpod_infra.nag import acknowledge

#: Stand-in asset when the charts were not fetched (never deployable: see ``NOT_FETCHED_RULE``).
NOT_FETCHED_DIR = Path(__file__).resolve().parent / "chart_not_fetched"
NOT_FETCHED_RULE = "HyperPodChartsFetched"


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
    commit, file by file, verified by SHA-256 (``hyperpod_infra.artifacts``); here each directory becomes a
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
    fetched: bool

    def __init__(self, scope: Construct, construct_id: str, *, props: HyperPodResiliencyChartsProps) -> None:
        if not props.charts:
            raise ValueError("charts must name at least one sub-chart, got ()")
        seconds = props.timeout.to_seconds()
        if not 60 <= seconds <= 10 * 60:
            raise ValueError(f"timeout must be between 1 and 10 minutes (the kubectl handler has 15), "
                             f"got {seconds:.0f} seconds")
        super().__init__(scope, construct_id)
        missing = [c.name for c in props.charts if c.directory is None]
        self.fetched = not missing
        self.charts = []
        previous: eks.HelmChart | None = None
        for chart in props.charts:
            asset = s3_assets.Asset(self, f"{_camel(chart.name)}Chart",
                                    path=str(chart.directory or NOT_FETCHED_DIR))
            release = eks.HelmChart(
                self, _camel(chart.name), cluster=props.cluster, chart_asset=asset, release=chart.name,
                namespace=props.namespace, values=props.values or None, atomic=False, timeout=props.timeout)
            if previous is not None:
                release.node.add_dependency(previous)
            previous = release
            self.charts.append(release)
        if missing:
            message = (f"HyperPod charts {', '.join(missing)} ({props.source}) were not fetched when this "
                       "template was synthesized; run ./scripts/setup with access to raw.githubusercontent.com "
                       "(or set HYPERPOD_CHART_CACHE), synthesize again, then deploy")
            # CloudFormation evaluates rules before it touches any resource. The parameter only allows "no",
            # and the rule requires "yes": every create and update of this stack fails with the message.
            fetched = CfnParameter(Stack.of(self), NOT_FETCHED_RULE, type="String", default="no",
                                   allowed_values=["no"], description=message[:200])
            CfnRule(Stack.of(self), f"{NOT_FETCHED_RULE}Rule", assertions=[CfnRuleAssertion(
                assert_=Fn.condition_equals(fetched.value_as_string, "yes"), assert_description=message)])
            Annotations.of(self).add_warning_v2("hyperpod:chartsNotFetched", message)
        provider = props.cluster.kubectl_provider
        if provider is not None:  # HelmChart grants the kubectl handler read on the asset bucket
            stack = Stack.of(self)
            region = "<AWS::Region>" if Token.is_unresolved(stack.region) else stack.region
            reason = ("aws_eks_v2.HelmChart grants CDK's kubectl handler read on the CDK asset bucket to fetch "
                      "the chart assets (Asset.grant_read: s3:GetObject*/GetBucket*/List*); not configurable")
            for finding in ("Action::s3:GetObject*", "Action::s3:GetBucket*", "Action::s3:List*",
                            f"Resource::arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-{region}/*"):
                acknowledge(provider, f"AwsSolutions::AwsSolutions-IAM5[{finding}]", reason)


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("-"))
