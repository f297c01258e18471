"""The secure posture synthesizes: an EKS API endpoint not open to the internet (config/examples), read from the
config matrix's synthesis of that example (whole-app facts: which stack holds what, and the stacks' order).

Fails on main: with any ``eks.endpoint_public_access_cidrs`` without 0.0.0.0/0 the janitor moved into the
VPC and ``cluster.connections.allow_from`` put its ingress rule into the cluster stack, referencing the
platform stack's group: the cluster stack then depended on the platform stack and synth died with a
DependencyCycle. The janitor in a VPC alone (its group, the rule to the cluster security group, the wait for its
Lambda interfaces): tests/cleanup/test_endpoint_janitor_construct.py.
"""

from __future__ import annotations

import pytest

EXAMPLE = "restricted-endpoint.yaml"


@pytest.fixture(scope="module")
def restricted(synthesize_matrix):
    """The example through the one synth path (``synthesize_matrix`` raises nothing: a crash, a dependency cycle
    among them, fails ``require``)."""
    return synthesize_matrix(EXAMPLE).require()


def _template(restricted, stack: str) -> dict:
    return restricted.templates[f"{restricted.config.name}-{stack}"]["Resources"]


def test_example_keeps_the_api_endpoint_off_the_internet(restricted) -> None:
    cidrs = restricted.config.eks.endpoint_public_access_cidrs
    assert "0.0.0.0/0" not in cidrs
    assert cidrs


def test_it_synthesizes_and_the_cluster_stack_does_not_depend_on_the_platform(restricted) -> None:
    name = restricted.config.name
    assert f"{name}-platform" not in restricted.dependencies[f"{name}-cluster"]
    assert f"{name}-cluster" in restricted.dependencies[f"{name}-platform"]


def test_the_janitor_runs_in_the_vpc_and_its_api_rule_lives_in_the_platform_stack(restricted) -> None:
    platform, cluster = _template(restricted, "platform"), _template(restricted, "cluster")
    rules = {k: r for k, r in platform.items()
             if r["Type"] == "AWS::EC2::SecurityGroupIngress" and r["Properties"].get("FromPort") == 443}
    (rule,) = [r for k, r in rules.items() if k.startswith("EndpointJanitor")]
    assert rule["Properties"]["GroupId"]["Fn::ImportValue"]  # the EKS cluster security group, imported
    assert "GetAtt" in str(rule["Properties"]["SourceSecurityGroupId"])
    assert not [k for k, r in cluster.items() if r["Type"] == "AWS::EC2::SecurityGroupIngress" and "Janitor" in k]
    functions = {k: f for k, f in platform.items()
                 if f["Type"] == "AWS::Lambda::Function" and f["Properties"].get("Handler") == "index.is_complete"}
    in_vpc = [k for k, f in functions.items() if k.startswith("EndpointJanitor") and "VpcConfig" in f["Properties"]]
    assert not [k for k, f in functions.items() if "EniWaiter" in k and "VpcConfig" in f["Properties"]]
    assert len(in_vpc) == 1


def test_every_custom_resource_here_has_a_service_timeout_below_an_hour(restricted) -> None:
    """The restricted posture adds custom resources (ENI waiters, the in-VPC janitor and node wait): the same
    rule as test_service_timeouts.py (aws/aws-cdk#33837) holds for them."""
    found = {f"{name}/{k}": v for name, t in restricted.templates.items() for k, v in t["Resources"].items()
             if v["Type"].startswith("Custom::") or v["Type"] == "AWS::CloudFormation::CustomResource"}
    assert sum(v["Type"] == "Custom::LambdaEniWaiter" for v in found.values()) == 3  # kubectl, janitor, node wait
    assert {k: v["Properties"].get("ServiceTimeout") for k, v in found.items()
            if not 60 <= int(v["Properties"].get("ServiceTimeout", 3600)) < 3600} == {}
