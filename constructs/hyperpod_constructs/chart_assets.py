"""Helm charts shipped as CDK assets from verified local copies, and what happens when a copy is missing.

The copies are fetched and verified at set-up (``hyperpod_core.artifacts``); constructs only receive a
directory, or ``None`` when set-up could not fetch it (no network). Then the chart's asset is a stand-in
(``chart_not_fetched/``, a README: not upstream content) and :func:`refuse_deploy_without` adds a
CloudFormation rule that fails every create and update of the stack before any resource is touched: such a
template can be checked (tests, cfn-lint, cdk-nag) but never deployed.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from aws_cdk import Annotations, CfnParameter, CfnRule, Fn, Stack, Token
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from hyperpod_constructs.nag import acknowledge

NOT_FETCHED_DIR = Path(__file__).resolve().parent / "chart_not_fetched"
#: Parameter (allowed value "no") and rule (requires "yes") of a stack holding a stand-in chart.
NOT_FETCHED_PARAMETER = "HyperPodChartsFetched"
NOT_FETCHED_RULE = "HyperPodChartsFetchedRule"


def chart_asset(scope: Construct, construct_id: str, directory: Path | None) -> s3_assets.Asset:
    """The chart directory as an asset (zipped by CDK; the kubectl handler unzips it for helm)."""
    return s3_assets.Asset(scope, construct_id, path=str(directory or NOT_FETCHED_DIR))


def refuse_deploy_without(scope: Construct, charts: list[str], source: str) -> None:
    """Make every deploy of ``scope``'s stack fail with a message naming ``charts`` and what to do."""
    stack = Stack.of(scope)
    message = (f"Helm charts {', '.join(charts)} ({source}) were not fetched when this template was "
               "synthesized; run ./scripts/setup with access to raw.githubusercontent.com (or set "
               "HYPERPOD_CHART_CACHE), synthesize again, then deploy")
    rule = stack.node.try_find_child(NOT_FETCHED_RULE)
    if rule is None:
        CfnParameter(stack, NOT_FETCHED_PARAMETER, type="String", default="no", allowed_values=["no"],
                               description="Set-up did not fetch the pinned Helm charts; see the rule's message")
        rule = CfnRule(stack, NOT_FETCHED_RULE)
    assert isinstance(rule, CfnRule)
    parameter = stack.node.find_child(NOT_FETCHED_PARAMETER)
    assert isinstance(parameter, CfnParameter)
    rule.add_assertion(Fn.condition_equals(parameter.value_as_string, "yes"), message)
    Annotations.of(scope).add_warning_v2("hyperpod:chartsNotFetched", message)


def acknowledge_asset_read(cluster: eks.ICluster) -> None:
    """``HelmChart(chart_asset=...)`` grants CDK's kubectl handler read on the CDK asset bucket."""
    provider = cluster.kubectl_provider
    if provider is None or provider.node.try_find_child("HyperPodAssetReadAcknowledged") is not None:
        return
    # Once per provider, however many charts use it (the provider is a Construct at run time).
    Construct(cast(Construct, provider), "HyperPodAssetReadAcknowledged")
    stack = Stack.of(provider)
    region = "<AWS::Region>" if Token.is_unresolved(stack.region) else stack.region
    reason = ("aws_eks_v2.HelmChart grants CDK's kubectl handler read on the CDK asset bucket to fetch the chart "
              "assets (Asset.grant_read: s3:GetObject*/GetBucket*/List*); not configurable")
    for finding in ("Action::s3:GetObject*", "Action::s3:GetBucket*", "Action::s3:List*",
                    f"Resource::arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-{region}/*"):
        acknowledge(provider, f"AwsSolutions::AwsSolutions-IAM5[{finding}]", reason)
