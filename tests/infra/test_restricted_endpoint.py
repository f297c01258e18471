"""The secure posture synthesizes: an EKS API endpoint not open to the internet (config/examples).

Fails on main: with any ``eks.endpoint_public_access_cidrs`` without 0.0.0.0/0 the janitor moved into the
VPC and ``cluster.connections.allow_from`` put its ingress rule into the cluster stack, referencing the
platform stack's group: the cluster stack then depended on the platform stack and synth died with a
DependencyCycle.
"""

from __future__ import annotations

import pytest
from tests.conftest import REPO_ROOT

from hyperpod_core.config import load_config

EXAMPLE = REPO_ROOT / "config" / "examples" / "restricted-endpoint.yaml"


@pytest.fixture(scope="module")
def restricted():
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from hyperpod_infra.app_builder import build

    config = load_config(EXAMPLE)
    app = cdk.App(context={"aws:cdk:disable-asset-staging": True})
    stacks = build(app, config)
    assembly = app.synth()  # raises on a dependency cycle
    return config, stacks, assembly, {s.node.id: Template.from_stack(s) for s in stacks.all()}


def test_example_keeps_the_api_endpoint_off_the_internet(restricted) -> None:
    config, *_ = restricted
    assert "0.0.0.0/0" not in config.eks.endpoint_public_access_cidrs
    assert config.eks.endpoint_public_access_cidrs


def test_it_synthesizes_and_the_cluster_stack_does_not_depend_on_the_platform(restricted) -> None:
    _, stacks, assembly, _ = restricted
    cluster_deps = {d.id for d in assembly.get_stack_by_name(stacks.cluster.stack_name).dependencies}
    assert stacks.platform.artifact_id not in cluster_deps
    assert stacks.cluster in stacks.platform.dependencies


def test_the_janitor_runs_in_the_vpc_and_its_api_rule_lives_in_the_platform_stack(restricted) -> None:
    *_, templates = restricted
    platform, cluster = templates["Platform"], templates["Cluster"]
    rules = platform.find_resources("AWS::EC2::SecurityGroupIngress", {"Properties": {"FromPort": 443}})
    (rule,) = [r for k, r in rules.items() if k.startswith("EndpointJanitor")]
    assert rule["Properties"]["GroupId"]["Fn::ImportValue"]  # the EKS cluster security group, imported
    assert "GetAtt" in str(rule["Properties"]["SourceSecurityGroupId"])
    assert not [k for k in cluster.find_resources("AWS::EC2::SecurityGroupIngress") if "Janitor" in k]
    functions = platform.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": "index.is_complete"}})
    in_vpc = [k for k, f in functions.items() if k.startswith("EndpointJanitor") and "VpcConfig" in f["Properties"]]
    assert not [k for k, f in functions.items() if "EniWaiter" in k and "VpcConfig" in f["Properties"]]
    assert len(in_vpc) == 1


def test_destroy_waits_for_the_janitors_lambda_interfaces_before_deleting_its_group(restricted) -> None:
    """Lambda releases a deleted function's VPC ENIs minutes later; until then the group (and the VPC)
    cannot be deleted (Lambda developer guide, VPC networking). The functions depend on the waiter, the
    waiter on the group: CloudFormation deletes functions -> waits -> group."""
    *_, templates = restricted
    resources = templates["Platform"].to_json()["Resources"]
    (waiter_id,) = [k for k, v in resources.items() if v["Type"] == "Custom::LambdaEniWaiter"]
    group_id = next(k for k, v in resources.items()
                    if v["Type"] == "AWS::EC2::SecurityGroup" and k.startswith("EndpointJanitor"))
    assert resources[waiter_id]["Properties"]["SecurityGroupId"] == {"Fn::GetAtt": [group_id, "GroupId"]}
    for handler in ("index.on_event", "index.is_complete"):
        (fn,) = [v for k, v in resources.items() if k.startswith("EndpointJanitor") and "EniWaiter" not in k
                 and v["Type"] == "AWS::Lambda::Function" and v["Properties"]["Handler"] == handler]
        assert waiter_id in fn["DependsOn"]


def test_every_custom_resource_here_has_a_service_timeout_below_an_hour(restricted) -> None:
    """The restricted posture adds custom resources (ENI waiters, the in-VPC janitor and node wait): the same
    rule as test_service_timeouts.py (aws/aws-cdk#33837) holds for them."""
    *_, templates = restricted
    found = {f"{name}/{k}": v for name, t in templates.items() for k, v in t.to_json()["Resources"].items()
             if v["Type"].startswith("Custom::") or v["Type"] == "AWS::CloudFormation::CustomResource"}
    assert sum(v["Type"] == "Custom::LambdaEniWaiter" for v in found.values()) == 3  # kubectl, janitor, node wait
    assert {k: v["Properties"].get("ServiceTimeout") for k, v in found.items()
            if not 60 <= int(v["Properties"].get("ServiceTimeout", 3600)) < 3600} == {}
